"""Wires the C extension to the Python side, in one explicit call (``install()``, made once by
taskgraph/__init__.py): the exception classes it raises, and the functions it calls back
(``Node.compute()``, ``result()`` on a lazy node outside the workers, serial runs). No module
installs anything as a side effect of being imported."""
from __future__ import annotations

from taskgraph._native import core
from taskgraph.compute import compute, compute_lazy
from taskgraph.errors import (BrokenSchedulerError, CancelledError, SchedulerClosedError,
                              TaskgraphError)
from taskgraph.serial import run_serially

__all__ = ["install"]


def install():
    """Registers them with the extension (idempotent)."""
    core._configure(CancelledError=CancelledError, SchedulerClosedError=SchedulerClosedError,
                    TaskgraphError=TaskgraphError, BrokenSchedulerError=BrokenSchedulerError,
                    compute=compute, compute_lazy=compute_lazy, run_serially=run_serially)
