"""Trace analysis: work, span and critical path of an executed graph (the records of a
Trace), and the summary report.

Work/span model (docs/trace.md): a task's *own time* is its run time minus the time it spent
inside joins (where the worker ran other tasks or waited) and minus garbage collections that
happened meanwhile. The span is the longest path in the executed graph where a task starts
after its data dependencies end and after its parent's own time (spawned children run after
the parent's own work), and a task ends after its own time and after all its children end
(implicit join). parallelism = work / span.
"""
from __future__ import annotations

from taskgraph._links import WORK_SPAN
from taskgraph._state import State
from taskgraph._trace_record import RETRIED

__all__ = ["analyse", "summary", "moved", "workers_phrase"]


def workers_phrase(workers, pool=None) -> str:
    """ "2 workers", or "a pool of 2 workers, 1 of which ran tasks" when some ran none
    (`workers`: how many ran tasks; `pool`: how many there were, None if not known)."""
    P = max(pool or 0, workers)
    if P == workers:
        return f"{P} worker{'s' if P != 1 else ''}"
    return f"a pool of {P} workers, {workers} of which ran tasks"


def moved(records) -> set:
    """Keys of the tasks that ran on another worker than the task that spawned them, having
    been stolen (a record's ``stolen`` says the task was taken from another worker's deque at
    some point: a task of a batch stolen by one worker can be taken back by its spawner's
    worker, and then ran where it was spawned). Tasks without a recorded parent (a lazy
    graph's, released onto whichever worker finished their last dependency) count as moved
    when stolen."""
    lane = {r.key: r.lane for r in records}
    return {r.key for r in records if r.stolen and lane.get(r.parent) != r.lane}


def analyse(records, burden=0):
    """work, span and critical path of the executed graph.

    Each task v has three events: start S_v, own work done O_v = S_v + own(v), end E_v.
    Edges: S_v -> O_v (weight own(v)), O_v -> E_v, O_parent -> S_child (a child starts after
    its parent's own work), E_child -> E_parent (implicit join), E_dep -> S_v (data). The span
    is the longest path (Kahn's order, iterative: any depth). ``burden`` (ns) is added on every
    spawn and data edge (where a task can move to another worker): with the cost of a steal it
    gives the *burdened span* (Cilkscale's term; taskgraph._predict)."""
    n = len(records)
    if not n:
        return {"work": 0, "span": 0, "path": []}
    index = {r.key: i for i, r in enumerate(records)}
    succ = [[] for _ in range(3 * n)]
    indeg = [0] * (3 * n)

    def edge(a, b):
        succ[a].append(b)
        indeg[b] += 1

    for i, r in enumerate(records):
        edge(3 * i, 3 * i + 1)
        edge(3 * i + 1, 3 * i + 2)
        p = index.get(r.parent)
        if p is not None:
            edge(3 * p + 1, 3 * i)
            edge(3 * i + 2, 3 * p + 2)
        for d in r.deps:
            j = index.get(d)
            if j is not None:
                edge(3 * j + 2, 3 * i)
    dist = [0] * (3 * n)
    prev = [-1] * (3 * n)
    ready = [v for v in range(3 * n) if indeg[v] == 0]
    while ready:
        v = ready.pop()
        i, kind = divmod(v, 3)
        dv = dist[v] + (records[i].own if kind == 0 else 0)  # weight of S_v -> O_v
        for u in succ[v]:
            du = dv + burden if burden and u % 3 == 0 else dv  # an edge into a task's start
            if du > dist[u] or prev[u] < 0 and du == dist[u]:
                dist[u] = du
                prev[u] = v
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    ends = range(2, 3 * n, 3)
    last = max(ends, key=lambda v: dist[v])
    path = []
    v = last
    while v >= 0:
        i, kind = divmod(v, 3)
        if kind == 1 and (not path or path[-1] != records[i].key):
            path.append(records[i].key)  # the path went through this task's own work
        v = prev[v]
    path.reverse()
    return {"work": sum(r.own for r in records), "span": dist[last], "path": path}


def _ms(ns):
    return f"{ns / 1e6:.3f} ms"


def summary(records, a, workers, wall, pool=None):
    """Trace.summary()'s text, from the records and their analysis `a` (analyse): `workers`
    is how many workers ran tasks, `pool` how many the schedulers had (None: not known, as in
    traces saved before it was recorded)."""
    if not records:
        return "taskgraph trace: no tasks recorded"
    P = max(pool or 0, workers)
    par = a["work"] / a["span"] if a["span"] else 1.0
    achieved = a["work"] / wall if wall else 0.0
    bound = min(P, par)
    lines = [
        f"taskgraph trace: {len(records)} tasks on {workers_phrase(workers, pool)}, "
        f"wall {_ms(wall)}",
        f"  work  T1     {_ms(a['work'])}   (sum of the tasks' own time)",
        f"  span  T_inf  {_ms(a['span'])}   (critical path: {len(a['path'])} "
        f"task{'s' if len(a['path']) != 1 else ''})",
        f"  parallelism  T1/T_inf = {par:.2f}",
        f"  speed-up bound min(P, T1/T_inf) = {bound:.2f}; achieved T1/wall = {achieved:.2f}",
    ]
    if achieved > bound * 1.05 and bound < P:
        lines.append("  (achieved is above the bound: the span is overestimated here; it counts "
                     "each task's own work before its children start, and these tasks worked "
                     f"while their children ran: {WORK_SPAN})")
    by_lane = {}
    for r in records:
        d = by_lane.setdefault(r.lane, [0, 0, 0])
        d[0] += r.own
        d[1] += 1
        d[2] += r.stolen
    lines.append("  worker        tasks   stolen     busy       idle")
    for lane in sorted(by_lane):
        busy, n, st = by_lane[lane]
        lines.append(f"  {lane:12} {n:6d} {st:8d} {_ms(busy):>10} {_ms(max(wall - busy, 0)):>10}")
    failed = [r for r in records if r.state == State.FAILED.label]
    cancelled = sum(r.state == State.CANCELLED.label for r in records)
    retried = sum(r.state == RETRIED for r in records)
    if failed or cancelled or retried:
        lines.append(f"  failed {len(failed)}, cancelled {cancelled}"
                     + (f", failed attempts retried {retried}" if retried else ""))
        for r in failed[:5]:
            lines.append(f"    {r.key}: {r.error_type}: {r.error}")
    return "\n".join(lines)
