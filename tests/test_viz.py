"""Pictures: DOT structure of the executed graph, grouping, a rendered SVG, the missing-dot
path, and the lazy plan."""
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

import taskgraph as tg
from taskgraph.trace import viz
from helpers import fib, needs_chromium, screenshot

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
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


@needs_dot
def test_trace_visualize_returns_a_picture_as_tg_visualize_does(tmp_path, fib_trace, monkeypatch):
    """Trace.visualize(): without a path the SVG markup, with one the path; a Picture either
    way (a str a notebook displays)."""
    monkeypatch.chdir(tmp_path)
    pic = fib_trace.visualize()
    assert isinstance(pic, viz.Picture) and pic.path is None and list(tmp_path.iterdir()) == []
    assert ET.fromstring(str(pic)).tag.endswith("svg") and pic._repr_svg_() == str(pic)
    assert "digraph" in pic.source
    p = tmp_path / "g.svg"
    pic = fib_trace.visualize(p, detail="all")
    assert isinstance(pic, viz.Picture) and pic == str(p) and pic.path == str(p)
    assert pic._repr_mimebundle_()["text/plain"] == str(p)


def test_stolen_marks_only_tasks_that_ran_away_from_their_spawner():
    """A task of a batch stolen by one worker can be taken back by its spawner's worker: its
    record says stolen, but it ran where it was spawned, and is not drawn as stolen."""
    ms = 1_000_000

    def rec(key, worker, parent=None, stolen=False, start=0):
        return tg.TaskRecord(key=key, name=key.split("-")[0], worker=worker, scheduler=1,
                             start=start, end=start + ms, own=ms, parent=parent, stolen=stolen)
    tr = tg.Trace([rec("root-1", 0), rec("back-2", 0, "root-1", stolen=True, start=1),
                   rec("away-3", 1, "root-1", stolen=True, start=2),
                   rec("home-4", 0, "root-1", start=3),
                   rec("lazy-5", 1, stolen=True, start=4)])  # no spawner: moved when stolen
    from taskgraph.trace.analysis import moved
    assert moved(tr.records) == {"away-3", "lazy-5"}
    src = viz.trace_graph(tr, detail="all").source
    nodes = re.findall(r"^\s*t\d+ \[([^\]]*)\]", src, re.M)
    doubled = [re.search(r'tooltip="([\w-]+) on', a).group(1) for a in nodes if "peripheries=2" in a]
    assert sorted(doubled) == ["away-3", "lazy-5"], src
    from taskgraph.trace import report as _report
    html = _report.fragment(tr)
    outlined = re.findall(r'stroke="#000"[^>]*><title>([\w-]+) ', html)
    assert sorted(outlined) == ["away-3", "lazy-5"]


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


# ---------------------------------------------------------------- notebook display
@tg.task
def _inc(x):
    return x + 1


@tg.task
def _boom(msg):
    raise ValueError(msg)




@needs_dot
def test_visualize_returns_the_path_as_a_displayable_picture(tmp_path):
    x = _inc(_inc(1))
    p = tmp_path / "plan.svg"
    pic = tg.visualize(x, p)
    assert pic == str(p) and isinstance(pic, str) and pic.path == str(p)  # as before
    assert p.exists()
    svg = pic._repr_svg_()
    texts = [t.text for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]
    assert x.key in texts
    bundle = pic._repr_mimebundle_()
    assert bundle["image/svg+xml"] == svg and bundle["text/plain"] == str(p)
    assert x.state == "new"


@needs_dot
def test_visualize_without_a_path_writes_nothing_and_holds_the_svg(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x = _inc(1)
    pic = tg.visualize(x)
    assert pic.path is None and list(tmp_path.iterdir()) == []
    assert ET.fromstring(str(pic)).tag.endswith("svg") and pic._repr_svg_() == str(pic)


def test_visualize_without_dot_and_without_a_path_raises(monkeypatch):
    import graphviz

    def missing(*a, **k):
        raise graphviz.ExecutableNotFound(["dot"])
    monkeypatch.setattr(graphviz.Source, "pipe", missing)
    with pytest.raises(tg.GraphvizError, match="install Graphviz"):
        tg.visualize(_inc(1))


def _node_html_tree(node):
    html = node._repr_html_()
    return html, ET.fromstring(html)  # well-formed: parses as XML


@needs_dot
def test_node_html_of_a_lazy_graph_is_its_plan_inline():
    x = _inc(1)
    y = _inc(x)
    html, tree = _node_html_tree(y)
    assert tree.tag == "div" and html.count("<svg") == 1 and "<?xml" not in html
    texts = [t.text for t in tree.iter("{http://www.w3.org/2000/svg}text")]
    assert x.key in texts and y.key in texts and "new" in html
    assert y.state == "new"  # nothing ran


def test_node_html_without_dot_lists_the_plan(monkeypatch):
    from taskgraph.trace import notebook as nb

    def missing(source):
        raise tg.GraphvizError("no dot")
    monkeypatch.setattr(nb, "svg_of", missing)
    x = _inc(1)
    html, tree = _node_html_tree(_inc(x))
    assert "<svg" not in html and x.key in html and "install Graphviz" in html


def test_node_html_of_finished_nodes():
    ok = _inc(1)
    ok.result()
    html, _ = _node_html_tree(ok)
    assert "done" in html and "result: 2" in html
    bad = _boom("<s>")
    with pytest.raises(ValueError):
        bad.result()
    html, _ = _node_html_tree(bad)
    assert "failed" in html and "ValueError: &lt;s&gt;" in html and "<s>" not in html


@needs_dot
@needs_chromium
def test_node_html_renders_in_headless_chromium(tmp_path):
    x = _inc(1)
    page = tmp_path / "node.html"
    page.write_text(f"<html><body>{_inc(_inc(x))._repr_html_()}</body></html>")
    blank = tmp_path / "blank.html"
    blank.write_text("<html><body></body></html>")
    shots = []
    for src in (page, blank):
        shots.append(len(screenshot(src, tmp_path / f"{src.stem}.png", size="600,500")))
    assert shots[0] > shots[1] + 1000  # the picture drew something on the page
