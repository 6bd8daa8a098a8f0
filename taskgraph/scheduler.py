"""The Scheduler: a pool of worker threads over the C core, and the default scheduler.

The extension's Engine (csrc/py/engine.c) owns the pool (it creates it, shuts it down, reads
its counters and frees it) and does everything per task (worker.c). Python starts and joins
the threads, and ends the schedulers nobody closed: one dropped without close() (a weakref
callback as in concurrent.futures, written in C: Engine._dropped) and, in a child process
after fork(), every scheduler made before the fork (os.register_at_fork)."""
from __future__ import annotations

import atexit
import itertools
import os
import sys
import threading
import time
import weakref

from taskgraph._native import core, gil_enabled as _gil_enabled
from taskgraph.errors import BrokenSchedulerError, SchedulerClosedError, TaskgraphError
from taskgraph import runs
from taskgraph._backend import Backend, compute_on
from taskgraph.runs import compute_nodes
from taskgraph._threads import _current, _manager_main, _StartedBy, _worker_main

__all__ = ["Scheduler", "default_scheduler", "current_scheduler", "use_scheduler",
           "usable_cpus", "scheduler_of_engine"]

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

#: Default bound on spare workers (docs/api/waiting.md): while tasks wait (declared
#: with ``tg.blocking()``, or found waiting by the scheduler's manager), up to this many extra
#: threads run the queued work, one per waiting task. A one-worker scheduler has none unless
#: asked (it runs one task at a time, as ``ThreadPoolExecutor(1)`` runs one call at a time).
DEFAULT_SPARES = 128

#: Default time (seconds) a spare thread stays alive with nothing to do before it ends.
DEFAULT_SPARE_IDLE = 0.5

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

    ``Scheduler(workers=None, *, max_help_depth=100, spares=None, spare_idle=0.5)``:
    ``workers`` defaults to the usable CPUs; it must be an int >= 1 (``ValueError``/``TypeError``
    otherwise). More workers than cores is allowed (correct, but no faster). Use as a context
    manager, or call ``close()``.

    ``spares``: the most extra threads that run queued work while tasks wait (a task inside
    ``tg.blocking()``, or one the scheduler's manager finds holding its worker without using
    the CPU): default ``DEFAULT_SPARES`` (128), 0 for a one-worker scheduler; 0 turns them off.
    ``spare_idle``: seconds a spare thread waits with nothing to do before it ends (default
    0.5). ``spare_stats()`` counts them.

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

    def __init__(self, workers: int | None = None, *, max_help_depth: int = DEFAULT_MAX_HELP_DEPTH,
                 spares: int | None = None, spare_idle: float = DEFAULT_SPARE_IDLE,
                 _thread_prefix: str | None = None, _thread_init=None):
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
        if spares is None:
            spares = DEFAULT_SPARES if workers > 1 else 0
        if (isinstance(spares, bool) or not isinstance(spares, int)
                or not 0 <= spares <= core.MAX_SPARES):
            raise ValueError(f"spares must be an int from 0 to {core.MAX_SPARES}, got {spares!r}")
        if (isinstance(spare_idle, bool) or not isinstance(spare_idle, (int, float))
                or not 0 <= spare_idle <= 3600):
            raise ValueError(f"spare_idle must be a number of seconds from 0 to 3600, got "
                             f"{spare_idle!r}")
        self.workers = workers
        self.max_help_depth = max_help_depth
        self.spares = spares
        self.number = next(_scheduler_numbers)
        label = f"<taskgraph.Scheduler #{self.number} workers={workers}>"
        # The engine owns the pool: made here, freed when the engine goes, i.e. after this
        # object, every worker thread and every Run let go of it (never under a concurrent
        # compute() or stats()). MemoryError if it cannot be made.
        # With the GIL on, a worker waiting for it would look like a task that waits: the
        # manager then looks for declared waits only.
        self._engine = core.Engine(workers, self.number, max_help_depth, label, spares,
                                   float(spare_idle), not _gil_enabled())
        # The spares' threads (started by the manager thread, which appends them here), and
        # why the OS last refused one (None if it never did).
        self._spare_lock = threading.Lock()
        self._spare_threads = []
        self._spare_prefix = f"{_thread_prefix}_s" if _thread_prefix else f"taskgraph-{self.number}-s"
        self._spare_refused = None
        self._thread_init = _thread_init  # run by each thread first (taskgraph.Executor's initializer)
        self._manager = None
        self._close_lock = threading.Lock()
        self._closer = None  # the thread inside _close (its nested calls return at once)
        # The threads hold a weak reference only, so a scheduler nobody closed is collected;
        # its callback (C, never joins) then shuts it down, and the last worker to leave
        # drains the queues. The threads keep the weakref alive (a weakref that dies with its
        # referent, as garbage, would never call back).
        me = weakref.ref(self, self._engine._dropped)
        # Private, for taskgraph.Executor: the threads' names (<prefix>_<i>), and what each
        # thread runs before it takes any work (_worker_main).
        prefix = _thread_prefix or f"taskgraph-{self.number}-w"
        sep = "_" if _thread_prefix else ""
        self._threads = [threading.Thread(target=_worker_main,
                                          args=(self._engine, i, me, _thread_init),
                                          name=f"{prefix}{sep}{i}", daemon=True)
                         for i in range(workers)]
        _by_engine[self._engine] = self
        started = []
        try:
            for th in self._threads:
                th.start()
                started.append(th)
            if spares:
                self._manager = threading.Thread(target=_manager_main, args=(self._engine, me),
                                                 name=f"taskgraph-{self.number}-manager",
                                                 daemon=True)
                self._manager.start()
        except BaseException:
            self._threads = started
            self._manager = None
            self._engine._set_threads(len(started))
            self._engine._dropped(None)  # as if dropped: the started ones leave and drain
            raise
        _live.add(self)
        _notify(self, "open")

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

    def spare_stats(self) -> dict:
        """The spare workers' counters: ``limit`` (the bound, ``spares``), ``threads`` (spare
        threads alive now), ``peak_threads``, ``on_duty`` (spares running queued work now),
        ``blocked`` (tasks inside ``tg.blocking()`` now), ``stalled`` (tasks the manager found
        waiting at its last look), ``started``, ``retired`` (threads that ended after
        ``spare_idle``), ``failed`` (threads the OS refused: the work then waits for a worker),
        ``stalls`` (looks that found tasks waiting undeclared), ``activations`` (times a spare
        went on duty), ``yields`` (times a worker back from a wait left its core to a spare on
        duty until one left), and ``refused``: why the OS last refused a thread, or None. Any thread,
        after close() too."""
        d = self._engine.spare_stats()
        d["refused"] = self._spare_refused
        return d

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
            # Twice: a spare the manager started while the first pass joined it is in the
            # second (the manager, joined first, starts none once the pool is shut down).
            for _ in range(2):
                for th in self._every_thread():  # in slices: Ctrl-C is seen at once
                    while th.is_alive() and (deadline is None or time.monotonic() < deadline):
                        th.join(_JOIN_SLICE if deadline is None
                                else max(0.0, min(_JOIN_SLICE, deadline - time.monotonic())))
            if any(th.is_alive() for th in self._every_thread()):
                running = [th.name for th in self._every_thread() if th.is_alive()]
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
        _notify(self, "closed")

    def _every_thread(self):
        """Its threads, in the order close() joins them: the manager first (it starts no
        spare once the pool is shut down), then the spares it started, then the workers."""
        with self._spare_lock:
            spares = list(self._spare_threads)
        return ([self._manager] if self._manager is not None else []) + spares + self._threads

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
        for _ in range(2):  # as in _close: the spares the manager started meanwhile too
            for th in self._every_thread():
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
            core.first_error(nodes)  # joins each, in order, in one C loop
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


# ---------------------------------------------------------------------- module-level state
_live = weakref.WeakSet()
_by_engine = weakref.WeakValueDictionary()
_default = None
_default_lock = threading.Lock()


#: Callables told of schedulers that open (made) and close, as f(scheduler, "open" | "closed"),
#: on the thread that makes or closes them: how taskgraph.dashboard follows the schedulers of
#: the process without this layer importing it. An error in one is printed, not raised.
watchers = []


def _notify(sched, event):
    for f in list(watchers):
        try:
            f(sched, event)
        except Exception as e:  # a watcher must not break making or closing a scheduler
            sys.stderr.write(f"taskgraph: a scheduler watcher failed on {event}: {e!r}\n")


def scheduler_of_engine(engine):
    """The Scheduler whose engine this is (None if it is gone)."""
    return _by_engine.get(engine)


def current_scheduler():
    """The scheduler compute() and result() use here: inside a task, the scheduler running it;
    else the innermost ``with`` block's (a Scheduler or a backend such as
    ``taskgraph.dask.DaskScheduler``), else the default one (created on first use). A thread
    inherits its creator's blocks where the interpreter gives new threads a copy of their
    creator's context (free-threaded 3.14: ``sys.flags.thread_inherit_context``); there a
    thread started inside a task sees the task's scheduler. Never raises."""
    engine = core.current_engine()
    if engine is not None:
        s = _by_engine.get(engine)
        if s is not None and not s.closed:
            return s
    for s in reversed(_current.get()):
        if type(s) is _StartedBy:
            if core._worker_engine() is not None:  # the worker's own mark: not for itself
                continue
            s = s.ref()
            if s is None:
                continue
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
    # The engines first, before a reference is let go here: a scheduler freed in this hook
    # (the default, below) runs its weakref callback, which shuts its pool down, taking the
    # pool's locks, unless its engine is marked as made before the fork; a parent's thread
    # may have held one of them at the fork (the child then hung).
    core._after_fork_child()  # every engine still attached to the trace machinery
    for engine in list(_by_engine.keys()):  # and the closed ones too
        engine._mark_forked()
    _default_lock = threading.Lock()  # a parent thread may have held it at the fork
    _default = None
    if next(_scheduler_numbers) > 1:  # schedulers were made before the fork
        runs.after_fork = True
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
