"""taskgraph.dask.get, taskgraph's engine as dask's scheduler (taskgraph/dask/local.py and
graph.py): dask's own tests for get functions (dask.utils_test.GetFunctionTestMixin, run
as shipped), then what a dask user relies on beyond them: every form of graph dask hands a
scheduler, the scheduler choice, errors, fail-fast, Ctrl-C, each key run once, intermediate
values freed early, annotations, and traces. The collections (delayed, bag, array) are in
test_dask_get_collections.py."""
import _thread
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback

import pytest

import taskgraph as tg

if os.environ.get("TASKGRAPH_REQUIRE_DASK"):  # make test: installed by make setup, never skipped
    import dask
else:
    dask = pytest.importorskip("dask", reason="dask is not installed: `make setup` installs it; "
                               "pip install \"taskgraph-ft[dask]\"")
from dask._task_spec import Alias, DataNode, Dict, List, Task, TaskRef  # noqa: E402
from dask.highlevelgraph import HighLevelGraph  # noqa: E402
from dask.utils_test import GetFunctionTestMixin, add, inc  # noqa: E402

import taskgraph.dask  # noqa: E402
from taskgraph.dask import get  # noqa: E402

pytestmark = pytest.mark.timeout(120)


class TestGetFunction(GetFunctionTestMixin):
    """dask's own expectations of a scheduler's get function, imported from dask."""
    get = staticmethod(taskgraph.dask.get)


def test_import_needs_dask_only():
    """taskgraph.dask.get works with distributed unimportable; DaskScheduler then says why."""
    code = ("import sys\n"
            "sys.modules['distributed'] = None  # import distributed raises ImportError\n"
            "import taskgraph.dask\n"
            "from dask.utils_test import inc\n"
            "print(taskgraph.dask.get({'x': 1, 'y': (inc, 'x')}, 'y'))\n"
            "try:\n"
            "    from taskgraph.dask import DaskScheduler\n"
            "except ImportError as e:\n"
            "    print('DaskScheduler:', type(e).__name__, 'pip install' in str(e))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "DaskScheduler:", "ImportError", "True"], r.stdout


# ---------------------------------------------------------------- graph forms

def _both(dsk, keys):
    """get's result, checked equal to dask's synchronous scheduler's."""
    out = get(dsk, keys)
    assert out == dask.get(dsk, keys)
    return out


def test_task_spec_objects():
    dsk = {
        "a": DataNode("a", 5),
        "b": Task("b", add, TaskRef("a"), 10),
        "c": Task("c", sum, List(TaskRef("a"), TaskRef("b"), 1)),
        "d": Task("d", dict, Dict(x=TaskRef("c"), y=[1, 2])),
        "e": Alias("e", "b"),
        "f": Task("f", pow, TaskRef("a"), exp=TaskRef("a")),             # keyword dependency
        "g": Task("g", add, Task(None, inc, TaskRef("b")), TaskRef("e")),  # a nested task
        "h": DataNode("h", [1, 2, 3]),                                     # data, not plain
        "i": Task("i", len, TaskRef("h")),
    }
    assert _both(dsk, ["a", "b", "c", "d", "e", "f", "g", "i"]) == (
        5, 15, 21, {"x": 21, "y": [1, 2]}, 15, 3125, 31, 3)


def test_legacy_tasks_keys_and_literals():
    dsk = {"x": 1, ("y", 0): (inc, "x"), ("y", 1): (add, ("y", 0), "x"),
           "z": (sum, [("y", 0), ("y", 1), 100]),          # a list holding keys
           "w": (add, (inc, ("y", 1)), (inc, "x")),          # nested tasks
           "s": (len, "not a key"), "t": "x",               # a string constant; an alias
           "u": (lambda d: d["k"], {"k": ("y", 1)}),         # a dict: its values stay as they are
           "v": (max, 1.5, 2, b"b" > b"a")}
    assert _both(dsk, [("y", 1), "z", "w", "s", "t", "u", "v"]) == (3, 105, 6, 9, 1, ("y", 1), 2)


@pytest.mark.thread_unsafe(reason="a trace records every task of the process")
def test_fused_tasks_run_as_their_parts():
    a, b, c = Task("a", inc, 1), Task("b", inc, TaskRef("a")), Task("c", add, TaskRef("b"), 10)
    fused = Task.fuse(a, b, c)  # dask's linear fusion: _execute_subgraph
    dsk = {"c": fused, "d": Task("d", inc, TaskRef("c"))}
    with tg.trace() as tr:
        assert _both(dsk, ["d"]) == (14,)
    assert sorted(r.name for r in tr.records) == ["a", "b", "c", "d"]  # each part is a task


def test_key_shapes_and_highlevelgraph():
    dsk = {"x": 1, "y": (inc, "x"), ("z", 0): (add, "y", 1)}
    assert get(dsk, "y") == 2
    assert get(dsk, ["x", ["y", [("z", 0)]]]) == (1, (2, (3,)))
    assert get(dsk, []) == ()
    hlg = HighLevelGraph({"a": {"x": 1}, "b": {"y": (inc, "x")}}, {"a": set(), "b": {"a"}})
    assert get(hlg, ["y", "x"]) == (2, 1)


def test_cache_values_are_used_not_computed():
    ran = []
    dsk = {"x": (ran.append, "computed"), "y": (inc, "x")}
    assert get(dsk, "y", cache={"x": 41}) == 42
    assert ran == []


def test_each_key_runs_once_in_a_diamond():
    calls = []

    def base():
        calls.append(1)
        return 2

    dsk = {"a": (base,), "b": (inc, "a"), "c": (inc, "a"), "d": (add, "b", "c"),
           "e": (add, "d", "a")}
    assert get(dsk, ["e", "a", "d"]) == (8, 2, 6)
    assert len(calls) == 1


def test_graph_errors_before_anything_runs():
    ran = []
    with pytest.raises(KeyError):
        get({"x": (ran.append, 1)}, ["x", "missing"])
    with pytest.raises(ValueError, match="Missing dependency 'nowhere' of dask key 'x'"):
        get({"x": Task("x", inc, TaskRef("nowhere"))}, "x")
    with pytest.raises(RuntimeError, match="Cycle detected"):
        get({"x": (inc, "y"), "y": (inc, "x"), "z": (ran.append, 1)}, ["z", "x"])
    with pytest.raises(TypeError, match="needs a dask graph"):
        get([1, 2], "x")
    with pytest.raises(TypeError, match="num_workers or scheduler"):
        get({"x": 1}, "x", num_workers=2, scheduler=tg.default_scheduler())
    assert ran == []


# ---------------------------------------------------------------- which scheduler

def _scheduler_number():
    return tg.current_scheduler().number, tg.current_scheduler().workers


def test_which_scheduler_runs_it():
    dsk = {"s": (_scheduler_number,)}
    assert get(dsk, "s") == (tg.default_scheduler().number, tg.default_scheduler().workers)
    assert get(dsk, "s", num_workers=3)[1] == 3  # a private scheduler of that size
    with tg.Scheduler(2) as s:
        assert get(dsk, "s", scheduler=s)[0] == s.number
        with tg.use_scheduler(s):
            assert get(dsk, "s")[0] == s.number
    with tg.serial():
        assert get({"t": (threading.get_ident,)}, "t") == threading.get_ident()


@pytest.mark.thread_unsafe(reason="dask.config.set is process-wide: another thread's exit from it "
                                  "restores the scheduler under this one")
def test_dask_config_and_compute_keywords():
    delayed = dask.delayed
    x = delayed(inc)(delayed(add)(1, 2))
    with dask.config.set(scheduler=taskgraph.dask.get):
        assert x.compute() == 4
        assert dask.compute(x, delayed(_scheduler_number)(), num_workers=1)[1][1] == 1
    assert x.compute(scheduler=taskgraph.dask.get, pool=None, chunksize=4) == 4  # ignored


@pytest.mark.thread_unsafe(reason="dask's active callbacks are process-wide")
def test_dask_callbacks_are_not_called_and_a_warning_says_so():
    from dask.diagnostics import ProgressBar
    with ProgressBar(), pytest.warns(RuntimeWarning, match="progress=True"):
        assert get({"x": 1, "y": (inc, "x")}, "y") == 2


def _compute_inside(n):
    return get({"a": n, "b": (inc, "a")}, "b")


def test_a_dask_compute_inside_a_task_joins_even_on_one_worker():
    dsk = {("p", i): (_compute_inside, i) for i in range(20)}
    assert get(dsk, list(dsk), num_workers=1) == tuple(range(1, 21))
    with tg.serial():
        assert get(dsk, list(dsk)) == tuple(range(1, 21))


def _fails(x):
    raise ZeroDivisionError(f"bad input {x}")


def _failing_compute_inside(n):
    try:
        get({"a": n, "b": (_fails, "a"), "c": (inc, "b")}, "c")
    except ZeroDivisionError as e:  # the task's own error, as outside a task
        return "caught: " + [x for x in e.__notes__ if "dask key" in x][0]


def test_a_failure_inside_a_task_or_in_serial_mode_is_the_tasks_own_exception():
    assert get({"p": (_failing_compute_inside, 1)}, "p", num_workers=1) == (
        "caught: taskgraph.dask.get: raised by the task of dask key 'b'")
    with tg.serial(), pytest.raises(ZeroDivisionError, match="bad input 1") as ei:
        get({"a": 1, "b": (_fails, "a"), "c": (inc, "b")}, "c")
    assert "taskgraph.dask.get: raised by the task of dask key 'b'" in ei.value.__notes__


# ---------------------------------------------------------------- failures

def test_a_failure_is_the_tasks_own_exception_with_notes_naming_the_dask_key():
    ran = []
    dsk = {"a": (inc, 1), ("bad", 7): (_fails, "a"), "after": (ran.append, ("bad", 7))}
    with pytest.raises(ZeroDivisionError, match="bad input 2") as ei:
        get(dsk, ["after", "a"])
    notes = getattr(ei.value, "__notes__", [])
    assert any("dask key ('bad', 7)" in n for n in notes), notes
    assert any(n.startswith("taskgraph: raised by task bad-") for n in notes), notes
    assert traceback.extract_tb(ei.value.__traceback__)[-1].name == "_fails"
    assert ran == []  # its dependent never ran


def test_a_failure_in_a_fused_task_names_the_key_and_its_part():
    fused = Task.fuse(Task("a", inc, 1), Task("b", _fails, TaskRef("a")))
    with pytest.raises(ZeroDivisionError) as ei:
        get({"b": fused}, "b")
    assert any("dask key 'b' (its fused task 'b')" in n for n in ei.value.__notes__)


def _sleep_then(i):
    time.sleep(0.005)
    return i


def test_fail_fast_cancels_what_has_not_started():
    ran = []

    def slow(i):
        time.sleep(0.005)
        ran.append(i)
        return i

    dsk = {("s", i): (slow, i) for i in range(400)}
    dsk["bad"] = (_fails, 0)
    with pytest.raises(ZeroDivisionError):
        get(dsk, ["bad", *[("s", i) for i in range(400)]], num_workers=2)
    assert len(ran) < 400


def test_a_timeout_cancels_the_rest():
    ran = []

    def slow(i):
        time.sleep(0.005)
        ran.append(i)

    dsk = {("s", i): (slow, i) for i in range(2000)}
    with pytest.raises(TimeoutError):
        get(dsk, list(dsk), num_workers=2, timeout=0.2)
    time.sleep(0.1)
    assert len(ran) < 2000


def _flaky(box, fails):
    box.append(1)
    if len(box) <= fails:
        raise ConnectionError(f"attempt {len(box)}")
    return len(box)


def test_retries_annotation_becomes_the_tasks_retries():
    delayed = dask.delayed
    box = []
    with dask.annotate(retries=2):
        x = delayed(_flaky, pure=False)(box, 2)
    assert x.compute(scheduler=get) == 3
    box2 = []
    y = delayed(_flaky, pure=False)(box2, 1)
    with pytest.raises(ConnectionError):
        y.compute(scheduler=get)
    box3 = []
    layers = {"a": {"f": (_flaky, box3, 1)}}
    hlg = HighLevelGraph(layers, {"a": set()})
    hlg.layers["a"].annotations = {"retries": 1}
    assert get(hlg, "f") == 2


@pytest.mark.thread_unsafe(reason="Ctrl-C (_thread.interrupt_main) reaches the main thread only")
@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="Ctrl-C reaches the main thread only")
def test_ctrl_c_stops_it_and_the_scheduler_stays_usable():
    dsk = {("s", i): (_sleep_then, i) for i in range(3000)}
    with tg.Scheduler(2) as s:
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            get(dsk, list(dsk), scheduler=s)
        assert time.monotonic() - t0 < 0.3 + 3.0  # a bound that only tells a hang
        timer.join()
        assert get({"x": 1, "y": (inc, "x")}, "y", scheduler=s) == 2



# ---------------------------------------------------------------- memory

class _Counted:
    """Counts the live objects of one test (thread-safe) and the most there ever were."""

    def __init__(self):
        # Reentrant: on a free-threaded build an object another thread dropped is freed (its
        # __del__ runs) on its owner thread at any point, inside __init__'s block too.
        self.lock = threading.RLock()
        self.live = self.peak = self.made = 0

    def make(self, i):
        return _Chunk(self, i)


class _Chunk:
    def __init__(self, counter, i):
        self.counter, self.i = counter, i
        with counter.lock:
            counter.live += 1
            counter.made += 1
            counter.peak = max(counter.peak, counter.live)

    def __del__(self):
        with self.counter.lock:
            self.counter.live -= 1


def _pair_sum(a, b):
    return a.i + b.i


def _add_all(*xs):
    return sum(xs)


def test_intermediate_values_are_freed_once_their_last_dependent_ran():
    """x_i and y_i (chunks) meet in r_i, and the r_i are summed in a tree: dask's local
    schedulers keep only a few chunks alive at once, and so must this. Without the release
    all 600 chunks would be alive at the end."""
    n = 300
    c = _Counted()
    dsk = {("x", i): (c.make, i) for i in range(n)}
    dsk.update({("y", i): (c.make, i) for i in range(n)})
    dsk.update({("r", i): (_pair_sum, ("x", i), ("y", i)) for i in range(n)})
    level = [("r", i) for i in range(n)]
    depth = 0
    while len(level) > 1:
        depth += 1
        dsk.update({("t", depth, j): (_add_all, *level[j:j + 4]) for j in range(0, len(level), 4)})
        level = [("t", depth, j) for j in range(0, len(level), 4)]
    assert get(dsk, level[0], num_workers=2) == 2 * sum(range(n))
    assert c.made == 2 * n
    assert c.peak <= n // 5, c.peak


# ---------------------------------------------------------------- traces and progress

@pytest.mark.thread_unsafe(reason="a trace records every task of the process")
def test_traces_name_tasks_by_key_prefix_and_every_view_works(tmp_path, capfd):
    dsk = {("load-0f1e2d3c4b5a69788796a5b4c3d2e1f0", i): (inc, i) for i in range(50)}
    dsk["total-ab12cd34"] = (_add_all, *list(dsk))
    with tg.trace() as tr:
        assert get(dsk, "total-ab12cd34", num_workers=2, progress=True) == sum(range(1, 51))
    assert "51/51" in capfd.readouterr().err
    names = [r.name for r in tr.records]
    assert names.count("load") == 50 and names.count("total") == 1, names
    assert all(r.state == "done" for r in tr.records)
    assert "51 tasks" in tr.summary()
    assert os.path.getsize(tr.report(tmp_path / "report.html")) > 0
    if shutil.which("dot"):
        assert os.path.getsize(tr.visualize(tmp_path / "graph.svg")) > 0


CALLER_VAR = __import__("contextvars").ContextVar("caller_var", default="unset")


def _read_var(_):
    return CALLER_VAR.get()


def _write_var(_):
    CALLER_VAR.set("set by a task")
    return CALLER_VAR.get()


def _warns(_):
    import warnings
    warnings.warn("warned by a task", UserWarning)
    return 1


def test_each_task_runs_in_a_copy_of_the_callers_context():
    """As dask's threaded scheduler runs them: a task sees the caller's context variables,
    and what it sets stays its own. On 3.14t warnings.catch_warnings lives in a context
    variable: a task's warning reached the caller's pytest.warns only through this (dask's
    own test_head_npartitions_warn failed with taskgraph.dask.get before)."""
    token = CALLER_VAR.set("the caller's")
    try:
        assert get({"a": (_read_var, 1)}, "a") == "the caller's"
        assert get({"a": (_write_var, 1), "b": (_read_var, "a")}, ["a", "b"]) == (
            "set by a task", "the caller's")
        assert CALLER_VAR.get() == "the caller's"
    finally:
        CALLER_VAR.reset(token)
    with pytest.warns(UserWarning, match="warned by a task"):
        assert get({"a": (_warns, 1), "b": (inc, "a")}, "b") == 2
