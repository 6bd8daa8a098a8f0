"""The per-task figures of the native path (docs/benchmarks.md, "Per-task targets").

    python benchmarks/per_task.py [--quick] [--out FILE]

Every figure is a ratio or a cost measured in this one run. Where two things are compared
(taskgraph and ThreadPoolExecutor, traced and untraced, parallel and serial), they are run
alternately, R times each, and the medians are compared: these VMs drift by tens of percent
within a minute, and alternating spreads the drift over both sides.

  1. trivial task, spawned (children of one task) and lazy (a flat DAG computed from
     outside), per task, against ThreadPoolExecutor(2) submit + result;
  2. c1 = T1 / T_serial: fib(20) spawning a task at every level, on 1 worker;
  3. fib(28) with a cutoff at 16 on 2 workers: speed-up over plain recursive fib(28);
  4. 1,000,000 lazy trivial tasks built and computed from the main thread, end to end;
  5. a 64 x 64 stencil DAG with trivial bodies (3 edges per task), 1 worker:
     (T - T_serial) / tasks, the cost of a task and its edges;
  6. tracing on, trivial tasks (lazy and spawned): the extra time with a trace open;
  7. examples/quicksort.py, 1,000,000 values, 2 workers: speed-up over the same algorithm run
     serially (and, for comparison, the same on a list of boxed floats).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import json
import os
import platform
import statistics
import sys
import time

import taskgraph as tg
from _common import alternate, summary, timed  # noqa: F401 (cutoff.py imports alternate from here)

HERE = os.path.dirname(os.path.abspath(__file__))


def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


@tg.task(name="fib")
def fib(n, cutoff=1):
    if n <= cutoff:
        return fib_serial(n)
    a = fib(n - 1, cutoff)
    b = fib(n - 2, cutoff)
    return a.result() + b.result()


@tg.task(name="trivial")
def trivial(i):
    return i


@tg.task(name="spawn_many")
def spawn_many(n):
    kids = [trivial(i) for i in range(n)]
    return sum(k.result() for k in kids)


@tg.task(name="cell")
def cell(a, b, c):
    return 1


def cell_plain(a, b, c):
    return 1


def stencil(width, steps, make):
    prev = [make(0, 0, 0) for _ in range(width)]
    for _ in range(steps - 1):
        prev = [make(prev[max(i - 1, 0)], prev[i], prev[min(i + 1, width - 1)]) for i in range(width)]
    return prev


def load_example(name):
    path = os.path.join(os.path.dirname(HERE), "examples", name)
    spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def figure(results, key, label, value, unit, target, aim, better, **details):
    met = value <= target if better == "lower" else value >= target
    results.append({"key": key, "label": label, "value": value, "unit": unit, "target": target,
                    "aim": aim, "better": better, "met": met, **details})
    sign = "<=" if better == "lower" else ">="
    print(f"  {label}: {value:.3g} {unit} (target {sign} {target}, aim {sign} {aim}) "
          f"{'met' if met else 'MISSED'}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    q = a.quick
    reps = 5 if q else 11
    n_trivial = 20_000 if q else 100_000
    res = []
    print(f"per-task figures: Python {sys.version.split()[0]}, GIL enabled {tg.gil_enabled()}, "
          f"{tg.usable_cpus()} CPUs, {'quick' if q else 'full'}", flush=True)

    # 1 and 6: trivial tasks, against ThreadPoolExecutor(2); with a trace open
    with cf.ThreadPoolExecutor(2) as ex, tg.Scheduler(workers=2) as s:
        def tpe():
            for f in [ex.submit(int, i) for i in range(n_trivial)]:
                f.result()

        def spawned():
            s.compute(spawn_many(n_trivial))

        def lazy():
            s.compute([trivial(i) for i in range(n_trivial)])

        def traced(f):
            def run():
                with tg.trace():
                    f()
            return run

        spawned(), lazy(), tpe()  # warm up
        t_tpe, t_sp, t_lz, t_sp_tr, t_lz_tr = alternate(
            [tpe, spawned, lazy, traced(spawned), traced(lazy)], reps)
    per = {k: statistics.median(v) / n_trivial * 1e6 for k, v in
           [("tpe", t_tpe), ("spawned", t_sp), ("lazy", t_lz), ("spawned_traced", t_sp_tr),
            ("lazy_traced", t_lz_tr)]}
    worst = max(per["spawned"], per["lazy"])
    figure(res, "trivial_vs_tpe", "trivial task vs ThreadPoolExecutor(2), spawned and lazy "
           "(the slower of the two)", per["tpe"] / worst, "x lower", 10, 25, "higher",
           us_per_task=per, tasks=n_trivial)
    trace_pct = max(per["spawned_traced"] / per["spawned"], per["lazy_traced"] / per["lazy"]) * 100 - 100
    figure(res, "tracing", "tracing on, trivial tasks (the larger of spawned and lazy)",
           trace_pct, "% extra", 15, 5, "lower",
           spawned_pct=per["spawned_traced"] / per["spawned"] * 100 - 100,
           lazy_pct=per["lazy_traced"] / per["lazy"] * 100 - 100)

    # 2: c1
    with tg.Scheduler(workers=1) as s1:
        s1.compute(fib(16))
        t_ser, t_1 = alternate([lambda: fib_serial(20), lambda: s1.compute(fib(20))], reps * 2)
    c1 = statistics.median(t_1) / statistics.median(t_ser)
    figure(res, "c1", "c1 = T1 / T_serial, fib(20) spawning at every level, 1 worker", c1, "",
           10, 5, "lower", tasks=21891, ns_per_task=statistics.median(t_1) / 21891 * 1e9)

    # 3: fib(28) cutoff 16 on 2 workers
    n = 25 if q else 28
    with tg.Scheduler(workers=2) as s2:
        s2.compute(fib(20, 16))
        t_ser, t_par = alternate([lambda: fib_serial(n), lambda: s2.compute(fib(n, 16))], reps)
    figure(res, "fib_cutoff", f"fib({n}) cutoff 16, 2 workers, speed-up over serial",
           statistics.median(t_ser) / statistics.median(t_par), "x", 1.7, 1.9, "higher",
           serial=summary(t_ser), taskgraph=summary(t_par))

    # 4: 1,000,000 lazy trivial tasks, built and computed end to end
    m = 200_000 if q else 1_000_000
    with tg.Scheduler(workers=2) as s2:
        s2.compute([trivial(i) for i in range(10_000)])
        ts = [timed(lambda: s2.compute([trivial(i) for i in range(m)])) for _ in range(3 if q else 5)]
    figure(res, "lazy_million", f"{m:,} lazy trivial tasks built and computed from the main "
           "thread, end to end", m / statistics.median(ts) / 1e3, "k tasks/s", 400, 1000,
           "higher", seconds=summary(ts))

    # 5: stencil DAG, 64 x 64, trivial bodies, 1 worker
    w = 32 if q else 64
    with tg.Scheduler(workers=1) as s1:
        s1.compute(stencil(w, w, cell))
        t_ser, t_dag = alternate([lambda: stencil(w, w, cell_plain),
                                  lambda: s1.compute(stencil(w, w, cell))], reps)
    per_task = (statistics.median(t_dag) - statistics.median(t_ser)) / (w * w) * 1e6
    figure(res, "stencil", f"2-D stencil DAG ({w}x{w}, trivial bodies), per task incl. 3 edges, "
           "1 worker", per_task, "us", 2, 1, "lower", serial=summary(t_ser), taskgraph=summary(t_dag))

    # 7: the quicksort example
    qs = load_example("quicksort.py")
    size = 200_000 if q else 1_000_000
    data = qs.make_input(size, 1)
    boxed = list(data)
    with tg.Scheduler(workers=2) as s2:
        s2.compute(qs.quicksort(data[:20_000], 20_000))
        t_ser, t_par, t_bser, t_bpar = alternate(
            [lambda: qs.quicksort_serial(data, 20_000), lambda: s2.compute(qs.quicksort(data, 20_000)),
             lambda: qs.quicksort_boxed_serial(boxed, 20_000),
             lambda: s2.compute(qs.quicksort_boxed(boxed, 20_000))], 3 if q else 5)
    figure(res, "quicksort", f"examples/quicksort.py, {size:,} values, 2 workers, speed-up",
           statistics.median(t_ser) / statistics.median(t_par), "x", 1.4, 1.7, "higher",
           serial=summary(t_ser), taskgraph=summary(t_par),
           boxed_speedup=statistics.median(t_bser) / statistics.median(t_bpar),
           boxed_serial=summary(t_bser), boxed_taskgraph=summary(t_bpar))

    env = {"python": sys.version.split()[0], "gil_enabled": tg.gil_enabled(),
           "machine": platform.machine(), "cpus": tg.usable_cpus(), "quick": q}
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"env": env, "figures": res}, f, indent=1)
        print(f"wrote {a.out}")
    return res


if __name__ == "__main__":
    main()
