"""The worker side of the dask backend (taskgraph.dask): a taskgraph task running on a dask
worker. It runs through the one task runner (core._run_task, csrc/py/rules.c: retries,
end-of-task sync, notes), with this module's _TaskContext as its backend: the tasks it calls
are submitted to the cluster at once, joins wait seceded, its children are synced when it
returns. Traced computes leave records here for the client to collect."""
from __future__ import annotations

import threading
import time

import cloudpickle
import distributed

from taskgraph.dask.futures import dask_key, mark_failed, payload, settle_from
from taskgraph.trace.record import RETRIED as _RETRIED
from taskgraph._graph import Entry
from taskgraph._native import core
from taskgraph._state import State
from taskgraph.errors import TaskgraphError
from taskgraph.scheduler import use_scheduler

__all__ = ["run_remote", "drain_records"]

_RECORDS = []                     # this worker process's task records (traced computes)
_RECORDS_LOCK = threading.Lock()


def drain_records():
    """Run on each worker by the client: its records so far (and forgets them)."""
    with _RECORDS_LOCK:
        out = list(_RECORDS)
        _RECORDS.clear()
    return out


# distributed.wait raises this once every future is done if some were cancelled (recent
# versions): their nodes are then settled from the futures' status like the others.
_FuturesCancelled = getattr(distributed.client, "FuturesCancelledError", ())


def _wait_futures(futures, timeout=None):
    """Waits until every future is done (finished, erred or cancelled)."""
    try:
        distributed.wait(futures, timeout=timeout)
    except _FuturesCancelled:
        pass


def _worker_address():
    try:
        return distributed.get_worker().address
    except ValueError:
        return "?"


class _TaskContext:
    """The backend of one task running on a dask worker thread: spawn and wait (called by the
    C extension for the task's calls and joins), sync and retrying (called by the task runner,
    core._run_task)."""

    def __init__(self, p):
        self.p = p
        self.children = {}   # Node -> Future, in spawn order
        self.start = self.t0 = self.join_ns = 0
        self.attempt = 0
        self.begin()

    def begin(self):
        """A call of the task starts (its trace record's clock)."""
        self.start, self.t0, self.join_ns = time.time_ns(), time.perf_counter_ns(), 0

    def spawn(self, node):
        if not core._claim(node):  # pragma: no cover - a fresh node cannot be claimed already
            raise TaskgraphError(f"node {node.key} was claimed elsewhere")
        deps = [d for d in node.dependencies if d in self.children]
        for d in node.dependencies:  # a dependency that is not ours: it must have finished
            if d not in self.children and not d.done():
                self.wait(d, None)
        try:
            fn, args, nargs, kwnames, retries, retry_on = core._inputs(node)
            index = {d: i for i, d in enumerate(deps)}
            args = core.to_refs(args, index, node.name)
            entry = Entry(node.key, node.name, fn, args, nargs, tuple(kwnames or ()),
                          tuple(range(len(deps))),  # Ref(k) = the k-th future passed along
                          retries=retries, retry_on=retry_on)
            data = payload(node.key, dask_key(node), entry, self.p["dkey"],
                           [dask_key(d) for d in deps], self.p["traced"],
                           self.p["scheduler_class"])
            fut = distributed.get_client().submit(run_remote, data, *[self.children[d] for d in deps],
                                                  key=dask_key(node), pure=False)
        except BaseException as e:
            core._settle(node, State.FAILED, e)
            raise
        self.children[node] = fut

    def _seceded(self, fn):
        """Runs fn (a wait) outside the worker's thread pool: the worker may run other tasks
        meanwhile (the one-thread worker would deadlock otherwise)."""
        t0 = time.perf_counter_ns()
        distributed.secede()
        try:
            return fn()
        finally:
            distributed.rejoin()
            self.join_ns += time.perf_counter_ns() - t0

    def wait(self, node, timeout):
        fut = self.children.get(node)
        if fut is None:  # a node this task did not spawn (running elsewhere): wait seceded
            prev = core.set_backend(None)  # the wait itself must not come back here
            try:
                self._seceded(lambda: node.exception(timeout))
            finally:
                core.set_backend(prev)
            return
        try:
            self._seceded(lambda: _wait_futures([fut], timeout))
        except distributed.TimeoutError:
            raise TimeoutError(f"node {node.key} not done after {timeout} s") from None
        if not node.done():
            settle_from(node, fut)

    def sync(self, failing):
        """The end-of-task sync (for the task runner): the children are waited for (cancelled
        first if the task is failing: those that never ran say so, naming it). Returns them,
        in spawn order; the runner applies the rules to their outcomes."""
        pending = [(n, f) for n, f in self.children.items() if not n.done()]
        if failing is not None and pending:
            distributed.get_client().cancel([f for _, f in pending])
        if pending:
            self._seceded(lambda: _wait_futures([f for _, f in pending]))
            why = None if failing is None else (self.p["key"], failing)
            for n, f in pending:
                if not n.done():
                    settle_from(n, f, why)
        kids = list(self.children)
        self.children.clear()
        return kids

    def retrying(self, exc, attempt):
        """Failed attempt `attempt` (0-based) runs again: its trace record."""
        self.record(_RETRIED, exc, key=f"{self.p['dkey']}#{attempt + 1}")
        self.attempt = attempt + 1
        self.begin()

    def record(self, outcome, err, key=None):
        if not self.p["traced"]:
            return
        p, wall = self.p, time.perf_counter_ns() - self.t0
        with _RECORDS_LOCK:
            _RECORDS.append({"key": key or p["dkey"], "name": p["name"], "parent": p["parent"],
                             "deps": p["deps"], "start": self.start, "end": self.start + wall,
                             "own": max(0, wall - self.join_ns), "state": outcome,
                             "error_type": type(err).__name__ if err else None,
                             "error": str(err) if err else None, "attempt": self.attempt + 1})


def run_remote(data, *deps):
    """A taskgraph task on a dask worker: its arguments filled in, run by the task runner with
    this thread's backend set to the cluster, recorded if its compute is traced."""
    p = cloudpickle.loads(data)
    ctx = _TaskContext(p)

    def call():
        args = core.from_refs(p["args"], deps, p["name"])
        nargs = p["nargs"]
        return p["fn"].fn(*args[:nargs], **dict(zip(p["kwnames"], args[nargs:])))

    prev = core.set_backend(ctx)
    try:
        with use_scheduler(p["scheduler_class"](distributed.get_client())):
            try:
                value = core._run_task(p["fn"], call, ctx, p["key"],
                                       f"on dask worker {_worker_address()}")
            except BaseException as e:
                mark_failed(e, p["dkey"])
                ctx.record(State.FAILED.label, e)
                raise
        ctx.record(State.DONE.label, None)
        return value
    finally:
        core.set_backend(prev)
