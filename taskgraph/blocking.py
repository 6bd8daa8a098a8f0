"""``tg.blocking()``: a task says that it is about to wait (I/O, a sleep, a lock, an outside
future), so that its worker's core is not lost meanwhile: the scheduler puts a spare worker
on duty, which runs the queued work until the wait is over (docs/api/waiting.md;
the mechanism: docs/design/sleep.md, "Spare workers")."""
from __future__ import annotations

import contextlib
import threading

from taskgraph._native import core

__all__ = ["blocking"]

# .range: the tg.map range task running a block of items on this thread (taskgraph/_map.py's
# _Open), if any: a declared wait in one of its items first hands out the items after the block.
here = threading.local()


def begin():
    """Declares a wait (tg.blocking's and @tg.task(blocking=True)'s start): the items of a
    tg.map range that follow the one about to wait are handed out first, so that a spare can
    take them (they may be what the wait waits for); then the pool is told. Returns whether
    this thread is a worker. Pairs with core.block_end()."""
    r = getattr(here, "range", None)
    if r is not None:
        r.hand_out()
    return core.block_begin()


class blocking(contextlib.ContextDecorator):
    """``with tg.blocking(): data = fetch(url)``, or ``@tg.blocking()`` on a function.

    Inside a task (or an ``Executor`` call, a ``tg.map`` item, a ``taskgraph.dask.get``
    task), the block is a declared wait: while it runs, a spare worker runs the queued
    tasks, so the cores stay busy. Spares are bounded per scheduler (``Scheduler(spares=...)``,
    default 128): past the bound the queued tasks wait for a worker, nothing fails. Sections
    nest (the outermost one counts). Inside a ``tg.map`` item, the items after it are handed
    out first, each a task of its own, so they wait side by side (and one may provide what
    another waits for). Outside a task (the main thread, serial mode) it does nothing. Costs about a microsecond per section, nothing on tasks that do not use it.

    Put only the wait inside: a task that computes inside the block shares its core with the
    spare. Joins (``node.result()`` on a task of the same scheduler) need no block: a join
    already runs other tasks while it waits."""

    __slots__ = ()

    def __enter__(self):
        begin()
        return self

    def __exit__(self, *exc):
        core.block_end()
        return False
