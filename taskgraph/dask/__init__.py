"""taskgraph and dask, both ways (an optional extra: ``pip install "taskgraph-ft[dask]"``).
``get`` runs dask code (delayed, bag, array, dataframe) on taskgraph's work-stealing pool:
``local`` is that scheduler function (and ``visualize``, the picture of what it would run),
``graph`` turns dask's graph into lazy Nodes; it needs
``dask`` only. ``DaskScheduler`` runs taskgraph's own tasks on a dask.distributed cluster, as a
backend of ``tg.compute``: ``client`` is the side a compute talks to, ``worker`` a task running
on a dask worker, ``futures`` what both sides share (a Node's dask key, a task's payload,
finishing a Node from its dask future). docs/dask.md and docs/scaling.md say how to use them."""
from __future__ import annotations

from taskgraph.dask.local import get, visualize

__all__ = ["get", "visualize", "DaskScheduler"]


def __getattr__(name):
    """DaskScheduler is imported on first use: ``import taskgraph.dask`` (for ``get``) must
    not need ``distributed``."""
    if name == "DaskScheduler":
        try:
            from taskgraph.dask.client import DaskScheduler
        except ImportError as e:
            raise ImportError(f"taskgraph.dask.DaskScheduler needs dask.distributed ({e}): "
                              "pip install \"taskgraph-ft[dask]\"") from e
        globals()["DaskScheduler"] = DaskScheduler
        return DaskScheduler
    raise AttributeError(f"module 'taskgraph.dask' has no attribute {name!r}")
