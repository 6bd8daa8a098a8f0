"""The module-level API functions: compute and gather. They pick the scheduler (or serial
mode) and call into it; they are also the functions the C extension calls back for
``Node.compute()`` and for ``result()`` on a lazy node outside the workers."""
from __future__ import annotations

from taskgraph._native import core
Node = core.Node
from taskgraph.runs import raise_first_error
from taskgraph.scheduler import Scheduler, current_scheduler, scheduler_of_engine
from taskgraph.serial import run_serially

__all__ = ["compute", "gather"]


def compute(*args, workers: int | None = None, scheduler: Scheduler | None = None,
            timeout: float | None = None, progress: bool = False):
    """Computes the Nodes in args and returns args with Nodes replaced by their values (one
    value for one argument, else a tuple). See ``Scheduler.compute`` for errors, Ctrl-C and
    timeouts.

    Which scheduler: ``scheduler`` if given (a ``Scheduler`` or another backend, such as
    ``taskgraph.dask.DaskScheduler``); else, with ``workers``, a one-off ``Scheduler(workers)``
    closed before returning; else, inside a task, the scheduler running it (the call joins);
    else the innermost ``with`` block's scheduler; else the default scheduler. Inside
    ``serial()``: runs serially.
    """
    if scheduler is not None:
        if not hasattr(scheduler, "_compute_nodes"):
            raise TypeError(f"scheduler must be a taskgraph.Scheduler or backend, got {scheduler!r}")
        return scheduler.compute(*args, timeout=timeout, progress=progress)
    if core.in_serial():
        nodes = core.scan(args)
        run_serially(nodes)
        raise_first_error(nodes, None)
        out = core.substitute(args)
        return out[0] if len(out) == 1 else out
    if workers is not None:
        with Scheduler(workers) as s:
            return s.compute(*args, timeout=timeout, progress=progress)
    engine = core.current_engine()
    if engine is not None:
        s = scheduler_of_engine(engine)
        if s is not None:
            return s.compute(*args, timeout=timeout, progress=progress)
    return current_scheduler().compute(*args, timeout=timeout, progress=progress)


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
    res = compute(*nodes, **kwargs)
    return [res] if len(nodes) == 1 else list(res)


def _compute_lazy(nodes, timeout):
    """Called by Node.result() on a lazy node outside the workers."""
    current_scheduler()._compute_nodes(nodes, timeout)


core._configure(compute=compute, compute_lazy=_compute_lazy, run_serially=run_serially)
