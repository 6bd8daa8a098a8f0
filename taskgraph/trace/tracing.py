"""Execution traces: what ran where and when, work/span analysis, save/load, Chrome timeline.

``with taskgraph.trace() as tr:`` records every task run (or cancelled) while the block is
open, on every scheduler. This module holds the public face, class Trace; the work is done by
the other modules of taskgraph.trace: record (recording in C, and reading the records back),
analysis (work, span, critical path, the summary) and files (the trace file and the Chrome
timeline). Pictures are drawn by viz, which knows nothing about recording (this module
imports it, not the other way round). Another backend (taskgraph.dask) adds the records it
made elsewhere with ``Trace.add_records``.
"""
from __future__ import annotations

import os
import time

from taskgraph.trace import inflation as _inflation
from taskgraph.trace import predict as _predict
from taskgraph.trace import report as _report
from taskgraph.trace import files as _trace_files
from taskgraph.trace import record as _trace_record
from taskgraph.trace.analysis import analyse, summary
from taskgraph._paths import fspath
from taskgraph.trace.files import TraceFormatError
from taskgraph.trace.record import TaskRecord
from taskgraph.trace.viz import DEFAULT_THRESHOLD, GraphvizError, draw_trace

__all__ = ["Trace", "TaskRecord", "TraceFormatError", "trace", "write_trace_files",
           "open_trace"]


class Trace:
    """The tasks recorded by one ``taskgraph.trace()`` block (or loaded from a file).

    Attributes: ``records`` (list of TaskRecord, in start order), ``workers`` (number of
    distinct worker lanes seen), ``pool_size`` (the workers the schedulers had), ``work``,
    ``span``, ``parallelism`` (computed on first use).
    Methods: ``summary()``, ``critical_path()``, ``save(path)``, ``Trace.load(path)``,
    ``to_chrome_trace(path)``, ``visualize(path=None, ...)``, ``add_records(records)``,
    ``report(path)``.
    """

    def __init__(self, records=None, meta=None):
        self._records: list[TaskRecord] | None = list(records or [])
        self._check_records(self._records, "Trace records")
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f"Trace meta must be a dict, got {type(meta).__name__} {meta!r:.80}")
        self.meta = dict(meta or {})
        self._raw = None        # the workers' recorders, read into records on first use
        self._added = []        # records added while the block is open (add_records)
        self._clock = None      # (ticks -> ns, ns per tick) for the raw records
        self._analysis = None
        self._open = False

    @staticmethod
    def _check_records(records, who):
        for r in records:
            if not isinstance(r, TaskRecord):
                raise TypeError(f"{who} must be TaskRecords, got {type(r).__name__} {r!r:.80}")

    @property
    def records(self) -> list:
        """The TaskRecords, in start order (built from the workers' buffers on first use)."""
        if self._records is None:
            self._build()
        return self._records

    def add_records(self, records) -> None:
        """Adds TaskRecords made elsewhere (another backend's workers, e.g. a dask cluster's)
        to this trace. While its block is open they wait and join the records when the block
        closes; after it, they join at once. TypeError (nothing added) if one is not a
        TaskRecord. Any thread; inside a task or outside."""
        records = list(records)
        self._check_records(records, "add_records: records")
        if self._open or self._records is None:
            self._added.extend(records)
            return
        self._records.extend(records)
        self._records.sort(key=lambda r: (r.start, r.end))
        self._analysis = None

    # --------------------------------------------------------- recording
    def __enter__(self):
        _trace_record.start()  # RuntimeError if a trace is open already
        self._open = True
        _OPEN[0] = self
        return self

    def __exit__(self, *exc):
        _OPEN[0] = None
        self._raw, self._clock = _trace_record.stop()  # waits for any record being written
        self._open = False
        self._records = None  # built on first use: closing the block stays cheap
        self.meta.setdefault("created", time.time())
        # The pool size of each scheduler (one recorder per worker, whether it ran a task or
        # not; its spares' recorders follow), and the machine's load (own times are
        # wall-clock: _inflation.load_note).
        pools = {}
        for rec in self._raw or ():
            if not rec.spare:
                pools[str(rec.scheduler)] = pools.get(str(rec.scheduler), 0) + 1
        self.meta["pools"] = pools
        try:
            self.meta["load"], self.meta["cpus"] = round(os.getloadavg()[0], 2), os.cpu_count()
        except (OSError, AttributeError):  # no load average on this system
            pass
        self._analysis = None
        for f in list(closed_hooks):  # e.g. taskgraph.dashboard, which shows the trace
            try:
                f(self)
            except Exception:  # pragma: no cover - a hook must not break the block's end
                pass

    def _build(self):
        out, dropped = _trace_record.decode(self._raw, self._clock)
        self._raw = None  # frees the C buffers
        out.extend(self._added)
        self._added = []
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
        """How many workers ran tasks (distinct lanes)."""
        return len({r.lane for r in self.records})

    @property
    def spares(self) -> int:
        """How many of the lanes that ran tasks were spare workers (Scheduler.spares: threads
        that ran queued tasks while other tasks waited), from ``meta["pools"]``; 0 where it
        does not say."""
        pools = self.meta.get("pools")
        if not isinstance(pools, dict):
            return 0
        return len({r.lane for r in self.records if r.where is None
                    and isinstance(pools.get(str(r.scheduler)), int)
                    and r.worker >= pools[str(r.scheduler)]})

    @property
    def pool_size(self) -> int | None:
        """How many workers the schedulers that ran these tasks had, whether each ran a task
        or not (from ``meta["pools"]``, recorded when the block closed; records of another
        backend count one per worker address). None for a trace that does not say (saved by
        an older version)."""
        pools = self.meta.get("pools")
        if not isinstance(pools, dict):
            return None
        local = {r.scheduler for r in self.records if r.where is None}
        if not all(str(s) in pools for s in local):
            return None
        return sum(pools[str(s)] for s in local) + len({r.where for r in self.records if r.where})

    def critical_path(self) -> list[str]:
        """Keys of the tasks on the longest path, first to last."""
        return list(self._analyse()["path"])

    def summary(self, baseline=None) -> str:
        """A readable report: work, span, parallelism, the speed-up bound min(P, T1/T_inf) next
        to the speed-up achieved (work / wall time), per-worker busy and idle time, steals,
        failures; the burdened parallelism; with ``baseline`` (a trace of the same program,
        e.g. on 1 worker) the work inflation overall and per task name (see ``inflation`` for
        the errors); task functions likely to contend (nested or exec()'d), named once."""
        if not self.records:
            return summary([], None, 0, 0)
        text = summary(self.records, self._analyse(), self.workers, self.wall, self.pool_size,
                       spares=self.spares)
        return "\n".join([text] + _inflation.summary_lines(self, baseline))

    # --------------------------------------------------------- files
    def save(self, path) -> None:
        """Writes the trace as msgpack (format "taskgraph-trace", version
        ``taskgraph.trace.files.VERSION``)."""
        _trace_files.save(self.records, self.meta, path)

    @classmethod
    def load(cls, path) -> "Trace":
        """Reads a trace written by ``save``. A file that is not a taskgraph trace, is
        truncated or damaged raises ``TraceFormatError`` saying so (OSError if unreadable)."""
        return cls(*_trace_files.load(path))

    def to_chrome_trace(self, path=None):
        """The timeline in Chrome's trace-event format (open in Perfetto or chrome://tracing):
        one process per scheduler, one track per worker, one complete event per task. Returns
        the JSON object; writes it to path if given."""
        return _trace_files.chrome(self.records, path)

    def visualize(self, path=None, *, threshold=DEFAULT_THRESHOLD, detail=None, title=None):
        """Draws the executed graph and returns a ``Picture``, as ``taskgraph.visualize`` does
        for a plan: with ``path``, the file written (svg/png/pdf/dot from the suffix; the
        Picture is a str equal to the path); without, the SVG markup. A notebook displays
        either. ``detail``: None (group above ``threshold`` tasks), "all" or "grouped";
        ``title`` replaces the figures line. ``GraphvizError`` without Graphviz's dot (with a
        path, after writing the .dot source); ``ValueError``/``TypeError`` for bad options.
        Only reads the records: inside or outside a worker alike. See
        ``taskgraph.trace.viz.draw_trace``."""
        return draw_trace(self, path, threshold=threshold, detail=detail, title=title)

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

    def predict(self, workers=_predict.DEFAULT_WORKERS, *, shared_rmw_ns=None) -> list:
        """The predicted speed-up on each worker count: a list of ``Prediction(workers, lower,
        upper, simulated)``. upper = min(P, parallelism); lower from the burdened span (the
        span plus the measured cost of a steal on every spawn and data edge); simulated: a
        simulation of randomized work stealing over the recorded graph with the costs measured
        from this trace, and ``shared_rmw_ns`` for each atomic read-modify-write on the run's
        shared line (None: measured on this machine, once per process; give the figure of the
        machine you predict for). ValueError for an empty trace, a trace without work, worker
        counts that are not ints from 1 to 4096, or a negative shared_rmw_ns. Work inflation
        is not predicted."""
        return _predict.predict(self, workers, shared=shared_rmw_ns)

    def report(self, path, baseline: "Trace | None" = None) -> str:
        """Writes one self-contained HTML file (no network): summary, a timeline per worker,
        the executed graph (when Graphviz is installed), the predicted speed-up plot, the
        hottest tasks, and the work inflation against ``baseline`` when given (errors as for
        ``inflation``). OSError if path cannot be written. Returns the path."""
        return _report.write_report(self, fspath(path, "Trace.report"), baseline)

    def _repr_html_(self):
        """The report, for notebooks: one element whose styles are scoped to it, so it leaves
        the notebook's other cells as they were (an open trace: a one-line note)."""
        if self._open:
            return "<p>taskgraph trace (recording)</p>"
        return _report.fragment(self)


_OPEN = [None]  # the open Trace (traces do not overlap: core.trace_start refuses)
#: Callables given each Trace whose block has just closed (taskgraph.dashboard shows it).
closed_hooks = []


def open_trace():
    """The Trace whose block is open now, or None (for backends that record elsewhere)."""
    return _OPEN[0]


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
