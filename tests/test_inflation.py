"""Work inflation (Trace.inflation, summary(baseline=...)) and the contention hazards named in
summaries (taskgraph.trace.inflation, taskgraph._hazards)."""
import dataclasses
import sys

import pytest

import taskgraph as tg
from taskgraph._hazards import hazard_of

MS = 1_000_000


def trace_of(own_by_name, workers=1, scale=1.0):
    recs, t = [], 0
    for i, (name, own) in enumerate(own_by_name):
        o = int(own * scale)
        recs.append(tg.TaskRecord(key=f"{name}-{i}", name=name, worker=i % workers, scheduler=1,
                                  start=t, end=t + o, own=o, parent=None))
        t += o
    return tg.Trace(recs)


PROGRAM = [("solve", 4 * MS)] * 6 + [("combine", MS)] * 2


def test_inflation_ratio_and_per_name():
    base = trace_of(PROGRAM)
    assert base.inflation(base) == 1.0
    slow = trace_of(PROGRAM, workers=2, scale=2.0)
    assert slow.inflation(base) == pytest.approx(2.0)
    text = slow.summary(baseline=base)
    assert "work inflation 2.00x" in text
    assert "docs/performance.md" in text
    assert text.count("<-") == 2  # both task names flagged
    ok = trace_of(PROGRAM, workers=2, scale=1.1)
    text = ok.summary(baseline=base)
    assert "work inflation 1.10x" in text and "docs/performance.md" not in text


def test_the_flag_links_the_docs_by_url_and_says_what_load_does():
    """A wheel ships no docs/: the flag links the page by URL. A trace recorded on a machine
    with more runnable threads than CPUs says so in the flag (own times are wall-clock); the
    report says the same."""
    base = trace_of(PROGRAM)
    slow = trace_of(PROGRAM, workers=2, scale=2.0)
    text = slow.summary(baseline=base)
    assert "https://github.com/taskgraph-ft/taskgraph/blob/main/docs/performance.md#" in text
    assert "machine was busy" not in text  # the traces do not say: no guess
    slow.meta.update(load=9.1, cpus=2)
    base.meta.update(load=0.4, cpus=2)
    text = slow.summary(baseline=base)
    assert "the machine was busy (this trace at load average 9.1 on 2 CPUs)" in text
    assert "wall-clock" in text and "docs/trace.md#caveat" in text
    from taskgraph.trace import report as _report  # the report's flag: the same words, URLs as links
    page = _report.render(slow, base)
    assert "the machine was busy" in page and '<a href="https://github.com/' in page
    slow.meta.update(load=1.5)  # below the CPU count: nothing to say
    assert "machine was busy" not in slow.summary(baseline=base)


@pytest.mark.thread_unsafe(reason="opens a trace, which records every task of the process")
def test_a_recorded_trace_keeps_the_machines_load(tmp_path):
    @tg.task
    def one():
        return 1

    with tg.trace() as tr:
        assert tg.compute(one(), workers=1) == 1
    assert isinstance(tr.meta["load"], float) and tr.meta["cpus"] >= 1
    tr.save(tmp_path / "t.tgtrace")
    assert tg.Trace.load(tmp_path / "t.tgtrace").meta["load"] == tr.meta["load"]


def test_inflation_per_name_finds_the_slow_function():
    base = trace_of(PROGRAM)
    recs = [dataclasses.replace(r, own=r.own * 3) if r.name == "combine" else r
            for r in trace_of(PROGRAM, workers=2).records]
    text = tg.Trace(recs).summary(baseline=base)
    lines = {ln.split()[0]: ln for ln in text.splitlines() if ln.strip().startswith(("solve", "combine"))}
    assert "3.00x  <-" in lines["combine"] and "<-" not in lines["solve"]


def test_inflation_errors():
    base = trace_of(PROGRAM)
    with pytest.raises(TypeError, match="baseline taskgraph.Trace"):
        base.inflation("run.tgtrace")
    with pytest.raises(ValueError, match="empty trace"):
        tg.Trace().inflation(base)
    with pytest.raises(ValueError, match="empty baseline"):
        base.inflation(tg.Trace())
    with pytest.raises(ValueError, match="not a trace of the same program.*'other'"):
        trace_of([("other", MS)]).inflation(base)
    with pytest.raises(ValueError, match="same program"):
        trace_of([("other", MS)]).summary(baseline=base)
    with pytest.raises(ValueError, match="no work"):
        base.inflation(trace_of([(n, 0) for n, _ in PROGRAM]))


@pytest.mark.thread_unsafe(reason="opens traces, which record every task of the process")
def test_inflation_of_real_and_loaded_traces(tmp_path):
    from helpers import fib
    with tg.trace() as t1:
        tg.compute(fib(15, 8), workers=1)
    with tg.trace() as t2:
        tg.compute(fib(15, 8), workers=2)
    t1.save(tmp_path / "one.tgtrace")
    loaded = tg.Trace.load(tmp_path / "one.tgtrace")
    assert t2.inflation(loaded) == t2.inflation(t1) == t2.work / t1.work
    assert "work inflation" in t2.summary(baseline=loaded)


# ------------------------------------------------------------------ hazards
def module_level(x):
    return x


def test_hazard_of():
    def nested(x):
        return x
    assert hazard_of(module_level) is None
    assert "nested" in hazard_of(nested)
    assert "nested" in hazard_of(lambda x: x)
    ns = {}
    exec("def f(x):\n    return x\n", ns)
    assert "exec()" in hazard_of(ns["f"])
    assert hazard_of(len) is None  # a builtin: nothing to say
    import functools
    assert "nested" in hazard_of(functools.partial(nested, 1))


SCALED = "def scaled(x):\n    return x * 1103515245 + 2.5\n"


@pytest.mark.skipif(tg.gil_enabled(), reason="with the GIL, no reference count is contended")
@pytest.mark.thread_unsafe(reason="while any thread is inside compile(), CPython leaves the "
                           "constants of all code compiled meanwhile mortal (a process-wide flag)")
def test_hazard_of_code_whose_constants_compile_left_mortal():
    # The builtin compile() (what an import does with no valid .pyc) leaves the constants
    # mortal on 3.13t; code the interpreter compiles itself (exec of a string) does not.
    import types
    for how, flagged in (("compile", True), ("string", False)):
        mod = types.ModuleType(f"_tg_hazard_{how}")
        sys.modules[mod.__name__] = mod
        try:
            exec(compile(SCALED, mod.__name__, "exec") if how == "compile" else SCALED,
                 mod.__dict__)
            why = hazard_of(mod.scaled)
        finally:
            del sys.modules[mod.__name__]
        if flagged:
            assert "compile()" in why and "1103515245" in why
        else:
            assert why is None


GLOBALS = """
N = 12
FULL = (1 << N) - 1
TABLE = {"a": 1}

def helper(x):
    return x & FULL

def reads_full(x):
    return x & FULL

def calls_helper(x):
    return helper(x)

def reads_table(k):
    return TABLE[k]

def literal(x):
    return x & 4095

def calls_a_function(x):
    return len(str(x))
"""


@pytest.mark.skipif(tg.gil_enabled(), reason="with the GIL, no reference count is contended")
def test_hazard_of_a_mortal_module_global_read_by_the_task_or_a_function_it_calls():
    import threading
    import types
    # one module per thread: make test-parallel runs this test in several threads at once
    mod = types.ModuleType(f"_tg_hazard_globals_{threading.get_ident()}")
    sys.modules[mod.__name__] = mod
    try:
        exec(GLOBALS, mod.__dict__)
        assert "'FULL'" in hazard_of(mod.reads_full) and "int value" in hazard_of(mod.reads_full)
        assert "'FULL'" in hazard_of(mod.calls_helper)  # one level down
        assert "'TABLE'" in hazard_of(mod.reads_table)
        assert hazard_of(mod.literal) is None
        assert hazard_of(mod.calls_a_function) is None  # builtins and functions are not data
    finally:
        sys.modules.pop(mod.__name__, None)


@pytest.mark.thread_unsafe(reason="opens a trace, which records every task of the process")
def test_summary_names_a_nested_task_once():
    @tg.task(name="nested_leaf_for_summary")
    def leaf(i):
        return i

    @tg.task(name="nested_root_for_summary")
    def root(n):
        return sum(x.result() for x in [leaf(i) for i in range(n)])

    with tg.trace() as tr:
        assert tg.compute(root(50), workers=2) == sum(range(50))
    text = tr.summary()
    assert text.count("nested_leaf_for_summary") == 1
    assert text.count("possible contention") == 1
    assert "test_summary_names_a_nested_task_once.<locals>.leaf" in text


@pytest.mark.thread_unsafe(reason="opens a trace, which records every task of the process")
def test_summary_of_module_level_tasks_names_no_hazard():
    from helpers import fib
    with tg.trace() as tr:
        tg.compute(fib(10, 4), workers=2)
    assert "possible contention" not in tr.summary()
