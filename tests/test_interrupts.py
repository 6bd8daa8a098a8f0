"""Ctrl-C anywhere: a lazy DAG, deep fork-join, the caller inside result() of a fork-join
tree whose workers are in helping joins, and close(). Each time KeyboardInterrupt comes back
promptly (the bound asserted here only tells a hang from a delay: the latency itself is
measured by benchmarks/reliability.py), the threads are back to the baseline after close, and
the next compute on a new scheduler is correct. Ctrl-C is simulated with
_thread.interrupt_main, which only reaches the main thread."""
import _thread
import threading
import time

import pytest

import taskgraph as tg
from helpers import fib, fib_serial

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                       reason="Ctrl-C reaches the main thread only"),
    pytest.mark.thread_unsafe(reason="Ctrl-C (_thread.interrupt_main) reaches the main thread only"),
]
BOUND = 3.0  # seconds: far above the measured latency; below it means "no hang"


@tg.task
def slow_leaf(n):
    time.sleep(0.002)
    return n


@tg.task(name="sfib")
def slow_fib(n):
    if n < 2:
        return slow_leaf(n).result()
    a, b = slow_fib(n - 1), slow_fib(n - 2)
    return a.result() + b.result()


@tg.task
def deep(d):
    return 0 if d == 0 else deep(d - 1).result() + (time.sleep(0.001) or 1)


def _baseline():
    return {t.ident for t in threading.enumerate()}


def _interrupt_after(seconds):
    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.start()
    return timer


def _after(s, before):
    """close() brings the threads back to the baseline; a new scheduler computes correctly."""
    s.close()
    left = [t.name for t in threading.enumerate()
            if t.ident not in before and t.name.startswith(f"taskgraph-{s.number}-")]
    assert not left, left
    assert tg.compute(fib(15), workers=2) == fib_serial(15)


@pytest.mark.parametrize("what", ["lazy DAG", "deep fork-join", "chain of joins"])
def test_ctrl_c_during_a_compute(what):
    before = _baseline()
    s = tg.Scheduler(workers=2)
    work = {"lazy DAG": lambda: [slow_leaf(i) for i in range(3000)],
            "deep fork-join": lambda: slow_fib(20),
            "chain of joins": lambda: deep(800)}[what]()
    timer = _interrupt_after(0.3)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        s.compute(work)
    assert time.monotonic() - t0 < 0.3 + BOUND
    timer.join()
    _after(s, before)


def test_ctrl_c_in_result_of_a_fork_join_tree_with_helping_joins():
    before = _baseline()
    s = tg.Scheduler(workers=2)
    root = slow_fib(20)  # its workers spend their time inside joins, helping
    timer = _interrupt_after(0.3)
    t0 = time.monotonic()
    with tg.use_scheduler(s), pytest.raises(KeyboardInterrupt):
        root.result()
    assert time.monotonic() - t0 < 0.3 + BOUND
    timer.join()
    _after(s, before)
    assert root.done()  # the interrupted compute finished (cancelled) everything


def test_ctrl_c_during_close_then_close_again():
    before = _baseline()
    s = tg.Scheduler(workers=2)
    release = threading.Event()

    @tg.task
    def stubborn():
        release.wait(30)  # not cooperative: close() must wait for it
        return 1

    n = stubborn()
    th = threading.Thread(target=lambda: s.compute(n))
    th.start()
    while n.state != "running":
        time.sleep(0.001)
    timer = _interrupt_after(0.3)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        s.close()
    assert time.monotonic() - t0 < 0.3 + BOUND
    timer.join()
    assert s.closed
    with pytest.raises(tg.SchedulerClosedError):
        s.compute(slow_leaf(1))
    release.set()
    th.join(30)
    assert n.result() == 1
    _after(s, before)  # the second close() finishes the job
