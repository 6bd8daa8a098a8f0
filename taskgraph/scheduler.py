"""The scheduler: worker threads over the C pool, runs (one per compute), joins, failures.

Hot paths (``Worker._loop``, ``Worker._run``, ``Worker.spawn``, ``Worker.join``) touch only
the worker's own attributes and the nodes they are handed; cross-thread state goes through
the C core (``csrc/pool.c``). Everything shared and mutable on the Python side (a scheduler's
set of active runs, a run's first error) is behind a documented lock and touched once per run
or once per failure, never per task. Design: docs/design/scheduler.md.
"""
from __future__ import annotations

import atexit
import itertools
import os
import threading
import time
import weakref

from taskgraph import _context
from taskgraph import trace as _trace
from taskgraph._native import ffi, lib
from taskgraph.errors import CancelledError, SchedulerClosedError, TaskgraphError
from taskgraph.node import (ARGS, CANCELLED, DEPS, DONE, FAILED, FN, H, KIDS, KWARGS, NAME,
                            NEW, PARENT, RUN, SCHED, SEEN, ST, T, VAL, Node, deps_of,
                            scan_nodes, substitute)

__all__ = ["Scheduler", "compute", "gather", "serial", "default_scheduler", "usable_cpus",
           "run_serially"]

NULL = ffi.NULL
_TASK = lib.TG_NEXT_TASK
_ENDED = lib.TG_NEXT_ENDED
_JOINED = lib.TG_NEXT_JOINED
_SKIP = lib.TG_NEXT_SKIP
_from_handle = ffi.from_handle
_new_handle = ffi.new_handle
_task_state = lib.tg_task_state
_spawn = lib.tg_spawn
_perf_ns = time.perf_counter_ns
_STAT_NAMES = ("tasks_run", "spawned", "stolen", "steal_attempts", "injected", "parks")
_scheduler_numbers = itertools.count(1)

#: Default bound on nested helping (see Worker.join): joins nested deeper than this on one
#: thread stop stealing and only run their own children or wait.
DEFAULT_MAX_HELP_DEPTH = 100


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


class Run:
    """One compute() call: the tasks it submitted and everything they spawn."""

    __slots__ = ("_c", "event", "roots", "error", "reason", "sched", "lock", "__weakref__")

    def __init__(self, sched, roots):
        self._c = ffi.new("tg_run *")
        self.event = threading.Event()   # set when the run's last task finished
        self.roots = roots               # keeps the run's nodes reachable until it ends
        self.error = None                # first failure of a top-level node (fail fast)
        self.reason = None               # why the run was cancelled, for CancelledError
        self.sched = sched
        self.lock = threading.Lock()     # guards error/reason: taken once per failure

    def cancel(self, reason):
        with self.lock:
            if self.reason is None:
                self.reason = reason
        lib.tg_run_cancel(self._c)

    def record_failure(self, node, exc):
        with self.lock:
            if self.error is None:
                self.error = exc
            if self.reason is None:
                self.reason = f"task {node.key} failed ({type(exc).__name__})"
        lib.tg_run_cancel(self._c)


class Worker:
    """One worker thread. Its attributes are touched only by its own thread, except
    ``sched``/``index`` (read-only). Node slots are used through the names bound as default
    arguments in the hot methods (a local variable costs less than a global on 3.13t)."""

    def __init__(self, sched, index):
        self.sched = sched
        self.index = index
        # A cdata of its own for the pool pointer: passing one shared cdata object from every
        # worker would make all of them bump the same reference count on every C call.
        self.pool = ffi.cast("tg_pool *", sched._pool)
        self.out = ffi.new("void **")
        self.current = None      # the Node whose task this thread is running
        self.depth = 0           # nested joins on this thread
        self.max_depth = sched.max_help_depth
        self.recorder = None     # per-worker trace buffer while tracing (taskgraph.trace)

    def current_key(self):
        return self.current.key if self.current is not None else "?"

    # ------------------------------------------------------------------ the loop
    def main(self):
        _context.set_worker(self)
        try:
            self._loop()
        finally:
            _context.set_worker(None)

    def _loop(self, T=T):
        pool, w, out, step, run = self.pool, self.index, self.out, lib.tg_next, self._run
        from_handle, TASK, SKIP, ENDED = _from_handle, _TASK, _SKIP, _ENDED  # locals: cheaper
        done, final, node = NULL, 0, None
        while True:
            r = step(pool, w, done, final, out)
            if r == TASK:
                node = from_handle(out[0])
                final = run(node) if self.recorder is None else self.recorder.run(self, node)
                done = node[T]
            elif r == SKIP:
                node = from_handle(out[0])
                final = self._skip(node)
                done = node[T]
            elif r == ENDED:
                _run_ended(node)
                done, node = NULL, None
            else:  # TG_NEXT_SHUTDOWN
                return

    def _run(self, node, FN=FN, ARGS=ARGS, KWARGS=KWARGS, DEPS=DEPS, T=T, ST=ST, VAL=VAL, H=H,
             KIDS=KIDS, NAME=NAME, DONE=DONE):
        """Runs (or skips) a node handed out by the C core; returns its final state. The
        value/exception and ST are stored before the C core publishes the final state."""
        node[H] = None  # the core no longer needs the handle: break the node<->handle cycle
        prev = self.current
        self.current = node
        try:
            if node[DEPS]:
                value = node[FN](*substitute(node[ARGS], node[NAME]),
                                 **substitute(node[KWARGS], node[NAME]))
            else:
                value = node[FN](*node[ARGS], **node[KWARGS])
            if node[KIDS] is not None:
                self._sync_children(node, None)
        except BaseException as e:  # the task's own error: delivered to whoever waits
            self.current = prev
            return self._fail(node, e)
        self.current = prev
        node[ARGS] = node[KWARGS] = None   # drop references to inputs: they may be freed now
        node[DEPS] = ()
        node[VAL] = value
        node[ST] = DONE
        return DONE

    # ------------------------------------------------------------------ slow paths
    def _fail(self, node, exc):
        node[ARGS] = node[KWARGS] = None
        node[DEPS] = ()
        node[VAL] = exc
        if node[KIDS] is not None:
            try:
                self._sync_children(node, exc)
            except BaseException:  # pragma: no cover - only SchedulerClosedError at shutdown
                pass
        _note_origin(exc, node, self)
        node[ST] = FAILED
        if node[PARENT] is None:  # a top-level node: fail fast, cancel the rest of the run
            node[RUN].record_failure(node, exc)
        return FAILED

    def _skip(self, node):
        node[H] = None
        node[VAL] = _cancel_error(node)
        rec = self.recorder
        if rec is not None:  # before the inputs are dropped: the record keeps its data edges
            rec.skipped(self, node)
        node[ARGS] = node[KWARGS] = None
        node[DEPS] = ()
        node[ST] = CANCELLED
        return CANCELLED

    def _sync_children(self, node, failing):
        """Implicit join at the end of a task (like Cilk's sync): the task finishes only after
        all the children it spawned. If the task failed, children not started yet are
        cancelled first. A child that failed and whose error nobody observed makes the
        parent fail with that error (no exception is lost)."""
        kids = node[KIDS]
        node[KIDS] = None
        if failing is not None:
            for k in kids:
                if k[ST] is None:
                    lib.tg_task_cancel(k[T])
        unobserved = None
        for k in kids:
            if k[ST] is None:
                self.join(k)
            if unobserved is None and k[ST] != DONE and not k[SEEN]:
                unobserved = k
        if failing is None and unobserved is not None:
            unobserved[SEEN] = True
            raise unobserved[VAL]

    # ------------------------------------------------------------------ spawning and joining
    def spawn(self, node, ARGS=ARGS, KWARGS=KWARGS, DEPS=DEPS, T=T, H=H, RUN=RUN,
              PARENT=PARENT, KIDS=KIDS, SCHED=SCHED, ST=ST, SEEN=SEEN, scan_nodes=scan_nodes,
              new_handle=_new_handle, tg_spawn=_spawn):
        """Pushes a node created inside a running task onto this worker's deque."""
        parent = self.current
        deps = node[DEPS] = scan_nodes(node[ARGS], node[KWARGS])
        if deps:  # it waits for other nodes: wire its edges (slow path)
            self.sched._submit([node], parent[RUN]._c, None, self.index)
            return
        node[SCHED] = self.sched
        node[PARENT] = parent
        run = node[RUN] = parent[RUN]
        kids = parent[KIDS]
        if kids is None:
            parent[KIDS] = [node]
        else:
            kids.append(node)
            n = len(kids)
            if n >= 64 and not n & (n - 1):  # at powers of two: forget finished, seen kids
                parent[KIDS] = [k for k in kids if k[ST] is None or not k[SEEN]]
        h = node[H] = new_handle(node)
        if tg_spawn(self.pool, self.index, node[T], h, run._c) != 1:
            raise MemoryError(f"taskgraph: could not spawn {node.key}")

    def join(self, node, T=T, ST=ST, RUN=RUN):
        """Waits for node inside a task without blocking the thread: runs this worker's own
        children, then (within the nesting bound) stolen work, until node is done."""
        if node[ST] is not None:
            return
        if node is self.current:
            raise TaskgraphError(f"task {node.key} called result() on its own node (it would "
                                 "wait for itself forever)")
        t = node[T]
        if node[SCHED] is None:  # a lazy node built outside, first needed here (a claim that
            # races with another submitter is settled in C: only one claims it)
            self.sched._submit([node], self.current[RUN]._c, None, self.index)
        steal = 1 if self.depth < self.max_depth else 0
        self.depth += 1
        pool, w, out, step, run = self.pool, self.index, self.out, lib.tg_join, self._run
        done, final, n = NULL, 0, None
        rec = self.recorder
        if rec is not None:
            t_join, g_join = _perf_ns(), _trace._gc_ns[0]
        from_handle, TASK, SKIP, JOINED = _from_handle, _TASK, _SKIP, _JOINED  # locals: cheaper
        try:
            while True:
                r = step(pool, w, t, done, final, steal, out)
                if r == TASK:
                    n = from_handle(out[0])
                    final = run(n) if self.recorder is None else self.recorder.run(self, n)
                    done = n[T]
                elif r == SKIP:
                    n = from_handle(out[0])
                    final = self._skip(n)
                    done = n[T]
                elif r == JOINED:
                    return
                elif r == _ENDED:
                    _run_ended(n)
                    done, n = NULL, None
                else:
                    raise SchedulerClosedError(
                        f"{self.sched!r} closed while task {self.current_key()} waited for "
                        f"{node.key}")
        finally:
            self.depth -= 1
            if rec is not None:  # the time inside a join is not the waiting task's own work
                rec.joined(_perf_ns() - t_join, _trace._gc_ns[0] - g_join)


def _run_ended(node):
    """The worker that finished a run's last task tells its waiters (once per run)."""
    run = node[RUN]
    run.event.set()
    run.sched._forget_run(run)


def _note_origin(exc, node, worker):
    """Adds one note naming the task and worker where the exception was raised (not again at
    each parent it propagates through)."""
    try:
        if getattr(exc, "__taskgraph_task__", None) is None:
            exc.__taskgraph_task__ = node.key
            exc.add_note(f"taskgraph: raised by task {node.key} on worker {worker.index} of "
                         f"{worker.sched!r}")
    except (AttributeError, TypeError):  # pragma: no cover - exotic exception objects
        pass


def _cancel_error(node):
    """The CancelledError for a node that is skipped, naming the reason."""
    cause = None
    reason = None
    for d in deps_of(node):
        st = d[ST]
        if st == FAILED or st == CANCELLED:
            reason = f"its dependency {d.key} {'failed' if st == FAILED else 'was cancelled'}"
            cause = d[VAL]
            break
    if reason is None:
        parent = node[PARENT]
        run = node[RUN]
        sched = node[SCHED]
        if parent is not None and parent[ST] is None and parent[VAL] is not None:
            reason = f"its parent task {parent.key} failed"
            cause = parent[VAL]
        elif run is not None and run.reason is not None:
            reason = run.reason
            cause = run.error
        elif sched is not None and sched._closed:
            reason = f"{sched!r} was closed before it ran"
        else:
            reason = "it was cancelled before it started"
    err = CancelledError(f"task {node.key} was cancelled: {reason}")
    err.__cause__ = cause
    return err


class Scheduler:
    """A pool of worker threads running task graphs with work stealing.

    ``Scheduler(workers=None, *, max_help_depth=100)``: ``workers`` defaults to the usable
    CPUs; it must be an int >= 1 (``ValueError``/``TypeError`` otherwise). More workers than
    cores is allowed (correct, but no faster). Use as a context manager, or call ``close()``.

    Threads: the workers are daemon threads named ``taskgraph-<n>-w<i>``. ``close()`` stops
    and joins them; creating and closing schedulers leaves no thread behind.
    """

    def __init__(self, workers: int | None = None, *, max_help_depth: int = DEFAULT_MAX_HELP_DEPTH):
        if workers is None:
            workers = usable_cpus()
        if isinstance(workers, bool) or not isinstance(workers, int):
            raise TypeError(f"workers must be an int >= 1, got {workers!r}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if isinstance(max_help_depth, bool) or not isinstance(max_help_depth, int) or max_help_depth < 0:
            raise ValueError(f"max_help_depth must be an int >= 0, got {max_help_depth!r}")
        self.workers = workers
        self.max_help_depth = max_help_depth
        self.number = next(_scheduler_numbers)
        self._pool = lib.tg_pool_new(workers)
        if self._pool == NULL:
            raise MemoryError(f"taskgraph: could not create a pool of {workers} workers")
        self._lock = threading.Lock()   # guards _runs and _closed; taken per run, not per task
        self._runs = set()              # active runs (kept alive until they end)
        self._closed = False
        self._drained = False
        self._workers = [Worker(self, i) for i in range(workers)]
        self._threads = [threading.Thread(target=wk.main, name=f"taskgraph-{self.number}-w{i}",
                                          daemon=True) for i, wk in enumerate(self._workers)]
        for th in self._threads:
            th.start()
        _live.add(self)
        _trace._registry.scheduler_started(self)

    def __repr__(self):
        state = "closed" if self._closed else "open"
        return f"<taskgraph.Scheduler #{self.number} workers={self.workers} {state}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ public API
    def compute(self, *args, timeout: float | None = None, progress: bool = False):
        """Computes every Node in args (anywhere inside lists, tuples, dicts, sets) and returns
        the args with the Nodes replaced by their values: one value for one argument, a tuple
        for several. A node shared by several consumers runs once; nodes finished earlier
        are not run again.

        * Outside a worker: blocks until done. Ctrl-C cancels everything not started, returns
          within about half a second by re-raising KeyboardInterrupt, and leaves the
          scheduler usable (tasks already running finish in the background).
          ``timeout`` raises ``TimeoutError`` and leaves the work running.
        * Inside a task of this scheduler: the nodes join the current run and the call joins
          them like ``result()`` (the worker keeps working meanwhile).
        * On error: raises the first failure's own exception (original traceback plus a note
          naming the task and worker); everything in the run not started yet is cancelled.
          A node that could not run because of a closed scheduler raises CancelledError.
        * On a closed scheduler: ``SchedulerClosedError``.
        """
        self._check_open()
        nodes = scan_nodes(args)
        w = _context.current_worker()
        if w is not None and w.sched is self:
            if timeout is not None:
                raise TaskgraphError("compute(timeout=...) inside a task is not supported")
            for n in nodes:
                n[SEEN] = True
                w.join(n)
        elif _context.in_serial():
            run_serially(nodes)
        else:
            self._compute_nodes(nodes, timeout, progress)
        for n in nodes:
            n[SEEN] = True
        _raise_first_error(nodes)
        out = substitute(args, "compute")
        return out[0] if len(out) == 1 else out

    def stats(self) -> list[dict]:
        """Per-worker counters since the scheduler started: one dict per worker with
        ``worker``, ``tasks_run``, ``spawned``, ``stolen``, ``steal_attempts``, ``injected``,
        ``parks``. Works after close() too (the last values)."""
        if self._pool == NULL:
            return [dict(s) for s in self._final_stats]
        return self._read_stats()

    def close(self):
        """Cancels everything not started, waits for the running tasks to finish, stops and
        joins the worker threads. Idempotent. Inside one of its own tasks: TaskgraphError.
        After close, compute() raises SchedulerClosedError; nodes it finished keep their
        results; nodes it never ran raise CancelledError."""
        w = _context.current_worker()
        if w is not None and w.sched is self:
            raise TaskgraphError(f"{self!r}.close() called from inside its own task "
                                 f"{w.current_key()}; it would wait for itself")
        with self._lock:
            if self._closed:
                return
            self._closed = True
            runs = list(self._runs)
        for r in runs:
            r.cancel(f"{self!r} was closed")
        lib.tg_pool_shutdown(self._pool)
        for th in self._threads:
            th.join()
        self._drain()
        self._final_stats = self._read_stats()
        lib.tg_pool_free(self._pool)
        self._pool = NULL
        _live.discard(self)

    # ------------------------------------------------------------------ internals
    def _check_open(self):
        if self._closed:
            raise SchedulerClosedError(f"{self!r} is closed")

    def _read_stats(self):
        buf = ffi.new("int64_t[]", lib.TG_NSTATS)
        out = []
        for i in range(self.workers):
            lib.tg_pool_stats(self._pool, i, buf)
            d = {"worker": i}
            d.update(zip(_STAT_NAMES, buf))
            out.append(d)
        return out

    def _forget_run(self, run):
        with self._lock:
            self._runs.discard(run)

    def _compute_nodes(self, nodes, timeout=None, progress=False):
        """Submits the lazy graph under nodes as one run (through the injector) and waits."""
        self._check_open()
        pending = [n for n in nodes if n[ST] is None]
        if not pending:
            return
        run = Run(self, pending)
        with self._lock:
            if self._closed:
                raise SchedulerClosedError(f"{self!r} is closed")
            self._runs.add(run)
        bar = _progress_bar(run) if progress else None  # counters read before anything starts
        lib.tg_run_hold(run._c)
        try:
            total = self._submit(pending, run._c, run, -1)
        except BaseException:
            if bar is not None:
                bar.close()
            run.cancel("the submission was interrupted")
            if lib.tg_run_release(run._c):
                run.event.set()
                self._forget_run(run)
            raise
        if lib.tg_run_release(run._c):
            run.event.set()
            self._forget_run(run)
        if bar is not None:
            bar.set_total(total)
        try:
            _wait_run(run, timeout, bar)
        except KeyboardInterrupt:
            run.cancel("interrupted (KeyboardInterrupt)")
            run.event.wait(0.5)  # give running tasks a moment; never longer
            raise
        finally:
            if bar is not None:
                bar.close()
        for n in pending:  # nodes claimed by another run (a concurrent compute) are awaited here
            if n[ST] is None:
                n._wait_polling(timeout)

    def _submit(self, targets, run_c, run, w):
        """Claims every node of the lazy graph under targets that no run has claimed yet,
        wires its dependency edges in C, and releases it (ready ones go to worker w's deque,
        or to the injector when w < 0). Iterative: chains of any length. Returns the number
        of nodes claimed."""
        claim, depend, submit = lib.tg_task_claim, lib.tg_task_depend, lib.tg_submit
        pool = self._pool if w < 0 else self._workers[w].pool
        if pool == NULL:
            raise SchedulerClosedError(f"{self!r} is closed")
        parent = None if w < 0 else self._workers[w].current
        seen = set()
        stack = [(n, False) for n in reversed(targets)]
        held = {}  # claimed, not released yet: released (as cancelled) if this is interrupted
        claimed = 0
        try:
            while stack:
                n, wire = stack.pop()
                if wire:
                    t = n[T]
                    for d in deps_of(n):
                        st = d[ST]
                        if st is None:
                            if depend(t, d[T]) < 0:
                                raise MemoryError(f"taskgraph: no memory for an edge of {n.key}")
                        elif st != DONE:  # already failed/cancelled (its C finish may still be
                            lib.tg_task_cancel(t)  # under way): this node must not run either
                    del held[id(n)]
                    if submit(pool, w, t) < 0:
                        raise MemoryError(f"taskgraph: no memory to submit {n.key}")
                    continue
                if n[ST] is not None or id(n) in seen:
                    continue
                seen.add(id(n))
                h = _new_handle(n)
                if not claim(n[T], h, run_c):
                    continue  # already claimed by a run (maybe running now): edges wait for it
                held[id(n)] = n
                claimed += 1
                n[H] = h
                n[SCHED] = self
                if parent is not None:  # submitted from inside a task: part of its run
                    n[PARENT] = parent
                    n[RUN] = parent[RUN]
                    kids = parent[KIDS]
                    if kids is None:
                        parent[KIDS] = [n]
                    else:
                        kids.append(n)
                else:
                    n[RUN] = run
                stack.append((n, True))
                for d in deps_of(n):
                    if d[ST] is None and id(d) not in seen:
                        stack.append((d, False))
        except BaseException:
            # Interrupted (Ctrl-C, out of memory): cancel the run, then release what we hold so
            # that it drains as cancelled and the run can end. Nothing is left waiting forever.
            lib.tg_run_cancel(run_c)
            for n in held.values():
                submit(pool, w, n[T])
            raise
        return claimed

    def _drain(self):
        """After the workers stopped: cancels every task left in a queue (and, through their
        dependents, every task still pending)."""
        out = ffi.new("void **")
        pool = self._pool
        done, final, node = NULL, 0, None
        helper = self._workers[0]
        while True:
            r = lib.tg_pool_drain(pool, done, final, out)
            if r == _SKIP:
                node = _from_handle(out[0])
                final = helper._skip(node)
                done = node[T]
            elif r == _ENDED:
                _run_ended(node)
                done, node = NULL, None
            else:
                break
        self._drained = True
        with self._lock:
            runs = list(self._runs)
            self._runs.clear()
        for r in runs:  # runs whose tasks were all drained end here
            r.event.set()


# How often a thread waiting in compute() wakes up. Free-threaded CPython frees an object in
# the thread that created it: nodes built on the caller's thread and dropped by the workers are
# only freed (with the results they hold) when the caller runs Python code again. Waking every
# 2 ms keeps intermediate results from piling up during long runs, for about 0.5% of a core.
_WAIT_SLICE = 0.002


def _wait_run(run, timeout, bar):
    deadline = None if timeout is None else time.monotonic() + timeout
    ev = run.event
    last_bar = time.monotonic()
    while True:
        step = _WAIT_SLICE
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"compute did not finish within {timeout} s "
                                   "(the work goes on; call result() to wait again)")
            step = min(step, left)
        if ev.wait(step):
            if bar is not None:
                bar.finish()
            return
        if bar is not None and time.monotonic() - last_bar > 0.1:
            bar.update()
            last_bar = time.monotonic()


def _raise_first_error(nodes):
    """Raises the root cause of the first target that did not finish with a result."""
    for n in nodes:
        st = n[ST]
        if st == DONE:
            continue
        run = n[RUN]
        if run is not None and run.error is not None:
            raise run.error
        raise n[VAL]


def _progress_bar(run):
    from taskgraph._progress import ProgressBar  # imports tqdm if installed: only when asked
    return ProgressBar(run)


# ---------------------------------------------------------------------- serial elision
def run_serially(targets):
    """Runs the lazy graph under targets in the calling thread, now, in dependency order
    (``with taskgraph.serial():``). Exceptions are stored on the failing node (raised by its
    ``result()``); KeyboardInterrupt and SystemExit propagate at once."""
    stack = [(n, False) for n in reversed(targets)]
    while stack:
        n, ready = stack.pop()
        if n[ST] is not None:
            continue
        if not ready:
            if _task_state(n[T]) != NEW:  # claimed by a parallel run: wait for it there
                n._wait_polling(None)
                continue
            stack.append((n, True))
            for d in deps_of(n):
                if d[ST] is None:
                    stack.append((d, False))
            continue
        _run_inline(n)


def _run_inline(n):
    for d in deps_of(n):
        if d[ST] != DONE:
            n[VAL] = CancelledError(f"task {n.key} was cancelled: its dependency {d.key} "
                                    f"{'failed' if d[ST] == FAILED else 'was cancelled'}")
            n[VAL].__cause__ = d[VAL]
            n[ST] = CANCELLED
            return
    try:
        if deps_of(n):
            value = n[FN](*substitute(n[ARGS], n[NAME]), **substitute(n[KWARGS], n[NAME]))
        else:
            value = n[FN](*n[ARGS], **n[KWARGS])
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        n[ARGS] = n[KWARGS] = None
        n[DEPS] = ()
        n[VAL] = e
        try:
            if getattr(e, "__taskgraph_task__", None) is None:
                e.__taskgraph_task__ = n.key
                e.add_note(f"taskgraph: raised by task {n.key} (serial mode, thread "
                           f"{threading.current_thread().name})")
        except (AttributeError, TypeError):  # pragma: no cover
            pass
        n[ST] = FAILED
        return
    n[ARGS] = n[KWARGS] = None
    n[DEPS] = ()
    n[VAL] = value
    n[ST] = DONE


class serial:
    """``with taskgraph.serial():`` calling a task runs it at once in the calling thread
    (serial elision): the same code, no scheduler, for debugging and for measuring the serial
    baseline. Nests; per thread. ``compute``/``result`` inside also run serially."""

    def __enter__(self):
        _context.set_serial(+1)
        return self

    def __exit__(self, *exc):
        _context.set_serial(-1)


# ---------------------------------------------------------------------- module-level API
_live = weakref.WeakSet()
_default = None
_default_lock = threading.Lock()


def default_scheduler() -> Scheduler:
    """The process-wide scheduler used when none is given (workers = usable CPUs), created on
    first use and closed at interpreter exit."""
    global _default
    s = _default
    if s is None or s._closed:
        with _default_lock:
            s = _default
            if s is None or s._closed:
                s = _default = Scheduler()
    return s


def compute(*args, workers: int | None = None, scheduler: Scheduler | None = None,
            timeout: float | None = None, progress: bool = False):
    """Computes the Nodes in args and returns args with Nodes replaced by their values (one
    value for one argument, else a tuple). See ``Scheduler.compute`` for errors, Ctrl-C and
    timeouts.

    Which scheduler: ``scheduler`` if given; else, with ``workers``, a one-off
    ``Scheduler(workers)`` closed before returning; else, inside a task, the scheduler running
    it (the call joins); else the default scheduler. Inside ``serial()``: runs serially.
    """
    if scheduler is not None:
        return scheduler.compute(*args, timeout=timeout, progress=progress)
    if _context.in_serial():
        nodes = scan_nodes(args)
        run_serially(nodes)
        _raise_first_error(nodes)
        out = substitute(args, "compute")
        return out[0] if len(out) == 1 else out
    if workers is not None:
        with Scheduler(workers) as s:
            return s.compute(*args, timeout=timeout, progress=progress)
    w = _context.current_worker()
    if w is not None:
        return w.sched.compute(*args, timeout=timeout, progress=progress)
    return default_scheduler().compute(*args, timeout=timeout, progress=progress)


def gather(*nodes, **kwargs) -> list:
    """Joins several nodes and returns their results as a list: ``gather(a, b)`` or
    ``gather([a, b])``. Same scheduler choice, errors and keywords as ``compute``."""
    if len(nodes) == 1 and not isinstance(nodes[0], Node):
        nodes = tuple(nodes[0])
    if not nodes:
        return []
    res = compute(*nodes, **kwargs)
    return [res] if len(nodes) == 1 else list(res)


@atexit.register
def _close_all():
    for s in list(_live):
        try:
            s.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass


_context.register_api(compute=compute, run_serially=run_serially,
                      default_scheduler=default_scheduler, live_schedulers=lambda: list(_live))
