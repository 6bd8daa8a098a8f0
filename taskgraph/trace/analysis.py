"""Trace analysis: work, span and critical path of an executed graph (the records of a
Trace), and the summary report.

Work/span model (docs/trace.md): a task's *own time* is its run time minus the time it spent
inside joins (where the worker ran other tasks or waited) and minus garbage collections that
happened meanwhile; of that, the time it spent *waiting* (its declared waits, tg.blocking(),
or its own time minus its measured CPU time: TaskRecord.waiting) is not work, and what is left
(TaskRecord.computing) is what the work and the span count. The span is the longest path in the executed graph where a task starts
after its data dependencies end and after its parent's own time (spawned children run after
the parent's own work), and a task ends after its own time and after all its children end
(implicit join). parallelism = work / span.
"""
from __future__ import annotations

from taskgraph._links import WORK_SPAN
from taskgraph._state import State
from taskgraph.trace.record import RETRIED

__all__ = ["analyse", "summary", "moved", "workers_phrase", "waiting_by_name"]

# A function is named in the summary as waiting when its tasks waited at least this share of
# their own time, and this much in all (ns).
WAIT_SHARE, WAIT_MIN_NS = 0.5, 1_000_000


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
    """work, span and critical path of the executed graph, and the time the tasks waited.

    Each task v has three events: start S_v, own work done O_v = S_v + work(v), end E_v, where
    work(v) is its own time less its waiting (TaskRecord.computing).
    Edges: S_v -> O_v (weight work(v)), O_v -> E_v, O_parent -> S_child (a child starts after
    its parent's own work), E_child -> E_parent (implicit join), E_dep -> S_v (data). The span
    is the longest path (Kahn's order, iterative: any depth). ``burden`` (ns) is added on every
    spawn and data edge (where a task can move to another worker): with the cost of a steal it
    gives the *burdened span* (Cilkscale's term; taskgraph.trace.predict)."""
    n = len(records)
    if not n:
        return {"work": 0, "span": 0, "path": [], "waiting": 0}
    weight = [r.computing for r in records]
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
        dv = dist[v] + (weight[i] if kind == 0 else 0)  # weight of S_v -> O_v
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
    return {"work": sum(weight), "span": dist[last], "path": path,
            "waiting": sum(r.own for r in records) - sum(weight)}


def waiting_by_name(records):
    """[(name, tasks, own ns, waiting ns, declared ns)] of the task functions that spent at
    least WAIT_SHARE of their own time waiting (and WAIT_MIN_NS in all), most waiting first."""
    by = {}
    for r in records:
        d = by.setdefault(r.name, [0, 0, 0, 0])
        d[0] += 1
        d[1] += r.own
        d[2] += r.waiting
        d[3] += r.blocked
    out = [(name, k, own, w, b) for name, (k, own, w, b) in by.items()
           if w >= WAIT_MIN_NS and w >= WAIT_SHARE * own]
    return sorted(out, key=lambda x: -x[3])


def _ms(ns):
    return f"{ns / 1e6:.3f} ms"


def duration(ns) -> str:
    """A task's time for people, to about three significant figures: "1.23 s", "45.6 ms",
    "812 us", "3.4 us", "640 ns"; never "0" for a task that took any time."""
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3g} us"
    return f"{ns:.0f} ns"


def summary(records, a, workers, wall, pool=None, spares=0):
    """Trace.summary()'s text, from the records and their analysis `a` (analyse): `workers`
    is how many workers ran tasks (spares included), `pool` how many the schedulers had (None:
    not known, as in traces saved before it was recorded), `spares` how many of the workers
    that ran tasks were spares (they stand in for waiting tasks: not cores of their own)."""
    if not records:
        return "taskgraph trace: no tasks recorded"
    workers -= spares
    P = max(pool or 0, workers)
    par = a["work"] / a["span"] if a["span"] else 1.0
    achieved = a["work"] / wall if wall else 0.0
    bound = min(P, par)
    lines = [
        f"taskgraph trace: {len(records)} tasks on {workers_phrase(workers, pool)}"
        + (f" and {spares} spare{'s' if spares != 1 else ''} (for tasks that waited)"
           if spares else "") + f", wall {_ms(wall)}",
        f"  work  T1     {_ms(a['work'])}   (sum of the tasks' own time"
        + (f", less {_ms(a['waiting'])} waiting)" if a.get("waiting") else ")"),
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
    lines += _waiting_lines(records)
    failed = [r for r in records if r.state == State.FAILED.label]
    cancelled = sum(r.state == State.CANCELLED.label for r in records)
    retried = sum(r.state == RETRIED for r in records)
    if failed or cancelled or retried:
        lines.append(f"  failed {len(failed)}, cancelled {cancelled}"
                     + (f", failed attempts retried {retried}" if retried else ""))
        for r in failed[:5]:
            lines.append(f"    {r.key}: {r.error_type}: {r.error}")
    return "\n".join(lines)


def _waiting_lines(records, limit=5):
    """The summary's lines on the task functions that spent most of their time waiting."""
    waits = waiting_by_name(records)
    if not waits:
        return []
    lines = ["  waiting (own time not spent computing: not counted as work):"]
    undeclared = False
    for name, k, own, w, b in waits[:limit]:
        how = "declared with tg.blocking()" if b * 2 >= w else "not declared"
        undeclared |= b * 2 < w
        lines.append(f"    {name}: {k} task{'s' if k != 1 else ''} waited {_ms(w)} of "
                     f"{_ms(own)} ({100 * w / own:.0f}%), {how}")
    if undeclared:
        lines.append("    -> put the wait inside `with tg.blocking():` (or use "
                     "@tg.task(blocking=True)): a spare worker then runs other tasks at once "
                     "while it waits (docs/api.md, \"Tasks that wait\")")
    return lines
