"""The client side of the dask backend (taskgraph.dask): DaskScheduler turns a compute into
one dask graph, waits for it (fail fast, deadline, Ctrl-C) and finishes the Nodes from their
futures; traced computes read the workers' records back.

The same @task code on a dask.distributed cluster (``distributed`` is imported only when
``taskgraph.dask.DaskScheduler`` is first used)::

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

The worker side is taskgraph.dask.worker (each task runs through the one task runner of
csrc/py/rules.c, as on the native scheduler), what both share taskgraph.dask.futures.
"""
from __future__ import annotations

import itertools
import queue
import time

import distributed

from taskgraph._backend import compute_on
from taskgraph.dask.futures import (cancel_node, dask_key, error_of, failed_in, key_of, payload,
                                     settle_from)
from taskgraph.dask.worker import drain_records, run_remote
from taskgraph._graph import export, walk
from taskgraph._native import core
from taskgraph._state import State
from taskgraph.errors import SchedulerClosedError
from taskgraph.scheduler import use_scheduler
from taskgraph.trace import TaskRecord, open_trace

__all__ = ["DaskScheduler"]

_numbers = itertools.count(1)
_POLL = 0.1  # how often a waiting client looks at Ctrl-C and its deadline


def _settle_batch(client, ended):
    """Finishes the claimed nodes of ended (future, node) pairs: the results of the finished
    ones are fetched in one call (one round trip to the client's event loop, not one each).
    Returns the first exception among them, or None."""
    ok = [(f, n) for f, n in ended if f.status == "finished"]
    if ok:
        try:
            values = client.gather([f for f, _ in ok])
        except BaseException:  # a result could not be fetched: settle them one by one
            values = None
        for i, (f, n) in enumerate(ok):
            if values is None:
                settle_from(n, f)
            else:
                core._settle(n, State.DONE, values[i])
    root = None
    for f, n in ended:
        if f.status != "finished":
            settle_from(n, f)
            if f.status == "error" and root is None:
                root = error_of(f)
    return root


class DaskScheduler:
    """A taskgraph scheduler that runs tasks on a ``distributed.Client``'s cluster.

    Use it as ``tg.compute(..., scheduler=ds)``, or as a context manager (``with ds:``) that
    makes it the current scheduler for ``tg.compute`` and ``node.result()`` in this thread;
    leaving the block does not close the client, which stays yours. Errors: ``TypeError`` if
    ``client`` is not a ``distributed.Client``; a closed client makes ``compute`` raise
    ``taskgraph.SchedulerClosedError``.
    """

    def __init__(self, client):
        if not isinstance(client, distributed.Client):
            raise TypeError(f"DaskScheduler needs a distributed.Client, got {client!r}")
        self.client = client
        self.number = next(_numbers)

    def __repr__(self):
        return f"<taskgraph.dask.DaskScheduler #{self.number} {self.client.scheduler.address if self.client.scheduler else '?'}>"

    @property
    def closed(self) -> bool:
        return self.client.status not in ("running", "connecting", "newly-created")

    def __enter__(self):
        use_scheduler(self).__enter__()
        return self

    def __exit__(self, *exc):
        use_scheduler(self).__exit__()

    def compute(self, *args, timeout: float | None = None, progress: bool = False):
        """As ``taskgraph.compute`` on the cluster: returns args with the Nodes replaced by their
        values. ``progress`` is accepted for the same signature and ignored (dask has its
        dashboard). Errors as locally (see the module); ``timeout`` is a deadline, as locally:
        what the compute submitted is cancelled on the cluster and ``TimeoutError`` raised."""
        return compute_on(self, args, timeout, progress)

    # ------------------------------------------------------------------ the Backend protocol
    def _check_open(self):
        if self.closed:
            raise SchedulerClosedError(f"{self!r}: the client is {self.client.status}")

    def _runs_current_task(self):
        return False  # a task on a dask worker computes through a new dask graph

    def _run(self, nodes, timeout=None, progress=False, cancel_on_timeout=False):
        """Runs the lazy graph under nodes on the cluster and finishes the target nodes.
        Returns the exception of the first task that failed (the root cause), or None."""
        targets = list(dict.fromkeys(nodes))  # unique, in order
        order, other = walk(targets)
        for n in other:  # running elsewhere (a local scheduler): wait for it here
            n.exception()
        if other:
            order, other = walk(targets)
        # Nodes whose dependency failed never run, as locally.
        bad = {}
        for n in order:
            for d in n.dependencies:
                if d in bad or State.of(d) in (State.FAILED, State.CANCELLED):
                    bad[n] = d
                    break
        claimed = [t for t in targets if State.of(t) is State.NEW and core._claim(t)]
        futures = []
        try:
            for n, d in bad.items():
                if n in claimed:
                    cause = d.exception() if d.done() else None
                    st = State.of(d)
                    cancel_node(n, core._dependency_reason(
                        d.key, st if st is State.FAILED else State.CANCELLED), cause)
            order = [n for n in order if n not in bad]
            entries, index = export(order)
            traced = open_trace() is not None
            keys = [dask_key(n) for n in order]
            dsk = {}
            for i, (n, e) in enumerate(zip(order, entries)):
                deps = [keys[j] for j in e.deps]
                data = payload(n.key, keys[i], e, None, deps, traced, DaskScheduler)
                dsk[keys[i]] = (run_remote, data, *deps)
            want = [t for t in claimed if t in index]
            if want:
                futures = self.client.get(dsk, [keys[index[t]] for t in want], sync=False)
            root = self._wait(want, futures, timeout, cancel_on_timeout)
        except _Timeout:  # the work goes on; the nodes finish when it does
            raise
        except BaseException as e:
            # Ctrl-C, or a failure to send the graph: what was submitted is cancelled, and
            # nothing this compute claimed stays unfinished.
            if futures:
                self.client.cancel(futures)
            why = ("interrupted (KeyboardInterrupt)" if isinstance(e, KeyboardInterrupt)
                   else "its compute could not be submitted")
            for t in claimed:
                if not t.done():
                    cancel_node(t, why)
            raise
        if traced:
            self._collect_traces()
        return root

    def _wait(self, targets, futures, timeout, cancel_on_timeout):
        """Waits for the futures of the targets; settles each target. Fail fast: the first
        failure cancels the rest. (Ctrl-C: the caller cancels.) Each future reports its end on
        a queue (one callback each: no rescan of the pending set per wake-up); the wait wakes
        every _POLL seconds for Ctrl-C and the deadline."""
        if not futures:
            return None
        pending = dict(zip(futures, targets))
        ended = queue.SimpleQueue()
        for fut in futures:
            fut.add_done_callback(ended.put)
        deadline = None if timeout is None else time.monotonic() + timeout
        root = None
        while pending:
            left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
            if left <= 0:
                if cancel_on_timeout:  # compute(timeout=): a deadline
                    self.client.cancel(list(pending))
                    for node in pending.values():
                        cancel_node(node, f"the compute timed out after {timeout} s")
                    raise _Timeout(f"compute did not finish within {timeout} s: what it "
                                   "submitted was cancelled on the cluster")
                for fut, node in pending.items():  # result(timeout): finish them when the work does
                    fut.add_done_callback(lambda f, n=node: settle_from(n, f))
                raise _Timeout(f"not done within {timeout} s (the work goes on; call result() "
                               "to wait again)")
            try:
                batch = [ended.get(timeout=left)]
            except queue.Empty:
                continue
            while True:  # whatever else ended meanwhile: its results in one gather
                try:
                    batch.append(ended.get_nowait())
                except queue.Empty:
                    break
            batch = [f for f in batch if f in pending]
            root = _settle_batch(self.client, [(f, pending.pop(f)) for f in batch]) or root
            if root is not None and pending:  # fail fast
                self.client.cancel(list(pending))
                for node in pending.values():  # as locally: names the top-level task
                    cancel_node(node, f"task {key_of(failed_in(root))} failed", root)
                pending.clear()
        return root

    def _collect_traces(self):
        tr = open_trace()
        if tr is None:
            return
        per_worker = self.client.run(drain_records)
        offset = time.perf_counter_ns() - time.time_ns()  # the trace's clock (same host)
        addresses = sorted(per_worker)
        recs = []
        for i, addr in enumerate(addresses):
            for r in per_worker[addr]:
                recs.append(TaskRecord(
                    key=r["key"], name=r["name"], worker=i, scheduler=0,  # 0: a cluster
                    start=r["start"] + offset, end=r["end"] + offset, own=r["own"],
                    parent=r["parent"], deps=list(r["deps"]), stolen=False, state=r["state"],
                    error_type=r["error_type"], error=r["error"], where=addr,
                    attempt=r["attempt"]))
        tr.add_records(recs)


class _Timeout(TimeoutError):
    """compute(timeout=...) expired: the work goes on (a TimeoutError to the caller)."""
