"""The one-file HTML report of a trace (Trace.report, ``taskgraph report``, Trace._repr_html_).

Self-contained: inline CSS and SVG, no script, nothing fetched. Sections (each a ``<section>``
with an id): ``summary`` (Trace.summary), ``timeline`` (one row per worker, nested tasks
stacked below their parent), ``graph`` (the executed graph drawn by taskgraph.viz when
Graphviz is installed, else a note), ``predict`` (predicted speed-up plot and table),
``hottest`` (task names by own time, and the longest tasks), ``inflation`` (with a baseline).
"""
from __future__ import annotations

import html
import math
import os
import re
import tempfile
import zlib

from taskgraph import _inflation, _predict
from taskgraph.viz import GraphvizError, draw_trace

__all__ = ["render", "write_report"]

MAX_TIMELINE = 20000  # tasks drawn in the timeline (beyond: the outermost ones only)
MAX_SIMULATED = 50000  # tasks simulated for the speed-up plot (beyond: the bounds only)
_CSS = """
body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px} h2{font-size:16px;border-bottom:1px solid #ccc;padding-bottom:4px}
pre{background:#f6f6f6;padding:8px;font-size:12px;overflow-x:auto}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ddd;padding:3px 8px;
text-align:right} th{background:#f0f0f0} td:first-child,th:first-child{text-align:left}
.flag{color:#b00;font-weight:bold} .note{color:#666;font-size:12px}
.graph svg{max-width:100%;height:auto}
"""


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
            rects.append(f'<rect x="{x:.2f}" y="{y0 + d * row}" width="{w:.2f}" height="{row - 2}"'
                         f' fill="{names[r.name]}" stroke="{"#000" if r.stolen else "none"}" '
                         f'stroke-width="0.5"><title>{_e(r.key)} ({_e(r.state)}) own '
                         f'{_ms(r.own)}, run {_ms(r.duration)}{", stolen" if r.stolen else ""}'
                         '</title></rect>')
        rows += depth_max + 1
    h = rows * row + 20
    axis = (f'<text x="{label_w}" y="{h - 4}" font-size="10">0</text>'
            f'<text x="{width - 60}" y="{h - 4}" font-size="10">{_ms(tr.wall)}</text>')
    legend = " ".join(f'<span style="background:{c};padding:0 6px">{_e(n)}</span>'
                      for n, c in sorted(names.items())[:30])
    note = (f'<p class="note">{len(recs)} tasks: only the outermost task of each nest drawn</p>'
            if len(recs) > MAX_TIMELINE else "")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
            f'viewBox="0 0 {width} {h}">{"".join(rects)}{axis}</svg>'
            f'<p class="note">Colour = task function; black outline = stolen; a task run inside '
            f'another\'s join is drawn below it. {legend}</p>{note}')


def _graph(tr):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "graph.svg")
        try:
            draw_trace(tr, path)
        except GraphvizError as e:
            return f'<p class="note">Executed graph not drawn: {_e(e)}</p>'
        with open(path) as f:
            svg = f.read()
    svg = svg[svg.find("<svg"):]
    return f'<div class="graph">{re.sub(r"<!--.*?-->", "", svg, flags=re.S)}</div>'


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
    return (_plot(preds) + "<table><tr><th>workers</th><th>lower</th><th>simulated</th>"
            f"<th>upper</th></tr>{rows}</table>"
            f'<p class="note">Measured costs: {c["per_task"] / 1e3:.2f} us per task outside '
            f'its own time, {c["per_steal"] / 1e3:.2f} us per steal '
            f'({"from " + str(c["steals"]) + " stolen tasks" if c["steal_measured"] else "no steal in this trace: the per-task figure"}).'
            " Work inflation (tasks slowing each other down) is not predicted: compare traces "
            "with a baseline."
            + (f" Not simulated: more than {MAX_SIMULATED} tasks (Trace.predict() simulates any "
               "size, in its own time)." if big else "") + "</p>")


def _hottest(tr, limit=12):
    work = max(tr.work, 1)
    by = {}
    for r in tr.records:
        d = by.setdefault(r.name, [0, 0, 0])
        d[0] += 1
        d[1] += r.own
        d[2] += r.stolen
    rows = "".join(f"<tr><td>{_e(n)}</td><td>{k}</td><td>{_ms(w)}</td><td>{100 * w / work:.1f}%"
                   f"</td><td>{w / k / 1e3:.1f} us</td><td>{s}</td></tr>"
                   for n, (k, w, s) in sorted(by.items(), key=lambda kv: -kv[1][1])[:limit])
    longest = sorted(tr.records, key=lambda r: -r.own)[:limit]
    rows2 = "".join(f"<tr><td>{_e(r.key)}</td><td>{_ms(r.own)}</td><td>{_ms(r.duration)}</td>"
                    f"<td>{_e(r.lane)}</td><td>{'yes' if r.stolen else ''}</td></tr>"
                    for r in longest)
    return ("<table><tr><th>task</th><th>tasks</th><th>own time</th><th>share of work</th>"
            f"<th>mean</th><th>stolen</th></tr>{rows}</table><h3>Longest tasks</h3>"
            "<table><tr><th>task</th><th>own</th><th>run (with joins)</th><th>worker</th>"
            f"<th>stolen</th></tr>{rows2}</table>")


def _inflation_section(tr, baseline):
    x = _inflation.inflation(tr, baseline)
    rows = "".join(
        f"<tr><td>{_e(n)}</td><td>{k}</td><td>{_ms(w)}</td><td>{_ms(bw)}</td>"
        f"<td{' class=flag' if f > _inflation.FLAG else ''}>{f:.2f}x</td></tr>"
        for n, k, w, bw, f in _inflation.by_name(tr, baseline))
    flag = (f'<p class="flag">{_link(_e(_inflation.flag_text(tr, baseline)))}</p>'
            if x > _inflation.FLAG else "")
    return (f"<p>Work {_ms(tr.work)} on {tr.workers} worker(s) against {_ms(baseline.work)} "
            f"on {baseline.workers} in the baseline: <b>{x:.2f}x</b>.</p>{flag}"
            "<table><tr><th>task</th><th>tasks</th><th>work here</th><th>work baseline</th>"
            f"<th>inflation per task</th></tr>{rows}</table>")


def render(tr, baseline=None) -> str:
    """The report as one HTML document."""
    if not tr.records:
        body = '<section id="summary"><h2>Summary</h2><p>No tasks recorded.</p></section>'
    else:
        secs = [("summary", "Summary", f"<pre>{_link(_e(tr.summary(baseline)))}</pre>"),
                ("timeline", "Timeline per worker", _timeline(tr)),
                ("predict", "Predicted speed-up", _predict_section(tr)),
                ("hottest", "Hottest tasks", _hottest(tr))]
        if baseline is not None:
            secs.append(("inflation", "Work inflation against the baseline",
                         _inflation_section(tr, baseline)))
        secs.append(("graph", "Executed graph", _graph(tr)))
        body = "".join(f'<section id="{i}"><h2>{t}</h2>{c}</section>' for i, t, c in secs)
    return ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>taskgraph trace report'
            f'</title><style>{_CSS}</style></head><body><h1>taskgraph trace: {len(tr.records)} '
            f'tasks</h1>{body}</body></html>')


def write_report(tr, path, baseline=None) -> str:
    text = render(tr, baseline)  # errors (a bad baseline) before anything is written
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
