"""Exceptions raised by taskgraph (all public through ``taskgraph``). The C extension raises
them too: taskgraph._hooks registers them with it (``core._configure``)."""
import concurrent.futures


__all__ = ["CancelledError", "SchedulerClosedError", "TaskgraphError", "BrokenSchedulerError"]


class TaskgraphError(Exception):
    """Base class of taskgraph's own errors (misuse of the API, broken invariants)."""


class CancelledError(concurrent.futures.CancelledError):
    """The node never ran: a dependency failed, its run was cancelled (a sibling failed, the
    caller pressed Ctrl-C), or its scheduler closed first. The message names the node and the
    reason. Subclass of ``concurrent.futures.CancelledError``."""


class SchedulerClosedError(TaskgraphError, RuntimeError):
    """A closed scheduler was asked to run something, or a node it owned was awaited."""


class BrokenSchedulerError(SchedulerClosedError):
    """The scheduler failed internally (like ``concurrent.futures.BrokenExecutor``): a worker
    thread stopped, or storing a result or recording a trace failed. Every compute that was
    running raises it, every node that had not run is cancelled with it as the cause, new
    computes raise it; ``close()`` still works. The message says what failed. Subclass of
    ``SchedulerClosedError``: the scheduler cannot be used any more."""


def add_note(exc, text):
    """Adds ``text`` to the notes of ``exc`` (a user's exception), best effort: an exception
    that refuses notes (a frozen dataclass, a read-only ``__notes__``, an ``add_note`` that
    raises) goes without, and keeps its own type and message. Never raises (an Exception of
    the refusal is dropped; a KeyboardInterrupt or SystemExit is not caught). Private: for
    the modules of the package, which all note user exceptions this way (the C half does the
    same, csrc/py/rules.c)."""
    try:
        exc.add_note(text)
    except Exception:  # noqa: BLE001 - the user's exception matters, not our note
        pass


def get_mark(exc, name):
    """``getattr(exc, name, None)`` on a user's exception, best effort like add_note."""
    try:
        return getattr(exc, name, None)
    except Exception:  # noqa: BLE001 - as add_note
        return None


def set_mark(exc, name, value):
    """``setattr(exc, name, value)`` on a user's exception, best effort like add_note."""
    try:
        setattr(exc, name, value)
    except Exception:  # noqa: BLE001 - as add_note
        pass
