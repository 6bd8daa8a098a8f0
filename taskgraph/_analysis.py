"""Work, span and critical path of an executed graph (the records of a Trace).

Work/span model (docs/trace.md): a task's *own time* is its run time minus the time it spent
inside joins (where the worker ran other tasks or waited) and minus garbage collections that
happened meanwhile. The span is the longest path in the executed graph where a task starts
after its data dependencies end and after its parent's own time (spawned children run after
the parent's own work), and a task ends after its own time and after all its children end
(implicit join). parallelism = work / span.
"""
from __future__ import annotations

__all__ = ["analyse"]


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
