"""Joins and spawns inside a running task (csrc/py/join.c): chains of joins as deep as plain
recursion, deeper ones refused with RecursionError, errors and internal failures at any depth,
and joins of nodes owned by another scheduler."""
import gc
import sys
import threading
import time
import weakref

import pytest

import taskgraph as tg
from helpers import needs_faults, run_script, scaled
from taskgraph._native import core

pytestmark = pytest.mark.timeout(120)


# ---------------------------------------------------------------------- deep recursion
@tg.task
def chain(d):
    """Each task spawns one child and joins it: recursion through the scheduler."""
    if d == 0:
        return 0
    return chain(d - 1).result() + 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_chain_of_joins_as_deep_as_plain_recursion_completes(workers):
    # 900 levels: what plain recursion allows under the default recursion limit (1000).
    assert sys.getrecursionlimit() == 1000
    with tg.Scheduler(workers=workers) as s:
        assert s.compute(chain(900)) == 900


@pytest.mark.parametrize("workers", [1, 2])
def test_a_far_deeper_chain_raises_recursion_error_quickly(workers):
    with tg.Scheduler(workers=workers) as s:
        t0 = time.monotonic()
        with pytest.raises(RecursionError):
            s.compute(chain(50_000))
        assert time.monotonic() - t0 < 10
        assert s.compute(chain(50)) == 50  # usable afterwards
    t0 = time.monotonic()
    with pytest.raises(RecursionError):
        chain(50_000).result()  # the same through result(), on the default scheduler
    assert time.monotonic() - t0 < 10


class Injected(Exception):
    pass


@tg.task
def chain_failing_at(d, at):
    if d == at:
        raise Injected(d)
    if d == 0:
        return 0
    return chain_failing_at(d - 1, at).result() + 1


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_at_any_depth_of_a_chain_of_joins_propagates(workers):
    depth = 300
    with tg.Scheduler(workers=workers) as s:
        for at in range(0, depth + 1, scaled(3, 30)):
            with pytest.raises(Injected) as ei:
                s.compute(chain_failing_at(depth, at))
            assert ei.value.args == (at,)
        assert s.compute(chain(100)) == 100


@needs_faults
@pytest.mark.thread_unsafe(reason="injected faults are process-wide")
@pytest.mark.parametrize("site", ["FAULT_SPAWN", "FAULT_NODE_ALLOC"])
@pytest.mark.parametrize("workers", [1, 2])
def test_an_internal_failure_at_any_depth_of_a_join_never_hangs(site, workers):
    """Out of memory (injected) while spawning at depth k: the chain fails with MemoryError,
    every join returns, and the scheduler stays usable."""
    fault = getattr(core, site)
    with tg.Scheduler(workers=workers) as s:
        for k in range(1, 200, scaled(7, 40)):
            core._arm_fault(fault, k)
            try:
                with pytest.raises(MemoryError):
                    s.compute(chain(250))
            finally:
                core._arm_fault(fault, 0)
            assert s.compute(chain(30)) == 30


@needs_faults
@pytest.mark.thread_unsafe(reason="injected faults are process-wide")
def test_spawn_out_of_memory_fails_that_node_only():
    @tg.task
    def leaf(i):
        return i

    @tg.task
    def parent():
        kids = [leaf(i) for i in range(10)]
        out = []
        for k in kids:
            try:
                out.append(k.result())
            except MemoryError:
                out.append("oom")
        return out

    with tg.Scheduler(workers=1) as s:
        core._arm_fault(core.FAULT_SPAWN, 4)  # the 4th spawn cannot be queued
        try:
            assert s.compute(parent()) == [0, 1, 2, "oom", 4, 5, 6, 7, 8, 9]
        finally:
            core._arm_fault(core.FAULT_SPAWN, 0)


# ---------------------------------------------------------------------- several schedulers
def test_joining_a_node_of_another_scheduler_inside_a_task_does_not_hang():
    with tg.Scheduler(workers=1) as a, tg.Scheduler(workers=1) as b:
        @tg.task
        def slow(x):
            time.sleep(0.05)
            return x

        @tg.task
        def waits_for(n):
            return n.result() + 1  # n runs on scheduler b

        @tg.task
        def gathers(n):
            return tg.gather([n.node])[0] + 2  # same through gather/compute

        nb = slow(40)
        t = threading.Thread(target=b.compute, args=(nb,))
        t.start()
        while nb.state == "new":
            time.sleep(0.001)
        assert a.compute(waits_for(_ValueHolder(nb))) == 41
        nb2 = slow(50)
        t2 = threading.Thread(target=b.compute, args=(nb2,))
        t2.start()
        while nb2.state == "new":
            time.sleep(0.001)
        assert a.compute(gathers(_ValueHolder(nb2))) == 52
        t.join()
        t2.join()
        # compute(scheduler=b) from inside a task of a
        @tg.task
        def on_other():
            return tg.compute(slow(7), scheduler=b)

        assert a.compute(on_other()) == 7


class _ValueHolder:
    """Hides a Node from the argument scan, so that the task receives the Node itself."""

    def __init__(self, node):
        self.node = node

    def __getattr__(self, name):
        return getattr(self.node, name)


def test_close_while_a_task_waits_in_a_join_ends_everything():
    import threading as th
    started = th.Event()

    @tg.task
    def sleeper():
        started.set()
        time.sleep(0.3)
        return 1

    @tg.task
    def parent():
        kids = [sleeper() for _ in range(20)]
        return sum(k.result() for k in kids)

    s = tg.Scheduler(workers=2)
    errors = []

    def run():
        try:
            s.compute(parent())
        except BaseException as e:  # noqa: BLE001 - recorded for the assertion
            errors.append(e)

    t = th.Thread(target=run)
    t.start()
    started.wait(10)
    s.close()
    t.join(10)
    assert not t.is_alive()
    assert errors and isinstance(errors[0], (tg.CancelledError, tg.SchedulerClosedError))


def test_a_sync_cut_short_by_close_still_holds_the_compute_until_its_children_end():
    """Spawned children are covered by their parent, not counted in the run (no shared counter
    on the fork-join path): when close() cuts the parent's sync short, the parent holds the run
    until the queues are drained, so compute() never returns while a child still runs."""
    started, release = threading.Event(), threading.Event()
    kids = []

    @tg.task
    def slow():
        started.set()
        release.wait(10)
        return 1

    @tg.task
    def quick(i):
        return i

    @tg.task
    def parent():
        kids.append(slow())
        started.wait(10)  # the other worker has taken it
        kids.extend(quick(i) for i in range(50))
        return "parent"  # the sync joins the children: cut short by close()

    s = tg.Scheduler(workers=2)
    outcome = []

    def run():
        try:
            outcome.append(s.compute(parent()))
        except BaseException as e:  # noqa: BLE001 - recorded for the assertion
            outcome.append(e)
        outcome.append([k.done() for k in kids])

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(10)
    closer = threading.Thread(target=s.close)
    closer.start()
    deadline = time.monotonic() + 10
    while not s._engine.is_shutdown and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.2)  # the parent's join sees the shutdown while `slow` still runs
    release.set()
    closer.join(10)
    t.join(10)
    assert not t.is_alive() and not closer.is_alive()
    assert outcome[-1] == [True] * len(kids), "compute returned before every child ended"
    assert kids[0].result() == 1  # the running child finished normally


# ---------------------------------------------------------------------- pruning the children
class _Kept:
    alive = weakref.WeakSet()

    def __init__(self):
        _Kept.alive.add(self)


@tg.task
def _kept():
    return _Kept()


@tg.task
def _spawn_and_wait(n):
    """Spawns n children one at a time and waits for each without reading it (tg.wait), so
    only the pruning of the list of children can let go of them before the sync; the most
    results alive at once."""
    peak = 0
    for _ in range(n):
        tg.wait([_kept()])
        peak = max(peak, len(_Kept.alive))
    return peak


@pytest.mark.thread_unsafe(reason="counts the results alive in the whole process")
def test_children_finished_on_the_spawning_worker_are_pruned_at_the_next_prune():
    # The walk at 64, 128, 256, 512 children takes the finished ones off the list. It is
    # skipped only while no task has left the worker's deque since the last walk (none of the
    # children can have finished then): here each child ran on the spawner's own worker in
    # between, so every walk happens, and at most 511 of the 1,000 results are ever alive
    # (1,000 if the walks were skipped).
    with tg.Scheduler(workers=1) as s:
        peak = s.compute(_spawn_and_wait(1000))
    assert peak <= 512, peak
    gc.collect()
    assert len(_Kept.alive) == 0


def test_a_finalizer_run_by_the_pruning_of_children_cannot_free_what_the_prune_walks():
    # Review 2: the 64th spawn prunes the finished children; dropping one ran a finalizer with
    # the parent's task current and a pointer into the list held, the finalizer spawned into
    # that parent, and the nested prune freed the child the outer one stood on (use-after-free,
    # caught by PYTHONMALLOC=debug's poisoned memory). Now the pruned children are dropped after
    # the walk, as no task (tests/test_no_task.py checks the finalizer's task call is lazy).
    r = run_script("""
        import threading, time
        import taskgraph as tg

        made = []
        release, started = threading.Event(), threading.Event()

        @tg.task
        def noop():
            return None

        @tg.task
        def slow():  # running on the other worker while the 64th spawn prunes
            started.set()
            release.wait(30)

        @tg.task
        def ident(x):
            return x

        class Bomb:
            def __del__(self):  # run by the prune, on the parent's worker
                release.set()
                time.sleep(0.1)  # `slow` finishes meanwhile
                made.append(noop())

        @tg.task
        def parent():
            b = Bomb()
            done = threading.Event()
            x = ident(b)  # finished by the other worker while this one waits
            x.add_done_callback(lambda n: done.set())
            del b, x
            assert done.wait(30)
            slow()
            assert started.wait(30)
            for _ in range(62):  # children 3..64: the 64th spawn prunes
                noop()
            return "ok"

        for _ in range(2):
            release.clear(), started.clear()
            with tg.Scheduler(workers=2) as s:
                assert s.compute(parent()) == "ok"
        assert made and all(n.state == "new" and n.parent is None for n in made), made
        print("ok")
        """, env_extra={"PYTHONMALLOC": "debug"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
