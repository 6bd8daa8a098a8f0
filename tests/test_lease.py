"""Leases (csrc/py/lease.h): the nodes a worker spawns hold that worker's lease of their Task,
not references to the Task's function, name and options, and a worker lets its leases go
when it has nothing to run; a Task of a top-level function is counted the way CPython counts
the function (immortal first Task on 3.13t, deferred reference counting on 3.14t)."""
import functools
import gc
import sys
import threading
import time
import weakref

import pytest

import taskgraph as tg
from taskgraph._native import core

FT_314 = bool(core.FREE_THREADED) and sys.version_info >= (3, 14)


def _double(x):
    return 2 * x


def wait_for(cond, seconds=30.0):
    """Polls cond until it holds (True) or the time is up (False): a worker lets go of its
    leases when it next runs dry, which the test thread cannot wait for directly."""
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            return False
        gc.collect()
        time.sleep(0.005)
    return True


def test_spawned_nodes_share_the_workers_lease_instead_of_counting_the_function():
    fn = functools.partial(_double)  # a plain reference count: neither immortal nor deferred
    leaf = tg.task(fn, name="leaf")
    held = []
    before = {}

    @tg.task
    def parent(n):
        before["fn"], before["task"] = sys.getrefcount(fn), sys.getrefcount(leaf)
        kids = [leaf(i) for i in range(n)]  # spawned on this worker, all alive at once
        held.append((sys.getrefcount(fn), sys.getrefcount(leaf)))
        return sum(k.result() for k in kids)

    with tg.Scheduler(workers=2) as s:
        assert s.compute(parent(1000)) == 999 * 1000
    fn_after, task_after = held[0]
    # Per node the function would have gained a reference (1000 more); with the lease, the
    # Task gains one for the lease and the function none.
    assert fn_after == before["fn"], (before, held)
    assert task_after - before["task"] <= 2, (before, held)


def test_a_worker_lets_its_leases_go_when_it_runs_dry_so_a_dropped_task_is_freed():
    def make():
        def inner(x):  # a nested function: its Task is freed when its last reference goes
            return x + 1
        return tg.task(inner)

    t = make()
    ref = weakref.ref(t)

    @tg.task
    def parent(task):
        return sum(task(i).result() for i in range(50))

    s = tg.Scheduler(workers=2)
    try:
        assert s.compute(parent(t)) == sum(range(1, 51))
        del t
        # The workers are still alive: the lease of the worker that ran `parent` was dropped
        # when it ran dry after the compute.
        assert wait_for(lambda: ref() is None), "the Task outlived its computes"
    finally:
        s.close()


def test_leases_are_dropped_at_worker_exit():
    def make():
        def inner(x):
            return x
        return tg.task(inner)

    t = make()
    ref = weakref.ref(t)
    with tg.Scheduler(workers=1) as s:
        assert s.compute(tg.task(lambda task: task(3).result())(t)) == 3
    del t
    gc.collect()
    assert ref() is None


def test_a_task_dropped_while_a_worker_still_leases_it_stays_valid_for_its_nodes():
    # The node holds the lease, the lease the Task, the Task the function: reading the node's
    # name and running it after every other reference is gone works.
    release = threading.Event()
    out = []

    @tg.task
    def parent():
        def inner(x):
            return x * 3
        task = tg.task(inner, name="tripled")
        kid = task(7)
        del task
        gc.collect()
        release.wait(5)
        out.append(kid.key.split("-")[0])
        return kid.result()

    with tg.Scheduler(workers=2) as s:
        node = parent()
        release.set()
        assert s.compute(node) == 21
    assert out == ["tripled"]


@pytest.mark.skipif(not FT_314, reason="deferred reference counting is CPython 3.14t's")
def test_a_task_of_a_top_level_function_is_counted_as_cpython_counts_the_function():
    ns = {}
    exec("def top(x):\n    return x\n", ns)
    top = ns["top"]
    task = tg.task(top)
    # Deferred reference counting: the count carries a large bias, as the function's does.
    assert sys.getrefcount(task) > 1 << 40 and sys.getrefcount(top) > 1 << 40
    ref = weakref.ref(task)
    del task
    gc.collect()  # freed by the cyclic collector, as deferred objects are
    assert ref() is None

    def nested(x):
        return x

    t = tg.task(nested)  # a nested function's Task keeps prompt freeing
    assert sys.getrefcount(t) < 100
    ref = weakref.ref(t)
    del t
    assert ref() is None
