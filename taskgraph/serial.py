"""Serial elision: ``with taskgraph.serial():`` runs every task at once in the calling thread.

Calling a task in serial mode runs it in C (``core.run_inline``); this module orders a lazy
graph built outside serial mode and then computed inside it."""
from __future__ import annotations

from taskgraph._native import core
from taskgraph._state import State

__all__ = ["serial", "run_serially"]



class serial:
    """``with taskgraph.serial():`` calling a task runs it at once in the calling thread
    (serial elision): the same code, no scheduler, for debugging and for measuring the serial
    baseline. Nests; per thread. ``compute``/``result`` inside also run serially. A task's
    exception is stored on its node (raised by ``result()``); KeyboardInterrupt and SystemExit
    propagate at once."""

    def __enter__(self):
        core.serial_enter()
        return self

    def __exit__(self, *exc):
        core.serial_exit()


def run_serially(targets):
    """Runs the lazy graph under targets in the calling thread, now, in dependency order.
    Nodes that another compute claimed are waited for. Each node is claimed before it runs,
    so a parallel compute never runs it a second time."""
    stack = [(n, False) for n in reversed(targets)]
    while stack:
        n, ready = stack.pop()
        if n.done():
            continue
        if State.of(n) is not State.NEW:  # claimed by a parallel run: wait for it there
            n.exception()
            continue
        if not ready:
            stack.append((n, True))
            stack.extend((d, False) for d in reversed(n.dependencies) if not d.done())
            continue
        for d in n.dependencies:
            if not d.done():  # claimed elsewhere since: wait for it
                d.exception()
        if not core.run_inline(n) and not n.done():
            n.exception()  # claimed by someone else meanwhile
