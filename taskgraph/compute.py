"""The module-level API functions: compute and gather. They pick the backend (or serial mode)
and run the one compute sequence on it (taskgraph._backend.compute_on); compute and
compute_lazy are also the functions the C extension calls back for ``Node.compute()`` and
for ``result()`` on a lazy node outside the workers (taskgraph._hooks installs them)."""
from __future__ import annotations

from taskgraph import runs
from taskgraph._backend import Backend, compute_on
from taskgraph._native import core
from taskgraph.scheduler import Scheduler, current_scheduler, scheduler_of_engine

__all__ = ["compute", "gather", "compute_lazy"]
Node = core.Node


def compute(*args, workers: int | None = None, scheduler: Scheduler | None = None,
            timeout: float | None = None, progress: bool = False):
    """Computes the Nodes in args and returns args with Nodes replaced by their values (one
    value for one argument, else a tuple). See ``Scheduler.compute`` for errors, Ctrl-C and
    timeouts. An argument that is a function or a task rather than a Node (``compute(f)``
    for ``compute(f())``) raises ``TypeError`` before anything runs, on any backend.

    Which scheduler: ``scheduler`` if given (a ``Scheduler`` or another backend, such as
    ``taskgraph.dask.DaskScheduler``); else, with ``workers``, a one-off ``Scheduler(workers)``
    closed before returning; else, inside a task, the scheduler running it (the call joins);
    else the innermost ``with`` block's scheduler; else the default scheduler. Inside
    ``serial()``: runs serially.
    """
    if scheduler is not None:
        if not isinstance(scheduler, Backend):
            raise TypeError(f"scheduler must be a taskgraph.Scheduler or backend, got {scheduler!r}")
        return compute_on(scheduler, args, timeout, progress)
    if core.in_serial():
        return compute_on(None, args, timeout, progress)
    if workers is not None:
        with Scheduler(workers) as s:
            return compute_on(s, args, timeout, progress)
    engine = core.current_engine()
    s = scheduler_of_engine(engine) if engine is not None else None
    return compute_on(s if s is not None else current_scheduler(), args, timeout, progress)


def gather(*nodes, **kwargs) -> list:
    """Joins several nodes and returns their results as a list: ``gather(a, b)`` or
    ``gather([a, b])``. Same scheduler choice, errors and keywords as ``compute``."""
    if len(nodes) == 1 and not isinstance(nodes[0], Node):
        try:
            nodes = tuple(nodes[0])
        except TypeError:
            raise TypeError(f"gather takes Nodes or one iterable of Nodes, got "
                            f"{type(nodes[0]).__name__} {nodes[0]!r:.80}") from None
    if not nodes:
        return []
    if not kwargs and not core.in_serial() and not runs.after_fork:
        engine = core.current_engine()
        s = scheduler_of_engine(engine) if engine is not None else None
        if s is not None:  # inside a task: join each, as compute() there does, in one C pass
            s._check_open()
            out = core.gather_joined(nodes)
            if out is not NotImplemented:
                return out
    res = compute(*nodes, **kwargs)
    return [res] if len(nodes) == 1 else list(res)


def compute_lazy(nodes, timeout):
    """Called by Node.result() on a lazy node outside the workers: runs it on the current
    scheduler (the caller then reads its outcome)."""
    s = current_scheduler()
    s._check_open()
    s._run(nodes, timeout)
