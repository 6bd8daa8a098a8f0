"""The lives of a scheduler's threads: a worker's, a spare's (started by the manager while
tasks wait) and the manager's; and the mark a worker leaves in its own context (_StartedBy),
with the context variable of the current schedulers it goes into. The Scheduler (scheduler.py)
starts these threads and joins them; they hold it by a weak reference only."""
from __future__ import annotations

import contextvars
import gc
import threading
import warnings

from taskgraph._native import core

# The schedulers made current by `with` blocks, innermost last (per thread and async context).
# A worker thread's own context holds one _StartedBy instead (see there).
_current = contextvars.ContextVar("taskgraph_current_schedulers", default=())


class _StartedBy:
    """A worker thread's mark in its own context: the scheduler (weakly: the worker must not
    keep it alive) that a thread started by this worker sees as current where the interpreter
    gives a new thread a copy of its creator's context (``sys.flags.thread_inherit_context``,
    on by default on free-threaded 3.14): a thread started inside a task sees the task's
    scheduler, as the task itself does. The worker itself ignores it (outside a task, a done
    callback it runs sees the default scheduler, as on every interpreter)."""
    __slots__ = ("ref",)

    def __init__(self, ref):
        self.ref = ref



def _worker_main(engine, index, ref, init=None):
    """A worker thread's life. Running a task never fails, so work() returns only when the pool
    shuts down, unless the worker itself fails (injected in the tests): the scheduler is then
    broken, like a BrokenThreadPool. If the scheduler is gone, its weakref callback has shut
    the pool down: the last worker to leave drains (Engine._worker_exited).

    init(index), if given (taskgraph.Executor's initializer), runs first (_thread_start)."""
    _thread_start(init, index)
    _serve(engine, index, ref, engine.work, "worker")


def _spare_main(engine, slot, ref):
    """A spare's thread: runs queued work while tasks wait (first the scheduler's thread hook,
    an Executor's initializer: _thread_start), ends after spare_idle with nothing to do
    (Engine.work_spare). It counts as one of the engine's threads (the last to leave a dropped
    scheduler drains the queues); it fails as a worker does."""
    s = ref()
    init = s._thread_init if s is not None else None
    del s
    _thread_start(init, slot)
    _serve(engine, slot, ref, engine.work_spare, "spare")


def _thread_start(init, index):
    """init(index), if given (taskgraph.Executor's initializer), as on a plain thread: not a
    worker yet, no task, the scheduler it sees current the one its creator saw (so a compute
    it makes never waits for this pool, whose workers may all be in init). It never raises
    (the Executor's wrapper reports failures); while it runs, this thread takes no work, and
    the others do."""
    if init is not None:
        try:
            init(index)
        except BaseException:  # noqa: BLE001 - a bug of the wrapper: the thread still works
            pass


def _serve(engine, index, ref, work, what):
    """The life of thread `index` of a scheduler (a worker's or a spare's): work(index)."""
    _current.set((_StartedBy(ref),))  # replaces what a 3.14 thread inherits from its creator
    try:
        work(index)
    except BaseException as e:
        engine.break_(f"{what} {index} of {engine.label} stopped: {type(e).__name__}: {e}")
        s = ref()
        if s is not None:
            s._worker_stopped(index)
        del s
    finally:
        engine._worker_exited()


def _gc_pause(phase, info):
    """gc callback: a collection stops every thread; the spares' managers judge no wait over
    it (a task then waits for the collector, and a spare would too)."""
    core._pause_note(phase == "start")


gc.callbacks.append(_gc_pause)


def _manager_main(engine, ref):
    """The manager of a scheduler's spares: Engine.manage() watches the workers (in C, with
    the thread detached; asleep while every worker is idle) and answers with the slot of a
    spare whose thread to start; a thread the OS refuses leaves the work queued, and is
    counted and warned about once (Scheduler.spare_stats()["refused"])."""
    warned = False
    while True:
        slot = engine.manage()
        if slot < 0:
            return
        s = ref()
        prefix = s._spare_prefix if s is not None else "taskgraph-spare-"
        th = threading.Thread(target=_spare_main, args=(engine, slot, ref),
                              name=f"{prefix}{slot - engine.workers}", daemon=True)
        try:
            th.start()
        except BaseException as e:  # noqa: BLE001 - the OS refused (RuntimeError), or exiting
            engine._spare_failed(slot)
            reason = f"{type(e).__name__}: {e}"
            if s is not None:
                s._spare_refused = reason
            if not warned:
                warned = True
                warnings.warn(f"taskgraph: {engine.label} could not start a spare thread "
                              f"({reason}): queued tasks wait for a worker meanwhile",
                              RuntimeWarning, stacklevel=1)
        else:
            if s is not None:
                with s._spare_lock:
                    s._spare_threads = [t for t in s._spare_threads if t.is_alive()] + [th]
        del s


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
_spare_main.__code__ = _spare_main.__code__.replace(co_stacksize=_WORKER_FRAME_SLOTS)
