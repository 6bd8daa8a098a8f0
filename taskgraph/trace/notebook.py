"""Notebook display of a Node (``Node._repr_html_``, csrc/py/callbacks.c delegates here): the
plan of a graph not run yet as an inline SVG picture, or a finished node's state and result."""
from __future__ import annotations

import html

from taskgraph.trace.viz import GraphvizError, plan_graph, plan_nodes, svg_of

__all__ = ["node_html"]

_STYLE = "font-family: monospace; font-size: 12px"


def node_html(node) -> str:
    """HTML for a notebook: a finished node shows its key, state and a summary of its result
    or exception; an unfinished one (lazy, or running) also its plan, the graph under it as
    ``tg.visualize`` draws it (without Graphviz's dot: the list of its nodes instead). Never
    runs anything; inside or outside a task."""
    state = node.state
    head = f"<b>{html.escape(node.key)}</b> {html.escape(state)}"
    if node.done():
        exc = node._peek_exception()  # not exception(): a display does not read the failure
        if exc is None:
            what = f"result: {_short(repr(node.result()))}"
        else:
            what = f"{html.escape(type(exc).__name__)}: {_short(str(exc))}"
        return f'<div style="{_STYLE}">{head}<br/>{what}</div>'
    try:
        picture = _inline(svg_of(plan_graph(node).source))
    except GraphvizError:
        names = [html.escape(f"{n.key} ({n.state})") for n in plan_nodes([node])]
        picture = ("<ul>" + "".join(f"<li>{x}</li>" for x in names[:50]) + "</ul>"
                   + (f"<i>... {len(names) - 50} more</i>" if len(names) > 50 else "")
                   + "<i>(install Graphviz to see the picture)</i>")
    return f'<div style="{_STYLE}">{head}<br/>{picture}</div>'


def _short(text, limit=200) -> str:
    return html.escape(text if len(text) <= limit else text[:limit] + "...")


def _inline(svg: str) -> str:
    """SVG markup to put inside HTML: without the XML declaration and DOCTYPE."""
    i = svg.find("<svg")
    return svg[i:] if i >= 0 else svg

