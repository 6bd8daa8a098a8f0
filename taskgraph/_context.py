"""Per-thread context: which worker (if any) runs on this thread, and serial mode.

This small module is how a running task finds its worker (``current_worker()``) without
importing the scheduler, which keeps imports one-way: the API and the scheduler import this
module, never the other way round. The scheduler registers a few functions here
(``register_api``) so that ``Node.result()`` outside a worker can compute a lazy node.
"""
import contextvars
import itertools
import threading

__all__ = ["SERIAL", "MODE", "mode", "current_worker", "set_worker", "in_serial", "set_serial", "next_node_id",
           "register_api", "api"]


SERIAL = object()  # value of _local.mode inside `with taskgraph.serial()`


# What calling a task does on this thread, read once per call: None (build a lazy node),
# SERIAL (run it now), or the Worker running on this thread (spawn onto its deque). A
# ContextVar, because its get() is about 3x cheaper than a threading.local attribute on 3.13t;
# every thread starts with its own context, so the value is per thread.
MODE = contextvars.ContextVar("taskgraph_mode", default=None)
mode = MODE.get


class _Local(threading.local):
    worker = None      # the Worker object running on this thread, or None
    serial = 0         # depth of `with taskgraph.serial()` blocks on this thread
    thread_no = -1     # process-unique number of this thread, for node keys
    seq = 0            # nodes created on this thread


_local = _Local()
_thread_numbers = itertools.count()  # touched once per thread (first node), not per node


def current_worker():
    """The worker running on this thread, or None outside the workers."""
    return _local.worker


def set_worker(worker):
    _local.worker = worker
    MODE.set(SERIAL if _local.serial else worker)


def in_serial():
    return _local.serial > 0


def set_serial(delta):
    loc = _local
    loc.serial += delta
    MODE.set(SERIAL if loc.serial else loc.worker)


def next_node_id():
    """A process-unique id for a new node: (thread number << 40) | per-thread sequence."""
    loc = _local
    tno = loc.thread_no
    if tno < 0:
        tno = loc.thread_no = next(_thread_numbers)
    seq = loc.seq = loc.seq + 1
    return (tno << 40) | seq


_api = {}


def register_api(**functions):
    """Called once by taskgraph.scheduler: the functions lower modules may call back
    (compute, run_serially, default_scheduler) without importing the scheduler."""
    _api.update(functions)


def api(name):
    try:
        return _api[name]
    except KeyError:  # pragma: no cover - taskgraph/__init__ imports the scheduler
        raise RuntimeError("taskgraph.scheduler was not imported") from None
