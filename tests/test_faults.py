"""Internal faults (injected): the scheduler is marked broken, like concurrent.futures'
BrokenThreadPool. Every pending node is finished at once with an error saying why, nothing
hangs, new work is refused, close() still works and leaves no thread behind."""
import threading
import time

import pytest

import taskgraph as tg
from helpers import fib, needs_faults
from taskgraph._native import core

pytestmark = [
    needs_faults,
    pytest.mark.timeout(120),
    pytest.mark.thread_unsafe(reason="injected faults are process-wide: they would hit other threads' tests"),
]


@tg.task
def slow(i, seconds=0.002):
    time.sleep(seconds)
    return i


@tg.task
def total(xs):
    return sum(xs)


class armed:
    """Arms a fault site for the block (the n-th occurrence fails), disarms after."""

    def __init__(self, site, n):
        self.site, self.n = site, n

    def __enter__(self):
        core._arm_fault(self.site, self.n)

    def __exit__(self, *exc):
        core._arm_fault(self.site, 0)


def _threads(s):
    return [t for t in threading.enumerate() if t.name.startswith(f"taskgraph-{s.number}-")]


def _check_broken_then_closed(s, nodes, what):
    assert s.broken is not None and what in s.broken
    assert all(n.done() for n in nodes)  # nothing left pending
    for n in nodes:
        if n.state == "cancelled":
            with pytest.raises(tg.CancelledError) as ei:
                n.result()
            assert isinstance(ei.value.__cause__, tg.BrokenSchedulerError) or \
                isinstance(ei.value.__cause__, tg.SchedulerClosedError) or ei.value.__cause__ is None
    with pytest.raises(tg.BrokenSchedulerError, match="is broken: .*" + what):
        s.compute(slow(1))
    s.close()
    assert s.closed and not _threads(s)
    assert tg.compute(fib(12), workers=2) == 144  # a new scheduler works


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failure_storing_a_result_breaks_the_scheduler(workers):
    s = tg.Scheduler(workers=workers)
    nodes = [slow(i) for i in range(300)]
    with armed(core.FAULT_RESULT, 40):
        with pytest.raises(tg.BrokenSchedulerError, match="storing the result of task slow-"):
            s.compute(total(nodes))
    _check_broken_then_closed(s, nodes, "storing the result")


def test_a_failing_trace_observer_breaks_the_scheduler():
    s = tg.Scheduler(workers=2)
    nodes = [slow(i) for i in range(300)]
    with tg.trace() as tr, armed(core.FAULT_RECORD, 25):
        with pytest.raises(tg.BrokenSchedulerError, match="the trace recorder failed"):
            s.compute(nodes)
    assert len(tr.records) >= 24  # the records before the fault are kept
    _check_broken_then_closed(s, nodes, "trace recorder failed")


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_a_worker_thread_dying_breaks_the_scheduler_without_a_hang(workers):
    s = tg.Scheduler(workers=workers)
    nodes = [slow(i) for i in range(400)]
    with armed(core.FAULT_WORKER, 30):
        with pytest.raises(tg.BrokenSchedulerError, match=r"worker \d+ of .* stopped"):
            s.compute(nodes)
    _check_broken_then_closed(s, nodes, "stopped")


def test_a_worker_dying_under_fork_join_fails_the_waiting_tasks():
    s = tg.Scheduler(workers=2)
    roots = [fib(14) for _ in range(40)]  # fork-join trees: the other worker is in joins
    with armed(core.FAULT_WORKER, 3):  # counted between top-level tasks (not inside joins)
        with pytest.raises(tg.BrokenSchedulerError, match="stopped"):
            s.compute(roots)
    assert all(r.done() for r in roots)
    assert s.broken is not None
    s.close()
    assert not _threads(s)


def test_another_thread_waiting_on_a_broken_scheduler_gets_the_error():
    s = tg.Scheduler(workers=2)
    gate = threading.Event()

    @tg.task
    def waits():
        gate.wait(30)
        return 1

    other = [waits()] + [slow(i) for i in range(50)]
    out = {}

    def waiter():
        try:
            s.compute(other)
        except BaseException as e:  # noqa: BLE001 - inspected below
            out["err"] = e

    th = threading.Thread(target=waiter)
    th.start()
    while other[0].state != "running":
        time.sleep(0.001)
    with armed(core.FAULT_RESULT, 1):
        with pytest.raises(tg.BrokenSchedulerError):
            s.compute(slow(99))
    gate.set()
    th.join(30)
    assert isinstance(out["err"], tg.BrokenSchedulerError)
    assert all(n.done() for n in other)
    s.close()
