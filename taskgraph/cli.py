"""``python -m taskgraph`` (also the ``taskgraph`` script): look at saved traces.

    python -m taskgraph show TRACE -o out.svg [--all | --grouped] [--threshold N]
    python -m taskgraph stats TRACE
    python -m taskgraph timeline TRACE -o out.json
    python -m taskgraph report TRACE -o report.html [--baseline TRACE]
    python -m taskgraph dashboard [--port N] [--host H] [--trace] [--keep] SCRIPT [ARGS ...]

A file that is not a taskgraph trace, or is truncated, is reported in one line (exit status 2),
not with a traceback. A missing Graphviz 'dot' writes the .dot source and says how to install
Graphviz (exit status 3).
"""
from __future__ import annotations

import argparse
import os
import sys

from taskgraph.trace.filekind import foreign_file_hint
from taskgraph.trace import Trace, TraceFormatError
from taskgraph.trace.viz import DEFAULT_THRESHOLD, GraphvizError


class _CliError(Exception):
    """A problem with the user's input: printed as one line, exit status 2."""


def _load(path):
    try:
        return Trace.load(path)
    except TraceFormatError as e:
        raise _CliError(foreign_file_hint(path) or str(e)) from None
    except OSError as e:
        raise _CliError(f"cannot read trace {path!r}: {e.strerror or e}") from None


def _show(a):
    tr = _load(a.trace)
    detail = "all" if a.all else ("grouped" if a.grouped else None)
    try:
        out = tr.visualize(a.output, threshold=a.threshold, detail=detail)
    except GraphvizError as e:
        print(f"taskgraph: {e}", file=sys.stderr)
        return 3
    except (ValueError, OSError) as e:
        raise _CliError(str(e)) from None
    print(f"wrote {out} ({len(tr)} tasks)")
    return 0


def _stats(a):
    print(_load(a.trace).summary())
    return 0


def _timeline(a):
    tr = _load(a.trace)
    try:
        tr.to_chrome_trace(a.output)
    except OSError as e:
        raise _CliError(f"cannot write {a.output!r}: {e.strerror or e}") from None
    print(f"wrote {a.output} ({len(tr)} tasks; open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def _report(a):
    tr = _load(a.trace)
    base = _load(a.baseline) if a.baseline else None
    try:
        tr.report(a.output, baseline=base)
    except (TypeError, ValueError) as e:
        raise _CliError(str(e)) from None
    except OSError as e:
        raise _CliError(f"cannot write {a.output!r}: {e.strerror or e}") from None
    print(f"wrote {a.output} ({len(tr)} tasks)")
    return 0


def _dashboard(a):
    """Runs a Python script with a dashboard open on every scheduler it uses."""
    import runpy
    from taskgraph.dashboard import dashboard
    from taskgraph.trace import trace
    if not os.path.isfile(a.script):
        raise _CliError(f"no such script: {a.script!r}")
    try:
        d = dashboard(host=a.host, port=a.port, window=a.window)
    except (OSError, ValueError) as e:
        raise _CliError(f"cannot open the dashboard: {e}") from None
    print(f"taskgraph dashboard: {d.url}", file=sys.stderr, flush=True)
    saved = sys.argv
    sys.argv = [a.script, *a.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(a.script)))
    status = 0
    try:
        if a.trace:
            with trace():
                runpy.run_path(a.script, run_name="__main__")
        else:
            runpy.run_path(a.script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved
    try:
        if a.keep:
            print(f"taskgraph dashboard: the script has ended; still serving {d.url} "
                  "(Ctrl-C to stop)", file=sys.stderr, flush=True)
            import time
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        d.close()
    return status


def _prog() -> str:
    """How the user called us: `python -m taskgraph` (argv[0] is taskgraph/__main__.py) or the
    `taskgraph` script that pip installs."""
    argv0 = sys.argv[0] if sys.argv else ""
    return "python -m taskgraph" if os.path.basename(argv0) == "__main__.py" else "taskgraph"


def build_parser(prog=None):
    p = argparse.ArgumentParser(prog=prog or _prog(),
                                description="Look at taskgraph traces (saved with Trace.save), "
                                            "or run a script with the live dashboard open.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("show", help="draw the executed graph",
                       description="Draw the executed graph of a trace (svg, png, pdf or dot, "
                                   "from the output suffix).")
    s.add_argument("trace", help="a .tgtrace file")
    s.add_argument("-o", "--output", required=True, help="picture to write, e.g. run.svg")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--all", action="store_true", help="draw every task, however many")
    g.add_argument("--grouped", action="store_true",
                   help="group tasks by function and spawn depth, however few")
    s.add_argument("--threshold", type=int, default=DEFAULT_THRESHOLD,
                   help=f"group when there are more tasks than this (default {DEFAULT_THRESHOLD})")
    s.set_defaults(func=_show)
    s = sub.add_parser("stats", help="print work, span, parallelism and per-worker figures",
                       description="Print the trace summary: work, span, parallelism, the "
                                   "speed-up bound and the speed-up achieved, per-worker busy "
                                   "and idle time, steals and failures.")
    s.add_argument("trace", help="a .tgtrace file")
    s.set_defaults(func=_stats)
    s = sub.add_parser("timeline", help="write a Chrome/Perfetto timeline (JSON)",
                       description="Write the trace as Chrome trace-event JSON, one track per "
                                   "worker.")
    s.add_argument("trace", help="a .tgtrace file")
    s.add_argument("-o", "--output", required=True, help="JSON file to write")
    s.set_defaults(func=_timeline)
    s = sub.add_parser("report", help="write a one-file HTML report",
                       description="Write one self-contained HTML file: summary, timeline per "
                                   "worker, executed graph, predicted speed-up, hottest tasks "
                                   "and, with --baseline, the work inflation.")
    s.add_argument("trace", help="a .tgtrace file")
    s.add_argument("-o", "--output", required=True, help="HTML file to write")
    s.add_argument("--baseline", help="a .tgtrace of the same program (e.g. on 1 worker): "
                                      "report the work inflation against it")
    s.set_defaults(func=_report)
    s = sub.add_parser("dashboard", help="run a script with the live dashboard open",
                       description="Run a Python script with a live dashboard of every "
                                   "scheduler it uses, served at the URL printed on stderr.")
    s.add_argument("script", help="the Python script to run")
    s.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to serve on (default 127.0.0.1; any other needs the token "
                        "the printed URL carries)")
    s.add_argument("--port", type=int, default=0, help="port (default 0: a free one)")
    s.add_argument("--window", type=float, default=10.0,
                   help="seconds of the task stream shown (default 10)")
    s.add_argument("--trace", action="store_true",
                   help="trace the whole script: its summary, executed graph and trace file "
                        "show on the page when it ends")
    s.add_argument("--keep", action="store_true",
                   help="keep serving after the script ends, until Ctrl-C")
    s.set_defaults(func=_dashboard)
    return p


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    try:
        return a.func(a)
    except _CliError as e:
        print(f"taskgraph: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
