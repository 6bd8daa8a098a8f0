"""Pictures: DOT structure of the executed graph, grouping, a rendered SVG, the missing-dot
path, and the lazy plan."""
import re
import shutil
import subprocess
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


def _cluster_trace():
    """A trace as read back from a dask cluster: lanes are worker addresses (host:port), and a
    task name with characters Graphviz would otherwise interpret."""
    lanes = ["tcp://127.0.0.1:41091", "tcp://127.0.0.1:41093", "tls://[::1]:8786"]
    names = ["fib", "odd\\name", "<b>html?</b>"]
    recs = []
    for i in range(9):
        recs.append(tg.TaskRecord(
            key=f"{names[i % 3]}-0.{i}", name=names[i % 3], worker=i % 3, scheduler=0,
            start=i * 1000, end=i * 1000 + 900, own=500,
            parent=None if i == 0 else f"{names[0]}-0.0" if i < 3 else f"{names[(i - 3) % 3]}-0.{i - 3}",
            deps=[f"{names[1]}-0.1"] if i == 8 else [],
            state="failed" if i == 5 else "cancelled" if i == 7 else "done",
            error_type="ValueError" if i == 5 else "CancelledError" if i == 7 else None,
            where=lanes[i % 3]))
    return tg.Trace(recs)


def _dot_plain(src, tmp_path):
    """Runs Graphviz on DOT source: (the node names it drew, its stderr)."""
    p = tmp_path / "in.dot"
    p.write_text(src)
    r = subprocess.run(["dot", "-Tplain", str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split()[1] for line in r.stdout.splitlines() if line.startswith("node ")], r.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
@pytest.mark.parametrize("detail", ["all", "grouped"])
def test_worker_addresses_as_lanes_draw_cleanly(tmp_path, detail):
    tr = _cluster_trace()
    p = tmp_path / "g.dot"
    tr.visualize(p, detail=detail)
    src = p.read_text()
    drawn, stderr = _dot_plain(src, tmp_path)
    assert stderr == ""  # no "port ... unrecognized" warnings
    declared = [n for n in re.findall(r"^\s*(\w+) \[", src, re.M)  # every node declared
                if n not in ("graph", "node", "edge")]
    assert sorted(drawn) == sorted(declared)  # and nothing else: no stray node
    lanes = {r.lane for r in tr.records}
    legend = [n for n in drawn if n.startswith("legend_")]
    assert len(legend) == len(lanes) + 5 + 4 + (detail == "grouped")  # workers, marks, edges
    kind = "t" if detail == "all" else "g"
    # grouped: no two records share a (function, spawn depth) here, so one group each
    assert len(drawn) - len(legend) == len(tr.records)
    assert all(n.startswith(kind) for n in drawn if not n.startswith("legend_"))
    assert not [n for n in drawn if "tcp" in n or "//" in n]  # no stray node from an address
    assert all(f"worker {lane}" in src for lane in lanes)  # the addresses are still shown
    svg = tmp_path / "g.svg"
    tr.visualize(svg, detail=detail)
    text = "".join(ET.parse(svg).getroot().itertext())
    assert all(f"worker {lane}" in text for lane in lanes)
    if detail == "all":
        assert "odd\\name" in text and "<b>html?</b>" in text  # names drawn as written


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
def test_lazy_plan_with_unusual_task_names_draws_cleanly(tmp_path):
    odd = tg.task(lambda x: x, name="a:b\\c")
    z = odd(odd(1))
    p = tmp_path / "plan.dot"
    tg.visualize(z, p)
    drawn, stderr = _dot_plain(p.read_text(), tmp_path)
    assert stderr == "" and sorted(drawn) == ["n0", "n1"]
