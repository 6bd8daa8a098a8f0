"""taskgraph.Executor's lifecycle against ThreadPoolExecutor's: the same scenarios run on both,
and each must give the same observable outcome (what the user's code sees: results,
exceptions and their types, cancelled futures, whether a call returns at all).

The scenarios are the ones that depend on the lifecycle rather than on the work: shutdown from
a done callback, from inside a call, from another thread, from the callback of a call that
shutdown(cancel_futures=True) cancelled, in a child process after fork(); an initializer that
fails, one that blocks, one that waits for a lazy node; unread failures inside a call;
cancel_futures; submit racing shutdown. Nothing here measures time: a hang is a wait on an
event or a thread that does not end within a generous limit (HANG).
"""
import concurrent.futures as cf
import logging
import os
import re
import subprocess
import sys
import threading
import time

import pytest

import taskgraph as tg

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.thread_unsafe(reason="executors that shut themselves down, forks, "
                                        "and the concurrent.futures logger")]

HANG = 60.0  # seconds: what never returning looks like here
EXECUTORS = {"ThreadPoolExecutor": cf.ThreadPoolExecutor, "taskgraph.Executor": tg.Executor}


def same_on_both(scenario, *args):
    """The scenario's outcome on each executor; asserts they are equal, returns it."""
    outcomes = {name: scenario(cls, *args) for name, cls in EXECUTORS.items()}
    tpe, ours = outcomes["ThreadPoolExecutor"], outcomes["taskgraph.Executor"]
    assert ours == tpe, f"ThreadPoolExecutor: {tpe}\ntaskgraph.Executor: {ours}"
    return ours


def ends(fn, *args):
    """Runs fn(*args) on a thread: what it returned or raised (its type's name), or "HANG"."""
    out = []

    def run():
        try:
            out.append(("returned", fn(*args)))
        except BaseException as e:  # noqa: BLE001 - the outcome
            out.append(("raised", type(e).__name__))

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(HANG)
    return out[0] if out else "HANG"


def raised(fn, *args):
    """The name of the exception fn(*args) raised, or "returned"."""
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - the outcome
        return type(e).__name__
    return "returned"


def on_own_thread(prefix="pool"):
    return threading.current_thread().name.startswith(prefix + "_")


# ---------------------------------------------------------------------- shutdown
def shutdown_from_done_callback(cls):
    ex = cls(max_workers=2, thread_name_prefix="pool")
    seen = {}
    done = threading.Event()

    def callback(fut):
        seen["own thread"] = on_own_thread()
        seen["shutdown there"] = raised(ex.shutdown)
        done.set()

    gate = threading.Event()  # the call ends after the callback is added (else it runs here)
    ex.submit(gate.wait, HANG).add_done_callback(callback)
    gate.set()
    assert done.wait(HANG), "HANG: the callback never ran or its shutdown never returned"
    return (seen, raised(ex.submit, abs, 1), ends(ex.shutdown))


def test_shutdown_from_a_done_callback_on_a_worker_raises_runtime_error():
    assert same_on_both(shutdown_from_done_callback) == (
        {"own thread": True, "shutdown there": "RuntimeError"}, "RuntimeError",
        ("returned", None))


def shutdown_inside_a_call(cls):
    ex = cls(max_workers=2, thread_name_prefix="pool")
    f = ex.submit(ex.shutdown)
    inside = type(f.exception(timeout=HANG)).__name__
    return inside, raised(ex.submit, abs, 1), ends(ex.shutdown)


def test_shutdown_inside_a_call_raises_runtime_error_there():
    assert same_on_both(shutdown_inside_a_call) == (
        "RuntimeError", "RuntimeError", ("returned", None))


def shutdown_from_another_thread(cls):
    ex = cls(max_workers=2)
    gate = threading.Event()
    fs = [ex.submit(gate.wait, HANG)] + [ex.submit(pow, 2, i) for i in range(20)]
    closer = threading.Thread(target=ex.shutdown)  # wait=True: waits for the gate
    closer.start()
    deadline = time.monotonic() + HANG
    while raised(ex.submit, abs, 1) != "RuntimeError" and time.monotonic() < deadline:
        time.sleep(0.001)  # until the other thread's shutdown has begun
    refused = raised(ex.submit, abs, 1)
    gate.set()
    closer.join(HANG)
    return refused, closer.is_alive(), [f.result(timeout=HANG) for f in fs]


def test_shutdown_from_another_thread_waits_for_every_call_and_refuses_new_ones():
    assert same_on_both(shutdown_from_another_thread) == (
        "RuntimeError", False, [True] + [2 ** i for i in range(20)])


def shutdown_in_callback_of_cancelled_call(cls):
    """ThreadPoolExecutor runs a cancelled future's callbacks on the thread that cancels (its
    shutdown); taskgraph.Executor on the worker that passes the call by. Either way the
    callback runs once, its shutdown() (called where it is safe: on a worker) does not hang,
    and neither does the next one."""
    ex = cls(max_workers=1, thread_name_prefix="pool")
    started = threading.Event()
    release = threading.Event()
    ex.submit(lambda: (started.set(), release.wait(HANG)))
    assert started.wait(HANG)
    queued = ex.submit(abs, -1)
    seen = []

    def callback(fut):
        seen.append(fut.cancelled())
        if on_own_thread():  # on a worker: RuntimeError, after taking no more work
            seen.append(raised(ex.shutdown))
        else:  # ThreadPoolExecutor: inside its shutdown (a non-reentrant lock held)
            seen.append("RuntimeError")
    queued.add_done_callback(callback)
    ex.shutdown(wait=False, cancel_futures=True)
    release.set()
    return ends(ex.shutdown), queued.cancelled(), seen


def test_shutdown_from_the_callback_of_a_call_cancel_futures_cancelled_never_hangs():
    assert same_on_both(shutdown_in_callback_of_cancelled_call) == (
        ("returned", None), True, [True, "RuntimeError"])


def cancel_futures(cls):
    ex = cls(max_workers=1)
    started = threading.Event()
    release = threading.Event()
    first = ex.submit(lambda: (started.set(), release.wait(HANG))[1])
    assert started.wait(HANG)
    rest = [ex.submit(abs, -i) for i in range(10)]
    ex.shutdown(wait=False, cancel_futures=True)
    release.set()
    ex.shutdown()
    return first.result(), [f.cancelled() for f in rest], raised(ex.submit, abs, 1)


def test_cancel_futures_cancels_what_has_not_started_and_the_running_call_finishes():
    assert same_on_both(cancel_futures) == (True, [True] * 10, "RuntimeError")


FORK = """
import os, sys, threading, time, warnings
warnings.simplefilter("ignore")
import concurrent.futures as cf
import taskgraph as tg
cls = {"ThreadPoolExecutor": cf.ThreadPoolExecutor, "taskgraph.Executor": tg.Executor}[sys.argv[1]]
ex = cls(max_workers=2)
started = threading.Event()
release = threading.Event()
running = ex.submit(lambda: (started.set(), release.wait(60))[1])
started.wait(60)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    def outcome(fn, *args):
        try:
            fn(*args)
        except BaseException as e:
            return type(e).__name__
        return "returned"
    out = [outcome(ex.shutdown), outcome(ex.submit, abs, 1)]
    with cls(max_workers=1) as fresh:  # a new executor works in the child
        out.append(fresh.submit(abs, -5).result(timeout=60))
    os.write(w, repr(out).encode())
    os._exit(0)
os.close(w)
release.set()
child = b""
while chunk := os.read(r, 1000):
    child += chunk
os.waitpid(pid, 0)
print(child.decode(), running.result(timeout=60), ex.submit(abs, -2).result(timeout=60))
ex.shutdown()
"""


def shutdown_after_fork(cls):
    name = next(n for n, c in EXECUTORS.items() if c is cls)
    p = subprocess.run([sys.executable, "-c", FORK, name], capture_output=True, text=True,
                       timeout=HANG)
    return p.returncode, p.stdout.strip()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_in_a_child_forked_while_a_call_runs_shutdown_returns_and_submit_is_refused():
    assert same_on_both(shutdown_after_fork) == (
        0, "['returned', 'RuntimeError', 5] True 2")


# ---------------------------------------------------------------------- first use
def starts_at_first_use(cls):
    """Making the executor starts no thread and runs no initializer; the first submit does."""
    inits = []
    before = threading.active_count()
    ex = cls(max_workers=2, initializer=lambda: inits.append(threading.current_thread().name))
    made = (threading.active_count() - before, len(inits))
    result = ex.submit(abs, -4).result(timeout=HANG)
    ran = bool(inits) and all(name != threading.current_thread().name for name in inits)
    closed = ends(ex.shutdown)
    return made, result, ran, closed


def test_the_threads_and_the_initializer_start_at_the_first_submit():
    assert same_on_both(starts_at_first_use) == ((0, 0), 4, True, ("returned", None))


def shutdown_before_first_use(cls):
    before = threading.active_count()
    ex = cls(max_workers=2)
    closed = ends(ex.shutdown)
    return (closed, raised(ex.submit, abs, 1), raised(ex.map, abs, [1]),
            threading.active_count() - before)


def test_an_executor_shut_down_before_its_first_use_never_starts_and_refuses_calls():
    assert same_on_both(shutdown_before_first_use) == (
        ("returned", None), "RuntimeError", "RuntimeError", 0)
    ex = tg.Executor(2)
    ex.shutdown()
    with pytest.raises(RuntimeError, match="shut down before its first use"):
        ex.scheduler


def first_submits_at_once(cls, callers=8):
    """Several threads make the first submits at the same moment: every call runs, and the
    executor has the threads it was asked for, once."""
    ex = cls(max_workers=2, thread_name_prefix="firstuse")
    go = threading.Barrier(callers)
    out = []

    def caller(i):
        go.wait(HANG)
        out.append(ex.submit(abs, -i).result(timeout=HANG))

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG)
    workers = {t.name for t in threading.enumerate() if re.fullmatch(r"firstuse_\d+", t.name)}
    closed = ends(ex.shutdown)
    return sorted(out), len(workers) <= 2, closed


def test_first_submits_from_several_threads_at_once_start_one_pool():
    assert same_on_both(first_submits_at_once) == (list(range(8)), True, ("returned", None))


# A script's fork: the child submits to the executor `ex` it inherited and exits 0 with the
# right result; the parent has the child's exit status in `status`.
CHILD_SUBMITS = """
pid = os.fork()
if pid == 0:
    code = 0 if ex.submit(abs, -7).result(timeout=60) == 7 else 3
    ex.shutdown()
    os._exit(code)
_, status = os.waitpid(pid, 0)
"""

UNUSED_BEFORE_FORK = """
import os, sys
import concurrent.futures as cf
import taskgraph as tg
cls = {"ThreadPoolExecutor": cf.ThreadPoolExecutor, "taskgraph.Executor": tg.Executor}[sys.argv[1]]
ex = cls(max_workers=2)
""" + CHILD_SUBMITS + """
print(os.waitstatus_to_exitcode(status), ex.submit(abs, -2).result(timeout=60))
ex.shutdown()
"""


def unused_before_fork(cls):
    name = next(n for n, c in EXECUTORS.items() if c is cls)
    p = subprocess.run([sys.executable, "-c", UNUSED_BEFORE_FORK, name], capture_output=True,
                       text=True, timeout=HANG)
    return p.returncode, p.stdout.strip()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_an_executor_made_before_fork_and_unused_works_in_the_child():
    assert same_on_both(unused_before_fork) == (0, "0 2")


STARTING_AT_FORK = """
import os, threading
import taskgraph as tg
from taskgraph.executor import executor as mod
parent, entered, go = os.getpid(), threading.Event(), threading.Event()

class SlowPool(mod._Pool):  # the parent's first submit is inside Executor._start at the fork
    def __init__(self, *args):
        if os.getpid() == parent:
            entered.set()
            go.wait(60)
        super().__init__(*args)

mod._Pool = SlowPool
ex = tg.Executor(2)
first = []
starter = threading.Thread(target=lambda: first.append(ex.submit(abs, -1).result(timeout=60)))
starter.start()
entered.wait(60)
""" + CHILD_SUBMITS + """
go.set()
starter.join(60)
print(os.waitstatus_to_exitcode(status), first, ex.submit(abs, -2).result(timeout=60))
ex.shutdown()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_while_another_thread_starts_the_executor_leaves_it_usable_in_the_child():
    p = subprocess.run([sys.executable, "-c", STARTING_AT_FORK], capture_output=True, text=True,
                       timeout=HANG * 2)
    assert (p.returncode, p.stdout.strip()) == (0, "0 [1] 2"), p.stderr[-2000:]


# ---------------------------------------------------------------------- initializer
def failing_initializer(cls, caplog):
    caplog.clear()

    def init():
        raise ValueError("error in initializer")

    ex = cls(max_workers=2, initializer=init)
    try:
        f = ex.submit(abs, 1)
    except cf.BrokenExecutor as e:
        early = type(e).__name__
    else:
        early = type(f.exception(timeout=HANG)).__name__
    deadline = time.monotonic() + HANG
    while not ex._broken and time.monotonic() < deadline:
        time.sleep(0.001)
    later = raised(ex.submit, abs, 1)
    closed = ends(ex.shutdown)
    return early, later, closed, "Exception in initializer" in caplog.text


def test_a_failing_initializer_breaks_the_pool_and_is_logged(caplog):
    caplog.set_level(logging.CRITICAL, logger="concurrent.futures")
    assert same_on_both(failing_initializer, caplog) == (
        "BrokenThreadPool", "BrokenThreadPool", ("returned", None), True)


def blocking_initializer(cls):
    entered = threading.Event()
    release = threading.Event()

    def init():
        entered.set()
        release.wait(HANG)

    built = ends(cls, 1, "pool", init)  # the constructor does not wait for the initializer
    assert built != "HANG", "HANG: the constructor waited for a blocked initializer"
    ex = built[1]
    f = ex.submit(abs, -3)
    assert entered.wait(HANG)
    waiting = f.done()
    release.set()
    return built[0], waiting, f.result(timeout=HANG), ends(ex.shutdown)


def test_a_blocking_initializer_holds_up_the_calls_not_the_constructor():
    assert same_on_both(blocking_initializer) == ("returned", False, 3, ("returned", None))


LOADS = []


@tg.task
def load_model():
    LOADS.append(1)
    return "model"


def initializer_waiting_for_a_lazy_node(cls, executors=8):
    """The common "load it once" pattern: every worker's initializer waits for one shared
    lazy node (computed once, by whichever gets there first); several executors in turn."""
    outcomes = set()
    for _ in range(executors):
        LOADS.clear()
        model = load_model()
        seen = []

        def init():
            seen.append(model.result())

        built = ends(cls, 16, "pool", init)
        assert built != "HANG", "HANG: the constructor never returned"
        ex = built[1]
        results = [f.result(timeout=HANG) for f in [ex.submit(abs, -i) for i in range(16)]]
        closed = ends(ex.shutdown)
        outcomes.add((tuple(results), closed, tuple(sorted(set(seen))), len(LOADS)))
    return outcomes


def test_an_initializer_that_waits_for_a_shared_lazy_node_neither_hangs_nor_runs_twice():
    assert same_on_both(initializer_waiting_for_a_lazy_node) == {
        (tuple(range(16)), ("returned", None), ("model",), 1)}


# ---------------------------------------------------------------------- failures and races
def fails():
    raise ValueError("nobody reads this")


def unread_nested_failure(cls):
    with cls(max_workers=2) as ex:
        def parent():
            ex.submit(fails)  # its future is never read
            return "parent ok"
        first = ex.submit(parent).result(timeout=HANG)
        later = [ex.submit(abs, -i).result(timeout=HANG) for i in range(5)]
    return first, later


def test_an_unread_failure_of_a_nested_call_affects_nothing_else():
    assert same_on_both(unread_nested_failure) == ("parent ok", [0, 1, 2, 3, 4])


@tg.task
def failing_child():
    raise ValueError("child failed, unread")


def test_an_unread_failure_of_a_task_a_call_spawned_is_the_calls_and_nothing_elses():
    """taskgraph only (a @task called on a ThreadPoolExecutor's thread builds a lazy node that
    never runs): inside a call it is a child, synced at the call's end (fork-join); its unread
    failure is the call's outcome, as for any task, and touches no other call."""
    def parent():
        failing_child()
        return "parent ok"

    with tg.Executor(2) as ex:
        f = ex.submit(parent)
        with pytest.raises(ValueError, match="child failed, unread"):
            f.result(timeout=HANG)
        assert [ex.submit(abs, -i).result(timeout=HANG) for i in range(5)] == [0, 1, 2, 3, 4]


class Preempted:
    """A callable whose __name__ (which taskgraph's submit reads) yields the CPU: the
    submitting thread is preempted inside submit, as a loaded machine does by itself."""

    @property
    def __name__(self):
        time.sleep(0)
        return "preempted"

    def __call__(self, x):
        return x


def submit_racing_shutdown(cls, rounds=40):
    """Rounds of 8 threads submitting 200 calls each while the main thread shuts down, a
    little later each round (a stagger, not a measure); what went wrong, by round."""
    bad = []
    for k in range(rounds):
        ex = cls(max_workers=2)
        got, go = [], threading.Barrier(9)

        def submitter():
            go.wait()
            for i in range(200):
                try:
                    got.append((i, ex.submit(Preempted(), i)))
                except RuntimeError:
                    return

        threads = [threading.Thread(target=submitter) for _ in range(8)]
        for t in threads:
            t.start()
        go.wait()
        time.sleep(0.0002 * (k % 5))
        ex.shutdown()
        for t in threads:
            t.join(HANG)
        for i, f in got:
            if f.cancelled() or f.result(timeout=HANG) != i:
                bad.append((k, i))
    return bad


def test_submit_racing_shutdown_either_raises_or_its_call_runs():
    assert same_on_both(submit_racing_shutdown) == []

