"""The per-task figures of the native path (docs/benchmarks.md: the targets, "Per-task figures").

    python benchmarks/per_task.py [--quick] [--out FILE]

Every figure is a ratio or a cost measured in this one run, from R >= 5 alternated rounds
(benchmarks/_common.py): where two things are compared (taskgraph and ThreadPoolExecutor,
traced and untraced, parallel and serial) they run in turn within each round, and the figure
of a round is their ratio, so a drift of the machine lands on both sides. Each figure is
printed as its median with the min-max and spread of the rounds, beside the machine's idle
share and the share other programs used meanwhile (/proc/stat); a target is met only when the
median meets it and the worst round meets its floor (the target itself where none is given),
on an idle machine (other programs under 10%).

  1. trivial task, spawned (children of one task) and lazy (a flat DAG computed from
     outside), per task, against ThreadPoolExecutor(2) submit + result;
  2. c1 = T1 / T_serial: fib(20) spawning a task at every level, on 1 worker; beside it, in
     the same rounds, the c1 of the bare floor (benchmarks/floor.c: spawn and result() with no
     scheduler, what CPython alone costs) and taskgraph's ns per task above it, and both again
     on fib with one argument whose leaves return n. Target: c1 <= 5; where the floor's own
     c1 is above 4, taskgraph within 100 ns per task of the floor instead;
  3. fib(28) with a cutoff at 16 on 2 workers: speed-up over plain recursive fib(28); in the
     same rounds, a trace of it on 1 worker and on 2: the work inflation (Trace.inflation,
     the tasks' own time on 2 workers over 1);
  4. 1,000,000 lazy trivial tasks built and computed from the main thread, end to end;
  5. a 64 x 64 stencil DAG with trivial bodies (3 edges per task), 1 worker:
     (T - T_serial) / tasks, the cost of a task and its edges;
  6. tracing on, trivial tasks (lazy and spawned): the extra time with a trace open;
  7. examples/quicksort.py, 1,000,000 values, 2 workers: speed-up over the same algorithm run
     serially (and, for comparison, the same on a list of boxed floats);
  8. 12-queens written naturally (fork-join per row, benchmarks/inflation_programs.py): 2
     workers over 1 worker (and, not judged, the same with its constant written as a literal);
  9. joining many nodes at once, 2 workers: inside a task, tg.gather(*kids) of 50,000 trivial
     spawned children against a loop of .result() over the same children (the join alone is
     timed); from outside, tg.compute(*nodes) of 50,000 lazy trivial nodes against
     tg.compute(nodes) of them as one list (the call alone is timed).
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
from _common import (Machine, alternate, is_idle, load_text, spread_text, summary,  # noqa: F401
                     timed, verdict, worker_schedstat)  # (cutoff.py imports alternate from here)
from _floor import load_floor
from targets import (C1, C1_FLOOR_ABOVE, C1_NS_OVER_FLOOR, COMPUTE_STAR, FIB_INFLATION, FIB_SPEEDUP,
                     GATHER, TRACING_PCT, c1_verdict)

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


# The same fib with no scheduler at all: benchmarks/floor.c's spawn() and result() (the bare
# floor of c1, which any implementation of this API pays in CPython alone); `spawn` is bound in
# main() when the floor extension could be built.
def fib_floor(n, cutoff=1):
    if n <= cutoff:
        return fib_serial(n)
    a = spawn(fib_floor, n - 1, cutoff)
    b = spawn(fib_floor, n - 2, cutoff)
    return a.result() + b.result()


# fib with one argument whose leaves return n with no further call: the floor's c1 moves with
# the shape of the leaves, so it is measured on both.
@tg.task(name="fib_leaf")
def fib_leaf(n):
    if n < 2:
        return n
    a = fib_leaf(n - 1)
    b = fib_leaf(n - 2)
    return a.result() + b.result()


def fib_leaf_floor(n):
    if n < 2:
        return n
    a = spawn(fib_leaf_floor, n - 1)
    b = spawn(fib_leaf_floor, n - 2)
    return a.result() + b.result()


spawn = None


@tg.task(name="trivial")
def trivial(i):
    return i


@tg.task(name="spawn_many")
def spawn_many(n):
    kids = [trivial(i) for i in range(n)]
    return sum(k.result() for k in kids)


@tg.task(name="join_kids")
def join_kids(n, gather):
    """Spawns n trivial children, then joins them with one tg.gather or with a loop of
    .result(): the join's own time (the children left on this worker's deque run in it)."""
    kids = [trivial(i) for i in range(n)]
    t0 = time.perf_counter()
    values = tg.gather(*kids) if gather else [k.result() for k in kids]
    t = time.perf_counter() - t0
    assert values[-1] == n - 1
    return t


def compute_time(s, n, star):
    """The time of one tg.compute of n lazy trivial nodes built beforehand: as arguments
    (compute(*nodes)) or as one list (compute(nodes))."""
    nodes = [trivial(i) for i in range(n)]
    t0 = time.perf_counter()
    values = tg.compute(*nodes, scheduler=s) if star else tg.compute(nodes, scheduler=s)
    t = time.perf_counter() - t0
    assert values[-1] == n - 1
    return t


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


def figure(results, key, label, values, unit, target, better, floor=None, load=None, aim=None,
           **details):
    """Records a figure from its per-round values: median, worst, spread, and the verdict
    (_common.verdict: median and worst round, idle machine)."""
    word, det = verdict(values, target, better, floor=floor, load=load)
    s = summary(values)
    results.append({"key": key, "label": label, "value": s["median"], "unit": unit,
                    "target": target, "floor": floor, "aim": aim, "better": better,
                    "met": word == "met", "verdict": word, "summary": s, "worst": det["worst"],
                    "values": list(values),
                    "load": load or {}, **details})
    op = "<=" if better == "lower" else ">="
    fl = f", floor {floor}" if floor is not None else ""
    print(f"  {label}: {spread_text(s, unit=' ' + unit if unit else '')} (target {op} {target}{fl}) "
          f"{word.upper() if word == 'missed' else word}; {load_text(load or {})}", flush=True)


def rounds(fns, reps, settle=False, timer=timed):
    """alternate(fns, reps, settle, timer), with the machine's load over the whole."""
    m = Machine()
    ts = alternate(fns, reps, settle, timer)
    return ts, m.stop()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--only", help="comma-separated figure keys")
    a = ap.parse_args(argv)
    q = a.quick
    reps = 5 if q else 11
    n_trivial = 20_000 if q else 100_000
    want = set(a.only.split(",")) if a.only else None
    on = lambda *keys: want is None or bool(want & set(keys))  # noqa: E731
    res = []
    print(f"per-task figures: Python {sys.version.split()[0]}, GIL enabled {tg.gil_enabled()}, "
          f"{tg.usable_cpus()} CPUs, {'quick' if q else 'full'}, {reps} rounds", flush=True)

    # 1 and 6: trivial tasks, against ThreadPoolExecutor(2); with a trace open
    if on("trivial_vs_tpe", "tracing"):
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
            # Settled (_common.alternate): each timed run follows a run of its own, so that no
            # figure depends on which of the others (another pool, or the same one with a
            # trace) ran just before it.
            (t_tpe, t_sp, t_lz, t_sp_tr, t_lz_tr), load = rounds(
                [tpe, spawned, lazy, traced(spawned), traced(lazy)], reps, settle=True)
        per = {k: statistics.median(v) / n_trivial * 1e6 for k, v in
               [("tpe", t_tpe), ("spawned", t_sp), ("lazy", t_lz), ("spawned_traced", t_sp_tr),
                ("lazy_traced", t_lz_tr)]}
        figure(res, "trivial_vs_tpe", "trivial task vs ThreadPoolExecutor(2), spawned and lazy "
               "(the slower of the two)", [tp / max(sp, lz) for tp, sp, lz in zip(t_tpe, t_sp, t_lz)],
               "x lower", 20, "higher", floor=15, load=load, us_per_task=per, tasks=n_trivial)
        figure(res, "tracing", "tracing on, trivial tasks (the larger of spawned and lazy)",
               [max(a / b, c / d) * 100 - 100 for a, b, c, d in zip(t_sp_tr, t_sp, t_lz_tr, t_lz)],
               "% extra", TRACING_PCT, "lower", load=load)

    # 2: c1, beside the bare floor (benchmarks/floor.c) on the same fib, and both again on
    # fib with leaves returning n
    if on("c1"):
        global spawn
        floor = load_floor()
        spawn = floor.spawn if floor else None
        with tg.Scheduler(workers=1) as s1:
            s1.compute(fib(16))
            fns = [lambda: fib_serial(20), lambda: s1.compute(fib(20)), lambda: s1.compute(fib_leaf(20))]
            if floor:
                assert spawn(fib_floor, 20).result() == spawn(fib_leaf_floor, 20).result() == 6765
                fns += [lambda: spawn(fib_floor, 20).result(), lambda: spawn(fib_leaf_floor, 20).result()]
            ts, load = rounds(fns, reps * 2)
        t_ser, t_1, t_leaf = ts[:3]
        per_round = lambda t: summary([b / a for a, b in zip(t_ser, t)])  # noqa: E731
        extra = {"leaf_shape_c1": per_round(t_leaf)}
        if floor:
            t_fl, t_fl_leaf = ts[3:]
            over = [(b - a) / 21891 * 1e9 for a, b in zip(t_fl, t_1)]
            extra.update(floor_c1=per_round(t_fl), leaf_shape_floor_c1=per_round(t_fl_leaf),
                         ns_over_floor=summary(over), ns_over_floor_values=over)
        figure(res, "c1", "c1 = T1 / T_serial, fib(20) spawning at every level, 1 worker",
               [b / a for a, b in zip(t_ser, t_1)], "", C1, "lower", load=load,
               tasks=21891, ns_per_task=statistics.median(t_1) / 21891 * 1e9, **extra)
        word, rule = c1_verdict(res[-1]["values"], extra.get("ns_over_floor_values"),
                                extra["floor_c1"]["median"] if floor else None, load)
        res[-1].update(verdict=word, met=word == "met", rule=rule)
        if rule == "ns_over_floor":
            print(f"    the floor's own c1 is above {C1_FLOOR_ABOVE}: judged by the ns per task above "
                  f"it (<= {C1_NS_OVER_FLOOR}): {word}", flush=True)
        print(f"    the same, leaves returning n: {spread_text(extra['leaf_shape_c1'])}")
        if floor:
            print(f"    the bare floor (benchmarks/floor.c, no scheduler): c1 {spread_text(extra['floor_c1'])}; "
                  f"leaves returning n {spread_text(extra['leaf_shape_floor_c1'])}; taskgraph's own "
                  f"cost above it {spread_text(extra['ns_over_floor'], fmt='{:.0f}', unit=' ns')} per task")

    # 3: fib(28) cutoff 16 on 2 workers, and its work inflation (traces on 1 and on 2 workers)
    if on("fib_cutoff", "fib_inflation"):
        n = 25 if q else 28
        traces = {1: [], 2: []}
        oncpu = {1: [], 2: []}  # per traced run: the workers' seconds on a CPU (schedstat)

        def traced(s, w):
            def run():
                before = worker_schedstat(s)
                with tg.trace() as tr:
                    s.compute(fib(n, 16))
                after = worker_schedstat(s)
                traces[w].append(tr)
                if before and after:
                    oncpu[w].append(sum(b[0] - a[0] for a, b in zip(before, after)))
            return run

        with tg.Scheduler(workers=1) as s1, tg.Scheduler(workers=2) as s2:
            s1.compute(fib(20, 16)), s2.compute(fib(20, 16))
            (t_ser, t_par, _, _), load = rounds([lambda: fib_serial(n), lambda: s2.compute(fib(n, 16)),
                                                 traced(s1, 1), traced(s2, 2)], reps)
        figure(res, "fib_cutoff", f"fib({n}) cutoff 16, 2 workers, speed-up over serial",
               [a / b for a, b in zip(t_ser, t_par)], "x", FIB_SPEEDUP, "higher", load=load,
               serial=summary(t_ser), taskgraph=summary(t_par))
        figure(res, "fib_inflation", f"work inflation of fib({n}) cutoff 16: own time on 2 workers "
               "over 1 (Trace.inflation)", [b.inflation(a) for a, b in zip(traces[1], traces[2])], "",
               FIB_INFLATION, "lower", load=load, work_1w_ms=summary([t.work / 1e6 for t in traces[1]]),
               work_2w_ms=summary([t.work / 1e6 for t in traces[2]]))
        if len(oncpu[1]) == len(oncpu[2]) == len(traces[1]):
            # A task's own time is wall-clock: a worker descheduled while it runs is charged the
            # wait. The workers' time on a CPU over the compute, 2 workers over 1, has no wait
            # in it (and counts the 2-worker run's searching and stealing as work): the same
            # ratio without the machine's descheduling.
            ratio = [b / a for a, b in zip(oncpu[1], oncpu[2])]
            res[-1]["cpu_time_inflation"] = summary(ratio)
            print(f"    the workers' time on a CPU, 2 workers over 1: {spread_text(summary(ratio))}")

    # 4: 1,000,000 lazy trivial tasks, built and computed end to end
    if on("lazy_million"):
        m = 200_000 if q else 1_000_000
        with tg.Scheduler(workers=2) as s2:
            # The first compute of this size is timed apart, not as a round: the process takes
            # its memory from the kernel then, page by page, which later rounds mostly find
            # ready (measured: 96,000 page faults, then about 20,000 per round; 1.39 M/s, then
            # 1.67-1.77 M/s). In a young process the cyclic GC also runs during that first
            # compute (6-18 collections), and hardly ever after (docs/performance.md).
            cold = timed(lambda: s2.compute([trivial(i) for i in range(m)]))
            (ts,), load = rounds([lambda: s2.compute([trivial(i) for i in range(m)])], reps)
        figure(res, "lazy_million", f"{m:,} lazy trivial tasks built and computed from the main "
               "thread, end to end", [m / t / 1e6 for t in ts], "M tasks/s", 1.6, "higher",
               load=load, seconds=summary(ts), first_compute_m_per_s=m / cold / 1e6)
        print(f"    the first compute of that size in this process (memory from the kernel): "
              f"{m / cold / 1e6:.2f} M tasks/s", flush=True)

    # 5: stencil DAG, 64 x 64, trivial bodies, 1 worker
    if on("stencil"):
        w = 32 if q else 64
        with tg.Scheduler(workers=1) as s1:
            s1.compute(stencil(w, w, cell))
            (t_ser, t_dag), load = rounds([lambda: stencil(w, w, cell_plain),
                                           lambda: s1.compute(stencil(w, w, cell))], reps)
        figure(res, "stencil", f"2-D stencil DAG ({w}x{w}, trivial bodies), per task incl. 3 "
               "edges, 1 worker", [(b - a) / (w * w) * 1e6 for a, b in zip(t_ser, t_dag)], "us", 2,
               "lower", load=load, serial=summary(t_ser), taskgraph=summary(t_dag))

    # 7: the quicksort example
    if on("quicksort"):
        qs = load_example("quicksort.py")
        size = 200_000 if q else 1_000_000
        data = qs.make_input(size, 1)
        boxed = list(data)
        with tg.Scheduler(workers=2) as s2:
            s2.compute(qs.quicksort(data[:20_000], 20_000))
            (t_ser, t_par, t_bser, t_bpar), load = rounds(
                [lambda: qs.quicksort_serial(data, 20_000), lambda: s2.compute(qs.quicksort(data, 20_000)),
                 lambda: qs.quicksort_boxed_serial(boxed, 20_000),
                 lambda: s2.compute(qs.quicksort_boxed(boxed, 20_000))], max(5, 3 if q else 5))
        figure(res, "quicksort", f"examples/quicksort.py, {size:,} values, 2 workers, speed-up",
               [a / b for a, b in zip(t_ser, t_par)], "x", 1.4, "higher", load=load,
               serial=summary(t_ser), taskgraph=summary(t_par),
               boxed_speedup=statistics.median(t_bser) / statistics.median(t_bpar),
               boxed_serial=summary(t_bser), boxed_taskgraph=summary(t_bpar))

    # 8: 12-queens, fork-join per row, 2 workers over 1
    if on("queens"):
        import inflation
        with tg.Scheduler(workers=1) as s1, tg.Scheduler(workers=2) as s2:
            assert s1.compute(inflation.queens()) == s2.compute(inflation.queens()) == 14200
            (t_ser, t1, t2, l1, l2), load = rounds(
                [lambda: inflation.queens_serial(0, 0, 0),
                 lambda: s1.compute(inflation.queens()), lambda: s2.compute(inflation.queens()),
                 lambda: s1.compute(inflation.queens_lit()),
                 lambda: s2.compute(inflation.queens_lit())], reps)
        # Beside it, not judged: the same search with FULL written as a literal (immortal), which
        # tells the scheduler's share from the shared count's (docs/performance.md, section 5).
        figure(res, "queens", "12-queens as written (fork-join per row), 2 workers over 1 worker",
               [a / b for a, b in zip(t1, t2)], "x", 1.8, "higher", floor=1.5, load=load,
               one_worker=summary(t1), two_workers=summary(t2), serial=summary(t_ser),
               speedup_over_serial=statistics.median(t_ser) / statistics.median(t2),
               literal_full=summary([a / b for a, b in zip(l1, l2)]))

    # 9: joining many nodes at once: gather against a loop of .result(), compute(*nodes)
    # against compute(nodes)
    if on("gather", "compute_star"):
        n = 50_000
        with tg.Scheduler(workers=2) as s2:
            s2.compute(join_kids(n, True)), s2.compute(join_kids(n, False))  # warm up
            (t_g, t_loop), load = rounds([lambda: s2.compute(join_kids(n, True)),
                                          lambda: s2.compute(join_kids(n, False))], reps,
                                         timer=lambda f: f())
            figure(res, "gather", f"inside a task, tg.gather(*kids) of {n:,} trivial children over "
                   "a loop of .result() on them, 2 workers", [a / b for a, b in zip(t_g, t_loop)],
                   "x", GATHER, "lower", load=load, gather=summary(t_g), loop=summary(t_loop))
            compute_time(s2, n, True), compute_time(s2, n, False)
            (t_star, t_list), load = rounds([lambda: compute_time(s2, n, True),
                                             lambda: compute_time(s2, n, False)], reps,
                                            timer=lambda f: f())
            figure(res, "compute_star", f"tg.compute(*nodes) of {n:,} lazy trivial nodes over "
                   "tg.compute(nodes), 2 workers", [a / b for a, b in zip(t_star, t_list)], "x", COMPUTE_STAR,
                   "lower", load=load, star=summary(t_star), list=summary(t_list))

    env = {"python": sys.version.split()[0], "gil_enabled": tg.gil_enabled(),
           "machine": platform.machine(), "cpus": tg.usable_cpus(), "quick": q,
           "rounds": reps, "loadavg": os.getloadavg()}
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"env": env, "figures": res}, f, indent=1)
        print(f"wrote {a.out}")
    return res


if __name__ == "__main__":
    main()
