"""taskgraph.Executor at interpreter exit, as ThreadPoolExecutor behaves: pending work
finishes, submit() in an atexit handler raises RuntimeError, nothing hangs. These are the
checks of CPython's ExecutorShutdownTest that start a subprocess naming the executor
(skipped in tests/test_executor_cpython.py), written for taskgraph.Executor."""
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.thread_unsafe(reason="starts interpreters: slow enough once")]

PRELUDE = """
import sys, time, warnings
warnings.simplefilter("ignore")  # the GIL build's GILWarning
import taskgraph as tg

def sleep_and_print(t, msg):
    time.sleep(t)
    print(msg)
    sys.stdout.flush()
"""


def run(body):
    """Runs PRELUDE + body in a fresh interpreter: (returncode, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                       capture_output=True, text=True, timeout=100)
    return p.returncode, p.stdout.strip(), p.stderr


def test_pending_work_finishes_at_exit():
    rc, out, err = run("""
        t = tg.Executor(5)
        t.submit(sleep_and_print, 0.5, "apple")
        """)
    assert (rc, out, err) == (0, "apple", "")


def test_queued_work_finishes_at_exit_too():
    rc, out, err = run("""
        t = tg.Executor(1)
        for i in range(3):
            t.submit(sleep_and_print, 0.1, f"item {i}")
        """)
    # (in some order: a worker takes a batch of injected calls and runs the last first)
    assert (rc, sorted(out.splitlines()), err) == (0, ["item 0", "item 1", "item 2"], "")


def test_submit_after_interpreter_shutdown_raises():
    rc, out, err = run("""
        import atexit
        @atexit.register
        def run_last():
            try:
                t.submit(id, None)
            except RuntimeError:
                print("runtime-error")
                raise
        t = tg.Executor(5)
        t.submit(id, 42).result()
        """)
    assert out == "runtime-error"
    assert "RuntimeError: cannot schedule new futures after interpreter shutdown" in err


def test_shutdown_without_waiting_does_not_hang_at_exit():
    rc, out, err = run("""
        t = tg.Executor(max_workers=3)
        t.submit(sleep_and_print, 0.5, "apple")
        t.shutdown(wait=False)
        """)
    assert (rc, out, err) == (0, "apple", "")


def test_shutdown_without_waiting_cancelling_futures_at_exit():
    rc, out, err = run("""
        t = tg.Executor()
        t.submit(sleep_and_print, 0.1, "apple")
        t.shutdown(wait=False, cancel_futures=True)
        """)
    assert rc == 0 and err == "" and out in ("apple", "")


def test_a_dropped_executor_and_nested_work_finish_at_exit():
    rc, out, err = run("""
        def outer():
            ex.submit(sleep_and_print, 0.3, "inner")
            return "outer"
        ex = tg.Executor(2)
        print(ex.submit(outer).result())
        del ex
        """)
    assert (rc, out.splitlines(), err) == (0, ["outer", "inner"], "")


def test_in_a_forked_child_the_parents_executor_takes_no_work():
    rc, out, err = run("""
        import os
        t = tg.Executor(2)
        t.submit(id, 1).result()
        pid = os.fork()
        if pid == 0:
            try:
                t.submit(id, 2)
            except RuntimeError as e:
                print("child:", e)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent:", t.submit(abs, -3).result())
        """)
    assert rc == 0, err
    child, parent = out.splitlines()
    assert child.startswith("child: cannot schedule new futures: <taskgraph.Executor")
    assert "was made before fork()" in child
    assert parent == "parent: 3"
