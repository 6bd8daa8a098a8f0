"""Pictures: DOT structure of the executed graph, grouping, a rendered SVG, the missing-dot
path, and the lazy plan."""
import re
import shutil
import xml.etree.ElementTree as ET

import pytest

import taskgraph as tg
from helpers import fib

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.thread_unsafe(reason="draws traces, which record every task of the process"),
]


@pytest.fixture(scope="module")
def fib_trace():
    with tg.trace() as tr:
        tg.compute(fib(10), workers=2)
    return tr


def test_dot_of_executed_graph_has_every_task_edge_and_legend(tmp_path, fib_trace):
    p = tmp_path / "g.dot"
    fib_trace.visualize(p)
    src = p.read_text()
    task_nodes = re.findall(r"^\s*t\d+ \[", src, re.M)
    assert len(task_nodes) == len(fib_trace.records)
    spawn_edges = re.findall(r"^\s*t\d+ -> t\d+ \[.*style=dashed", src, re.M)
    assert len(spawn_edges) == sum(1 for r in fib_trace.records if r.parent)
    assert "cluster_legend" in src and "worker s" in src
    assert "#c0392b" in src  # the critical path is highlighted
    lanes = {r.lane for r in fib_trace.records}
    assert all(f"worker {lane}" in src for lane in lanes)


def test_stolen_failed_and_cancelled_are_marked(tmp_path):
    @tg.task
    def bad():
        raise KeyError("x")

    @tg.task
    def after(x):
        return x

    with tg.trace() as tr:
        with pytest.raises(KeyError):
            tg.compute(after(bad()), workers=1)
    p = tmp_path / "f.dot"
    tr.visualize(p)
    src = p.read_text()
    assert "octagon" in src and "failed: KeyError" in src
    assert "cancelled" in src and "dashed,rounded" in src


def test_large_graphs_are_grouped_unless_asked(tmp_path):
    with tg.trace() as tr:
        tg.compute(fib(14), workers=2)
    assert len(tr.records) > 300
    p = tmp_path / "grouped.dot"
    tr.visualize(p)
    src = p.read_text()
    assert not re.search(r"^\s*t\d+ \[", src, re.M)
    groups = re.findall(r"^\s*g\d+ \[label=\"fib  x(\d+)", src, re.M)
    assert sum(map(int, groups)) == len(tr.records)
    p2 = tmp_path / "all.dot"
    tr.visualize(p2, detail="all")
    assert len(re.findall(r"^\s*t\d+ \[", p2.read_text(), re.M)) == len(tr.records)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
def test_renders_a_valid_svg(tmp_path, fib_trace):
    p = tmp_path / "g.svg"
    fib_trace.visualize(p)
    root = ET.parse(p).getroot()
    assert root.tag.endswith("svg")
    assert len(root.findall(".//{http://www.w3.org/2000/svg}g")) > len(fib_trace.records)


def test_missing_dot_writes_source_and_says_how_to_install(tmp_path, fib_trace, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    p = tmp_path / "g.svg"
    with pytest.raises(tg.GraphvizError, match="install Graphviz") as ei:
        fib_trace.visualize(p)
    assert not p.exists()
    dot = tmp_path / "g.dot"
    assert dot.exists() and "digraph" in dot.read_text()
    assert ei.value.dot_path == str(dot)


def test_unknown_suffix_is_a_clear_error(tmp_path, fib_trace):
    with pytest.raises(ValueError, match="picture format"):
        fib_trace.visualize(tmp_path / "g.bmp")


def test_lazy_plan_before_it_runs(tmp_path):
    @tg.task
    def add(a, b):
        return a + b

    x = add(1, 2)
    y = add(x, x)
    z = add(y, 10)
    p = tmp_path / "plan.dot"
    tg.visualize(z, p)
    src = p.read_text()
    assert len(re.findall(r"^\s*n\d+ \[", src, re.M)) == 3
    assert len(re.findall(r"->", src)) == 2  # x -> y (x used twice: one dependency), y -> z
    assert x.state == "new"  # nothing ran
    assert z.key in src
