"""``taskgraph.dask.get``: taskgraph's engine as dask's scheduler (dask's ``get`` protocol); and
``taskgraph.dask.visualize``, the picture of the Nodes ``get`` would run.

The graph dask hands over becomes lazy Nodes (taskgraph.dask.graph), which the one compute
sequence (taskgraph.compute) submits in one call and waits for: the scheduler choice, Ctrl-C,
timeouts, fail-fast, progress bars and traces are compute's own.
"""
from __future__ import annotations

import contextvars
import threading
import warnings
from collections.abc import Mapping

from dask.callbacks import Callback
from dask.core import flatten
from dask.utils import ensure_dict

from taskgraph.dask.graph import GraphBuilder
from taskgraph._native import core
from taskgraph.compute import compute
from taskgraph.trace.viz import DEFAULT_THRESHOLD, visualize as _draw

__all__ = ["get", "visualize"]


def get(dsk, keys, cache=None, num_workers=None, *, scheduler=None, timeout=None,
        progress=False, **kwargs):
    """Computes ``keys`` of the dask graph ``dsk`` on taskgraph's work-stealing scheduler:
    dask's scheduler ``get`` protocol, so that dask code switches with one argument::

        x.compute(scheduler=taskgraph.dask.get)
        dask.compute(a, b, scheduler=taskgraph.dask.get)
        dask.config.set(scheduler=taskgraph.dask.get)

    ``dsk``: what dask gives a scheduler: a dict of legacy tuple tasks or of task-spec
    objects (``dask._task_spec``), a HighLevelGraph, or a dask collection or expression (its
    ``__dask_graph__()``). ``keys``: a key, or a list of keys nested to any depth; the result
    has the same shape, lists becoming tuples (as dask's local schedulers return it).

    Which scheduler: ``scheduler`` (a ``taskgraph.Scheduler``, or another taskgraph backend)
    if given; else, with ``num_workers``, a private ``Scheduler(num_workers)`` for this call;
    else as ``taskgraph.compute``: inside a task, the scheduler running it (the call joins);
    inside ``with scheduler:``, that one; else the shared default scheduler. Inside
    ``taskgraph.serial()`` it runs serially in the calling thread. ``timeout`` (seconds) and
    ``progress=True`` are ``taskgraph.compute``'s. ``cache``: a dict of values already known
    by key (they are used, not computed). Other keywords dask passes to schedulers (``pool``,
    ``callbacks``, ``chunksize``, ...) are accepted and ignored, as dask's own schedulers ignore
    what they do not use. dask's scheduler callbacks (``dask.diagnostics``' ProgressBar,
    Profiler, ...) are not called: a ``RuntimeWarning`` says so when some are active.

    dask's ``retries`` annotation (``with dask.annotate(retries=2)``) becomes the task's
    ``retries`` (run again at once, on the same worker); other annotations (``priority``,
    ``resources``, ``workers``, ...) are ignored.

    Errors: a key not in the graph raises ``KeyError``; a cycle ``RuntimeError``; a missing
    dependency ``ValueError``; nothing has run then. A failing dask task raises its own
    exception, with its original traceback, a note naming the taskgraph task and worker and a
    note naming the dask key; what has not started is cancelled (fail fast) and the call
    returns once the tasks already running have finished. Ctrl-C cancels the rest and raises
    ``KeyboardInterrupt`` within about half a second (tasks already running finish in the
    background); ``timeout`` raises ``TimeoutError`` after cancelling what has not started.
    Each key runs once; an intermediate value is freed as soon as the last task that needs it
    has run.

    Inside a task (a dask task, or a ``@tg.task``, that calls a dask compute), with neither
    ``scheduler`` nor ``num_workers``, the graph joins the running task: its tasks run as children of it, on its scheduler, and the waiting
    worker runs them too (no deadlock, even on one worker); a failure is raised to the caller
    as outside, and once raised it is not raised again at the end of the calling task.
    """
    if Callback.active or kwargs.get("callbacks"):
        warnings.warn("taskgraph.dask.get does not call dask's scheduler callbacks "
                      "(dask.diagnostics' ProgressBar, Profiler, ...): pass progress=True for a "
                      "progress bar, and use taskgraph.trace() for a profile", RuntimeWarning,
                      stacklevel=2)
    del kwargs  # dask's other scheduler keywords: nothing to do with them here
    if num_workers is not None and scheduler is not None:
        raise TypeError("taskgraph.dask.get: give num_workers or scheduler, not both")
    dsk, annotations = _graph_of(dsk, "taskgraph.dask.get")
    if cache is not None and not isinstance(cache, Mapping):
        raise TypeError(f"taskgraph.dask.get: cache must be a dict of known values, got "
                        f"{type(cache).__name__}")
    flat = list(flatten(keys)) if isinstance(keys, list) else [keys]
    graph = GraphBuilder(dsk, cache, _retries(annotations), track=core._in_task(),
                         context=contextvars.copy_context())  # this thread's, here
    targets = _nodes(graph, flat)
    try:
        values = compute(targets, workers=num_workers, scheduler=scheduler, timeout=timeout,
                         progress=progress)
    except BaseException as e:
        err = graph.failure(e)
        if err is e:
            raise
        raise err
    finally:
        del targets
    if not isinstance(keys, list):
        return values[0]
    return _nested(keys, dict(zip(flat, values)))


def visualize(x, path=None, *, keys=None, threshold: int = DEFAULT_THRESHOLD):
    """Draws a dask collection's graph as ``taskgraph.dask.get`` would run it, before it runs:
    one box per Node (a fused task's parts each), named by dask key, as ``tg.visualize``
    draws taskgraph Nodes (``tg.visualize`` itself takes taskgraph Nodes only). ``x``: a dask
    collection (array, dataframe, bag, delayed), or a graph (a dict or HighLevelGraph) with
    ``keys`` (a key or a list of them). ``path`` and ``threshold`` and what is returned (a
    ``Picture``) are ``tg.visualize``'s. Runs nothing, inside or outside a task. Errors:
    ``TypeError`` for something that is not a dask graph or collection, ``KeyError`` for a key
    the graph lacks, ``GraphvizError`` without Graphviz's dot."""
    if keys is None:
        if not hasattr(x, "__dask_keys__"):
            raise TypeError(f"taskgraph.dask.visualize needs a dask collection, or a graph with "
                            f"keys=..., got {type(x).__name__}")
        keys = x.__dask_keys__()
    dsk, _ = _graph_of(x, "taskgraph.dask.visualize")
    flat = list(flatten(keys)) if isinstance(keys, list) else [keys]
    nodes = [n for n in _nodes(GraphBuilder(dsk), flat) if isinstance(n, core.Node)]
    return _draw(nodes, path, threshold=threshold)


def _graph_of(dsk, who):
    """(the graph as a dict, its annotations or None) of what dask hands a scheduler: a dict,
    a HighLevelGraph, or a collection (its __dask_graph__())."""
    annotations = None
    if not isinstance(dsk, Mapping):
        if not hasattr(dsk, "__dask_graph__"):
            raise TypeError(f"{who} needs a dask graph (a Mapping, a HighLevelGraph or a dask "
                            f"collection), got {type(dsk).__name__}")
        ann = getattr(dsk, "__dask_annotations__", None)
        dsk, annotations = dsk.__dask_graph__(), ann() if ann is not None else None
    if type(dsk) is not dict:
        if hasattr(dsk, "layers"):
            annotations = _layer_annotations(dsk, annotations)
        dsk = ensure_dict(dsk)
    return dsk, annotations


def _nodes(graph, keys):
    """graph.nodes(keys), built lazily: here outside a task, else on a thread of its own."""
    if core.in_serial() or core._in_task():
        return _build_elsewhere(graph, keys)
    return graph.nodes(keys)


def _build_elsewhere(graph, keys):
    """graph.nodes(keys) on a thread of its own. Inside a task a task call spawns its Node at
    once, and in serial mode it runs it: the Nodes are built where calls build lazy Nodes,
    and the compute then joins them like any lazy graph."""
    out = []

    def build():
        try:
            out.append(graph.nodes(keys))
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
            out.append(e)

    th = threading.Thread(target=build, name="taskgraph-dask-get-build", daemon=True)
    th.start()
    th.join()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def _nested(keys, values):
    """keys' shape with each key replaced by its value, lists as tuples (dask's nested_get)."""
    if isinstance(keys, list):
        return tuple(_nested(k, values) for k in keys)
    return values[keys]


def _retries(annotations):
    """{key: retries} from dask's annotations ({name: {key: value}}), or None."""
    if not annotations:
        return None
    by_key = annotations.get("retries")
    if not by_key:
        return None
    out = {}
    for key, n in by_key.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"taskgraph.dask.get: the retries annotation of dask key {key!r} "
                             f"must be an int >= 0, got {n!r}")
        if n:
            out[key] = n
    return out or None


def _layer_annotations(hlg, annotations):
    """A HighLevelGraph's layer annotations as {name: {key: value}} (a callable value is
    called with the key, as dask.distributed does), merged into annotations."""
    out = {name: dict(by_key) for name, by_key in (annotations or {}).items()}
    for layer in hlg.layers.values():
        ann = getattr(layer, "annotations", None)
        if not ann:
            continue
        for name, value in ann.items():
            by_key = out.setdefault(name, {})
            for key in layer:
                by_key[key] = value(key) if callable(value) else value
    return out
