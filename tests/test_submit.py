"""Submitting lazy graphs (csrc/py/submit.c): random DAGs run each node once after its
dependencies, chains of any length, concurrent computes that share nodes, and a submission
interrupted halfway (an injected out-of-memory) that leaves nothing waiting."""
import random
import threading
import time

import pytest

import taskgraph as tg

pytestmark = pytest.mark.timeout(120)
from helpers import counted_leaves, needs_faults, scaled
from taskgraph._native import core

# ---------------------------------------------------------------------- random DAGs
def _random_dag(seed, n):
    rnd = random.Random(seed)
    preds = []
    for i in range(n):
        k = 0 if i == 0 else rnd.randint(0, min(4, i))
        preds.append(sorted(rnd.sample(range(i), k)) if k else [])
    return preds


def _sequential(preds):
    vals = []
    for i, ps in enumerate(preds):
        vals.append((i * 7 + sum(vals[p] for p in ps)) % 1000003)
    return vals


@tg.task
def _combine(i, inputs, log):
    log.append(i)  # list.append is atomic (also on free-threaded CPython)
    return (i * 7 + sum(inputs)) % 1000003


@pytest.mark.parametrize("seed,n", [(1, 1), (2, 10), (3, 500), (4, 5000)])
def test_random_dag_matches_sequential_and_runs_each_node_once(sched, seed, n):
    preds = _random_dag(seed, n)
    log = []
    nodes = []
    for i, ps in enumerate(preds):
        nodes.append(_combine(i, [nodes[p] for p in ps], log))
    got = sched.compute(*nodes) if n > 1 else (sched.compute(nodes[0]),)
    assert list(got) == _sequential(preds)
    assert sorted(log) == list(range(n))  # exactly once each
    assert all(x.state == "done" for x in nodes)


def test_random_dag_computing_only_the_sinks(sched):
    preds = _random_dag(9, 2000)
    log = []
    nodes = []
    for i, ps in enumerate(preds):
        nodes.append(_combine(i, [nodes[p] for p in ps], log))
    used = {p for ps in preds for p in ps}
    sinks = [i for i in range(len(preds)) if i not in used]
    expect = _sequential(preds)
    got = sched.compute(*[nodes[i] for i in sinks])
    assert list(got) == [expect[i] for i in sinks]
    assert len(log) == len(set(log))  # nothing twice


def test_long_chain_is_submitted_iteratively():
    @tg.task
    def inc(x):
        return x + 1

    n = tg.compute(0)
    node = inc(n)
    for _ in range(100_000 - 1):
        node = inc(node)
    assert tg.compute(node, workers=2) == 100_000


def compute_in_threads(s1, s2, targets):
    """Computes each target in a thread of its own, alternately on s1 and s2, all at once:
    their results, once every thread has ended (60 s each at most)."""
    results = [None] * len(targets)

    def run(k):
        results[k] = (s1 if k % 2 else s2).compute(targets[k])

    ths = [threading.Thread(target=run, args=(k,)) for k in range(len(targets))]
    for th in ths:
        th.start()
    for th in ths:
        th.join(60)
    assert not any(th.is_alive() for th in ths), "a compute never ended"
    return results


def test_computes_racing_for_thousands_of_shared_nodes_all_end():
    """From outside the workers, a submission counts its claims on the run a batch (1,024)
    at a time and gives back what it did not use (submit.c): computes that race for the same
    thousands of nodes, each losing some claims in every batch, must all end with the right
    result, and leave the schedulers usable."""
    @tg.task
    def leaf(i):
        return i

    @tg.task
    def total(*xs):
        return sum(xs)

    n = scaled(5000, 2500)
    for _ in range(3):
        leaves = [leaf(i) for i in range(n)]
        tops = [total(*leaves[k::2], *leaves[1 - k::2]) for k in range(2)] + [total(*leaves)]
        with tg.Scheduler(workers=2) as s1, tg.Scheduler(workers=2) as s2:
            assert compute_in_threads(s1, s2, tops) == [n * (n - 1) // 2] * len(tops)
            assert s1.compute(total(*[leaf(i) for i in range(3000)])) == 3000 * 2999 // 2
            assert s2.compute(total(*[leaf(i) for i in range(3000)])) == 3000 * 2999 // 2


@tg.task
def inc(x):
    return x + 1


def fail_a_chain(s, fault, at, length):
    """Computes a chain of `length` + 1 inc nodes on s with the injected fault armed to fire
    at its `at`-th time: the chain's nodes, once the compute has raised MemoryError and every
    node it claimed has finished (10 s at most)."""
    node = inc(0)
    chain = [node]
    for _ in range(length):
        node = inc(node)
        chain.append(node)
    core._arm_fault(fault, at)
    try:
        with pytest.raises(MemoryError):
            s.compute(node)
    finally:
        core._arm_fault(fault, 0)
    deadline = time.monotonic() + 10
    while not all(n.done() for n in chain if n.state != "new") and time.monotonic() < deadline:
        time.sleep(0.01)
    return chain


@pytest.mark.thread_unsafe(reason="injected faults are process-wide")
@needs_faults
def test_interrupted_submission_leaves_nothing_waiting():
    """A failure in the middle of submitting a big graph (out of memory at the 300th claim,
    injected): what was claimed drains as cancelled, nothing waits forever."""
    with tg.Scheduler(workers=2) as s:
        claimed = [n for n in fail_a_chain(s, core.FAULT_CLAIM, 300, 500) if n.state != "new"]
        assert len(claimed) == 299
        assert all(n.state == "cancelled" for n in claimed)
        with pytest.raises(tg.CancelledError, match="interrupted"):
            claimed[0].result()
        assert s.compute(inc(41)) == 42  # still usable


def test_concurrent_computes_of_overlapping_graphs_run_each_node_once():
    """Several threads compute graphs that share nodes, on one scheduler and on two: a node
    is claimed by exactly one run; the others wait for it."""
    leaves, total, counts = counted_leaves(scaled(400, 80), 0.0002)
    rnd = random.Random(3)
    picks = [rnd.sample(range(len(leaves)), len(leaves) // 2) for _ in range(8)]
    groups = [total([leaves[i] for i in p]) for p in picks]
    with tg.Scheduler(workers=2) as s1, tg.Scheduler(workers=2) as s2:
        results = compute_in_threads(s1, s2, groups)
    assert results == [sum(p) for p in picks]
    assert sorted(counts.values()) == [1] * len(counts)  # nothing ran twice
    assert all(g.state == "done" for g in groups)


@pytest.mark.thread_unsafe(reason="injected faults are process-wide")
@needs_faults
def test_a_failed_edge_allocation_leaves_nothing_waiting():
    with tg.Scheduler(workers=2) as s:
        chain = fail_a_chain(s, core.FAULT_EDGE, 150, 200)
        assert all(n.done() for n in chain if n.state != "new")
        assert s.compute(inc(1)) == 2


def test_a_million_node_lazy_graph():
    @tg.task
    def one(i):
        return 1

    @tg.task
    def add(*xs):
        return sum(xs)

    n = scaled(1_000_000, 50_000)
    leaves = [one(i) for i in range(n)]
    sums = [add(*leaves[i:i + 1000]) for i in range(0, n, 1000)]
    with tg.Scheduler(workers=2) as s:
        assert s.compute(add(*sums)) == n


def test_a_compute_waits_for_its_targets_claimed_by_another_compute():
    """compute() of a node that a concurrent compute has claimed claims nothing itself; it
    still waits for that node (its result, not before), and its timeout still holds."""
    started, go = threading.Event(), threading.Event()

    @tg.task
    def slow():
        started.set()
        assert go.wait(30)
        return 42

    n = slow()
    with tg.Scheduler(workers=2) as s:
        first = []
        th = threading.Thread(target=lambda: first.append(s.compute(n)))
        th.start()
        assert started.wait(30)
        with pytest.raises(TimeoutError):
            s.compute(n, timeout=0.1)  # held by the other compute: the deadline applies
        threading.Timer(0.1, go.set).start()
        assert s.compute(n) == 42 and n.done()
        th.join(30)
    assert first == [42]
