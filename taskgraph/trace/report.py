"""The one-file HTML report of a trace (Trace.report, ``taskgraph report``, Trace._repr_html_).

Self-contained: inline CSS and SVG, no script, nothing fetched. Sections (each a ``<section>``
with an id): ``summary`` (Trace.summary), ``timeline`` (one row per worker, nested tasks
stacked below their parent), ``graph`` (the executed graph drawn by taskgraph.trace.viz when
Graphviz is installed, else a note; at its natural size, scrolling inside its box),
``predict`` (predicted speed-up plot and table), ``hottest`` (task names by own time, and the
longest tasks that ran), ``inflation`` (with a baseline).

The report is one ``<div class="tg-report">`` (``fragment``): a notebook shows it inside its
own page, so every style is scoped to that root and none touches the page's other cells.
``render`` wraps it into a whole document for the file.
"""
from __future__ import annotations

import html
import math
import re
import zlib

from taskgraph.trace import inflation as _inflation
from taskgraph.trace import predict as _predict
from taskgraph.trace.analysis import duration, moved, workers_phrase
from taskgraph._state import State
from taskgraph.trace.viz import INSTALL_GRAPHVIZ, GraphvizError, svg_of, trace_graph

__all__ = ["render", "fragment", "write_report"]

_CANCELLED = State.CANCELLED.label
MAX_TIMELINE = 20000  # tasks drawn in the timeline (beyond: the outermost ones only)
MAX_SIMULATED = 50000  # tasks simulated for the speed-up plot (beyond: the bounds only)
ROOT = "tg-report"  # the class of the report's root element: every style is scoped to it
_CSS = """
.tg-report{font-family:Helvetica,Arial,sans-serif;color:#222;max-width:1200px;line-height:1.3}
.tg-report h1.tg-h1{font-size:20px;margin:0 0 8px 0;border:none;padding:0}
.tg-report h2.tg-h2{font-size:16px;border:none;border-bottom:1px solid #ccc;padding:0 0 4px 0;
margin:18px 0 8px 0}
.tg-report h3.tg-h3{font-size:14px;margin:12px 0 6px 0}
.tg-report pre.tg-summary{background:#f6f6f6;padding:8px;font-size:12px;overflow-x:auto;
font-family:Menlo,Consolas,"DejaVu Sans Mono",monospace;white-space:pre;line-height:1.25;
margin:0;border:none;text-align:left}
.tg-report table.tg-table{border-collapse:collapse;font-size:12px;table-layout:auto;margin:4px 0}
.tg-report table.tg-table td,.tg-report table.tg-table th{border:1px solid #ddd;
padding:3px 8px;text-align:right;background:none}
.tg-report table.tg-table th{background:#f0f0f0;font-weight:bold}
.tg-report table.tg-table td:first-child,.tg-report table.tg-table th:first-child{text-align:left}
.tg-report .tg-flag{color:#b00;font-weight:bold} .tg-report .tg-note{color:#666;font-size:12px}
.tg-report .tg-graph{overflow:auto;max-height:85vh;border:1px solid #ddd}
.tg-report .tg-graph svg{max-width:none;height:auto}
"""
TABLE = '<table class="tg-table">'
# The standalone file is a page of its own: its body may be styled.
_PAGE_CSS = "body{margin:24px}"


def _e(s):
    return html.escape(str(s), quote=True)


def _link(escaped):
    """Escaped text with its URLs made into links."""
    return re.sub(r"(https://[^\s<>\"')]+)", r'<a href="\1">\1</a>', escaped)


def _ms(ns):
    return f"{ns / 1e6:.3f} ms"


def _colour(name):
    h = zlib.crc32(name.encode()) % 360
    return f"hsl({h},55%,62%)"


def _timeline(tr):
    recs = tr.records
    t0 = min(r.start for r in recs)
    wall = max(tr.wall, 1)
    lanes = {}
    for r in recs:
        lanes.setdefault(r.lane, []).append(r)
    width, row, label_w = 1000, 14, 70
    rows, rects = 0, []
    away = moved(recs)
    names = {}
    for lane in sorted(lanes):
        stack, depth_max, drawn = [], 0, []
        for r in sorted(lanes[lane], key=lambda r: (r.start, -r.end)):
            while stack and stack[-1] <= r.start:
                stack.pop()
            depth = len(stack)
            stack.append(r.end)
            drawn.append((r, depth))
            depth_max = max(depth_max, depth)
        if len(recs) > MAX_TIMELINE:
            drawn = [(r, d) for r, d in drawn if d == 0]
            depth_max = 0
        y0 = rows * row
        rects.append(f'<text x="0" y="{y0 + 11}" font-size="11">{_e(lane)}</text>')
        for r, d in drawn:
            x = label_w + (r.start - t0) / wall * (width - label_w)
            w = max((r.end - r.start) / wall * (width - label_w), 0.5)
            names[r.name] = _colour(r.name)
            st = r.key in away
            waited = r.waiting
            pale = ' fill-opacity="0.3"' if waited * 2 > r.own else ""  # mostly waiting
            rects.append(f'<rect x="{x:.2f}" y="{y0 + d * row}" width="{w:.2f}" height="{row - 2}"'
                         f' fill="{names[r.name]}"{pale} stroke="{"#000" if st else "none"}" '
                         f'stroke-width="0.5"><title>{_e(r.key)} ({_e(r.state)}) own '
                         f'{duration(r.own)}{f", waiting {duration(waited)}" if waited else ""}, run '
                         f'{duration(r.duration)}{", stolen" if st else ""}</title></rect>')
        rows += depth_max + 1
    h = rows * row + 20
    axis = (f'<text x="{label_w}" y="{h - 4}" font-size="10">0</text>'
            f'<text x="{width - 60}" y="{h - 4}" font-size="10">{_ms(tr.wall)}</text>')
    legend = " ".join(f'<span style="background:{c};padding:0 6px">{_e(n)}</span>'
                      for n, c in sorted(names.items())[:30])
    note = (f'<p class="tg-note">{len(recs)} tasks: only the outermost task of each nest drawn</p>'
            if len(recs) > MAX_TIMELINE else "")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
            f'viewBox="0 0 {width} {h}">{"".join(rects)}{axis}</svg>'
            f'<p class="tg-note">Colour = task function; pale = mostly waiting (I/O, sleeps, '
            f'locks: its own time less its CPU time, or its tg.blocking() sections); black '
            f'outline = stolen (ran on another worker than its spawner); a task run inside '
            f'another\'s join is drawn below it. {legend}</p>{note}')


def _graph(tr):
    try:
        svg = svg_of(trace_graph(tr).source)  # piped through dot: no file written
    except GraphvizError:
        return (f'<p class="tg-note">Executed graph not drawn: Graphviz\'s <code>dot</code> program '
                f'is not installed; {_e(INSTALL_GRAPHVIZ)}. The other sections do not need it. '
                f'<code>tr.visualize("run.dot")</code> writes the graph\'s source.</p>')
    svg = svg[svg.find("<svg"):]
    return f'<div class="tg-graph">{re.sub(r"<!--.*?-->", "", svg, flags=re.S)}</div>'


def _plot(preds):
    """Speed-up against workers, both on log2 axes: ideal, upper, lower, simulated."""
    W, H, m = 520, 320, 50
    pmax = max(p.workers for p in preds)
    top = max(2.0, pmax)
    lx = lambda p: m + (math.log2(p) / max(math.log2(pmax), 1)) * (W - 2 * m)
    ly = lambda s: H - m - (math.log2(max(s, 0.5)) + 1) / (math.log2(top) + 1) * (H - 2 * m)

    def line(vals, colour, dash=""):
        pts = " ".join(f"{lx(p.workers):.1f},{ly(v):.1f}" for p, v in zip(preds, vals))
        return (f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2" '
                f'{dash}/>' + "".join(f'<circle cx="{lx(p.workers):.1f}" cy="{ly(v):.1f}" r="3" '
                                      f'fill="{colour}"/>' for p, v in zip(preds, vals)))
    parts = [f'<line x1="{m}" y1="{H - m}" x2="{W - m}" y2="{H - m}" stroke="#000"/>',
             f'<line x1="{m}" y1="{m}" x2="{m}" y2="{H - m}" stroke="#000"/>']
    for p in preds:
        parts.append(f'<text x="{lx(p.workers) - 4:.1f}" y="{H - m + 15}" font-size="10">'
                     f'{p.workers}</text>')
    s = 0.5
    while s <= top:
        parts.append(f'<text x="{m - 28}" y="{ly(s) + 3:.1f}" font-size="10">{s:g}</text>'
                     f'<line x1="{m}" y1="{ly(s):.1f}" x2="{W - m}" y2="{ly(s):.1f}" '
                     f'stroke="#eee"/>')
        s *= 2
    parts.append(line([p.workers for p in preds], "#bbb", 'stroke-dasharray="4 3"'))
    parts.append(line([p.upper for p in preds], "#2a7"))
    parts.append(line([p.lower for p in preds], "#d62"))
    if preds[0].simulated is not None:
        parts.append(line([p.simulated for p in preds], "#36c"))
    parts.append(f'<text x="{W / 2 - 20}" y="{H - 12}" font-size="11">workers</text>'
                 f'<text x="4" y="{m - 14}" font-size="11">speed-up</text>')
    for i, (t, c) in enumerate((("ideal P", "#bbb"), ("upper: min(P, parallelism)", "#2a7"),
                                ("simulated work stealing", "#36c"),
                                ("lower: burdened span", "#d62"))):
        parts.append(f'<rect x="{m + 10}" y="{m + i * 15 - 8}" width="10" height="8" '
                     f'fill="{c}"/><text x="{m + 24}" y="{m + i * 15}" font-size="11">{t}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}">{"".join(parts)}</svg>')


def _predict_section(tr):
    big = len(tr.records) > MAX_SIMULATED
    preds = _predict.predict(tr, seeds=0 if big else _predict.SEEDS)
    c = _predict.costs(tr.records)
    rows = "".join(f"<tr><td>{p.workers}</td><td>{p.lower:.2f}</td><td>"
                   f"{'-' if big else f'{p.simulated:.2f}'}</td><td>{p.upper:.2f}</td></tr>"
                   for p in preds)
    return (_plot(preds) + TABLE + "<tr><th>workers</th><th>lower</th><th>simulated</th>"
            f"<th>upper</th></tr>{rows}</table>"
            f'<p class="tg-note">Measured costs: {c["per_task"] / 1e3:.2f} us per task outside '
            f'its own time, {c["per_steal"] / 1e3:.2f} us per steal '
            f'({"from " + str(c["steals"]) + " stolen tasks" if c["steal_measured"] else "no steal in this trace: the per-task figure"}).'
            " Work inflation (tasks slowing each other down) is not predicted: compare traces "
            "with a baseline."
            + (f" Not simulated: more than {MAX_SIMULATED} tasks (Trace.predict() simulates any "
               "size, in its own time)." if big else "") + "</p>" + _below_lower(tr, preds, c))


def _below_lower(tr, preds, c):
    """Why the simulation falls below the lower bound, where it does: the bounds count the
    tasks' own time and the steals, the simulation also what every task costs besides."""
    below = [p.workers for p in preds if p.simulated is not None and p.simulated < p.lower * 0.99]
    if not below:
        return ""
    n = len(tr.records)
    ran = sum(r.state != _CANCELLED for r in tr.records)
    shared = _predict.shared_rmw_ns()
    # A note, not a flag: the program is not at fault; the model says what tiny tasks cost.
    return (f'<p class="tg-note">Simulated below the lower bound on {", ".join(map(str, below))} '
            f"workers: the bounds count the tasks' own time and the cost of steals; the "
            f"simulation also charges every task its scheduling cost ({c['per_task'] / 1e3:.2f} "
            f"us) and the moves of the run's shared counter between workers "
            f"({shared / 1e3:.2f} us each on this machine). Here the {n} tasks"
            + (f" ({n - ran} of them cancelled, which never ran but are still scheduled)"
               if ran < n else "")
            + f" average {tr.work / n / 1e3:.2f} us of own time, so those costs, not the "
            "graph, limit the speed-up: bigger tasks would scale.</p>")


def _hottest(tr, limit=12):
    work = max(tr.work, 1)
    ran = [r for r in tr.records if r.state != _CANCELLED]  # cancelled: never ran, no time
    away = moved(tr.records)
    by = {}
    for r in ran:
        d = by.setdefault(r.name, [0, 0, 0, 0])
        d[0] += 1
        d[1] += r.computing  # the work: own time less waiting
        d[2] += r.key in away
        d[3] += r.waiting
    cancelled = len(tr.records) - len(ran)
    skipped = (f'<p class="tg-note">{cancelled} cancelled task{"s" if cancelled != 1 else ""} '
               "(never ran) left out.</p>" if cancelled else "")
    rows = "".join(f"<tr><td>{_e(n)}</td><td>{k}</td><td>{duration(w)}</td><td>{100 * w / work:.1f}%"
                   f"</td><td>{duration(w / k)}</td><td>{s}</td><td>{duration(wt) if wt else ''}"
                   "</td></tr>"
                   for n, (k, w, s, wt) in sorted(by.items(), key=lambda kv: -kv[1][1])[:limit])
    longest = sorted(ran, key=lambda r: -r.own)[:limit]
    rows2 = "".join(f"<tr><td>{_e(r.key)}</td><td>{duration(r.own)}</td><td>{duration(r.duration)}</td>"
                    f"<td>{_e(r.lane)}</td><td>{'yes' if r.key in away else ''}</td></tr>"
                    for r in longest)
    return (TABLE + "<tr><th>task</th><th>tasks</th><th>own time (computing)</th><th>share of "
            f"work</th><th>mean</th><th>stolen</th><th>waiting</th></tr>{rows}</table>{skipped}"
            '<h3 class="tg-h3">Longest tasks</h3>'
            + TABLE + "<tr><th>task</th><th>own</th><th>run (with joins)</th><th>worker</th>"
            f"<th>stolen</th></tr>{rows2}</table>")


FLAGGED = ' class="tg-flag"'


def _inflation_section(tr, baseline):
    x = _inflation.inflation(tr, baseline)
    rows = "".join(
        f"<tr><td>{_e(n)}</td><td>{k}</td><td>{_ms(w)}</td><td>{_ms(bw)}</td>"
        f"<td{FLAGGED if f > _inflation.FLAG else ''}>{f:.2f}x</td></tr>"
        for n, k, w, bw, f in _inflation.by_name(tr, baseline))
    flag = (f'<p class="tg-flag">{_link(_e(_inflation.flag_text(tr, baseline)))}</p>'
            if x > _inflation.FLAG else "")
    return (f"<p>Work {_ms(tr.work)} on {workers_phrase(tr.workers, tr.pool_size)} against "
            f"{_ms(baseline.work)} on {workers_phrase(baseline.workers, baseline.pool_size)} in "
            f"the baseline: <b>{x:.2f}x</b>.</p>{flag}"
            + TABLE + "<tr><th>task</th><th>tasks</th><th>work here</th><th>work baseline</th>"
            f"<th>inflation per task</th></tr>{rows}</table>")


def fragment(tr, baseline=None) -> str:
    """The report as one element, its styles scoped to it (what a notebook displays)."""
    if not tr.records:
        body = '<section id="summary"><h2 class="tg-h2">Summary</h2><p>No tasks recorded.</p></section>'
    else:
        secs = [("summary", "Summary", f'<pre class="tg-summary">{_link(_e(tr.summary(baseline)))}</pre>'),
                ("timeline", "Timeline per worker", _timeline(tr)),
                ("predict", "Predicted speed-up", _predict_section(tr)),
                ("hottest", "Hottest tasks", _hottest(tr))]
        if baseline is not None:
            secs.append(("inflation", "Work inflation against the baseline",
                         _inflation_section(tr, baseline)))
        secs.append(("graph", "Executed graph", _graph(tr)))
        body = "".join(f'<section id="{i}"><h2 class="tg-h2">{t}</h2>{c}</section>' for i, t, c in secs)
    return (f'<div class="{ROOT}"><style>{_CSS}</style><h1 class="tg-h1">taskgraph trace: '
            f'{len(tr.records)} tasks</h1>{body}</div>')


def render(tr, baseline=None) -> str:
    """The report as one HTML document (the file Trace.report writes)."""
    return ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>taskgraph trace report'
            f'</title><style>{_PAGE_CSS}</style></head><body>{fragment(tr, baseline)}</body></html>')


def write_report(tr, path, baseline=None) -> str:
    text = render(tr, baseline)  # errors (a bad baseline) before anything is written
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
