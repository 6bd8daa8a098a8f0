"""taskgraph.Executor against concurrent.futures (docs/benchmarks.md, "taskgraph.Executor").

    python benchmarks/executor.py [--quick] [--runs R] [--out FILE]

  1. 50,000 submits, then their results: us per task for taskgraph.Executor(2),
     ThreadPoolExecutor(2) and ProcessPoolExecutor(2) (fewer tasks: its figure is per task);
     target: taskgraph >= 5x faster per task than ThreadPoolExecutor(2);
  2. map over 200,000 trivial items: taskgraph.Executor(2).map against
     ThreadPoolExecutor(2).map (target >= 20x faster) and ProcessPoolExecutor(2).map with
     chunksize=1,000 (where it fits: it pickles every item);
  3. map over items of ~20 us each (CPU time of a pure-Python loop), same peers, with the
     serial loop's time for the speed-up;
  4. fib(16) written with submit, every call submitting its two halves and waiting for them,
     with max_workers=2: taskgraph's time; ThreadPoolExecutor(2) run in a subprocess with a
     timeout, reported "deadlocked" when it does not finish (its workers all block in
     result() while the calls they wait for sit in its queue);
  5. what concurrent.futures.Future itself costs: making one, and its whole life (made, set
     running, result set, result read) on one thread, for the base class and for
     taskgraph's subclass (whose lock is an RLock, with the Condition made only for a
     blocking waiter);
  6. with --instructions (valgrind's callgrind, as benchmarks/instructions.py): instructions
     per submit+result on the submitting thread and on the workers, taskgraph.Executor(2)
     against ThreadPoolExecutor(2), with the cyclic collector on and off (the difference
     between 20,000 and 10,000 tasks): the figure that does not move with the machine's load.

Timed alternatives run alternately (per_task.alternate), R rounds; medians with min and max,
and the load average at the start (the machine is shared: figures taken under load are
noisy, the ratios less so).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import glob
import os
import shutil
import subprocess
import sys
import textwrap
import time

import taskgraph as tg
from _common import write_results
from map_fanout import units_for
from per_task import alternate, summary
from suite import busy

from taskgraph.executor import Future as TgFuture

SUBMITS, MAP_TRIVIAL, MAP_20US, FIB = 50_000, 200_000, 20_000, 16
PPE_SUBMITS = 5_000
DEADLOCK_TIMEOUT = 20.0


def trivial(i):
    return i


def submit_all(ex, n):
    fs = [ex.submit(trivial, i) for i in range(n)]
    for f in fs:
        f.result()


def per_task(runs, n):
    """us per task of (submit then result) for each executor, the pools made once."""
    tge, tpe, ppe = tg.Executor(2), cf.ThreadPoolExecutor(2), cf.ProcessPoolExecutor(2)
    try:
        for ex in (tge, tpe, ppe):
            submit_all(ex, 100)  # start their threads and processes outside the timing
        t_tg, t_tpe, t_ppe = alternate([lambda: submit_all(tge, n), lambda: submit_all(tpe, n),
                                        lambda: submit_all(ppe, min(n, PPE_SUBMITS))], runs)
    finally:
        tge.shutdown()
        tpe.shutdown()
        ppe.shutdown()
    us = lambda ts, k: summary([t / k * 1e6 for t in ts])  # noqa: E731
    r = {"tasks": n, "taskgraph": us(t_tg, n), "threadpool": us(t_tpe, n),
         "processpool": us(t_ppe, min(n, PPE_SUBMITS)), "processpool_tasks": min(n, PPE_SUBMITS)}
    r["ratio_vs_threadpool"] = r["threadpool"]["median"] / r["taskgraph"]["median"]
    return r


def maps(runs, n, fn, arg, peers_n=None, ppe_chunk=1000):
    """Wall time of list(ex.map(fn, [arg] * n)) per executor, and of the serial loop."""
    items = [arg] * n
    pn = peers_n or n
    tge, tpe, ppe = tg.Executor(2), cf.ThreadPoolExecutor(2), cf.ProcessPoolExecutor(2)
    try:
        for ex in (tge, tpe, ppe):
            list(ex.map(fn, [arg] * 10))  # start their threads and processes outside the timing
        t_serial, t_tg, t_tpe, t_ppe = alternate([
            lambda: [fn(x) for x in items],
            lambda: list(tge.map(fn, items)),
            lambda: list(tpe.map(fn, items[:pn])),
            lambda: list(ppe.map(fn, items[:pn], chunksize=ppe_chunk))], runs)
    finally:
        tge.shutdown()
        tpe.shutdown()
        ppe.shutdown()
    per = lambda ts, k: summary([t / k * 1e6 for t in ts])  # noqa: E731
    r = {"items": n, "peer_items": pn, "serial": per(t_serial, n), "taskgraph": per(t_tg, n),
         "threadpool": per(t_tpe, pn), "processpool": per(t_ppe, pn), "processpool_chunksize": ppe_chunk}
    r["ratio_vs_threadpool"] = r["threadpool"]["median"] / r["taskgraph"]["median"]
    r["speedup_vs_serial"] = r["serial"]["median"] / r["taskgraph"]["median"]
    return r


FIB_SRC = """
def fib(n):
    if n < 2:
        return n
    a, b = ex.submit(fib, n - 1), ex.submit(fib, n - 2)
    return a.result() + b.result()
"""


def nested_fib(runs, n):
    ex = tg.Executor(2)
    env = {"ex": ex}
    exec(FIB_SRC, env)
    try:
        times = alternate([lambda: ex.submit(env["fib"], n).result()], runs)[0]
        value = ex.submit(env["fib"], n).result()
    finally:
        ex.shutdown()
    # ThreadPoolExecutor(2): in a subprocess, killed after DEADLOCK_TIMEOUT seconds.
    code = textwrap.dedent(f"""
        import concurrent.futures as cf, os, time
        ex = cf.ThreadPoolExecutor(2)
        {textwrap.indent(FIB_SRC, '        ').strip()}
        t = time.perf_counter()
        print(ex.submit(fib, {n}).result(), time.perf_counter() - t, flush=True)
        os._exit(0)
        """)
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=DEADLOCK_TIMEOUT)
        tpe = {"outcome": "finished", "output": p.stdout.strip()}
    except subprocess.TimeoutExpired:
        tpe = {"outcome": "deadlocked", "timeout_s": DEADLOCK_TIMEOUT}
    return {"n": n, "value": value, "calls": 2 * value_calls(n) - 1,
            "taskgraph_s": summary(times), "threadpool": tpe}


def value_calls(n):
    """Leaves of fib(n)'s call tree (fib(n) calls = 2 * leaves - 1)."""
    a, b = 1, 1
    for _ in range(n - 1):
        a, b = b, a + b
    return b


def future_costs(n=100_000):
    """ns per Future made, and per whole life on one thread (base class vs taskgraph's)."""
    def make(cls):
        t = time.perf_counter()
        for _ in range(n):
            cls()
        return (time.perf_counter() - t) / n * 1e9

    def life(cls):
        t = time.perf_counter()
        for i in range(n):
            f = cls()
            f.set_running_or_notify_cancel()
            f.set_result(i)
            f.result()
        return (time.perf_counter() - t) / n * 1e9

    def condition():
        import threading
        t = time.perf_counter()
        for _ in range(n):
            threading.Condition()
        return (time.perf_counter() - t) / n * 1e9

    rounds = [(make(cf.Future), make(TgFuture), life(cf.Future), life(TgFuture), condition())
              for _ in range(3)]
    best = [min(r[k] for r in rounds) for k in range(5)]
    return {"make_ns_base": best[0], "make_ns_taskgraph": best[1], "life_ns_base": best[2],
            "life_ns_taskgraph": best[3], "condition_ns": best[4]}


INSTR_SRC = """
import gc, sys
import taskgraph as tg
from concurrent.futures import ThreadPoolExecutor
def trivial(i):
    return i
kind, n, collect = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if not collect:
    gc.disable()
ex = tg.Executor(2) if kind == "taskgraph" else ThreadPoolExecutor(2)
ex.submit(trivial, 0).result()
fs = [ex.submit(trivial, i) for i in range(n)]
for f in fs:
    f.result()
ex.shutdown()
"""


def instructions(tmp="build/executor-callgrind"):
    """Instructions per submit+result (callgrind, per thread), or None without valgrind."""
    if not shutil.which("valgrind"):
        print("valgrind is not installed: no instruction counts", flush=True)
        return None
    os.makedirs(tmp, exist_ok=True)
    script = os.path.join(tmp, "submit.py")
    with open(script, "w") as fh:
        fh.write(INSTR_SRC)

    def threads(kind, n, collect):
        out = os.path.join(tmp, f"{kind}-{n}-{int(collect)}")
        for old in glob.glob(out + "*"):
            os.remove(old)
        subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                        f"--callgrind-out-file={out}", sys.executable, script, kind, str(n),
                        "1" if collect else "0"], check=True, capture_output=True)
        counts = {}
        for f in glob.glob(out + "-*"):
            for line in open(f):
                if line.startswith("summary:"):
                    counts[int(f.rsplit("-", 1)[1])] = int(line.split()[1])
        return counts

    res = {}
    for kind in ("taskgraph", "threadpool"):
        for collect in (True, False):
            a, b = threads(kind, 10_000, collect), threads(kind, 20_000, collect)
            per = {t: (b[t] - a.get(t, 0)) / 10_000 for t in b}
            main_thread = per.pop(min(per))
            res[f"{kind}_gc_{'on' if collect else 'off'}"] = {
                "submitter": main_thread, "workers": sum(per.values())}
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--out", default="benchmarks/results/executor.json")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions per submit+result with callgrind (minutes)")
    a = ap.parse_args(argv)
    runs = a.runs or (2 if a.quick else 5)
    scale = 5 if a.quick else 1
    load = list(os.getloadavg())
    print(f"load average at the start: {load}", flush=True)
    k = units_for(20)
    res = {"loadavg_start": load, "runs": runs}
    res["future"] = future_costs()
    print("  Future:", {key: round(v) for key, v in res["future"].items()}, flush=True)
    res["submit"] = per_task(runs, SUBMITS // scale)
    print(f"  submit+result: {res['submit']['ratio_vs_threadpool']:.1f}x ThreadPoolExecutor(2) "
          f"(target >= 5x)", flush=True)
    res["map_trivial"] = maps(runs, MAP_TRIVIAL // scale, trivial, 1)
    print(f"  map trivial: {res['map_trivial']['ratio_vs_threadpool']:.1f}x "
          f"ThreadPoolExecutor(2).map (target >= 20x)", flush=True)
    res["map_20us"] = maps(runs, MAP_20US // scale, busy, k, ppe_chunk=100)
    res["map_20us"]["busy_units"] = k
    print(f"  map ~20 us: {res['map_20us']['speedup_vs_serial']:.2f}x serial, "
          f"{res['map_20us']['ratio_vs_threadpool']:.2f}x ThreadPoolExecutor(2).map", flush=True)
    res["nested_fib"] = nested_fib(runs, FIB)
    print(f"  nested fib({FIB}): {res['nested_fib']['taskgraph_s']['median'] * 1e3:.1f} ms; "
          f"ThreadPoolExecutor(2): {res['nested_fib']['threadpool']['outcome']}", flush=True)
    if a.instructions:
        res["instructions"] = instructions()
        print("  instructions per submit+result:", res["instructions"], flush=True)
    res["loadavg_end"] = list(os.getloadavg())
    write_results(a.out, res, a.quick)


if __name__ == "__main__":
    main()
