"""What a new user sees the first time: the findings of a dask user and a futures user trying
taskgraph as newcomers, each as a test of what they see (the import from a checkout that
shadows the installed package is in tests/test_install.py, which installs into a fresh venv).
"""
import re
import shutil
import time

import pytest

import taskgraph as tg
from taskgraph.trace import viz

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.thread_unsafe(reason="opens traces, which record every task of the "
                                        "process; reads the process's stderr")]

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot")


@needs_dot
def test_visualize_of_a_dask_array_points_to_the_dask_picture_which_draws_it():
    """It raised `TypeError: len() of unsized object` from deep inside dask."""
    da = pytest.importorskip("dask.array")
    tgd = pytest.importorskip("taskgraph.dask")
    x = da.ones((10, 10), chunks=5).sum()
    with pytest.raises(TypeError, match=r"Array is a dask collection: .*taskgraph\.dask\.visualize"):
        tg.visualize(x)
    picture = tgd.visualize(x)
    assert isinstance(picture, viz.Picture)
    assert "ones" in picture and "sum" in picture  # the dask keys' names, as the boxes say
    assert x.compute() == 100  # drawing ran nothing


def test_visualize_takes_a_node_or_nodes_and_says_so_for_anything_else():
    class Unsized:
        def __iter__(self):
            raise TypeError("len() of unsized object")

    with pytest.raises(TypeError, match="takes a Node or a list of Nodes, got Unsized"):
        tg.visualize(Unsized())


def failing():
    raise ValueError("no")


@pytest.mark.parametrize("run, title", [
    (None, "3 nodes (not run yet)"),
    ("a", "3 nodes: 1 done, 2 not run yet"),
    ("c", "1 node: done"),  # a node that ran has let go of its dependencies
    ("bad", "1 node: failed"),
])
def test_the_picture_of_a_graph_says_how_many_nodes_and_in_what_states(run, title):
    """A finished Node's picture said `1 nodes (not run yet)`."""
    a = tg.task(abs)(-1)
    b = tg.task(abs)(-2)
    c = tg.task(lambda x, y: x + y)(a, b)
    bad = tg.task(failing)()
    nodes = {None: c, "a": c, "c": c, "bad": bad}[run]
    if run is not None:
        first = {"a": a, "c": c, "bad": bad}[run]
        try:
            tg.compute(first)
        except ValueError:
            pass
    assert viz.plan_graph([nodes]).graph_attr["label"] == title


def test_a_task_that_ran_never_shows_zero_own_time():
    """A task of a few hundred nanoseconds showed `0 us` in the trace's picture and report."""
    from taskgraph.trace.analysis import duration

    assert [duration(ns) for ns in (640, 3_400, 812_000, 45_600_000, 1_230_000_000)] == [
        "640 ns", "3.4 us", "812 us", "45.6 ms", "1.23 s"]

    @tg.task
    def tiny(x):
        return x + 1

    with tg.trace() as tr:
        tg.compute([tiny(i) for i in range(5)])
    source = viz.trace_graph(tr).source
    labels = re.findall(r'label="tiny\n([^"]*)"', source)
    assert len(labels) == 5, source[:500]
    assert not any(re.fullmatch(r"0(\.0+)? (us|ns|ms)", t) for t in labels), labels


def test_a_report_explains_a_simulation_below_the_lower_bound_without_a_red_flag(tmp_path,
                                                                                 monkeypatch):
    """A healthy program's report showed a large red warning about 64 workers: the
    simulation, which charges every task its scheduling cost, falls below the lower bound
    when tasks are tiny next to those costs. That is the model explaining itself, not a fault
    of the program: a note."""
    from taskgraph.trace import predict as _predict

    @tg.task
    def leaf(i):
        return i

    with tg.trace() as tr:
        tg.compute([leaf(i) for i in range(300)], workers=2)
    shared = max(1000.0, 20 * tr.work / len(tr.records))
    monkeypatch.setattr(_predict, "shared_rmw_ns", lambda: shared)
    p64 = tr.predict(64, shared_rmw_ns=shared)[0]
    if not p64.simulated < p64.lower * 0.99:
        pytest.skip(f"the simulation is not below the lower bound here: {p64}")
    html = tr._repr_html_()
    predict = html.split('id="predict"')[1].split("</section>")[0]
    assert "Simulated below the lower bound on" in predict
    assert 'class="tg-flag"' not in predict
    assert 'class="tg-note">Simulated below' in predict


class CountingScheduler:
    """A scheduler's counters as the progress bar reads them (Scheduler.stats()), set by hand."""

    def __init__(self):
        self.run = 0

    def stats(self):
        return [{"tasks_run": self.run, "spawned": 0}]


def test_the_progress_bars_first_refresh_shows_no_rate_made_of_microseconds(capfd):
    """The bar appears once the graph is submitted, and the tasks done meanwhile (8,000 here)
    were counted in its rate over the microseconds since it appeared: `6784903.53task/s`.
    Now its clock starts with it, at the count it starts from."""
    pytest.importorskip("tqdm")
    from taskgraph._progress import ProgressBar

    sched = CountingScheduler()
    bar = ProgressBar(sched)
    sched.run = 8000  # done while the graph was being submitted
    bar.set_total(10_000)
    sched.run = 10_000
    bar.finish()
    bar.close()
    draws = [d for d in capfd.readouterr().err.replace("\n", "\r").split("\r") if "task" in d]
    assert draws and "8000/10000" in draws[0], draws
    assert re.search(r"[\d.?]+task/s", draws[0]).group(0) == "?task/s", draws[0]
    assert "10000/10000" in draws[-1], draws
