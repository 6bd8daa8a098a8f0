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


def run(n=30, cutoff=18, workers=None, trace=None, scheduler=None):
    """Computes fib(n) serially and with taskgraph; returns the values, times and counters.
    With trace=PREFIX, a second (traced) run writes PREFIX.svg/.json/.tgtrace. `scheduler`
    (e.g. a taskgraph.dask.DaskScheduler) runs it there instead of on a local Scheduler."""
    t0 = time.perf_counter()
    expect = fib_serial(n)
    t_serial = time.perf_counter() - t0
    with (tg.Scheduler(workers=workers) if scheduler is None else tg.use_scheduler(scheduler)) as s:
        t0 = time.perf_counter()
        got = s.compute(fib(n, cutoff))
        t_par = time.perf_counter() - t0
        stats = s.stats() if scheduler is None else []
        if trace:  # a second, traced run (the timing above is untraced)
            with tg.trace() as tr:
                s.compute(fib(n, cutoff))
            tg.write_trace_files(tr, trace)
    return {"value": got, "expected": expect, "serial_s": t_serial, "taskgraph_s": t_par,
            "speedup": t_serial / t_par, "workers": getattr(s, "workers", None),
            "tasks": sum(w["tasks_run"] for w in stats), "stolen": sum(w["stolen"] for w in stats)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=30)
    p.add_argument("--cutoff", type=int, default=18)
    p.add_argument("--workers", type=int, default=tg.usable_cpus())
    p.add_argument("--trace", metavar="PREFIX",
                   help="also trace the run: write PREFIX.svg (executed graph), PREFIX.json "
                        "(timeline) and PREFIX.tgtrace, and print the work/span summary")
    a = p.parse_args(argv)
    r = run(a.n, a.cutoff, a.workers, a.trace)
    if r["value"] != r["expected"]:
        raise SystemExit(f"WRONG: fib({a.n}) gave {r['value']}, expected {r['expected']}")
    print(f"fib({a.n}) = {r['value']}  OK   cutoff {a.cutoff}, {a.workers} workers")
    print(f"  serial {r['serial_s']:.3f} s, taskgraph {r['taskgraph_s']:.3f} s, speed-up "
          f"{r['speedup']:.2f}x  ({r['tasks']} tasks, {r['stolen']} stolen)")


if __name__ == "__main__":
    main()
