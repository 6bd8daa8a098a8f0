"""Runs the speed benchmarks on each interpreter given (`make bench`, `make bench-quick`):
one benchmark on every interpreter before the next, so that the figures report.py sets side by
side are taken minutes apart, not a whole suite apart.

    python benchmarks/run_speed.py [--quick] PYTHON=DIR [PYTHON=DIR ...]

Each benchmark writes DIR/<name>.json. A benchmark that needs what an interpreter lacks (a
module it imports, or one whose import turns the GIL on there; valgrind) is skipped on that
interpreter: the reason is printed and written to DIR/skipped.json, which report.py shows
under its tables, and an older result of it in DIR is removed. The instruction counts
(minutes under valgrind) are left out of --quick runs, and recorded so. A benchmark that fails
stops the run, but for the instruction counts, whose failure is recorded as a skip (make bench
has always gone on without them).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))


class Bench(NamedTuple):
    script: str
    name: str                 # DIR/<name>.json
    modules: tuple = ()       # modules it imports
    programs: tuple = ()      # programs it runs
    full_args: tuple = ()     # arguments of the full run only
    full_only: bool = False   # left out of --quick runs
    may_fail: bool = False    # a failure is recorded as a skip


# In the order they run. (reliability.py and memory.py measure no speed: make bench runs them on
# the primary interpreter only.)
BENCHMARKS = [
    Bench("suite.py", "ft"),
    Bench("per_task.py", "per_task"),
    Bench("ceiling.py", "ceiling"),
    Bench("instructions.py", "instructions", programs=("valgrind",), full_only=True, may_fail=True),
    Bench("dask_overhead.py", "dask", modules=("dask", "distributed")),
    Bench("dask_get.py", "dask_get", modules=("dask",)),
    Bench("map_fanout.py", "map_fanout"),
    Bench("shapes.py", "shapes"),
    Bench("predict.py", "predict"),
    Bench("inflation.py", "inflation"),
    Bench("executor.py", "executor", full_args=("--instructions",)),
    Bench("dashboard.py", "dashboard"),
    Bench("waiting.py", "waiting"),
]

# Run by the interpreter in question: prints why the modules cannot be used there, or nothing.
CHECK = r"""
import importlib, importlib.util, sys
for m in sys.argv[1:]:
    if importlib.util.find_spec(m) is None:
        sys.exit(print(f"{m} is not installed for this interpreter"))
    try:
        importlib.import_module(m)
    except Exception as e:
        sys.exit(print(f"import {m} fails: {type(e).__name__}: {e}"))
    if sys._is_gil_enabled():
        sys.exit(print(f"importing {m} turns the GIL on"))
"""

LABEL = ("import sys, sysconfig; print(f'{sys.version_info[0]}.{sys.version_info[1]}' + "
         "('t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))")


def why_not(python, bench):
    """Why bench cannot run with this interpreter, or None."""
    for prog in bench.programs:
        if not shutil.which(prog):
            return f"{prog} is not installed"
    if bench.modules:
        p = subprocess.run([python, "-W", "ignore", "-c", CHECK, *bench.modules],
                           capture_output=True, text=True)
        if p.stdout.strip() or p.returncode:
            return p.stdout.strip() or f"checking its modules failed: {p.stderr.strip()[-300:]}"
    return None


def record(out, label, quick, skipped):
    with open(os.path.join(out, "skipped.json"), "w") as fh:
        json.dump({"python": label, "quick": quick, "skipped": skipped}, fh, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("runs", nargs="+", metavar="PYTHON=DIR")
    a = ap.parse_args(argv)
    runs = []
    for spec in a.runs:
        python, _, out = spec.partition("=")
        label = subprocess.run([python, "-c", LABEL], capture_output=True, text=True, check=True).stdout.strip()
        os.makedirs(out, exist_ok=True)
        runs.append((python, out, label, {}))
        record(out, label, a.quick, {})
    for bench in BENCHMARKS:
        for python, out, label, skipped in runs:
            path = os.path.join(out, bench.name + ".json")
            reason = "left out of quick runs" if a.quick and bench.full_only else why_not(python, bench)
            if reason is None:
                print(f"== {bench.script} on {label} ({python}) -> {path}", flush=True)
                args = ["--quick"] if a.quick else list(bench.full_args)
                rc = subprocess.run([python, os.path.join(HERE, bench.script), *args, "--out", path]).returncode
                if rc == 0:
                    continue
                if not bench.may_fail:
                    sys.exit(f"{bench.script} failed on {label} (exit status {rc})")
                reason = f"failed (exit status {rc})"
            print(f"== {bench.script} skipped on {label}: {reason}", flush=True)
            skipped[bench.script] = reason
            record(out, label, a.quick, skipped)
            if os.path.exists(path):
                os.remove(path)


if __name__ == "__main__":
    main()
