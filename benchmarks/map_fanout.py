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
machine is shared and noisy, so each figure comes with its min and max.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import time

import taskgraph as tg
from _common import write_results
from per_task import alternate, summary
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
    """The k for which busy(k) takes about `us` microseconds here, now (the fastest of 5
    tries: on a loaded machine the slower tries measure the other programs)."""
    k = 2000
    per = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(20):
            busy(k)
        per = min(per, (time.perf_counter() - t0) / 20 / k)
    return max(1, round(us * 1e-6 / per))


def stats_delta(s, before):
    after = s.stats()
    return [{key: a[key] - b[key] for key in a if key != "worker"} for a, b in zip(after, before)]


def fan_out_trivial(s1, s2, n, runs):
    """Per-child cost on 1 and 2 workers (wall and process CPU time), and what the 2-worker
    runs stole."""
    cpu = {s1: [], s2: []}

    def run(s):
        c0 = time.process_time()
        s.compute(fan_out(n, 0))
        cpu[s].append(time.process_time() - c0)

    before = s2.stats()
    t1, t2 = alternate([lambda: run(s1), lambda: run(s2)], runs)
    d = stats_delta(s2, before)
    per = lambda xs: {k: v / n * 1e6 if k != "runs" else v for k, v in summary(xs).items()}  # noqa: E731
    return {"children": n, "us_per_child_1w": per(t1), "us_per_child_2w": per(t2),
            "ratio_2w_over_1w": summary(t2)["median"] / summary(t1)["median"],
            "cpu_us_per_child_1w": per(cpu[s1]), "cpu_us_per_child_2w": per(cpu[s2]),
            "stolen_per_run_2w": sum(w["stolen"] for w in d) / runs,
            "steal_attempts_per_run_2w": sum(w["steal_attempts"] for w in d) / runs,
            "tasks_run_per_worker_per_run_2w": [w["tasks_run"] / runs for w in d]}


def fan_out_busy(s1, s2, n, k, runs):
    t1, t2 = alternate([lambda: s1.compute(fan_out(n, k)), lambda: s2.compute(fan_out(n, k))], runs)
    return {"children": n, "busy_units": k, "t_1w": summary(t1), "t_2w": summary(t2),
            "speedup_2w": summary(t1)["median"] / summary(t2)["median"]}


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


def map_workload(s2, tpe, fn, xs, runs, peer_cap):
    """tg.map on 2 workers vs the serial list comprehension (alternated), then the peers."""
    with tg.use_scheduler(s2):
        ts, tm = alternate([lambda: [fn(x) for x in xs], lambda: tg.map(fn, xs)], runs)
    res = {"items": len(xs), "serial": summary(ts), "tg.map": summary(tm),
           "speedup_2w": summary(ts)["median"] / summary(tm)["median"]}
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
    out = {}
    with tg.Scheduler(1) as s1, tg.Scheduler(2) as s2, cf.ThreadPoolExecutor(2) as tpe:
        out["fanout_trivial"] = fan_out_trivial(s1, s2, CHILDREN, runs)
        print("fan-out, trivial children:", out["fanout_trivial"], flush=True)
        out["fanout_50us"] = fan_out_busy(s1, s2, n_busy, k50, runs)
        print("fan-out, ~50 us children:", out["fanout_50us"], flush=True)
        xs = list(range(n_map))
        out["map_trivial"] = map_workload(s2, tpe, trivial, xs, runs, min(n_map, 100_000))
        print("map, trivial items:", out["map_trivial"], flush=True)
        xs20 = [k20] * n_map20
        out["map_20us"] = map_workload(s2, tpe, busy, xs20, runs, n_map20)
        out["map_20us"]["busy_units"] = k20
        print("map, ~20 us items:", out["map_20us"], flush=True)
    write_results(a.out, out, a.quick)


if __name__ == "__main__":
    main()
