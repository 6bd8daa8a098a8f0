"""Core scheduler figures for docs/benchmarks.md, each a ratio measured in this one run.

  1. per-task overhead of 50,000 trivial tasks: taskgraph vs ThreadPoolExecutor(2)
     submit-and-wait (taskgraph both as a lazy DAG computed from outside, and as children
     spawned and joined inside one task);
  2. fib(28) with cutoff 16 on 2 workers vs fib_serial(28): speed-up;
  3. fib(20) without cutoff on 1 worker vs fib_serial(20): work overhead c1 = T1 / Tserial;
  4. tracing: the trivial-task figures of 1. with a taskgraph.trace() open, as a ratio.

Median of 5 runs (min-max). Usage: python benchmarks/scheduler_core.py [--quick]
"""
import concurrent.futures
import statistics
import sys
import time

import taskgraph as tg


from suite import fib_serial, trivial, trivial_t  # the suite's task bodies (same folder)
from suite import fib_t as fib


@tg.task
def spawn_many(n):
    kids = [trivial_t(i) for i in range(n)]
    return sum(k.result() for k in kids)


def timed(f, runs=5):
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs), min(xs), max(xs)


def fmt(m, unit=1.0, suffix="s"):
    med, lo, hi = m
    return f"{med * unit:8.3f} {suffix} ({lo * unit:.3f}-{hi * unit:.3f})"


def main(argv):
    quick = "--quick" in argv
    n_trivial = 10_000 if quick else 50_000
    print(f"taskgraph core benchmarks: Python {sys.version.split()[0]}, GIL enabled: "
          f"{tg.gil_enabled()}, {tg.usable_cpus()} usable CPUs, median of 5 (min-max)")

    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        tpe = timed(lambda: [f.result() for f in [ex.submit(trivial, i) for i in range(n_trivial)]])
    def traced(f):
        def g():
            with tg.trace():
                f()
        return g

    with tg.Scheduler(workers=2) as s:
        dag = timed(lambda: s.compute(*[trivial_t(i) for i in range(n_trivial)]))
        fj = timed(lambda: s.compute(spawn_many(n_trivial)))
        dag_tr = timed(traced(lambda: s.compute(*[trivial_t(i) for i in range(n_trivial)])))
        fj_tr = timed(traced(lambda: s.compute(spawn_many(n_trivial))))
        t_fib28 = timed(lambda: s.compute(fib(28, 16)))
    t_serial28 = timed(lambda: fib_serial(28))
    with tg.Scheduler(workers=1) as s1:
        t_fib20 = timed(lambda: s1.compute(fib(20)))
    t_serial20 = timed(lambda: fib_serial(20))

    us = 1e6 / n_trivial
    print(f"\n1. trivial-task overhead, {n_trivial} tasks, 2 workers (us per task)")
    print(f"   ThreadPoolExecutor(2)     {fmt(tpe, us, 'us')}")
    print(f"   taskgraph lazy DAG        {fmt(dag, us, 'us')}   -> {tpe[0] / dag[0]:.1f}x lower")
    print(f"   taskgraph spawn+join      {fmt(fj, us, 'us')}   -> {tpe[0] / fj[0]:.1f}x lower")
    print("\n2. fib(28), cutoff 16, 2 workers")
    print(f"   fib_serial(28)            {fmt(t_serial28)}")
    print(f"   taskgraph                 {fmt(t_fib28)}   -> speed-up {t_serial28[0] / t_fib28[0]:.2f}")
    print("\n4. tracing on (a trace() block open; records are built when first read)")
    print(f"   lazy DAG, traced          {fmt(dag_tr, us, 'us')}   -> +{100 * (dag_tr[0] / dag[0] - 1):.0f}%")
    print(f"   spawn+join, traced        {fmt(fj_tr, us, 'us')}   -> +{100 * (fj_tr[0] / fj[0] - 1):.0f}%")
    print("\n3. fib(20), no cutoff (21891 tasks), 1 worker")
    print(f"   fib_serial(20)            {fmt(t_serial20, 1e3, 'ms')}")
    print(f"   taskgraph                 {fmt(t_fib20, 1e3, 'ms')}   -> c1 = {t_fib20[0] / t_serial20[0]:.1f}"
          f"  ({t_fib20[0] / 21891 * 1e6:.2f} us per task)")


if __name__ == "__main__":
    main(sys.argv)
