"""Serial elision: ``with tg.serial():`` runs tasks at once in the calling thread, claiming
each node first (a parallel compute never runs it again)."""
import threading

import pytest

import taskgraph as tg
from helpers import counted_leaves

pytestmark = pytest.mark.timeout(120)


@tg.task
def add(a, b):
    return a + b


def test_serial_mode_runs_at_once_in_the_calling_thread():
    import threading
    seen = []

    @tg.task
    def where(x):
        seen.append(threading.current_thread())
        return x * 2

    with tg.serial():
        n = where(4)
        assert seen == [threading.current_thread()]
        assert n.done() and n.result() == 8
        assert tg.compute(where(n)) == 16


def test_serial_mode_stores_the_exception_for_result():
    @tg.task
    def boom():
        raise KeyError("k")

    with tg.serial():
        n = boom()
        assert n.done()
        with pytest.raises(KeyError) as ei:
            n.result()
    assert any("boom" in note for note in ei.value.__notes__)


def test_serial_fork_join_gives_the_same_answer():
    @tg.task
    def fib(n):
        if n < 2:
            return n
        a, b = fib(n - 1), fib(n - 2)
        return a.result() + b.result()

    with tg.serial():
        assert fib(15).result() == 610
    assert fib(15).result() == 610


def test_lazy_graph_built_outside_computed_inside_serial():
    x = add(1, 2)
    y = add(x, x)
    here = threading.current_thread()
    seen = []

    @tg.task
    def where(v):
        seen.append(threading.current_thread())
        return v

    z = where(y)
    with tg.serial():
        assert tg.compute(z) == 6
        assert z.result() == 6
    assert seen == [here]


def test_serial_run_and_a_parallel_compute_of_one_graph_run_each_node_once():
    leaves, total, counts = counted_leaves(200, 0.001)
    a, b = total(leaves[::-1]), total(leaves)
    with tg.Scheduler(workers=2) as s:
        t = threading.Thread(target=s.compute, args=(a,))
        t.start()
        with tg.serial():
            assert b.result() == sum(range(200))
        t.join(30)
    assert a.result() == sum(range(200))
    assert set(counts.values()) == {1}  # no leaf ran twice


def test_keyboard_interrupt_in_a_serial_task_propagates_and_fails_the_node():
    @tg.task
    def interrupted():
        raise KeyboardInterrupt

    with tg.serial():
        with pytest.raises(KeyboardInterrupt):
            interrupted()
    # the node finished (failed), nothing waits on it
    with tg.serial():
        m = add(1, 1)
    assert m.result() == 2


def test_serial_mode_nests_and_is_per_thread():
    other = []

    def elsewhere():
        other.append(add(1, 1).state)  # lazy on this thread: serial mode is per thread

    with tg.serial():
        with tg.serial():
            assert add(1, 1).done()
        assert add(2, 2).done()
        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
    assert other == ["new"]
    assert add(3, 3).state == "new"
