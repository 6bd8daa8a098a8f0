"""tg.save / tg.load (taskgraph/saving.py): a lazy graph written to a file and built again,
here or in another process; damaged, foreign and other-version files refused before anything
in them is unpickled."""
import hashlib
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import threading

import pytest

import taskgraph as tg
from taskgraph import saving

HERE = pathlib.Path(__file__).resolve().parent
RUNS = []
_lock = threading.Lock()


@tg.task
def add(a, b=0):
    return a + b


@tg.task
def counted(x):
    with _lock:
        RUNS.append(x)
    return x


@tg.task
def total(xs, extra=None):
    return sum(xs) + sum((extra or {}).values())


@tg.task
def fails():
    raise ValueError("boom")


def graph():
    shared = counted(3)
    parts = [add(shared, i) for i in range(4)]
    return total(parts, extra={"a": add(1, b=shared), "b": 10})


@pytest.mark.thread_unsafe(reason="counts calls in a module-level list")
def test_round_trip_keeps_values_shapes_and_sharing(tmp_path):
    RUNS.clear()
    want = tg.compute(graph(), workers=2)
    assert want == (3 + 4 + 5 + 6) + 4 + 10
    RUNS.clear()
    out = graph()
    tg.save(out, tmp_path / "g.tggraph")
    assert out.state == "new" and RUNS == []  # saving runs nothing
    back = tg.load(tmp_path / "g.tggraph")
    assert isinstance(back, tg.Node) and back.state == "new" and back.key != out.key
    assert back.compute(workers=2) == want
    assert RUNS == [3]  # the shared node is one node again


def test_a_list_comes_back_as_a_list_and_finished_nodes_as_values(tmp_path):
    done = add(20, 1)
    assert done.compute(workers=1) == 21
    nodes = [add(done, 1), done, add(2, b=3)]
    tg.save(nodes, tmp_path / "l.tggraph")
    back = tg.load(tmp_path / "l.tggraph")
    assert isinstance(back, list) and len(back) == 3
    assert back[1] == 21  # a finished target is saved as its value
    assert tg.compute(back[0], back[2], workers=1) == (22, 5)


def test_lambdas_and_closures_are_saved_by_value(tmp_path):
    k = 7
    n = tg.task(lambda x: x * k, name="times_k")(add(1, 2))
    tg.save(n, tmp_path / "c.tggraph")
    back = tg.load(tmp_path / "c.tggraph")
    assert back.name == "times_k" and back.compute(workers=1) == 21


def test_a_saved_graph_runs_in_another_process(tmp_path):
    tg.save([graph(), add(40, b=2)], tmp_path / "g.tggraph")
    code = ("import sys, taskgraph as tg; a, b = tg.load(sys.argv[1]); "
            "print(tg.compute(a, b, workers=2))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path))
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "g.tggraph")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(32, 42)"


def test_a_graph_can_be_loaded_and_computed_inside_a_task(tmp_path):
    tg.save(graph(), tmp_path / "g.tggraph")

    @tg.task
    def run_saved(path):
        return tg.load(path).result()  # inside a worker: the loaded nodes are spawned

    assert run_saved(str(tmp_path / "g.tggraph")).compute(workers=2) == 32


# ---------------------------------------------------------------------- what cannot be saved
def test_running_failed_and_non_node_inputs_are_clear_errors(tmp_path):
    bad = fails()
    with pytest.raises(ValueError):
        bad.compute(workers=1)
    with pytest.raises(ValueError, match=f"cannot save node {bad.key}: it is failed"):
        tg.save(add(bad, 1), tmp_path / "f.tggraph")
    with pytest.raises(TypeError, match="tg.save takes a Node or a list of Nodes, got int 3"):
        tg.save([add(1), 3], tmp_path / "x.tggraph")

    gate, started = threading.Event(), threading.Event()

    @tg.task
    def waits():
        started.set()
        gate.wait(30)
        return 1

    with tg.Scheduler(workers=1) as s:
        running = waits()
        t = threading.Thread(target=lambda: s.compute(running))
        t.start()
        try:
            assert started.wait(30)
            with pytest.raises(ValueError, match=f"cannot save node {running.key}: it is running"):
                tg.save(add(running, 1), tmp_path / "r.tggraph")
        finally:
            gate.set()
            t.join(30)
    assert running.result() == 1
    assert not any(tmp_path.iterdir())  # nothing was written


def test_what_cannot_be_pickled_names_the_task_and_the_value(tmp_path):
    lock = threading.Lock()
    n = add(add(1, 2), lock)
    with pytest.raises(TypeError, match=rf"task {n.key}: its argument 1 <unlocked _thread.lock.*cannot be pickled \(the graph was not saved\)"):
        tg.save(n, tmp_path / "u.tggraph")
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------------- damaged files
def _file(tmp_path):
    p = tmp_path / "ok.tggraph"
    tg.save(graph(), p)
    return p, p.read_bytes()


def _poison(marker):
    """A pickle that would create `marker` if it were ever unpickled."""
    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))
    return pickle.dumps(Boom())


def _damaged(tmp_path):
    p, data = _file(tmp_path)
    head = len(saving.MAGIC)
    hsize = struct.calcsize("<HQ32s")
    version, length, digest = struct.unpack("<HQ32s", data[head:head + hsize])
    marker = tmp_path / "ran"
    poison = _poison(marker)
    flipped = bytearray(data)
    flipped[-5] ^= 0xFF
    return marker, {
        "empty": (b"", "not a taskgraph graph file"),
        "foreign (a plain pickle)": (poison, "not a taskgraph graph file"),
        "a trace file": (b"TGTRACE\x00" + data[8:], "not a taskgraph graph file"),
        "header cut": (data[:head + 5], "truncated taskgraph graph file"),
        "payload cut": (data[:-10], "truncated or damaged"),
        "payload flipped": (bytes(flipped), "checksum mismatch"),
        "payload swapped, length kept": (data[:head + hsize] + poison.ljust(length, b"."),
                                         "checksum mismatch"),
        "newer version": (data[:head] + struct.pack("<H", version + 1) + data[head + 2:],
                          f"graph file version {version + 1}; this taskgraph reads version {version}"),
        "valid header, junk payload": (saving.MAGIC + struct.pack("<HQ32s", version, 4,
                                       hashlib.sha256(b"junk").digest()) + b"junk",
                                       "unreadable taskgraph graph file"),
    }


@pytest.mark.parametrize("case", ["empty", "foreign (a plain pickle)", "a trace file", "header cut",
                                  "payload cut", "payload flipped", "payload swapped, length kept",
                                  "newer version", "valid header, junk payload"])
def test_damaged_or_foreign_files_are_refused_without_running_them(tmp_path, case):
    marker, cases = _damaged(tmp_path)
    data, msg = cases[case]
    p = tmp_path / "bad.tggraph"
    p.write_bytes(data)
    with pytest.raises(tg.GraphFileError, match=msg) as ei:
        tg.load(p)
    assert str(p) in str(ei.value)
    assert isinstance(ei.value, ValueError)
    assert not marker.exists()  # nothing in the file was unpickled


def test_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        tg.load(tmp_path / "nope.tggraph")
