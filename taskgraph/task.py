"""The ``@task`` decorator. The Task type itself is written in C (csrc/py/task.c): calling a
task builds its Node with no Python code of ours on the way."""
from __future__ import annotations

import functools

from taskgraph._hazards import note as _note_hazard
from taskgraph.blocking import begin as _declare_wait
from taskgraph._native import core

__all__ = ["Task", "task", "cancelled"]

Task = core.Task
_NO_FN = object()


def task(fn=_NO_FN, *, name: str | None = None, retries: int = 0, retry_on=None,
         blocking: bool = False):
    """Make a function into a task: ``@task``, ``@task(name="fib", retries=3)`` or ``task(f)``.

    ``retries=N``: a call that raises one of the ``retry_on`` exception classes (default
    ``Exception``) is run again at once, on the same worker, up to N more times; each attempt
    is recorded in a trace; the final failure carries a note saying how many times it ran. A
    cancellation or a closed scheduler is never retried, nor a task whose node was cancelled.

    Errors: a non-callable raises ``TypeError`` naming it (a string, as in ``@task("fib")``,
    is pointed to ``name=``); so do a bad ``name`` and a bad ``retry_on``; ``retries`` outside
    0..1000 raises ``ValueError``.

    ``blocking=True``: the function always waits (I/O, sleeps, locks): each call runs as if
    inside ``tg.blocking()``, so a spare worker runs the queued tasks meanwhile
    (docs/api/waiting.md). Nothing runs at decoration time, inside or outside a worker.
    Calling the task raises ``TypeError`` at once when its function would refuse the
    arguments (see ``Task``). On CPython 3.13t the first Task of a top-level function lives
    as long as the process, as the function does (docs/api/tasks.md, "Pickling, immutability,
    lifetime").
    """
    if isinstance(fn, str):
        raise TypeError(f"taskgraph.task needs a function, got the str {fn!r}: to name a task, "
                        f"write @task(name={fn!r})")
    if fn is _NO_FN:
        return lambda f: task(f, name=name, retries=retries, retry_on=retry_on,
                              blocking=blocking)
    if blocking and callable(fn):
        fn = _declared_wait(fn)
    t = Task(fn, name=name, retries=retries, retry_on=retry_on)
    _note_hazard(fn, t.name)  # for Trace.summary(): a nested or exec()'d task function
    return t


def _declared_wait(fn):
    """fn, each call inside a declared wait (tg.blocking()); name, docstring and signature
    kept (functools.wraps)."""
    @functools.wraps(fn)
    def waits(*args, **kwargs):
        _declare_wait()
        try:
            return fn(*args, **kwargs)
        finally:
            core.block_end()
    return waits


def cancelled() -> bool:
    """Inside a task: whether it was asked to stop, so that a long task can return early
    (cooperative cancellation, like checking a cancellation token): ``node.cancel()`` was called
    on its node or on a task that spawned it, or its compute was cancelled (a failure elsewhere
    in it, Ctrl-C, a compute timeout, ``close()``). Outside a task, and in serial mode: False.
    Never raises; costs a few pointer reads."""
    return core.cancelled()
