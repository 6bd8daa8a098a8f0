"""The dask.distributed backend (taskgraph.dask) against a real LocalCluster: 2 worker
processes with 1 thread each, on loopback, no dashboard, started here and torn down after."""
import _thread
import functools
import json
import logging
import os
import pathlib
import re
import subprocess
import sys
import threading
import time
import traceback

import pytest

import taskgraph as tg

if os.environ.get("TASKGRAPH_REQUIRE_DASK"):  # make test: installed by make setup, never skipped
    import distributed
else:
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed: "
                                      "`make setup` installs it; pip install \"taskgraph-ft[dask]\"")
from taskgraph.dask import DaskScheduler  # noqa: E402

import dask_tasks as T  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
sys.path.insert(0, str(EXAMPLES))  # the examples are imported by name, here and on the workers

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.thread_unsafe(reason="shares one LocalCluster and its workers' trace records"),
]


@pytest.fixture(scope="module")
def ds():
    """A DaskScheduler on a 2 x 1-thread LocalCluster whose workers can import this directory
    and the examples."""
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(EXAMPLES)] + sys.path),
           # distributed's sampling profiler reads other threads' frames: unsafe on 3.13t
           "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import dask
    dask.config.refresh()
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None, host="127.0.0.1",
                                      silence_logs=logging.CRITICAL) as cluster, \
                distributed.Client(cluster) as client:
            yield DaskScheduler(client)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def runs(path):
    return len(path.read_text().splitlines()) if path.exists() else 0


def runs_once_settled(path, quiet=1.0, limit=30.0):
    """How many runs path counts once no new run has started for `quiet` seconds (the cluster
    has stopped: what was running finished, nothing else starts), whatever the load."""
    deadline = time.monotonic() + limit
    last = runs(path)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = runs(path)
        if now == last:
            return now
        last = now
    raise AssertionError(f"{path.name}: still starting tasks after {limit} s")


# ---------------------------------------------------------------------- lazy graphs
def test_lazy_graph_values_shapes_and_a_shared_node_runs_once(ds, tmp_path):
    mark = tmp_path / "shared"
    s = T.marked(str(mark), 5)
    outs = [T.add(s, i) for i in range(6)]
    got = tg.compute(outs, {"s": s, "t": (outs[0],)}, scheduler=ds)
    assert got == ([5, 6, 7, 8, 9, 10], {"s": 5, "t": (5,)})
    assert runs(mark) == 1  # one dask key per Node
    assert s.state == "done" and s.result() == 5  # the targets end up done
    assert tg.compute(T.add(s, 100), scheduler=ds) == 105  # finished nodes are not run again
    assert runs(mark) == 1


def test_results_match_the_local_scheduler(ds):
    def graph():
        xs = [T.add(i, i) for i in range(20)]
        return T.add(T.add(xs[0], xs[1]), [x for x in xs][5])
    local = tg.compute(graph(), workers=2)
    assert tg.compute(graph(), scheduler=ds) == local == 2 + 10


def test_a_with_block_makes_it_the_current_scheduler(ds):
    me = os.getpid()
    with ds:
        pid, _ = T.where().result()  # a lazy node's result() runs on the cluster
        assert pid != me
        assert tg.compute(T.where())[0] != me
    with tg.Scheduler(workers=1) as s:
        pid, thread = T.where().result()  # and on a local scheduler in its block
        assert pid == me and thread.startswith(f"taskgraph-{s.number}-")
    assert tg.current_scheduler() is tg.default_scheduler()


# ---------------------------------------------------------------------- fork-join
def test_fork_join_on_one_thread_workers_does_not_deadlock(ds):
    assert tg.compute(T.fib(12), scheduler=ds) == 144
    assert tg.compute(T.chain(30), scheduler=ds) == 30


@pytest.mark.parametrize("example", ["fib.py", "quicksort.py", "pipeline.py"])
def test_every_example_gives_the_same_answer_on_the_cluster(ds, example):
    import importlib
    mod = importlib.import_module(example[:-3])  # importable by the workers too
    if example == "fib.py":
        assert mod.run(n=16, cutoff=10, scheduler=ds)["value"] == mod.run(n=16, cutoff=10, workers=2)["value"] == 987
    elif example == "quicksort.py":
        r = mod.run(size=3000, cutoff=500, seed=3, scheduler=ds)
        assert list(r["value"]) == sorted(r["input"]) == r["expected"]
    else:
        r = mod.run(docs=6, words=200, scheduler=ds)
        assert r["counts"] == r["expected_counts"] == mod.run(docs=6, words=200, workers=2)["counts"]


# ---------------------------------------------------------------------- failures
def test_failure_keeps_type_traceback_and_note_and_dependents_never_run(ds, tmp_path):
    mark = tmp_path / "dependent"
    bad = T.fails("bad 1")
    dep = T.marked(str(mark), bad)
    with pytest.raises(ValueError, match="bad 1") as ei:
        tg.compute(dep, scheduler=ds)
    tb = "".join(traceback.format_exception(ei.value))
    assert 'raise ValueError(msg)  # the line the traceback must show' in tb
    assert any("taskgraph: raised by task fails-" in n and "dask worker tcp://127.0.0.1" in n
               for n in ei.value.__notes__)
    assert bad.state == "failed" or bad.state == "new"  # an intermediate node stays lazy
    assert dep.state == "cancelled"
    with pytest.raises(tg.CancelledError, match="its dependency fails-"):
        dep.result()
    assert runs(mark) == 0
    # two levels down: the direct dependency (lazy, never ran) is named, as locally
    mid = T.add(T.fails("bad 2"), 1)
    top = T.add(mid, 1)
    with pytest.raises(ValueError, match="bad 2"):
        tg.compute(top, scheduler=ds)
    with pytest.raises(tg.CancelledError, match=rf"its dependency {re.escape(mid.key)} was cancelled; "
                       r"the first failure: task fails-\S+ raised ValueError: bad 2$") as ei:
        top.result()
    assert isinstance(ei.value.__cause__, ValueError) and str(ei.value.__cause__) == "bad 2"


def test_fail_fast_cancels_the_rest_of_the_compute(ds, tmp_path):
    mark = tmp_path / "slow"
    nodes = [T.fails("early")] + [T.slow_marked(str(mark), i, 0.2) for i in range(20)]
    with pytest.raises(ValueError, match="early"):
        tg.compute(*nodes, scheduler=ds)
    assert runs_once_settled(mark) < 20  # did not run everything
    assert sum(n.state == "cancelled" for n in nodes[1:]) >= 20 - runs(mark)
    with pytest.raises(tg.CancelledError, match=rf"{re.escape(nodes[0].key)} failed \(ValueError: early\)"):
        next(n for n in nodes if n.state == "cancelled").result()  # as locally: names it


def test_child_errors_inside_tasks_on_the_cluster(ds):
    assert tg.compute(T.child_fails(), scheduler=ds) == [0, 1, "child 2", 3]
    with pytest.raises(ValueError, match="nobody waited"):
        tg.compute(T.unobserved_child(), scheduler=ds)


def _raised_by_notes(exc):
    return [n for n in getattr(exc, "__notes__", []) if n.startswith("taskgraph: raised by task")]


def test_a_failure_any_depth_down_a_fork_join_tree_is_the_users_exception_as_locally(ds):
    for depth in (1, 2, 3, 5):
        with pytest.raises(ValueError, match="deep failure") as on_cluster:
            tg.compute(T.deep_fails(depth), scheduler=ds)
        with pytest.raises(ValueError, match="deep failure") as here:
            tg.compute(T.deep_fails(depth), workers=2)
        exc = on_cluster.value
        assert type(exc) is type(here.value) is ValueError, depth
        assert exc.__cause__ is None and here.value.__cause__ is None
        tb = "".join(traceback.format_exception(exc))
        assert "raise ValueError(\"deep failure\")  # the deep line" in tb, depth
        # one note, naming the task that raised it (not one per level it went through)
        notes = _raised_by_notes(exc)
        assert len(notes) == len(_raised_by_notes(here.value)) == 1, notes
        assert re.match(r"taskgraph: raised by task deep_fails-\S+ on dask worker tcp://", notes[0])


def test_cancelled_children_say_why_as_locally(ds):
    # A child whose dependency (a sibling) failed names that dependency ...
    local = tg.compute(T.reads_a_child_whose_dependency_failed(), workers=1)
    assert local == ("cancelled",
                     "task B was cancelled: its dependency A failed (ValueError: first child)",
                     "ValueError", "first child")
    assert tg.compute(T.reads_a_child_whose_dependency_failed(), scheduler=ds) == local
    # ... and a child cancelled because the task that spawned it failed names its parent.
    want = r"task sleeper-\S+ was cancelled: its parent task fails_after_spawning-\S+ failed"
    for got in (tg.compute(T.fails_after_spawning("local"), workers=1),
                tg.compute(T.fails_after_spawning("cluster"), scheduler=ds)):
        state, msg, cause, cause_msg = got
        assert state == "cancelled" and re.fullmatch(want, msg), got
        assert (cause, cause_msg) == ("ValueError", "the parent fails")


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="needs the main thread")
def test_ctrl_c_cancels_the_cluster_work(ds, tmp_path):
    mark = tmp_path / "started"
    nodes = [T.slow_marked(str(mark), i, 0.3) for i in range(40)]  # 6 s on 2 workers
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        tg.compute(*nodes, scheduler=ds)
    assert time.monotonic() - t0 < 0.5 + 5  # a hang detector (all the work: 6 s)
    timer.join()
    assert all(n.state in ("done", "cancelled") for n in nodes)  # nothing left claimed
    assert any(n.state == "cancelled" for n in nodes)
    assert runs_once_settled(mark) < 20  # the cluster stopped: nothing else starts
    assert tg.compute(T.add(1, 2), scheduler=ds) == 3  # still usable


def test_compute_timeout_cancels_and_result_timeout_only_stops_waiting(ds, tmp_path):
    mark = tmp_path / "slow"
    nodes = [T.slow_marked(str(mark), i, 0.5) for i in range(10)]  # 2.5 s on 2 workers
    with pytest.raises(TimeoutError, match="did not finish within 0.3 s: what it submitted was cancelled"):
        tg.compute(nodes, scheduler=ds, timeout=0.3)
    assert all(n.state == "cancelled" for n in nodes)
    assert runs_once_settled(mark) < 10  # the cluster stopped the rest
    n = T.slow_marked(str(tmp_path / "one"), 7, 1.0)
    with ds, pytest.raises(TimeoutError, match="the work goes on"):
        n.result(timeout=0.2)
    assert n.result(timeout=30) == 7  # finished by the cluster meanwhile


def test_retries_on_the_cluster_and_each_attempt_in_the_trace(ds, tmp_path):
    with tg.trace() as tr:
        assert tg.compute(T.flaky(str(tmp_path / "count"), 2), scheduler=ds) == 3
    recs = sorted(tr.records, key=lambda r: r.attempt)
    assert [(r.state, r.attempt) for r in recs] == [("retried", 1), ("retried", 2), ("done", 3)]
    assert recs[0].key.endswith("#1") and recs[2].error is None
    with pytest.raises(ValueError, match="flake 3") as ei:
        tg.compute(T.flaky(str(tmp_path / "again"), 5), scheduler=ds)  # retries=2: fails
    assert any("failed 3 times (retries=2)" in n for n in ei.value.__notes__)


def test_what_cannot_be_sent_fails_before_anything_is_submitted(ds, tmp_path):
    mark = tmp_path / "ran"
    lock = threading.Lock()
    first = T.marked(str(mark), 1)
    with pytest.raises(TypeError, match=r"task add-\S+: its argument 1 <unlocked _thread.lock"):
        tg.compute(T.add(first, lock), scheduler=ds)
    assert runs(mark) == 0


# ---------------------------------------------------------------------- serialization
def test_every_task_form_reaches_a_worker_process(ds):
    me = os.getpid()
    k = 10
    forms = {
        "module-level": T.add(1, 2),
        "lambda": tg.task(lambda x: (x + 1, os.getpid()))(1),
        "closure": tg.task(lambda x: (x + k, os.getpid()))(1),
        "partial": tg.task(functools.partial(T.add.fn, 40), name="partial")(2),
        "method": T.Adder(5).plus(1),
    }
    got = tg.compute(forms, scheduler=ds)
    assert got["module-level"] == 3 and got["partial"] == 42
    assert got["lambda"][0] == 2 and got["closure"][0] == 11 and got["method"][0] == 6
    assert {got["lambda"][1], got["closure"][1], got["method"][1]} - {me} == \
        {got["lambda"][1], got["closure"][1], got["method"][1]}


# ---------------------------------------------------------------------- traces
def test_a_cluster_trace_is_read_like_a_local_one(ds, tmp_path):
    with tg.trace() as tr:
        assert tg.compute(T.fib(8), scheduler=ds) == 21
    recs = tr.records
    assert len(recs) == 67  # fib(8) without cutoff: 67 tasks
    assert all(re.fullmatch(r"tcp://127\.0\.0\.1:\d+", r.lane) for r in recs)
    keys = {r.key for r in recs}
    assert sum(r.parent is None for r in recs) == 1 and all(r.parent in keys for r in recs if r.parent)
    assert all(r.start <= r.end and 0 <= r.own <= r.end - r.start for r in recs)
    path = tr.critical_path()  # root to a leaf of fib(8): timing decides which one
    by_key = {r.key: r for r in recs}
    assert by_key[path[0]].parent is None and 5 <= len(path) <= 8
    assert all(by_key[b].parent == a for a, b in zip(path, path[1:]))
    assert not any(r.parent == path[-1] for r in recs)
    assert "tasks on" in tr.summary() and "tcp://127.0.0.1" in tr.summary()
    tr.visualize(tmp_path / "g.dot")
    assert "tcp://127.0.0.1" in (tmp_path / "g.dot").read_text()
    doc = tr.to_chrome_trace(tmp_path / "t.json")
    assert len([e for e in doc["traceEvents"] if e["ph"] == "X"]) == 67
    tr.save(tmp_path / "t.tgtrace")
    r = subprocess.run([sys.executable, "-m", "taskgraph", "stats", str(tmp_path / "t.tgtrace")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "67 tasks" in r.stdout
    assert tg.Trace.load(tmp_path / "t.tgtrace").records == recs


# ---------------------------------------------------------------- the Future protocol
def test_wait_as_completed_await_and_callbacks_on_the_cluster(ds):
    import asyncio
    seen = []
    with ds:
        x = T.add(1, 2)
        x.add_done_callback(lambda n: seen.append(n.state))
        assert seen == []  # adding a callback submits nothing
        done, not_done = tg.wait([x, T.add(x, 1)])
        assert len(done) == 2 and not not_done and x.result() == 3
        quick, slow = T.add(2, 2), T.sleeper(0.3)
        assert [n.result() for n in tg.as_completed([slow, quick])] in ([4, 0.3], [0.3, 4])

        async def main():
            return await asyncio.gather(T.add(5, 5), T.add(6, 6))

        assert asyncio.run(main()) == [10, 12]
        late = T.sleeper(1)
        with pytest.raises(TimeoutError, match="unfinished"):
            list(tg.as_completed([late], timeout=0.05))
        assert late.result() == 1  # not cancelled: the work went on
    for th in threading.enumerate():  # the computes started in the background end with them
        if th.name == "taskgraph-submit":
            th.join(60)
    assert seen == ["done"]


def test_wait_inside_a_task_on_the_cluster_joins(ds):
    assert tg.compute(T.waits_for_kids(4), scheduler=ds) == (True, [0, 2, 4, 6])
