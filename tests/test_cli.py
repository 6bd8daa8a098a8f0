"""python -m taskgraph show / stats / timeline."""
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

import taskgraph as tg

pytestmark = pytest.mark.timeout(120)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "taskgraph", *map(str, args)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    @tg.task
    def sq(x):
        return x * x

    @tg.task
    def total(xs):
        return sum(xs)

    with tg.trace() as tr:
        tg.compute(total([sq(i) for i in range(20)]), workers=2)
    p = tmp_path_factory.mktemp("cli") / "run.tgtrace"
    tr.save(p)
    return p


@pytest.mark.parametrize("cmd", [[], ["show"], ["stats"], ["timeline"]])
def test_help(cmd):
    r = run_cli(*cmd, "--help")
    assert r.returncode == 0 and "usage:" in r.stdout
    assert r.stdout.startswith("usage: python -m taskgraph")


def test_the_installed_script_calls_itself_taskgraph():
    """`taskgraph --help` (the script pip installs) names itself as the user typed it."""
    script = pathlib.Path(sys.executable).parent / "taskgraph"
    if not script.exists():
        pytest.skip(f"no taskgraph script beside {sys.executable} (taskgraph not pip-installed)")
    for args in (["--help"], ["stats", "--help"]):
        r = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("usage: taskgraph ") and "python -m" not in r.stdout, r.stdout


def test_stats(trace_file):
    r = run_cli("stats", trace_file)
    assert r.returncode == 0, r.stderr
    assert "21 tasks" in r.stdout and "parallelism" in r.stdout and "span" in r.stdout


def test_timeline(trace_file, tmp_path):
    out = tmp_path / "t.json"
    r = run_cli("timeline", trace_file, "-o", out)
    assert r.returncode == 0, r.stderr
    assert len([e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]) == 21


def test_show_dot_and_svg(trace_file, tmp_path):
    r = run_cli("show", trace_file, "-o", tmp_path / "g.dot")
    assert r.returncode == 0, r.stderr
    assert "digraph" in (tmp_path / "g.dot").read_text()
    r = run_cli("show", trace_file, "-o", tmp_path / "g.svg", "--all")
    if shutil.which("dot"):  # `make setup` installs Graphviz where it can
        assert r.returncode == 0, r.stderr
        assert "<svg" in (tmp_path / "g.svg").read_text() and "wrote" in r.stdout
    else:  # no dot on this machine: exit status 3, the source written, how to install said
        assert r.returncode == 3, r.stderr
        assert (tmp_path / "g.dot").exists() and "Graphviz" in r.stderr


@pytest.mark.parametrize("content", [b"", b"not a trace", b"\x82\xa6format"])
def test_bad_or_truncated_file_is_a_one_line_error(tmp_path, content):
    p = tmp_path / "bad.tgtrace"
    p.write_bytes(content)
    for cmd in (["stats", p], ["show", p, "-o", tmp_path / "x.svg"], ["timeline", p, "-o", tmp_path / "x.json"]):
        r = run_cli(*cmd)
        assert r.returncode == 2, r
        assert "taskgraph: error:" in r.stderr and "Traceback" not in r.stderr


def test_missing_file_is_a_one_line_error(tmp_path):
    r = run_cli("stats", tmp_path / "nope.tgtrace")
    assert r.returncode == 2
    assert "cannot read trace" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("cmd", ["stats", "show", "timeline"])
def test_a_chrome_trace_is_named_and_the_trace_file_suggested(trace_file, tmp_path, cmd):
    """The usual mistake: the timeline JSON that write_trace_files writes beside the trace."""
    tr = tg.Trace.load(trace_file)
    paths = tg.write_trace_files(tr, str(tmp_path / "run"), quiet=True)
    json_path = next(p for p in paths if str(p).endswith(".json"))
    extra = ["-o", tmp_path / "out.svg"] if cmd == "show" else (
        ["-o", tmp_path / "out.json"] if cmd == "timeline" else [])
    r = run_cli(cmd, json_path, *extra)
    assert r.returncode == 2
    assert "Chrome/Perfetto trace-event JSON" in r.stderr
    assert f"pass {tmp_path / 'run.tgtrace'} instead" in r.stderr and "ui.perfetto.dev" in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.startswith("taskgraph: error:")]) == 1


def test_a_chrome_trace_alone_suggests_no_file_that_does_not_exist(trace_file, tmp_path):
    """Without the .tgtrace beside it, the message says how to write one, naming no file that
    does not exist."""
    json_path = tmp_path / "timeline.json"
    tg.Trace.load(trace_file).to_chrome_trace(json_path)
    r = run_cli("stats", json_path)
    assert r.returncode == 2 and "Chrome/Perfetto trace-event JSON" in r.stderr
    assert "there is no timeline.tgtrace beside it" in r.stderr and "tr.save(" in r.stderr
    assert "pass " not in r.stderr


def test_other_json_is_still_just_not_a_trace(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"a": 1}))
    r = run_cli("stats", p)
    assert r.returncode == 2 and "not a taskgraph trace" in r.stderr
    assert "Chrome" not in r.stderr
