"""What both sides of the dask backend share (taskgraph.dask): the dask key of a Node, the
payload a dask task carries, and finishing a Node from its dask future (settling), with the
errors a Node raises when it never ran."""
from __future__ import annotations

import os
import uuid

import cloudpickle

from taskgraph._graph import pickling_error
from taskgraph._native import core
from taskgraph._state import State
from taskgraph.errors import CancelledError, get_mark, set_mark

__all__ = ["dask_key", "key_of", "failed_in", "mark_failed", "error_of", "settle_from",
           "cancel_node", "payload"]

# One token per process: dask keys must be unique on the cluster, and node keys are unique
# only within the process that made the nodes.
_TOKEN = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


def dask_key(node):
    return f"{node.key}@{_TOKEN}"


def key_of(dkey):
    """The node key in a dask key (what traces and messages call the task)."""
    return dkey.rpartition("@")[0] if dkey else "?"


# The dask key of the task whose outcome an exception is (set by the worker side when a task
# fails with it, again at each task it propagates through). dask gives a task whose dependency
# failed that dependency's exception: this mark tells the two apart. Not the note's
# __taskgraph_task__, which names the task that raised it first (maybe a child, levels down).
_FAILED_IN = "__taskgraph_failed_in__"


def failed_in(exc):
    return get_mark(exc, _FAILED_IN)


def mark_failed(exc, dkey):
    """Marks exc as the outcome of the task dkey (see _FAILED_IN)."""
    set_mark(exc, _FAILED_IN, dkey)


def error_of(fut):
    """The exception of an erred future, with its traceback (the task's frames)."""
    exc = fut.exception()
    tb = fut.traceback()
    if exc.__traceback__ is None and tb is not None:
        exc = exc.with_traceback(tb)
    return exc


def cancel_node(node, reason, cause=None):
    """Finishes a claimed node that never ran as cancelled, in the local scheduler's words."""
    core._settle(node, State.CANCELLED, core._cancelled_error(node.key, reason, cause))


def _dependency_error(node, exc):
    """The CancelledError of a node that never ran because a task it depends on (directly or
    not) failed with exc: as locally, it names the direct dependency that failed, or was
    cancelled because of its own dependency. Its cause is exc (the intermediate nodes stay lazy
    on a cluster: there is no CancelledError of theirs to chain)."""
    failed = failed_in(exc)
    for d in node.dependencies:
        if dask_key(d) == failed:
            return core._cancelled_error(node.key, core._dependency_reason(d.key, State.FAILED), exc)
    stack, seen = [(d, d) for d in node.dependencies], set()
    while stack:  # which direct dependency leads to the failed one
        via, n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if dask_key(n) == failed:
            return core._cancelled_error(
                node.key, core._dependency_reason(via.key, State.CANCELLED), exc)
        stack.extend((via, d) for d in n.dependencies)
    return core._cancelled_error(node.key, f"task {key_of(failed)}, which it depends on, failed",
                                 exc)


def settle_from(node, fut, failing_parent=None):
    """Finishes a claimed node from its (finished) future. failing_parent: (key, exception) of
    the task that spawned it, if that task failed and cancelled its future."""
    if fut.status == "finished":
        try:
            core._settle(node, State.DONE, fut.result())
            return
        except BaseException as e:  # the result could not be fetched
            core._settle(node, State.FAILED, e)
            return
    if fut.status == "error":
        exc = error_of(fut)
        if failed_in(exc) in (dask_key(node), None):  # it failed (None: on the cluster,
            core._settle(node, State.FAILED, exc)      # e.g. distributed's KilledWorker)
        else:  # dask's erred state of a task whose dependency failed: it never ran
            core._settle(node, State.CANCELLED, _dependency_error(node, exc))
        return
    if failing_parent is not None:
        key, exc = failing_parent
        cancel_node(node, f"its parent task {key} failed", exc)
        return
    core._settle(node, State.CANCELLED,
                 CancelledError(f"task {node.key} was cancelled on the cluster"))


def payload(node_key, dkey, entry, parent, dep_keys, traced, scheduler_class):
    """The bytes a dask task carries: everything the worker side needs, pickled (and so
    checked) here, before anything is submitted. Traces name tasks by their dask keys (node
    keys are unique only within the process that made the nodes). scheduler_class (by
    reference): the backend a task's own compute() uses there (DaskScheduler; passed along
    so that the worker side does not import the client side)."""
    # As a Task: a module-level task then travels by reference (Task.__reduce__).
    doc = {"key": node_key, "dkey": dkey, "name": entry.name, "fn": entry.task(),
           "args": entry.args, "nargs": entry.nargs, "kwnames": entry.kwnames,
           "parent": parent, "deps": dep_keys, "traced": traced,
           "scheduler_class": scheduler_class}
    try:
        return cloudpickle.dumps(doc)
    except Exception as exc:
        err = pickling_error([entry], exc, "cannot be sent to the cluster")
        raise err from err.__cause__
