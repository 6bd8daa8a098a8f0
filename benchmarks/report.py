"""Turns the benchmarks' results into the generated section of docs/benchmarks.md (between the
GENERATED markers), DIR/latest.json (every result in one file) and the plots beside the page.

    python benchmarks/report.py --results DIR [--results-313t DIR] [--doc PAGE]

DIR holds the JSON files `make bench` writes (benchmarks/run_speed.py and the rest): ft.json,
gil.json, per_task.json, instructions.json, dask.json, dask_get.json, map_fanout.json,
shapes.json, predict.json, executor.json, skipped.json. --results-313t is the same directory
from free-threaded CPython 3.13: its figures stand beside 3.14t's (the targets table,
benchmarks/targets.py, and a column of the other tables where the figure is at hand). --doc:
the page to write (default docs/benchmarks.md; made with the markers if it does not exist);
the plots go into img/ beside it.

Needs matplotlib for the plots (the `plot` extra; `make bench` installs it in .venv-gil).
Without it the tables are still written.
"""
from __future__ import annotations

import argparse
import json
import os

from _common import verdict_cell
import targets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
BEGIN, END = "<!-- GENERATED: begin (benchmarks/report.py) -->", "<!-- GENERATED: end -->"
FILES = {"ft": "ft.json", "gil": "gil.json", "per_task": "per_task.json",
         "instructions": "instructions.json", "dask": "dask.json", "dask_get": "dask_get.json",
         "map_fanout": "map_fanout.json", "shapes": "shapes.json", "predict": "predict.json",
         "executor": "executor.json", "dashboard": "dashboard.json", "waiting": "waiting.json",
         "ceiling": "ceiling.json", "skipped": "skipped.json"}
TOOLS = ["serial", "taskgraph", "threadpool", "processpool", "joblib-threads", "joblib-loky",
         "dask-threads"]
LABEL = {"serial": "serial Python", "taskgraph": "**taskgraph**", "threadpool": "ThreadPoolExecutor",
         "processpool": "ProcessPoolExecutor", "joblib-threads": "joblib (threading)",
         "joblib-loky": "joblib (loky)", "dask-threads": "dask threaded"}


def index(doc):
    out = {}
    for r in doc["results"]:
        out[(r["workload"], r["tool"], r["workers"])] = r
    return out


def fmt_t(r):
    if r is None:
        return ""
    if "na" in r:
        return "n/a"
    m, lo, hi = r["median"], r["min"], r["max"]
    if m < 1e-3:
        return f"{m * 1e6:.0f} us ({lo * 1e6:.0f}-{hi * 1e6:.0f})"
    if m < 1:
        return f"{m * 1e3:.1f} ms ({lo * 1e3:.1f}-{hi * 1e3:.1f})"
    return f"{m:.2f} s ({lo:.2f}-{hi:.2f})"


def ratio(a, b):
    if not a or not b or "median" not in a or "median" not in b or not b["median"]:
        return None
    return a["median"] / b["median"]


def suite_table(doc, doc13, gil):
    """The suite in one table: per workload, serial's time, taskgraph on 1, 2 and 4 workers and
    each peer on 2 (speed-up over serial; workload 1: microseconds per trivial task), and
    taskgraph on 3.13t and on the GIL build beside."""
    ix, ix13, gix = index(doc), index(doc13) if doc13 else {}, index(gil) if gil else {}
    titles = {r["workload"]: r["title"] for r in doc["results"]}
    peers = [t for t in TOOLS if t not in ("serial", "taskgraph") and any(r["tool"] == t for r in doc["results"])]
    notes = []

    def cell(ix_, w, tool, n):
        r = ix_.get((w, tool, n))
        if r is None:
            return ""
        note = f"workload {w}: {r.get('na') or r.get('note')}"
        if ("na" in r or (r.get("note") and tool not in ("serial", "taskgraph"))) and note not in notes:
            notes.append(note)
        if "na" in r:
            return "n/a"
        if w == 1:
            return f"{r['us_per_task']:.2f}"
        sp = ratio(ix_.get((w, "serial", 1)), r)
        sample_sort = w == 4 and tool not in ("serial", "taskgraph")
        return (f"{sp:.2f}" + (", a sample sort" if sample_sort else "")) if sp else ""

    def three(ix_, w):
        return " / ".join(cell(ix_, w, "taskgraph", n) or "-" for n in (1, 2, 4))

    lines = [f"### The suite against its peers (benchmarks/suite.py, {interp(doc['env'])})", "",
             "Median of 5 runs per cell. Workload 1: microseconds per trivial task (2 workers "
             "for the peers); the others: speed-up over serial Python, at 2 workers for the peers "
             "(taskgraph: at 1 / 2 / 4). Serial: its time. Beside taskgraph: the same on CPython "
             "3.13t, and at 2 workers on the GIL build"
             + (f" (CPython {gil['env']['python']}, GIL enabled: {gil['env']['gil_enabled']}), where "
                "free threading is what lets the workers run at once" if gil else " (not run)")
             + ". Every time with its min and max: latest.json.", "",
             "| workload | serial | **taskgraph** 1w / 2w / 4w | taskgraph on 3.13t | GIL build, 2w | "
             + " | ".join(LABEL[t] for t in peers) + " |",
             "|---|---|---|---|---|" + "---|" * len(peers)]
    for w in sorted(titles):
        serial = ix.get((w, "serial", 1))
        lines.append(f"| {w}. {titles[w]} | {fmt_t(serial)} | {three(ix, w)} | "
                     f"{three(ix13, w) if ix13 else 'not run'} | {cell(gix, w, 'taskgraph', 2)} | "
                     + " | ".join(cell(ix, w, t, 2) for t in peers) + " |")
    more = []
    t2, s2 = ix.get((2, "taskgraph", 1)), ix.get((2, "serial", 1))
    if t2 and s2:
        more.append(f"workload 2 on 1 worker: c1 = T1 / T_serial = {ratio(t2, s2):.1f} ({t2['tasks']} "
                    f"tasks, {t2['median'] / t2['tasks'] * 1e6:.2f} us each)")
    t5 = ix.get((5, "taskgraph", 1))
    if t5 and "us_overhead_per_task" in t5:
        v = t5["us_overhead_per_task"]
        more.append(f"workload 5 on 1 worker: {v:.1f} us per task above serial, its 3 edges included"
                    if v >= 0 else "workload 5 on 1 worker: below the noise (faster than serial in this run)")
    t7, s7 = ix.get((7, "taskgraph", 2)), ix.get((7, "serial", 1))
    if t7 and s7 and "steals_per_s" in t7:
        more.append(f"workload 7 on 2 workers: {t7['steals_per_s']:,.0f} steals/s, idle fraction "
                    f"(1 - T_serial / (2 T)) {max(0.0, 1 - s7['median'] / (2 * t7['median'])):.2f}")
    if more:
        text = "; ".join(more)
        say(lines, text[0].upper() + text[1:] + ".")
    if notes:
        say(lines, "Peers: " + "; ".join(notes) + ".")
    return "\n".join(lines)


def say(lines, text):
    """Adds text to the paragraph that ends lines, or starts a paragraph after a table."""
    if lines and lines[-1] and not lines[-1].startswith(("|", "#", "!")):
        lines[-1] += " " + text
    else:
        lines += ["", text]


def interp(env):
    """The interpreter a result was measured on, as the tables name it: CPython 3.14t."""
    major_minor = ".".join(env["python"].split(".")[:2])
    return f"CPython {major_minor}{'' if env.get('gil_enabled') else 't'}"


def spread(s, fmt="{:.3g}"):
    """median [min-max] of a _common.summary dict."""
    return f"{fmt.format(s['median'])} [{fmt.format(s['min'])}-{fmt.format(s['max'])}]"


def load_cell(load):
    if not load or "others_share" not in load:
        return "n/a"
    return f"{load['idle_share'] * 100:.0f}% / {load['others_share'] * 100:.0f}%"


def per_task_table(pt, pt13, skip):
    """per_task.py's figures but those of the targets table (keys in skip), 3.13t's beside."""
    env = pt["env"]
    f13 = {f["key"]: f for f in (pt13 or {}).get("figures", [])}
    lines = [f"### Per-task figures (benchmarks/per_task.py, {interp(env)})", "",
             f"Python {env['python']}, {env['cpus']} CPUs{' (quick sizes)' if env['quick'] else ''}; "
             f"median [min-max] of {env.get('rounds', 'several')} alternated rounds; a target is "
             "met when the median and the worst round (or its floor) hold on an idle machine. "
             "Idle / others: the machine's idle CPU share and the share other programs used "
             "meanwhile.", "",
             "| figure | median [min-max] | target | floor | idle / others | | 3.13t |",
             "|---|---|---|---|---|---|---|"]
    for f in pt["figures"]:
        if f["key"] in skip or "summary" not in f:
            continue
        op = "<=" if f["better"] == "lower" else ">="
        unit = f" {f['unit']}" if f["unit"] else ""
        g = f13.get(f["key"])
        lines.append(f"| {f['label']} | **{spread(f['summary'])}{unit}** | {op} {f['target']} | "
                     f"{op + ' ' + str(f['floor']) if f.get('floor') is not None else ''} | "
                     f"{load_cell(f.get('load'))} | {verdict_cell(f['verdict'])} | "
                     f"{spread(g['summary']) + unit if g and 'summary' in g else 'not measured'} |")
    extra = {f["key"]: f for f in pt["figures"]}
    notes = []
    if "trivial_vs_tpe" in extra:
        u = extra["trivial_vs_tpe"]["us_per_task"]
        notes.append(f"Per trivial task, 2 workers: spawned {u['spawned']:.2f} us, lazy {u['lazy']:.2f} us, "
                     f"ThreadPoolExecutor(2) {u['tpe']:.2f} us; with a trace open: spawned "
                     f"{u['spawned_traced']:.2f} us, lazy {u['lazy_traced']:.2f} us.")
    if "first_compute_m_per_s" in extra.get("lazy_million", {}):
        notes.append(f"The million lazy tasks, the first compute of that size in the process (its "
                     f"memory taken from the kernel; timed apart): "
                     f"{extra['lazy_million']['first_compute_m_per_s']:.2f} M tasks/s.")
    if "quicksort" in extra and "boxed_speedup" in extra["quicksort"]:
        q = extra["quicksort"]
        notes.append(f"The quicksort on a list of Python floats made by the main thread: speed-up "
                     f"{q['boxed_speedup']:.2f}, against {q['value']:.2f} on array('d') "
                     "(docs/performance.md, section 2).")
    if "queens" in extra and "speedup_over_serial" in extra["queens"]:
        lit = extra["queens"].get("literal_full")
        notes.append(f"12-queens on 2 workers over the serial search: "
                     f"{extra['queens']['speedup_over_serial']:.2f}x"
                     + (f"; with `FULL` written as a literal (immortal), 2 workers over 1: {spread(lit)}x."
                        if lit else "."))
    if "c1" in extra and "leaf_shape_c1" in extra["c1"]:
        c = extra["c1"]
        notes.append(f"c1 with leaves returning n: {spread(c['leaf_shape_c1'])}"
                     + (f", the bare floor's {spread(c['leaf_shape_floor_c1'])}." if "leaf_shape_floor_c1" in c else "."))
    if notes:
        lines += ["", " ".join(notes)]
    return "\n".join(lines)


def instructions_table(ins, ins13, env):
    cats = []
    for w in ins.values():
        for c in w["per_task"]:
            if c not in cats:
                cats.append(c)
    lines = [f"### Where a task's time goes, in instructions (benchmarks/instructions.py, {interp(env)})", "",
             "Instructions per task (callgrind; N and 2N tasks, the difference over N: start-up "
             "cancelled out). Deterministic, unlike the times above. The last column: the total on "
             "CPython 3.13t.", "",
             "| workload | total | " + " | ".join(cats) + " | 3.13t |",
             "|---|---|" + "---|" * len(cats) + "---|"]
    for name, w in ins.items():
        w13 = (ins13 or {}).get(name)
        lines.append(f"| {w['description']} | **{w['total']:.0f}** | "
                     + " | ".join(f"{w['per_task'].get(c, 0):.0f}" for c in cats)
                     + (f" | {w13['total']:.0f} |" if w13 else " | not measured |"))
    base, traced, fed = (ins.get(k) for k in ("lazy_1000", "lazy_traced", "lazy_feed"))
    if base and traced and fed:
        def off_main(w):  # the worker's share: every thread but the main one
            return w["total"] - w.get("main_thread", 0)
        lines += ["", f"What observing costs a trivial lazy task (its rows above): a trace open adds "
                  f"{traced['total'] - base['total']:.0f} instructions "
                  f"({(traced['total'] / base['total'] - 1) * 100:.1f}%; on the worker "
                  f"{off_main(traced) - off_main(base):.0f}, "
                  f"{(off_main(traced) / off_main(base) - 1) * 100:.1f}% of its "
                  f"{off_main(base):.0f}); a dashboard's live feed adds "
                  f"{off_main(fed) - off_main(base):.0f} on the worker "
                  f"({(off_main(fed) / off_main(base) - 1) * 100:.1f}%) and "
                  f"{fed.get('main_thread', 0) - base.get('main_thread', 0):.0f} where its records "
                  f"are read (the sampler's drain), {(fed['total'] / base['total'] - 1) * 100:.1f}% "
                  f"of the task's instructions in all."]
    return "\n".join(lines)


def dask_table(dk):
    env = dk["env"]
    rows = {(r["workload"], r["backend"]): r for r in dk["rows"]}
    backends = list(dict.fromkeys(r["backend"] for r in dk["rows"]))
    workloads = list(dict.fromkeys(r["workload"] for r in dk["rows"]))
    fib = dk["fib"]
    lines = [f"### Local and on a dask cluster, per task (benchmarks/dask_overhead.py, {interp(dk['env'])})", "",
             f"distributed {env['distributed']}, a LocalCluster of 2 worker processes x 1 thread "
             f"on this machine (started in {env['cluster_start_s']:.1f} s); the local scheduler "
             f"with 2 workers. Microseconds per task (median of the runs{', quick sizes' if env['quick'] else ''}); "
             f"fib({fib['n']}) with cutoff {fib['cutoff']}: serial {fib['serial_s'] * 1e3:.0f} ms, "
             "speed-up in brackets.", "",
             "| workload | " + " | ".join(backends) + " |", "|---|" + "---|" * len(backends)]
    for w in workloads:
        cells = []
        for b in backends:
            r = rows.get((w, b))
            if r is None:
                cells.append("")
            else:
                sp = f" ({r['speedup']:.2f}x)" if "speedup" in r else ""
                cells.append(f"{r['us_per_task']:,.1f}{sp}")
        first = next(rows[(w, b)] for b in backends if (w, b) in rows)
        lines.append(f"| {w} ({first['tasks']} tasks) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def map_table(mp, mp13):
    """The flat fan-out and tg.map figures (benchmarks/map_fanout.py) but the two of the targets
    table, 3.13t's beside."""
    ft, fb, mt, m20 = mp["fanout_trivial"], mp["fanout_50us"], mp["map_trivial"], mp["map_20us"]
    crit = lambda r: f"{r['speedup_2w_cpu_critical']:.2f}x" if r.get("speedup_2w_cpu_critical") else "n/a"  # noqa: E731

    def row(label, path, key, unit=""):
        r, r13 = mp, mp13 or {}
        for part in path:
            r, r13 = r[part], r13.get(part, {})
        j = r[key + "_judged"]
        op = "<=" if j["better"] == "lower" else ">="
        return (f"| {label} | **{spread(r[key])}{unit}** | {op} {j['target']} | "
                f"{load_cell(r.get('load'))} | {verdict_cell(j['verdict'])} | "
                f"{spread(r13[key]) + unit if key in r13 else 'not measured'} |")

    lines = [f"### Flat fan-outs and tg.map (benchmarks/map_fanout.py, {interp(mp['env'])})", "",
             f"{mp.get('runs', '?')} alternated rounds per figure; median [min-max] of the per-round "
             "ratios; idle / others as above. The trivial fan-out and the map over a range are in "
             "the targets table. CPU-critical: the same from the worker threads' CPU times (what "
             "two free cores would give).", "",
             "| figure | median [min-max] | target | idle / others | | 3.13t |",
             "|---|---|---|---|---|---|",
             row(f"{fb['children']:,} children of ~50 us, speed-up of 2 workers over 1", ["fanout_50us"],
                 "speedup_2w", "x")]
    for kind, r in mt.items():
        if kind.startswith("peer ") or kind == "range":
            continue
        lines.append(row(f"tg.map over a {kind} of {r['items']:,} trivial items, time over the "
                         "list comprehension's", ["map_trivial", kind], "ratio_map_over_comprehension"))
    lines.append(row(f"tg.map over {m20['items']:,} items of ~20 us, speed-up over the serial loop",
                     ["map_20us"], "speedup_2w", "x"))
    lines += ["", f"The trivial fan-out's 2-worker runs: {ft['steal_attempts_per_run_2w']:,.0f} steal "
              f"attempts, {ft.get('looks_per_run_2w', 0):,.0f} looks and {ft['stolen_per_run_2w']:,.0f} "
              f"tasks stolen per run; 1 worker {ft['us_per_child_1w']['median']:.3f} us per child, 2 "
              f"workers {ft['us_per_child_2w']['median']:.3f} us; CPU-critical ratio {crit(ft)}. The ~50 "
              f"us fan-out's CPU-critical speed-up {crit(fb)}; tg.map over the range, CPU-critical "
              f"{crit(mt.get('range', {}))}; over ~20 us items {crit(m20)}, and two plain threads "
              f"splitting the same items by hand {spread(m20['speedup_threads_dynamic'])}x."
              if "speedup_threads_dynamic" in m20 else "."]
    if "costs" in mt.get("range", {}):
        lines += ["", costs_line(mt["range"]["costs"])]
    say(lines, "Peers per item, 2 threads: " + "; ".join(
        f"{name[5:]} {r['us_per_item']:.2f} us (trivial)" for name, r in mt.items() if name.startswith("peer "))
        + "; " + "; ".join(f"{name[5:]} {r['us_per_item']:.2f} us (~20 us items)"
                           for name, r in m20.items() if name.startswith("peer ")) + ".")
    return "\n".join(lines)


def costs_line(c):
    """map_fanout.result_costs: the two parts of tg.map over a range and of the comprehension."""
    ms = lambda k: f"{c[k]['median'] * 1e3:.1f} ms"  # noqa: E731
    return (f"tg.map over the range, its two parts timed apart (medians): the comprehension "
            f"builds its list in {ms('comprehension_build')} and frees it in "
            f"{ms('comprehension_free')}; tg.map builds in {ms('map_build')}, and the caller frees "
            f"its list, whose items the workers made, in {ms('map_free')}. A perfect split of the "
            f"comprehension's build over 2 workers, with nothing else added, would give "
            f"**{spread(c['bound'])}** (docs/benchmarks.md, \"What limits each figure\").")


def shapes_table(sh, sh13):
    """benchmarks/shapes.py: the adversarial shapes, P workers against 1, 3.13t's beside."""
    rows = [(k, v) for k, v in sh.items() if isinstance(v, dict) and "ratio_pw_over_1w" in v]
    if not rows:
        return ""
    p = rows[0][1]["workers"]
    lines = [f"### Shapes that must not lose to one worker (benchmarks/shapes.py, {interp(sh['env'])})", "",
             f"Each shape on 1 and on {p} workers, {sh.get('runs', '?')} alternated rounds: the "
             f"{p}-worker time over the 1-worker time per round (target <= 1 in the median and every "
             "round), the steal counters per run, and the busiest worker's CPU time against the "
             "1-worker run's (CPU-critical).", "",
             f"| shape | 1 worker, us per task | {p}w / 1w, median [min-max] | CPU-critical | steal "
             "attempts / looks / stolen per run | idle / others | | 3.13t |",
             "|---|---|---|---|---|---|---|---|"]
    for k, r in rows:
        c, r13 = r.get("cpu_critical_ratio"), (sh13 or {}).get(k, {})
        lines.append(f"| {r['description']} | {spread(r['us_per_task_1w'])} | **{spread(r['ratio_pw_over_1w'])}** | "
                     f"{spread(c) if c else 'n/a'} | {r['steal_attempts_per_run']:,.0f} / "
                     f"{r.get('looks_per_run', 0):,.0f} / {r['stolen_per_run']:,.0f} | {load_cell(r.get('load'))} | "
                     f"{verdict_cell(r['verdict'])} | "
                     f"{spread(r13['ratio_pw_over_1w']) if 'ratio_pw_over_1w' in r13 else 'not measured'} |")
    return "\n".join(lines)


def targets_plot(items, path):
    """The plot of every target's rounds, scaled so that 1 is the target (above 1: better), with
    the median, and the floor where there is one. items: [(label, values, target, floor, better)]."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if not items:
        return False
    norm = lambda v, t, b: (v / t) if b == "higher" else (t / v if v else 0)  # noqa: E731
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(items) + 1.4))
    for i, (label, vals, t, fl, b) in enumerate(items):
        xs = [norm(v, t, b) for v in vals]
        ax.scatter(xs, [i] * len(xs), s=14, color="#7f8c8d", zorder=2)
        med = sorted(xs)[len(xs) // 2]
        ax.scatter([med], [i], marker="|", s=300, color="#c0392b", zorder=3)
        if fl is not None:
            ax.scatter([norm(fl, t, b)], [i], marker="x", color="#2c3e50", zorder=3)
    ax.axvline(1.0, color="#27ae60", linestyle="--")
    ax.set_yticks(range(len(items)))
    ax.set_yticklabels([x[0] if len(x[0]) <= 62 else x[0][:60] + "..." for x in items], fontsize=7)
    ax.set_xlabel("per round, relative to the target (1 = the target; right of it: met; x: the floor)")
    ax.set_title("targets: every round (grey), median (red)")
    fig.tight_layout()
    fig.subplots_adjust(left=0.36)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=90)
    return True


def executor_table(ex):
    """taskgraph.Executor against concurrent.futures (benchmarks/executor.py)."""
    us = lambda r: f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"  # noqa: E731
    load = ", ".join(f"{x:.1f}" for x in ex.get("loadavg_start", ()))
    sb, mt, m20, fib, fu = (ex["submit"], ex["map_trivial"], ex["map_20us"], ex["nested_fib"],
                            ex["future"])
    tpe_fib = fib["threadpool"]
    lines = [f"### taskgraph.Executor against concurrent.futures (benchmarks/executor.py, {interp(ex['env'])})", "",
             f"2 workers each; medians of {sb['taskgraph']['runs']} alternated runs (min-max), us "
             f"per task or item; load average at the start: {load or 'not recorded'}.", "",
             "| figure | taskgraph.Executor | ThreadPoolExecutor | ProcessPoolExecutor | ratio to "
             "ThreadPoolExecutor | target |", "|---|---|---|---|---|---|",
             f"| {sb['tasks']:,} submits, then their results | {us(sb['taskgraph'])} | "
             f"{us(sb['threadpool'])} | {us(sb['processpool'])} ({sb['processpool_tasks']:,} tasks) | "
             f"{sb['ratio_vs_threadpool']:.1f}x | >= 5x |",
             f"| map over {mt['items']:,} trivial items | {us(mt['taskgraph'])} | "
             f"{us(mt['threadpool'])} | {us(mt['processpool'])} (chunksize "
             f"{mt['processpool_chunksize']:,}) | {mt['ratio_vs_threadpool']:.1f}x | >= 20x |",
             f"| map over {m20['items']:,} items of ~20 us (serial loop: "
             f"{m20['serial']['median']:.2f} us/item; speed-up {m20['speedup_vs_serial']:.2f}x) | "
             f"{us(m20['taskgraph'])} | {us(m20['threadpool'])} | {us(m20['processpool'])} "
             f"(chunksize {m20['processpool_chunksize']:,}) | {m20['ratio_vs_threadpool']:.1f}x | |",
             f"| fib({fib['n']}) with submit at every call ({fib['calls']:,} calls), max_workers=2 | "
             f"{fib['taskgraph_s']['median'] * 1e3:.1f} ms | "
             + ("deadlocked (killed after " f"{tpe_fib.get('timeout_s', 0):.0f} s)"
                if tpe_fib["outcome"] == "deadlocked" else f"finished: {tpe_fib.get('output', '')}")
             + " | n/a (a call cannot reach its executor) | | completes |", "",
             f"What `concurrent.futures.Future` itself costs here (one thread, best of 3): making "
             f"one {fu['make_ns_base']:,.0f} ns, of which its `threading.Condition` "
             f"{fu['condition_ns']:,.0f} ns; a whole life (made, set running, result set, result "
             f"read) {fu['life_ns_base']:,.0f} ns. taskgraph's subclass (an RLock, the Condition "
             f"made only for a blocking waiter): {fu['make_ns_taskgraph']:,.0f} ns and "
             f"{fu['life_ns_taskgraph']:,.0f} ns."]
    ins = ex.get("instructions")
    if ins:
        both = lambda k: f"{ins[k]['submitter']:,.0f} / {ins[k]['workers']:,.0f}"  # noqa: E731
        say(lines, "Instructions per submit+result (callgrind; 20,000 tasks less 10,000), the "
            f"submitting thread / both workers: taskgraph.Executor(2) {both('taskgraph_gc_on')} "
            f"with the cyclic collector on, {both('taskgraph_gc_off')} with it off; "
            f"ThreadPoolExecutor(2) {both('threadpool_gc_on')} and {both('threadpool_gc_off')}.")
    return "\n".join(lines)


def dask_get_table(dg, img):
    """taskgraph as dask's scheduler (benchmarks/dask_get.py): per task, dask.array, memory."""
    us = lambda r: f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"  # noqa: E731
    ms = lambda r: f"{r['median'] * 1e3:.1f} ms"  # noqa: E731
    load = lambda k: ", ".join(f"{x:.1f}" for x in dg.get(k, ()))  # noqa: E731
    cols = ["taskgraph 2w", "taskgraph 1w", "dask.threaded.get 2w", "dask.get", "dask.local.get_sync"]
    runs = dg["flat"]["us_per_task"]["taskgraph 2w"]["runs"]
    lines = [f"### taskgraph as dask's scheduler (benchmarks/dask_get.py, {interp(dg['env'])})", "",
             f"dask {dg['versions'].get('dask')}, numpy {dg['versions'].get('numpy', 'n/a')}; "
             f"medians of {runs} alternated runs{' (quick sizes)' if dg['env']['quick'] else ''}; "
             f"load average {load('loadavg_start')} at the start, {load('loadavg_end')} at the end. "
             "Per task: microseconds per task of the whole get call (min-max); conversion: "
             "taskgraph's building of the Nodes alone.", "",
             "| graph | tasks | " + " | ".join(cols) + " | conversion | threaded / taskgraph (2w) "
             "| dask.get / taskgraph (1w) |", "|---|---|" + "---|" * (len(cols) + 3)]
    for name in ("flat", "tree"):
        r = dg[name]
        lines.append(f"| {name} | {r['tasks']:,} | " + " | ".join(us(r["us_per_task"][c]) for c in cols)
                     + f" | {r['convert_us_per_task']:.2f} | {r['speedup_vs_threaded_2w']:.1f}x "
                     f"| {r['speedup_vs_sync_1w']:.1f}x |")
    if "array_small" in dg:
        lines += ["", "| dask.array, (sin(x) + 1).sum() | chunks | taskgraph (2w) | threads (2w) "
                  "| sync | threads / taskgraph |", "|---|---|---|---|---|---|"]
        for label, key in (("small chunks", "array_small"), ("large chunks", "array_large")):
            r = dg[key]
            for what, title in (("compute", "x.compute()"), ("get", "get alone")):
                t = r[f"{what}_s"]
                lines.append(f"| {label} {tuple(r['chunks'])}, {title} | {r['nchunks']:,} | "
                             f"{ms(t['taskgraph'])} | {ms(t['threads'])} | {ms(t['sync'])} | "
                             f"{r[f'{what}_speedup_vs_threads']:.2f}x |")
    if "memory" in dg:
        m = dg["memory"]
        lines += ["", f"Streaming reduction over {m['bytes'] / 2**30:.2f} GiB in {m['chunks']} "
                  f"chunks, peak RSS during the compute (fresh processes): taskgraph "
                  f"{m['taskgraph']['peak_mib']:.0f} MiB, dask.threaded.get "
                  f"{m['dask.threaded.get']['peak_mib']:.0f} MiB ({m['peak_ratio']:.2f}x)."]
    say(lines, "Targets: " + "; ".join(f"{t['label']} {t['target']}: {t['value']:.2f}, "
                                       f"{'met' if t['met'] else '**missed**'}" for t in dg["targets"]) + ".")
    if dask_get_plot(dg, os.path.join(img, "dask-get.png")):
        lines += ["", "![taskgraph.dask.get against dask's local schedulers](img/dask-get.png)"]
    return "\n".join(lines)


def dask_get_plot(dg, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    cols = ["taskgraph 2w", "taskgraph 1w", "dask.threaded.get 2w", "dask.get"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.2
    for j, c in enumerate(cols):
        vals = [dg[g]["us_per_task"][c]["median"] for g in ("flat", "tree")]
        a1.bar([i + j * width for i in range(2)], vals, width, label=c,
               color="#c0392b" if c.startswith("taskgraph") else None,
               alpha=1.0 if c == "taskgraph 2w" else 0.6)
    a1.set_yscale("log")
    a1.set_ylim(top=10 * max(dg[g]["us_per_task"][c]["median"] for g in ("flat", "tree") for c in cols))
    a1.set_xticks([i + 1.5 * width for i in range(2)])
    a1.set_xticklabels([f"flat ({dg['flat']['tasks']:,} tasks)", f"tree ({dg['tree']['tasks']:,} tasks)"])
    a1.set_ylabel("us per task (log)")
    a1.set_title("dask graphs of tiny tasks, per task")
    a1.legend(fontsize=8, ncol=2, loc="upper left")
    if "array_small" in dg:
        names = ["taskgraph", "threads", "sync"]
        groups = [("small, compute()", dg["array_small"]["compute_s"]),
                  ("small, get", dg["array_small"]["get_s"]),
                  ("large, compute()", dg["array_large"]["compute_s"])]
        for j, n in enumerate(names):
            a2.bar([i + j * 0.25 for i in range(len(groups))],
                   [g[n]["median"] * 1e3 for _, g in groups], 0.25, label=n,
                   color="#c0392b" if n == "taskgraph" else None)
        a2.set_xticks([i + 0.25 for i in range(len(groups))])
        a2.set_xticklabels([g for g, _ in groups])
        a2.set_ylabel("ms")
        a2.set_title("dask.array (sin(x) + 1).sum(), 2 workers")
        a2.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=90)
    return True


def plot(doc, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)")
        return False
    ix = index(doc)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for w, title in sorted({(r["workload"], r["title"]) for r in doc["results"]}):
        if w in (1, 2):  # overhead workloads: per-task cost (right panel) and c1 (table)
            continue
        s = ix.get((w, "serial", 1))
        ys = [ratio(s, ix.get((w, "taskgraph", n))) for n in (1, 2, 4)]
        if s and all(ys):
            a1.plot([1, 2, 4], ys, marker="o", label=f"{w}. {title}")
    a1.plot([1, 2, 4], [1, 2, 2], ":", color="grey", label="ideal on 2 cores")
    a1.set_xlabel("workers")
    a1.set_ylabel("speed-up over serial Python")
    a1.set_xticks([1, 2, 4])
    a1.set_title("taskgraph: speed-up vs workers (2-core machine)")
    a1.legend(fontsize=7)
    a1.grid(alpha=0.3)
    tools = [t for t in TOOLS if t != "serial" and ix.get((1, t, 2)) and "us_per_task" in ix[(1, t, 2)]]
    vals = [ix[(1, t, 2)]["us_per_task"] for t in tools]
    a2.bar(range(len(tools)), vals, color=["#c0392b" if t == "taskgraph" else "#7f8c8d" for t in tools])
    a2.set_yscale("log")
    a2.set_xticks(range(len(tools)))
    a2.set_xticklabels([LABEL[t].strip("*") for t in tools], rotation=25, ha="right", fontsize=8)
    a2.set_ylabel("us per trivial task (log)")
    a2.set_title("per-task overhead, 2 workers")
    for i, v in enumerate(vals):
        a2.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=90)
    return True


def predict_table(pr, pr13):
    """Trace.predict against the measured speed-up (benchmarks/predict.py), 3.13t's beside."""
    rows13 = {r["program"]: r for r in (pr13 or {}).get("predict", [])}
    lines = [f"### Predicted against measured speed-up (benchmarks/predict.py, {interp(pr['env'])})", "",
             f"{pr.get('rounds', '?')} alternated rounds per program, each on 1 worker, on 2 and "
             "traced on each; median [min-max] over the rounds. Simulated: Trace.predict's "
             "2-worker speed-up from the round's 1-worker trace (lower and upper bounds in "
             "brackets); inflation: the 2-worker trace's own time over the 1-worker one's, which "
             "the simulation cannot know.", "",
             "| program | tasks | measured 2w | simulated 2w (lower-upper) | simulated / measured - 1 "
             "| inflation | 64 workers simulated | 3.13t: measured / simulated |",
             "|---|---|---|---|---|---|---|---|"]
    for r in pr["predict"]:
        if "error_1w_pct" not in r:
            continue
        r13 = rows13.get(r["program"])
        lines.append(f"| {r['program']} | {r['tasks']} | {spread(r['measured'], '{:.2f}')} | "
                     f"{r['simulated_from_1w']['median']:.2f} ({r['lower_from_1w']['median']:.2f}-"
                     f"{r['upper_from_1w']['median']:.2f}) | {spread(r['error_1w_pct'], '{:+.0f}')}% | "
                     f"{spread(r['inflation'], '{:.2f}')} | {r['p64_from_1w']['simulated']['median']:.1f} | "
                     + (f"{r13['measured']['median']:.2f} / {r13['simulated_from_1w']['median']:.2f} |"
                        if r13 and "measured" in r13 else "not measured |"))
    return "\n".join(lines)


def ceiling_table(ce, ce13):
    """What two cores give plain Python with no scheduler (benchmarks/ceiling.py), 3.13t beside."""
    lines = [f"### What the machine gives two workers (benchmarks/ceiling.py, {interp(ce['env'])})", "",
             f"The same plain recursive fib, serial against parallel, {ce['k']} x fib({ce['n']}) a "
             f"side, {ce['processes']['runs']} alternated rounds; median [min-max] speed-up. "
             "Two processes share nothing but the machine: that row is the ceiling of any "
             "2-worker figure on it. Idle / others: " + load_cell(ce["load"]) + ".", "",
             "| way | 3.14t | 3.13t |", "|---|---|---|"]
    for key in ("processes", "threads", "taskgraph"):
        c13 = (ce13 or {}).get(key)
        lines.append(f"| {ce[key]['label']} | {spread(ce[key], '{:.2f}')}x | "
                     + (f"{spread(c13, '{:.2f}')}x |" if c13 else "not measured |"))
    t = ce["taskgraph_over_processes"]
    lines.append(f"| taskgraph over 2 processes, per round | {spread(t, '{:.2f}')} | "
                 + (f"{spread(ce13['taskgraph_over_processes'], '{:.2f}')} |" if ce13 else "not measured |"))
    return "\n".join(lines)


def read_results(d):
    """The results in directory d, by name (None for a file that is missing)."""
    out = {}
    for key, name in FILES.items():
        path = os.path.join(d, name) if d else None
        out[key] = json.load(open(path)) if path and os.path.exists(path) else None
    return out


def skipped_line(*results):
    said = []
    for res in results:
        sk = (res or {}).get("skipped") or {}
        for script, why in sk.get("skipped", {}).items():
            said.append(f"benchmarks/{script} on {sk['python']}: {why}")
    return ("Not run: " + "; ".join(said) + ".") if said else ""


def header(doc, r13):
    env = doc["env"]
    e13 = ((r13 or {}).get("ft") or {}).get("env")
    return (f"Measured {'(quick sizes) ' if env['quick'] else ''}on {env['cpus']} CPUs "
            f"({env['machine']}): free-threaded CPython {env['python']}"
            + (f" and, beside it, {e13['python']}" if e13 else " (no 3.13t run)")
            + f"; GIL enabled in a run: {env['gil_enabled']}"
            + (f" (3.13t: {e13['gil_enabled']})" if e13 else "") + "; versions: "
            + ", ".join(f"{k} {v}" for k, v in env["versions"].items()) + ".")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True, help="the 3.14t results directory")
    ap.add_argument("--results-313t", help="the 3.13t results directory")
    ap.add_argument("--doc", default=DOC)
    a = ap.parse_args(argv)
    r, r13 = read_results(a.results), read_results(a.results_313t)
    if a.results_313t is None:
        r13 = None
    latest = os.path.join(a.results, "latest.json")
    with open(latest, "w") as f:
        json.dump({"free_threaded_314t": r, "free_threaded_313t": r13}, f, indent=1)
    img = os.path.join(os.path.dirname(os.path.abspath(a.doc)), "img")
    doc, pt = r["ft"], r["per_task"]
    o = r13 or {}
    target_lines, items = targets.table(r, r13)
    items += [(f["label"], f["values"], f["target"], f.get("floor"), f["better"])
              for f in (pt or {}).get("figures", []) if "values" in f and f["key"] not in targets.PER_TASK_KEYS]
    gen = [BEGIN, "", header(doc, r13), "", *target_lines, ""]
    if targets_plot(items, os.path.join(img, "targets.png")):
        gen += ["![every round of every target, relative to the target](img/targets.png)", ""]
    parts = [(pt, lambda: per_task_table(pt, o.get("per_task"), targets.PER_TASK_KEYS)),
             (r["ceiling"], lambda: ceiling_table(r["ceiling"], o.get("ceiling"))),
             (r["predict"], lambda: predict_table(r["predict"], o.get("predict"))),
             (r["map_fanout"], lambda: map_table(r["map_fanout"], o.get("map_fanout"))),
             (r["shapes"], lambda: shapes_table(r["shapes"], o.get("shapes"))),
             (doc, lambda: suite_table(doc, o.get("ft"), r["gil"])),
             (r["instructions"], lambda: instructions_table(r["instructions"], o.get("instructions"), doc["env"])),
             (r["executor"], lambda: executor_table(r["executor"])),
             (r["dask_get"], lambda: dask_get_table(r["dask_get"], img)),
             (r["dask"], lambda: dask_table(r["dask"]))]
    for data, table in parts:
        if data:
            gen += [table(), ""]
    if plot(doc, os.path.join(img, "benchmarks.png")):
        gen += ["![speed-up vs workers, and per-task overhead per tool](img/benchmarks.png)", ""]
    skipped = skipped_line(r, r13)
    gen += ([skipped, ""] if skipped else []) + [END]
    text = open(a.doc).read() if os.path.exists(a.doc) else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    i, j = text.index(BEGIN), text.index(END) + len(END)
    with open(a.doc, "w") as f:
        f.write(text[:i] + "\n".join(gen) + text[j:])
    print(f"wrote {latest}, {a.doc} and its plots in {img}")


if __name__ == "__main__":
    main()
