"""The same @task code on a dask.distributed cluster (an optional extra: ``pip install
"taskgraph-ft[dask]"``).

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
"""
from __future__ import annotations

import itertools
import os
import queue
import threading
import time
import uuid

import cloudpickle
import distributed

from taskgraph._graph import Entry, export, pickling_error, walk
from taskgraph._native import core
from taskgraph.errors import CancelledError, SchedulerClosedError, TaskgraphError
from taskgraph.runs import check_timeout, raise_first_error
from taskgraph.scheduler import use_scheduler
from taskgraph.serial import run_serially
from taskgraph.trace import TaskRecord, _add_records, open_trace

__all__ = ["DaskScheduler"]

_DONE, _FAILED, _CANCELLED = core.DONE, core.FAILED, core.CANCELLED
_NEW = core.STATE_NAMES[core.NEW]
# One token per process: dask keys must be unique on the cluster, and node keys are unique
# only within the process that made the nodes.
_TOKEN = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
_numbers = itertools.count(1)
_POLL = 0.1  # how often a waiting client looks at Ctrl-C and its deadline


def _dask_key(node):
    return f"{node.key}@{_TOKEN}"


# The dask key of the task whose outcome an exception is (set by _run_remote when a task fails
# with it, again at each task it propagates through). dask gives a task whose dependency
# failed that dependency's exception: this mark tells the two apart. Not the note's
# __taskgraph_task__, which names the task that raised it first (maybe a child, levels down).
_FAILED_IN = "__taskgraph_failed_in__"


def _failed_in(exc):
    return getattr(exc, _FAILED_IN, None)


def _key_of(dkey):
    """The node key in a dask key (what traces and messages call the task)."""
    return dkey.rpartition("@")[0] if dkey else "?"


def _error_of(fut):
    """The exception of an erred future, with its traceback (the task's frames)."""
    exc = fut.exception()
    tb = fut.traceback()
    if exc.__traceback__ is None and tb is not None:
        exc = exc.with_traceback(tb)
    return exc


def _dependency_error(node, exc):
    """The CancelledError of a node that never ran because a task it depends on (directly or
    not) failed with exc: as locally, it names the direct dependency that failed, or was
    cancelled because of its own dependency. Its cause is exc (the intermediate nodes stay lazy
    on a cluster: there is no CancelledError of theirs to chain)."""
    failed = _failed_in(exc)
    for d in node.dependencies:
        if _dask_key(d) == failed:
            return _cancel_error(node, f"its dependency {d.key} failed", exc)
    stack, seen = [(d, d) for d in node.dependencies], set()
    while stack:  # which direct dependency leads to the failed one
        via, n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if _dask_key(n) == failed:
            return _cancel_error(node, f"its dependency {via.key} was cancelled", exc)
        stack.extend((via, d) for d in n.dependencies)
    return _cancel_error(node, f"task {_key_of(failed)}, which it depends on, failed", exc)


def _settle_from(node, fut, failing_parent=None):
    """Finishes a claimed node from its (finished) future. failing_parent: (key, exception) of
    the task that spawned it, if that task failed and cancelled its future."""
    if fut.status == "finished":
        try:
            core._settle(node, _DONE, fut.result())
            return
        except BaseException as e:  # the result could not be fetched
            core._settle(node, _FAILED, e)
            return
    if fut.status == "error":
        exc = _error_of(fut)
        if _failed_in(exc) in (_dask_key(node), None):  # it failed (None: on the cluster,
            core._settle(node, _FAILED, exc)             # e.g. distributed's KilledWorker)
        else:  # dask's erred state of a task whose dependency failed: it never ran
            core._settle(node, _CANCELLED, _dependency_error(node, exc))
        return
    if failing_parent is not None:
        key, exc = failing_parent
        _cancel_node(node, f"its parent task {key} failed", exc)
        return
    core._settle(node, _CANCELLED, CancelledError(f"task {node.key} was cancelled on the cluster"))


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
                _settle_from(n, f)
            else:
                core._settle(n, _DONE, values[i])
    root = None
    for f, n in ended:
        if f.status != "finished":
            _settle_from(n, f)
            if f.status == "error" and root is None:
                root = _error_of(f)
    return root


def _cancel_error(node, reason, cause=None):
    """The CancelledError of a node that never ran, in the local scheduler's words."""
    err = CancelledError(f"task {node.key} was cancelled: {reason}")
    err.__cause__ = cause
    return err


def _cancel_node(node, reason, cause=None):
    core._settle(node, _CANCELLED, _cancel_error(node, reason, cause))


def _payload(node_key, dkey, entry, parent, dep_keys, traced):
    """The bytes a dask task carries: everything _run_remote needs, pickled (and so checked)
    here, before anything is submitted. Traces name tasks by their dask keys (node keys are
    unique only within the process that made the nodes)."""
    # As a Task: a module-level task then travels by reference (Task.__reduce__).
    doc = {"key": node_key, "dkey": dkey, "name": entry.name, "fn": entry.task(),
           "args": entry.args, "nargs": entry.nargs, "kwnames": entry.kwnames,
           "parent": parent, "deps": dep_keys, "traced": traced}
    try:
        return cloudpickle.dumps(doc)
    except Exception as exc:
        err = pickling_error([entry], exc, "cannot be sent to the cluster")
        raise err from err.__cause__


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

    # ------------------------------------------------------------------ compute
    def compute(self, *args, timeout: float | None = None, progress: bool = False):
        """As ``taskgraph.compute`` on the cluster: returns args with the Nodes replaced by their
        values. ``progress`` is accepted for the same signature and ignored (dask has its
        dashboard). Errors as locally (see the module); ``timeout`` is a deadline, as locally:
        what the compute submitted is cancelled on the cluster and ``TimeoutError`` raised."""
        if self.closed:
            raise SchedulerClosedError(f"{self!r}: the client is {self.client.status}")
        check_timeout(timeout)
        nodes = core.scan(args)
        if core.in_serial():
            run_serially(nodes)
            root = None
        else:
            root = self._compute_nodes(nodes, timeout, cancel_on_timeout=True)
        raise_first_error(nodes, _Root(root))
        out = core.substitute(args)
        return out[0] if len(out) == 1 else out

    def _compute_nodes(self, nodes, timeout=None, cancel_on_timeout=False):
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
                if d in bad or d.state in ("failed", "cancelled"):
                    bad[n] = d
                    break
        claimed = [t for t in targets if t.state == _NEW and core._claim(t)]
        futures = []
        try:
            for n, d in bad.items():
                if n in claimed:
                    cause = d.exception() if d.done() else None
                    _cancel_node(n, f"its dependency {d.key} "
                                 f"{'failed' if d.state == 'failed' else 'was cancelled'}", cause)
            order = [n for n in order if n not in bad]
            entries, index = export(order)
            traced = open_trace() is not None
            keys = [_dask_key(n) for n in order]
            dsk = {}
            for i, (n, e) in enumerate(zip(order, entries)):
                deps = [keys[j] for j in e.deps]
                dsk[keys[i]] = (_run_remote, _payload(n.key, keys[i], e, None, deps, traced), *deps)
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
                    _cancel_node(t, why)
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
                        _cancel_node(node, f"the compute timed out after {timeout} s")
                    raise _Timeout(f"compute did not finish within {timeout} s: what it "
                                   "submitted was cancelled on the cluster")
                for fut, node in pending.items():  # result(timeout): finish them when the work does
                    fut.add_done_callback(lambda f, n=node: _settle_from(n, f))
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
                    _cancel_node(node, f"task {_key_of(_failed_in(root))} failed "
                                 f"({type(root).__name__})", root)
                pending.clear()
        return root

    def _collect_traces(self):
        tr = open_trace()
        if tr is None:
            return
        per_worker = self.client.run(_drain_records)
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
        _add_records(tr, recs)


class _Timeout(TimeoutError):
    """compute(timeout=...) expired: the work goes on (a TimeoutError to the caller)."""


class _Root:
    """raise_first_error's view of a dask compute: the root cause, if any."""

    def __init__(self, error):
        self.error = error


# ---------------------------------------------------------------------- on the workers
_RECORDS = []                     # this worker process's task records (traced computes)
_RECORDS_LOCK = threading.Lock()


def _drain_records():
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


def _mark_failed(exc, dkey):
    """Marks exc as the outcome of the task dkey (see _FAILED_IN)."""
    try:
        setattr(exc, _FAILED_IN, dkey)
    except (AttributeError, TypeError):  # pragma: no cover - exotic exception objects
        pass


def _note(exc, key):
    """The note naming where a task's exception was raised (the rule of csrc/py/worker.c)."""
    core._note_origin(exc, key, f"on dask worker {_worker_address()}")


class _TaskContext:
    """The backend of one task running on a dask worker thread: the tasks it calls are
    submitted to the cluster at once, joins wait seceded, and its children are synced when it
    returns."""

    def __init__(self, key, dkey, traced):
        self.key = key
        self.dkey = dkey
        self.traced = traced
        self.children = {}   # Node -> Future, in spawn order
        self.join_ns = 0

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
            payload = _payload(node.key, _dask_key(node), entry, self.dkey,
                               [_dask_key(d) for d in deps], self.traced)
            fut = distributed.get_client().submit(_run_remote, payload, *[self.children[d] for d in deps],
                                                  key=_dask_key(node), pure=False)
        except BaseException as e:
            core._settle(node, _FAILED, e)
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
            _settle_from(node, fut)

    def sync(self, failing):
        """The implicit join at the end of the task: its children are waited for (cancelled
        if it failed: those that never ran say so, naming it); a child failure nobody looked
        at fails the task."""
        pending = [(n, f) for n, f in self.children.items() if not n.done()]
        if failing is not None and pending:
            distributed.get_client().cancel([f for _, f in pending])
        if pending:
            self._seceded(lambda: _wait_futures([f for _, f in pending]))
            why = None if failing is None else (self.key, failing)
            for n, f in pending:
                if not n.done():
                    _settle_from(n, f, why)
        unobserved = [n for n in self.children if n.state in ("failed", "cancelled")
                      and not core._seen(n)]
        self.children.clear()
        return unobserved


def _call_once(p, ctx, deps):
    """One call of the task: its value, or its exception raised after its children were synced
    (cancelled first); a child failure nobody looked at fails it, as locally."""
    key = p["key"]
    try:
        args = core.from_refs(p["args"], deps, p["name"])
        nargs = p["nargs"]
        value = p["fn"].fn(*args[:nargs], **dict(zip(p["kwnames"], args[nargs:])))
    except BaseException as e:
        try:
            ctx.sync(e)
        except BaseException:  # pragma: no cover - syncing after a failure
            pass
        raise
    unobserved = ctx.sync(None)
    if unobserved:  # as locally: the first fails the task, other failures become notes
        first = unobserved[0].exception()
        for n in unobserved[1:]:
            if n.state == "failed":
                core._note_sibling(first, key, n.key, n.exception())
        raise first
    return value


def _retried(task, exc, attempt):
    """Whether failed attempt `attempt` (0-based) is run again: the rule of csrc/py/worker.c,
    and nobody asked the task to stop (tg.cancelled() on this worker thread)."""
    return core._retry_wanted(task, exc, attempt) and not core.cancelled()


def _record(p, state, err, start, t0, join_ns, attempt, key=None):
    wall = time.perf_counter_ns() - t0
    with _RECORDS_LOCK:
        _RECORDS.append({"key": key or p["dkey"], "name": p["name"], "parent": p["parent"],
                         "deps": p["deps"], "start": start, "end": start + wall,
                         "own": max(0, wall - join_ns), "state": state,
                         "error_type": type(err).__name__ if err else None,
                         "error": str(err) if err else None, "attempt": attempt})


def _run_remote(payload, *deps):
    """A taskgraph task on a dask worker: its arguments filled in, run with this thread's
    backend set to the cluster (again on a failure to retry), recorded if its compute is
    traced."""
    p = cloudpickle.loads(payload)
    key, traced, task = p["key"], p["traced"], p["fn"]
    ctx = _TaskContext(key, p["dkey"], traced)
    client = distributed.get_client()
    prev = core.set_backend(ctx)
    attempt = 0
    try:
        with use_scheduler(DaskScheduler(client)):
            while True:
                start, t0, ctx.join_ns = time.time_ns(), time.perf_counter_ns(), 0
                try:
                    value = _call_once(p, ctx, deps)
                except BaseException as e:
                    if not _retried(task, e, attempt):
                        _note(e, key)
                        _mark_failed(e, p["dkey"])
                        if attempt:
                            core._note_attempts(e, key, attempt + 1, task.retries)
                        if traced:
                            _record(p, "failed", e, start, t0, ctx.join_ns, attempt + 1)
                        raise
                    if traced:
                        _record(p, "retried", e, start, t0, ctx.join_ns, attempt + 1,
                                key=f"{p['dkey']}#{attempt + 1}")
                    attempt += 1
                    continue
                if traced:
                    _record(p, "done", None, start, t0, ctx.join_ns, attempt + 1)
                return value
    finally:
        core.set_backend(prev)
