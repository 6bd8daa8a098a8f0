"""What object ownership costs a task on free-threaded CPython (docs/performance.md).

    python benchmarks/ownership.py [--n 1000000]

Free-threaded CPython counts references to an object with a cheap, thread-local count on the
thread that made it and an atomic, shared one on every other thread. A task that touches
objects another thread made pays the atomic count. This script times the same work done in a
task (on 1 worker, so nothing else runs) on:

  * a list of floats made by the main thread (what most code does first);
  * a list of the same floats made inside the task itself;
  * the same values in an array('d') made by the main thread (unboxed: the task makes, and
    owns, the float objects it works on);

for three bodies: sum(), sorted(), and the partition step of the quicksort example. Each is
the median of 5 runs, alternating. Then two tasks at once, on 2 workers, sort the two halves of
one list made by the main thread: interleaved halves (every other element: neighbouring objects,
whose reference counts share cache lines) against contiguous halves.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from array import array

import taskgraph as tg


def partition(xs):
    p = xs[len(xs) // 2]
    return [x for x in xs if x < p], [x for x in xs if x > p]


BODIES = {"sum()": sum, "sorted()": sorted, "quicksort partition": partition}


@tg.task
def sort_three_times(data):
    t0 = time.perf_counter()
    for _ in range(3):
        sorted(data)
    return time.perf_counter() - t0


@tg.task
def timed_in_task(body, data, make_local):
    """The body's time inside a task; with make_local, on a copy made by this task."""
    if make_local:
        data = [float(x) for x in data]  # new float objects, made (and owned) by this thread
    t0 = time.perf_counter()
    body(data)
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    a = ap.parse_args(argv)
    rnd = random.Random(1)
    boxed = [rnd.random() for _ in range(a.n)]  # made by the main thread
    unboxed = array("d", boxed)
    cases = {"list made by the main thread": (boxed, False),
             "list made by the task": (boxed, True),
             "array('d') made by the main thread": (unboxed, False)}
    print(f"ownership: {a.n:,} floats, Python {sys.version.split()[0]}, GIL enabled "
          f"{tg.gil_enabled()}; ms inside a task on 1 worker, median of 5")
    out = {}
    with tg.Scheduler(workers=1) as s:
        for bname, body in BODIES.items():
            times = {c: [] for c in cases}
            for _ in range(5):
                for c, (data, local) in cases.items():
                    times[c].append(s.compute(timed_in_task(body, data, local)))
            med = {c: statistics.median(v) * 1e3 for c, v in times.items()}
            base = med["list made by the task"]
            out[bname] = med
            print(f"  {bname}:")
            for c, m in med.items():
                print(f"    {c:38} {m:8.1f} ms  ({m / base:.2f}x the task's own list)")
    big = [rnd.random() for _ in range(2 * a.n)]
    halves = {"interleaved halves": (big[0::2], big[1::2]),
              "contiguous halves": (big[:a.n], big[a.n:])}
    print("  two tasks at once on 2 workers, each sorting half of one main-made list 3 times "
          "(the slower of the two, median of 3):")
    with tg.Scheduler(workers=2) as s2:
        times = {k: [] for k in halves}
        for _ in range(3):
            for k, (x, y) in halves.items():
                times[k].append(max(s2.compute(sort_three_times(x), sort_three_times(y))))
    for k, v in times.items():
        out[k] = statistics.median(v) * 1e3
        print(f"    {k:38} {out[k]:8.1f} ms")
    return out


if __name__ == "__main__":
    main()
