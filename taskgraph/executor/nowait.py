"""Starting lazy nodes without waiting for them (as ``ray.wait`` does): what ``tg.wait``,
``tg.as_completed`` and ``await node`` do with a node that was never computed."""
from __future__ import annotations

import threading

from taskgraph import runs
from taskgraph._native import core
from taskgraph.scheduler import Scheduler, current_scheduler

__all__ = ["submit_nowait"]


def submit_nowait(nodes):
    """Starts the lazy nodes among ``nodes`` on the current scheduler and returns at once.

    Each lazy node is submitted as a compute of its own (a failure of one does not cancel the
    others, as with independent futures; nodes they share run once). In serial mode a lazy
    node runs at once, in this thread. On another backend (dask) the compute runs in a
    background thread. Raises what submitting raises (``SchedulerClosedError`` on a closed
    scheduler); never waits for a task."""
    lazy = [n for n in dict.fromkeys(nodes) if n.state == "new"]
    if not lazy:
        return
    if core.in_serial():
        for n in lazy:
            n.exception()  # runs it here, now
        return
    sched = current_scheduler()
    if isinstance(sched, Scheduler):
        sched._check_open()
        if runs.after_fork:
            runs.refuse_nodes_of_runs_before_fork(lazy)
        for n in lazy:
            if n.state == "new":  # not claimed meanwhile (by another node's submission)
                sched._engine.submit(sched._engine.new_run(), [n])
        return
    threading.Thread(target=_compute_in_background, args=(sched, lazy), daemon=True,
                     name="taskgraph-submit").start()


def _compute_in_background(backend, nodes):
    """A backend's compute, in a thread of its own. Whatever it could not finish (it failed
    before claiming them) is cancelled, so that nobody waits forever; the error itself goes to
    threading.excepthook."""
    try:
        backend._run(nodes)  # failures stay on the nodes (their waiters raise them)
    except BaseException:
        for n in nodes:
            if not n.done():
                n.cancel()
        raise
