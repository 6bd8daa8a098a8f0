"""Trace file formats: the trace file (msgpack, format "taskgraph-trace") written by
Trace.save and read by Trace.load, and the Chrome trace-event timeline (Perfetto,
chrome://tracing)."""
from __future__ import annotations

import json

import msgpack

from taskgraph._paths import fspath
from taskgraph.trace.record import FIELDS, OUTCOMES, TaskRecord

__all__ = ["FORMAT", "VERSION", "TraceFormatError", "save", "load", "chrome"]

FORMAT = "taskgraph-trace"
VERSION = 4  # 2 added `where` (a cluster worker's address), 3 `attempt`, 4 `cpu` and
# `blocked`; 1 to 3 are read. The fields of each version (later ones only add at the end).
_VERSION_FIELDS = {1: FIELDS[:-4], 2: FIELDS[:-3], 3: FIELDS[:-2], 4: FIELDS}


class TraceFormatError(ValueError):
    """A trace file that is not a taskgraph trace, is truncated, or is of another version."""


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_opt_str(v):
    return v is None or isinstance(v, str)


# What load accepts in each field of a record (anything else: a damaged file).
_FIELD_OK = {
    "key": lambda v: isinstance(v, str), "name": lambda v: isinstance(v, str),
    "worker": _is_int, "scheduler": _is_int, "start": _is_int, "end": _is_int, "own": _is_int,
    "parent": _is_opt_str, "deps": lambda v: isinstance(v, list) and all(isinstance(d, str) for d in v),
    "stolen": lambda v: isinstance(v, bool), "state": lambda v: v in OUTCOMES,
    "error_type": _is_opt_str, "error": _is_opt_str, "where": _is_opt_str,
    "attempt": lambda v: _is_int(v) and v >= 1,
    "cpu": lambda v: v is None or (_is_int(v) and v >= 0),
    "blocked": lambda v: _is_int(v) and v >= 0,
}
assert set(_FIELD_OK) == set(FIELDS)


def save(records, meta, path, who="Trace.save"):
    """Writes the records as msgpack (format FORMAT, version VERSION)."""
    path = fspath(path, who)
    doc = {"format": FORMAT, "version": VERSION, "meta": meta, "fields": list(FIELDS),
           "records": [[getattr(r, f) for f in FIELDS] for r in records]}
    with open(path, "wb") as f:
        f.write(msgpack.packb(doc, use_bin_type=True))


def load(path, who="Trace.load"):
    """(records, meta or None) of a file written by save. A file that is not a taskgraph
    trace, is truncated or damaged raises TraceFormatError saying so (OSError if
    unreadable)."""
    path = fspath(path, who)
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
    return recs, meta if isinstance(meta, dict) else None


def chrome(records, path=None, who="Trace.to_chrome_trace"):
    """The timeline in Chrome's trace-event format: one process per scheduler, one track per
    worker, one complete event per task. Returns the JSON object; writes it to path if
    given."""
    if path is not None:
        path = fspath(path, who)
    if records:
        t0 = min(r.start for r in records)
    events = []
    lanes = sorted({(r.scheduler, r.worker, r.where or "") for r in records})
    for s, w, where in lanes:
        events.append({"ph": "M", "name": "thread_name", "pid": s, "tid": w,
                       "args": {"name": where or f"worker {w}"}})
    for s in sorted({s for s, _, _ in lanes}):
        events.append({"ph": "M", "name": "process_name", "pid": s, "tid": 0,
                       "args": {"name": f"taskgraph scheduler {s}" if s else "dask cluster"}})
    for r in records:
        args = {"key": r.key, "state": r.state, "stolen": r.stolen, "own_us": r.own / 1e3}
        if r.cpu is not None:
            args["cpu_us"] = r.cpu / 1e3
        waiting = r.waiting
        if waiting:
            args["waiting_us"] = waiting / 1e3
        if r.parent:
            args["parent"] = r.parent
        if r.deps:
            args["deps"] = r.deps
        if r.error_type:
            args["error"] = f"{r.error_type}: {r.error}"
        ev = {"ph": "X", "name": r.name, "cat": r.state, "pid": r.scheduler,
              "tid": r.worker, "ts": (r.start - t0) / 1e3,
              "dur": max(r.end - r.start, 1) / 1e3, "args": args}
        if waiting * 2 > r.own:  # mostly waiting: drawn grey, so waits stand out from work
            ev["cname"] = "grey"
        events.append(ev)
    doc = {"traceEvents": events, "displayTimeUnit": "ms"}
    if path is not None:
        with open(path, "w") as f:
            json.dump(doc, f)
    return doc
