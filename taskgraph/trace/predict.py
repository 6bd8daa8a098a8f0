"""Predicted speed-up on P workers from one trace (docs/trace.md, "Predicted speed-up").

Three figures per worker count P, all from the executed graph of the trace:

* upper = min(P, T1 / T_inf): no scheduler does better (work and span law).
* lower = T1 / ((T1 - T_inf) / P + burdened T_inf): the greedy-scheduler bound (Graham, Brent)
  with the span *burdened* by the cost of moving a task to another worker on every spawn and
  data edge (Cilkscale's idea); a graph whose parallelism is eaten by steal costs gets a low
  figure.
* simulated: a discrete-event simulation of randomized work stealing over the recorded graph
  with the measured costs (taskgraph.trace.simulate), speed-up = simulated time on 1 worker /
  simulated time on P, the mean of a few random seeds, capped at upper.

The costs are measured from the trace itself (``costs``): what a worker spends per task outside
the tasks' own time, and how long a stolen task waited between becoming available and starting
on its thief; and on this machine (``shared_rmw_ns``): what one atomic read-modify-write costs
on a cache line that another core writes, which the simulation charges for the RMWs on the
run's shared line (taskgraph.trace.simulate). Work inflation (tasks running slower side by
side) is not predicted: compare two traces with Trace.inflation for that.
"""
from __future__ import annotations

import bisect
import statistics
from typing import NamedTuple

from taskgraph.trace.analysis import analyse
from taskgraph._native import core
from taskgraph.trace.simulate import graph_of, simulate

__all__ = ["Prediction", "costs", "burdened_span", "predict", "shared_rmw_ns", "DEFAULT_WORKERS"]

DEFAULT_WORKERS = (1, 2, 4, 8, 16, 32, 64)
SEEDS = 3


class Prediction(NamedTuple):
    """The predicted speed-up on ``workers`` workers: a range and the simulation's figure."""
    workers: int
    lower: float
    upper: float
    simulated: float


def _lanes(records):
    out = {}
    for r in records:
        out.setdefault(r.lane, []).append(r)
    return out


def costs(records) -> dict:
    """The measured scheduling costs (ns): ``per_task`` (the median time a worker spends
    between tasks, outside their own time),
    ``per_steal`` (a stolen task's wait between being available and starting), ``steals``
    (how many stolen tasks were measured) and ``steal_measured`` (False: no steal in the trace,
    per_steal is then per_task)."""
    lanes = _lanes(records)
    by_key = {r.key: r for r in records}
    events = {}   # lane -> sorted times of its tasks' starts and ends
    gaps = []
    for lane, recs in lanes.items():
        # (time, 1 for a start / 0 for an end, index): an end sorts before a start at the same
        # time (a task that starts as another ends follows it)
        ev = sorted([(r.start, 1, i) for i, r in enumerate(recs)]
                    + [(r.end, 0, i) for i, r in enumerate(recs)])
        events[lane] = [t for t, _, _ in ev]
        # Per task: the time from the lane's previous event to its start (minus its parent's
        # own work when that event is the parent's start: children come after it, as in the
        # span). The median leaves out the rare long gaps (a collection, a preemption, idle).
        for k, (t, is_start, i) in enumerate(ev):
            if not is_start or not k:
                continue
            pt, prev_is_start, pi = ev[k - 1]
            gap = t - pt
            if prev_is_start and recs[pi].key == recs[i].parent:
                gap -= recs[pi].own
            gaps.append(max(0, gap))
    per_task = statistics.median(gaps) if gaps else 0.0
    waits = []
    for r in records:
        if not r.stolen:
            continue
        p = by_key.get(r.parent)
        avail = [by_key[d].end for d in r.deps if d in by_key]
        if p is not None:
            avail.append(p.start + p.own)  # the model of trace.analysis: children after own work
        if not avail:
            continue
        ev = events[r.lane]
        k = bisect.bisect_left(ev, r.start)  # the lane's last event before this start
        free = ev[k - 1] if k else r.start
        w = r.start - max(free, max(avail))
        if w > 0:
            waits.append(w)
    measured = bool(waits)
    per_steal = statistics.median(waits) if measured else per_task
    return {"per_task": per_task or 0.0, "per_steal": float(per_steal or 0.0),
            "steals": len(waits), "steal_measured": measured}


_shared_rmw = []


def shared_rmw_ns() -> float:
    """Nanoseconds per atomic increment of a counter that two threads take turns incrementing
    (core.contended_rmw_ns): the best of 3 runs of 20,000 turns, measured once per process
    (about 10 ms; on a machine running other programs the best run is the one least held up
    by them)."""
    if not _shared_rmw:
        _shared_rmw.append(min(core.contended_rmw_ns(20_000) for _ in range(3)))
    return _shared_rmw[0]


def burdened_span(records, per_steal) -> int:
    return analyse(records, burden=round(per_steal))["span"] if records else 0


def _check_workers(workers):
    try:
        ws = [w for w in workers]
    except TypeError:
        ws = [workers]
    for w in ws:
        if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= 4096:
            raise ValueError(f"predict: worker counts must be ints from 1 to 4096, got {w!r}")
    if not ws:
        raise ValueError("predict: no worker counts given")
    return ws


def predict(tr, workers=DEFAULT_WORKERS, seeds=SEEDS, measured=None, shared=None) -> list[Prediction]:
    """The Predictions of trace tr for each worker count. ``measured``: costs to use instead of
    the trace's own (a dict like ``costs`` returns). ``shared``: ns per RMW on the run's shared
    line (None: shared_rmw_ns(), measured on this machine). ``seeds=0``: no simulation (simulated is
    None)."""
    ws = _check_workers(workers)
    recs = tr.records
    if not recs:
        raise ValueError("predict: the trace is empty (no tasks recorded)")
    if shared is not None and not (isinstance(shared, (int, float)) and not isinstance(shared, bool)
                                   and 0 <= shared < float("inf")):
        raise ValueError(f"predict: shared_rmw_ns must be a number of nanoseconds >= 0, got {shared!r}")
    c = dict(measured or costs(recs))
    if shared is not None:
        c["per_shared"] = float(shared)
    elif "per_shared" not in c:
        c["per_shared"] = shared_rmw_ns() if seeds else 0.0
    T1, Tinf = tr.work, tr.span
    if T1 <= 0:
        raise ValueError("predict: the trace has no work (every task's own time is 0)")
    Tb = burdened_span(recs, c["per_steal"])
    g = graph_of(recs)

    def sim(p):
        return statistics.fmean(simulate(g, p, per_task=c["per_task"], per_steal=c["per_steal"],
                                         per_attempt=c["per_task"], per_shared=c["per_shared"],
                                         seed=s) for s in range(seeds))
    base = sim(1) if seeds else None
    out = []
    for p in ws:
        upper = float(min(p, T1 / Tinf)) if Tinf else float(p)
        lower = min(upper, T1 / ((T1 - Tinf) / p + Tb)) if Tb else upper
        # The simulation charges the scheduling costs on top of the own times, so its ratio can
        # pass work/span by a hair on graphs that have little parallelism: capped.
        if base is None:  # seeds=0: bounds only (the report on a very large trace)
            out.append(Prediction(p, lower, upper, None))
        else:
            out.append(Prediction(p, lower, upper, min(upper, base / sim(p)) if p > 1 else 1.0))
    return out
