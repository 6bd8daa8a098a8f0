"""The input kinds of tg.map and Executor.map (taskgraph/_inputs.py's table), each checked
against ``list(builtins.map(...))``: the same results, or the same exception with the same
message (taskgraph adds notes, never changes the message).

Every kind of the table, one, two and three iterables of mixed kinds, generators, iterators
that raise, functions that raise, empty inputs and inputs of different lengths; then what a
parallel map cannot do as builtins.map does (an input that changes length while the map runs),
each with what is documented instead. The property-based part draws random mixes of kinds,
lengths and failure points.
"""
import array
import collections
import itertools

import hypothesis
import pytest
from hypothesis import strategies as st

import taskgraph as tg

pytestmark = pytest.mark.timeout(300)

np = None
try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is a test dependency
    pass

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _numbers(n):
    return list(range(n))


# Each kind of the table: a maker of a fresh input of n items (the same items every call).
KINDS = {
    "list": lambda n: _numbers(n),
    "tuple": lambda n: tuple(_numbers(n)),
    "range": lambda n: range(n),
    "str": lambda n: (LETTERS * (n // 26 + 1))[:n],
    "bytes": lambda n: bytes(i % 256 for i in range(n)),
    "bytearray": lambda n: bytearray(i % 256 for i in range(n)),
    "array": lambda n: array.array("i", _numbers(n)),
    "dict": lambda n: dict.fromkeys(range(n)),
    "dict_keys": lambda n: {i: -i for i in range(n)}.keys(),
    "dict_values": lambda n: {i: -i for i in range(n)}.values(),
    "dict_items": lambda n: {i: -i for i in range(n)}.items(),
    "set": lambda n: set(range(n)),
    "frozenset": lambda n: frozenset(range(n)),
    "deque": lambda n: collections.deque(range(n)),
    "generator": lambda n: (i for i in range(n)),
    "iterator": lambda n: iter(_numbers(n)),
    "map object": lambda n: map(abs, range(n)),
    "memoryview": lambda n: memoryview(bytes(i % 256 for i in range(n))),
    "list subclass": lambda n: type("MyList", (list,), {})(range(n)),
    "user sequence": lambda n: Seq(n),
}
if np is not None:
    KINDS["numpy"] = lambda n: np.arange(n)


class Seq:
    """An old-style sequence: __getitem__ until IndexError, and a length."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i


def outcome(call):
    """("ok", results) or ("raised", type, message) of call()."""
    try:
        return ("ok", list(call()))
    except Exception as e:  # noqa: BLE001 - compared below
        return ("raised", type(e), str(e))


def fn(*args):
    return args


def check(makers, n, f=fn, chunksize=None):
    want = outcome(lambda: map(f, *[m(n) for m in makers]))
    got = outcome(lambda: tg.map(f, *[m(n) for m in makers], chunksize=chunksize))
    assert got == want, (got[:1] + got[1:][:1], want[:1] + want[1:][:1])
    with tg.Executor(2) as ex:
        got = outcome(lambda: ex.map(f, *[m(n) for m in makers]))
    assert got == want


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("n", [0, 1, 3000])
def test_each_kind_alone_gives_what_builtins_map_gives(kind, n):
    check([KINDS[kind]], n, f=lambda x: (x, type(x).__name__))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("other", ["list", "same", "generator", "str"])
def test_each_kind_zipped_with_another_gives_what_builtins_map_gives(kind, other):
    other = kind if other == "same" else other
    check([KINDS[kind], KINDS[other]], 2000)
    check([KINDS[kind], KINDS[other], KINDS["tuple"]], 777)


def test_inputs_of_different_lengths_stop_at_the_shortest():
    for a, b in itertools.product(["list", "str", "set", "generator"], repeat=2):
        want = list(map(fn, KINDS[a](50), KINDS[b](1000)))
        assert tg.map(fn, KINDS[a](50), KINDS[b](1000)) == want
        assert tg.map(fn, KINDS[a](1000), KINDS[b](50)) == list(map(fn, KINDS[a](1000),
                                                                     KINDS[b](50)))


def raising_at(k, n, exc=ValueError):
    def gen():
        for i in range(n):
            if i == k:
                raise exc(f"input broke at {i}")
            yield i
    return lambda _n: gen()


def failing_at(k, exc=ValueError):
    def f(*args):
        if args[0] == k:
            raise exc(f"fn failed at {args}")
        return args
    return f


@pytest.mark.parametrize("at", [0, 7, 2999])
@pytest.mark.parametrize("others", [(), ("list",), ("set", "generator")])
def test_an_iterator_that_raises_raises_as_in_builtins_map(at, others):
    check([raising_at(at, 3000)] + [KINDS[o] for o in others], 3000)


@pytest.mark.parametrize("at", [0, 7, 2999])
@pytest.mark.parametrize("kind", ["list", "range", "str", "dict_items", "deque", "generator"])
def test_a_function_that_raises_raises_the_first_failure_in_input_order(at, kind):
    item = KINDS[kind](3000)
    first = list(item)[at] if kind != "generator" else at
    check([KINDS[kind]], 3000, f=failing_at(first))
    check([KINDS[kind]], 3000, f=failing_at(first), chunksize=64)


def test_a_stop_iteration_raised_by_fn_is_raised_not_taken_for_the_end():
    """The one documented difference from list(builtins.map(...)), which ends silently at
    fn's StopIteration (list() takes it for the map's end): tg.map raises it, as a list
    comprehension does."""
    f = failing_at(50, StopIteration)
    assert len(list(map(f, range(100)))) == 50
    with pytest.raises(StopIteration, match=r"fn failed at \(50,\)"):
        [f(x) for x in range(100)]
    for kind in ("list", "generator"):
        with pytest.raises(StopIteration, match=r"fn failed at \(50,\)"):
            tg.map(f, KINDS[kind](100))
    check([KINDS["generator"]], 100, f=failing_at(50, KeyError))


def test_an_argument_that_is_not_iterable_names_itself_with_builtins_words():
    with pytest.raises(TypeError) as ours:
        tg.map(fn, [1], 5)
    with pytest.raises(TypeError) as theirs:
        list(map(fn, [1], 5))
    assert "argument 2 is not iterable" in str(ours.value)
    assert str(theirs.value) in str(ours.value)
    with tg.Executor(1) as ex, pytest.raises(TypeError) as ours:
        ex.map(fn, [1], 5)
    assert str(theirs.value) in str(ours.value)


# ---------------------------------------------------------------------- changing inputs
def cut_at(seq, at, keep):
    """fn that cuts seq to `keep` items when it reaches item `at`."""
    def f(x):
        if x == at:
            del seq[keep:]
        return x
    return f


@pytest.mark.parametrize("make", [list, bytearray, lambda r: array.array("i", r)],
                         ids=["list", "bytearray", "array"])
@pytest.mark.parametrize("chunksize", [None, 1, 100])
def test_a_sequence_cut_short_while_mapped_raises_for_the_first_item_it_lost(make, chunksize):
    """builtins.map would stop where the sequence now ends (12 results); a parallel map may
    have run later items already: it raises RuntimeError naming item 12, never returns
    results of deleted items."""
    seq = make(range(100))
    with pytest.raises(RuntimeError, match="changed size while map was running: 100 items "
                       "when it started, 12 now") as info:
        tg.map(cut_at(seq, 10, 12), seq, chunksize=chunksize)
    assert any("item 12 " in note for note in info.value.__notes__)


def test_a_list_cut_short_inside_a_task_and_in_serial_mode_raises_too():
    @tg.task
    def inside():
        seq = list(range(1000))
        return tg.map(cut_at(seq, 10, 500), seq)

    with pytest.raises(RuntimeError, match="1000 items when it started, 500 now"):
        tg.compute(inside())
    seq = list(range(1000))
    with tg.serial(), pytest.raises(RuntimeError, match="500 now"):
        tg.map(cut_at(seq, 10, 500), seq)


def test_a_list_that_grows_while_mapped_raises_for_the_first_item_not_run():
    seq = list(range(10))

    def grow(x):
        if x == 5:
            seq.append(10)
        return x

    with pytest.raises(RuntimeError, match="10 items when it started, 11 now") as info:
        tg.map(grow, seq)
    assert any("item 10 " in note for note in info.value.__notes__)


@pytest.mark.parametrize("kind", ["dict", "dict_keys", "set", "deque"])
def test_a_container_that_changes_size_raises_runtime_error_with_builtins_words(kind):
    def run(mapper):
        d = {i: i for i in range(100)}
        c = {"dict": d, "dict_keys": d.keys(), "set": set(d), "deque": collections.deque(d)}[kind]

        def f(x):
            if x == 10:
                (d.pop(99) if kind.startswith("dict") else c.pop())
            return x
        return mapper(f, c)

    with pytest.raises(RuntimeError) as theirs:
        run(lambda f, c: list(map(f, c)))
    with pytest.raises(RuntimeError) as ours:
        run(tg.map)
    assert str(ours.value).startswith(str(theirs.value))


def test_a_pulled_sequence_that_shrinks_below_what_was_read_raises():
    class Shrinking(Seq):
        def __delitem__(self, s):
            self.n = s.start

    seq = Shrinking(100)
    # Cut at the last item: by then all 100 were read, whatever the timing. (Cut earlier, a
    # slow reader may not have passed item 12 yet; it then stops there as builtins.map does.)
    with pytest.raises(RuntimeError, match=r"\(Shrinking\) changed size") as info:
        tg.map(cut_at(seq, 99, 12), seq)
    assert any("item 12 " in note for note in info.value.__notes__)


def test_executor_map_reads_its_inputs_at_the_call_as_concurrent_futures_does():
    seq = list(range(100))
    with tg.Executor(2) as ex:
        it = ex.map(cut_at(seq, 10, 12), seq)
        assert list(it) == list(range(100))  # a snapshot: the cut comes after the read
        gen = raising_at(3, 10)(0)
        with pytest.raises(ValueError, match="input broke at 3"):
            ex.map(fn, gen)  # raised by map() itself, as ThreadPoolExecutor.map raises it


# ---------------------------------------------------------------------- property-based


@st.composite
def inputs(draw):
    """1-3 input makers of random kinds, a length for each, and optional failure points."""
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3))
    lengths = [draw(st.integers(0, 400)) for _ in kinds]
    raise_in = draw(st.none() | st.integers(0, len(kinds) - 1))
    raise_at = draw(st.integers(0, 400))
    fail_at = draw(st.none() | st.integers(0, 400))
    return kinds, lengths, raise_in, raise_at, fail_at


def build(kinds, lengths, raise_in, raise_at):
    out = []
    for i, (k, n) in enumerate(zip(kinds, lengths)):
        if i == raise_in:
            out.append(raising_at(raise_at, n)(n))
        else:
            out.append(KINDS[k](n))
    return out


@pytest.mark.thread_unsafe(reason="hypothesis keeps per-test state")
@hypothesis.settings(max_examples=150, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(inputs(), st.sampled_from([None, 1, 7]))
def test_random_mixes_of_kinds_lengths_and_failures_give_what_builtins_map_gives(case, chunk):
    kinds, lengths, raise_in, raise_at, fail_at = case

    def f(*args):
        if fail_at is not None and args[0] in (fail_at, LETTERS[fail_at % 26]):
            raise ValueError(f"fn failed at {args}")
        return args

    want = outcome(lambda: map(f, *build(kinds, lengths, raise_in, raise_at)))
    got = outcome(lambda: tg.map(f, *build(kinds, lengths, raise_in, raise_at), chunksize=chunk))
    assert got == want
