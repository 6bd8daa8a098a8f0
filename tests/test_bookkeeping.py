"""What taskgraph attaches to, or derives from, a user's objects is best-effort and bounded.

taskgraph adds notes to a user's exceptions (which task, which item, which dask key), names
tasks after a user's functions and dask keys, and remembers a little about task functions
(taskgraph/_hazards.py). The rules, at every such site:

- a note or a mark that the exception refuses (a frozen dataclass, a read-only ``__notes__``,
  an ``add_note`` that raises) is skipped: the user's own exception is raised, never the
  error of the note (taskgraph/errors.py's ``add_note``; csrc/py/rules.c in C);
- a name derived from a user's function or key is a plain, short string: never interned
  (interned strings are immortal on free-threaded builds, so a name made new per call would
  be kept for the life of the process), never the function's repr;
- anything kept about them across calls has a bound.

The last test runs each front door a few hundred times with fresh functions, names and keys
and checks that the memory Python allocated stays flat.
"""
import dataclasses
import functools
import gc
import itertools
import sys
import time
import tracemalloc

import pytest

import taskgraph as tg
from taskgraph import _hazards
from taskgraph._map import name_of

pytestmark = pytest.mark.timeout(300)


@dataclasses.dataclass(frozen=True)
class FrozenError(Exception):
    """Every setattr raises FrozenInstanceError, also add_note's of __notes__."""
    code: int = 0


class ReadOnlyNotesError(Exception):
    """__notes__ is a property without a setter: add_note raises AttributeError."""

    @property
    def __notes__(self):
        raise AttributeError("__notes__")


class RefusingNoteError(Exception):
    """add_note itself raises."""

    def add_note(self, note):
        raise RuntimeError("no notes here")


REFUSING = [FrozenError, ReadOnlyNotesError, RefusingNoteError]


def failing_at(exc_type, bad=3):
    def fn(x):
        if x == bad:
            raise exc_type(x)
        return x
    return fn


def inc(x):
    return x + 1


def dask_get(fn):
    tgd = pytest.importorskip("taskgraph.dask")
    return tgd.get({"a": (fn, 3), "b": (inc, "a")}, "b")


@tg.task
def dask_get_in_a_task(fn):
    return dask_get(fn)


def through(door, exc_type):
    """Runs a failing call of exc_type through the front door `door`."""
    fn = failing_at(exc_type)
    if door == "tg.map item":
        return tg.map(fn, range(6))
    if door == "tg.map input":
        def gen():
            yield from range(3)
            raise exc_type(3)
        return tg.map(inc, gen())
    if door == "@tg.task":
        return tg.compute(tg.task(fn)(3))
    if door == "Executor.submit":
        with tg.Executor(2) as ex:
            return ex.submit(fn, 3).result()
    if door == "Executor.map":
        with tg.Executor(2) as ex:
            return list(ex.map(fn, range(6)))
    if door == "dask.get":
        return dask_get(fn)
    if door == "dask.get inside a task":
        return tg.compute(dask_get_in_a_task(fn))
    raise AssertionError(door)


@pytest.mark.parametrize("exc_type", REFUSING, ids=lambda t: t.__name__)
@pytest.mark.parametrize("door", ["tg.map item", "tg.map input", "@tg.task", "Executor.submit",
                                  "Executor.map", "dask.get", "dask.get inside a task"])
def test_an_exception_that_refuses_notes_is_raised_as_it_is(door, exc_type):
    with pytest.raises(BaseException) as info:
        through(door, exc_type)
    assert type(info.value) is exc_type, f"{door}: {info.value!r}"
    assert info.value.args == (3,)


# ---------------------------------------------------------------------- names
def test_a_name_taken_from_a_callable_is_short_and_never_its_repr():
    big = list(range(3000))
    assert name_of(functools.partial(inc, data=big)) == "partial(inc)"

    class Scale:
        def __call__(self, x):
            return x

    assert name_of(Scale()) == Scale.__qualname__

    class LongName:
        __name__ = "n" * 10_000

        def __call__(self, x):
            return x

    assert len(name_of(LongName())) <= 110

    class RaisingName:
        def __getattr__(self, attr):  # __qualname__, __name__: a proxy that raises
            raise RuntimeError(f"no {attr}")

        def __call__(self, x):
            return x

    assert name_of(RaisingName()) == RaisingName.__qualname__
    assert tg.map(RaisingName(), [1, 2]) == [1, 2]


needs_is_interned = pytest.mark.skipif(not hasattr(sys, "_is_interned"),
                                       reason="sys._is_interned is new in 3.13")


def fresh(prefix):
    """A str made at run time (not interned by the compiler)."""
    return "".join([prefix, "-", str(time.perf_counter_ns())])


@needs_is_interned
@pytest.mark.thread_unsafe(reason="opens a trace, which records every task of the process")
def test_names_given_or_derived_are_not_interned():
    name = fresh("job")
    t = tg.task(inc, name=name)
    assert t.name == name and not sys._is_interned(t.name)
    with tg.trace() as tr:
        tg.map(functools.partial(inc), range(3))
    names = {r.name for r in tr.records}
    assert names == {"map[partial(inc)]"}, names
    assert not any(sys._is_interned(n) for n in names)

    class Named:
        def __init__(self, name):
            self.__name__ = name

        def __call__(self):
            return 1

    with tg.Executor(1) as ex:
        f = ex.submit(Named(fresh("call")))
        assert f.result() == 1
        assert not sys._is_interned(f._node.name)


@needs_is_interned
def test_dask_keys_are_not_interned():
    tgd = pytest.importorskip("taskgraph.dask")
    from taskgraph.dask.graph import key_name
    keys = [fresh(f"load_{i}").replace("-", "_") for i in range(3)]
    dsk = {keys[0]: (inc, 0), keys[1]: (inc, keys[0]), keys[2]: (inc, keys[1])}
    assert tgd.get(dsk, keys[2]) == 3
    assert not any(sys._is_interned(k) for k in keys)
    assert key_name(keys[2]) == keys[2]


@pytest.mark.parametrize("key", [
    "x", "x-1", "x-1-2-3", ("x-2", 1), "('x-2', 1)", "('x', 1)", "hello-world-1",
    b"hello-world-1", "ae05086432ca935f6eba409a8ecd4896", "<module.submodule.myclass object at 0xdaf372",
    None, "x-abcdefab", "_(x)", "inc-3f2a4b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c", ("a", 1, 2), (), "",
    "load_3_17", "sum-aggregate-7ab3c4d5e6f7a8b9c0d1e2f3a4b5c6d7",
])
def test_a_dask_key_is_named_as_dask_names_it(key):
    utils = pytest.importorskip("dask.utils")
    from taskgraph.dask.graph import key_name
    try:
        want = utils.key_split(key)
    except Exception:  # noqa: BLE001 - key_split raises for (): ours says "Other"
        want = "Other"
    assert key_name(key) == want


@pytest.mark.thread_unsafe(reason="asserts which names a process-wide table of the last 1,000 "
                           "task names holds: copies of this test in other threads refill it "
                           "with the oldest names while this one checks")
def test_the_hazard_notes_keep_the_names_of_the_last_tasks_made_and_no_more():
    last = _hazards._MAX_NAMES + 49
    for i in range(last + 1):
        tg.task(inc, name=f"bounded-{i}")
        tg.task(lambda x: x, name=f"bounded-nested-{i}")  # a nested function: a hazard
    assert len(_hazards._CLEAN) <= _hazards._MAX_NAMES
    assert len(_hazards._BY_NAME) <= _hazards._MAX_NAMES
    assert f"bounded-{last}" in _hazards._CLEAN and "bounded-0" not in _hazards._CLEAN
    assert _hazards.hazards_for([f"bounded-nested-{last}"])  # the newest are still named


# ---------------------------------------------------------------------- flat memory
def settle():
    for _ in range(3):
        gc.collect()
        time.sleep(0.01)


LONG = 4000  # characters of each fresh name and key: a name kept per call shows in bytes


_fresh = itertools.count()


def long_name():
    """A name never made before in this process (no door finds one another door made)."""
    return f"n{next(_fresh)}-" + "x" * LONG


def call_task(_ex):
    return tg.compute(tg.task(lambda x: x, name=long_name())(1))


def call_map(_ex):
    n = next(_fresh)
    return tg.map(functools.partial(lambda x, data: x, data=list(range(n, n + 2000))), range(4))


class Named:
    """A callable whose __name__ is new per object (a proxy's or a mock's would be)."""

    def __init__(self):
        self.__name__ = long_name()

    def __call__(self, x=0):
        return x


def call_submit(ex):
    return ex.submit(Named(), 1).result()


def call_executor_map(ex):
    n = next(_fresh)
    return list(ex.map(functools.partial(lambda x, data: x, data=list(range(n, n + 2000))),
                       range(4)))


def call_dask_get(_ex):
    tgd = pytest.importorskip("taskgraph.dask")
    n = next(_fresh)
    keys = [f"load_{n}_{j}_" + "x" * LONG for j in range(5)]
    dsk = {keys[0]: (inc, 0)}
    for j in range(1, 5):
        dsk[keys[j]] = (inc, keys[j - 1])
    return tgd.get(dsk, keys[-1])


@pytest.mark.thread_unsafe(reason="measures the process's allocated memory")
@pytest.mark.parametrize("call", [call_task, call_map, call_submit, call_executor_map,
                                  call_dask_get], ids=lambda c: c.__name__[5:])
def test_each_front_door_run_hundreds_of_times_with_fresh_names_keeps_memory_flat(call):
    """300 calls after a warm-up (long enough to fill the hazard notes' bound with the fresh
    task names of call_task, and the dask backend's cache of Tasks by name) hold no more
    Python-allocated memory than the warm-up left, give or take a dict's resizing (256 KB);
    a name or key kept per call (4,000 characters each, a partial's repr of 2,000 ints)
    would add 1.2 MB or more."""
    # No spares, on the executor and on the current scheduler (tg.compute, tg.map and
    # taskgraph.dask.get run there): on a loaded machine a spare may go on duty (a worker
    # waiting on a lock looks like a waiting task), and a spare thread alive at the
    # measurement holds its node cache and thread state, 130-250 KB that go when it retires.
    with tg.Executor(2, spares=0) as ex, tg.Scheduler(2, spares=0):
        # Traced from the start: a bounded cache that drops its oldest entries (dask's Tasks
        # by name) frees what it held before, which tracing must have seen allocated.
        tracemalloc.start()
        try:
            for _ in range(_hazards._MAX_NAMES + 20):
                call(ex)
            settle()
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(300):
                call(ex)
            settle()
            grown = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
    assert grown < 256 * 1024, f"{grown} bytes more held after 300 calls of {call.__name__}"
