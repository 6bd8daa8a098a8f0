"""Tasks for tests/test_dask.py, in a module the cluster's workers can import (the test puts
this directory on their PYTHONPATH)."""
import os
import threading
import time

import taskgraph as tg
from helpers import fib  # noqa: F401  (used by the tests through this module)


@tg.task
def add(a, b):
    return a + b


@tg.task
def where():
    """Which process and thread ran it."""
    return os.getpid(), threading.current_thread().name


@tg.task
def marked(path, value):
    """Leaves a mark (a file) so the test can count runs across processes."""
    with open(path, "a") as f:
        f.write("x\n")
    return value


@tg.task
def slow_marked(path, value, seconds):
    with open(path, "a") as f:
        f.write("x\n")
    time.sleep(seconds)
    return value


@tg.task
def fails(msg):
    raise ValueError(msg)  # the line the traceback must show


@tg.task
def chain(d):
    return 0 if d == 0 else chain(d - 1).result() + 1


@tg.task
def child_fails():
    kids = [fails(f"child {i}") if i == 2 else add(i, 0) for i in range(4)]
    out = []
    for k in kids:
        try:
            out.append(k.result())
        except ValueError as e:
            out.append(str(e))
    return out


@tg.task
def unobserved_child():
    fails("nobody waited")
    return "never"


class Adder:
    def __init__(self, base):
        self.base = base

    @tg.task
    def plus(self, x):
        return self.base + x, os.getpid()


@tg.task(retries=2)
def flaky(path, failures):
    """Fails its first `failures` calls (counted in a file: the attempts may run in different
    processes), then returns how many calls it took."""
    with open(path, "a") as f:
        f.write("x\n")
    with open(path) as f:
        calls = len(f.read().splitlines())
    if calls <= failures:
        raise ValueError(f"flake {calls}")
    return calls


@tg.task
def deep_fails(depth):
    """Fails `depth` levels of fork-join below the task called: each level spawns the next
    and reads its result."""
    if depth == 0:
        raise ValueError("deep failure")  # the deep line the traceback must show
    a, b = deep_fails(depth - 1), add(depth, 0)
    return a.result() + b.result()


@tg.task
def reads_a_child_whose_dependency_failed():
    """Spawns a failing child and a second child that depends on it, then reads the second:
    (its state, its error with the keys replaced by A and B, its cause's type and text)."""
    a = fails("first child")
    b = add(a, 1)
    try:
        b.result()
    except tg.CancelledError as e:
        a.exception()  # looked at: its failure does not fail this task at the implicit sync
        return (b.state, str(e).replace(b.key, "B").replace(a.key, "A"),
                type(e.__cause__).__name__, str(e.__cause__))
    return "no error"


_KEPT = {}  # per worker process: what a task's failed attempt left for its next attempt


@tg.task
def sleeper(seconds):
    time.sleep(seconds)
    return seconds


@tg.task(retries=1)
def fails_after_spawning(token):
    """Attempt 1 spawns a slow child and fails at once (the child is cancelled because of
    it); attempt 2 (same process, same thread) returns what that child's node says."""
    kid = _KEPT.pop(token, None)
    if kid is None:
        _KEPT[token] = sleeper(0.5)
        raise ValueError("the parent fails")
    exc = kid.exception()
    return kid.state, str(exc), type(exc.__cause__).__name__, str(exc.__cause__)


@tg.task
def waits_for_kids(n):
    """tg.wait and tg.as_completed inside a task on a dask worker: they join."""
    kids = [add(i, i) for i in range(n)]
    done, not_done = tg.wait(kids, return_when=tg.FIRST_COMPLETED)
    return len(done) >= 1, sorted(k.result() for k in tg.as_completed(kids))
