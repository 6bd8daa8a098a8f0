"""The Scheduler: a pool of worker threads over the C core, and the default scheduler.

The extension's Engine (csrc/py/engine.c) owns the pool (it creates it, shuts it down, reads
its counters and frees it) and does everything per task (worker.c). Python starts and joins
the threads, and ends the schedulers nobody closed: one dropped without close() (a weakref
callback as in concurrent.futures, written in C: Engine._dropped) and, in a child process
after fork(), every scheduler made before the fork (os.register_at_fork)."""
from __future__ import annotations

import atexit
import contextvars
import itertools
import os
import sys
import threading
import time
import weakref

from taskgraph._native import core
from taskgraph.errors import BrokenSchedulerError, SchedulerClosedError, TaskgraphError
from taskgraph import runs
from taskgraph._backend import Backend, compute_on
from taskgraph.runs import compute_nodes

__all__ = ["Scheduler", "default_scheduler", "current_scheduler", "use_scheduler",
           "usable_cpus", "scheduler_of_engine"]

# The schedulers made current by `with` blocks, innermost last (per thread and async context).
_current = contextvars.ContextVar("taskgraph_current_schedulers", default=())


class use_scheduler:
    """Makes a scheduler (a Scheduler, or another backend such as taskgraph.dask's) the one
    that compute() and result() use in this thread while the block runs. Nests."""

    def __init__(self, scheduler):
        if not isinstance(scheduler, Backend):
            raise TypeError("use_scheduler needs a taskgraph.Scheduler or a backend such as "
                            f"taskgraph.dask.DaskScheduler, got {type(scheduler).__name__} "
                            f"{scheduler!r:.80}")
        self.scheduler = scheduler

    def __enter__(self):
        _current.set(_current.get() + (self.scheduler,))
        return self.scheduler

    def __exit__(self, *exc):
        stack = _current.get()
        if stack and stack[-1] is self.scheduler:
            _current.set(stack[:-1])

_scheduler_numbers = itertools.count(1)
_JOIN_SLICE = 0.05  # close() joins the workers in slices, so that Ctrl-C interrupts it

#: Default bound on nested helping (docs/design/scheduler.md): joins nested deeper than this
#: on one thread stop stealing and only run their own children or wait.
DEFAULT_MAX_HELP_DEPTH = 100

#: How long the interpreter's exit waits for tasks still running (seconds); then it leaves
#: them (the workers are daemon threads).
EXIT_TIMEOUT = 5.0


def usable_cpus() -> int:
    """CPUs this process may run on (affinity-aware)."""
    f = getattr(os, "process_cpu_count", None)
    if f is not None:
        n = f()
    else:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count()
    return max(1, n or 1)


class Scheduler:
    """A pool of worker threads running task graphs with work stealing.

    ``Scheduler(workers=None, *, max_help_depth=100)``: ``workers`` defaults to the usable
    CPUs; it must be an int >= 1 (``ValueError``/``TypeError`` otherwise). More workers than
    cores is allowed (correct, but no faster). Use as a context manager, or call ``close()``.

    Threads: the workers are daemon threads named ``taskgraph-<n>-w<i>``. ``close()`` stops
    and joins them; creating and closing schedulers leaves no thread behind. A scheduler
    dropped without ``close()`` (garbage collected) shuts down like a ThreadPoolExecutor:
    what was queued is cancelled, and its workers exit on their own once their running tasks
    end (nothing waits for them).

    ``fork()``: in the child process a scheduler made before the fork is closed (its threads
    do not exist there): using it raises ``SchedulerClosedError`` saying so, and nodes of its
    computes that had not finished raise it too when waited for. The default scheduler is made
    anew in the child on first use.
    """

    def __init__(self, workers: int | None = None, *, max_help_depth: int = DEFAULT_MAX_HELP_DEPTH):
        if workers is None:
            workers = usable_cpus()
        if isinstance(workers, bool) or not isinstance(workers, int):
            raise TypeError(f"workers must be an int >= 1, got {workers!r}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if workers > core.MAX_WORKERS:
            raise ValueError(f"workers must be <= {core.MAX_WORKERS}, got {workers}")
        if (isinstance(max_help_depth, bool) or not isinstance(max_help_depth, int)
                or not 0 <= max_help_depth <= core.MAX_HELP_DEPTH):
            raise ValueError(f"max_help_depth must be an int from 0 to {core.MAX_HELP_DEPTH}, "
                             f"got {max_help_depth!r}")
        self.workers = workers
        self.max_help_depth = max_help_depth
        self.number = next(_scheduler_numbers)
        label = f"<taskgraph.Scheduler #{self.number} workers={workers}>"
        # The engine owns the pool: made here, freed when the engine goes, i.e. after this
        # object, every worker thread and every Run let go of it (never under a concurrent
        # compute() or stats()). MemoryError if it cannot be made.
        self._engine = core.Engine(workers, self.number, max_help_depth, label)
        self._close_lock = threading.Lock()
        self._closer = None  # the thread inside _close (its nested calls return at once)
        # The threads hold a weak reference only, so a scheduler nobody closed is collected;
        # its callback (C, never joins) then shuts it down, and the last worker to leave
        # drains the queues. The threads keep the weakref alive (a weakref that dies with its
        # referent, as garbage, would never call back).
        me = weakref.ref(self, self._engine._dropped)
        self._threads = [threading.Thread(target=_worker_main, args=(self._engine, i, me),
                                          name=f"taskgraph-{self.number}-w{i}", daemon=True)
                         for i in range(workers)]
        _by_engine[self._engine] = self
        started = []
        try:
            for th in self._threads:
                th.start()
                started.append(th)
        except BaseException:
            self._threads = started
            self._engine._set_threads(len(started))
            self._engine._dropped(None)  # as if dropped: the started ones leave and drain
            raise
        _live.add(self)

    def __repr__(self):
        state = "closed" if self._engine.closed else "open"
        return f"<taskgraph.Scheduler #{self.number} workers={self.workers} {state}>"

    def __enter__(self):
        """The scheduler is the current one inside the block (``tg.compute`` and
        ``node.result()`` use it in this thread); it is closed when the block ends."""
        use_scheduler(self).__enter__()
        return self

    def __exit__(self, *exc):
        use_scheduler(self).__exit__()
        self.close()

    @property
    def closed(self) -> bool:
        """Whether close() has begun."""
        return self._engine.closed

    @property
    def broken(self) -> str | None:
        """Why the scheduler is broken (an internal failure: a worker thread stopped, storing a
        result or recording a trace failed), or None. A broken scheduler cancelled everything
        it was running (``BrokenSchedulerError``) and refuses new work; close it."""
        return self._engine.broken

    # ------------------------------------------------------------------ public API
    def compute(self, *args, timeout: float | None = None, progress: bool = False):
        """Computes every Node in args (anywhere inside lists, tuples, dicts, sets,
        namedtuples, dataclasses) and returns the args with the Nodes replaced by their values:
        one value for one argument, a tuple for several. A node shared by several consumers
        runs once; nodes finished earlier are not run again.

        * Outside a worker: blocks until done. Ctrl-C cancels everything not started, returns
          within about half a second by re-raising KeyboardInterrupt, and leaves the
          scheduler usable (tasks already running finish in the background).
          ``timeout`` (seconds) is a deadline for the whole compute: when it passes, what has
          not started is cancelled and ``TimeoutError`` is raised (tasks already running
          finish in the background and can check ``tg.cancelled()``). To wait without
          cancelling, use ``node.result(timeout)``.
        * Inside a task of this scheduler: the nodes join the current run and the call joins
          them like ``result()`` (the worker keeps working meanwhile); ``timeout`` is refused
          there (``TaskgraphError``).
        * Inside a task of another scheduler: submits here and waits, blocking that worker.
        * On error: raises the first failure's own exception (original traceback plus a note
          naming the task and worker); everything in the run not started yet is cancelled.
          A node that could not run because of a closed scheduler raises CancelledError.
        * On a closed scheduler: ``SchedulerClosedError``; on a broken one (an internal
          failure) ``BrokenSchedulerError``, also raised by a compute running when it broke.
        * Cancelling: ``node.cancel()`` on one of its nodes (from any thread) stops the whole
          compute: what has not started is cancelled and it raises ``CancelledError``.
        """
        return compute_on(self, args, timeout, progress)

    def stats(self) -> list[dict]:
        """Per-worker counters since the scheduler started: one dict per worker with
        ``worker``, ``tasks_run``, ``spawned``, ``stolen``, ``steal_attempts`` (tries to take from
        another worker's deque), ``injected``, ``parks``, ``looks`` (looks at another worker's
        deque, the tries included). Any thread, inside a task or outside; never raises; works after close()
        (and, in a child process, on a scheduler made before fork()) with the last values."""
        return [dict(worker=i, **dict(zip(core.STAT_NAMES, row)))
                for i, row in enumerate(self._engine.stats())]

    def close(self):
        """Cancels everything not started, waits for the running tasks to finish, stops and
        joins the worker threads. Idempotent; a second caller returns once the first has
        finished closing. On one of its own worker threads (inside one of its tasks, or in a
        done callback or a finalizer a worker runs): TaskgraphError, before anything changes
        (it would wait for itself). Called again by the thread that is closing it (a done
        callback run by the close, which cancels what was queued; a finalizer): returns at
        once, the close under way goes on. After close, compute()
        raises SchedulerClosedError; nodes it finished keep their results; nodes it never
        ran raise CancelledError. Ctrl-C while close() waits for a running task raises
        KeyboardInterrupt at once: the scheduler is closed (nothing new starts) and calling
        close() again finishes the job. Works on a broken scheduler too. In a child process,
        on a scheduler made before fork(): returns at once (it is closed there already)."""
        self._close(None)

    # ------------------------------------------------------------------ internals
    def _on_own_worker(self):
        """Whether this thread is one of its workers (in a task, a done callback, a finalizer;
        also after work() returned, while its thread ends)."""
        return core._worker_engine() is self._engine or threading.current_thread() in self._threads

    def _close(self, timeout):
        if self._on_own_worker():
            node = core.current_node()
            where = (f"inside its own task {node.key}" if node is not None else
                     f"on its own worker thread {threading.current_thread().name} (a done "
                     "callback or a finalizer run by the worker)")
            raise TaskgraphError(f"{self!r}.close() called {where}: it would wait for itself; "
                                 "close it from another thread")
        if self._engine.forked:  # its threads and locks belong to the parent process
            return
        me = threading.get_ident()
        if self._closer == me:  # re-entered by code the close itself runs: it goes on
            return
        if timeout is None:
            self._close_lock.acquire()
        elif not self._close_lock.acquire(timeout=max(0.0, timeout)):
            sys.stderr.write(f"taskgraph: {self!r}: another thread is still closing it at exit; "
                             "leaving it\n")
            return
        self._closer = me
        try:
            self._engine.begin_close(f"{self!r} was closed")
            self._engine.shutdown()
            deadline = None if timeout is None else time.monotonic() + timeout
            for th in self._threads:  # in slices: Ctrl-C is seen at once
                while th.is_alive() and (deadline is None or time.monotonic() < deadline):
                    th.join(_JOIN_SLICE if deadline is None
                            else max(0.0, min(_JOIN_SLICE, deadline - time.monotonic())))
            if any(th.is_alive() for th in self._threads):
                running = [th.name for th in self._threads if th.is_alive()]
                sys.stderr.write(f"taskgraph: {self!r}: tasks still running at exit on "
                                 f"{', '.join(running)}; leaving them\n")
                return
            # Every worker has returned: what is left in the queues is cancelled (drain() acts
            # once: a close interrupted before may not have got here). Their done callbacks
            # run here, on this thread: one that calls close() returns at once (above).
            self._engine.drain()
            _live.discard(self)
        finally:
            self._closer = None
            self._close_lock.release()

    def _check_open(self):
        if self._engine.forked:  # checked first: the engine's lock may be held by a lost thread
            raise SchedulerClosedError(
                f"{self!r} was made before fork(): its worker threads do not exist in this child "
                f"process (pid {os.getpid()}); make a new Scheduler here (the default scheduler "
                "is made anew in the child on its own)")
        broken = self._engine.broken
        if broken is not None:
            raise BrokenSchedulerError(f"{self!r} is broken: {broken}")
        if self._engine.closed:
            raise SchedulerClosedError(f"{self!r} is closed")

    def _worker_stopped(self, index):
        """Worker thread `index` stopped with an error (the engine is broken already): the
        others stop too, and what is left in the queues is cancelled, so that nothing waits
        forever. Runs on the stopped worker's thread."""
        self._engine.shutdown()
        me = threading.current_thread()
        for th in self._threads:
            if th is not me:
                th.join()
        # Every other worker has returned, and this one has returned from work().
        self._engine.drain()

    # ------------------------------------------------------------------ the Backend protocol
    # (_check_open above)
    def _runs_current_task(self):
        return core.current_engine() is self._engine

    def _run(self, nodes, timeout=None, progress=False, cancel_on_timeout=False):
        """Inside one of its tasks: joins the nodes (they join the current run). Else runs
        them as one Run (runs.compute_nodes). Returns the root cause of the first failure."""
        if self._runs_current_task():
            if timeout is not None:
                raise TaskgraphError("compute(timeout=...) inside a task is not supported: a "
                                     "join inside a worker cannot time out")
            if runs.after_fork:
                runs.refuse_nodes_of_runs_before_fork(nodes)
            for n in nodes:
                n.exception()  # joins
            return None
        if core._worker_engine() is self._engine and not all(n.done() for n in nodes):
            # a done callback, a finalizer, a note run by a worker of ours, as no task
            raise TaskgraphError(
                f"a compute on {self!r} from its own worker thread "
                f"{threading.current_thread().name} outside any task (a done callback, a "
                "finalizer or an exception's note run by the worker): the worker would block on "
                "its own scheduler's nodes, which may need it, and could wait forever; add a done "
                "callback instead of waiting (or compute on another scheduler)")
        run = compute_nodes(self, nodes, timeout, progress, cancel_on_timeout)
        return run.error if run is not None else None


def _worker_main(engine, index, ref):
    """A worker thread's life. Running a task never fails, so work() returns only when the pool
    shuts down, unless the worker itself fails (injected in the tests): the scheduler is then
    broken, like a BrokenThreadPool. If the scheduler is gone, its weakref callback has shut
    the pool down: the last worker to leave drains (Engine._worker_exited)."""
    try:
        engine.work(index)
    except BaseException as e:
        engine.break_(f"worker {index} of {engine.label} stopped: {type(e).__name__}: {e}")
        s = ref()
        if s is not None:
            s._worker_stopped(index)
        del s
    finally:
        engine._worker_exited()


# CPython keeps a thread's Python frames on a stack of chunks (16 KiB at first) that it maps
# when a call needs more room and unmaps as soon as the frame that opened a chunk returns.
# A task whose recursion goes to and fro across a chunk's end therefore pays an mmap and a
# munmap per crossing, and with a second worker running, each munmap interrupts the other
# core to flush its TLB: the unbalanced-tree search of benchmarks/inflation.py made 14,722
# unmaps in three runs and ran no faster on 2 workers than on 1 (0.98x; with this, 1.82x).
# Where the boundaries lie depends on how deep a worker happens to be, so any task could hit
# one. The cure: the worker's own bottom frame asks for a frame of 2**16 slots, so CPython
# opens a chunk of 1 MiB for it, of which the frame leaves 512 KiB free above itself; that
# chunk is never unmapped while the worker lives, and every task's frames go above it
# (1,000 nested calls of up to 65 slots each fit). Virtual memory only: the frame's own
# slots are never written, and a page is backed only once a task's frames reach it.
# docs/design/native.md, "A worker's frame stack".
_WORKER_FRAME_SLOTS = 1 << 16
_worker_main.__code__ = _worker_main.__code__.replace(co_stacksize=_WORKER_FRAME_SLOTS)


# ---------------------------------------------------------------------- module-level state
_live = weakref.WeakSet()
_by_engine = weakref.WeakValueDictionary()
_default = None
_default_lock = threading.Lock()


def scheduler_of_engine(engine):
    """The Scheduler whose engine this is (None if it is gone)."""
    return _by_engine.get(engine)


def current_scheduler():
    """The scheduler compute() and result() use here: inside a task, the scheduler running it;
    else the innermost ``with`` block's (a Scheduler or a backend such as
    ``taskgraph.dask.DaskScheduler``), else the default one (created on first use). Never
    raises."""
    engine = core.current_engine()
    if engine is not None:
        s = _by_engine.get(engine)
        if s is not None and not s.closed:
            return s
    for s in reversed(_current.get()):
        if not s.closed:
            return s
    return default_scheduler()


def default_scheduler() -> Scheduler:
    """The process-wide scheduler used when none is given (workers = usable CPUs), created on
    first use (again after it was closed) and closed at interpreter exit."""
    global _default
    s = _default
    if s is None or s._engine.closed:
        with _default_lock:
            s = _default
            if s is None or s._engine.closed:
                s = _default = Scheduler()
    return s


def _after_fork_in_child():
    """In the child process of a fork(): every scheduler made before it is closed for good
    (its threads do not exist here; their locks and queues may be half-way through a change),
    and the default scheduler is made anew on next use. Nothing of the parent's schedulers is
    joined, drained or shut down here."""
    global _default, _default_lock
    _default_lock = threading.Lock()  # a parent thread may have held it at the fork
    _default = None
    if next(_scheduler_numbers) > 1:  # schedulers were made before the fork
        runs.after_fork = True
    core._after_fork_child()  # every engine still attached to the trace machinery
    for engine in list(_by_engine.keys()):  # and the closed ones too
        engine._mark_forked()
    _live.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_all():
    """At exit: close every open scheduler, waiting at most EXIT_TIMEOUT for running tasks
    (a stuck task must not keep the interpreter from exiting)."""
    deadline = time.monotonic() + EXIT_TIMEOUT
    for s in list(_live):
        try:
            s._close(max(0.0, deadline - time.monotonic()))
        except Exception:  # pragma: no cover - best effort at exit
            pass
