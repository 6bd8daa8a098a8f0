"""``taskgraph.Executor``: a ``concurrent.futures.Executor`` on the work-stealing scheduler, for
code written against ``ThreadPoolExecutor``.

Each executor has a Scheduler of its own and one run (an ``Engine`` run held open until
shutdown) that every call joins. ``submit`` is written in C (csrc/py/executor.c): it makes
the future and the node of the call and puts the node on the pool: spawned onto the worker's
deque inside one of the executor's own tasks (so a task that waits for a future it submitted
joins it, and nested submits never deadlock), injected anywhere else. ``map``
runs the calls in range tasks split adaptively, with ``tg.map``'s machinery
(taskgraph/_map.py), and yields the results in order (taskgraph/_executor_map.py).

The pool outlives the Executor object while it has work: ``_pools`` holds it until its
shutdown has finished (the object's finalizer starts a shutdown without waiting, as a
dropped ThreadPoolExecutor lets its queued work finish). At interpreter exit every pool
finishes its work and closes, before the atexit handlers run (``threading._register_atexit``,
as concurrent.futures does).
"""
from __future__ import annotations

import itertools
import os
import threading
import time
import weakref
from concurrent import futures as _cf
from concurrent.futures._base import FINISHED, PENDING, RUNNING
from concurrent.futures.thread import BrokenThreadPool

from taskgraph._native import core
from taskgraph.errors import BrokenSchedulerError
from taskgraph.scheduler import Scheduler, usable_cpus
from taskgraph import _executor_future as _future
from taskgraph._executor_future import Future
from taskgraph import _executor_map

__all__ = ["Executor", "Future"]

_counter = itertools.count()
_pools = set()          # pools not shut down yet (strong references; see the docstring)
_pools_lock = threading.Lock()
_exiting = False        # the interpreter is exiting: no new work (as concurrent.futures)
_WAIT_SLICE = 0.05      # waits for a pool's work in slices: Ctrl-C is seen at once
_WAKE_GRACE = 1.0       # see _Pool._let_idle_workers_start


class _Pool:
    """The workers' side of one Executor: its Scheduler and its held-open run. Lives until
    its work is done after a shutdown, even if the Executor object is gone."""

    def __init__(self, workers, prefix):
        self.sched = Scheduler(workers)
        if prefix:  # as ThreadPoolExecutor names its threads
            for i, th in enumerate(self.sched._threads):
                th.name = f"{prefix}_{i}"
        self.engine = self.sched._engine
        self.run = self.engine.new_run()
        core._exec_hold(self.run)
        self.lock = threading.Lock()
        self.released = False
        self.closer = None
        with _pools_lock:
            _pools.add(self)

    def release(self, cancel):
        """Takes no more work: lets go of the run's hold, so that the run ends once its
        calls are done; with cancel, calls not started never run (their futures are
        cancelled). Idempotent."""
        with self.lock:
            if cancel:
                self._let_idle_workers_start()
                self.run.cancel("taskgraph.Executor.shutdown(cancel_futures=True) was called "
                                "before it started")
            if not self.released:
                self.released = True
                core._exec_release(self.run)

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
        joined). Not from one of its own workers."""
        while not self.run.wait(_WAIT_SLICE):
            pass
        self.sched.close()
        with _pools_lock:
            _pools.discard(self)

    def finish_in_background(self):
        """finish() on a thread of its own (shutdown(wait=False), a dropped Executor)."""
        with self.lock:
            if self.closer is not None or self.sched.closed:
                return
            self.closer = threading.Thread(target=self.finish, daemon=True,
                                           name=f"taskgraph-executor-closer-{self.sched.number}")
            self.closer.start()


def _drop(pool):
    """The Executor object was collected without shutdown(): its work finishes, then the
    pool closes (ThreadPoolExecutor's workers also finish their queue and exit)."""
    if _exiting:
        return  # _python_exit finishes every pool
    pool.release(False)
    pool.finish_in_background()


class Executor(_cf.Executor):
    """A ``concurrent.futures.Executor`` on taskgraph's work-stealing scheduler: a drop-in for
    ``ThreadPoolExecutor`` (docs/api.md, "taskgraph.Executor").

    ``max_workers``: the number of worker threads, an int >= 1 (default: ``tg.usable_cpus()``;
    ``ValueError("max_workers must be greater than 0")`` for 0 or less, as the standard ones,
    ``TypeError`` for a non-int). ``thread_name_prefix`` names the threads
    ``<prefix>_<i>`` (default ``taskgraph-<n>-w<i>``). ``initializer(*initargs)`` runs once
    on each worker thread before the constructor returns; if it raises, the executor is broken:
    ``submit`` and ``map`` raise ``concurrent.futures.thread.BrokenThreadPool``.
    """

    # What submit (C) reads per call, as slots: a member descriptor's read, or (_shutdown)
    # one pointer compared (csrc/py/executor.c's executor_submit).
    __slots__ = ("_run", "_shutdown")

    def __init__(self, max_workers=None, thread_name_prefix="", initializer=None, initargs=()):
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
        self._pool = pool = _Pool(max_workers, thread_name_prefix)
        self._run = pool.run
        self._shutdown = False
        self._broken = None
        fin = weakref.finalize(self, _drop, pool)
        fin.atexit = False  # _python_exit finishes every pool
        if initializer is not None:
            self._initialize(initializer, initargs)

    def __repr__(self):
        state = "broken" if self._broken else "shut down" if self._shutdown else "running"
        return f"<taskgraph.Executor #{self._number} max_workers={self._max_workers} {state}>"

    @property
    def scheduler(self) -> Scheduler:
        """The ``tg.Scheduler`` under this executor (its ``stats()``, ``workers``); closed by
        ``shutdown``. Tasks called inside the executor's calls run on it."""
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
        iteration, reading the iterables lazily.

        Unlike ThreadPoolExecutor's map, the calls are not one future each: range tasks
        split the input adaptively (``tg.map``'s splitting: only when a worker is idle), so a
        trivial item costs about what a list comprehension does. ``chunksize`` > 1 cuts the
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
        True). Inside one of its own calls, ``shutdown(wait=True)`` raises ``RuntimeError``
        after taking no more work (it would wait for itself); ``wait=False`` works there.
        """
        self._shutdown = True
        pool = self._pool
        pool.release(cancel_futures)
        if core.current_engine() is pool.engine:
            pool.finish_in_background()
            if wait:
                raise RuntimeError(f"{self!r}.shutdown(wait=True) called from inside one of "
                                   "its own calls: it would wait for itself (use wait=False)")
            return
        if wait:
            pool.finish()
        else:
            pool.finish_in_background()

    # ------------------------------------------------------------------ initializer
    def _initialize(self, initializer, initargs):
        """Runs initializer(*initargs) once on every worker: one call per worker, each
        waiting at a barrier until all have started (so no worker takes two)."""
        n = self._max_workers
        barrier = threading.Barrier(n)
        failures = []

        def init_one():
            try:
                initializer(*initargs)
            except BaseException as e:  # noqa: BLE001 - reported as the executor being broken
                failures.append(e)
            finally:
                barrier.wait()

        for f in [self.submit(init_one) for _ in range(n)]:
            f.result()
        if failures:
            self._broken = ("A thread initializer failed, the thread pool is not usable "
                            f"anymore ({type(failures[0]).__name__}: {failures[0]})")
            self.shutdown(wait=True)


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
        p.release(False)
    for p in pools:
        p.finish()


def _after_fork_in_child():
    """In a child process after fork(): the pools' threads do not exist here (their
    schedulers are closed, tg.Scheduler's own hook); nothing is waited for at exit."""
    global _pools_lock
    _pools_lock = threading.Lock()
    _pools.clear()


if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_python_exit)
else:  # pragma: no cover - every supported CPython has it
    import atexit
    atexit.register(_python_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
