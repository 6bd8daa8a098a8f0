"""Every file in examples/: its results checked against answers computed here, and its
command line run once with small inputs."""
import collections
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

from helpers import fib_calls

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
SMALL = {
    "fib.py": ["--n", "20", "--cutoff", "10", "--workers", "2"],
    "quicksort.py": ["--size", "20000", "--cutoff", "500", "--workers", "2", "--boxed"],
    "pipeline.py": ["--docs", "20", "--words", "200", "--workers", "2"],
    "dashboard.py": ["--seconds", "0.5", "--workers", "2"],
}

pytestmark = pytest.mark.timeout(120)


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}", EXAMPLES / name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(SMALL)


@pytest.mark.parametrize("workers", [1, 2])
def test_fib_result(workers):
    r = load("fib.py").run(n=20, cutoff=8, workers=workers)
    assert r["value"] == 6765 and r["expected"] == 6765
    assert r["tasks"] == fib_calls(20, 8)
    assert r["speedup"] > 0


@pytest.mark.parametrize("workers", [1, 2])
def test_quicksort_result(workers):
    qs = load("quicksort.py")
    r = qs.run(size=30_000, cutoff=1000, workers=workers, seed=7, boxed=True)
    want = sorted(r["input"])
    assert list(r["value"]) == want and list(r["serial"]) == want
    assert r["boxed"] == want and r["boxed_serial"] == want
    assert len(want) == 30_000 and r["tasks"] > 1


def test_pipeline_result():
    pl = load("pipeline.py")
    r = pl.run(docs=12, words=300, workers=2)
    counts = collections.Counter()
    for seed in range(12):
        counts.update(pl.make_doc(seed, 300).split())
    assert r["counts"] == counts and sum(r["counts"].values()) == 12 * 300
    assert r["top"] == counts.most_common(10)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_command_line(name):
    r = subprocess.run([sys.executable, str(EXAMPLES / name), *SMALL[name]],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " OK " in r.stdout
    speedups = re.findall(r"speed-up (\d+\.\d\d)x", r.stdout)
    assert speedups and all(float(s) > 0 for s in speedups)


def test_demo_trace_option_writes_graph_timeline_and_trace(tmp_path):
    prefix = tmp_path / "demo" / "fib"
    r = subprocess.run([sys.executable, str(EXAMPLES / "fib.py"), *SMALL["fib.py"],
                        "--trace", str(prefix)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "parallelism" in r.stdout
    assert (tmp_path / "demo" / "fib.tgtrace").exists()
    assert (tmp_path / "demo" / "fib.json").exists()
    # the picture, or its .dot source when Graphviz is missing
    assert (tmp_path / "demo" / "fib.svg").exists() or (tmp_path / "demo" / "fib.dot").exists()


@pytest.mark.thread_unsafe(reason="the example opens a trace block, which cannot overlap another")
def test_dashboard_example_runs_its_workload_with_the_dashboard_open():
    r = load("dashboard.py").run(seconds=0.3, workers=2, quiet=True)
    assert r["traced"] == fib_calls(22, 15) and r["url"].startswith("http://127.0.0.1:")
    assert r["batches"] + r["failed"] >= 1
