"""The one task runner (csrc/py/rules.c) as another backend reaches it: core._run_task with a
backend object (the dask worker side uses it so). The native worker loop runs the same C code
(tests/test_worker.py, test_faults.py check its behaviour there)."""
import pytest

import taskgraph as tg
from helpers import run_script
from taskgraph._native import core


@tg.task(retries=2, retry_on=ValueError)
def flaky():
    return 0


@tg.task
def plain():
    return 0


class Backend:
    """Records what the runner asks; sync returns `kids`."""

    def __init__(self, kids=(), sync_error=None):
        self.kids = list(kids)
        self.sync_error = sync_error
        self.syncs = []
        self.retries = []

    def sync(self, failing):
        self.syncs.append(failing)
        if self.sync_error is not None:
            raise self.sync_error
        return self.kids

    def retrying(self, exc, attempt):
        self.retries.append((type(exc).__name__, attempt))


def calls(*outcomes):
    """A function that returns or raises the next outcome at each call."""
    it = iter(outcomes)

    def call():
        o = next(it)
        if isinstance(o, BaseException):
            raise o
        return o
    return call


def failed_node(exc):
    """A finished, failed node whose failure nobody has read."""
    n = plain()
    assert core._claim(n)
    core._settle(n, tg.State.FAILED, exc)
    return n


def test_a_failure_is_retried_per_the_tasks_policy_and_each_call_is_synced():
    b = Backend()
    e1, e2 = ValueError("one"), ValueError("two")
    assert core._run_task(flaky, calls(e1, e2, 7), b, "k-1", "on here") == 7
    assert b.retries == [("ValueError", 0), ("ValueError", 1)]
    assert b.syncs == [e1, e2, None]  # each call's sync is told whether the task is failing


def test_the_last_failure_names_the_task_where_it_ran_and_how_often_it_failed():
    b = Backend()
    with pytest.raises(ValueError, match="three") as ei:
        core._run_task(flaky, calls(ValueError("one"), ValueError("two"), ValueError("three")),
                       b, "k-2", "on dask worker tcp://h:1")
    notes = ei.value.__notes__
    assert "taskgraph: raised by task k-2 on dask worker tcp://h:1" in notes
    assert "taskgraph: task k-2 failed 3 times (retries=2)" in notes
    assert len(b.retries) == 2


def test_errors_outside_retry_on_and_tasks_without_retries_run_once():
    b = Backend()
    with pytest.raises(KeyError):
        core._run_task(flaky, calls(KeyError("x")), b, "k-3", "here")
    with pytest.raises(ValueError):
        core._run_task(plain, calls(ValueError("x")), b, "k-4", "here")
    with pytest.raises(tg.CancelledError):  # never retried: running again cannot help
        core._run_task(flaky, calls(tg.CancelledError("c")), b, "k-5", "here")
    assert b.retries == [] and len(b.syncs) == 3


def test_an_unread_child_failure_fails_the_task_and_later_ones_become_notes():
    first, second = failed_node(KeyError("first")), failed_node(OSError("second"))
    read = failed_node(ValueError("read"))
    read.exception()  # read: no longer anyone's to report
    b = Backend(kids=[read, first, second])
    with pytest.raises(KeyError, match="first") as ei:
        core._run_task(plain, calls(1), b, "parent-1", "here")
    assert core._seen(first)  # reported: it counts as read
    assert any(n.startswith(f"taskgraph: task parent-1 also had child task {second.key} fail, "
                            "unobserved: OSError") for n in ei.value.__notes__)
    assert not any("read" in n for n in ei.value.__notes__)


def test_child_failures_become_notes_on_a_task_that_failed_itself():
    kid = failed_node(OSError("kid"))
    b = Backend(kids=[kid])
    with pytest.raises(ValueError, match="own") as ei:
        core._run_task(plain, calls(ValueError("own")), b, "parent-2", "here")
    assert any(f"child task {kid.key} fail" in n for n in ei.value.__notes__)


def test_a_failing_sync_fails_the_task_with_its_error():
    b = Backend(sync_error=RuntimeError("sync broke"))
    with pytest.raises(RuntimeError, match="sync broke"):
        core._run_task(plain, calls(1), b, "k-6", "here")
    b = Backend(sync_error=RuntimeError("sync broke"))  # the task's own error wins
    with pytest.raises(ValueError, match="own"):
        core._run_task(plain, calls(ValueError("own")), b, "k-7", "here")


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError):
        core._run_task(lambda: 0, calls(1), Backend(), "k", "here")  # not a Task
    with pytest.raises(TypeError, match="sequence of Nodes"):
        class NoSeq(Backend):
            def sync(self, failing):
                return 3
        core._run_task(plain, calls(1), NoSeq(), "k", "here")


def test_the_words_of_a_node_that_never_ran():
    assert core._dependency_reason("a-1", tg.State.FAILED) == "its dependency a-1 failed"
    assert core._dependency_reason("a-1", tg.State.CANCELLED) == "its dependency a-1 was cancelled"
    cause = ValueError("x")
    err = core._cancelled_error("b-2", "its dependency a-1 failed", cause)
    assert isinstance(err, tg.CancelledError) and err.__cause__ is cause
    assert str(err) == "task b-2 was cancelled: its dependency a-1 failed"  # not a task's failure
    cause.__taskgraph_task__ = "a-1"  # raised by task a-1 (the mark of tg_note_origin)
    err = core._cancelled_error("b-2", "its dependency a-1 failed", cause)
    assert str(err) == "task b-2 was cancelled: its dependency a-1 failed (ValueError: x)"
    # Two levels down: the reason names the cancelled dependency, the words the failure.
    top = core._cancelled_error("c-3", "its dependency b-2 was cancelled", err)
    assert str(top) == ("task c-3 was cancelled: its dependency b-2 was cancelled; the first "
                        "failure: task a-1 raised ValueError: x")
    assert top.__cause__ is err and err.__cause__ is cause

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no str")
    bad = Unprintable()
    bad.__taskgraph_task__ = "a-1"
    assert str(core._cancelled_error("b-2", "its dependency a-1 failed", bad)) == \
        "task b-2 was cancelled: its dependency a-1 failed"  # the words left out, no error
    long = ValueError("y" * 1000)
    long.__taskgraph_task__ = "a-1"
    assert len(str(core._cancelled_error("b-2", "r", long))) < 400


def test_every_node_of_a_failed_dag_names_the_first_failure_in_its_message():
    """After a failing DAG, a node whose dependency was cancelled (not failed) says which task
    failed first and how, in its own message: the failure is several __cause__ levels down."""
    @tg.task
    def load(i):
        if i == 7:
            raise ValueError(f"bad row {i}")
        return i

    @tg.task
    def transform(x):
        return x * 2

    @tg.task
    def total(xs):
        return sum(xs)

    for workers in (1, 2):
        loads = [load(i) for i in range(20)]
        out = total([transform(x) for x in loads])
        with pytest.raises(ValueError, match="bad row 7"):
            tg.compute(out, workers=workers)
        with pytest.raises(tg.CancelledError) as ei:
            out.result()
        msg = str(ei.value)
        assert msg.startswith(f"task {out.key} was cancelled: "), msg
        assert loads[7].key in msg and "ValueError: bad row 7" in msg, msg
        # the dependency that was cancelled, two levels down from the failure, says it too
        mid = transform(loads[7])
        with pytest.raises(tg.CancelledError, match=rf"its dependency {loads[7].key} failed "
                           r"\(ValueError: bad row 7\)$"):
            mid.result()
        top = total([mid])
        with pytest.raises(tg.CancelledError, match=rf"its dependency {mid.key} was cancelled; "
                           rf"the first failure: task {loads[7].key} raised ValueError: bad row 7$"):
            top.result()


def test_a_task_called_by_the_note_on_a_failing_task_is_never_an_orphan():
    # Review 2: the runner wrote the "raised by task" note (exc.add_note) after the task's
    # sync with the task still current on the worker, so a task called by add_note was spawned
    # into it unsynced: freed by the collector unretired (node_dealloc's fatal error) or run
    # after its run ended (a use-after-free). The notes are written as no task now (the class
    # of it: tests/test_no_task.py). In a process of its own: a crash fails only this test.
    r = run_script("""
        import gc, taskgraph as tg

        @tg.task
        def noop():
            return 1

        class Evil(Exception):
            def add_note(self, note):
                noop()
                return super().add_note(note)

        @tg.task
        def child():
            raise Evil("x")

        @tg.task
        def parent():
            c = child()
            try:
                c.result()
            except Evil:
                pass
            del c
            gc.collect()
            return 1

        for workers in (1, 2):
            with tg.Scheduler(workers=workers) as s:
                for _ in range(20):
                    assert s.compute(parent()) == 1
        print("ok")
        """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
