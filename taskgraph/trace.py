"""Execution traces: what ran where and when, work/span analysis, save/load, Chrome timeline.

``with taskgraph.trace() as tr:`` records every task run (or cancelled) while the block is
open, on every scheduler. Each worker appends to its own buffer (a per-worker
``WorkerRecorder``; no shared list in the hot loop); the buffers are merged when the block
ends. With no trace open the workers pay one attribute check per task.

Work/span model (docs/trace.md): a task's *own time* is its run time minus the time it spent
inside joins (where the worker ran other tasks or waited) and minus garbage collections that
happened meanwhile (free-threaded CPython stops every thread for a collection; without this
a 2 us task that happens to be running during a 3 ms collection would dominate the span). The span is the longest path in
the executed graph where a task starts after its data dependencies end and after its parent's
own time (spawned children run after the parent's own work), and a task ends after its own
time and after all its children end (implicit join). parallelism = work / span.
"""
from __future__ import annotations

import gc
import itertools
import json
import os
import threading
import time
from dataclasses import dataclass, field

import msgpack

from taskgraph import _context
from taskgraph._native import lib

__all__ = ["Trace", "TaskRecord", "TraceFormatError", "trace", "write_trace_files"]

FORMAT = "taskgraph-trace"
VERSION = 1
_perf_ns = time.perf_counter_ns
_recorder_numbers = itertools.count(1 << 20)  # id prefixes, apart from thread numbers

# Total ns spent in garbage collection while a trace is open, updated by the collecting thread
# (gc.callbacks); read by recorders at the start and end of each task. Collections stop every
# thread, so no task starts or ends during one: the difference over a task is the collection
# time inside it.
_gc_ns = [0]
_gc_start = [0]


def _gc_callback(phase, info):
    if phase == "start":
        _gc_start[0] = _perf_ns()
    elif _gc_start[0]:
        _gc_ns[0] += _perf_ns() - _gc_start[0]
        _gc_start[0] = 0

# Node slots used here (see taskgraph/node.py).
_DEPS, _T, _ST, _VAL, _PARENT, _NAME, _ID = 3, 4, 5, 6, 9, 12, 13
_STATE = {4: "done", 5: "failed", 6: "cancelled"}


class TraceFormatError(ValueError):
    """A trace file that is not a taskgraph trace, is truncated, or is of another version."""


@dataclass
class TaskRecord:
    """One executed (or cancelled) task."""
    key: str
    name: str
    worker: int             # worker index within its scheduler
    scheduler: int          # Scheduler.number
    start: int              # ns, time.perf_counter_ns (monotonic)
    end: int
    own: int                # ns of its own work: run time minus time inside joins
    parent: str | None      # key of the task that spawned it
    deps: list = field(default_factory=list)   # keys of its data dependencies
    stolen: bool = False
    state: str = "done"     # done / failed / cancelled
    error_type: str | None = None
    error: str | None = None

    @property
    def duration(self) -> int:
        return self.end - self.start

    @property
    def lane(self) -> str:
        """Worker name across schedulers: ``s<scheduler>.w<worker>``."""
        return f"s{self.scheduler}.w{self.worker}"


_FIELDS = ("key", "name", "worker", "scheduler", "start", "end", "own", "parent", "deps",
           "stolen", "state", "error_type", "error")


class WorkerRecorder:
    """One worker's buffer for one trace. Touched only by that worker's thread."""

    __slots__ = ("rows", "prefix", "seq", "stack", "sched_no", "index")

    def __init__(self, sched_no, index):
        self.rows = []
        self.prefix = next(_recorder_numbers) << 40
        self.seq = 0
        self.stack = []      # join time accumulated by each task running on this thread
        self.sched_no = sched_no
        self.index = index

    def _id(self, node):
        i = node[_ID]
        if not i:  # settled in C: a thief naming a parent and its owner agree
            self.seq += 1
            i = node[_ID] = lib.tg_task_set_id(node[_T], self.prefix | self.seq)
        return i

    def run(self, worker, node, gcns=_gc_ns):
        """Runs node through worker._run and records it."""
        parent = node[_PARENT]
        deps = node[_DEPS]
        dep_ids = [self._id(d) for d in deps] if deps else ()
        stack = self.stack
        frame = [0, 0]  # time inside joins, collection time inside those joins
        stack.append(frame)
        g0 = gcns[0]
        t0 = _perf_ns()
        final = worker._run(node)
        t1 = _perf_ns()
        stack.pop()
        joined = frame[0] + (gcns[0] - g0) - frame[1]  # joins, plus collections outside them
        exc = node[_VAL] if final != 4 else None
        self.rows.append((self._id(node), node[_NAME], self._id(parent) if parent is not None else 0,
                          dep_ids, t0, t1, t1 - t0 - joined, node[_T].stolen, final,
                          type(exc).__name__ if exc is not None else None,
                          str(exc) if exc is not None else None))
        return final

    def joined(self, ns, gc_ns):
        """Adds time spent inside a join (and the collection time within it) to the task
        running on this thread."""
        if self.stack:
            frame = self.stack[-1]
            frame[0] += ns
            frame[1] += gc_ns

    def skipped(self, worker, node):
        t = _perf_ns()
        parent = node[_PARENT]
        deps = node[_DEPS]
        exc = node[_VAL]
        self.rows.append((self._id(node), node[_NAME], self._id(parent) if parent is not None else 0,
                          [self._id(d) for d in deps] if deps else (), t, t, 0, node[_T].stolen,
                          6, type(exc).__name__, str(exc)))


def _key(name, i):
    return f"{name}-{i >> 40}.{i & 0xFFFFFFFFFF}"


# ---------------------------------------------------------------------- the trace object
class Trace:
    """The tasks recorded by one ``taskgraph.trace()`` block (or loaded from a file).

    Attributes: ``records`` (list of TaskRecord, in start order), ``workers`` (number of
    distinct worker lanes seen), ``work``, ``span``, ``parallelism`` (computed on first use).
    Methods: ``summary()``, ``critical_path()``, ``save(path)``, ``Trace.load(path)``,
    ``to_chrome_trace(path)``, ``visualize(path, ...)``.
    """

    def __init__(self, records=None, meta=None):
        self._records: list[TaskRecord] | None = list(records or [])
        self.meta = dict(meta or {})
        self._recorders = []
        self._raw = None        # per-worker rows, turned into records on first use
        self._analysis = None
        self._open = False

    @property
    def records(self) -> list:
        """The TaskRecords, in start order (built from the workers' buffers on first use)."""
        if self._records is None:
            self._build()
        return self._records

    # --------------------------------------------------------- recording
    def __enter__(self):
        _registry.start(self)
        self._open = True
        return self

    def __exit__(self, *exc):
        _registry.stop(self)
        self._open = False
        self._raw, self._recorders = self._recorders, []
        self._records = None  # built on first use: closing the block stays cheap
        self.meta.setdefault("created", time.time())
        self._analysis = None

    def _new_recorder(self, sched_no, index):
        rec = WorkerRecorder(sched_no, index)
        self._recorders.append(rec)
        return rec

    def _build(self):
        names = {}
        rows = []
        for rec in self._raw or ():
            for row in rec.rows:
                names[row[0]] = row[1]
                rows.append((rec, row))
        self._raw = None
        out = []
        for rec, (i, name, parent, deps, t0, t1, own, stolen, final, et, em) in rows:
            out.append(TaskRecord(
                key=_key(name, i), name=name, worker=rec.index, scheduler=rec.sched_no,
                start=t0, end=t1, own=max(own, 0),
                parent=_key(names.get(parent, "?"), parent) if parent else None,
                deps=[_key(names.get(d, "?"), d) for d in deps], stolen=bool(stolen),
                state=_STATE.get(final, "failed"), error_type=et, error=em))
        out.sort(key=lambda r: (r.start, r.end))
        self._records = out

    # --------------------------------------------------------- analysis
    def _analyse(self):
        if self._analysis is None:
            self._analysis = _analyse(self.records)
        return self._analysis

    @property
    def work(self) -> int:
        """T1: total own time of all tasks, ns."""
        return self._analyse()["work"]

    @property
    def span(self) -> int:
        """T_inf: the longest path through spawn, join and data edges, weighted by own time, ns."""
        return self._analyse()["span"]

    @property
    def parallelism(self) -> float:
        """work / span (1.0 for an empty trace)."""
        a = self._analyse()
        return a["work"] / a["span"] if a["span"] else 1.0

    @property
    def wall(self) -> int:
        """From the first start to the last end, ns."""
        if not self.records:
            return 0
        return max(r.end for r in self.records) - min(r.start for r in self.records)

    @property
    def workers(self) -> int:
        return len({r.lane for r in self.records})

    def critical_path(self) -> list[str]:
        """Keys of the tasks on the longest path, first to last."""
        return list(self._analyse()["path"])

    def summary(self) -> str:
        """A readable report: work, span, parallelism, the speed-up bound min(P, T1/T_inf) next
        to the speed-up achieved (work / wall time), per-worker busy and idle time, steals,
        failures."""
        recs = self.records
        if not recs:
            return "taskgraph trace: no tasks recorded"
        a = self._analyse()
        P = self.workers
        wall = self.wall
        par = self.parallelism
        lines = [
            f"taskgraph trace: {len(recs)} tasks on {P} worker(s), wall {_ms(wall)}",
            f"  work  T1     {_ms(a['work'])}   (sum of the tasks' own time)",
            f"  span  T_inf  {_ms(a['span'])}   (critical path: {len(a['path'])} tasks)",
            f"  parallelism  T1/T_inf = {par:.2f}",
            f"  speed-up bound min(P, T1/T_inf) = {min(P, par):.2f}; achieved T1/wall = "
            f"{a['work'] / wall if wall else 0:.2f}",
        ]
        by_lane = {}
        for r in recs:
            d = by_lane.setdefault(r.lane, [0, 0, 0])
            d[0] += r.own
            d[1] += 1
            d[2] += r.stolen
        lines.append("  worker        tasks   stolen     busy       idle")
        for lane in sorted(by_lane):
            busy, n, st = by_lane[lane]
            lines.append(f"  {lane:12} {n:6d} {st:8d} {_ms(busy):>10} {_ms(max(wall - busy, 0)):>10}")
        failed = [r for r in recs if r.state == "failed"]
        cancelled = sum(r.state == "cancelled" for r in recs)
        if failed or cancelled:
            lines.append(f"  failed {len(failed)}, cancelled {cancelled}")
            for r in failed[:5]:
                lines.append(f"    {r.key}: {r.error_type}: {r.error}")
        return "\n".join(lines)

    # --------------------------------------------------------- files
    def save(self, path) -> None:
        """Writes the trace as msgpack (format "taskgraph-trace", version 1)."""
        doc = {"format": FORMAT, "version": VERSION, "meta": self.meta, "fields": list(_FIELDS),
               "records": [[getattr(r, f) for f in _FIELDS] for r in self.records]}
        with open(path, "wb") as f:
            f.write(msgpack.packb(doc, use_bin_type=True))

    @classmethod
    def load(cls, path) -> "Trace":
        """Reads a trace written by ``save``. A file that is not a taskgraph trace, is
        truncated or damaged raises ``TraceFormatError`` saying so (OSError if unreadable)."""
        with open(path, "rb") as f:
            data = f.read()
        try:
            doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
        except Exception as e:  # msgpack raises several types for damaged input
            raise TraceFormatError(f"{path}: not a taskgraph trace (damaged or truncated: "
                                   f"{type(e).__name__}: {e})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise TraceFormatError(f"{path}: not a taskgraph trace file")
        if doc.get("version") != VERSION:
            raise TraceFormatError(f"{path}: trace version {doc.get('version')!r}, this "
                                   f"taskgraph reads version {VERSION}")
        fields = doc.get("fields")
        rows = doc.get("records")
        if list(fields or ()) != list(_FIELDS) or not isinstance(rows, list):
            raise TraceFormatError(f"{path}: damaged taskgraph trace (bad field list)")
        try:
            recs = [TaskRecord(**dict(zip(_FIELDS, row))) for row in rows]
            for r in recs:
                if not (isinstance(r.start, int) and isinstance(r.end, int) and isinstance(r.key, str)):
                    raise TypeError("bad field types")
        except TypeError as e:
            raise TraceFormatError(f"{path}: damaged taskgraph trace ({e})") from None
        return cls(recs, doc.get("meta"))

    def to_chrome_trace(self, path=None):
        """The timeline in Chrome's trace-event format (open in Perfetto or chrome://tracing):
        one process per scheduler, one track per worker, one complete event per task. Returns
        the JSON object; writes it to path if given."""
        if self.records:
            t0 = min(r.start for r in self.records)
        events = []
        lanes = sorted({(r.scheduler, r.worker) for r in self.records})
        for s, w in lanes:
            events.append({"ph": "M", "name": "thread_name", "pid": s, "tid": w,
                           "args": {"name": f"worker {w}"}})
        for s in sorted({s for s, _ in lanes}):
            events.append({"ph": "M", "name": "process_name", "pid": s, "tid": 0,
                           "args": {"name": f"taskgraph scheduler {s}"}})
        for r in self.records:
            args = {"key": r.key, "state": r.state, "stolen": r.stolen, "own_us": r.own / 1e3}
            if r.parent:
                args["parent"] = r.parent
            if r.deps:
                args["deps"] = r.deps
            if r.error_type:
                args["error"] = f"{r.error_type}: {r.error}"
            events.append({"ph": "X", "name": r.name, "cat": r.state, "pid": r.scheduler,
                           "tid": r.worker, "ts": (r.start - t0) / 1e3,
                           "dur": max(r.end - r.start, 1) / 1e3, "args": args})
        doc = {"traceEvents": events, "displayTimeUnit": "ms"}
        if path is not None:
            with open(path, "w") as f:
                json.dump(doc, f)
        return doc

    def visualize(self, path, **options):
        """Draws the executed graph; see ``taskgraph.viz.draw_trace`` for the options."""
        from taskgraph.viz import draw_trace  # viz imports trace, not the other way round
        return draw_trace(self, path, **options)

    def __len__(self):
        return len(self.records)

    def __repr__(self):
        if self._open:
            return "<taskgraph.Trace (recording)>"
        return f"<taskgraph.Trace {len(self.records)} tasks>"


def _ms(ns):
    return f"{ns / 1e6:.3f} ms"


def _analyse(records):
    """work, span and critical path of the executed graph.

    Each task v has three events: start S_v, own work done O_v = S_v + own(v), end E_v.
    Edges: S_v -> O_v (weight own(v)), O_v -> E_v, O_parent -> S_child (a child starts after
    its parent's own work), E_child -> E_parent (implicit join), E_dep -> S_v (data). The span
    is the longest path (Kahn's order, iterative: any depth)."""
    n = len(records)
    if not n:
        return {"work": 0, "span": 0, "path": []}
    index = {r.key: i for i, r in enumerate(records)}
    succ = [[] for _ in range(3 * n)]
    indeg = [0] * (3 * n)

    def edge(a, b):
        succ[a].append(b)
        indeg[b] += 1

    for i, r in enumerate(records):
        edge(3 * i, 3 * i + 1)
        edge(3 * i + 1, 3 * i + 2)
        p = index.get(r.parent)
        if p is not None:
            edge(3 * p + 1, 3 * i)
            edge(3 * i + 2, 3 * p + 2)
        for d in r.deps:
            j = index.get(d)
            if j is not None:
                edge(3 * j + 2, 3 * i)
    dist = [0] * (3 * n)
    prev = [-1] * (3 * n)
    ready = [v for v in range(3 * n) if indeg[v] == 0]
    while ready:
        v = ready.pop()
        i, kind = divmod(v, 3)
        dv = dist[v] + (records[i].own if kind == 0 else 0)  # weight of S_v -> O_v
        for u in succ[v]:
            if dv > dist[u] or prev[u] < 0 and dv == dist[u]:
                dist[u] = dv
                prev[u] = v
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    ends = range(2, 3 * n, 3)
    last = max(ends, key=lambda v: dist[v])
    path = []
    v = last
    while v >= 0:
        i, kind = divmod(v, 3)
        if kind == 1 and (not path or path[-1] != records[i].key):
            path.append(records[i].key)  # the path went through this task's own work
        v = prev[v]
    path.reverse()
    return {"work": sum(r.own for r in records), "span": dist[last], "path": path}


# ---------------------------------------------------------------------- the registry
class _Registry:
    """Open traces, and the schedulers whose workers record into them. Touched when a trace
    opens or closes and when a scheduler starts: never per task. Workers read only their own
    ``recorder`` attribute, which this sets (a reference store)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.traces = []

    def start(self, tr):
        with self.lock:
            if self.traces:
                raise RuntimeError("taskgraph.trace() blocks cannot be nested or overlap")
            self.traces.append(tr)
            gc.callbacks.append(_gc_callback)
            for sched in _context.api("live_schedulers")():
                self._attach(tr, sched)

    def _attach(self, tr, sched):
        for w in sched._workers:
            w.recorder = tr._new_recorder(sched.number, w.index)

    def scheduler_started(self, sched):
        with self.lock:
            for tr in self.traces:
                self._attach(tr, sched)

    def stop(self, tr):
        with self.lock:
            self.traces.remove(tr)
            if _gc_callback in gc.callbacks:
                gc.callbacks.remove(_gc_callback)
            for sched in _context.api("live_schedulers")():
                for w in sched._workers:
                    w.recorder = None
        # Let workers finish the record they may be writing (a recorder is only appended to
        # by its worker; a task still running keeps its recorder object alive until done).
        time.sleep(0.001)


_registry = _Registry()


def trace() -> Trace:
    """``with taskgraph.trace() as tr:`` records every task that runs (or is cancelled) on any
    scheduler while the block is open; after the block, ``tr`` holds the records. Blocks do
    not nest (RuntimeError). Tasks still running when the block closes are recorded if they
    finish within the closing, else left out."""
    return Trace()


def write_trace_files(tr: Trace, prefix, *, quiet: bool = False) -> list:
    """Writes PREFIX.tgtrace, PREFIX.json (timeline) and PREFIX.svg (executed graph; only
    PREFIX.dot, with a message, when Graphviz is missing) and prints the summary unless quiet.
    Returns the paths written."""
    from taskgraph.viz import GraphvizError, draw_trace  # viz imports this module: import late
    d = os.path.dirname(os.fspath(prefix))
    if d:
        os.makedirs(d, exist_ok=True)
    written = [f"{prefix}.tgtrace", f"{prefix}.json"]
    tr.save(written[0])
    tr.to_chrome_trace(written[1])
    try:
        written.append(draw_trace(tr, f"{prefix}.svg"))
    except GraphvizError as e:
        written.append(e.dot_path)
        if not quiet:
            print(f"  {e}")
    if not quiet:
        print(tr.summary())
        print("  wrote " + ", ".join(written))
    return written
