"""What kind of file a path that is not a taskgraph trace is, for the CLI's error message:
the usual mistake is passing the Chrome/Perfetto timeline (PREFIX.json, written beside the
trace by ``write_trace_files``) instead of the trace (PREFIX.tgtrace)."""
from __future__ import annotations

import json
import os

__all__ = ["foreign_file_hint"]


def foreign_file_hint(path) -> str | None:
    """A one-line message for a Chrome trace-event JSON file given where a taskgraph trace was
    expected (naming the file to use instead and where to open this one), or None for any
    other file. Never raises."""
    try:
        with open(path, "rb") as f:
            head = f.read(64).lstrip()
            if not head.startswith((b"{", b"[")):
                return None
            f.seek(0)
            doc = json.load(f)
    except (OSError, ValueError, RecursionError):
        return None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list) or not all(isinstance(e, dict) and "ph" in e for e in events[:20]):
        return None
    base, _ = os.path.splitext(os.fspath(path))
    what = (f"{path} is a Chrome/Perfetto trace-event JSON file (the timeline written by "
            f"Trace.to_chrome_trace or write_trace_files), not a taskgraph trace: open it in "
            f"https://ui.perfetto.dev or chrome://tracing; the commands here read the trace "
            f"saved with Trace.save")
    if os.path.isfile(f"{base}.tgtrace"):  # written beside it by write_trace_files
        return f"{what}: pass {base}.tgtrace instead"
    return (f"{what} (a .tgtrace file: there is no {os.path.basename(base)}.tgtrace beside it; "
            f"write one with tr.save(\"run.tgtrace\") after `with taskgraph.trace() as tr:`, "
            f"or write_trace_files(tr, prefix), which writes PREFIX.tgtrace beside PREFIX.json)")
