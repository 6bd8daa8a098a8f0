"""The ``@task`` decorator. The Task type itself is written in C (csrc/py/task.c): calling a
task builds its Node with no Python code of ours on the way."""
from __future__ import annotations

from taskgraph._native import core

__all__ = ["Task", "task"]

Task = core.Task
_NO_FN = object()


def task(fn=_NO_FN, *, name: str | None = None):
    """Make a function into a task: ``@task``, ``@task(name="fib")`` or ``task(f)``.

    Errors: a non-callable raises ``TypeError`` naming it; so does a bad ``name``. Nothing runs
    at decoration time, inside or outside a worker.
    """
    if fn is _NO_FN:
        return lambda f: Task(f, name=name)
    return Task(fn, name=name)
