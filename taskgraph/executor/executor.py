"""``taskgraph.Executor``: a ``concurrent.futures.Executor`` on the work-stealing scheduler, for
code written against ``ThreadPoolExecutor``.

Each executor has a Scheduler of its own and one run (an ``Engine`` run held open until
shutdown) that every call joins. The run is not fail-fast: each call's outcome is its own
future's (csrc/py/executor.c). The lifecycle is ThreadPoolExecutor's, on the Scheduler's close
rules (``_Pool``): ``shutdown`` refuses new calls (atomically with any ``submit`` under way),
waits for the calls, then closes the scheduler; on one of the executor's own threads (a call, a
done callback, a finalizer) it never waits for itself; in a child process after ``fork()``
there is nothing of the parent's to wait for. The pool starts at the executor's first use (a
submit, a map, the scheduler property: Executor._start), as ThreadPoolExecutor starts a thread
at a submit. The initializer runs on each worker thread before it takes work (Scheduler's
thread hook), as a plain thread. ``submit`` is written in C (csrc/py/executor.c): it makes
the future and the node of the call and puts the node on the pool: spawned onto the worker's
deque inside one of the executor's own tasks (so a task that waits for a future it submitted
joins it, and nested submits never deadlock), injected anywhere else. ``map``
runs the calls in range tasks split adaptively, with ``tg.map``'s machinery
(taskgraph/_map.py), and yields the results in order (taskgraph/executor/map.py).

The pool outlives the Executor object while it has work: ``_pools`` holds it until its
shutdown has finished (the object's finalizer starts a shutdown without waiting, as a
dropped ThreadPoolExecutor lets its queued work finish). At interpreter exit every pool
finishes its work and closes, before the atexit handlers run (``threading._register_atexit``,
as concurrent.futures does).
"""
from __future__ import annotations

import functools
import itertools
import os
import threading
import time
import weakref
from concurrent import futures as _cf
from concurrent.futures._base import FINISHED, LOGGER as _LOGGER, PENDING, RUNNING
from concurrent.futures.thread import BrokenThreadPool

from taskgraph._native import core
from taskgraph.errors import BrokenSchedulerError
from taskgraph.scheduler import Scheduler, usable_cpus
from taskgraph.executor import future as _future
from taskgraph.executor.future import Future
from taskgraph.executor import map as _executor_map

__all__ = ["Executor", "Future"]

_counter = itertools.count()
_pools = set()          # pools not shut down yet (strong references; see the docstring)
_pools_lock = threading.Lock()
_start_lock = threading.Lock()  # an executor's first use against its shutdown (Executor._start)
_exiting = False        # the interpreter is exiting: no new work (as concurrent.futures)
_WAIT_SLICE = 0.05      # waits for a pool's work in slices: Ctrl-C is seen at once
_WAKE_GRACE = 1.0       # see _Pool._let_idle_workers_start


class _Pool:
    """The workers' side of one Executor: its Scheduler and its held-open run. Lives until
    its work is done after a shutdown, even if the Executor object is gone.

    One lifecycle, on the Scheduler's close rules: release() takes no more calls (after it, a
    submit is refused, and one under way is queued before the run can end: csrc/py/
    executor.c's refusing()); finish() waits for the run, then closes the scheduler (which
    refuses to close from its own threads, and returns at once in a forked child). What may
    run on one of its own threads (a call, a done callback, a finalizer: on_own_thread())
    never waits for the pool."""

    def __init__(self, workers, prefix, initializer=None, initargs=(), spares=None):
        self.broken = None      # why an initializer broke the pool (BrokenThreadPool's words)
        self.lock = threading.Lock()
        self.released = False
        self.closer = None
        self.run = None         # set under the lock: an initializer may fail before (break_)
        init = None
        if initializer is not None:
            init = functools.partial(_init_thread, weakref.ref(self), initializer, initargs)
        # spare threads run the initializer too, before their first call
        self.sched = Scheduler(workers, spares=spares, _thread_prefix=prefix or None,
                               _thread_init=init)
        self.engine = self.sched._engine
        run = self.engine.new_run()
        core._exec_hold(run)
        with self.lock:
            self.run = run
            broken = self.broken
        with _pools_lock:
            _pools.add(self)
        if broken is not None:
            self.break_(broken)

    def forked(self):
        """Whether this is a child process of a fork() made after the pool was: its threads
        and locks are the parent's (nothing is released, waited for or closed here)."""
        return self.engine.forked

    def on_own_thread(self):
        """Whether this thread is one of the pool's workers (in a call, a done callback, a
        finalizer it runs): a wait for the pool there would wait for itself."""
        return self.sched._on_own_worker()

    def release(self, cancel=None, error=None):
        """Takes no more work: lets go of the run's hold, so that the run ends once its
        calls are done; with cancel (the reason, a str), calls not started never run (their
        futures are cancelled, or fail with BrokenThreadPool when error is one). Idempotent."""
        if self.forked():
            return
        with self.lock:
            if cancel:
                if error is None:
                    self._let_idle_workers_start()
                self.run.cancel(cancel, error)
            if not self.released:
                self.released = True
                core._exec_release(self.run)

    def break_(self, reason):
        """An initializer failed (ThreadPoolExecutor's _initializer_failed): the pool is
        broken, submit raises BrokenThreadPool, calls not started fail with it."""
        with self.lock:
            if self.broken is None:
                self.broken = reason
            ready = self.run is not None  # else the constructor breaks it once it has a run
        if ready:
            self.release(reason, BrokenThreadPool(reason))

    def _let_idle_workers_start(self):
        """Before a cancel: calls queued while a worker sat idle count as started, as with
        ThreadPoolExecutor, whose idle threads take them at once. A parked worker being woken
        for them gets a moment to take them (at most _WAKE_GRACE seconds)."""
        deadline = time.monotonic() + _WAKE_GRACE
        while (self.engine.sleeping() and self.engine.queued()
               and time.monotonic() < deadline):
            time.sleep(0.0002)

    def finish(self):
        """Waits until every call has finished, then closes the scheduler (its threads are
        joined), and joins the background closer if there is one (no thread of the pool is
        left when shutdown(wait=True) returns). Not from one of its own threads; at once in a
        forked child."""
        if not self.forked():
            while not self.run.wait(_WAIT_SLICE):
                pass
            self.sched.close()
            closer = self.closer
            if closer is not None and closer is not threading.current_thread():
                while closer.is_alive():  # in slices: Ctrl-C is seen at once
                    closer.join(_WAIT_SLICE)
        with _pools_lock:
            _pools.discard(self)

    def finish_in_background(self):
        """finish() on a thread of its own (shutdown(wait=False), a dropped Executor, a
        shutdown on one of its own threads)."""
        if self.forked():
            return
        with self.lock:
            if self.closer is not None or self.sched.closed:
                return
            self.closer = threading.Thread(target=self.finish, daemon=True,
                                           name=f"taskgraph-executor-closer-{self.sched.number}")
            self.closer.start()


def _init_thread(ref, initializer, initargs, index):
    """A worker thread's start (Scheduler's thread hook, before it takes work):
    initializer(*initargs) as on a plain thread; if it raises, logged as ThreadPoolExecutor
    logs it, and the pool is broken."""
    try:
        initializer(*initargs)
    except BaseException:  # noqa: BLE001 - reported as the executor being broken
        _LOGGER.critical("Exception in initializer:", exc_info=True)
        pool = ref()
        if pool is not None:
            pool.break_("A thread initializer failed, the thread pool is not usable anymore")


def _drop(pool):
    """The Executor object was collected without shutdown(): its work finishes, then the
    pool closes (ThreadPoolExecutor's workers also finish their queue and exit)."""
    if _exiting:
        return  # _python_exit finishes every pool
    pool.release()
    pool.finish_in_background()


class Executor(_cf.Executor):
    """A ``concurrent.futures.Executor`` on taskgraph's work-stealing scheduler: a drop-in for
    ``ThreadPoolExecutor`` (docs/api.md, "taskgraph.Executor").

    ``max_workers``: the number of worker threads, an int >= 1 (default: ``tg.usable_cpus()``;
    ``ValueError("max_workers must be greater than 0")`` for 0 or less, as the standard ones,
    ``TypeError`` for a non-int): the calls that compute run on these. Calls that wait (I/O,
    sleeps, locks, ``tg.blocking()``) do not hold them: while a call waits, a spare thread
    runs the queued calls, up to ``spares`` extra threads (default 128; 0 for
    ``max_workers=1``, which runs one call at a time as ``ThreadPoolExecutor(1)`` does), which
    end after half a second with nothing to do (docs/api/waiting.md).
    ``thread_name_prefix`` names the threads
    ``<prefix>_<i>`` (default ``taskgraph-<n>-w<i>``); they start at the first use (a
    ``submit``, a ``map``, reading ``scheduler``), as ThreadPoolExecutor's start at submits:
    making an executor starts nothing. ``initializer(*initargs)`` runs once on each worker
    thread before that thread takes any call, as ThreadPoolExecutor runs it (the first submit
    does not wait for it; it runs as on a plain thread: a compute or a lazy node's
    ``result()`` in it runs on the scheduler its creator saw, never waits for this pool); if it
    raises, the error is logged (``concurrent.futures``' logger, as ThreadPoolExecutor logs
    it) and the executor is broken: ``submit`` and ``map`` raise
    ``concurrent.futures.thread.BrokenThreadPool``, and calls not started fail with it.
    """

    # What submit (C) reads per call, as slots: a member descriptor's read, or (_shutdown)
    # one pointer compared (csrc/py/executor.c's executor_submit).
    __slots__ = ("_run", "_shutdown")

    def __init__(self, max_workers=None, thread_name_prefix="", initializer=None, initargs=(),
                 *, spares=None):
        if max_workers is None:
            max_workers = usable_cpus()
        else:
            if isinstance(max_workers, bool) or not isinstance(max_workers, int):
                raise TypeError(f"max_workers must be an int or None, got "
                                f"{type(max_workers).__name__} {max_workers!r:.80}")
            if max_workers <= 0:
                raise ValueError("max_workers must be greater than 0")
            if max_workers > core.MAX_WORKERS:
                raise ValueError(f"max_workers must be <= {core.MAX_WORKERS}, got {max_workers}")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        if not isinstance(thread_name_prefix, str):
            raise TypeError(f"thread_name_prefix must be a str, got {thread_name_prefix!r:.80}")
        self._max_workers = max_workers
        self._number = next(_counter)
        # The pool (its Scheduler, threads and run) starts at the first use (_start), as a
        # ThreadPoolExecutor starts a thread at a submit: until then nothing runs.
        self._make = (max_workers, thread_name_prefix, initializer, tuple(initargs), spares)
        self._pool = None
        self._run = None
        self._shutdown = False

    def _start(self):
        """The executor's run, its pool started at the first call of this (a submit, a map,
        the scheduler property); None, starting nothing, once shutdown() was called or the
        interpreter is exiting (the caller refuses). csrc/py/executor.c's submit calls it
        while self._run is None."""
        with _start_lock:  # one for every executor: a fork() in the middle leaves none held
            if self._pool is None:
                if self._shutdown or _exiting:
                    return None
                pool = _Pool(*self._make)
                fin = weakref.finalize(self, _drop, pool)
                fin.atexit = False  # _python_exit finishes every pool
                self._pool = pool
                self._run = pool.run
            return self._run

    @property
    def _broken(self):
        """Why the executor is broken (an initializer failed), or None (as ThreadPoolExecutor's
        attribute: CPython's tests read it)."""
        pool = self._pool
        return pool.broken if pool is not None else None

    def __repr__(self):
        state = "broken" if self._broken else "shut down" if self._shutdown else "running"
        return f"<taskgraph.Executor #{self._number} max_workers={self._max_workers} {state}>"

    @property
    def scheduler(self) -> Scheduler:
        """The ``tg.Scheduler`` under this executor (its ``stats()``, ``workers``); closed by
        ``shutdown``. Tasks called inside the executor's calls run on it. Reading it starts the
        executor's threads if no call did yet; ``RuntimeError`` if the executor was shut down
        (or the interpreter began to exit) before its first use: it never had threads."""
        if self._pool is None and self._start() is None:
            why = "was shut down" if self._shutdown else "saw the interpreter exiting"
            raise RuntimeError(f"{self!r} {why} before its first use: it never started a "
                               f"scheduler")
        return self._pool.sched

    # ------------------------------------------------------------------ submit
    # submit(fn, /, *args, **kwargs) is written in C and installed by core._exec_configure
    # (below; csrc/py/executor.c's executor_submit): it returns a new Future for
    # fn(*args, **kwargs). Outside a worker the call is queued for the pool; inside one of
    # this executor's calls it is pushed onto that worker's deque (idle workers steal it), and
    # result() on the future there joins: the worker runs other calls until it is done, so
    # nested submits never deadlock, to any depth. Errors: TypeError if fn is not callable;
    # RuntimeError after shutdown() or once the interpreter is exiting; BrokenThreadPool if an
    # initializer failed (what _refusal returns). Exceptions fn raises go into the future
    # (with a note naming the task and thread). Cancel: future.cancel() before the call
    # starts means it never runs.

    def _refusal(self, cause=None):
        """The exception a refused submit raises (submit chains it to cause)."""
        if self._broken:
            return BrokenThreadPool(self._broken)
        if isinstance(cause, BrokenSchedulerError):
            return BrokenThreadPool(str(cause))
        if self._pool is not None and self._pool.forked():
            return RuntimeError(f"cannot schedule new futures: {self!r} was made before fork(); "
                                f"its threads do not exist in this child process "
                                f"(pid {os.getpid()}): make a new Executor here")
        if _exiting:
            return RuntimeError("cannot schedule new futures after interpreter shutdown")
        return RuntimeError("cannot schedule new futures after shutdown")

    # ------------------------------------------------------------------ map
    def map(self, fn, *iterables, timeout=None, chunksize=1, buffersize=None):
        """``map(fn, *iterables)`` on the pool: an iterator over the results, in order.

        As ``concurrent.futures``: the iterables are read and the calls start when ``map`` is
        called; iterating waits for each result in turn; the exception of a failed call is
        raised when the iteration reaches it (with a note naming the item); ``timeout``
        (seconds from the call) raises ``TimeoutError`` when a result is not ready in time;
        leaving the iteration early (an exception, a timeout, closing the iterator) cancels
        the calls not started. Every call runs even if an earlier one failed.
        ``buffersize`` (as Python 3.14's) submits at most that many calls ahead of the
        iteration, reading the iterables lazily. With no iterable at all it yields nothing,
        as ``concurrent.futures`` does.

        Unlike ThreadPoolExecutor's map, the calls are not one future each: range tasks
        split the input adaptively (``tg.map``'s splitting: only when a worker is idle), so a
        trivial item costs about what a list comprehension does; once a call is seen waiting
        (declared with ``tg.blocking()``, or found by the spares' manager), the calls after it
        become tasks of their own, which wait side by side. ``chunksize`` > 1 cuts the
        input into chunks of that size instead (ThreadPoolExecutor ignores it).

        Inside one of this executor's calls the map runs at once, fork-join on that worker
        (idle workers steal halves), and the returned iterator yields finished results
        (``timeout`` cannot interrupt it there). Errors: ``TypeError`` if ``fn`` is not
        callable, an argument is not iterable, or ``chunksize``/``buffersize`` is not an int;
        ``ValueError`` if either is < 1; ``RuntimeError`` after ``shutdown()`` (when there is
        at least one item).
        """
        return _executor_map.executor_map(self, fn, iterables, timeout, chunksize, buffersize)

    # ------------------------------------------------------------------ shutdown
    def shutdown(self, wait=True, *, cancel_futures=False):
        """Takes no more work (``submit`` raises ``RuntimeError``); idempotent.

        ``wait=True`` returns once every call submitted has finished and the worker threads
        are joined; ``wait=False`` returns at once and the pool closes on its own once its
        work is done. ``cancel_futures=True`` cancels every call that has not started (their
        futures end cancelled); running calls finish (they see ``tg.cancelled()`` turn
        True). A ``submit`` racing with it either raises ``RuntimeError`` or returns a future
        whose call runs. On one of its own threads (inside one of its calls, or in a done
        callback or finalizer a worker runs), ``shutdown(wait=True)`` raises ``RuntimeError``
        after taking no more work (it would wait for itself; ThreadPoolExecutor raises
        ``RuntimeError`` too, "cannot join current thread") and the pool closes on its own
        once its work is done; ``wait=False`` works there. In a child process after
        ``fork()``, on an executor made before it: returns at once (the parent's calls are
        not the child's to wait for; ``submit`` there raises ``RuntimeError``). Ctrl-C while it
        waits raises ``KeyboardInterrupt`` at once; calling it again finishes the job.
        """
        with _start_lock:  # a first use racing with it starts nothing after it
            self._shutdown = True
            pool = self._pool
        if pool is None:  # never used: no thread to wait for
            return
        pool.release("taskgraph.Executor.shutdown(cancel_futures=True) was called before it "
                     "started" if cancel_futures else None)
        if pool.on_own_thread():
            pool.finish_in_background()
            if wait:
                where = ("inside one of its own calls" if core.current_engine() is pool.engine
                         else f"on its own worker thread {threading.current_thread().name} (a "
                              "done callback or a finalizer run by the worker)")
                raise RuntimeError(f"{self!r}.shutdown(wait=True) called {where}: it would "
                                   "wait for itself (use wait=False)")
            return
        if wait:
            pool.finish()
        else:
            pool.finish_in_background()


core._exec_configure(Future, _future._Lock, PENDING, RUNNING, FINISHED, Executor)


def _python_exit():
    """At interpreter exit (before the atexit handlers): no new work; every pool finishes
    what it was given, then closes (as ThreadPoolExecutor's workers finish their queues)."""
    global _exiting
    _exiting = True
    core._exec_exiting()
    with _pools_lock:
        pools = list(_pools)
    for p in pools:
        p.release()
    for p in pools:
        p.finish()


def _after_fork_in_child():
    """In a child process after fork(): the pools' threads do not exist here (their
    schedulers are closed, tg.Scheduler's own hook); nothing is waited for at exit. The locks
    are new: a fork while another thread held one (starting an executor) leaves it held."""
    global _pools_lock, _start_lock
    _pools_lock = threading.Lock()
    _start_lock = threading.Lock()
    _pools.clear()


if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_python_exit)
else:  # pragma: no cover - every supported CPython has it
    import atexit
    atexit.register(_python_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
