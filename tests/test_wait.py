"""tg.wait and tg.as_completed: concurrent.futures' semantics for Nodes, lazy nodes started
without blocking, timeouts, errors, and the join inside a task."""
import concurrent.futures as cf
import threading

import pytest

import taskgraph as tg
from future_tasks import add, fail, hold

pytestmark = pytest.mark.timeout(120)


@tg.task
def waits_inside(how):
    kids = [add(i, i) for i in range(6)]
    if how == "as_completed":
        return sorted(n.result() for n in tg.as_completed(kids))
    done, not_done = tg.wait(kids, return_when=how)
    return len(done) >= 1, all(n.done() for n in done), not_done.isdisjoint(done)


@tg.task
def waits_inside_with_timeout():
    tg.wait([add(1, 1)], timeout=1)


def test_the_constants_are_concurrent_futures_own():
    assert (tg.FIRST_COMPLETED, tg.FIRST_EXCEPTION, tg.ALL_COMPLETED) == \
        (cf.FIRST_COMPLETED, cf.FIRST_EXCEPTION, cf.ALL_COMPLETED)


def test_all_completed_starts_lazy_nodes(sched):
    with tg.use_scheduler(sched):
        x = add(1, 2)
        nodes = [add(x, 1), x, fail("bad")]
        done, not_done = tg.wait(nodes)
    assert done == set(nodes) and not_done == set()
    assert [n.state for n in nodes] == ["done", "done", "failed"]


@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_first_completed_returns_while_others_run(sched):
    ev = threading.Event()
    with tg.use_scheduler(sched):
        quick, slow = add(1, 1), hold(ev)  # started in this order (one worker: quick first)
        done, not_done = tg.wait([quick, slow], return_when=tg.FIRST_COMPLETED)
        assert quick in done and slow in not_done
        ev.set()
        assert tg.wait([slow]).done == {slow}


@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_first_exception_and_cancelled_nodes(sched):
    ev = threading.Event()
    with tg.use_scheduler(sched):
        bad, slow = fail("x"), hold(ev)
        done, not_done = tg.wait([bad, slow], return_when=tg.FIRST_EXCEPTION)
        assert bad in done and slow in not_done
        c = add(1, 1)
        c.cancel()
        # As concurrent.futures: a cancelled node is no exception; ALL_COMPLETED then.
        done, not_done = tg.wait([c], return_when=tg.FIRST_EXCEPTION)
        assert done == {c}
        ev.set()
        tg.wait([slow])


@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_timeout_returns_what_is_done_and_cancels_nothing(sched):
    ev = threading.Event()
    with tg.use_scheduler(sched):
        slow = hold(ev, 3)
        done, not_done = tg.wait([slow], timeout=0.01)
        assert done == set() and not_done == {slow}
        assert not slow.cancelled()
        ev.set()
        assert slow.result() == 3


@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_wait_does_not_lose_a_node_finishing_meanwhile(sched):
    """The node finishes while wait() registers itself: it returns anyway."""
    for _ in range(200):
        ev = threading.Event()
        with tg.use_scheduler(sched):
            n = hold(ev, 1)
            tg.wait([n], timeout=0)
            ev.set()
            done, _ = tg.wait([n])  # a missed wake-up hangs here: the test's timeout fails it
        assert done == {n}


@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_as_completed_yields_in_completion_order(sched):
    ev = threading.Event()
    with tg.use_scheduler(sched):
        first = add(0, 0)
        first.result()
        quick, slow = add(1, 1), hold(ev, "slow")
        it = tg.as_completed([first, quick, slow, quick])
        assert next(it) is first  # finished already: first
        assert next(it) is quick
        ev.set()
        assert next(it) is slow
        with pytest.raises(StopIteration):
            next(it)


@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_as_completed_timeout(sched):
    ev = threading.Event()
    with tg.use_scheduler(sched):
        quick, slow = add(1, 1), hold(ev)
        quick.result()  # finished before the call: no race with the timeout on a busy machine
        it = tg.as_completed([quick, slow], timeout=0.05)
        assert next(it) is quick
        with pytest.raises(TimeoutError, match=r"1 \(of 2\) nodes unfinished"):
            next(it)
        assert not slow.cancelled()
        ev.set()
        tg.wait([slow])


@pytest.mark.parametrize("how", [tg.ALL_COMPLETED, tg.FIRST_COMPLETED, tg.FIRST_EXCEPTION,
                                 "as_completed"])
def test_inside_a_task_it_joins(sched, how):
    out = sched.compute(waits_inside(how))
    assert out == ([0, 2, 4, 6, 8, 10] if how == "as_completed" else (True, True, True))


def test_timeout_inside_a_task_is_refused(sched):
    with pytest.raises(tg.TaskgraphError, match="timeout"):
        sched.compute(waits_inside_with_timeout())


def test_bad_arguments():
    n = add(1, 1)
    with pytest.raises(TypeError, match=r"tg.wait\(\[node\]\)"):
        tg.wait(n)
    with pytest.raises(TypeError, match="Nodes only.*int 3"):
        tg.wait([n, 3])
    with pytest.raises(TypeError, match="iterable"):
        tg.as_completed(5)
    with pytest.raises(ValueError, match="return_when"):
        tg.wait([n], return_when="SOMETIME")
    with pytest.raises(ValueError, match="timeout"):
        tg.wait([n], timeout=-1)
    with pytest.raises(TypeError, match="timeout"):
        tg.as_completed([n], timeout="1")
    assert n.state == "new"  # nothing was started


def test_serial_mode_runs_lazy_nodes_at_once():
    with tg.serial():
        n = add(2, 2)
        done, not_done = tg.wait([n], timeout=0)
    assert done == {n} and n.result() == 4


@pytest.mark.parametrize("timeout", [float("inf"), 1e300])
def test_an_endless_timeout_waits_like_none(sched, timeout):
    # Review 2: threading's wait refuses timeouts beyond TIMEOUT_MAX (OverflowError), raised
    # after the lazy nodes were started; compute(timeout=inf) accepts it, so does tg.wait now.
    with tg.use_scheduler(sched):
        n, m = add(1, 2), add(3, 4)
        done, not_done = tg.wait([n], timeout=timeout)
        assert done == {n} and not not_done and n.result() == 3
        assert list(tg.as_completed([m], timeout=timeout)) == [m] and m.result() == 7


@tg.task
def waits_for_a_failing_child_without_reading_it(how):
    bad = fail("unread")
    if how == "wait":
        tg.wait([bad])
    else:
        list(tg.as_completed([bad]))
    return "parent ok"


@pytest.mark.parametrize("how", ["wait", "as_completed"])
def test_waiting_inside_a_task_does_not_count_as_reading_a_failure(sched, how):
    # As concurrent.futures.wait: waiting observes no exception. A child's failure that the
    # task never reads still fails it (its sync reports it: no error is lost).
    with pytest.raises(ValueError, match="unread"):
        sched.compute(waits_for_a_failing_child_without_reading_it(how))
