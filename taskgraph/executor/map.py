"""``taskgraph.Executor.map``: ``concurrent.futures``' map semantics over ``tg.map``'s range
tasks.

The calls are not one future each. One work item (a submit, so it joins the executor's run
and is spawned or injected like any call) runs ``_map._run_range`` over the whole input:
the adaptive (lazy binary) splitting of taskgraph/_map.py hands halves to idle workers, and
each range writes its block of results into the shared output list. Each item's call is
wrapped so that an exception becomes a ``_Raised`` marker in its slot instead of stopping the
range: every call runs, as with one future per item, and the iterator raises the exception
when it reaches that slot. Leaving the iteration early lowers the ranges' stop index
(``_MapState.fail_at``): ranges stop at their next block, like futures cancelled before they
start.

The iterator waits for a slot that is still empty on the root call's future, in short
slices (50 us doubling to 5 ms), since the ranges signal only when the whole map is done;
a slot filled meanwhile is seen at the next slice.
"""
from __future__ import annotations

import collections
import time
import weakref
from concurrent import futures as _cf
from concurrent.futures._base import PENDING, RUNNING
from itertools import islice

from taskgraph._native import core
from taskgraph import _map
from taskgraph.errors import add_note
from taskgraph.task import Task

__all__ = ["executor_map"]

_NOT_YET = object()   # an output slot not written yet
_SLICE_MIN, _SLICE_MAX = 50e-6, 5e-3


class _Raised:
    """The exception of one item's call, in its output slot."""
    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc


def _catching(fn, star):
    """fn wrapped so that no exception leaves it (it is returned as a _Raised)."""
    if star:
        def call(*args):
            try:
                return fn(*args)
            except BaseException as e:  # noqa: BLE001 - raised by the iterator, in order
                return _Raised(e)
    else:
        def call(x):
            try:
                return fn(x)
            except BaseException as e:  # noqa: BLE001 - raised by the iterator, in order
                return _Raised(e)
    return call


_name = _map.name_of


def _check_int(value, what):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an integer or None, got {type(value).__name__} "
                        f"{value!r:.80}")
    if value < 1:
        raise ValueError(f"{what} must be None or > 0, got {value}")


def executor_map(ex, fn, iterables, timeout, chunksize, buffersize):
    """Executor.map (see its docstring)."""
    if not callable(fn):
        raise TypeError(f"taskgraph.Executor.map: fn must be callable, got "
                        f"{type(fn).__name__} {fn!r:.80}")
    _check_int(chunksize, "chunksize")
    _check_int(buffersize, "buffersize")
    if not iterables:  # as concurrent.futures: zip() of nothing, so no calls and no results
        return iter(())
    end_time = None if timeout is None else timeout + time.monotonic()
    for k, it in enumerate(iterables):
        try:
            iter(it)
        except TypeError as e:  # builtins' own message, after which argument it is
            raise TypeError(f"taskgraph.Executor.map over {_name(fn)}: argument {k + 1} is "
                            f"not iterable ({e})") from None
    if buffersize is not None:
        return _buffered(ex, fn, zip(*iterables), end_time, buffersize)
    star = len(iterables) > 1
    # Every kind of input is read here, at the call (taskgraph/_inputs.py): a snapshot, as
    # concurrent.futures reads them; an input that raises does so in map().
    items = list(zip(*iterables)) if star else list(iterables[0])
    if not items:
        return iter(())
    if ex._shutdown or ex._broken:
        raise ex._refusal()
    name = _name(fn)
    chunk = chunksize if chunksize is not None and chunksize > 1 else None
    st = _map._MapState(_catching(fn, star), star, "index", items, len(items), chunk,
                        Task(_map._run_range, name=f"map[{name}]"))
    st.out = [_NOT_YET] * st.n
    pool = ex._pool  # None before the first use: then this is none of its calls
    if pool is not None and core.current_engine() is pool.engine:  # inside one: fork-join here
        _map._run_range(st, 0, st.n)
        root = None
    else:
        root = ex.submit(_Root(st, f"map[{name}]"))
    return _results(st, root, end_time, name)


def _results(st, root, end_time, name):
    """The iterator over a map's results, in order (see the module's docstring)."""
    delivered = 0
    try:
        for i in range(st.n):
            yield _take(st, i, root, end_time, name)  # no reference kept while suspended
            delivered = i + 1
    finally:
        # Left early (an error, a timeout, close()): the items not delivered yet are not
        # needed; the ranges stop at their next block, so what has not started never runs.
        with st.lock:
            if delivered < st.fail_at:
                st.fail_at = delivered


def _take(st, i, root, end_time, name):
    """Item i's result (its slot then let go), waiting for it; raises its exception."""
    out = st.out
    v = out[i]
    if v is _NOT_YET:
        _wait_slot(st, i, root, end_time)
        v = out[i]
    out[i] = None
    if type(v) is _Raised:
        e = v.exc
        v.exc = None
        add_note(e, f"taskgraph.Executor.map: raised by item {i} (of {st.n}) of {name}")
        try:
            raise e
        finally:
            e = None
    return v


def _wait_slot(st, i, root, end_time):
    out = st.out
    delay = _SLICE_MIN
    while out[i] is _NOT_YET:
        if root is None or root.done():
            if out[i] is not _NOT_YET:
                break
            if root is not None and not root.cancelled():
                exc = root.exception()
                if exc is not None:  # an internal failure of the range tasks
                    raise exc
            raise _cf.CancelledError()  # shut down with cancel_futures=True before it ran
        step = delay
        if end_time is not None:
            left = end_time - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            step = min(step, left)
        with root._condition:  # wakes early when the whole map is done
            if root._state in (PENDING, RUNNING):
                root._sleep(step)
        delay = min(delay * 2, _SLICE_MAX)


class _Root:
    """The map's first call: the range task over the whole input (named for traces)."""
    __slots__ = ("st", "__name__")

    def __init__(self, st, name):
        self.st, self.__name__ = st, name

    def __call__(self):
        _map._run_range(self.st, 0, self.st.n)


def _buffered(ex, fn, zipped, end_time, buffersize):
    """map(..., buffersize=n) as Python 3.14 does it: one future per call, at most n ahead."""
    fs = collections.deque(ex.submit(fn, *args) for args in islice(zipped, buffersize))
    ref = weakref.ref(ex)

    def result_iterator():
        try:
            fs.reverse()
            while fs:
                if (executor := ref()) is not None and (args := next(zipped, None)):
                    fs.appendleft(executor.submit(fn, *args))
                executor = None
                if end_time is None:
                    yield _result_or_cancel(fs.pop())
                else:
                    yield _result_or_cancel(fs.pop(), end_time - time.monotonic())
        finally:
            for future in fs:
                future.cancel()

    return result_iterator()


def _result_or_cancel(fut, timeout=None):
    try:
        try:
            return fut.result(timeout)
        finally:
            fut.cancel()
    finally:
        del fut  # no reference to the future (or its result) kept here
