"""What users already have keeps working: the public import paths (every one listed here, and
every dotted name the docs use), the command, and the graph and trace files an earlier version
wrote (tests/data/, written as tests/saved_tasks.py says)."""
import collections
import importlib
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

import taskgraph as tg
import saved_tasks

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
HAVE_DISTRIBUTED = importlib.util.find_spec("distributed") is not None

# Every public import path, as users write it. `taskgraph.__all__` is checked on its own
# (test_every_name_of_all_imports_from_taskgraph): this list holds the module paths.
PUBLIC_IMPORTS = {
    "taskgraph.task": ["Task", "task", "cancelled"],
    "taskgraph.compute": ["compute", "gather"],
    "taskgraph.scheduler": ["Scheduler", "default_scheduler", "current_scheduler",
                            "use_scheduler", "usable_cpus"],
    "taskgraph.serial": ["serial"],
    "taskgraph.saving": ["save", "load", "GraphFileError", "FORMAT_VERSION"],
    "taskgraph.errors": ["CancelledError", "SchedulerClosedError", "TaskgraphError",
                         "BrokenSchedulerError"],
    "taskgraph.executor": ["Executor", "Future"],
    "taskgraph.trace": ["Trace", "TaskRecord", "TraceFormatError", "trace",
                        "write_trace_files"],
    "taskgraph.dask": ["get", "DaskScheduler"],
    "taskgraph.cli": ["main"],
}


def test_every_name_of_all_imports_from_taskgraph():
    assert len(tg.__all__) >= 35, tg.__all__
    for name in tg.__all__:
        ns = {}
        exec(f"from taskgraph import {name}", ns)
        assert ns[name] is getattr(tg, name)


@pytest.mark.parametrize("module", sorted(PUBLIC_IMPORTS))
def test_every_public_module_path_imports_its_names(module):
    if module == "taskgraph.dask" and not HAVE_DISTRIBUTED and not os.environ.get("TASKGRAPH_REQUIRE_DASK"):
        pytest.skip("the dask extra is not installed (make setup installs it)")
    names = PUBLIC_IMPORTS[module]
    ns = {}
    exec(f"import {module}\nfrom {module} import {', '.join(names)}", ns)
    for n in names:
        assert ns[n] is not None, (module, n)


def test_the_public_names_are_the_same_objects_on_every_path():
    from taskgraph.dask import get
    from taskgraph.executor import Executor, Future
    from taskgraph.trace import Trace, TaskRecord, trace
    import taskgraph.dask
    assert tg.Executor is Executor and tg.Trace is Trace and tg.TaskRecord is TaskRecord
    assert tg.trace is trace and callable(tg.trace)  # tg.trace is the function, not the module
    assert taskgraph.dask.get is get and issubclass(Future, __import__("concurrent.futures").futures.Future)


def resolve(dotted):
    """What `import taskgraph; taskgraph.a.b` gives for 'taskgraph.a.b' (or 'tg.a.b'): the
    attribute, or else the submodule (as after `import taskgraph.a`)."""
    parts = dotted.split(".")
    obj, path = tg, "taskgraph"
    for part in parts[1:]:
        path += "." + part
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(path)
    return obj


def doc_names():
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    names = set()
    for p in pages:
        names |= set(re.findall(r"\b(?:taskgraph|tg)\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", p.read_text()))
    return sorted(names)


def test_every_dotted_name_the_docs_use_resolves():
    names = doc_names()
    assert "taskgraph.dask.get" in names and "taskgraph.executor.Future" in names, names
    wrong = []
    for name in names:
        if "DaskScheduler" in name and not HAVE_DISTRIBUTED:
            continue
        try:
            resolve(name)
        except (AttributeError, ImportError) as e:
            wrong.append(f"{name}: {type(e).__name__}: {e}")
    assert not wrong, "\n".join(wrong)


def test_the_command_and_python_m_taskgraph():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"taskgraph": "taskgraph.cli:main"}
    module, _, fn = scripts["taskgraph"].partition(":")
    assert callable(getattr(importlib.import_module(module), fn))
    p = subprocess.run([sys.executable, "-m", "taskgraph", "stats", DATA / saved_tasks.TRACE_FILE],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "tasks" in p.stdout, (p.stdout, p.stderr)


# ------------------------------------------------------------------ files of an earlier version
def test_a_graph_file_of_an_earlier_version_loads_and_runs():
    nodes = tg.load(DATA / saved_tasks.GRAPH_FILE)
    assert [n.name for n in nodes[:2]] == ["total", "plus"] and nodes[2] == 101
    assert all(n.state == "new" for n in nodes[:2])
    assert {d.name for d in nodes[0].dependencies} == {"add", "scaled", "mul", "plus"}
    assert tg.compute(nodes) == saved_tasks.GRAPH_RESULTS


def test_a_trace_file_of_an_earlier_version_loads_with_its_records(tmp_path):
    tr = tg.Trace.load(DATA / saved_tasks.TRACE_FILE)
    assert collections.Counter(r.name for r in tr.records) == {
        "spawner": 1, "add": 6, "flaky": 2, "boom": 1}
    by_key = {r.key: r for r in tr.records}
    (spawner,) = [r for r in tr.records if r.name == "spawner"]
    assert sum(r.parent == spawner.key for r in tr.records) == 4
    assert [r.state for r in tr.records if r.name == "flaky"] == ["retried", "done"]
    assert [r.attempt for r in tr.records if r.name == "flaky"] == [1, 2]
    (boom,) = [r for r in tr.records if r.name == "boom"]
    assert (boom.state, boom.error_type, boom.error) == ("failed", "ValueError", "boom")
    assert any(r.deps and by_key[r.deps[0]].name == "add" for r in tr.records if r.name == "add")
    assert all(isinstance(r, tg.TaskRecord) for r in tr.records)
    # What is made from a trace works on it: the summary, the critical path, the files.
    assert "tasks" in tr.summary() and tr.critical_path()
    assert tr.work > 0 and tr.span > 0
    page = tr.report(tmp_path / "report.html")
    assert pathlib.Path(page).read_text().startswith("<!DOCTYPE html>")
    tr.to_chrome_trace(tmp_path / "t.json")
    tr.save(tmp_path / "again.tgtrace")
    assert [r.key for r in tg.Trace.load(tmp_path / "again.tgtrace").records] == list(by_key)
