"""Trace.report, Trace._repr_html_ and `taskgraph report` (taskgraph.trace.report): one
self-contained HTML file with its sections; rendered by headless Chromium when one is
installed."""
import subprocess
import sys
from html.parser import HTMLParser

import pytest

import taskgraph as tg
from helpers import fib, needs_chromium, screenshot

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.thread_unsafe(reason="opens traces, which record every task of the process")]


class Sections(HTMLParser):
    """Section ids, counts of tags, and any attribute that would fetch something."""

    def __init__(self):
        super().__init__()
        self.ids, self.tags, self.fetches = [], {}, []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        a = dict(attrs)
        if tag == "section":
            self.ids.append(a.get("id"))
        for k in ("src", "href", "xlink:href"):
            if tag == "a" and k == "href":  # a link the reader may follow: nothing is fetched
                continue
            if k in a and not str(a[k]).startswith("#"):
                self.fetches.append((tag, k, a[k]))
        if tag in ("script", "link", "iframe", "img"):
            self.fetches.append((tag, "", ""))


def parse(text):
    p = Sections()
    p.feed(text)
    p.close()
    return p


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    with tg.trace() as one:
        tg.compute(fib(15, 8), workers=1)
    with tg.trace() as two:
        tg.compute(fib(15, 8), workers=2)
    one.save(d / "one.tgtrace")
    two.save(d / "two.tgtrace")
    return one, two, d


def test_report_sections(traces):
    one, two, d = traces
    out = two.report(d / "r.html")
    assert out == str(d / "r.html")
    text = (d / "r.html").read_text()
    p = parse(text)
    assert p.ids == ["summary", "timeline", "predict", "hottest", "graph"]
    assert p.tags.get("svg", 0) >= 2  # the timeline and the speed-up plot, drawn inline
    assert p.fetches == []            # self-contained: nothing fetched
    assert "<title>fib-" in text      # each task in the timeline names itself
    assert "parallelism" in text and "burdened parallelism" in text
    n_rects = text.count("<rect")
    assert n_rects >= len(two)


def test_report_with_baseline_and_repr_html(traces):
    one, two, d = traces
    two.report(d / "b.html", baseline=one)
    p = parse((d / "b.html").read_text())
    assert p.ids == ["summary", "timeline", "predict", "hottest", "inflation", "graph"]
    assert "work inflation" in (d / "b.html").read_text()
    html = two._repr_html_()
    assert parse(html).ids == ["summary", "timeline", "predict", "hottest", "graph"]


def test_report_errors_and_empty(traces, tmp_path):
    one, two, d = traces
    with pytest.raises(ValueError, match="same program"):
        two.report(tmp_path / "x.html", baseline=tg.Trace([tg.TaskRecord(
            "other-1", "other", 0, 1, 0, 10, 10, None)]))
    assert not (tmp_path / "x.html").exists()  # nothing written on a bad baseline
    with pytest.raises(OSError):
        two.report(tmp_path / "no" / "such" / "dir.html")
    with pytest.raises(TypeError):
        two.report(3)
    tg.Trace().report(tmp_path / "empty.html")
    p = parse((tmp_path / "empty.html").read_text())
    assert p.ids == ["summary"] and "No tasks recorded" in (tmp_path / "empty.html").read_text()


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "taskgraph", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_cli_report(traces, tmp_path):
    one, two, d = traces
    r = run_cli("report", d / "two.tgtrace", "-o", tmp_path / "c.html", "--baseline",
                d / "one.tgtrace")
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout
    assert "inflation" in parse((tmp_path / "c.html").read_text()).ids
    r = run_cli("report", tmp_path / "missing.tgtrace", "-o", tmp_path / "d.html")
    assert r.returncode == 2 and "cannot read trace" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "junk.tgtrace").write_bytes(b"not a trace")
    r = run_cli("report", d / "two.tgtrace", "-o", tmp_path / "e.html", "--baseline",
                tmp_path / "junk.tgtrace")
    assert r.returncode == 2 and "not a taskgraph trace" in r.stderr
    assert not (tmp_path / "e.html").exists()
    r = run_cli("report", "--help")
    assert r.returncode == 0 and "--baseline" in r.stdout


@needs_chromium
def test_report_renders_in_headless_chromium(traces, tmp_path):
    one, two, d = traces
    two.report(tmp_path / "r.html", baseline=one)
    data = screenshot(tmp_path / "r.html", tmp_path / "r.png")
    assert len(data) > 20_000  # a page with drawings, not a blank one


def test_report_of_a_large_trace_shows_the_bounds_only(traces, tmp_path, monkeypatch):
    from taskgraph.trace import report as _report
    one, two, d = traces
    monkeypatch.setattr(_report, "MAX_SIMULATED", 10)
    monkeypatch.setattr(_report, "MAX_TIMELINE", 10)
    text = two._repr_html_()
    assert "Not simulated: more than 10 tasks" in text
    assert "only the outermost task of each nest drawn" in text
    plot = text.split('id="predict"')[1].split("</svg>")[0]
    assert 'stroke="#36c"' not in plot  # no simulated line, the bounds only
    assert parse(text).ids == ["summary", "timeline", "predict", "hottest", "graph"]


def test_longest_tasks_leave_out_cancelled_tasks_that_never_ran():
    ms = 1_000_000
    recs = [tg.TaskRecord(key=f"ran-{i}", name="ran", worker=0, scheduler=1, start=i * ms,
                          end=(i + 1) * ms, own=ms, parent=None) for i in range(3)]
    recs += [tg.TaskRecord(key=f"never-{i}", name="never", worker=0, scheduler=1, start=3 * ms,
                           end=3 * ms, own=0, parent=None, state="cancelled",
                           error_type="CancelledError", error="x") for i in range(20)]
    text = tg.Trace(recs)._repr_html_()
    hottest = text.split('id="hottest"')[1].split("</section>")[0]
    assert "never-" not in hottest and "<td>never</td>" not in hottest
    assert "ran-0" in hottest and "20 cancelled tasks (never ran) left out" in hottest


def test_report_without_graphviz_shows_every_other_section(traces, tmp_path, monkeypatch):
    """Without dot: the graph section says how to install Graphviz, names no file (nothing
    was written for it), and the rest of the report is there."""
    one, two, d = traces
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    text = two._repr_html_()
    p = parse(text)
    assert p.ids == ["summary", "timeline", "predict", "hottest", "graph"]
    graph = text.split('id="graph"')[1]
    assert "Graphviz" in graph and "apt-get install graphviz" in graph and "<svg" not in graph
    assert "/tmp" not in graph and ".dot source is in" not in graph
    assert list(tmp_path.iterdir()) == []


@needs_chromium
def test_a_big_graph_keeps_its_size_and_scrolls_in_its_box(tmp_path):
    """A graph of a few hundred tasks is drawn at its natural size inside a box that scrolls,
    not shrunk to the page's width (where its labels would be unreadable)."""
    import json
    import shutil
    if not shutil.which("dot"):
        pytest.skip("Graphviz dot not installed")
    with tg.trace() as tr:
        assert tg.compute(fib(18, 8), workers=2) == 2584  # 287 tasks, drawn one by one
    assert 250 < len(tr) <= 300
    probe = ("<script>var b = document.querySelector('.tg-graph'), s = b.querySelector('svg');"
             "var pre = document.createElement('pre'); pre.id = 'tg-probe';"
             "pre.textContent = JSON.stringify({box: b.clientWidth, scroll: b.scrollWidth,"
             " svg: s.getBoundingClientRect().width, attr: s.width.baseVal.value,"
             " overflow: getComputedStyle(b).overflowX});"
             "document.body.appendChild(pre);</script>")
    page = tmp_path / "big.html"
    page.write_text(tr._repr_html_().join(['<html><body style="width:900px">', probe + "</body></html>"]))
    from helpers import dump_dom
    dom = dump_dom(page)
    got = json.loads(dom.split('<pre id="tg-probe">')[1].split("</pre>")[0])
    assert got["overflow"] == "auto", got
    assert got["svg"] == pytest.approx(got["attr"], rel=0.01), got  # natural size, not scaled
    assert got["scroll"] > got["box"], got  # wider than its box: the box scrolls


def test_a_simulation_below_the_lower_bound_is_explained(monkeypatch):
    """Tiny tasks (here a failing DAG, most of it cancelled): the simulation, which charges
    per-task costs the bounds do not count, falls below the lower bound; the report says why
    instead of showing contradictory figures without a word. (The shared counter's cost is set
    from the run's own times, 20 times a task's average own time and at least 1 us, so that
    the line's moves, two per task and one at a time, outweigh the work whatever this
    machine's speed: at a fixed 1 us, the AddressSanitizer build's slower tasks outweighed the
    line under load, and the simulation reached its cap, above the lower bound.)"""
    from taskgraph.trace import predict as _predict
    @tg.task
    def load(i):
        if i == 3:
            raise ValueError("bad row")
        return i

    @tg.task
    def transform(x):
        return x * 2

    @tg.task
    def total(xs):
        return sum(xs)

    with tg.trace() as tr:
        with pytest.raises(ValueError):
            tg.compute(total([transform(load(i)) for i in range(200)]), workers=2)
    shared = max(1000.0, 20 * tr.work / len(tr.records))
    monkeypatch.setattr(_predict, "shared_rmw_ns", lambda: shared)
    p64 = tr.predict(64, shared_rmw_ns=shared)[0]
    assert p64.simulated < p64.lower * 0.99, p64  # what the report must explain
    text = tr._repr_html_()
    predict = text.split('id="predict"')[1].split("</section>")[0]
    assert "Simulated below the lower bound on" in predict and "64" in predict
    assert "cancelled, which never ran but are still scheduled" in predict
    assert f"{shared / 1e3:.2f} us each" in predict
