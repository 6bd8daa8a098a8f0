"""Trace recording: the TaskRecord, and reading the records the C recorders wrote.

Recording happens in C: the worker loop calls an observer (csrc/py/recorder.c) that writes
each finished task into that worker's own C buffer, with no Python call per task. When a trace
block ends the buffers are detached (``stop``); ``decode`` reads them on first use, from each
Recorder: the records as bytes (unpacked with ``struct``, in the layout the extension states),
the dependency ids, the names and error texts. With no trace open a worker pays one atomic
load per task."""
from __future__ import annotations

import gc
import struct
from dataclasses import dataclass, field

from taskgraph._native import core
from taskgraph._state import State

__all__ = ["TaskRecord", "FIELDS", "RETRIED", "OUTCOMES", "start", "stop", "decode"]

#: A record's outcome for a failed attempt of a task with retries that ran again (not a task
#: state: the other outcomes are the final states' labels).
RETRIED = "retried"
OUTCOMES = (State.DONE.label, State.FAILED.label, State.CANCELLED.label, RETRIED)


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
    cpu: int | None = None  # ns on a CPU or queued for one, measured for tasks of 1 ms or
                            # more that joined nothing (within 1 ms, never below:
                            # docs/trace.md); else None
    blocked: int = 0        # ns inside its declared waits (tg.blocking()), exact

    @property
    def waiting(self) -> int:
        """ns of its own time spent waiting, not computing: its declared waits, or, where its
        CPU time was measured, its own time minus that, whichever is more (0 to ``own``)."""
        w = self.blocked
        if self.cpu is not None and self.own - self.cpu > w:
            w = self.own - self.cpu
        return max(0, min(w, self.own))

    @property
    def computing(self) -> int:
        """ns of its own time spent computing: ``own - waiting`` (what counts as work)."""
        return self.own - self.waiting

    @property
    def duration(self) -> int:
        return self.end - self.start

    @property
    def lane(self) -> str:
        """The worker that ran it: ``s<scheduler>.w<worker>``, or its address on a cluster."""
        return self.where or f"s{self.scheduler}.w{self.worker}"


FIELDS = ("key", "name", "worker", "scheduler", "start", "end", "own", "parent", "deps",
          "stolen", "state", "error_type", "error", "where", "attempt", "cpu", "blocked")

# tg_trace_rec.flags (csrc/trace.h)
_STOLEN, _WAITS = 1, 2


def _gc_callback(phase, info):
    """Times each collection in C (a collection stops every thread, so no task starts or ends
    during one): the recorders subtract it from the tasks' own time."""
    core.trace_gc_phase(phase == "start")


def start():
    """Attaches a recorder to every worker (RuntimeError if a trace is open already)."""
    core.trace_start()
    gc.callbacks.append(_gc_callback)


def stop():
    """Detaches the recorders (waiting for any record being written). Returns what decode
    needs: (the recorders, the clock map)."""
    try:
        gc.callbacks.remove(_gc_callback)
    except ValueError:  # pragma: no cover - removed by someone else
        pass
    raw = core.trace_stop()
    return raw, _ticks_to_ns()


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
_I = {name: i for i, name in enumerate(_REC_FIELDS)}


def _read_recorder(rec):
    """One worker's recorder: (rows of record fields, object table, dependency ids, dropped)."""
    return list(_REC.iter_unpack(rec.records())), rec.objects, rec.ids(), rec.dropped


def _key(name, i):
    return f"{name}-{i >> 40}.{i & 0xFFFFFFFFFF}"


def decode(recorders, clock):
    """The TaskRecords in the recorders (unsorted), and how many records they dropped."""
    raw = [(rec, _read_recorder(rec)) for rec in recorders or ()]
    ids = {}
    for _, (rows, objects, _, _) in raw:
        for row in rows:
            ids[row[_I["id"]]] = objects[row[_I["name"]]]
    out = []
    dropped = 0
    to_ns, scale = clock
    last = {}  # id -> its last attempt (tasks with retries have a record per attempt)
    for _, (rows, _, _, _) in raw:
        for row in rows:
            a = row[_I["attempt"]]
            if a > last.get(row[_I["id"]], 0):
                last[row[_I["id"]]] = a
    for rec, (rows, objects, dep_ids, lost) in raw:
        dropped += lost
        for (i, parent, t0, t1, own, doff, nd, name, err, worker, flags, state, att) in rows:
            et, em = objects[err] if err >= 0 else (None, None)
            nm = objects[name]
            start_ns = to_ns(t0)
            end = max(start_ns, to_ns(t1))
            retried = att < last.get(i, 0)
            own_ns = min(round(own * scale), end - start_ns)
            cpu, blocked = None, 0
            if flags & _WAITS:  # two numbers after its dependencies (csrc/trace.h)
                c, b = dep_ids[doff + nd], dep_ids[doff + nd + 1]
                cpu = None if c >= 1 << 63 else min(c, end - start_ns)
                blocked = min(round(b * scale), own_ns)
            out.append(TaskRecord(
                key=_key(nm, i) + (f"#{att + 1}" if retried else ""), name=nm, worker=worker,
                scheduler=rec.scheduler,
                start=start_ns, end=end, own=own_ns,
                parent=_key(ids.get(parent, "?"), parent) if parent else None,
                deps=[_key(ids.get(d, "?"), d) for d in dep_ids[doff:doff + nd]],
                stolen=bool(flags & _STOLEN), state=RETRIED if retried else State(state).label,
                error_type=et, error=em, attempt=att + 1, cpu=cpu, blocked=blocked))
    return out, dropped
