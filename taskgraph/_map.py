"""``tg.map``: a parallel map over the work-stealing scheduler, results in order.

The input is cut into ranges by **adaptive (lazy binary) splitting**: one task starts with the
whole range and works through it in small blocks; between two blocks, if its worker's own
deque is empty and some worker is idle (``Engine.wants_work``, one C call), it spawns the right
half of what is left as a new task and keeps the left half. A stolen half splits the same way,
so the number of tasks follows the number of idle workers, not the number of items (rayon's
adaptive splitter and Tzannes et al.'s lazy binary splitting share this idea). With a fixed
``chunksize`` the range is split in halves on chunk boundaries instead, down to one chunk per
task.
"""
from __future__ import annotations

import threading
from itertools import islice as _islice, starmap as _starmap
from time import perf_counter

from taskgraph._native import core
from taskgraph.errors import CancelledError, SchedulerClosedError
from taskgraph.scheduler import Scheduler, current_scheduler, scheduler_of_engine
from taskgraph.task import Task

__all__ = ["map"]

# Items run between two looks at the split signal and the stop flags: the block doubles while
# a block takes less than _BLOCK_TIME seconds (up to _BLOCK_MAX items), so trivial items cost
# one look per thousands of items, and slow ones are looked after every few items.
_BLOCK_TIME = 50e-6
_BLOCK_MAX = 1 << 14

_builtin_map = map


class _MapState:
    """What every range task of one map call shares. ``fail_at`` only decreases (under
    ``lock``); a range task stops at it: items after the first failure are not needed."""
    __slots__ = ("call", "star", "items", "out", "n", "chunk", "node_task", "fail_at", "error",
                 "lock", "cancelled")

    def __init__(self, call, star, items, chunk, node_task):
        self.call, self.star, self.items, self.chunk = call, star, items, chunk
        self.n = len(items)
        self.out = [None] * self.n
        self.node_task = node_task
        self.fail_at = self.n
        self.error = None
        self.lock = threading.Lock()
        self.cancelled = False

    def failed(self, i, exc):
        with self.lock:
            if i < self.fail_at:
                self.fail_at, self.error = i, exc


def _per_item(fn):
    """The plain function to call per item, and the name for error notes. A Task is unwrapped
    (calling it inside a task would spawn one node per item): its retries are applied here,
    per item, with its rules (never retried: cancellation, a closed scheduler, a cancelled
    caller)."""
    if not isinstance(fn, Task):
        return fn, getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    f, retries, retry_on = fn.fn, fn.retries, fn.retry_on
    if not retries:
        return f, fn.name

    def attempts(*args):
        for _ in range(retries):
            try:
                return f(*args)
            except retry_on as e:
                if isinstance(e, (CancelledError, SchedulerClosedError)) or core.cancelled():
                    raise
        return f(*args)

    return attempts, fn.name


def _split_point(st, lo, hi, eng):
    """Where to split [lo, hi) now (the start of the part to hand out), or 0 for no split."""
    if st.chunk:
        nch = -(-(hi - lo) // st.chunk)
        return lo + (nch // 2) * st.chunk if nch > 1 else 0
    if hi - lo > 1 and eng is not None and eng.wants_work():
        return (lo + hi + 1) // 2
    return 0


def _run_range(st, lo, hi):
    """The body of a range task: runs items [lo, hi), splitting off halves for idle workers,
    then joins the halves it handed out."""
    eng = core.current_engine()
    kids = []
    block = 1
    call, items, out = st.call, st.items, st.out
    while True:
        hi = min(hi, st.fail_at)  # an earlier item failed: what follows it is not needed
        if lo >= hi:
            break
        if eng is not None and core.cancelled():
            st.cancelled = True
            break
        mid = _split_point(st, lo, hi, eng)
        if mid:
            kids.append(st.node_task(st, mid, hi))  # spawned onto this worker's deque
            hi = mid
            block = 1
            continue
        b = min(hi, lo + block)
        res = []
        t0 = perf_counter()
        try:
            it = iter(items)
            it.__setstate__(lo)  # a list iterator starting at lo: no copy of the block
            if st.star:
                res.extend(_starmap(call, _islice(it, b - lo)))
            else:
                res.extend(_builtin_map(call, _islice(it, b - lo)))
        except Exception as e:  # noqa: BLE001 - stored, raised by map() with the item index
            i = lo + len(res)
            out[lo:i] = res
            st.failed(i, e)
            break
        if len(res) != b - lo:  # the caller's list shrank under us (it is not copied)
            out[lo:lo + len(res)] = res
            st.failed(lo + len(res), RuntimeError("taskgraph.map: the input list changed size "
                                                  "while map was running"))
            break
        out[lo:b] = res
        lo = b
        if block < _BLOCK_MAX and perf_counter() - t0 < _BLOCK_TIME:
            block *= 2
    for k in kids:  # range tasks never raise their items' errors: only a cancel comes out
        try:
            k.result()
        except CancelledError:  # a half cancelled before it started: map() raises for it
            st.cancelled = True


def map(fn, *iterables, chunksize: int | None = None) -> list:
    """Parallel ``builtins.map``: ``[fn(*args) for args in zip(*iterables)]``, computed on the
    scheduler, as a list in input order. Several iterables stop at the shortest (as
    ``builtins.map``); a single list is used as it is (do not change it while ``map``
    runs), any other input is read into a list first (generators too); items are passed as
    they are (Nodes among them are not computed).

    ``fn`` may be a plain callable or a ``tg.Task``: a Task's function is called per item
    (no node per item), and its ``retries``/``retry_on`` apply to each item on its own.
    ``chunksize=None`` splits adaptively (only when a worker is idle); an int >= 1 cuts the
    input into chunks of that many items, one task each.

    Outside a task: a compute of its own on the current scheduler (``tg.current_scheduler()``,
    or serially inside ``tg.serial()``). Inside a task: fork-join on the calling worker (idle
    workers steal the halves it splits off), joined before it returns; nested maps work.

    Errors: the first failing item in input order (the lowest index, exactly as
    ``builtins.map`` would raise it) is raised with a note naming its index and ``fn``; items
    after it are not run (their chunks stop), items before it all run. Cancel: when the
    calling task is cancelled (``tg.cancelled()``) or the compute is (Ctrl-C raises
    ``KeyboardInterrupt``), the range tasks stop between blocks and ``map`` raises
    ``tg.CancelledError`` (or the error of an item that failed first). Bad arguments:
    ``TypeError`` (``fn`` not callable, no iterable, an input not iterable, a bad
    ``chunksize`` type) or ``ValueError`` (``chunksize`` < 1), before anything runs.
    """
    if not callable(fn):
        raise TypeError(f"taskgraph.map: fn must be callable, got {type(fn).__name__} {fn!r:.80}")
    if not iterables:
        raise TypeError("taskgraph.map needs at least one iterable after fn")
    if chunksize is not None:
        if isinstance(chunksize, bool) or not isinstance(chunksize, int):
            raise TypeError(f"taskgraph.map: chunksize must be None or an int, got {chunksize!r:.80}")
        if chunksize < 1:
            raise ValueError(f"taskgraph.map: chunksize must be >= 1, got {chunksize}")
    call, name = _per_item(fn)
    for k, it in enumerate(iterables):
        try:
            iter(it)
        except TypeError:
            raise TypeError(f"taskgraph.map over {name}: argument {k + 1} is not iterable "
                            f"({type(it).__name__})") from None
    star = len(iterables) > 1
    if star:
        items = list(zip(*iterables))
    elif type(iterables[0]) is list:  # used as is: a copy would cost a reference per item
        items = iterables[0]
    else:
        items = list(iterables[0])
    if not items:
        return []
    st = _MapState(call, star, items, chunksize, Task(_run_range, name=f"map[{name}]"))
    engine = core.current_engine()
    if engine is not None and scheduler_of_engine(engine) is not None:
        _run_range(st, 0, st.n)  # inside a task: this task is the first range task
    elif core.in_serial():
        _run_range(st, 0, st.n)
    else:
        sched = current_scheduler()
        if not isinstance(sched, Scheduler):
            raise TypeError(f"taskgraph.map runs on a taskgraph Scheduler; the current one is "
                            f"{sched!r:.80}")
        sched.compute(st.node_task(st, 0, st.n))
    if st.error is not None:
        e = st.error
        st.error = None  # no cycle through the traceback
        e.add_note(f"taskgraph.map: raised by item {st.fail_at} (of {st.n}) of {name}")
        raise e
    if st.cancelled:
        raise CancelledError(f"taskgraph.map over {name} was cancelled")
    return st.out
