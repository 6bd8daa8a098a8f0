"""``tg.map``: a parallel map over the work-stealing scheduler, results in order.

Every input is read at its own best, never copied into a list first when it need not be:
by index, a block of slices at a time, copied, or **pulled** (taskgraph/_inputs.py has the
table of the input kinds and their plans). A pulled input is read in chunks: one range task
pulls a chunk under a lock, runs it, pulls the next; idle workers get pullers of their own, so
the input is read once, in order, while earlier chunks run.

Random-access inputs are cut by **adaptive (lazy binary) splitting**: one task starts with the
whole range and works through it in blocks; between two blocks, if its worker's own deque is
empty, some worker is idle (``Engine.wants_work``, one C call) and what is left is worth moving
(its estimated time, from the blocks run so far, at least _SPLIT_MIN), it spawns the right half
of what is left as a new task and keeps the left half. A stolen half splits the same way, so
the number of tasks follows the number of idle workers, not the number of items (rayon's
adaptive splitter and Tzannes et al.'s lazy binary splitting share this idea); a map too small
to pay for a second worker never splits. With a fixed ``chunksize`` the range is split in halves
on chunk boundaries instead, down to one chunk per task. Each block runs in one C call
(``core.map_into``: fn per item, the result stored in place in the output list).
"""
from __future__ import annotations

import functools
import threading
import types
from itertools import islice as _islice
from time import perf_counter

from taskgraph import _inputs
from taskgraph.blocking import here as _here
from taskgraph._native import core
from taskgraph.errors import CancelledError, SchedulerClosedError, add_note
from taskgraph.scheduler import Scheduler, current_scheduler, scheduler_of_engine
from taskgraph.task import Task

__all__ = ["map"]

# A block (items run between two looks at the split signal and the stop flags) doubles while
# it takes less than _BLOCK_TIME seconds, up to _BLOCK_MAX items: trivial items cost one look
# per thousands of items, and slow ones are looked after every few items.
_BLOCK_TIME = 50e-6
_BLOCK_MAX = 1 << 14
# What is left of a range is handed to an idle worker only if it is expected to take at least
# this long (seconds): less does not pay for waking a worker, moving the items and joining.
_SPLIT_MIN = 100e-6

_map_into = core.map_into
# The worker's count of waits declared (tg.blocking) or found by the spares' manager: a range
# whose block of items waited, at _SPLIT_MIN or more per item, hands its items out at once
# (_MapState.waits), so that they wait side by side instead of in waves.
_waits = core.waits

class _MapState:
    """What every range task of one map call shares. ``fail_at`` only decreases (under
    ``lock``); a range task stops at it: items after the first failure are not needed."""
    __slots__ = ("call", "star", "kind", "src", "out", "n", "chunk", "node_task", "fail_at",
                 "error", "from_input", "lock", "cancelled", "per_item", "it", "pulled",
                 "exhausted", "chunks", "pullers", "workers", "owner", "sized", "waits")

    def __init__(self, call, star, kind, src, n, chunk, node_task, sized=()):
        self.call, self.star, self.kind, self.src, self.chunk = call, star, kind, src, chunk
        self.sized = sized  # (position, input, length): inputs whose length must not change
        self.n = n  # items (None for an input pulled to its end)
        self.out = [None] * n if n is not None else None
        self.node_task = node_task
        self.fail_at = n if n is not None else float("inf")
        self.error = None
        self.from_input = False  # the error was raised by the input, not by fn
        self.lock = threading.Lock()
        self.cancelled = False
        self.per_item = None  # seconds per item, measured by the blocks run so far
        # Its items wait (one was found waiting, or declared it): every range splits down to
        # single items at once; reset by an item that ran quickly without waiting.
        self.waits = False
        self.it = iter(src) if kind == "pull" else None
        self.pulled = 0
        self.exhausted = False
        self.chunks = []  # (start, results) of the pulled chunks
        self.pullers = 1
        self.workers = 1
        # The caller's thread, which reads the results and frees them: they are handed to it
        # (core.map_into, csrc/py/mapblock.c).
        self.owner = core.map_owner()

    def failed(self, i, exc, from_input=False):
        with self.lock:  # (item n itself: an input that grew, reported after the map)
            if i < self.fail_at or (i == self.fail_at and self.error is None):
                self.fail_at, self.error, self.from_input = i, exc, from_input


def _retrying(f, retries, retry_on):
    def attempts(*args, **kwargs):
        for _ in range(retries):
            try:
                return f(*args, **kwargs)
            except retry_on as e:
                if isinstance(e, (CancelledError, SchedulerClosedError)) or core.cancelled():
                    raise
        return f(*args, **kwargs)

    return attempts


def _per_item(fn):
    """The plain callable to call per item, and the name for error notes. A Task, also used
    as a method or wrapped in functools.partial, is unwrapped (calling it inside a task would
    spawn one node per item): its retries are applied here, per item, with its rules (never
    retried: cancellation, a closed scheduler, a cancelled caller)."""
    if isinstance(fn, Task):
        f = fn.fn if not fn.retries else _retrying(fn.fn, fn.retries, fn.retry_on)
        return f, fn.name
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, Task):
        f, name = _per_item(fn.__func__)
        return types.MethodType(f, fn.__self__), name
    if isinstance(fn, functools.partial):
        f, name = _per_item(fn.func)
        if f is not fn.func:  # a Task inside (a Task, or one used as a method)
            return functools.partial(f, *fn.args, **fn.keywords), name
    return fn, name_of(fn)


_NAME_MAX = 100  # characters of a name taken from a callable's attributes


def name_of(fn) -> str:
    """A short name for the callable fn, for task names and error notes: its ``__qualname__``
    or ``__name__`` (a str, cut to _NAME_MAX characters), ``partial(<name of its function>)``
    for a functools.partial, else its type's qualified name. Never its repr (which can be
    long, slow, made new per object, e.g. a partial's holds its arguments, or raise), and
    never raises: a name is bookkeeping on the user's object."""
    for attr in ("__qualname__", "__name__"):
        try:
            name = getattr(fn, attr, None)
        except Exception:  # noqa: BLE001 - a property of the user's that raises
            name = None
        if type(name) is str and name:
            return name if len(name) <= _NAME_MAX else name[:_NAME_MAX] + "..."
    if isinstance(fn, functools.partial):
        return f"partial({name_of(fn.func)})"
    return type(fn).__qualname__


def _block(st, lo, b):
    """Runs items [lo, b) into st.out; returns how many ran, recording a failure."""
    kind, src = st.kind, st.src
    if kind == "index":
        done, err = _map_into(st.call, src, lo, st.out, lo, b - lo, st.star, st.owner)
    elif kind == "slice":
        done, err = _map_into(st.call, iter(src[lo:b]), 0, st.out, lo, b - lo, st.star, st.owner)
    else:  # zip of random-access inputs
        done, err = _map_into(st.call, zip(*(x[lo:b] for x in src)), 0, st.out, lo, b - lo, True,
                              st.owner)
    if err is not None:
        st.failed(lo + done, err)
    elif done != b - lo:  # the input ended early: it shrank while the map ran
        found = _inputs.resized(st.sized, st.n)
        if found is None:  # shrank and grew back: the first item it could not give
            found = lo + done, RuntimeError("taskgraph.map: an input changed size while map "
                                            "was running")
        st.failed(*found, from_input=True)
    return done


def _split_point(st, lo, hi, eng, per):
    """Where to split [lo, hi) now (the start of the part to hand out), or 0 for no split.
    per: this task's measured seconds per item, or None while too little has run to say."""
    if st.chunk:
        nch = -(-(hi - lo) // st.chunk)
        return lo + (nch // 2) * st.chunk if nch > 1 else 0
    if st.waits and eng is not None:  # items that wait: each a task, so they wait side by side
        return (lo + hi + 1) // 2 if hi - lo > 1 else 0
    if (hi - lo > 1 and eng is not None and per is not None and (hi - lo) * per >= _SPLIT_MIN
            and eng.wants_work()):
        return (lo + hi + 1) // 2
    return 0


def _first_block(st):
    """The first block of a range task: one item when nothing is known yet, else as many as
    take about _BLOCK_TIME."""
    if st.chunk:
        return st.chunk
    per = st.per_item
    if not per:
        return 1
    return max(1, min(_BLOCK_MAX, int(_BLOCK_TIME / per)))


class _Open:
    """A range task running a block of items, [.., b) of [.., hi), on this thread
    (taskgraph/blocking.py's here.range): a declared wait in one of the items hands the rest out."""
    __slots__ = ("st", "b", "hi", "kids")

    def __init__(self, st, kids):
        self.st, self.kids = st, kids

    def hand_out(self):
        """Spawns items [b, hi) as a task of their own, which splits down to single items
        (its items wait too: _MapState.waits); the range keeps [.., b)."""
        st, b, hi = self.st, self.b, min(self.hi, self.st.fail_at)
        if hi > b:
            st.waits = True
            self.kids.append(st.node_task(st, b, hi))  # spawned onto this worker's deque
            self.hi = b


def _run_range(st, lo, hi):
    """The body of a range task: runs items [lo, hi), splitting off halves for idle workers,
    then joins the halves it handed out."""
    eng = core.current_engine()
    kids = []
    here = _here
    op = _Open(st, kids) if eng is not None else None
    block = _first_block(st)
    ran, spent = 0, 0.0  # items run by this task, and their time (blocks' overheads included)
    per = st.per_item  # seconds per item: another task's measure until this one has its own
    while True:
        hi = min(hi, st.fail_at)  # an earlier item failed: what follows it is not needed
        if lo >= hi:
            break
        if eng is not None and core.cancelled():
            st.cancelled = True
            break
        mid = _split_point(st, lo, hi, eng, per)
        if mid:
            kids.append(st.node_task(st, mid, hi))  # spawned onto this worker's deque
            hi = mid
            continue
        b = min(hi, lo + block)
        w0 = _waits()
        if op is not None:
            op.b, op.hi, prev = b, hi, getattr(here, "range", None)
            here.range = op
        t0 = perf_counter()
        try:
            done = _block(st, lo, b)
        finally:
            if op is not None:
                here.range = prev
        if op is not None:
            hi = op.hi  # a declared wait in the block handed out what followed it
        if done != b - lo:
            break
        dt = perf_counter() - t0
        slow = dt >= (b - lo) * _SPLIT_MIN
        if _waits() != w0:
            if slow:  # (a pause among trivial items is a short share of its block)
                st.waits = True
        elif st.waits and not slow:  # items that neither wait nor take long: split as needed
            st.waits = False
        ran, spent, lo = ran + done, spent + dt, b
        # Trusted once a block's fixed cost (a microsecond or so) is small beside what ran:
        # a first item timed alone makes trivial items look slow enough to split.
        if ran >= 16 or spent >= _SPLIT_MIN / 4:
            per = st.per_item = spent / ran
        if not st.chunk and block < _BLOCK_MAX and dt < _BLOCK_TIME:
            block *= 2
    _join(st, kids)


def _join(st, kids):
    for k in kids:  # range tasks never raise their items' errors: only a cancel comes out
        try:
            k.result()
        except CancelledError:  # a half cancelled before it started: map() raises for it
            st.cancelled = True


def _pull(st, k):
    """The next chunk of at most k items from the shared input, with its start index; an
    empty chunk at the end (or after a failure)."""
    with st.lock:
        start = st.pulled
        if st.exhausted or start > st.fail_at:
            return start, []
        chunk = []
        try:
            chunk.extend(_islice(st.it, k))  # a failing input leaves what it gave in chunk
        except Exception as e:  # noqa: BLE001 - the input's own error, raised by map()
            st.exhausted = True
            st.pulled = start + len(chunk)
            if start + len(chunk) < st.fail_at:
                st.fail_at, st.error, st.from_input = start + len(chunk), e, True
            return start, chunk
        st.pulled = start + len(chunk)
        if len(chunk) < k:
            st.exhausted = True
            st.it = None  # let the input go
        return start, chunk


def _run_pull(st):
    """The body of a puller task: pulls chunks of the input and runs them until it ends;
    while a chunk takes long enough to pay for it and a worker is idle, it spawns another
    puller (up to one per worker); then joins them."""
    eng = core.current_engine()
    helpers = []
    k = st.chunk or _first_block(st)
    while True:
        if eng is not None and core.cancelled():
            st.cancelled = True
            break
        start, chunk = _pull(st, k)
        if not chunk:
            break
        res = [None] * len(chunk)
        t0 = perf_counter()
        done, err = _map_into(st.call, chunk, 0, res, 0, len(chunk), st.star, st.owner)
        dt = perf_counter() - t0
        st.chunks.append((start, res))
        if err is not None:
            st.failed(start + done, err)
            break
        per = dt / len(chunk)
        if len(chunk) >= 16 or dt >= _SPLIT_MIN / 4:
            st.per_item = per
        if not st.chunk and k < _BLOCK_MAX and dt < _BLOCK_TIME:
            k *= 2
        if (eng is not None and not st.exhausted and st.pullers < st.workers
                and (st.chunk or k * per >= _SPLIT_MIN / 2) and eng.wants_work()):
            with st.lock:
                st.pullers += 1
            helpers.append(st.node_task(st))  # spawned onto this worker's deque
    _join(st, helpers)


def _gather_pulled(st):
    """The results of a pulled map that did not fail, in input order."""
    out = []
    for _, res in sorted(st.chunks, key=lambda c: c[0]):
        out.extend(res)
    return out


def map(fn, *iterables, chunksize: int | None = None) -> list:
    """Parallel ``builtins.map``: ``[fn(*args) for args in zip(*iterables)]``, computed on the
    scheduler, as a list in input order. Several iterables stop at the shortest (as
    ``builtins.map``), in any mix of kinds. Lists, tuples and ranges are read in place by
    index, other cheaply sliced sequences (numpy arrays, ``array.array``, ``str``, ``bytes``)
    a block at a time, dict views, sets and deques copied into a list (one C loop) and read by
    index, and any other iterable (generators, iterators) is pulled in chunks while earlier
    chunks run (taskgraph/_inputs.py has the table). Do not change an input while ``map``
    runs: one that is not pulled and changes length raises ``RuntimeError`` for the first
    item it lost (or, when it grew, the first item not run), never results of deleted items
    (``builtins.map`` raises ``RuntimeError`` too for a dict view, set or deque, with the
    same words, and would read a list's new length). Items are passed as they are (Nodes
    among them are not computed).

    ``fn`` may be a plain callable or a ``tg.Task`` (also a Task used as a method, or wrapped
    in ``functools.partial``): a Task's function is called per item (no node per item), and
    its ``retries``/``retry_on`` apply to each item on its own. ``chunksize=None`` splits
    adaptively (only when a worker is idle and what is left is worth moving; items seen
    waiting, declared with ``tg.blocking()`` or found by the spares' manager, are split
    apart at once: docs/api/waiting.md); an int >= 1 cuts the input into chunks of that many
    items, one task each.

    Outside a task: a compute of its own on the current scheduler (``tg.current_scheduler()``,
    or serially inside ``tg.serial()``). Inside a task: fork-join on the calling worker (idle
    workers steal the halves it splits off), joined before it returns; nested maps work.

    Errors: the first failing item in input order (the lowest index, exactly as
    ``builtins.map`` would raise it, ``StopIteration`` included) is raised with a note naming
    its index and ``fn``; items after it are not run (their chunks stop), items before it all
    run. An input that raises while being read raises that error, with a note naming the
    item it was producing. Cancel: when the calling task is cancelled (``tg.cancelled()``) or
    the compute is (Ctrl-C raises ``KeyboardInterrupt``), the range tasks stop between blocks
    and ``map`` raises ``tg.CancelledError`` (or the error of an item that failed first). Bad
    arguments: ``TypeError`` (``fn`` not callable, no iterable, an input not iterable, a bad
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
        except TypeError as e:  # builtins.map's own message, after which argument it is
            raise TypeError(f"taskgraph.map over {name}: argument {k + 1} is not iterable "
                            f"({e})") from None
    kind, src, n, sized = _inputs.plan(iterables)
    if n == 0:
        return []
    star = len(iterables) > 1
    pull = kind == "pull"
    st = _MapState(call, star, kind, src, n, chunksize,
                   Task(_run_pull if pull else _run_range, name=f"map[{name}]"), sized)
    whole = (st,) if pull else (st, 0, n)
    engine = core.current_engine()
    sched = scheduler_of_engine(engine) if engine is not None else None
    if sched is not None or core.in_serial():  # inside a task (the first range task), or serial
        st.workers = sched.workers if sched is not None else 1
        (_run_pull if pull else _run_range)(*whole)
    else:
        sched = current_scheduler()
        if not isinstance(sched, Scheduler):
            raise TypeError(f"taskgraph.map runs on a taskgraph Scheduler; the current one is "
                            f"{sched!r:.80}")
        st.workers = sched.workers
        sched.compute(st.node_task(*whole))
    # An input changed length: its results cannot be had (a pulled one: what was read).
    found = _inputs.resized(sized, st.pulled if pull else n, pulled=pull)
    if found is not None:
        st.failed(*found, from_input=True)
    if st.error is not None:
        e = st.error
        st.error = None  # no cycle through the traceback
        if st.from_input:
            add_note(e, f"taskgraph.map: raised by the input while producing item {st.fail_at} "
                        f"(for {name})")
        else:
            add_note(e, f"taskgraph.map: raised by item {st.fail_at} (of "
                        f"{st.n if st.n is not None else 'more'}) of {name}")
        raise e
    if st.cancelled:
        raise CancelledError(f"taskgraph.map over {name} was cancelled")
    return _gather_pulled(st) if pull else st.out
