"""Pictures of task graphs, through Graphviz: the executed graph of a Trace
(``Trace.visualize``), and a lazy graph before it runs (``taskgraph.visualize``). Both return
a ``Picture``: with a path, the file written (its format from the suffix: .svg, .png, .pdf,
or .dot, the source only); without one, the SVG markup. A notebook displays either.

Rendering needs Graphviz's ``dot`` program (pip brings only the Python wrapper). Without it,
a picture asked for by path still gets its ``.dot`` source written next to the requested file
and ``GraphvizError`` says how to install Graphviz: a program that asked for a file and did
not get it must not go on as if it had. What only displays (a notebook's picture of a Node,
the HTML report's graph section) shows the rest without it.
"""
from __future__ import annotations

import os

import graphviz

from taskgraph.trace.analysis import duration, moved
from taskgraph._native import core
from taskgraph._state import State
from taskgraph.trace.record import RETRIED

Node = core.Node
# Record outcomes (a trace record's `state`), as the records spell them.
_DONE, _FAILED, _CANCELLED = State.DONE.label, State.FAILED.label, State.CANCELLED.label

__all__ = ["draw_trace", "trace_graph", "visualize", "plan_graph", "plan_nodes", "svg_of", "Picture",
           "GraphvizError", "DEFAULT_THRESHOLD", "INSTALL_GRAPHVIZ"]

#: Above this many tasks, pictures group tasks by function and spawn depth.
DEFAULT_THRESHOLD = 300
_FORMATS = {"svg", "png", "pdf", "dot"}
_PALETTE = ["#8dd3c7", "#fdb462", "#bebada", "#80b1d3", "#b3de69", "#fccde5", "#ffffb3",
            "#bc80bd", "#ccebc5", "#ffed6f", "#d9d9d9", "#fb8072"]
_CRIT = "#c0392b"
INSTALL_GRAPHVIZ = ("install Graphviz (Debian/Ubuntu: apt-get install graphviz; Fedora: dnf install "
            "graphviz; macOS: brew install graphviz; conda: conda install graphviz)")


class GraphvizError(RuntimeError):
    """The picture could not be rendered (usually: Graphviz's dot program is missing). The
    ``.dot`` source was written; ``dot_path`` names it."""

    def __init__(self, msg, dot_path=None):
        super().__init__(msg)
        self.dot_path = dot_path


def _text(s) -> str:
    """Text for a Graphviz label or tooltip, taken literally: backslashes (Graphviz escapes
    such as \\N or \\l) and a <...> form (an HTML label) lose their special meaning. Quoting
    is left to the graphviz package, which quotes every attribute value and node name that needs
    it. Names are never user text: nodes are t<i>, g<i>, n<i> and legend_*, because an edge
    endpoint "a:b" means node a, port b (a worker address tcp://host:port would break)."""
    return graphviz.escape(str(s))




def _check_threshold(threshold):
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise (ValueError if isinstance(threshold, int) and not isinstance(threshold, bool)
               else TypeError)(f"threshold must be an int >= 0 (a number of tasks), got "
                               f"{threshold!r:.80}")


def _render(g: graphviz.Digraph, path) -> str:
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"the picture's path must be a str or os.PathLike, got "
                        f"{type(path).__name__} {path!r:.80}") from None
    base, ext = os.path.splitext(path)
    fmt = ext.lstrip(".").lower()
    if fmt not in _FORMATS:
        raise ValueError(f"cannot tell the picture format from {path!r}: use a .svg, .png, "
                         ".pdf or .dot file name")
    if fmt == "dot":
        with open(path, "w") as f:
            f.write(g.source)
        return path
    try:
        data = g.pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        dot_path = base + ".dot"
        with open(dot_path, "w") as f:
            f.write(g.source)
        raise GraphvizError(
            f"Graphviz's 'dot' program was not found, so {path} was not drawn; the graph "
            f"source is in {dot_path}. To render it, {INSTALL_GRAPHVIZ}, then run: "
            f"dot -T{fmt} {dot_path} -o {path}", dot_path) from None
    except graphviz.CalledProcessError as e:
        dot_path = base + ".dot"
        with open(dot_path, "w") as f:
            f.write(g.source)
        raise GraphvizError(f"dot failed to draw {path} ({e}); the source is in {dot_path}",
                            dot_path) from None
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---------------------------------------------------------------------- executed graph
def _lane_colors(records):
    lanes = sorted({r.lane for r in records})
    return {lane: _PALETTE[i % len(_PALETTE)] for i, lane in enumerate(lanes)}


def _legend(g, colors, grouped):
    with g.subgraph(name="cluster_legend") as lg:
        lg.attr(label="legend", fontsize="10", style="rounded", color="#999999")
        prev = None
        for i, (lane, col) in enumerate(colors.items()):
            name = f"legend_w{i}"  # not the lane itself: a cluster address has colons
            lg.node(name, _text(f"worker {lane}"), shape="box", style="filled,rounded", fillcolor=col,
                    fontsize="9")
            if prev:
                lg.edge(prev, name, style="invis")
            prev = name
        marks = [("legend_stolen", "stolen: ran on another worker\nthan its spawner (double border)",
                  {"peripheries": "2"}),
                 ("legend_failed", "failed", {"shape": "octagon", "color": "#e31a1c",
                                               "penwidth": "2", "fontcolor": "#e31a1c"}),
                 ("legend_retried", "failed attempt, retried",
                  {"shape": "octagon", "style": "dashed", "color": "#ff7f00", "fontcolor": "#ff7f00"}),
                 ("legend_cancelled", "cancelled (never ran)",
                  {"style": "dashed,rounded", "color": "#999999", "fontcolor": "#999999"}),
                 ("legend_crit", "critical path", {"color": _CRIT, "penwidth": "3"})]
        for name, label, attrs in marks:
            a = {"shape": "box", "style": "rounded", "fontsize": "9"}
            a.update(attrs)
            lg.node(name, label, **a)
            if prev:
                lg.edge(prev, name, style="invis")
            prev = name
        lg.node("legend_spawn_a", "", shape="point", width="0.05")
        lg.node("legend_spawn_b", "", shape="point", width="0.05")
        lg.edge("legend_spawn_a", "legend_spawn_b", label="spawn", style="dashed",
                color="#555555", fontsize="9")
        lg.node("legend_data_a", "", shape="point", width="0.05")
        lg.node("legend_data_b", "", shape="point", width="0.05")
        lg.edge("legend_data_a", "legend_data_b", label="data", fontsize="9")
        if grouped:
            lg.node("legend_group", "grouped: function, spawn depth,\ncount, total own time",
                    shape="box3d", fontsize="9")


def draw_trace(tr, path=None, *, threshold: int = DEFAULT_THRESHOLD, detail: str | None = None,
               title: str | None = None) -> "Picture":
    """Draws the executed graph of ``tr`` (a Trace: anything with ``records``,
    ``critical_path()``, ``work``, ``span`` and ``parallelism``), as ``visualize`` draws a
    plan: into ``path`` (format from the suffix) and returns a ``Picture`` equal to the path;
    without a path, returns a ``Picture`` holding the SVG markup.

    Tasks are coloured by the worker that ran them (legend), labelled with function and own
    time; tasks stolen onto another worker than their spawner's have a double border; failed
    tasks are red octagons, cancelled ones grey and dashed; spawn edges are dashed, data edges
    solid; the critical path is drawn thick and red. With more than ``threshold`` tasks,
    tasks are grouped by function and spawn depth into summary nodes (count and total time)
    unless ``detail="all"``.
    Errors: ``ValueError`` for an unknown suffix or option; ``GraphvizError`` when dot is
    missing (with a path, the .dot source is written first).
    """
    return _picture(trace_graph(tr, threshold=threshold, detail=detail, title=title), path)


def trace_graph(tr, *, threshold: int = DEFAULT_THRESHOLD, detail: str | None = None,
                title: str | None = None) -> graphviz.Digraph:
    """The Graphviz graph that ``draw_trace`` renders (``ValueError``/``TypeError`` for bad
    options, as there)."""
    if detail not in (None, "all", "grouped"):
        raise ValueError(f"detail must be None, 'all' or 'grouped', got {detail!r}")
    _check_threshold(threshold)
    recs = tr.records
    crit = set(tr.critical_path())
    colors = _lane_colors(recs)
    away = moved(recs)
    grouped = detail == "grouped" or (detail is None and len(recs) > threshold)
    label = title or (f"{len(recs)} tasks, work {duration(tr.work)}, span {duration(tr.span)}, "
                      f"parallelism {tr.parallelism:.1f}")
    g = graphviz.Digraph("taskgraph", graph_attr={
        "rankdir": "TB", "fontname": "Helvetica", "fontsize": "11", "labelloc": "t",
        "label": _text(label)},
        node_attr={"fontname": "Helvetica", "fontsize": "10"}, edge_attr={"arrowsize": "0.6"})
    _legend(g, colors, grouped)
    if grouped:
        _draw_grouped(g, recs, crit, colors, away)
    else:
        _draw_all(g, recs, crit, colors, away)
    return g


def _node_attrs(state, stolen, on_crit, color):
    a = {"shape": "box", "style": "filled,rounded", "fillcolor": color}
    if stolen:
        a["peripheries"] = "2"
    if state == _FAILED:
        a.update(shape="octagon", color="#e31a1c", penwidth="2", fontcolor="#e31a1c")
    elif state == RETRIED:
        a.update(shape="octagon", style="filled,dashed", color="#ff7f00", fontcolor="#ff7f00")
    elif state == _CANCELLED:
        a.update(style="dashed,rounded", fillcolor="white", color="#999999", fontcolor="#999999")
    if on_crit:
        a["color"] = _CRIT
        a["penwidth"] = "3"
    return a


def _draw_all(g, recs, crit, colors, away):
    ids = {r.key: f"t{i}" for i, r in enumerate(recs)}
    for r in recs:
        label = f"{r.name}\n{duration(r.own)}" if r.state != _CANCELLED else f"{r.name}\ncancelled"
        if r.state in (_FAILED, RETRIED):
            label = f"{r.name}\n{'attempt ' + str(r.attempt) + ' ' if r.state == RETRIED else ''}failed: {r.error_type}"
        g.node(ids[r.key], _text(label), tooltip=_text(f"{r.key} on {r.lane}"
               f"{' (stolen)' if r.key in away else ''}, {duration(r.duration)} wall"),
               **_node_attrs(r.state, r.key in away, r.key in crit, colors[r.lane]))
    for r in recs:
        both = r.key in crit
        if r.parent in ids:
            hot = both and r.parent in crit
            g.edge(ids[r.parent], ids[r.key], style="dashed",
                   color=_CRIT if hot else "#555555", penwidth="2.5" if hot else "1")
        for d in r.deps:
            if d in ids:
                hot = both and d in crit
                g.edge(ids[d], ids[r.key], color=_CRIT if hot else "black",
                       penwidth="2.5" if hot else "1")


def _draw_grouped(g, recs, crit, colors, away):
    by_key = {r.key: r for r in recs}
    depth = {}
    for r in recs:  # records are in start order: a parent starts before its children
        depth[r.key] = depth.get(r.parent, -1) + 1 if r.parent in by_key else 0
    groups = {}
    for r in recs:
        k = (r.name, depth[r.key])
        gr = groups.setdefault(k, {"n": 0, "own": 0, "stolen": 0, "failed": 0, "cancelled": 0,
                                   "lanes": {}, "crit": False})
        gr["n"] += 1
        gr["own"] += r.own
        gr["stolen"] += r.key in away
        gr["failed"] += r.state == _FAILED
        gr["cancelled"] += r.state == _CANCELLED
        gr["lanes"][r.lane] = gr["lanes"].get(r.lane, 0) + 1
        gr["crit"] |= r.key in crit
    gid = {k: f"g{i}" for i, k in enumerate(groups)}
    for k, gr in groups.items():
        name, d = k
        main_lane = max(gr["lanes"], key=gr["lanes"].get)
        lines = [f"{name}  x{gr['n']}", f"depth {d}, total {duration(gr['own'])}"]
        if gr["stolen"]:
            lines.append(f"{gr['stolen']} stolen")
        if gr["failed"] or gr["cancelled"]:
            lines.append(f"{gr['failed']} failed, {gr['cancelled']} cancelled")
        if len(gr["lanes"]) > 1:
            lines.append(" ".join(f"{ln}:{c}" for ln, c in sorted(gr["lanes"].items())))
        state = _FAILED if gr["failed"] else (_CANCELLED if gr["cancelled"] == gr["n"] else _DONE)
        a = _node_attrs(state, gr["stolen"] > 0, gr["crit"], colors[main_lane])
        a["shape"] = "box3d" if state == _DONE else a["shape"]
        g.node(gid[k], _text("\n".join(lines)), **a)
    spawn, data = {}, {}
    for r in recs:
        me = (r.name, depth[r.key])
        if r.parent in by_key:
            p = by_key[r.parent]
            pk = (p.name, depth[p.key])
            spawn[(pk, me)] = spawn.get((pk, me), 0) + 1
        for dk in r.deps:
            if dk in by_key:
                dr = by_key[dk]
                key = ((dr.name, depth[dk]), me)
                data[key] = data.get(key, 0) + 1
    for (a, b), n in spawn.items():
        hot = groups[a]["crit"] and groups[b]["crit"]
        g.edge(gid[a], gid[b], label=str(n) if n > 1 else "", style="dashed",
               color=_CRIT if hot else "#555555", penwidth="2.5" if hot else "1", fontsize="9")
    for (a, b), n in data.items():
        hot = groups[a]["crit"] and groups[b]["crit"]
        g.edge(gid[a], gid[b], label=str(n) if n > 1 else "", color=_CRIT if hot else "black",
               penwidth="2.5" if hot else "1", fontsize="9")


# ---------------------------------------------------------------------- the lazy plan
class Picture(str):
    """What ``tg.visualize`` returns: a ``str`` (the path written, as before; with no path, the
    SVG markup itself) that a notebook displays as the picture (``_repr_svg_``,
    ``_repr_mimebundle_``). ``path`` is the file written (or None), ``source`` the Graphviz
    source, ``svg`` the SVG markup (rendered on first use; ``GraphvizError`` without dot)."""

    def __new__(cls, value, path, source, svg=None):
        self = super().__new__(cls, value)
        self.path, self.source, self._svg = path, source, svg
        return self

    @property
    def svg(self) -> str:
        if self._svg is None:
            self._svg = svg_of(self.source)
        return self._svg

    def _repr_svg_(self):
        try:
            return self.svg
        except GraphvizError:
            return None  # the notebook falls back to the text

    def _repr_mimebundle_(self, include=None, exclude=None):
        svg = self._repr_svg_()
        text = self.path if self.path is not None else (
            f"<taskgraph picture: {len(self.source)} chars of Graphviz source>")
        return {"image/svg+xml": svg, "text/plain": text} if svg else {"text/plain": text}


def svg_of(source: str) -> str:
    """The SVG markup of a Graphviz source (no file written); ``GraphvizError`` if dot is
    missing or fails."""
    try:
        return graphviz.Source(source).pipe(format="svg").decode("utf-8")
    except graphviz.ExecutableNotFound:
        raise GraphvizError(f"Graphviz's 'dot' program was not found: {INSTALL_GRAPHVIZ}") from None
    except graphviz.CalledProcessError as e:
        raise GraphvizError(f"dot failed to draw the picture ({e})") from None


def visualize(nodes, path=None, *, threshold: int = DEFAULT_THRESHOLD) -> Picture:
    """Draws a task graph (one Node or a list of Nodes and all they depend on) BEFORE it runs,
    like dask's ``visualize``: one box per node (function name and key; finished nodes show
    their state), data edges between them. With more than ``threshold`` nodes they are
    grouped by function. With ``path``: writes it (format from the suffix; ``GraphvizError``
    if dot is missing, after writing the .dot source) and returns a ``Picture``, a str equal
    to the path. Without: writes nothing and returns a ``Picture`` holding the SVG markup
    (``GraphvizError`` if dot is missing). Either displays as the picture in a notebook.
    Works inside and outside workers; it never runs anything."""
    return _picture(plan_graph(nodes, threshold), path)


def _picture(g, path) -> Picture:
    """The Picture of g: rendered into path (the path), or, without one, as SVG markup."""
    if path is None:
        svg = svg_of(g.source)
        return Picture(svg, None, g.source, svg)
    written = _render(g, path)
    return Picture(written, written, g.source)


def plan_nodes(roots) -> list:
    """The Nodes under roots (a list of Nodes) and all they depend on, each once, depth first."""
    order, seen = [], set()
    stack = list(reversed(roots))
    while stack:  # iterative: chains of any length
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(reversed(n.dependencies))
    return order


def _roots(nodes) -> list:
    """The Nodes tg.visualize was given (one, or an iterable of them); TypeError naming what
    it got otherwise: a dask collection is pointed to taskgraph.dask.visualize."""
    if isinstance(nodes, Node):
        return [nodes]
    if hasattr(nodes, "__dask_graph__"):
        raise TypeError(f"tg.visualize draws taskgraph Nodes; {type(nodes).__name__} is a dask "
                        "collection: draw its graph as taskgraph would run it with "
                        "taskgraph.dask.visualize(x, path=None) (it runs nothing)")
    roots = [nodes]
    if hasattr(type(nodes), "__iter__"):
        try:
            roots = list(nodes)
        except Exception:  # noqa: BLE001 - not a list of Nodes after all: said below
            roots = [nodes]
    for n in roots:
        if not isinstance(n, Node):
            raise TypeError(f"tg.visualize takes a Node or a list of Nodes, got "
                            f"{type(n).__name__} {n!r:.80}")
    return roots


def plan_label(order) -> str:
    """The picture's title: how many nodes, and in what states ("3 nodes (not run yet)",
    "1 node: done", "5 nodes: 3 done, 2 not run yet")."""
    noun = "node" if len(order) == 1 else "nodes"
    by_state = {}
    for n in order:
        state = State.of(n)
        by_state[state] = by_state.get(state, 0) + 1
    counts = {("not run yet" if s is State.NEW else s.label): by_state[s]  # final states first
              for s in sorted(by_state, key=lambda s: (s is State.NEW, -s))}
    if list(counts) == ["not run yet"] or not counts:
        return f"{len(order)} {noun} (not run yet)"
    if len(counts) == 1:
        return f"{len(order)} {noun}: {next(iter(counts))}"
    return f"{len(order)} {noun}: " + ", ".join(f"{c} {label}" for label, c in counts.items())


def plan_graph(nodes, threshold: int = DEFAULT_THRESHOLD) -> graphviz.Digraph:
    """The Graphviz graph of the lazy plan under nodes (see ``visualize``); TypeError and
    ValueError for bad arguments, as ``visualize``."""
    roots = _roots(nodes)
    _check_threshold(threshold)
    order = plan_nodes(roots)
    g = graphviz.Digraph("plan", graph_attr={"rankdir": "TB", "fontname": "Helvetica",
                                             "label": plan_label(order),
                                             "labelloc": "t", "fontsize": "11"},
                         node_attr={"fontname": "Helvetica", "fontsize": "10", "shape": "box",
                                    "style": "rounded"}, edge_attr={"arrowsize": "0.6"})
    if len(order) <= threshold:
        ids = {id(n): f"n{i}" for i, n in enumerate(order)}
        for n in order:
            state = State.of(n)
            extra = {} if state is State.NEW else {"style": "rounded,filled", "fillcolor": "#e0e0e0"}
            g.node(ids[id(n)], _text(f"{n.name}\n{n.key}" + ("" if state is State.NEW else f"\n{state.label}")),
                   **extra)
        for n in order:
            for d in n.dependencies:
                g.edge(ids[id(d)], ids[id(n)])
    else:
        counts, edges = {}, {}
        for n in order:
            counts[n.name] = counts.get(n.name, 0) + 1
            for d in n.dependencies:
                edges[(d.name, n.name)] = edges.get((d.name, n.name), 0) + 1
        gid = {name: f"g{i}" for i, name in enumerate(counts)}
        for name, c in counts.items():
            g.node(gid[name], _text(f"{name}  x{c}"), shape="box3d")
        for (a, b), c in edges.items():
            g.edge(gid[a], gid[b], label=str(c), fontsize="9")
    return g
