"""Flat fan-outs and tg.map (docs/benchmarks.md, "Flat fan-outs and tg.map").

    python benchmarks/map_fanout.py [--quick] [--runs R] [--out FILE]

  1. a task spawning 50,000 trivial children: cost per child on 1 worker and on 2 (target:
     2 workers cost no more per child), with the steal counters of the 2-worker runs;
  2. a task spawning children of ~50 us each: speed-up of 2 workers over 1 (target >= 1.8x);
  3. tg.map over 1,000,000 trivial items on 2 workers against the serial list comprehension
     (target: no slower), beside ThreadPoolExecutor.map, joblib (threading backend) and
     dask.bag.map where installed (the peers get fewer items when they would take minutes:
     their figure is per item);
  4. tg.map over items of ~20 us on 2 workers: speed-up over the serial loop (target
     >= 1.6x), beside the same peers.

Timed pairs are run alternately (per_task.alternate), R rounds, and medians compared: the
machine is shared and noisy, so each figure comes with its min and max. Beside the wall-clock
speed-ups, the *CPU-critical* speed-up is derived from the worker threads' CPU times (the
work on 1 worker over the busier worker's share on 2): what two free cores would give, with
every overhead of the second thread counted, and the other programs on the machine left
out. On a machine this loaded (and with the kernel's autogroup scheduling, which shares one
slice among all the threads of a session) the wall-clock ratios mostly measure the others.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import os
import statistics
import threading
import time

import taskgraph as tg
from _common import alternate, summary, worker_cpu, write_results
from suite import busy

CHILDREN = 50_000


@tg.task(name="trivial")
def trivial_t(i):
    return i


def trivial(i):
    return i


@tg.task(name="fan_out")
def fan_out(n, k):
    kids = [busy_t(k) for _ in range(n)] if k else [trivial_t(i) for i in range(n)]
    return sum(c.result() for c in kids)


busy_t = tg.task(busy, name="busy")


def units_for(us):
    """The k for which busy(k) takes about `us` microseconds of this thread's CPU time (CPU
    time, not wall time: on a loaded machine the wall time measures the other programs).
    Calibrated at the target size itself, a few rounds after a warm-up: busy's cost per unit
    is not the same for every k (small ints are cached, the interpreter specialises)."""
    k = 100
    for _ in range(4):
        t0 = time.thread_time()
        for _ in range(300):
            busy(k)
        per_call = (time.thread_time() - t0) / 300
        k = max(1, round(k * us * 1e-6 / per_call))
    return k


def critical_cpu(fn, s1, s2, runs):
    """The speed-up that the 2-worker runs would show with two free cores: the workers' CPU
    time on 1 worker over the busier worker's CPU time on 2 (each the median of `runs`).
    Derived from thread CPU times, so the other programs on a shared machine drop out; it
    counts every overhead of running on two threads (steals, cross-thread reference counts,
    waiting in joins is not CPU and is not counted: see the wall figures)."""
    one, two = [], []
    for _ in range(runs):
        for s, acc in ((s1, one), (s2, two)):
            b = worker_cpu(s)
            fn(s)
            a = worker_cpu(s)
            if a is None or b is None:
                return None
            d = [x - y for x, y in zip(a, b)]
            acc.append(sum(d) if s is s1 else max(d))
    return statistics.median(one) / statistics.median(two)


def stats_delta(s, before):
    after = s.stats()
    return [{key: a[key] - b[key] for key in a if key != "worker"} for a, b in zip(after, before)]


def alternate_cpu(fns, runs):
    """per_task.alternate, also returning each function's process CPU times: on a loaded
    machine the wall time of a 2-worker run says more about the other programs than about
    us, and the CPU time shows what the work itself cost."""
    cpu = [[] for _ in fns]

    def wrap(j):
        def run():
            c0 = time.process_time()
            fns[j]()
            cpu[j].append(time.process_time() - c0)
        return run

    return alternate([wrap(j) for j in range(len(fns))], runs), cpu


def fan_out_trivial(s1, s2, n, runs):
    """Per-child cost on 1 and 2 workers (wall and process CPU time), and what the 2-worker
    runs stole."""
    before = s2.stats()
    (t1, t2), (c1, c2) = alternate_cpu([lambda: s1.compute(fan_out(n, 0)),
                                        lambda: s2.compute(fan_out(n, 0))], runs)
    d = stats_delta(s2, before)
    per = lambda xs: {k: v / n * 1e6 if k != "runs" else v for k, v in summary(xs).items()}  # noqa: E731
    return {"children": n, "us_per_child_1w": per(t1), "us_per_child_2w": per(t2),
            "ratio_2w_over_1w": summary(t2)["median"] / summary(t1)["median"],
            "cpu_us_per_child_1w": per(c1), "cpu_us_per_child_2w": per(c2),
            "stolen_per_run_2w": sum(w["stolen"] for w in d) / runs,
            "steal_attempts_per_run_2w": sum(w["steal_attempts"] for w in d) / runs,
            "tasks_run_per_worker_per_run_2w": [w["tasks_run"] / runs for w in d],
            "speedup_2w_cpu_critical": critical_cpu(lambda s: s.compute(fan_out(n, 0)), s1, s2, runs)}


def fan_out_busy(s1, s2, n, k, runs):
    (t1, t2), (c1, c2) = alternate_cpu([lambda: s1.compute(fan_out(n, k)),
                                        lambda: s2.compute(fan_out(n, k))], runs)
    return {"children": n, "busy_units": k, "t_1w": summary(t1), "t_2w": summary(t2),
            "cpu_1w": summary(c1), "cpu_2w": summary(c2),
            "speedup_2w": summary(t1)["median"] / summary(t2)["median"],
            "speedup_2w_cpu_critical": critical_cpu(lambda s: s.compute(fan_out(n, k)), s1, s2, runs)}


def peers_map(fn, xs, tpe, cap):
    """The peers' parallel maps over xs[:cap] (2 threads), as name -> timing function."""
    sub = xs[:cap]
    out = {"threadpool.map": lambda: list(tpe.map(fn, sub))}
    if importlib.util.find_spec("joblib"):
        import joblib
        par = joblib.Parallel(n_jobs=2, backend="threading")
        out["joblib-threads"] = lambda: par(joblib.delayed(fn)(x) for x in sub)
    if importlib.util.find_spec("dask"):
        import dask.bag as db
        out["dask.bag.map"] = lambda: db.from_sequence(sub, npartitions=8).map(fn).compute(
            scheduler="threads", num_workers=2)
    return {name: (f, len(sub)) for name, f in out.items()}


def map_critical_cpu(s2, fn, xs, runs):
    """As critical_cpu, for tg.map: the serial loop's CPU time (this thread) over the busier
    worker's CPU time in tg.map on 2 workers (medians of `runs`)."""
    one, two = [], []
    with tg.use_scheduler(s2):
        for _ in range(runs):
            c0 = time.thread_time()
            [fn(x) for x in xs]
            one.append(time.thread_time() - c0)
            b = worker_cpu(s2)
            tg.map(fn, xs)
            a = worker_cpu(s2)
            if a is None or b is None:
                return None
            two.append(max(x - y for x, y in zip(a, b)))
    return statistics.median(one) / statistics.median(two)


def map_workload(s2, tpe, fn, xs, runs, peer_cap):
    """tg.map on 2 workers vs the serial list comprehension (alternated), then the peers."""
    with tg.use_scheduler(s2):
        (ts, tm), (cs, cm) = alternate_cpu([lambda: [fn(x) for x in xs], lambda: tg.map(fn, xs)], runs)
    res = {"items": len(xs), "serial": summary(ts), "tg.map": summary(tm),
           "cpu_serial": summary(cs), "cpu_tg.map": summary(cm),
           "speedup_2w": summary(ts)["median"] / summary(tm)["median"],
           "speedup_2w_cpu_critical": map_critical_cpu(s2, fn, xs, runs)}
    for name, (f, m) in peers_map(fn, xs, tpe, peer_cap).items():
        r = summary(alternate([f], max(3, runs // 2))[0])
        r["items"] = m
        r["us_per_item"] = r["median"] / m * 1e6
        res[name] = r
    res["tg.map"]["us_per_item"] = res["tg.map"]["median"] / len(xs) * 1e6
    res["serial"]["us_per_item"] = res["serial"]["median"] / len(xs) * 1e6
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    runs = a.runs or (3 if a.quick else 7)
    k50, k20 = units_for(50), units_for(20)
    n_busy = 500 if a.quick else 4000
    n_map = 100_000 if a.quick else 1_000_000
    n_map20 = 1000 if a.quick else 10_000
    out = {"loadavg_start": os.getloadavg()}
    with tg.Scheduler(1) as s1, tg.Scheduler(2) as s2, cf.ThreadPoolExecutor(2) as tpe:
        out["fanout_trivial"] = fan_out_trivial(s1, s2, CHILDREN, runs)
        print("fan-out, trivial children:", out["fanout_trivial"], flush=True)
        out["fanout_50us"] = fan_out_busy(s1, s2, n_busy, k50, runs)
        print("fan-out, ~50 us children:", out["fanout_50us"], flush=True)
        xs = list(range(n_map))
        out["map_trivial"] = map_workload(s2, tpe, trivial, xs, runs, 10_000 if a.quick else 100_000)
        print("map, trivial items:", out["map_trivial"], flush=True)
        xs20 = [k20] * n_map20
        out["map_20us"] = map_workload(s2, tpe, busy, xs20, runs, 300 if a.quick else n_map20)
        out["map_20us"]["busy_units"] = k20
        print("map, ~20 us items:", out["map_20us"], flush=True)
    out["loadavg_end"] = os.getloadavg()
    write_results(a.out, out, a.quick)


if __name__ == "__main__":
    main()
