"""tg.map: results in order, chunk sizes, several inputs, errors with the item index, cancel,
inside tasks and nested, Tasks and plain functions. No timings are asserted here (speed is
measured in benchmarks/map_fanout.py)."""
import threading
import time

import pytest

import taskgraph as tg

pytestmark = pytest.mark.timeout(120)


def square(x):
    return x * x


@pytest.fixture
def two():
    with tg.Scheduler(2) as s:
        yield s


@pytest.mark.parametrize("chunksize", [None, 1, 3, 64, 10_000])
def test_results_in_input_order(two, chunksize):
    xs = list(range(2000))
    assert tg.map(square, xs, chunksize=chunksize) == [x * x for x in xs]


def test_empty_input_returns_an_empty_list(two):
    assert tg.map(square, []) == []
    assert tg.map(square, iter(())) == []
    assert tg.map(pow, [], [1, 2]) == []


def test_several_iterables_stop_at_the_shortest_like_builtins_map(two):
    a, b, c = range(10), [2] * 7, (1, 2, 3, 4, 5, 6, 7, 8)
    f = lambda x, y, z: x * y + z  # noqa: E731
    assert tg.map(f, a, b, c) == list(map(f, a, b, c))
    assert tg.map(pow, [2, 3, 4], [5, 6]) == [32, 729]


def test_generator_input_is_read_once(two):
    reads = []

    def gen():
        for i in range(500):
            reads.append(i)
            yield i

    assert tg.map(square, gen()) == [i * i for i in range(500)]
    assert reads == list(range(500))


def test_plain_function_and_task_give_the_same_result(two):
    t = tg.task(square, name="sq")
    xs = range(300)
    assert tg.map(t, xs) == tg.map(square, xs) == [x * x for x in xs]


def test_a_tasks_retries_apply_to_each_item(two):
    lock = threading.Lock()
    calls = {}

    @tg.task(retries=2, name="flaky")
    def flaky(x):
        with lock:
            calls[x] = calls.get(x, 0) + 1
            n = calls[x]
        if x % 5 == 0 and n < 3:  # fails twice, then works: within retries=2
            raise ValueError(x)
        return -x

    assert tg.map(flaky, range(100)) == [-x for x in range(100)]
    assert all(calls[x] == (3 if x % 5 == 0 else 1) for x in range(100))


def test_task_retries_exhausted_raise_the_items_error(two):
    @tg.task(retries=1, name="always")
    def always(x):
        if x == 7:
            raise KeyError(x)
        return x

    with pytest.raises(KeyError) as ei:
        tg.map(always, range(20))
    assert any("item 7" in n and "always" in n for n in ei.value.__notes__)


@pytest.mark.parametrize("chunksize", [None, 1, 16])
def test_first_error_in_input_order_is_raised_with_its_index(two, chunksize):
    ran = set()
    lock = threading.Lock()

    def bad(x):
        with lock:
            ran.add(x)
        if x in (130, 731, 1999):
            raise ZeroDivisionError(f"item {x}")
        return x

    with pytest.raises(ZeroDivisionError, match="item 130") as ei:
        tg.map(bad, range(2000), chunksize=chunksize)
    assert ei.value.__notes__ == ["taskgraph.map: raised by item 130 (of 2000) of "
                                  "test_first_error_in_input_order_is_raised_with_its_index"
                                  ".<locals>.bad"]
    assert set(range(131)) <= ran  # everything before the failing item ran


def test_items_after_a_failure_are_not_all_run(two):
    ran = []

    def early_fails(x):
        ran.append(x)
        time.sleep(0.001)
        if x == 5:
            raise RuntimeError("early")
        return x

    with pytest.raises(RuntimeError, match="early"):
        tg.map(early_fails, range(2000), chunksize=None)
    assert set(range(6)) <= set(ran)
    assert len(ran) < 2000  # the other ranges stopped once item 5 had failed


@pytest.mark.parametrize("make", [tuple, list, lambda xs: xs, lambda xs: dict.fromkeys(xs),
                                  type("ListSub", (list,), {})])
def test_any_iterable_input(two, make):
    assert tg.map(square, make(range(300))) == [x * x for x in range(300)]


def test_inside_a_task_it_forks_and_joins_on_the_worker(two):
    @tg.task
    def outer(n):
        here = tg.current_scheduler()
        res = tg.map(square, range(n))
        return res, here

    res, here = outer(3000).compute(scheduler=two)
    assert res == [i * i for i in range(3000)]
    assert here is two


def test_nested_map(two):
    def row(i):
        return sum(tg.map(abs, range(-i, i)))

    expect = [sum(abs(j) for j in range(-i, i)) for i in range(60)]
    assert tg.map(row, range(60)) == expect

    @tg.task
    def outer():
        return tg.map(row, range(60), chunksize=7)

    assert outer().compute(scheduler=two) == expect


def test_an_error_inside_a_task_propagates_to_the_task(two):
    @tg.task
    def outer():
        return tg.map(lambda x: 1 // (x - 40), range(100))

    with pytest.raises(ZeroDivisionError) as ei:
        outer().compute(scheduler=two)
    assert any("item 40 (of 100)" in n for n in ei.value.__notes__)


def test_cancelling_the_calling_task_stops_the_map(two):
    started = threading.Event()
    count = []

    def slow(x):
        count.append(x)
        started.set()
        time.sleep(0.002)
        return x

    outcome = []

    @tg.task
    def outer():
        try:
            tg.map(slow, range(5000))
        except tg.CancelledError as e:
            outcome.append(e)
            raise
        outcome.append("finished")

    node = outer()
    fut = threading.Thread(target=lambda: _swallow(node, two))
    fut.start()
    assert started.wait(30)
    assert node.cancel() is False  # running: it keeps running, sees tg.cancelled()
    fut.join(60)
    assert not fut.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], tg.CancelledError)
    assert "taskgraph.map over" in str(outcome[0])
    assert len(count) < 5000


def _swallow(node, sched):
    try:
        sched.compute(node)
    except tg.CancelledError:
        pass


def test_serial_mode_runs_in_the_calling_thread():
    me = threading.get_ident()
    with tg.serial():
        assert tg.map(lambda x: (x, threading.get_ident() == me), range(5)) == [
            (x, True) for x in range(5)]


def test_bad_arguments_raise_before_anything_runs(two):
    with pytest.raises(TypeError, match="must be callable"):
        tg.map(3, [1])
    with pytest.raises(TypeError, match="at least one iterable"):
        tg.map(square)
    with pytest.raises(TypeError, match="argument 2 is not iterable"):
        tg.map(pow, [1], 5)
    with pytest.raises(TypeError, match="chunksize"):
        tg.map(square, [1], chunksize=1.5)
    with pytest.raises(ValueError, match="chunksize must be >= 1"):
        tg.map(square, [1], chunksize=0)


def test_outside_a_task_it_uses_the_current_scheduler(two):
    before = sum(w["tasks_run"] for w in two.stats())
    with tg.use_scheduler(two):
        assert tg.map(square, range(100)) == [x * x for x in range(100)]
    assert sum(w["tasks_run"] for w in two.stats()) > before


def test_an_input_list_shrinking_under_map_is_an_error_not_wrong_results(two):
    xs = list(range(1000))

    def shrink(x):
        if x == 10:
            del xs[500:]
        return x

    with pytest.raises(RuntimeError, match="changed size") as ei:
        tg.map(shrink, xs, chunksize=1000)
    assert any("item 500" in n for n in ei.value.__notes__)
