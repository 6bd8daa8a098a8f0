"""Work inflation: how much more work the same program needed on more workers.

The work of a trace is the sum of its tasks' own times (taskgraph.trace.analysis). Run the same
program on 1 worker and on P workers: if the P-worker trace has more work, the tasks ran slower
when they ran at the same time (contention on shared objects, memory bandwidth, a lock inside
a library), and no scheduler can get that back. docs/performance.md, "Work inflation".

Own times are wall-clock: a worker that loses its core to another process is charged the wait.
So a trace records the machine's load when its block closes (``meta["load"]``, the 1-minute
load average, and ``meta["cpus"]``), and the inflation's flag says so when either trace was
recorded on a machine with more runnable threads than CPUs.
"""
from __future__ import annotations

from collections import Counter

from taskgraph.trace.analysis import workers_phrase
from taskgraph._links import WALL_CLOCK_CAVEAT, WORK_INFLATION

__all__ = ["FLAG", "inflation", "by_name", "inflation_lines", "flag_text", "load_note"]

FLAG = 1.2  # inflation above this is flagged in summaries and reports


def _check(tr, baseline):
    if type(baseline) is not type(tr):
        raise TypeError(f"inflation needs a baseline taskgraph.Trace (of the same program, "
                        f"e.g. on 1 worker), got {type(baseline).__name__} {baseline!r:.80}")
    if not tr.records:
        raise ValueError("inflation of an empty trace (no tasks recorded)")
    if not baseline.records:
        raise ValueError("inflation against an empty baseline trace (no tasks recorded)")
    mine, theirs = Counter(r.name for r in tr.records), Counter(r.name for r in baseline.records)
    if set(mine) != set(theirs):
        only_here = sorted(set(mine) - set(theirs))[:5]
        only_there = sorted(set(theirs) - set(mine))[:5]
        raise ValueError("the baseline is not a trace of the same program: tasks "
                         f"{only_here} only in this trace, {only_there} only in the baseline")
    if not baseline.work:
        raise ValueError("the baseline trace has no work (every own time is 0)")


def inflation(tr, baseline) -> float:
    """work(tr) / work(baseline)."""
    _check(tr, baseline)
    return tr.work / baseline.work


def by_name(tr, baseline) -> list[tuple]:
    """[(name, tasks, work here ns, work in baseline ns, inflation)], most work first. The
    inflation of a name is per task (the two traces may run a different number of tasks of
    it); inf when its baseline tasks had no own time."""
    _check(tr, baseline)

    def totals(t):
        out = {}
        for r in t.records:
            d = out.setdefault(r.name, [0, 0])
            d[0] += 1
            d[1] += r.own
        return out
    here, base = totals(tr), totals(baseline)
    rows = []
    for name, (n, w) in here.items():
        bn, bw = base[name]
        per_b = bw / bn
        rows.append((name, n, w, bw, (w / n) / per_b if per_b else float("inf")))
    rows.sort(key=lambda row: -row[2])
    return rows


def inflation_lines(tr, baseline, limit=8) -> list[str]:
    """The lines Trace.summary(baseline=...) adds."""
    total = inflation(tr, baseline)
    lines = [f"  work inflation {total:.2f}x: work {tr.work / 1e6:.3f} ms here, "
             f"{baseline.work / 1e6:.3f} ms in the baseline (on "
             f"{workers_phrase(baseline.workers, baseline.pool_size)})"]
    rows = by_name(tr, baseline)
    lines.append("  task                     tasks     work here  work baseline  inflation")
    for name, n, w, bw, x in rows[:limit]:
        mark = "  <-" if x > FLAG else ""
        lines.append(f"  {name[:22]:22} {n:7d} {w / 1e6:10.3f} ms {bw / 1e6:11.3f} ms "
                     f"{x:9.2f}x{mark}")
    if len(rows) > limit:
        lines.append(f"  ... {len(rows) - limit} more task names")
    if total > FLAG or any(x > FLAG for *_, x in rows):
        lines.append(f"  {flag_text(tr, baseline)}")
    return lines


def load_note(tr, baseline) -> str | None:
    """What the machine's load says about an inflation, or None when neither trace was
    recorded on a machine busier than its CPUs (or the traces do not say)."""
    busy = []
    for what, t in (("this trace", tr), ("the baseline", baseline)):
        load, cpus = t.meta.get("load"), t.meta.get("cpus")
        if isinstance(load, (int, float)) and isinstance(cpus, int) and cpus > 0 and load > cpus:
            busy.append(f"{what} at load average {load:.1f} on {cpus} CPUs")
    if not busy:
        return None
    return (f"the machine was busy ({' and '.join(busy)}): own times are wall-clock, so a worker "
            "that lost its core to another process was charged the wait, and part of this "
            f"inflation may be that: compare runs on a quiet machine ({WALL_CLOCK_CAVEAT})")


def flag_text(tr, baseline) -> str:
    """The words of the inflation's flag (summary and report)."""
    text = (f"inflation above {FLAG}x: the tasks ran slower side by side (shared objects, a "
            f"lock, memory bandwidth); see {WORK_INFLATION}")
    note = load_note(tr, baseline)
    return f"{text}. But {note}" if note else text


def summary_lines(tr, baseline=None) -> list[str]:
    """What Trace.summary adds to its figures: the burdened parallelism, the inflation against
    baseline (if given) and, once, the task functions with a hazard."""
    from taskgraph._hazards import hazards_for
    from taskgraph.trace.predict import burdened_span, costs
    c = costs(tr.records)
    tb = burdened_span(tr.records, c["per_steal"])
    how = (f"{c['per_steal'] / 1e3:.1f} us per steal, measured on {c['steals']} stolen tasks"
           if c["steal_measured"] else
           f"no steal measured: {c['per_steal'] / 1e3:.1f} us, the per-task overhead")
    lines = [f"  burdened parallelism  T1/burdened T_inf = {tr.work / tb if tb else 1.0:.2f}  "
             f"({how}; Trace.predict() for P workers)"]
    if baseline is not None:
        lines += inflation_lines(tr, baseline)
    hz = hazards_for(r.name for r in tr.records)
    if hz:
        lines.append(f"  possible contention ({WORK_INFLATION}): every worker running these "
                     "tasks writes the reference count of one shared object:")
        lines += [f"    {h}" for h in hz]
    return lines
