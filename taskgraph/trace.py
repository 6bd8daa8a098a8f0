"""Execution traces: what ran where and when, work/span analysis, save/load, Chrome timeline.

``with taskgraph.trace() as tr:`` records every task run (or cancelled) while the block is
open, on every scheduler. Recording happens in C: the worker loop calls an observer
(csrc/py/recorder.c) that writes each finished task into that worker's own C buffer, with no
Python call per task. When the block ends the buffers are detached; this module reads them on
first use, from each Recorder: the records as bytes (unpacked with ``struct``, in the layout
the extension states), the dependency ids, the names and error texts. With no trace open
a worker pays one atomic load per task.

Work, span and the critical path are computed by taskgraph._analysis; pictures are drawn by
taskgraph.viz, which knows nothing about recording (this module imports it, not the other way
round).
"""
from __future__ import annotations

import gc
import json
import os
import struct
import time
from dataclasses import dataclass, field

import msgpack

from taskgraph import _inflation, _predict, _report
from taskgraph._analysis import analyse
from taskgraph._native import core
from taskgraph._paths import fspath
from taskgraph.viz import GraphvizError, draw_trace

__all__ = ["Trace", "TaskRecord", "TraceFormatError", "trace", "write_trace_files"]

FORMAT = "taskgraph-trace"
VERSION = 3  # 2 added `where` (a cluster worker's address), 3 `attempt`; 1 and 2 are read


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
    state: str = "done"     # done / failed / cancelled, or retried (a failed attempt, run again)
    error_type: str | None = None
    error: str | None = None
    where: str | None = None  # the worker's address, for a task run on a cluster (dask)
    attempt: int = 1        # which run of a task with retries this is (its earlier, retried
                            # attempts have keys "<key>#<attempt>")

    @property
    def duration(self) -> int:
        return self.end - self.start

    @property
    def lane(self) -> str:
        """The worker that ran it: ``s<scheduler>.w<worker>``, or its address on a cluster."""
        return self.where or f"s{self.scheduler}.w{self.worker}"


_FIELDS = ("key", "name", "worker", "scheduler", "start", "end", "own", "parent", "deps",
           "stolen", "state", "error_type", "error", "where", "attempt")
# The fields of each version (later versions only add fields at the end).
_VERSION_FIELDS = {1: _FIELDS[:-2], 2: _FIELDS[:-1], 3: _FIELDS}
STATES = ("done", "failed", "cancelled", "retried")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_opt_str(v):
    return v is None or isinstance(v, str)


# What Trace.load accepts in each field of a record (anything else: a damaged file).
_FIELD_OK = {
    "key": lambda v: isinstance(v, str), "name": lambda v: isinstance(v, str),
    "worker": _is_int, "scheduler": _is_int, "start": _is_int, "end": _is_int, "own": _is_int,
    "parent": _is_opt_str, "deps": lambda v: isinstance(v, list) and all(isinstance(d, str) for d in v),
    "stolen": lambda v: isinstance(v, bool), "state": lambda v: v in STATES,
    "error_type": _is_opt_str, "error": _is_opt_str, "where": _is_opt_str,
    "attempt": lambda v: _is_int(v) and v >= 1,
}
assert set(_FIELD_OK) == set(_FIELDS)


def _gc_callback(phase, info):
    """Times each collection in C (a collection stops every thread, so no task starts or ends
    during one): the recorders subtract it from the tasks' own time."""
    core.trace_gc_phase(phase == "start")


def _ticks_to_ns():
    """The map from the records' ticks to ns (csrc/trace.h): a line through the pair taken
    when the extension was loaded and one taken now; the identity when ticks are ns."""
    t0, n0 = core.clock_origin()
    if not core.clock_tsc():
        return lambda t: t, 1.0
    t1, n1 = core.clock_pair()
    scale = (n1 - n0) / (t1 - t0) if t1 > t0 else 1.0
    return (lambda t: n0 + round((t - t0) * scale)), scale


_REC = struct.Struct(core.TRACE_REC_FORMAT)
_REC_FIELDS = core.TRACE_REC_FIELDS
assert _REC.size == core.TRACE_REC_SIZE, "TRACE_REC_FORMAT does not match the C struct"
_STATES = core.STATE_NAMES
_I = {name: i for i, name in enumerate(_REC_FIELDS)}


def _read_recorder(rec):
    """One worker's recorder: (rows of record fields, object table, dependency ids, dropped)."""
    return list(_REC.iter_unpack(rec.records())), rec.objects, rec.ids(), rec.dropped


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
        for r in self._records:
            if not isinstance(r, TaskRecord):
                raise TypeError(f"Trace records must be TaskRecords, got {type(r).__name__} {r!r:.80}")
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f"Trace meta must be a dict, got {type(meta).__name__} {meta!r:.80}")
        self.meta = dict(meta or {})
        self._raw = None        # the workers' recorders, read into records on first use
        self._external = []     # records added by other backends (taskgraph.dask)
        self._clock = None      # (ticks -> ns, ns per tick) for the raw records
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
        core.trace_start()  # RuntimeError if a trace is open already
        gc.callbacks.append(_gc_callback)
        self._open = True
        _OPEN[0] = self
        return self

    def __exit__(self, *exc):
        try:
            gc.callbacks.remove(_gc_callback)
        except ValueError:  # pragma: no cover - removed by someone else
            pass
        _OPEN[0] = None
        self._raw = core.trace_stop()  # waits for any record being written
        self._clock = _ticks_to_ns()
        self._open = False
        self._records = None  # built on first use: closing the block stays cheap
        self.meta.setdefault("created", time.time())
        self._analysis = None

    def _build(self):
        raw = [(rec, _read_recorder(rec)) for rec in self._raw or ()]
        self._raw = None  # frees the C buffers
        ids = {}
        for _, (rows, objects, _, _) in raw:
            for row in rows:
                ids[row[_I["id"]]] = objects[row[_I["name"]]]
        out = []
        dropped = 0
        to_ns, scale = self._clock
        last = {}  # id -> its last attempt (tasks with retries have a record per attempt)
        for _, (rows, _, _, _) in raw:
            for row in rows:
                a = row[_I["attempt"]]
                if a > last.get(row[_I["id"]], 0):
                    last[row[_I["id"]]] = a
        for rec, (rows, objects, dep_ids, lost) in raw:
            dropped += lost
            for (i, parent, t0, t1, own, doff, nd, name, err, worker, stolen, state, att) in rows:
                et, em = objects[err] if err >= 0 else (None, None)
                nm = objects[name]
                start = to_ns(t0)
                end = max(start, to_ns(t1))
                retried = att < last.get(i, 0)
                out.append(TaskRecord(
                    key=_key(nm, i) + (f"#{att + 1}" if retried else ""), name=nm, worker=worker,
                    scheduler=rec.scheduler,
                    start=start, end=end, own=min(round(own * scale), end - start),
                    parent=_key(ids.get(parent, "?"), parent) if parent else None,
                    deps=[_key(ids.get(d, "?"), d) for d in dep_ids[doff:doff + nd]],
                    stolen=bool(stolen), state="retried" if retried else _STATES[state],
                    error_type=et, error=em, attempt=att + 1))
        out.extend(self._external)
        out.sort(key=lambda r: (r.start, r.end))
        if dropped:
            self.meta["dropped"] = self.meta.get("dropped", 0) + dropped
        self._records = out

    # --------------------------------------------------------- analysis
    def _analyse(self):
        if self._analysis is None:
            self._analysis = analyse(self.records)
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

    def summary(self, baseline=None) -> str:
        """A readable report: work, span, parallelism, the speed-up bound min(P, T1/T_inf) next
        to the speed-up achieved (work / wall time), per-worker busy and idle time, steals,
        failures; the burdened parallelism; with ``baseline`` (a trace of the same program,
        e.g. on 1 worker) the work inflation overall and per task name (see ``inflation`` for
        the errors); task functions likely to contend (nested or exec()'d), named once."""
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
        retried = sum(r.state == "retried" for r in recs)
        if failed or cancelled or retried:
            lines.append(f"  failed {len(failed)}, cancelled {cancelled}"
                         + (f", failed attempts retried {retried}" if retried else ""))
            for r in failed[:5]:
                lines.append(f"    {r.key}: {r.error_type}: {r.error}")
        lines += _inflation.summary_lines(self, baseline)
        return "\n".join(lines)

    # --------------------------------------------------------- files
    def save(self, path) -> None:
        """Writes the trace as msgpack (format "taskgraph-trace", version ``VERSION``)."""
        path = fspath(path, "Trace.save")
        doc = {"format": FORMAT, "version": VERSION, "meta": self.meta, "fields": list(_FIELDS),
               "records": [[getattr(r, f) for f in _FIELDS] for r in self.records]}
        with open(path, "wb") as f:
            f.write(msgpack.packb(doc, use_bin_type=True))

    @classmethod
    def load(cls, path) -> "Trace":
        """Reads a trace written by ``save``. A file that is not a taskgraph trace, is
        truncated or damaged raises ``TraceFormatError`` saying so (OSError if unreadable)."""
        path = fspath(path, "Trace.load")
        with open(path, "rb") as f:
            data = f.read()
        try:
            doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
        except Exception as e:  # msgpack raises several types for damaged input
            raise TraceFormatError(f"{path}: not a taskgraph trace (damaged or truncated: "
                                   f"{type(e).__name__}: {e})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise TraceFormatError(f"{path}: not a taskgraph trace file")
        version = doc.get("version")
        if not _is_int(version) or version not in _VERSION_FIELDS:
            raise TraceFormatError(f"{path}: trace version {version!r}, this taskgraph reads "
                                   f"versions 1 to {VERSION}")
        fields = doc.get("fields")
        rows = doc.get("records")
        want = list(_VERSION_FIELDS[version])
        if not isinstance(fields, list) or fields != want or not isinstance(rows, list):
            raise TraceFormatError(f"{path}: damaged taskgraph trace (bad field list)")
        recs = []
        for i, row in enumerate(rows):
            # Every field is checked, so that a damaged file is refused here rather than
            # failing later (summary, pictures) with an error about something else.
            if not isinstance(row, list) or len(row) != len(want):
                raise TraceFormatError(f"{path}: damaged taskgraph trace (record {i} is not a "
                                       f"list of {len(want)} fields)")
            for name, value in zip(want, row):
                if not _FIELD_OK[name](value):
                    raise TraceFormatError(f"{path}: damaged taskgraph trace (record {i}: "
                                           f"{name} is {type(value).__name__} {value!r:.60})")
            recs.append(TaskRecord(*row))
        meta = doc.get("meta")
        return cls(recs, meta if isinstance(meta, dict) else None)

    def to_chrome_trace(self, path=None):
        """The timeline in Chrome's trace-event format (open in Perfetto or chrome://tracing):
        one process per scheduler, one track per worker, one complete event per task. Returns
        the JSON object; writes it to path if given."""
        if path is not None:
            path = fspath(path, "Trace.to_chrome_trace")
        if self.records:
            t0 = min(r.start for r in self.records)
        events = []
        lanes = sorted({(r.scheduler, r.worker, r.where or "") for r in self.records})
        for s, w, where in lanes:
            events.append({"ph": "M", "name": "thread_name", "pid": s, "tid": w,
                           "args": {"name": where or f"worker {w}"}})
        for s in sorted({s for s, _, _ in lanes}):
            events.append({"ph": "M", "name": "process_name", "pid": s, "tid": 0,
                           "args": {"name": f"taskgraph scheduler {s}" if s else "dask cluster"}})
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
        return draw_trace(self, path, **options)

    def __len__(self):
        return len(self.records)

    def __repr__(self):
        if self._open:
            return "<taskgraph.Trace (recording)>"
        return f"<taskgraph.Trace {len(self.records)} tasks>"

    # --------------------------------------------------------- scaling (docs/trace.md)
    def inflation(self, baseline: "Trace") -> float:
        """Work inflation: this trace's work / the work of ``baseline``, a trace of the same
        program (e.g. on 1 worker). 1.0: the tasks did not slow each other down. TypeError if
        baseline is not a Trace; ValueError if either trace is empty, the baseline has no work,
        or the two ran different task functions (not the same program). Loaded traces work
        alike."""
        return _inflation.inflation(self, baseline)

    def predict(self, workers=_predict.DEFAULT_WORKERS) -> list:
        """The predicted speed-up on each worker count: a list of ``Prediction(workers, lower,
        upper, simulated)``. upper = min(P, parallelism); lower from the burdened span (the
        span plus the measured cost of a steal on every spawn and data edge); simulated: a
        simulation of randomized work stealing over the recorded graph with the costs measured
        from this trace. ValueError for an empty trace, a trace without work, or worker counts
        that are not ints from 1 to 4096. Work inflation is not predicted."""
        return _predict.predict(self, workers)

    def report(self, path, baseline: "Trace | None" = None) -> str:
        """Writes one self-contained HTML file (no network): summary, a timeline per worker,
        the executed graph (when Graphviz is installed), the predicted speed-up plot, the
        hottest tasks, and the work inflation against ``baseline`` when given (errors as for
        ``inflation``). OSError if path cannot be written. Returns the path."""
        return _report.write_report(self, fspath(path, "Trace.report"), baseline)

    def _repr_html_(self):
        """The report's HTML, for notebooks (an empty or open trace: a one-line note)."""
        if self._open:
            return "<p>taskgraph trace (recording)</p>"
        return _report.render(self)


def _ms(ns):
    return f"{ns / 1e6:.3f} ms"


_OPEN = [None]  # the open Trace (traces do not overlap: core.trace_start refuses)


def open_trace():
    """The Trace whose block is open now, or None (for backends that record elsewhere)."""
    return _OPEN[0]


def _add_records(tr, records):
    """Adds TaskRecords made elsewhere (a cluster's workers) to the open trace tr; they join
    its records when the block has closed."""
    tr._external.extend(records)


def trace() -> Trace:
    """``with taskgraph.trace() as tr:`` records every task that runs (or is cancelled) on any
    scheduler while the block is open; after the block, ``tr`` holds the records. Blocks do
    not nest (RuntimeError). A task is recorded when it finishes, if the block that was open
    when it started is still open: tasks still running when the block closes are left out."""
    return Trace()


def write_trace_files(tr: Trace, prefix, *, quiet: bool = False) -> list:
    """Writes PREFIX.tgtrace, PREFIX.json (timeline) and PREFIX.svg (executed graph; only
    PREFIX.dot, with a message, when Graphviz is missing) and prints the summary unless quiet.
    Returns the paths written."""
    if not isinstance(tr, Trace):
        raise TypeError(f"write_trace_files needs a taskgraph.Trace (from `with tg.trace() as "
                        f"tr:` or Trace.load), got {type(tr).__name__} {tr!r:.80}")
    prefix = fspath(prefix, "write_trace_files")
    d = os.path.dirname(prefix)
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
