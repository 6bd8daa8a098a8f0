"""Parallel quicksort: spawn a task per partition, cut off to sorted() for small parts.

    python examples/quicksort.py --size 1000000 --cutoff 20000 --workers 2

Checks the result against sorted() and prints the time and the speed-up over the same
quicksort run serially (plain recursion, no tasks) and over sorted().
"""
import argparse
import random
import time

import taskgraph as tg


def quicksort_serial(xs, cutoff):
    if len(xs) <= cutoff:
        return sorted(xs)
    pivot = xs[len(xs) // 2]
    lo = [x for x in xs if x < pivot]
    mid = [x for x in xs if x == pivot]
    hi = [x for x in xs if x > pivot]
    return quicksort_serial(lo, cutoff) + mid + quicksort_serial(hi, cutoff)


@tg.task
def quicksort(xs, cutoff):
    if len(xs) <= cutoff:
        return sorted(xs)
    pivot = xs[len(xs) // 2]
    lo = quicksort([x for x in xs if x < pivot], cutoff)   # spawned: a thief may take it
    hi = quicksort([x for x in xs if x > pivot], cutoff)
    mid = [x for x in xs if x == pivot]
    return lo.result() + mid + hi.result()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--cutoff", type=int, default=20_000)
    p.add_argument("--workers", type=int, default=tg.usable_cpus())
    p.add_argument("--trace", metavar="PREFIX",
                   help="also trace the run: write PREFIX.svg (executed graph), PREFIX.json "
                        "(timeline) and PREFIX.tgtrace, and print the work/span summary")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)

    rnd = random.Random(a.seed)
    xs = [rnd.random() for _ in range(a.size)]
    t0 = time.perf_counter()
    expect = sorted(xs)
    t_sorted = time.perf_counter() - t0
    t0 = time.perf_counter()
    serial = quicksort_serial(xs, a.cutoff)
    t_serial = time.perf_counter() - t0
    assert serial == expect

    with tg.Scheduler(workers=a.workers) as s:
        t0 = time.perf_counter()
        got = s.compute(quicksort(xs, a.cutoff))
        t_par = time.perf_counter() - t0
        stats = s.stats()
        if a.trace:  # a second, traced run (the timing above is untraced)
            with tg.trace() as tr:
                s.compute(quicksort(xs, a.cutoff))
            tg.write_trace_files(tr, a.trace)
    if got != expect:
        raise SystemExit("WRONG: the parallel quicksort did not sort")
    print(f"quicksort of {a.size} floats  OK   cutoff {a.cutoff}, {a.workers} workers")
    print(f"  serial quicksort {t_serial:.3f} s, taskgraph {t_par:.3f} s, speed-up "
          f"{t_serial / t_par:.2f}x (sorted(): {t_sorted:.3f} s)  "
          f"({sum(w['tasks_run'] for w in stats)} tasks, {sum(w['stolen'] for w in stats)} stolen)")


if __name__ == "__main__":
    main()
