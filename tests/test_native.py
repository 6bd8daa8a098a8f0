"""The runtime's one binding of the C core (the C-API extension) and the GIL staying off:
importing taskgraph and everything it does never imports cffi; the GIL warning."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from taskgraph._native import FREE_THREADED_BUILD, core, gil_enabled


def _clean_env():
    """The environment without anything that forces the GIL or turns warnings into errors."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHON_GIL", "PYTHONWARNINGS")}


@pytest.mark.skipif(not FREE_THREADED_BUILD, reason="GIL build: the GIL is always on")
def test_import_leaves_gil_off_in_this_process():
    assert gil_enabled() is False


def test_everything_the_package_does_stays_off_cffi_and_keeps_the_gil_off(tmp_path):
    """In a plain interpreter (no -X flag, no PYTHON_GIL): import, a fork-join compute, a
    traced compute, stats() and a picture leave cffi unimported and, on a free-threaded
    build, the GIL off."""
    code = textwrap.dedent(f"""
        import shutil, sys
        import taskgraph as tg

        @tg.task
        def fib(n):
            if n < 2:
                return n
            a, b = fib(n - 1), fib(n - 2)
            return a.result() + b.result()

        assert tg.compute(fib(12)) == 144
        with tg.Scheduler(2) as s:
            with tg.trace() as tr:
                assert s.compute(fib(10)) == 55
            stats = s.stats()
        assert len(tr.records) > 0 and tr.work > 0
        assert sum(w["tasks_run"] for w in stats) > 0
        if shutil.which("dot"):
            tr.visualize({str(tmp_path / "fib.svg")!r})
        print("cffi imported:", "_cffi_backend" in sys.modules or "cffi" in sys.modules)
        probe = getattr(sys, "_is_gil_enabled", None)
        print("GIL enabled:", None if probe is None else probe())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_clean_env(), timeout=240)
    assert r.returncode == 0, r.stderr
    assert "cffi imported: False" in r.stdout, r.stdout
    if FREE_THREADED_BUILD:
        assert "GIL enabled: False" in r.stdout, r.stdout + r.stderr
    if shutil.which("dot"):
        assert (tmp_path / "fib.svg").stat().st_size > 0


def test_the_cli_and_the_dask_backend_do_not_import_cffi():
    code = ("import sys, taskgraph.cli, taskgraph.dask\n"
            "from taskgraph.dask import get, DaskScheduler\n"
            "print('cffi imported:', '_cffi_backend' in sys.modules or 'cffi' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_clean_env(), timeout=120)
    if "No module named 'dask'" in r.stderr or "No module named 'distributed'" in r.stderr:
        pytest.skip("dask is not installed")
    assert r.returncode == 0, r.stderr
    assert "cffi imported: False" in r.stdout


def test_engine_owns_its_pool_and_reports_counters_after_shutdown():
    e = core.Engine(2, 999, 10, "<test engine>")
    assert e.workers == 2 and not e.is_shutdown and not e.forked
    assert e.stats() == [(0,) * core.NSTATS, (0,) * core.NSTATS]
    assert e.stats(1) == (0,) * core.NSTATS
    assert e.queued() == 0 and e.sleeping() == 0
    e.shutdown()
    e.shutdown()  # idempotent
    assert e.is_shutdown
    assert e.stats(0) == (0,) * core.NSTATS
    with pytest.raises(IndexError, match="workers 0..1"):
        e.stats(2)
    with pytest.raises(ValueError, match="workers must be 1..4096"):
        core.Engine(0, 1, 10, "x")


def test_record_layout_and_clock_come_from_the_extension():
    import struct
    assert struct.calcsize(core.TRACE_REC_FORMAT) == core.TRACE_REC_SIZE
    assert len(core.TRACE_REC_FIELDS) == len(struct.unpack(core.TRACE_REC_FORMAT,
                                                           bytes(core.TRACE_REC_SIZE)))
    t0, n0 = core.clock_origin()
    t1, n1 = core.clock_pair()
    assert t1 >= t0 and n1 >= n0
    assert isinstance(core.clock_tsc(), bool)


def test_gil_on_warns_once_with_the_fix():
    """An interpreter whose GIL is on imports taskgraph with one GILWarning that says how to fix."""
    env = _clean_env()
    code = ("import warnings; warnings.simplefilter('always');\n"
            "import taskgraph, taskgraph._native\n")
    args = [sys.executable] + (["-X", "gil=1"] if FREE_THREADED_BUILD else [])
    r = subprocess.run(args + ["-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(": GILWarning:") == 1, r.stderr
    assert "no parallel speed-up" in r.stderr
    assert "To fix" in r.stderr
    assert "cffi" not in r.stderr and "launcher" not in r.stderr
    # written for pip users: no contributor's command, and the docs by URL (no docs/ in a wheel)
    assert "make setup" not in r.stderr and ".venv" not in r.stderr
    if not FREE_THREADED_BUILD:
        assert "https://" in r.stderr and "python3.13t" in r.stderr


def test_gil_warning_points_at_the_users_import_line(tmp_path):
    """The GILWarning names the user's own import line (its file and line), not a file of
    taskgraph: whichever taskgraph module is imported first."""
    env = _clean_env()
    args = [sys.executable, "-W", "always"] + (["-X", "gil=1"] if FREE_THREADED_BUILD else [])
    for line in ("import taskgraph as tg", "from taskgraph import task", "import taskgraph.cli"):
        script = tmp_path / "mine.py"
        script.write_text(f"import sys\n{line}\n")
        r = subprocess.run(args + [str(script)], capture_output=True, text=True, env=env,
                           timeout=60, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert f"{script}:2: GILWarning:" in r.stderr, (line, r.stderr)
