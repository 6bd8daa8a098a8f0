"""Memory: intermediate results are freed during a run (a chain of 1 MiB results keeps a
bounded number alive however long it is), a lazy node costs a bounded number of bytes, and a
soak of spawns, failures and cancellations leaves nothing behind. The figures themselves are
measured by benchmarks/memory.py (docs/reliability.md); these tests assert the bounds users
rely on, counted in objects and Python-allocated bytes (deterministic), not in RSS or time."""
import gc
import os
import sys
import threading
import time
import tracemalloc

import pytest

import taskgraph as tg
from helpers import scaled
from taskgraph._native import core

# No spares: on a loaded machine the manager takes a worker waiting on a lock for a waiting
# task and puts a spare on duty; a spare thread alive at a measurement holds its node cache
# and thread state (130-250 KB, gone when it retires), which these tests would count.
SPARES = 0

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.thread_unsafe(reason="counts objects, bytes and blocks of the whole process"),
]
MiB = 1 << 20


class Counted(bytearray):
    """A 1 MiB result that counts how many are alive."""
    __slots__ = ()
    lock = threading.Lock()
    alive = 0
    made = 0

    def __init__(self, src=None):
        super().__init__(src if src is not None else MiB)
        with Counted.lock:
            Counted.alive += 1
            Counted.made += 1

    def __del__(self):
        with Counted.lock:
            Counted.alive -= 1


def settle():
    for _ in range(3):
        gc.collect()
        time.sleep(0.01)


@tg.task
def link(prev, peak):
    """One link of the chain: a fresh 1 MiB copy of the previous result."""
    if Counted.alive > peak[0]:
        peak[0] = Counted.alive
    out = Counted(prev)
    out[Counted.made % MiB] ^= 1
    return out


def test_a_long_chain_of_1_mib_results_keeps_a_bounded_number_alive():
    """The issue's chain (100,000 x 1 MiB: scaled down under the sanitizers) must not hold
    every result: each is freed once its consumer has run, by the worker that ran it (lazy
    nodes give up their owner thread, so the caller's thread, asleep in compute(), does not
    have to free them; docs/design/native.md). Measured: 1-2 alive at once
    (benchmarks/memory.py); the bound leaves room for a sleeping worker that made one."""
    n = scaled(100_000, 2_000)
    peak = [0]
    node = link(None, peak)
    for _ in range(n - 1):
        node = link(node, peak)
    with tg.Scheduler(workers=2, spares=SPARES) as s:
        out = s.compute(node)
    assert len(out) == MiB and Counted.made >= n
    assert peak[0] <= 6, f"{peak[0]} results of 1 MiB alive at once in a chain of {n}"
    del out, node
    settle()
    assert Counted.alive == 0, f"{Counted.alive} results never freed"


@tg.task
def src(a):
    return a


@tg.task
def one(a):
    return (a + 1) & 0xFF


@tg.task
def two(a, b):
    return (a + b) & 0xFF


def build(n):
    """n lazy nodes: node i depends on none, on i - 1, or on i - 1 and i // 2."""
    nodes = []
    for i in range(n):
        k = i % 3
        nodes.append(src(7) if k == 0 else one(nodes[i - 1]) if k == 1
                     else two(nodes[i - 1], nodes[i // 2]))
    return nodes


# The budget for a lazy node with 1-2 arguments, in Python-allocated bytes (tracemalloc): the
# Node object with its arguments inline and its dependency tuple. Measured 261 B/node on
# 3.13t (benchmarks/memory.py); the budget leaves room for other builds, not for growth.
NODE_BYTES_BUDGET = 400


def test_a_lazy_dag_stays_within_its_bytes_per_node_budget_and_is_freed():
    n = scaled(200_000, 20_000)
    with tg.Scheduler(workers=2, spares=SPARES) as s:
        s.compute(build(100))  # warm up
        settle()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            nodes = build(n)
            list_bytes = sys.getsizeof(nodes)
            per_node = (tracemalloc.get_traced_memory()[0] - base - list_bytes) / n
            out = s.compute(nodes)
            assert out[1] == 8 and out[2] == 16 and len(out) == n
            del out, nodes
            settle()
            left = (tracemalloc.get_traced_memory()[0] - base) / n
        finally:
            tracemalloc.stop()
    assert per_node <= NODE_BYTES_BUDGET, f"{per_node:.0f} bytes per lazy node"
    assert left < 8, f"{left:.1f} bytes per node still allocated after the nodes were dropped"


class Boom(Exception):
    pass


@tg.task
def kid(i):
    if i % 10 == 0:
        raise Boom(i)
    return i


@tg.task
def parent(k):
    ok = failed = 0
    for c in [kid(i) for i in range(k)]:
        try:
            c.result()
            ok += 1
        except Boom:
            failed += 1
    return ok, failed


@tg.task
def dependent(x, i):
    return i


@tg.task
def doomed(k):
    for i in range(k):
        kid(i * 10 + 1)
    raise Boom("doomed")


def soak_round(s, spawned):
    res = s.compute([parent(1000) for _ in range(spawned // 1000)])
    assert sum(r[1] for r in res) == spawned // 10
    assert sum(r[0] + r[1] for r in res) == spawned
    deps = [dependent(kid(0), i) for i in range(spawned // 10)]  # cancelled: kid(0) fails
    with pytest.raises(Boom):
        s.compute(deps)
    assert all(d.state == "cancelled" for d in deps)
    del deps
    for _ in range(5):  # spawned children of a failing task: cancelled if not started
        with pytest.raises(Boom):
            s.compute(doomed(spawned // 50))
    node = dependent(1, 2)
    assert node.cancel() and node.state == "cancelled"  # a lazy node cancelled by hand


def census():
    settle()
    return {"blocks": sys.getallocatedblocks(), "objects": len(gc.get_objects()),
            "runs": core._live_runs()}


def test_a_soak_of_spawns_failures_and_cancellations_does_not_grow():
    """The issue's soak is 10^6 spawns (benchmarks/memory.py); here 11 rounds of 20,000
    (scaled down under the sanitizers, where malloc is the system's and blocks are not
    counted) with the same mix. After the first rounds have filled free lists and caches,
    allocated blocks, gc-tracked objects and Python-allocated bytes stay flat. (RSS is not
    asserted: the allocator keeps some pages, see docs/reliability.md.)"""
    per_round = scaled(20_000, 2_000)
    with tg.Scheduler(workers=2, spares=SPARES) as s:
        for _ in range(3):
            soak_round(s, per_round)
        base = census()
        for _ in range(4):
            soak_round(s, per_round)
        after = census()
        tracemalloc.start()  # Python-allocated bytes: a reference leak shows here
        try:
            soak_round(s, per_round)
            settle()
            snap0 = tracemalloc.take_snapshot()
            for _ in range(3):
                soak_round(s, per_round)
            settle()
            snap1 = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
    # What was allocated from taskgraph's code and this test's (the workers' threads run in
    # taskgraph's frames): threads that other tests left behind (a dask cluster's event loop)
    # allocate meanwhile, the more so on a loaded machine, and are not ours to count.
    ours = [tracemalloc.Filter(True, os.path.join(os.path.dirname(tg.__file__), "*")),
            tracemalloc.Filter(True, __file__)]
    diff = snap1.filter_traces(ours).compare_to(snap0.filter_traces(ours), "lineno")
    traced = sum(d.size_diff for d in diff)
    assert traced < 256 * 1024, (f"{traced} bytes more held after 3 rounds", diff[:5])
    assert after["runs"] == base["runs"]
    assert after["objects"] - base["objects"] < 500, (base, after)
    if sys.getallocatedblocks() > 0:  # 0 under PYTHONMALLOC=malloc (the ASan runs)
        assert after["blocks"] - base["blocks"] < 20_000, (base, after)
