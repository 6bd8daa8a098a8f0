"""The targets on CPython 3.14t, with 3.13t beside (docs/benchmarks.md): their figures, which
benchmark measures each, and the table report.py writes of them.

Every target is a figure of 2 workers (c1: 1 worker) measured in at least 5 alternated rounds
by the benchmark that holds it (which imports its number from here). A target is met only when
its median and its worst round meet it on an idle machine (_common.verdict); report.py judges
3.14t's rounds again with the numbers below, so the table always holds them to the targets it
prints. The 3.13t figure stands beside it, measured by the same benchmark in the same
`make bench`. The suite's fork-join and DAG workloads are judged against 3.13t itself: 3.14t's
2-worker speed-up over serial must be at least SUITE_RATIO of 3.13t's, in the median and in the
worst round (3.14t's slowest round over 3.13t's), both machines idle (_common.judge).

`results` below is one interpreter's results directory as report.py reads it: {"per_task": ...,
"ft": ..., "map_fanout": ..., "predict": ...}, None for a file that is missing.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from _common import IDLE_OTHERS_MAX, is_idle, judge, verdict, verdict_cell

FIB_INFLATION = 1.05          # work inflation of fib(28) cutoff 16, 2 workers over 1
FIB_SPEEDUP = 1.9             # fib(28) cutoff 16 on 2 workers over serial
PREDICT_PCT = 10              # |Trace.predict's speed-up / the measured one - 1|, in %
PREDICT_PROGRAM = "fib(27), cutoff 15"
C1 = 5                        # c1 = T1 / T_serial of fib(20) spawning at every level ...
C1_FLOOR_ABOVE = 4            # ... unless the bare floor's own c1 is above this; then
C1_NS_OVER_FLOOR = 100        # taskgraph's ns per task above the floor
SUITE_RATIO = 0.95            # 3.14t's suite speed-ups over 3.13t's
SUITE_WORKLOADS = (2, 3, 4, 5, 6, 7)
TRACING_PCT = 15              # extra time with a trace open, trivial tasks
FANOUT = 1.2                  # flat fan-out of trivial children, 2 workers over 1 per child
MAP_RANGE = 0.8               # tg.map over a range of trivial items over the comprehension
GATHER = 1.3                  # tg.gather(*kids) over a loop of .result()
COMPUTE_STAR = 1.3            # tg.compute(*nodes) over tg.compute(nodes)
DASHBOARD_TRIVIAL = 10        # extra time of trivial tasks with a dashboard open, %
DASHBOARD_FIB = 2             # extra time of fib(28) cutoff 16 with a dashboard open, %
WAITING_CALLS = 0.5           # s for 200 calls that wait 50 ms (tg.Executor(), tasks)
WAITING_FIB = 1.8             # fib(28) cutoff 16 over serial, 100 waiting tasks in flight
WAITING_GONE = 1.0            # s until the spare threads are gone after 10,000 waiting tasks
# per_task.py's figures that are targets here (report.py's per-task table leaves them out)
PER_TASK_KEYS = ("fib_inflation", "fib_cutoff", "c1", "tracing", "gather", "compute_star")


class Target(NamedTuple):
    default_label: str                    # when the figure brings no label of its own
    text: str                             # the target as the table says it
    get: Callable                         # results -> {values, load, label, fig} or None
    target: float
    better: str
    fmt: str = "{:.3g}"
    unit: str = ""


def per_task(key):
    def get(results):
        pt = (results or {}).get("per_task")
        f = next((f for f in (pt or {}).get("figures", []) if f["key"] == key), None)
        if f is None or "values" not in f:
            return None
        return {"values": f["values"], "load": f.get("load"), "label": f["label"], "fig": f}
    return get


def map_fanout(path, key, what):
    def get(results):
        r = (results or {}).get("map_fanout") or {}
        for part in path:
            r = r.get(part, {})
        if key + "_judged" not in r:
            return None
        size = f"{r['children']:,}" if "children" in r else f"{r['items']:,}"
        return {"values": r[key + "_judged"]["values"], "load": r.get("load"),
                "label": what.format(size=size), "fig": r}
    return get


def dashboard(key):
    def get(results):
        d = (results or {}).get("dashboard")
        f = next((f for f in (d or {}).get("figures", []) if f["key"] == key), None)
        if f is None or "values" not in f:
            return None
        return {"values": f["values"], "load": f.get("load"),
                "label": f["label"] + " (benchmarks/dashboard.py)", "fig": f}
    return get


def waiting(part, key, label):
    def get(results):
        sec = ((results or {}).get("waiting") or {}).get(part) or {}
        r = sec.get(key) if key else sec
        if not isinstance(r, dict):
            return None
        values = r.get("values", [r["gone_after_s"]] if "gone_after_s" in r else None)
        if values is None:
            return None
        return {"values": values, "load": sec.get("load"),
                "label": label + " (benchmarks/waiting.py)", "fig": r}
    return get


def predict(results):
    rows = ((results or {}).get("predict") or {}).get("predict", [])
    row = next((r for r in rows if r["program"] == PREDICT_PROGRAM), None)
    if row is None or "abs_error_judged" not in row:
        return None
    return {"values": row["abs_error_judged"]["values"], "load": row.get("load"), "fig": row}


TARGETS = [
    Target("work inflation of fib(28) cutoff 16", f"<= {FIB_INFLATION}",
           per_task("fib_inflation"), FIB_INFLATION, "lower", "{:.3f}"),
    Target("fib(28) cutoff 16, speed-up over serial", f">= {FIB_SPEEDUP}x",
           per_task("fib_cutoff"), FIB_SPEEDUP, "higher", unit="x"),
    Target(f"Trace.predict's 2-worker speed-up against the measured one, {PREDICT_PROGRAM} "
           "(benchmarks/predict.py): \\|simulated / measured - 1\\|", f"<= {PREDICT_PCT}%",
           predict, PREDICT_PCT, "lower", "{:.1f}", "%"),
    Target("c1 = T1 / T_serial, fib(20) spawning at every level, 1 worker",
           f"c1 <= {C1}; where the bare floor's c1 is above {C1_FLOOR_ABOVE}, <= {C1_NS_OVER_FLOOR} "
           "ns per task above the floor", per_task("c1"), C1, "lower", "{:.2f}"),
    "suite",  # the suite's rows (suite_rows) stand here
    Target("tracing on, trivial tasks", f"<= {TRACING_PCT}%", per_task("tracing"), TRACING_PCT,
           "lower", "{:.1f}", "%"),
    Target("flat fan-out of trivial children", f"<= {FANOUT}",
           map_fanout(["fanout_trivial"], "ratio_2w_over_1w",
                      "flat fan-out, {size} trivial children: time per child on 2 workers over 1 "
                      "(benchmarks/map_fanout.py)"), FANOUT, "lower"),
    Target("tg.map over a range of trivial items", f"<= {MAP_RANGE}",
           map_fanout(["map_trivial", "range"], "ratio_map_over_comprehension",
                      "tg.map over a range of {size} trivial items: time over the list "
                      "comprehension's (benchmarks/map_fanout.py)"), MAP_RANGE, "lower"),
    Target("tg.gather(*kids) over a loop of .result()", f"<= {GATHER}x", per_task("gather"),
           GATHER, "lower", unit="x"),
    Target("tg.compute(*nodes) over tg.compute(nodes)", f"<= {COMPUTE_STAR}x",
           per_task("compute_star"), COMPUTE_STAR, "lower", unit="x"),
    Target("trivial tasks with a dashboard open", f"<= {DASHBOARD_TRIVIAL}%",
           dashboard("trivial"), DASHBOARD_TRIVIAL, "lower", "{:.1f}", "%"),
    Target("fib(28) cutoff 16 with a dashboard open", f"<= {DASHBOARD_FIB}%",
           dashboard("fib_cutoff"), DASHBOARD_FIB, "lower", "{:.1f}", "%"),
    Target("200 calls waiting 50 ms, tg.Executor().submit", f"<= {WAITING_CALLS} s",
           waiting("calls", "taskgraph_executor", "200 calls waiting 50 ms through "
                   "tg.Executor().submit, s"), WAITING_CALLS, "lower", "{:.3f}", " s"),
    Target("200 calls waiting 50 ms, tg.Executor().map", f"<= {WAITING_CALLS} s",
           waiting("calls", "taskgraph_executor_map", "200 calls waiting 50 ms through "
                   "tg.Executor().map, s"), WAITING_CALLS, "lower", "{:.3f}", " s"),
    Target("200 tasks waiting 50 ms in tg.blocking()", f"<= {WAITING_CALLS} s",
           waiting("calls", "tasks_blocking", "200 tasks waiting 50 ms inside tg.blocking(), s"),
           WAITING_CALLS, "lower", "{:.3f}", " s"),
    Target("fib(28) cutoff 16 beside 100 waiting tasks, over serial", f">= {WAITING_FIB}x",
           waiting("fib_with_waiting", "speedup_with_waiting", "fib(28) cutoff 16 on 2 workers "
                   "while 100 tasks waiting 50 ms are in flight, over serial"),
           WAITING_FIB, "higher", unit="x"),
    Target("spare threads gone after 10,000 waiting tasks", f"<= {WAITING_GONE} s",
           waiting("bound", None, "10,000 waiting tasks: spare threads gone after the last, s"),
           WAITING_GONE, "lower", "{:.2f}", " s"),
]


def c1_verdict(c1s, ns_over_floor=None, floor_c1=None, load=None):
    """(word, rule) of c1 from its rounds: c1 <= C1, or, where the bare floor's own c1 (its
    median) is above C1_FLOOR_ABOVE, taskgraph's ns per task above the floor (per round) <=
    C1_NS_OVER_FLOOR; rule is "c1" or "ns_over_floor"."""
    if ns_over_floor and floor_c1 is not None and floor_c1 > C1_FLOOR_ABOVE:
        return verdict(ns_over_floor, C1_NS_OVER_FLOOR, "lower", load=load)[0], "ns_over_floor"
    return verdict(c1s, C1, "lower", load=load)[0], "c1"


def judged(t, fig):
    """(word, median, worst, rule text) of a figure against its target (c1: c1_verdict)."""
    f = fig.get("fig", {})
    _, det = verdict(fig["values"], t.target, t.better)
    if f.get("key") == "c1":
        word, rule = c1_verdict(fig["values"], f.get("ns_over_floor_values"),
                                f.get("floor_c1", {}).get("median"), fig["load"])
        return word, det["median"], det["worst"], (
            f" (by the ns above the floor: its c1 is above {C1_FLOOR_ABOVE})" if rule == "ns_over_floor" else " (by c1)")
    word, _ = verdict(fig["values"], t.target, t.better, load=fig["load"])
    return word, det["median"], det["worst"], ""


def cell(t, fig):
    """median [worst] of a figure (c1: with the ns above the floor), or why there is none."""
    if fig is None:
        return "not measured"
    _, med, worst, _ = judged(t, fig)
    text = f"{t.fmt.format(med)}{t.unit} [{t.fmt.format(worst)}{t.unit}]"
    f = fig.get("fig", {})
    if f.get("key") == "c1" and "ns_over_floor" in f:
        ns = f["ns_over_floor"]
        text += f"; {ns['median']:.0f} [{ns['max']:.0f}] ns above the floor (its c1 {f['floor_c1']['median']:.2f})"
    return text + busy_mark(fig["load"])


def busy_mark(load):
    """What a cell says of a figure measured while other programs used more than
    IDLE_OTHERS_MAX of the machine."""
    return "" if load is None or is_idle(load) else f" (busy: others {load['others_share']:.0%})"


def busier(a, b):
    """Of two Machine() records, the one where other programs used more of the machine."""
    return max((a or {}, b or {}), key=lambda x: x.get("others_share", 1.0))


def suite_rows(r14, r13):
    """One row per fork-join and DAG workload of the suite: the 2-worker speed-ups over serial
    (median [worst round]) on both interpreters, and 3.14t's over 3.13t's, judged."""
    a14 = ((r14 or {}).get("ft") or {}).get("alternated", {})
    a13 = ((r13 or {}).get("ft") or {}).get("alternated", {})
    out = []
    for k in SUITE_WORKLOADS:
        x, y = a14.get(str(k)), a13.get(str(k))
        if x is None:
            continue
        sx = f"{x['speedup']['median']:.2f}x [{x['speedup']['min']:.2f}x]{busy_mark(x.get('load'))}"
        sy = (f"{y['speedup']['median']:.2f}x [{y['speedup']['min']:.2f}x]{busy_mark(y.get('load'))}" if y
              else "not measured" if r13 else "no 3.13t run")
        if y:
            med = x["speedup"]["median"] / y["speedup"]["median"]
            worst = x["speedup"]["min"] / y["speedup"]["min"]
            word, _ = judge(med, worst, SUITE_RATIO, "higher", load=busier(x.get("load"), y.get("load")))
            v = f"{verdict_cell(word)}: 3.14t / 3.13t {med:.2f} [{worst:.2f}]"
        else:
            v = "*not judged (no 3.13t figure)*"
        out.append(f"| suite {k}, {x['title']}: 2-worker speed-up over serial (benchmarks/suite.py) "
                   f"| >= {SUITE_RATIO}x 3.13t's | {sx} | {sy} | {v} |")
    return out


def table(r14, r13):
    """The lines of the targets table, and [(label, values, target, floor, better)] of 3.14t's
    figures with rounds (for report.py's plot)."""
    lines = ["### Targets on CPython 3.14t, with 3.13t beside", "",
             "Each figure: median [worst round] of at least 5 alternated rounds, 2 workers (c1: 1 "
             "worker). The verdict is 3.14t's: met only when the median and the worst round meet "
             f"the target with other programs using at most {IDLE_OTHERS_MAX:.0%} of the machine; a "
             "figure that holds on a busier machine is not judged, and a figure measured there says "
             "so. The suite's rows hold 3.14t's "
             f"speed-up to at least {SUITE_RATIO} of 3.13t's (the worst: 3.14t's slowest round over "
             "3.13t's).", "",
             "| figure | target | 3.14t | 3.13t | verdict on 3.14t |", "|---|---|---|---|---|"]
    plot = []
    for t in TARGETS:
        if t == "suite":
            lines += suite_rows(r14, r13)
            continue
        f14, f13 = t.get(r14), t.get(r13)
        label = (f14 or f13 or {}).get("label", t.default_label)
        if f14:
            word, _, _, rule = judged(t, f14)
            v = verdict_cell(word) + rule
            plot.append((label, f14["values"], t.target, None, t.better))
        else:
            v = "not measured"
        lines.append(f"| {label} | {t.text} | {cell(t, f14)} | {cell(t, f13) if r13 else 'no 3.13t run'} | {v} |")
    return lines, plot

