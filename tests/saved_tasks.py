"""The tasks of the files in tests/data/, and how they were written: a graph file (tg.save) and a
trace file (Trace.save) made by taskgraph before its modules moved into sub-packages, which
tests/test_compat.py loads with the code of today.

The committed files were written once, by ``python tests/saved_tasks.py tests/data`` at the
commit before the move; rewriting them with today's code would test nothing. Their functions
are pickled by reference only (module-level tasks of this module, and functions of
``operator``), never by value, so that every interpreter of the tests (3.11, 3.13t, 3.14t)
reads the same graph file.
"""
import operator
import os
import sys

import taskgraph as tg

GRAPH_FILE = "graph-v1.tggraph"
TRACE_FILE = "trace-v3.tgtrace"
GRAPH_RESULTS = [156, 63, 101]  # what computing the saved graph gives


@tg.task
def add(a, b):
    return a + b


@tg.task(name="scaled", retries=2, retry_on=ZeroDivisionError)
def scale(x, *, by=1):
    return x * by


@tg.task
def total(parts):
    return sum(parts["xs"]) + parts["y"][0]


def graph():
    """The saved graph: module-level tasks (pickled by reference), Tasks made of functions of
    no module of ours (pickled as Task(fn, name), one with retry options), Nodes inside
    containers and keyword arguments, and a finished node (saved as its value)."""
    a = add(1, 2)                                                              # 3
    b = scale(a, by=10)                                                        # 30
    c = tg.Task(operator.mul, name="mul")(b, 2)                                # 60
    d = tg.Task(operator.add, name="plus", retries=1, retry_on=KeyError)(c, a)  # 63
    e = total({"xs": [a, b, c], "y": (d,)})                                    # 156
    done = add(100, 1)
    tg.compute(done)                                                           # 101
    return [e, d, done]


_ATTEMPTS = {}


@tg.task(retries=1)
def flaky(i):
    """Fails its first attempt, then returns i."""
    _ATTEMPTS[i] = _ATTEMPTS.get(i, 0) + 1
    if _ATTEMPTS[i] == 1:
        raise ConnectionError(f"attempt 1 of {i}")
    return i


@tg.task
def boom():
    raise ValueError("boom")


@tg.task
def spawner(n):
    kids = [add(i, i) for i in range(n)]
    return sum(k.result() for k in kids)


def trace():
    """The saved trace: spawned children (parents), data dependencies, a retried task (two
    attempts) and a failed one, on a two-worker scheduler."""
    with tg.Scheduler(2) as s, tg.trace() as tr:
        tg.compute(spawner(4), add(add(1, 2), 3), flaky(7), scheduler=s)
        try:
            tg.compute(boom(), scheduler=s)
        except ValueError:
            pass
    return tr


def write(directory):
    tg.save(graph(), os.path.join(directory, GRAPH_FILE))
    trace().save(os.path.join(directory, TRACE_FILE))


if __name__ == "__main__":
    import saved_tasks  # the tasks as this module's, not __main__'s (which pickle by value)
    saved_tasks.write(sys.argv[1])
