"""Parallel Fibonacci: recursive fork-join with a sequential cutoff.

    python examples/fib.py --n 30 --cutoff 18 --workers 2

Every call above the cutoff spawns its two children onto the worker's own deque and joins
them; idle workers steal the older (bigger) halves. Checks the answer against the plain
recursive function and prints the time and the speed-up over it.
"""
import argparse
import time

import taskgraph as tg


def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


@tg.task(name="fib")
def fib(n, cutoff=0):
    if n <= max(cutoff, 1):
        return fib_serial(n)
    a = fib(n - 1, cutoff)   # spawned onto this worker's deque; the parent keeps running
    b = fib(n - 2, cutoff)
    return a.result() + b.result()  # join: runs other tasks until both are done


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=30)
    p.add_argument("--cutoff", type=int, default=18)
    p.add_argument("--workers", type=int, default=tg.usable_cpus())
    p.add_argument("--trace", metavar="PREFIX",
                   help="also trace the run: write PREFIX.svg (executed graph), PREFIX.json "
                        "(timeline) and PREFIX.tgtrace, and print the work/span summary")
    a = p.parse_args(argv)

    t0 = time.perf_counter()
    expect = fib_serial(a.n)
    t_serial = time.perf_counter() - t0

    with tg.Scheduler(workers=a.workers) as s:
        t0 = time.perf_counter()
        got = s.compute(fib(a.n, a.cutoff))
        t_par = time.perf_counter() - t0
        stats = s.stats()
        if a.trace:  # a second, traced run (the timing above is untraced)
            with tg.trace() as tr:
                s.compute(fib(a.n, a.cutoff))
            tg.write_trace_files(tr, a.trace)
    if got != expect:
        raise SystemExit(f"WRONG: fib({a.n}) gave {got}, expected {expect}")
    tasks = sum(w["tasks_run"] for w in stats)
    stolen = sum(w["stolen"] for w in stats)
    print(f"fib({a.n}) = {got}  OK   cutoff {a.cutoff}, {a.workers} workers")
    print(f"  serial {t_serial:.3f} s, taskgraph {t_par:.3f} s, speed-up {t_serial / t_par:.2f}x"
          f"  ({tasks} tasks, {stolen} stolen)")


if __name__ == "__main__":
    main()
