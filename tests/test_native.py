"""The two faces of the C core: the cffi binding (deque checks, constants from C), and the GIL
staying off."""
import os
import subprocess
import sys
import threading

import pytest

import taskgraph
from taskgraph._native import FREE_THREADED_BUILD, core, ffi, gil_enabled, lib


def test_deque_binding_lifo_fifo_and_status_values():
    d = lib.tg_deque_new(2)
    out = ffi.new("uint64_t *")
    try:
        assert lib.tg_deque_pop(d, out) == core.STEAL_EMPTY
        assert lib.tg_deque_steal(d, out) == core.STEAL_EMPTY
        for i in range(1, 11):
            assert lib.tg_deque_push(d, i) == 0
        assert lib.tg_deque_size(d) == 10
        assert lib.tg_deque_capacity(d) >= 10
        assert lib.tg_deque_steal(d, out) == core.STEAL_OK and out[0] == 1
        assert lib.tg_deque_pop(d, out) == core.STEAL_OK and out[0] == 10
        assert {core.STEAL_OK, core.STEAL_EMPTY, core.STEAL_RETRY} == {0, 1, 2}
    finally:
        lib.tg_deque_free(d)


@pytest.mark.parametrize("n", [1, 13, 4000, 60000])
def test_conservation_two_threads(n):
    """Owner pushes and pops at random while a thief steals: each item is taken exactly once."""
    import random

    d = lib.tg_deque_new(2)
    stop = threading.Event()
    stolen = []

    def thief():
        out = ffi.new("uint64_t *")
        mine = []
        while True:
            s = lib.tg_deque_steal(d, out)
            if s == core.STEAL_OK:
                mine.append(out[0])
            elif s == core.STEAL_EMPTY and stop.is_set():
                break
        stolen.extend(mine)

    th = threading.Thread(target=thief)
    th.start()
    rnd = random.Random(n)
    out = ffi.new("uint64_t *")
    popped = []
    for i in range(1, n + 1):
        lib.tg_deque_push(d, i)
        if rnd.random() < 0.4 and lib.tg_deque_pop(d, out) == core.STEAL_OK:
            popped.append(out[0])
    while lib.tg_deque_pop(d, out) == core.STEAL_OK:
        popped.append(out[0])
    stop.set()
    th.join(timeout=60)
    assert not th.is_alive()
    lib.tg_deque_free(d)
    taken = popped + stolen
    assert len(taken) == n
    assert sorted(taken) == list(range(1, n + 1))
    assert stolen == sorted(stolen)  # a thief sees items in FIFO order


@pytest.mark.skipif(not FREE_THREADED_BUILD, reason="GIL build: the GIL is always on")
def test_import_leaves_gil_off_in_this_process():
    assert gil_enabled() is False


@pytest.mark.skipif(not FREE_THREADED_BUILD, reason="GIL build: the GIL is always on")
def test_import_leaves_gil_off_with_clean_environment():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON_GIL", "PYTHONWARNINGS")}
    r = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c",
         "import taskgraph, sys; print(sys._is_gil_enabled())"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_gil_on_warns_once_with_the_fix():
    """An interpreter whose GIL is on imports taskgraph with one GILWarning that says how to fix."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    code = ("import warnings; warnings.simplefilter('always');\n"
            "import taskgraph, taskgraph._native\n")
    args = [sys.executable]
    if FREE_THREADED_BUILD:
        # The venv's launcher forces -X gil=0; run the base interpreter with the GIL forced on,
        # importing taskgraph from this source tree.
        args = [sys._base_executable, "-X", "gil=1"]
        import site
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.dirname(os.path.dirname(taskgraph.__file__))] + site.getsitepackages())
    r = subprocess.run(args + ["-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(": GILWarning:") == 1, r.stderr
    assert "no parallel speed-up" in r.stderr
    assert "To fix" in r.stderr
