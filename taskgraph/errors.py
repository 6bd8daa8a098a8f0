"""Exceptions raised by taskgraph (all public through ``taskgraph``). The C extension raises
them too: taskgraph._native registers them with it (``core._configure``)."""
import concurrent.futures

from taskgraph._native import core

__all__ = ["CancelledError", "SchedulerClosedError", "TaskgraphError"]


class TaskgraphError(Exception):
    """Base class of taskgraph's own errors (misuse of the API, broken invariants)."""


class CancelledError(concurrent.futures.CancelledError):
    """The node never ran: a dependency failed, its run was cancelled (a sibling failed, the
    caller pressed Ctrl-C), or its scheduler closed first. The message names the node and the
    reason. Subclass of ``concurrent.futures.CancelledError``."""


class SchedulerClosedError(TaskgraphError, RuntimeError):
    """A closed scheduler was asked to run something, or a node it owned was awaited."""


core._configure(CancelledError=CancelledError, SchedulerClosedError=SchedulerClosedError,
                TaskgraphError=TaskgraphError)
