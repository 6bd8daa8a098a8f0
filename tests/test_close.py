"""Scheduler.close() called from anywhere (scheduler.py's close, engine.c's drain): from one of
its own worker threads outside a task (a done callback, a finalizer a worker runs) it refuses
with TaskgraphError before anything changes; re-entered by the thread that is closing it (a
callback or finalizer run by its drain) it returns at once; at exit it never hangs. The cases
inside a task, from other threads and under Ctrl-C are in test_scheduler.py, test_join.py and
test_interrupts.py."""
import sys
import threading
import time

import pytest

import taskgraph as tg
from helpers import run_script

pytestmark = pytest.mark.timeout(120)


@tg.task
def work(i):
    time.sleep(0.001)
    return i


@tg.task
def quick(x=None):
    return 1


def unraisables(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    return seen


@pytest.mark.thread_unsafe(reason="replaces sys.unraisablehook")
def test_close_from_a_done_callback_on_a_worker_refuses_and_the_compute_goes_on(monkeypatch):
    # Review 2: the check for "its own task" missed a callback (it runs as no task on the
    # worker): close() shut the pool down, then failed to join its own thread before draining,
    # and the compute waited forever for the tasks left in the queue.
    seen = unraisables(monkeypatch)
    s = tg.Scheduler(workers=2)
    try:
        nodes = [work(i) for i in range(500)]
        nodes[0].add_done_callback(lambda n: s.close())
        out = {}
        th = threading.Thread(target=lambda: out.setdefault("value", s.compute(nodes)))
        th.start()
        th.join(60)
        assert not th.is_alive(), "compute() hung after close() in a done callback"
        assert out["value"] == list(range(500))
        assert len(seen) == 1 and isinstance(seen[0], tg.TaskgraphError)
        assert "close() called on its own worker thread" in str(seen[0])
        assert not s.closed  # refused before anything changed: still usable
        assert s.compute(quick()) == 1
    finally:
        s.close()


class CloseOnDrop:
    def __init__(self, sched):
        self.sched = sched

    def __del__(self):
        self.sched.close()


@tg.task
def drop_a_closer_on_the_worker(sched):
    return quick(CloseOnDrop(sched)).result()  # made here: freed by this worker, as no task


@pytest.mark.thread_unsafe(reason="replaces sys.unraisablehook")
def test_close_from_a_finalizer_run_by_a_worker_refuses(monkeypatch):
    seen = unraisables(monkeypatch)
    with tg.Scheduler(workers=1) as s:
        assert s.compute(drop_a_closer_on_the_worker(s)) == 1
        assert not s.closed
        assert len(seen) == 1 and isinstance(seen[0], tg.TaskgraphError), seen


def test_close_from_a_callback_run_by_its_own_drain_returns():
    # Review 2: close()'s drain finishes what was still queued as cancelled, on the closing
    # thread; a callback there that calls close() blocked on the close lock that very thread
    # held: close() never returned, and the atexit hook then hung the interpreter's exit. In a
    # process of its own: the exit is checked too.
    r = run_script("""
        import threading, time
        import taskgraph as tg

        @tg.task
        def slow(release):
            release.wait(30)

        @tg.task
        def quick():
            return 1

        s = tg.Scheduler(workers=1)
        release = threading.Event()
        calls = []
        with tg.use_scheduler(s):
            busy = slow(release)
            tg.wait([busy], timeout=0)  # started, not waited for
            while busy.state != "running":
                time.sleep(0.001)
            queued = quick()
            tg.wait([queued], timeout=0)  # queued behind `busy`
        queued.add_done_callback(lambda n: calls.append(s.close()))
        t = threading.Thread(target=s.close)
        t.start()
        while not s._engine.is_shutdown:  # the worker leaves `queued` to the drain
            time.sleep(0.001)
        release.set()
        t.join(30)
        assert not t.is_alive(), "close() hung"
        assert queued.state == "cancelled" and calls == [None], (queued.state, calls)
        print("ok")
        """, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_close_from_a_finalizer_run_by_its_own_drain_returns():
    # The finalizer of an input the closing thread made runs there, in the drain (free-threaded
    # CPython frees an object on the thread that made it): close() re-entered, returns at once.
    r = run_script("""
        import threading, time
        import taskgraph as tg

        @tg.task
        def slow(release):
            release.wait(30)
            return "slow"

        @tg.task
        def quick(x):
            return 1

        class CloseOnDrop:
            def __init__(self, sched):
                self.sched = sched

            def __del__(self):
                calls.append(self.sched.close())

        s = tg.Scheduler(workers=1)
        release = threading.Event()
        calls = []
        with tg.use_scheduler(s):
            running = slow(release)
            tg.wait([running], timeout=0)
            while running.state != "running":
                time.sleep(0.001)
            queued = quick(CloseOnDrop(s))  # made here, freed by the drain here
            tg.wait([queued], timeout=0)

        def release_once_closing():
            while not s._engine.is_shutdown:  # the worker leaves `queued` to the drain
                time.sleep(0.001)
            release.set()

        threading.Thread(target=release_once_closing).start()
        s.close()  # this thread: the drain frees the input above, whose finalizer calls close()
        assert running.result() == "slow" and queued.state == "cancelled", queued.state
        assert calls == [None], calls
        print("ok")
        """, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
