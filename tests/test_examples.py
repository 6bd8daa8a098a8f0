"""Every file in examples/ runs with small inputs, checks its own answer and says OK."""
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
SMALL = {
    "fib.py": ["--n", "20", "--cutoff", "10", "--workers", "2"],
    "quicksort.py": ["--size", "20000", "--cutoff", "500", "--workers", "2"],
    "pipeline.py": ["--docs", "20", "--words", "200", "--workers", "2"],
}


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(SMALL)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_runs_and_checks_itself(name):
    r = subprocess.run([sys.executable, str(EXAMPLES / name), *SMALL[name]],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
    assert "speed-up" in r.stdout


@pytest.mark.timeout(120)
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
