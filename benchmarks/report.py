"""Turns benchmark results into benchmarks/results/latest.json, the tables and headline ratios
of docs/benchmarks.md (between the GENERATED markers) and docs/img/benchmarks.png.

    python benchmarks/report.py --suite FT.json [--gil GIL.json] [--per-task PT.json]
                                [--instructions INSTR.json] [--dask DASK.json] [--map MAP.json]
                                [--shapes SHAPES.json]
                                [--executor EXECUTOR.json]
                                [--dask-get DASKGET.json]

Needs matplotlib for the plot (the `plot` extra; `make bench` installs it in .venv-gil, since
matplotlib does not build on CPython 3.13t). Without it the tables are still written.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
PNG = os.path.join(ROOT, "docs", "img", "benchmarks.png")
LATEST = os.path.join(ROOT, "benchmarks", "results", "latest.json")
DASK_GET_PNG = os.path.join(ROOT, "docs", "img", "dask-get.png")
BEGIN, END = "<!-- GENERATED: begin (benchmarks/report.py) -->", "<!-- GENERATED: end -->"
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


def tables(doc, gil):
    ix = index(doc)
    wls = sorted({r["workload"] for r in doc["results"]})
    titles = {r["workload"]: r["title"] for r in doc["results"]}
    lines = []
    for w in wls:
        lines.append(f"### {w}. {titles[w]}")
        lines.append("")
        serial = ix.get((w, "serial", 1))
        extra = ""
        if w == 1:
            extra = " | us/task at 2 workers"
        elif w == 5:
            extra = " | cost per task incl. edges, 1 worker"
        elif w == 7:
            extra = " | steals/s, idle fraction (2 workers)"
        lines.append("| tool | 1 worker | 2 workers | 4 workers | speed-up vs serial (2 workers)"
                     + extra + " |")
        lines.append("|---|---|---|---|---" + ("|---" if extra else "") + "|")
        notes = []
        for tool in TOOLS:
            rs = [ix.get((w, tool, n)) for n in (1, 2, 4)]
            if all(r is None for r in rs):
                continue
            if any(r is not None and "na" in r for r in rs):
                na = next(r["na"] for r in rs if r is not None and "na" in r)
                lines.append(f"| {LABEL[tool]} | n/a: {na} | | | |" + (" |" if extra else ""))
                continue
            # workload 1 measures per-task cost (task counts differ per tool): no speed-up column
            sp = ratio(serial, rs[1]) if tool != "serial" and w != 1 else None
            cells = [fmt_t(r) for r in rs]
            if w == 4 and tool not in ("serial", "taskgraph"):
                sp_cell = "not comparable (sample sort)"
            else:
                sp_cell = f"{sp:.2f}" if sp else ""
            row = f"| {LABEL[tool]} | " + " | ".join(cells) + f" | {sp_cell} |"
            if extra:
                if w == 1 and rs[1]:
                    row += f" {rs[1]['us_per_task']:.1f} ({rs[1]['tasks']} tasks) |"
                elif w == 5 and rs[0] and "us_overhead_per_task" in rs[0]:
                    v = rs[0]["us_overhead_per_task"]
                    row += f" {v:.1f} us |" if v >= 0 else " below the noise (T1 < T_serial in this run) |"
                elif w == 7 and rs[1] and "steals_per_s" in rs[1]:
                    idle = max(0.0, 1 - serial["median"] / (2 * rs[1]["median"])) if serial else float("nan")
                    row += f" {rs[1]['steals_per_s']:.0f}/s, {idle:.2f} |"
                else:
                    row += " |"
            lines.append(row)
            for r in rs:
                note = r.get("note") if r else None
                if note and w == 4:
                    note = "sample sort: serial bucketing into 4 x workers parts, parallel sorted()"
                if note and note not in notes:
                    notes.append(note)
        if w == 2:
            t1, s = ix.get((2, "taskgraph", 1)), serial
            if t1 and s:
                lines.append("")
                lines.append(f"Work overhead c1 = T1 / T_serial = **{ratio(t1, s):.1f}** "
                             f"({t1['tasks']} tasks, {t1['median'] / t1['tasks'] * 1e6:.2f} us each).")
        for n in notes:
            lines.append("")
            lines.append(f"Peers: {n}.")
        lines.append("")
    if gil:
        gix = index(gil)
        lines.append("### Free threading against the GIL (taskgraph, workloads 1, 3, 6)")
        lines.append("")
        lines.append(f"GIL build: Python {gil['env']['python']}, GIL enabled: "
                     f"{gil['env']['gil_enabled']}. Free-threaded: Python {doc['env']['python']}, "
                     f"GIL enabled: {doc['env']['gil_enabled']}.")
        lines.append("")
        lines.append("| workload | GIL build: speed-up at 2 workers | free-threaded: speed-up at 2 workers |")
        lines.append("|---|---|---|")
        for w in (1, 3, 6):
            g = ratio(gix.get((w, "serial", 1)), gix.get((w, "taskgraph", 2)))
            f = ratio(ix.get((w, "serial", 1)), ix.get((w, "taskgraph", 2)))
            if w == 1:
                gt, ft = gix.get((1, "taskgraph", 2)), ix.get((1, "taskgraph", 2))
                lines.append(f"| 1 (us per trivial task) | {gt['us_per_task']:.1f} us | {ft['us_per_task']:.1f} us |"
                             if gt and ft else "| 1 | | |")
            else:
                lines.append(f"| {w} | {g:.2f} | {f:.2f} |" if g and f else f"| {w} | | |")
        lines.append("")
    return "\n".join(lines)


def headline(doc, pt):
    ix = index(doc)
    h = []
    tg2, tpe2, dk2 = ix.get((1, "taskgraph", 2)), ix.get((1, "threadpool", 2)), ix.get((1, "dask-threads", 2))
    if tg2 and tpe2 and dk2:
        h.append(f"- trivial tasks at 2 workers (a lazy graph of them): taskgraph "
                 f"{tg2['us_per_task']:.2f} us/task, **{tpe2['us_per_task'] / tg2['us_per_task']:.0f}x "
                 f"lower** than ThreadPoolExecutor ({tpe2['us_per_task']:.1f} us) and "
                 f"**{dk2['us_per_task'] / tg2['us_per_task']:.0f}x lower** than dask threaded "
                 f"({dk2['us_per_task']:.0f} us).")
    s3, t3, p3 = ix.get((3, "serial", 1)), ix.get((3, "taskgraph", 2)), ix.get((3, "threadpool", 2))
    if s3 and t3:
        h.append(f"- fib with a cutoff (leaves ~100 us), 2 workers: speed-up **{ratio(s3, t3):.2f}** "
                 f"over serial" + (f" (ThreadPoolExecutor on the same leaves, fanned out: "
                                   f"{ratio(s3, p3):.2f})." if p3 else "."))
    s4, t4 = ix.get((4, "serial", 1)), ix.get((4, "taskgraph", 2))
    if s4 and t4:
        h.append(f"- quicksort of floats (array('d')), 2 workers: speed-up **{ratio(s4, t4):.2f}** "
                 "over the same quicksort run serially.")
    s6, t6, p6 = ix.get((6, "serial", 1)), ix.get((6, "taskgraph", 2)), ix.get((6, "threadpool", 2))
    if s6 and t6 and p6:
        h.append(f"- coarse map (~1 ms tasks), 2 workers: taskgraph speed-up **{ratio(s6, t6):.2f}**, "
                 f"ThreadPoolExecutor {ratio(s6, p6):.2f}.")
    figs = {f["key"]: f for f in pt["figures"]} if pt else {}
    if "c1" in figs:  # alternating runs: steadier than the suite's separate medians
        c = figs["c1"]
        h.append(f"- fib spawning a task at every level, 1 worker: c1 = T1 / T_serial = "
                 f"**{c['value']:.1f}** ({c['ns_per_task'] / 1e3:.2f} us per task)" +
                 (f"; the bare floor of this API with no scheduler (benchmarks/floor.c) has c1 = "
                  f"{c['floor_c1']['median']:.1f} on the same fib, and taskgraph adds "
                  f"{c['ns_over_floor']['median']:.0f} ns per task to it." if "floor_c1" in c else "."))
    if "stencil" in figs:
        h.append(f"- stencil DAG (64x64, trivial bodies), 1 worker: **{figs['stencil']['value']:.2f} "
                 "us** per task including its 3 edges.")
    if "lazy_million" in figs:
        h.append(f"- a million lazy trivial tasks built and computed from the main thread: "
                 f"**{figs['lazy_million']['value']:.2f} million tasks/s** end to end.")
    return "\n".join(h)


def spread(s, fmt="{:.3g}"):
    """median [min-max] of a _common.summary dict."""
    return f"{fmt.format(s['median'])} [{fmt.format(s['min'])}-{fmt.format(s['max'])}]"


def load_cell(load):
    if not load or "others_share" not in load:
        return "n/a"
    return f"{load['idle_share'] * 100:.0f}% / {load['others_share'] * 100:.0f}%"


def verdict_cell(word):
    return {"met": "met", "missed": "**missed**"}.get(word, f"*{word}*")


def per_task_table(pt):
    env = pt["env"]
    lines = ["### Per-task targets (benchmarks/per_task.py)", "",
             f"Python {env['python']}, GIL enabled: {env['gil_enabled']}, {env['cpus']} CPUs"
             f"{' (quick sizes)' if env['quick'] else ''}. Each figure is the median of "
             f"{env.get('rounds', 'several')} alternated rounds, with the min and max of the rounds; "
             "a target is met when the median and the worst round (or its floor) hold, on an "
             "idle machine. Idle / others: the machine's idle CPU share and the share other "
             "programs used while the figure was measured.", "",
             "| figure | median [min-max] | spread | target | floor | idle / others | |",
             "|---|---|---|---|---|---|---|"]
    for f in pt["figures"]:
        op = "<=" if f["better"] == "lower" else ">="
        unit = f" {f['unit']}" if f["unit"] else ""
        if "summary" in f:
            s = f["summary"]
            lines.append(f"| {f['label']} | **{spread(s)}{unit}** | {s['spread'] * 100:.0f}% | "
                         f"{op} {f['target']} | {op + ' ' + str(f['floor']) if f.get('floor') is not None else ''} | "
                         f"{load_cell(f.get('load'))} | {verdict_cell(f['verdict'])} |")
        else:  # results written before the harness kept the rounds
            lines.append(f"| {f['label']} | **{f['value']:.3g}{unit}** | | {op} {f['target']} | | | "
                         f"{'met' if f['met'] else '**missed**'} |")
    extra = {f["key"]: f for f in pt["figures"]}
    if "trivial_vs_tpe" in extra:
        u = extra["trivial_vs_tpe"]["us_per_task"]
        lines += ["", f"Per trivial task, 2 workers: spawned {u['spawned']:.2f} us, lazy "
                  f"{u['lazy']:.2f} us, ThreadPoolExecutor(2) {u['tpe']:.2f} us; with a trace open: "
                  f"spawned {u['spawned_traced']:.2f} us, lazy {u['lazy_traced']:.2f} us."]
    if "first_compute_m_per_s" in extra.get("lazy_million", {}):
        lines += ["", f"The million lazy tasks: the first compute of that size in the process (its "
                  f"memory taken from the kernel, timed apart from the rounds): "
                  f"{extra['lazy_million']['first_compute_m_per_s']:.2f} M tasks/s."]
    if "quicksort" in extra and "boxed_speedup" in extra["quicksort"]:
        q = extra["quicksort"]
        lines += ["", f"The quicksort on a list of Python floats made by the main thread (the "
                  f"same algorithm, boxed values): speed-up {q['boxed_speedup']:.2f} "
                  f"(serial {q['boxed_serial']['median']:.2f} s, taskgraph "
                  f"{q['boxed_taskgraph']['median']:.2f} s), against {q['value']:.2f} with "
                  "array('d') (docs/performance.md explains the difference)."]
    if "queens" in extra and "speedup_over_serial" in extra["queens"]:
        lines += ["", f"12-queens on 2 workers against the same search run serially: "
                  f"{extra['queens']['speedup_over_serial']:.2f}x."]
        lit = extra["queens"].get("literal_full")
        if lit:
            lines[-1] += (f" With `FULL` written as a literal (immortal: docs/performance.md, "
                          f"section 5), 2 workers over 1: {spread(lit)}x.")
    return "\n".join(lines)


def instructions_table(ins):
    cats = []
    for w in ins.values():
        for c in w["per_task"]:
            if c not in cats:
                cats.append(c)
    lines = ["### Where a task's time goes, in instructions (benchmarks/instructions.py)", "",
             "Instructions per task (callgrind; N and 2N tasks, the difference over N: start-up "
             "cancelled out). Deterministic, unlike the times above.", "",
             "| workload | total | " + " | ".join(cats) + " |",
             "|---|---|" + "---|" * len(cats)]
    for name, w in ins.items():
        lines.append(f"| {w['description']} | **{w['total']:.0f}** | "
                     + " | ".join(f"{w['per_task'].get(c, 0):.0f}" for c in cats) + " |")
    return "\n".join(lines)


def dask_table(dk):
    env = dk["env"]
    rows = {(r["workload"], r["backend"]): r for r in dk["rows"]}
    backends = list(dict.fromkeys(r["backend"] for r in dk["rows"]))
    workloads = list(dict.fromkeys(r["workload"] for r in dk["rows"]))
    fib = dk["fib"]
    lines = ["### Local and on a dask cluster, per task (benchmarks/dask_overhead.py)", "",
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


def map_table(mp):
    """The flat fan-out and tg.map figures (benchmarks/map_fanout.py)."""
    if "ratio_2w_over_1w_judged" not in mp["fanout_trivial"]:
        return "### Flat fan-outs and tg.map\n\n(results from before the harness: rerun map_fanout.py)"
    ft, fb, mt, m20 = mp["fanout_trivial"], mp["fanout_50us"], mp["map_trivial"], mp["map_20us"]
    crit = lambda r: f"{r['speedup_2w_cpu_critical']:.2f}x" if r.get("speedup_2w_cpu_critical") else "n/a"  # noqa: E731

    def row(label, r, key, unit=""):
        j = r[key + "_judged"]
        op = "<=" if j["better"] == "lower" else ">="
        return (f"| {label} | **{spread(r[key])}{unit}** | {r[key]['spread'] * 100:.0f}% | {op} {j['target']} | "
                f"{load_cell(r.get('load'))} | {verdict_cell(j['verdict'])} |")

    lines = ["### Flat fan-outs and tg.map (benchmarks/map_fanout.py)", "",
             f"{mp.get('runs', '?')} alternated rounds per figure; median [min-max] of the per-round "
             "ratios; idle / others as above. CPU-critical: the same from the worker threads' "
             "CPU times (what two free cores would give).", "",
             "| figure | median [min-max] | spread | target | idle / others | |",
             "|---|---|---|---|---|---|",
             row(f"{ft['children']:,} trivial children, time per child, 2 workers over 1", ft, "ratio_2w_over_1w"),
             row(f"{fb['children']:,} children of ~50 us, speed-up of 2 workers over 1", fb, "speedup_2w", "x")]
    for kind, r in mt.items():
        if kind.startswith("peer "):
            continue
        lines.append(row(f"tg.map over a {kind} of {r['items']:,} trivial items, time over the "
                         "list comprehension's", r, "ratio_map_over_comprehension"))
    lines.append(row(f"tg.map over {m20['items']:,} items of ~20 us, speed-up over the serial loop",
                     m20, "speedup_2w", "x"))
    lines += ["", f"The fan-out's 2-worker runs: {ft['steal_attempts_per_run_2w']:,.0f} steal attempts, "
              f"{ft.get('looks_per_run_2w', 0):,.0f} looks and {ft['stolen_per_run_2w']:,.0f} tasks stolen "
              f"per run (CPU-critical ratio {crit(ft)}); the ~50 us fan-out's CPU-critical speed-up "
              f"{crit(fb)}; tg.map over the range, CPU-critical {crit(mt.get('range', {}))}; over ~20 us "
              f"items {crit(m20)}.", "",
             ] + (costs_line(mt["range"]["costs"]) if "costs" in mt.get("range", {}) else []) + [
             "Peers per item, 2 threads: " + "; ".join(
                 f"{name[5:]} {r['us_per_item']:.2f} us (trivial)" for name, r in mt.items() if name.startswith("peer "))
             + "; " + "; ".join(f"{name[5:]} {r['us_per_item']:.2f} us (~20 us items)"
                                 for name, r in m20.items() if name.startswith("peer ")) + "."]
    return "\n".join(lines)


def costs_line(c):
    """map_fanout.result_costs: the two parts of tg.map over a range and of the comprehension."""
    ms = lambda k: f"{c[k]['median'] * 1e3:.1f} ms"  # noqa: E731
    return [f"tg.map over the range, its two parts timed apart (medians): the comprehension "
            f"builds its list in {ms('comprehension_build')} and frees it in "
            f"{ms('comprehension_free')}; tg.map builds in {ms('map_build')}, and the caller frees "
            f"its list, whose items the workers made, in {ms('map_free')}. A perfect split of the "
            f"comprehension's build over 2 workers, with nothing else added, would give "
            f"**{spread(c['bound'])}** (docs/benchmarks.md, \"What limits it\").", ""]


def shapes_table(sh):
    """benchmarks/shapes.py: the adversarial shapes, P workers against 1."""
    rows = [(k, v) for k, v in sh.items() if isinstance(v, dict) and "ratio_pw_over_1w" in v]
    if not rows:
        return ""
    p = rows[0][1]["workers"]
    lines = [f"### Shapes that must not lose to one worker (benchmarks/shapes.py)", "",
             f"Each shape on 1 and on {p} workers, {sh.get('runs', '?')} alternated rounds: the "
             f"{p}-worker time over the 1-worker time per round (target <= 1 in the median and every "
             "round), the steal counters per run, and the busiest worker's CPU time against the "
             "1-worker run's (CPU-critical).", "",
             f"| shape | 1 worker, us per task | {p}w / 1w, median [min-max] | CPU-critical | steal attempts / looks / stolen per run | idle / others | |",
             "|---|---|---|---|---|---|---|"]
    for _, r in rows:
        c = r.get("cpu_critical_ratio")
        lines.append(f"| {r['description']} | {spread(r['us_per_task_1w'])} | **{spread(r['ratio_pw_over_1w'])}** | "
                     f"{spread(c) if c else 'n/a'} | {r['steal_attempts_per_run']:,.0f} / "
                     f"{r.get('looks_per_run', 0):,.0f} / {r['stolen_per_run']:,.0f} | {load_cell(r.get('load'))} | "
                     f"{verdict_cell(r['verdict'])} |")
    return "\n".join(lines)


def targets_plot(pt, mp):
    """docs/img/targets.png: every target's rounds, scaled so that 1 is the target (above 1:
    better), with the median, and the floor where there is one."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    items = []
    for f in (pt or {}).get("figures", []):
        if "values" in f:
            items.append((f["label"], f["values"], f["target"], f.get("floor"), f["better"]))
    if mp and "ratio_2w_over_1w_judged" in mp.get("fanout_trivial", {}):
        for label, j in (("flat fan-out, 2w over 1w per child", mp["fanout_trivial"]["ratio_2w_over_1w_judged"]),
                         ("tg.map over a range, over the comprehension",
                          mp["map_trivial"]["range"]["ratio_map_over_comprehension_judged"]),
                         ("tg.map over ~20 us items, speed-up", mp["map_20us"]["speedup_2w_judged"])):
            if j.get("values"):
                items.append((label, j["values"], j["target"], j.get("floor"), j["better"]))
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
    fig.savefig(os.path.join(ROOT, "docs", "img", "targets.png"), dpi=90)
    return True


def executor_table(ex):
    """taskgraph.Executor against concurrent.futures (benchmarks/executor.py)."""
    us = lambda r: f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"  # noqa: E731
    load = ", ".join(f"{x:.1f}" for x in ex.get("loadavg_start", ()))
    sb, mt, m20, fib, fu = (ex["submit"], ex["map_trivial"], ex["map_20us"], ex["nested_fib"],
                            ex["future"])
    tpe_fib = fib["threadpool"]
    lines = ["### taskgraph.Executor against concurrent.futures (benchmarks/executor.py)", "",
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
        row = lambda k: (f"{ins[k]['submitter']:,.0f} | {ins[k]['workers']:,.0f}")  # noqa: E731
        lines += ["", "Instructions per submit+result (callgrind; 20,000 tasks less 10,000):", "",
                  "| | submitting thread | both workers |", "|---|---|---|",
                  f"| taskgraph.Executor(2), collector on | {row('taskgraph_gc_on')} |",
                  f"| ThreadPoolExecutor(2), collector on | {row('threadpool_gc_on')} |",
                  f"| taskgraph.Executor(2), collector off | {row('taskgraph_gc_off')} |",
                  f"| ThreadPoolExecutor(2), collector off | {row('threadpool_gc_off')} |"]
    return "\n".join(lines)


def dask_get_table(dg):
    """taskgraph as dask's scheduler (benchmarks/dask_get.py): per task, dask.array, memory."""
    us = lambda r: f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"  # noqa: E731
    ms = lambda r: f"{r['median'] * 1e3:.1f} ms"  # noqa: E731
    load = lambda k: ", ".join(f"{x:.1f}" for x in dg.get(k, ()))  # noqa: E731
    cols = ["taskgraph 2w", "taskgraph 1w", "dask.threaded.get 2w", "dask.get", "dask.local.get_sync"]
    runs = dg["flat"]["us_per_task"]["taskgraph 2w"]["runs"]
    lines = ["### taskgraph as dask's scheduler (benchmarks/dask_get.py)", "",
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
                  f"{m['dask.threaded.get']['peak_mib']:.0f} MiB ({m['peak_ratio']:.2f}x).", ""]
    lines += ["| target (issue 25) | figure | met |", "|---|---|---|"]
    lines += [f"| {t['label']} {t['target']} | {t['value']:.2f} | {'yes' if t['met'] else '**no**'} |"
              for t in dg["targets"]]
    if dask_get_plot(dg):
        lines += ["", "![taskgraph.dask.get against dask's local schedulers](img/dask-get.png)"]
    return "\n".join(lines)


def dask_get_plot(dg):
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
    os.makedirs(os.path.dirname(DASK_GET_PNG), exist_ok=True)
    fig.savefig(DASK_GET_PNG, dpi=90)
    return True


def plot(doc):
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
    os.makedirs(os.path.dirname(PNG), exist_ok=True)
    fig.savefig(PNG, dpi=90)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", required=True)
    ap.add_argument("--gil")
    ap.add_argument("--per-task")
    ap.add_argument("--instructions")
    ap.add_argument("--dask")
    ap.add_argument("--map")
    ap.add_argument("--shapes")
    ap.add_argument("--executor")
    ap.add_argument("--dask-get")
    a = ap.parse_args(argv)
    read = lambda p: json.load(open(p)) if p and os.path.exists(p) else None  # noqa: E731
    doc, gil, pt, ins = read(a.suite), read(a.gil), read(a.per_task), read(a.instructions)
    dk, mp, sh, ex, dg = read(a.dask), read(a.map), read(a.shapes), read(a.executor), read(a.dask_get)
    merged = {"free_threaded": doc, "gil_build": gil, "per_task": pt, "instructions": ins,
              "dask": dk, "map_fanout": mp, "shapes": sh, "executor": ex, "dask_get": dg}
    os.makedirs(os.path.dirname(LATEST), exist_ok=True)
    with open(LATEST, "w") as f:
        json.dump(merged, f, indent=1)
    env = doc["env"]
    gen = [BEGIN, "",
           f"Measured {'(quick sizes) ' if env['quick'] else ''}on {env['cpus']} CPUs ({env['machine']}), "
           f"Python {env['python']}, free-threaded build: {env['free_threaded_build']}, GIL enabled "
           f"in every run: {env['gil_enabled']}; versions: "
           + ", ".join(f"{k} {v}" for k, v in env["versions"].items()) + ".", "",
           "**Headline (2 workers unless said):**", "", headline(doc, pt), "",
           "![speed-up vs workers, and per-task overhead per tool](img/benchmarks.png)"
           if plot(doc) else "", ""]
    if pt:
        gen += [per_task_table(pt), ""]
    if targets_plot(pt, mp):
        gen += ["![every round of every target, relative to the target](img/targets.png)", ""]
    if ins:
        gen += [instructions_table(ins), ""]
    if dk:
        gen += [dask_table(dk), ""]
    if mp:
        gen += [map_table(mp), ""]
    if sh:
        gen += [shapes_table(sh), ""]
    if ex:
        gen += [executor_table(ex), ""]
    if dg:
        gen += [dask_get_table(dg), ""]
    gen += [tables(doc, gil), END]
    text = open(DOC).read() if os.path.exists(DOC) else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    i, j = text.index(BEGIN), text.index(END) + len(END)
    with open(DOC, "w") as f:
        f.write(text[:i] + "\n".join(gen) + text[j:])
    print(f"wrote {LATEST}, {DOC}" + (f", {PNG}" if os.path.exists(PNG) else ""))


if __name__ == "__main__":
    main()
