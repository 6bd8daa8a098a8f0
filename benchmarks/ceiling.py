"""What two cores of this machine give plain Python code, with no scheduler at all: the ceiling
that a 2-worker speed-up of taskgraph is measured against (docs/benchmarks.md, "What limits
each figure").

    python benchmarks/ceiling.py [--quick] [--out FILE]

The same work, plain recursive fib(n) computed k times, three ways in each round, the ways
alternated (_common.alternate) over R rounds:

  1. processes: two processes of this interpreter, started and waiting at a barrier, then each
     computing its half at once; against one process computing both halves. Nothing is shared
     but the machine: the figure is what the two vCPUs give (their drift, another guest's
     load, the shared caches);
  2. threads: the same in two plain threads of this process (free-threaded: no GIL), against
     one thread: the machine plus what CPython's threads share (nothing, for this fib);
  3. taskgraph: fib(n + 1) with a cutoff at n - 11 on tg.Scheduler(2) against plain fib(n + 1),
     the fork-join figure of per_task.py, in the same rounds.

Each figure of a round is a speed-up: the serial time over the parallel one. Where the first
two are below 2, taskgraph's target is judged against a ceiling that the machine sets.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

import taskgraph as tg
from _common import Machine, alternate, load_text, spread_text, summary, write_results
from per_task import fib, fib_serial

CHILD = r"""
import sys, time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
n, k = int(sys.argv[1]), int(sys.argv[2])
fib(18)
print("ready", flush=True)
sys.stdin.readline()
t0 = time.perf_counter()
for _ in range(k):
    fib(n)
print(time.perf_counter() - t0, flush=True)
"""


def in_processes(count, n, k):
    """Wall time from the barrier's release until the last of `count` processes, each
    computing fib(n) k times, is done (each times its own loop; the release reaches them
    within microseconds of each other)."""
    ps = [subprocess.Popen([sys.executable, "-c", CHILD, str(n), str(k)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True) for _ in range(count)]
    try:
        for p in ps:
            assert p.stdout.readline().strip() == "ready"
        for p in ps:
            p.stdin.write("go\n")
            p.stdin.flush()
        return max(float(p.stdout.readline()) for p in ps)
    finally:
        for p in ps:
            p.stdin.close()
            p.wait()


def in_threads(count, n, k):
    """Wall time of `count` threads each computing fib(n) k times, started at a barrier."""
    barrier = threading.Barrier(count + 1)
    done = []

    def run():
        barrier.wait()
        for _ in range(k):
            fib_serial(n)
        done.append(time.perf_counter())

    ths = [threading.Thread(target=run) for _ in range(count)]
    for th in ths:
        th.start()
    barrier.wait()
    t0 = time.perf_counter()
    for th in ths:
        th.join()
    return max(done) - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    runs = 5 if a.quick else 9
    n, k = (24, 4) if a.quick else (27, 8)  # k is even: two halves of k / 2
    print(f"ceiling: Python {sys.version.split()[0]}, GIL enabled {tg.gil_enabled()}, "
          f"{tg.usable_cpus()} CPUs, fib({n}) x {k} per side, {runs} rounds", flush=True)
    with tg.Scheduler(2) as s:
        s.compute(fib(20, 12))
        expect = fib_serial(n + 1)

        def tg_parallel():
            t0 = time.perf_counter()
            for _ in range(k // 2):
                assert s.compute(fib(n + 1, n - 11)) == expect
            return time.perf_counter() - t0

        def tg_serial():
            t0 = time.perf_counter()
            for _ in range(k // 2):
                fib_serial(n + 1)
            return time.perf_counter() - t0

        sides = [lambda: in_processes(1, n, k), lambda: in_processes(2, n, k // 2),
                 lambda: in_threads(1, n, k), lambda: in_threads(2, n, k // 2),
                 tg_serial, tg_parallel]
        m = Machine()
        t = alternate(sides, runs, timer=lambda f: f())
        load = m.stop()
    out = {"n": n, "k": k, "load": load}
    for key, label, (one, two) in (
            ("processes", "2 processes over 1", (t[0], t[1])),
            ("threads", "2 plain threads over 1", (t[2], t[3])),
            ("taskgraph", f"taskgraph fib({n + 1}) cutoff {n - 11}, 2 workers over serial",
             (t[4], t[5]))):
        sp = [x / y for x, y in zip(one, two)]
        out[key] = {**summary(sp), "values": sp, "label": label}
        print(f"  {label}: {spread_text(out[key], fmt='{:.2f}', unit='x')}", flush=True)
    out["taskgraph_over_processes"] = summary(
        [x / y for x, y in zip(out["taskgraph"]["values"], out["processes"]["values"])])
    print(f"  taskgraph / processes, per round: "
          f"{spread_text(out['taskgraph_over_processes'], fmt='{:.2f}')}; {load_text(load)}")
    if a.out:
        write_results(a.out, out, a.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
