"""``tg.blocking()``: a task says that it is about to wait (I/O, a sleep, a lock, an outside
future), so that its worker's core is not lost meanwhile: the scheduler puts a spare worker
on duty, which runs the queued work until the wait is over (docs/api/waiting.md;
the mechanism: docs/design/sleep.md, "Spare workers")."""
from __future__ import annotations

import contextlib

from taskgraph._native import core

__all__ = ["blocking"]


class blocking(contextlib.ContextDecorator):
    """``with tg.blocking(): data = fetch(url)``, or ``@tg.blocking()`` on a function.

    Inside a task (or an ``Executor`` call, a ``tg.map`` item, a ``taskgraph.dask.get``
    task), the block is a declared wait: while it runs, a spare worker runs the queued
    tasks, so the cores stay busy. Spares are bounded per scheduler (``Scheduler(spares=...)``,
    default 128): past the bound the queued tasks wait for a worker, nothing fails. Sections
    nest (the outermost one counts). Outside a task (the main thread, serial mode) it does
    nothing. Costs about a microsecond per section, nothing on tasks that do not use it.

    Put only the wait inside: a task that computes inside the block shares its core with the
    spare. Joins (``node.result()`` on a task of the same scheduler) need no block: a join
    already runs other tasks while it waits."""

    __slots__ = ()

    def __enter__(self):
        core.block_begin()
        return self

    def __exit__(self, *exc):
        core.block_end()
        return False
