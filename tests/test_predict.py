"""Trace.predict and the work-stealing simulation (taskgraph.trace.predict, taskgraph.trace.simulate):
the logic on synthetic graphs whose answers are known; the figures on real traces are checked
against measured runs in benchmarks/predict.py, never here (no timings in tests)."""
import pytest

import taskgraph as tg
from taskgraph.trace.predict import burdened_span, costs
from taskgraph.trace.simulate import Graph, graph_of, simulate

MS = 1_000_000


# The simulation charges the cost of a contended atomic, measured on this machine unless
# given; a loaded machine inflates it, so the logic tests give it (40 ns, a quiet figure here).
SHARED = 40.0


def rec(key, start, own, *, parent=None, deps=(), worker=0, stolen=False, end=None, name="t"):
    return tg.TaskRecord(key=key, name=name, worker=worker, scheduler=1, start=start,
                         end=start + own if end is None else end, own=own, parent=parent,
                         deps=list(deps), stolen=stolen)


def chain(n, own=MS):
    return tg.Trace([rec(f"c{i}", i * own, own, deps=[f"c{i - 1}"] if i else []) for i in range(n)])


def independent(n, own=MS):
    return tg.Trace([rec(f"i{i}", 0, own, worker=i % 2) for i in range(n)])


def tree(depth, own=MS // 10):
    """A binary fork-join tree: each task spawns two children."""
    out = []

    def mk(key, d, t):
        out.append(rec(key, t, own, parent=key.rpartition(".")[0] or None))
        if d:
            mk(key + ".0", d - 1, t + own)
            mk(key + ".1", d - 1, t + own)
    mk("r", depth, 0)
    return tg.Trace(sorted(out, key=lambda r: r.start))


def test_chain_predicts_one():
    for p in chain(20).predict((1, 2, 8, 64), shared_rmw_ns=SHARED):
        assert p.upper == pytest.approx(1.0)
        # a hair under 1 on P > 1: a link taken by another worker moves the run's shared line
        assert p.simulated == pytest.approx(1.0, rel=1e-4) and p.simulated <= 1.0
        assert 0 < p.lower <= 1.0


@pytest.mark.parametrize("P", [1, 2, 4, 8])
def test_independent_equal_tasks_predict_P(P):
    preds = independent(P).predict((P,), shared_rmw_ns=SHARED)
    assert preds[0].upper == pytest.approx(P)
    assert preds[0].simulated == pytest.approx(P, rel=0.02)


def test_more_tasks_than_workers_and_monotone():
    preds = tree(9).predict(shared_rmw_ns=SHARED)
    assert [p.workers for p in preds] == [1, 2, 4, 8, 16, 32, 64]
    sims = [p.simulated for p in preds]
    assert sims[0] == 1.0
    assert all(b >= a * 0.98 for a, b in zip(sims, sims[1:])), sims
    assert sims[-1] > sims[1]
    for p in preds:
        assert p.lower <= p.upper + 1e-9
        assert p.simulated <= p.workers + 1e-9
        assert p.upper <= p.workers + 1e-9


def test_simulator_on_graphs():
    g = Graph([10] * 6, [[]] * 6, [[]] * 6)  # 6 independent tasks, 3 workers: 2 rounds
    assert simulate(g, 3) == 20
    assert simulate(g, 6) == 10
    # a diamond: a -> (b, c) -> d, data edges
    g = Graph([1, 5, 5, 1], [[], [], [], []], [[], [0], [0], [1, 2]])
    assert simulate(g, 1) == 12 and simulate(g, 2) == 7
    # steal costs: on 2 workers one of the two children of a root is stolen
    g = Graph([0, 10, 10], [[1, 2], [], []], [[], [], []])
    assert simulate(g, 2, per_steal=3) == 13
    assert simulate(g, 1, per_task=1) == 23
    assert simulate(Graph([], [], []), 4) == 0


def test_graph_of_records():
    t = tree(2)
    g = graph_of(t.records)
    assert g.roots == [0]
    assert sorted(len(c) for c in g.children) == [0, 0, 0, 0, 2, 2, 2]
    assert graph_of(chain(3).records).deps == [[], [0], [1]]


def test_burdened_span_adds_the_burden_on_each_edge():
    t = chain(5)
    assert burdened_span(t.records, 0) == t.span
    assert burdened_span(t.records, 1000) == t.span + 4 * 1000  # four data edges on the path
    tr = tree(3)
    assert burdened_span(tr.records, 500) == tr.span + 3 * 500
    preds_cheap = tr.predict((8,))
    assert preds_cheap[0].lower > 0


def test_costs_measure_the_steal_wait():
    # Worker 1 ends a task at 10 ms, the root's own work ends at 12 ms (the child is available
    # from then), the stolen child starts at 12.5 ms: a wait of 0.5 ms.
    recs = [rec("root", 0, 12 * MS, end=30 * MS), rec("other", 0, 10 * MS, worker=1),
            rec("kid", 12 * MS + MS // 2, 5 * MS, parent="root", worker=1, stolen=True)]
    c = costs(recs)
    assert c["steal_measured"] and c["steals"] == 1
    assert c["per_steal"] == MS // 2
    c = costs(chain(4).records)
    assert not c["steal_measured"] and c["per_steal"] == c["per_task"]


def test_errors():
    with pytest.raises(ValueError, match="empty"):
        tg.Trace().predict()
    with pytest.raises(ValueError, match="no work"):
        tg.Trace([rec("a", 0, 0)]).predict()
    for bad in ((0,), (2, "4"), (True,), ()):
        with pytest.raises(ValueError, match="worker counts|no worker"):
            chain(2).predict(bad)
    assert len(chain(2).predict(3)) == 1  # one int is one worker count


@pytest.mark.thread_unsafe(reason="opens a trace, which records every task of the process")
def test_real_trace_and_loaded_trace(tmp_path):
    from helpers import fib
    with tg.trace() as tr:
        tg.compute(fib(14, 8), workers=2)
    preds = tr.predict((1, 2, 4))
    assert preds[0].simulated == 1.0
    assert all(0 < p.lower <= p.upper for p in preds)
    tr.save(tmp_path / "f.tgtrace")
    again = tg.Trace.load(tmp_path / "f.tgtrace").predict((1, 2, 4))
    assert [(p.lower, p.upper) for p in again] == [(p.lower, p.upper) for p in preds]
    assert "burdened parallelism" in tr.summary()


def test_the_shared_line_queues_counted_tasks_not_covered_children():
    """Each counted task (a root, or a task with dependencies) makes two RMWs on the run's one
    shared line; the simulator queues them, so 64 workers finishing 1 ns tasks are bound by the
    line. Children spawned without dependencies never touch it."""
    n, cost = 640, 100.0
    flat = Graph([1] * n, [[]] * n, [[]] * n)  # n roots: every one counted
    t64 = simulate(flat, 64, per_shared=cost)
    assert t64 >= n * cost  # the RMWs queued for the line as it moved between workers
    assert simulate(flat, 64, per_shared=0.0) <= n  # without it: spread over the workers
    assert simulate(flat, 1, per_shared=cost) == n  # one worker: the line never moves
    fan = Graph([1] + [1] * n, [list(range(1, n + 1))] + [[]] * n, [[]] * (n + 1))  # one root
    assert fan.counted == [True] + [False] * n
    assert simulate(fan, 64, per_shared=cost) <= 2 * cost + n + 1  # only the root's two RMWs


def test_the_contended_rmw_cost_is_measured_on_this_machine_or_given():
    from taskgraph._native import core
    from taskgraph.trace.predict import shared_rmw_ns
    ns = shared_rmw_ns()
    assert ns > 0 and shared_rmw_ns() == ns  # measured once per process
    assert core.contended_rmw_ns(100) > 0
    for bad in (0, -1, 10**9):
        with pytest.raises(ValueError, match="rounds"):
            core.contended_rmw_ns(bad)
    tr = chain(3)
    free = tr.predict((2,), shared_rmw_ns=0)[0].simulated
    assert tr.predict((2,), shared_rmw_ns=1e6)[0].simulated < free  # a 1 ms line: slower
    for bad in (-1, float("nan"), "40", True):
        with pytest.raises(ValueError, match="shared_rmw_ns"):
            tr.predict((2,), shared_rmw_ns=bad)
