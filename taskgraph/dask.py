"""taskgraph and dask, both ways (an optional extra: ``pip install "taskgraph-ft[dask]"``).

**taskgraph as dask's scheduler** (needs ``dask`` only): ``get`` runs dask.delayed, bag,
array and dataframe code on taskgraph's work-stealing pool, one argument switched::

    import taskgraph.dask
    x.compute(scheduler=taskgraph.dask.get)

See ``get`` and docs/dask.md (taskgraph._dask_get, taskgraph._dask_graph).

**The same @task code on a dask.distributed cluster** (needs ``distributed`` too; imported
only when ``DaskScheduler`` is first used)::

    from distributed import Client
    from taskgraph.dask import DaskScheduler

    with Client("tcp://scheduler:8786") as client:
        ds = DaskScheduler(client)
        tg.compute(x, y, scheduler=ds)      # one dask graph per compute
        with ds:                            # or: make it the current scheduler
            print(x.result(), tg.compute(y))

What happens:

* **A lazy graph** becomes one dask graph per compute: one dask key per Node, its
  dependencies as dask dependencies, submitted in one call. A Node shared by several consumers
  runs once; ``compute`` returns the same shapes as locally; the Nodes you asked for end up
  done (their ``result()`` is the value), the intermediate ones stay lazy, as in dask.
* **Fork-join** works on the cluster: inside a task running on a dask worker, calling a task
  submits it to the cluster at once (``client.submit``), and ``result()`` waits for it after
  leaving the worker's thread pool (``distributed.secede``, then ``rejoin``), so recursive code
  runs on workers with one thread each without deadlock. A task finishes after the children it
  spawned (implicit sync), as locally.
* **Failures** are the same errors as locally: the task's own exception, type and traceback,
  with one note naming the task that raised it and the dask worker, at any depth of spawned
  tasks; a Node that depended on a failed one raises ``CancelledError`` (as does a spawned child
  cancelled because its parent failed); the rest of the compute is cancelled (fail fast).
  Ctrl-C in the client cancels what the compute submitted. A function or argument that cannot
  be pickled fails before anything is submitted, naming the task and the value.
* **Traces**: inside ``with tg.trace():`` every task run on the cluster is recorded (start, end,
  worker address, parent, dependencies, outcome) and read back from the workers after the
  compute; summaries, pictures, timelines and the CLI work on them as on a local trace.

Functions travel with cloudpickle: module-level tasks by reference (the workers must be able to
import their module, as for any dask code), lambdas, closures and tasks of ``__main__`` by
value. distributed's own sampling profiler reads other threads' frames, which free-threaded
CPython 3.13 documents as unsafe: turn it off on such clusters
(``distributed.worker.profile.enabled: false``; docs/scaling.md).

The client side is taskgraph._dask_client, the worker side taskgraph._dask_worker (each task
runs through the one task runner of csrc/py/rules.c, as on the native scheduler), what both
share taskgraph._dask_futures.
"""
from __future__ import annotations

from taskgraph._dask_get import get

__all__ = ["get", "DaskScheduler"]


def __getattr__(name):
    """DaskScheduler is imported on first use: ``import taskgraph.dask`` (for ``get``) must
    not need ``distributed``."""
    if name == "DaskScheduler":
        try:
            from taskgraph._dask_client import DaskScheduler
        except ImportError as e:
            raise ImportError(f"taskgraph.dask.DaskScheduler needs dask.distributed ({e}): "
                              "pip install \"taskgraph-ft[dask]\"") from e
        globals()["DaskScheduler"] = DaskScheduler
        return DaskScheduler
    raise AttributeError(f"module 'taskgraph.dask' has no attribute {name!r}")
