"""What a scheduler is to compute(): the Backend protocol, and the one compute sequence over
it (find the nodes, run them, raise the first error, substitute the values, unwrap).

Two backends implement it: taskgraph.Scheduler (the native pool) and
taskgraph.dask.DaskScheduler (a dask cluster). ``compute``, ``use_scheduler`` and
``Node.result()`` accept any object that implements it (``isinstance(x, Backend)``)."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from taskgraph._native import core
from taskgraph.runs import check_timeout, raise_first_error
from taskgraph.serial import run_serially

__all__ = ["Backend", "compute_on"]


@runtime_checkable
class Backend(Protocol):
    """A scheduler that compute() can run a lazy graph on."""

    @property
    def closed(self) -> bool:
        """Whether it can no longer run anything (use_scheduler then skips it)."""

    def _check_open(self) -> None:
        """Raises SchedulerClosedError (or BrokenSchedulerError) if it cannot run anything."""

    def _runs_current_task(self) -> bool:
        """Whether the calling thread runs one of its tasks (a compute there joins, even in
        serial mode)."""

    def _run(self, nodes, timeout=None, progress=False, cancel_on_timeout=False):
        """Submits the lazy graph under nodes, waits until every node has finished (Ctrl-C
        cancels what it submitted and re-raises; the deadline `timeout` raises TimeoutError,
        cancelling first with cancel_on_timeout), adds what it recorded to an open trace, and
        returns the root cause of its first failure (or None)."""


def _refuse_functions(args):
    """TypeError for an argument of compute() that is a function or a task, not a Node: it
    would come back unchanged (compute returns what is not a Node as it is), which is never
    what was meant (a task not called, or a function never made a task). The search is one C
    pass (core.first_function: a Task, a function, a method or a builtin function)."""
    a = core.first_function(args)
    if a is None:
        return
    if isinstance(a, core.Task):
        raise TypeError(f"compute() got the task {a.name!r} itself, not a Node: call it "
                        "first, tg.compute(task(arguments)), not tg.compute(task)")
    name = getattr(a, "__qualname__", None) or repr(a)
    raise TypeError(f"compute() got the function {name}, not a Node: compute runs "
                    "Nodes, which calling a task makes; make it a task and call it, "
                    "e.g. tg.compute(tg.task(f)()), or call it yourself")


def compute_on(backend, args, timeout=None, progress=False):
    """compute(*args) on backend (None: serial mode, no backend): args with their Nodes
    replaced by their values, one value for one argument, else a tuple. TypeError (before
    anything runs) for an argument that is a function or a task rather than a Node."""
    _refuse_functions(args)
    if backend is not None:
        backend._check_open()
    check_timeout(timeout)
    nodes = core.scan(args)
    root = None
    if core.in_serial() and (backend is None or not backend._runs_current_task()):
        run_serially(nodes)
    else:
        root = backend._run(nodes, timeout, progress, cancel_on_timeout=True)
    raise_first_error(nodes, root)
    out = core.substitute(args)
    return out[0] if len(out) == 1 else out
