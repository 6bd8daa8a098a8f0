"""compute / gather / Scheduler.compute from outside the workers: values, failure semantics
(original exception and traceback, dependents never run, fail fast), timeouts, Ctrl-C."""
import _thread
import threading
import time
import traceback

import pytest

import taskgraph as tg

pytestmark = pytest.mark.timeout(120)

# ---------------------------------------------------------------------- failures
class Boom(Exception):
    pass


@tg.task
def _fails(x):
    raise Boom(f"bad {x}")  # the line the traceback must show


@tg.task
def _ok(x):
    return x


def test_failure_propagates_original_type_traceback_and_note(sched):
    a = _fails(1)
    b = _ok(a)
    with pytest.raises(Boom, match="bad 1") as ei:
        sched.compute(b)
    tb = "".join(traceback.format_exception(ei.value))
    assert "_fails" in tb and 'raise Boom(f"bad {x}")' in tb  # the user's frame and line
    notes = ei.value.__notes__
    assert any(a.key in n and "worker" in n for n in notes)
    assert a.state == "failed"
    assert b.state == "cancelled"  # the dependent never ran
    with pytest.raises(tg.CancelledError, match=a.key):
        b.result()
    with pytest.raises(Boom):
        a.result()
    assert isinstance(a.exception(), Boom)
    assert isinstance(b.exception(), tg.CancelledError)
    # the scheduler is still usable
    assert sched.compute(_ok(5)) == 5


def test_dependents_of_a_failure_never_run(sched):
    ran = []

    @tg.task
    def rec(x, *_):
        ran.append(x)
        return x

    bad = _fails(0)
    level1 = [rec(i, bad) for i in range(5)]
    level2 = [rec(100 + i, level1[i]) for i in range(5)]
    with pytest.raises(Boom):
        sched.compute(*level2)
    assert ran == []
    states = [n.state for n in level1 + level2]
    assert states == ["cancelled"] * 10, states


def test_fail_fast_cancels_tasks_not_started(sched):
    started = []

    @tg.task
    def slow(i):
        started.append(i)
        time.sleep(0.01)
        return i

    @tg.task
    def early_fail():
        raise Boom("early")

    nodes = [early_fail()] + [slow(i) for i in range(300)]
    with pytest.raises(Boom, match="early"):
        sched.compute(*nodes)
    assert len(started) < 300  # did not run everything (counted, not timed)
    cancelled = [n for n in nodes[1:] if n.state == "cancelled"]
    assert len(cancelled) == 300 - len(started)
    with pytest.raises(tg.CancelledError, match="early_fail"):
        cancelled[0].result()
    assert sched.compute(_ok(1)) == 1


def test_result_timeout_raises_timeout_error_and_work_goes_on():
    ev = threading.Event()

    @tg.task
    def waits():
        ev.wait(10)
        return "finished"

    with tg.Scheduler(workers=2) as s:
        n = waits()
        with pytest.raises(TimeoutError):
            s.compute(n, timeout=0.2)
        with pytest.raises(TimeoutError):
            n.result(timeout=0.1)
        ev.set()
        assert n.result(timeout=10) == "finished"


# ---------------------------------------------------------------------- Ctrl-C
@pytest.mark.thread_unsafe(reason="Ctrl-C (_thread.interrupt_main) reaches the main thread only")
@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="needs the main thread")
def test_ctrl_c_returns_quickly_cancels_and_leaves_the_scheduler_usable():
    started = []

    @tg.task
    def slow(i):
        started.append(i)
        time.sleep(0.05)
        return i

    with tg.Scheduler(workers=2, spares=0) as s:  # no spares: the sleeps hold the workers
        nodes = [slow(i) for i in range(400)]  # 10 s of work on 2 workers
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            s.compute(*nodes)
        elapsed = time.monotonic() - t0
        timer.join()
        assert elapsed < 0.3 + 3.0  # a liveness bound (no hang); the latency is a benchmark
        for n in nodes:  # the two running tasks finish; nothing else starts
            if not n.done():
                n.exception(timeout=10)
        # Counted, not timed: every node that did not start was cancelled, and none started
        # after the compute returned (each worker starts at most one task per 50 ms).
        assert sum(n.state == "cancelled" for n in nodes) == 400 - len(started) > 0
        assert len(started) <= 2 * (elapsed / 0.05 + 1)
        with pytest.raises(tg.CancelledError, match="KeyboardInterrupt"):
            next(n for n in nodes if n.state == "cancelled").result()
        assert s.compute(slow(-1)) == -1  # still usable


def test_the_compute_loops_over_nodes_in_c_keep_exceptions_semantics():
    """core.not_done / core.first_error (runs.py's per-node loops, in C): the unfinished nodes
    in order; the first exception in order, every outcome marked seen; bad input refused."""
    import taskgraph as tg
    from taskgraph._native import core

    @tg.task
    def ok(x):
        return x

    @tg.task
    def bad(x):
        raise KeyError(x)

    a, b, c, d = ok(1), bad(2), bad(3), ok(4)
    assert core.not_done([a, b, c, d]) == [a, b, c, d]
    with tg.Scheduler(1) as s:
        with pytest.raises(KeyError):
            s.compute([a, b, c])
    assert core.not_done([a, b, c, d]) == [d]
    first = core.first_error([a, b, c])  # b's, whichever of b and c failed first
    assert first is not None and first is b.exception() and c.exception() is not None
    assert core.first_error([a]) is None
    with pytest.raises(TypeError):
        core.first_error([a, 5])
    # A tuple (what core.scan returns) is read in place: the same tuple when none has finished.
    assert core.not_done((a, d)) == (d,) and core.first_error((a, b)) is b.exception()
    pending = (d, ok(5))
    assert core.not_done(pending) is pending
    with pytest.raises(TypeError):
        core.not_done({a})
    with pytest.raises(TypeError):
        core.not_done((a, 5))
