"""Parallel quicksort: spawn a task per partition, cut off to sorted() for small parts.

    python examples/quicksort.py --size 1000000 --cutoff 20000 --workers 2 [--boxed]

Written the free-threading-friendly way (docs/performance.md): the values travel between
tasks as array('d') (unboxed doubles), so a task never touches float objects that another
thread created. Each task makes the float objects it works on and owns them; on free-threaded
CPython that keeps reference counting local to the thread, where it is cheap. Checks the
result against sorted() and prints the time and the speed-up over the same quicksort run
serially (plain recursion, no tasks), and the time of sorted().

--boxed also runs the same algorithm on a list of Python floats made by the main thread (what
most code would write first) and prints its speed-up: there every task pays atomic reference
counting on objects it does not own.
"""
import argparse
import random
import time
from array import array

import taskgraph as tg


def quicksort_serial(a, cutoff):
    if len(a) <= cutoff:
        return array("d", sorted(a))
    pivot = a[len(a) // 2]
    lo = array("d", [x for x in a if x < pivot])
    mid = array("d", [x for x in a if x == pivot])
    hi = array("d", [x for x in a if x > pivot])
    return quicksort_serial(lo, cutoff) + mid + quicksort_serial(hi, cutoff)


@tg.task
def quicksort(a, cutoff):
    if len(a) <= cutoff:
        return array("d", sorted(a))
    pivot = a[len(a) // 2]
    lo = quicksort(array("d", [x for x in a if x < pivot]), cutoff)  # spawned: a thief may take it
    hi = quicksort(array("d", [x for x in a if x > pivot]), cutoff)
    mid = array("d", [x for x in a if x == pivot])
    return lo.result() + mid + hi.result()


# The same algorithm on a list of boxed floats (--boxed): for comparison only.
def quicksort_boxed_serial(xs, cutoff):
    if len(xs) <= cutoff:
        return sorted(xs)
    pivot = xs[len(xs) // 2]
    lo = [x for x in xs if x < pivot]
    mid = [x for x in xs if x == pivot]
    hi = [x for x in xs if x > pivot]
    return quicksort_boxed_serial(lo, cutoff) + mid + quicksort_boxed_serial(hi, cutoff)


@tg.task(name="quicksort_boxed")
def quicksort_boxed(xs, cutoff):
    if len(xs) <= cutoff:
        return sorted(xs)
    pivot = xs[len(xs) // 2]
    lo = quicksort_boxed([x for x in xs if x < pivot], cutoff)
    hi = quicksort_boxed([x for x in xs if x > pivot], cutoff)
    mid = [x for x in xs if x == pivot]
    return lo.result() + mid + hi.result()


def make_input(size, seed):
    rnd = random.Random(seed)
    return array("d", (rnd.random() for _ in range(size)))


def run(size=1_000_000, cutoff=20_000, workers=None, seed=1, trace=None, boxed=False,
        scheduler=None):
    """Sorts `size` random doubles serially and with taskgraph; returns the sorted arrays,
    times and counters (and the boxed variant's figures with boxed=True). `scheduler` (e.g. a
    taskgraph.dask.DaskScheduler) runs it there instead of on a local Scheduler."""
    data = make_input(size, seed)
    t0 = time.perf_counter()
    expect = sorted(data)
    t_sorted = time.perf_counter() - t0
    t0 = time.perf_counter()
    serial = quicksort_serial(data, cutoff)
    t_serial = time.perf_counter() - t0
    out = {"input": data, "serial": serial, "sorted_s": t_sorted, "serial_s": t_serial}
    with (tg.Scheduler(workers=workers) if scheduler is None else tg.use_scheduler(scheduler)) as s:
        t0 = time.perf_counter()
        got = s.compute(quicksort(data, cutoff))
        t_par = time.perf_counter() - t0
        stats = s.stats() if scheduler is None else []
        if trace:  # a second, traced run (the timing above is untraced)
            with tg.trace() as tr:
                s.compute(quicksort(data, cutoff))
            tg.write_trace_files(tr, trace)
        if boxed:
            xs = list(data)  # floats made by this (the main) thread
            t0 = time.perf_counter()
            out["boxed_serial"] = quicksort_boxed_serial(xs, cutoff)
            out["boxed_serial_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            out["boxed"] = s.compute(quicksort_boxed(xs, cutoff))
            out["boxed_taskgraph_s"] = time.perf_counter() - t0
            out["boxed_speedup"] = out["boxed_serial_s"] / out["boxed_taskgraph_s"]
    out.update(value=got, expected=expect, taskgraph_s=t_par, speedup=t_serial / t_par,
               workers=getattr(s, "workers", None), tasks=sum(w["tasks_run"] for w in stats),
               stolen=sum(w["stolen"] for w in stats))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--cutoff", type=int, default=20_000)
    p.add_argument("--workers", type=int, default=tg.usable_cpus())
    p.add_argument("--trace", metavar="PREFIX",
                   help="also trace the run: write PREFIX.svg (executed graph), PREFIX.json "
                        "(timeline) and PREFIX.tgtrace, and print the work/span summary")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--boxed", action="store_true",
                   help="also run the same algorithm on a list of Python floats, for comparison")
    a = p.parse_args(argv)
    r = run(a.size, a.cutoff, a.workers, a.seed, a.trace, a.boxed)
    if list(r["value"]) != r["expected"] or list(r["serial"]) != r["expected"]:
        raise SystemExit("WRONG: the parallel quicksort did not sort")
    if a.boxed and (r["boxed"] != r["expected"] or r["boxed_serial"] != r["expected"]):
        raise SystemExit("WRONG: the boxed quicksort did not sort")
    print(f"quicksort of {a.size} floats  OK   cutoff {a.cutoff}, {a.workers} workers")
    print(f"  serial quicksort {r['serial_s']:.3f} s, taskgraph {r['taskgraph_s']:.3f} s, speed-up "
          f"{r['speedup']:.2f}x (sorted(): {r['sorted_s']:.3f} s)  "
          f"({r['tasks']} tasks, {r['stolen']} stolen)")
    if a.boxed:
        print(f"  boxed floats (list made by the main thread): serial {r['boxed_serial_s']:.3f} s, "
              f"taskgraph {r['boxed_taskgraph_s']:.3f} s, speed-up {r['boxed_speedup']:.2f}x")


if __name__ == "__main__":
    main()
