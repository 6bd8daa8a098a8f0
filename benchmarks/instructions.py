"""Where a task's time goes, in instructions (valgrind's callgrind): stable on these noisy VMs,
where perf has no counters and wall-clock figures move by tens of percent.

    python benchmarks/instructions.py [--out FILE]

Each workload runs twice under callgrind, with N and with 2N tasks; the difference divided by
N is what one more task costs, in every thread, with start-up and warm-up cancelled out. The
instructions are split by where they run: the C core (csrc/*.c), the C-API face (csrc/py/*.c),
CPython's interpreter (the eval loop and calls), its memory allocator, its reference counting,
its cyclic garbage collector, the rest of CPython, and libc. The same is done for the plain
Python function the task runs, called in a loop, to give the floor.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKLOADS = {
    # name: (setup code, code run N times -- {n} is replaced, description)
    "fib_spawn": ("from per_task import fib, fib_serial\nimport taskgraph as tg\ns = tg.Scheduler(1)\n"
                  "s.compute(fib(12))\n",
                  "for _ in range({n}): s.compute(fib(14))\n",
                  "fib(14) spawning at every level, 1 worker (1219 tasks per compute)", 1219),
    "fib_serial": ("from per_task import fib_serial\nfib_serial(12)\n",
                   "for _ in range({n}): fib_serial(14)\n",
                   "fib_serial(14): plain recursion, the same 1219 calls", 1219),
    "lazy": ("from per_task import trivial\nimport taskgraph as tg\ns = tg.Scheduler(1)\n"
             "s.compute([trivial(i) for i in range(1000)])\n",
             "s.compute([trivial(i) for i in range({n} * 1000)])\n",
             "trivial lazy tasks computed from the main thread, 1 worker (1000 per unit)", 1000),
    # The same trivial lazy tasks, 1000 to a compute: alone, with a trace open, and with a live
    # feed attached (what an open dashboard adds on the workers) whose records the main thread
    # drains after each compute as the dashboard's sampler does.
    "lazy_1000": ("from per_task import trivial\nimport taskgraph as tg\ns = tg.Scheduler(1)\n"
                  "s.compute([trivial(i) for i in range(1000)])\n",
                  "for _ in range({n}): s.compute([trivial(i) for i in range(1000)])\n",
                  "trivial lazy tasks, 1000 to a compute from the main thread, 1 worker", 1000),
    "lazy_traced": ("from per_task import trivial\nimport taskgraph as tg\ns = tg.Scheduler(1)\n"
                    "s.compute([trivial(i) for i in range(1000)])\ntr = tg.trace()\ntr.__enter__()\n",
                    "for _ in range({n}): s.compute([trivial(i) for i in range(1000)])\n",
                    "the same with a trace open (tg.trace())", 1000),
    "lazy_feed": ("from per_task import trivial\nimport taskgraph as tg\n"
                  "from taskgraph._native import core\nfrom taskgraph.dashboard.model import Model\n"
                  "s = tg.Scheduler(1)\ns.compute([trivial(i) for i in range(1000)])\nm = Model()\n"
                  "f = core.LiveFeed(s._engine)\n",
                  "for _ in range({n}):\n    s.compute([trivial(i) for i in range(1000)])\n"
                  "    f.drain(m.tick0, m.us_per_tick, m.bucket_us, 4000)\n",
                  "the same with a dashboard's live feed attached, drained after each compute as its sampler does", 1000),
    "stencil": ("from per_task import stencil, cell\nimport taskgraph as tg\ns = tg.Scheduler(1)\n"
                "s.compute(stencil(8, 8, cell))\n",
                "for _ in range({n}): s.compute(stencil(16, 16, cell))\n",
                "16x16 stencil DAG, trivial bodies, 3 edges per task, 1 worker (256 tasks)", 256),
}

# (label, test on (source file, function, object file)); the first that matches wins.
CATEGORIES = [
    ("taskgraph core (csrc/*.c)", lambda f, fn, o: re.search(r"(^|/)csrc/[a-z_]+\.[ch]$", f) is not None),
    ("taskgraph C-API face (csrc/py/*.c)", lambda f, fn, o: "csrc/py/" in f),
    ("CPython reference counting", lambda f, fn, o: re.search(
        r"(DecRef|IncRef|_Py_Dealloc|brc|MergeZeroLocal|ExplicitMerge|_Py_NewRef|TryIncref)", fn)
        is not None or f.endswith("brc.c")),
    ("CPython memory allocator", lambda f, fn, o: re.search(r"(mimalloc|obmalloc|pymem)", f) is not None
        or re.search(r"(^mi_|^_mi_|Malloc|_Free$|GC_Del|AllocNoTrack|_PyObject_GC_New)", fn) is not None),
    ("CPython cyclic GC", lambda f, fn, o: "gc_free_threading" in f or f.endswith("/gc.c")),
    ("CPython eval loop and calls", lambda f, fn, o: re.search(
        r"(ceval|generated_cases|/call\.c|/frame\.c|pycore_frame|pycore_call)", f) is not None),
    ("CPython, other (lookups, objects)", lambda f, fn, o: "python3" in o or "/Objects/" in f
        or "/Python/" in f or "/Include/" in f),
    ("libc and other", lambda f, fn, o: True),
]


def python_cmd():
    """The real interpreter behind the venv's symlink, and the venv's sys.path."""
    py = sys.executable
    real = os.path.realpath(getattr(sys, "_base_executable", py))
    import site
    path = os.pathsep.join(site.getsitepackages() + [ROOT, HERE])
    return [real], path


def run(setup, body, n, tmp):
    cmd, path = python_cmd()
    script = os.path.join(tmp, f"w{n}.py")
    with open(script, "w") as f:
        f.write(setup + body.format(n=n) + "import os\nos._exit(0)\n")  # no teardown counted
    out = os.path.join(tmp, f"cg.{n}.out")
    for old in glob.glob(out + "*"):
        os.remove(old)
    env = dict(os.environ, PYTHONPATH=path, PYTHONHASHSEED="0")
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    f"--callgrind-out-file={out}"] + cmd + [script], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)
    totals, files, main_thread = {}, {}, 0
    for part in glob.glob(out + "-*"):  # one file per thread (-01: the main thread)
        ann = subprocess.run(["callgrind_annotate", "--threshold=100", part], capture_output=True,
                             text=True, check=True).stdout
        for line in ann.splitlines():
            m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?):(\S+)(?:\s+\[(.*)\])?\s*$", line)
            if not m or "PROGRAM TOTALS" in line:
                continue
            count = int(m.group(1).replace(",", ""))
            if part.endswith("-01"):
                main_thread += count
            fname, func, obj = m.group(2), m.group(3), m.group(4) or ""
            mine = re.search(r"csrc/((py/)?[a-z_]+)\.[ch]$", fname)
            if mine:  # taskgraph's own code, per source file (header inlines go to their file)
                files[mine.group(1)] = files.get(mine.group(1), 0) + count
            for cat, test in CATEGORIES:
                if test(fname, func, obj):
                    totals[cat] = totals.get(cat, 0) + count
                    break
    return totals, files, main_thread


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--n", type=int, default=4, help="units of work in the smaller run")
    ap.add_argument("--only", help="comma-separated workload names")
    a = ap.parse_args(argv)
    if not shutil.which("valgrind"):
        print("valgrind is not installed: no instruction counts (apt-get install valgrind)")
        return 3
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (setup, body, desc, per_unit) in WORKLOADS.items():
            if a.only and name not in a.only.split(","):
                continue
            (small, fs, ms), (big, fb, mb) = run(setup, body, a.n, tmp), run(setup, body, 2 * a.n, tmp)
            tasks = a.n * per_unit
            per = {cat: (big.get(cat, 0) - small.get(cat, 0)) / tasks for cat, _ in CATEGORIES}
            per = {k: v for k, v in per.items() if abs(v) >= 0.5}
            by_file = {f: (fb.get(f, 0) - fs.get(f, 0)) / tasks for f in set(fs) | set(fb)}
            by_file = dict(sorted(((k, v) for k, v in by_file.items() if abs(v) >= 0.5),
                                  key=lambda kv: -kv[1]))
            results[name] = {"description": desc, "per_task": per, "total": sum(per.values()),
                             "main_thread": (mb - ms) / tasks, "taskgraph_by_file": by_file}
            print(f"{name}: {desc}: {sum(per.values()):.0f} instructions per task "
                  f"({(mb - ms) / tasks:.0f} on the main thread)", flush=True)
            for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
                print(f"    {v:8.0f}  {k}")
            if by_file:
                print("    taskgraph's own, per file: " + ", ".join(f"{k} {v:.0f}" for k, v in by_file.items()))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
