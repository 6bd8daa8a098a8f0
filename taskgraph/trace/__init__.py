"""Execution traces and what is made of them. ``with tg.trace() as tr:`` and class Trace
(tracing) record every task run while the block is open, in C, into TaskRecords (record); a
trace is saved, loaded and written as a Chrome timeline (files), and analysed: work, span,
critical path and the summary (analysis), the speed-up predicted for other worker counts
(predict) by a simulation of work stealing (simulate), work inflation against a baseline and
the task functions likely to contend (inflation). It is shown as a one-file HTML report
(report) and in pictures drawn by Graphviz, of an executed graph or of a lazy one (viz), which
a notebook displays for a Node too (notebook); the CLI says what a file that is not a trace is
(filekind)."""
from taskgraph.trace.tracing import (TaskRecord, Trace, TraceFormatError, open_trace, trace,
                                     write_trace_files)

__all__ = ["Trace", "TaskRecord", "TraceFormatError", "trace", "write_trace_files",
           "open_trace"]
