"""Flat fan-outs and tg.map (docs/benchmarks.md, "Flat fan-outs and tg.map").

    python benchmarks/map_fanout.py [--quick] [--runs R] [--out FILE]

  1. a task spawning 50,000 trivial children: per child, 2 workers over 1 worker in each
     alternated pair of runs (target: <= 1.2 in the median and every run), with the steal
     counters of the 2-worker runs;
  2. a task spawning children of ~50 us each: speed-up of 2 workers over 1 (>= 1.8x);
  3. tg.map over range(1,000,000) trivial items on 2 workers against the list comprehension
     over the same range: tg.map's time over the comprehension's (target <= 0.8), with the
     two parts of each (the call, and the caller freeing the result list) timed apart and the
     best ratio a perfect split could give (result_costs), and the
     same for the other input kinds (list, tuple, a generator, dict keys, a numpy array if
     numpy is installed: figures, not targets); beside them ThreadPoolExecutor.map, joblib
     (threading backend) and dask.bag.map where installed (on fewer items when they would
     take minutes: their figure is per item);
  4. tg.map over items of ~20 us on 2 workers: speed-up over the serial loop (target >= 1.8),
     beside 2 plain threads that take chunks of the same items from a shared counter (the
     ceiling a balanced map reaches on these two CPUs, with no scheduler).

Every figure is a list of per-run values from R >= 5 alternated rounds (benchmarks/_common.py),
printed as median [min-max, spread] with the machine's idle share and the share other programs
used meanwhile; a target is met only when the median and the worst run hold on an idle machine
(_common.verdict). Results include a time's whole cost to the caller, freeing the result list
too. Beside the wall-clock figures, the *CPU-critical* ratio derives from the worker threads'
CPU times (the work on 1 worker over the busier worker's share on 2): what two free cores
would give, the other programs on a shared machine left out (waiting is not in it).
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
from _common import (Machine, alternate, judged, load_text, spread_text, summary, timed, worker_cpu,
                     write_results)
from suite import busy
# (the other input kinds of tg.map are held to the range's target)
from targets import FANOUT, MAP_RANGE

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
    counts every overhead of running on two threads (waiting in joins is not CPU and is not
    counted: see the wall figures)."""
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


def report(name, res, key, unit=""):
    j = res[key + "_judged"]
    op = "<=" if j["better"] == "lower" else ">="
    floor = f" (floor {j['floor']})" if j["floor"] is not None else ""
    print(f"{name}: {spread_text(res[key], unit=unit)}; target {op} {j['target']}{floor}: "
          f"{j['verdict']}; {load_text(res['load'])}", flush=True)


def fan_out_trivial(s1, s2, n, runs):
    """Per-child cost on 1 and 2 workers, alternated; the 2w/1w ratio of each pair; what the
    2-worker runs stole and how often they looked."""
    before = s2.stats()
    load = Machine()
    # Settled (_common.alternate): each timed run follows a run of its own scheduler.
    t1, t2 = alternate([lambda: s1.compute(fan_out(n, 0)), lambda: s2.compute(fan_out(n, 0))],
                       runs, settle=True)
    load = load.stop()
    calls = 2 * runs  # the settling runs are counted by the scheduler too
    d = stats_delta(s2, before)
    per = lambda xs: summary([x / n * 1e6 for x in xs])  # noqa: E731
    ratios = [b / a for a, b in zip(t1, t2)]
    res = {"children": n, "us_per_child_1w": per(t1), "us_per_child_2w": per(t2),
           "ratio_2w_over_1w": summary(ratios), "load": load,
           "ratio_2w_over_1w_judged": judged(ratios, FANOUT, "lower", load=load),
           "stolen_per_run_2w": sum(w["stolen"] for w in d) / calls,
           "steal_attempts_per_run_2w": sum(w["steal_attempts"] for w in d) / calls,
           "looks_per_run_2w": sum(w.get("looks", 0) for w in d) / calls,
           "tasks_run_per_worker_per_run_2w": [w["tasks_run"] / calls for w in d],
           "speedup_2w_cpu_critical": critical_cpu(lambda s: s.compute(fan_out(n, 0)), s1, s2, runs)}
    report(f"fan-out of {n:,} trivial children, us per child 2w / 1w", res, "ratio_2w_over_1w")
    print(f"    1 worker {spread_text(res['us_per_child_1w'], unit=' us')}, 2 workers "
          f"{spread_text(res['us_per_child_2w'], unit=' us')}; per 2-worker run: "
          f"{res['steal_attempts_per_run_2w']:.0f} steal attempts, {res['looks_per_run_2w']:.0f} looks, "
          f"{res['stolen_per_run_2w']:.0f} stolen", flush=True)
    return res


def fan_out_busy(s1, s2, n, k, runs):
    load = Machine()
    t1, t2 = alternate([lambda: s1.compute(fan_out(n, k)), lambda: s2.compute(fan_out(n, k))], runs)
    load = load.stop()
    sp = [a / b for a, b in zip(t1, t2)]
    res = {"children": n, "busy_units": k, "t_1w": summary(t1), "t_2w": summary(t2),
           "speedup_2w": summary(sp), "speedup_2w_judged": judged(sp, 1.8, "higher", load=load),
           "load": load,
           "speedup_2w_cpu_critical": critical_cpu(lambda s: s.compute(fan_out(n, k)), s1, s2, runs)}
    report(f"fan-out of {n:,} children of ~50 us, speed-up 2w over 1w", res, "speedup_2w", "x")
    return res


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


def map_critical_cpu(s2, fn, make, runs):
    """As critical_cpu, for tg.map: the serial loop's CPU time (this thread) over the busier
    worker's CPU time in tg.map on 2 workers (medians of `runs`)."""
    one, two = [], []
    with tg.use_scheduler(s2):
        for _ in range(runs):
            xs = make()
            c0 = time.thread_time()
            [fn(x) for x in xs]
            one.append(time.thread_time() - c0)
            xs = make()
            b = worker_cpu(s2)
            tg.map(fn, xs)
            a = worker_cpu(s2)
            if a is None or b is None:
                return None
            two.append(max(x - y for x, y in zip(a, b)))
    return statistics.median(one) / statistics.median(two)


def map_vs_comprehension(s2, fn, make, runs):
    """tg.map(fn, make()) on 2 workers against [fn(x) for x in make()], alternated: the
    per-run ratio of tg.map's time over the comprehension's (make() outside the timing)."""
    data = {}

    def prep(k):
        data[k] = make()

    def comp():
        xs = data.pop("c")
        [fn(x) for x in xs]

    def par():
        tg.map(fn, data.pop("m"))

    tc, tm = [], []
    with tg.use_scheduler(s2):
        for r in range(runs):
            for k in ((0, 1) if r % 2 == 0 else (1, 0)):
                prep("c" if k == 0 else "m")
                t0 = time.perf_counter()
                comp() if k == 0 else par()
                (tc if k == 0 else tm).append(time.perf_counter() - t0)
    return tc, tm


def result_costs(s2, fn, n, runs):
    """Where the time of tg.map(fn, range(n)) goes, against the list comprehension: each one's
    build (the call, without freeing its result) and the caller's freeing of the result list,
    timed apart in alternated rounds. The comprehension's items are made by this thread and
    freed by it; tg.map's are made by the workers, and this thread frees objects that another
    thread allocated and owns (CPython's shared reference count, and mimalloc's cross-thread
    free). `bound` is the ratio tg.map would have with a perfect split of the comprehension's
    build over 2 workers and nothing else added: half the build, plus freeing what the
    workers made, over the comprehension's build and free."""
    held = {}

    def build(k, f):
        def run():
            held[k] = f()
        return run

    def free(k):
        def run():
            del held[k]
        return run

    with tg.use_scheduler(s2):
        bc, fc, bm, fm = [], [], [], []
        for _ in range(runs):
            for k, f, b, d in (("c", lambda: [fn(x) for x in range(n)], bc, fc),
                               ("m", lambda: tg.map(fn, range(n)), bm, fm)):
                b.append(timed(build(k, f)))
                d.append(timed(free(k)))
    bounds = [(c / 2 + m) / (c + f) for c, f, m in zip(bc, fc, fm)]
    return {"comprehension_build": summary(bc), "comprehension_free": summary(fc),
            "map_build": summary(bm), "map_free": summary(fm), "bound": summary(bounds)}


def map_trivial(s2, tpe, n, runs, peer_cap):
    res = {}
    np = None
    if importlib.util.find_spec("numpy"):
        import numpy as np
    kinds = {"range": lambda: range(n), "list": lambda: list(range(n)),
             "tuple": lambda: tuple(range(n)), "generator": lambda: (x for x in range(n)),
             "dict keys": lambda: dict.fromkeys(range(n)).keys()}
    if np is not None:
        kinds["numpy array"] = lambda: np.arange(n)
    for name, make in kinds.items():
        load = Machine()
        tc, tm = map_vs_comprehension(s2, trivial, make, runs)
        load = load.stop()
        ratios = [m / c for c, m in zip(tc, tm)]
        r = {"items": n, "comprehension": summary(tc), "tg.map": summary(tm),
             "ratio_map_over_comprehension": summary(ratios), "load": load,
             "ratio_map_over_comprehension_judged": judged(ratios, MAP_RANGE, "lower", load=load)}
        if name == "range":
            r["speedup_2w_cpu_critical"] = map_critical_cpu(s2, trivial, make, runs)
            r["costs"] = c = result_costs(s2, trivial, n, runs)
            ms = lambda k: spread_text({**c[k], **{x: c[k][x] * 1e3 for x in ("median", "min", "max")}},  # noqa: E731
                                       unit=" ms")
            print(f"    apart: the comprehension builds in {ms('comprehension_build')}, its list is freed in "
                  f"{ms('comprehension_free')}; tg.map builds in {ms('map_build')}, its list (items made "
                  f"by the workers) is freed in {ms('map_free')}; best ratio a perfect 2-way split "
                  f"could give: {spread_text(c['bound'])}", flush=True)
        res[name] = r
        report(f"tg.map over {name} of {n:,} trivial items, time over the comprehension's", r,
               "ratio_map_over_comprehension")
    xs = list(range(n))
    for name, (f, m) in peers_map(trivial, xs, tpe, peer_cap).items():
        r = summary(alternate([f], max(3, runs // 2))[0])
        r["items"] = m
        r["us_per_item"] = r["median"] / m * 1e6
        res["peer " + name] = r
    return res


def threads_dynamic(fn, xs, nthreads=2, chunk=8):
    """[fn(x) for x in xs] on nthreads plain threads, each taking the next `chunk` items from a
    shared counter until none are left: the ceiling of a balanced map on these CPUs, with no
    scheduler (a chunk of ~20 us items is ~160 us; the lock is taken once per chunk)."""
    out = [None] * len(xs)
    lock = threading.Lock()
    nxt = [0]

    def run():
        while True:
            with lock:
                lo = nxt[0]
                nxt[0] = lo + chunk
            if lo >= len(xs):
                return
            for i in range(lo, min(lo + chunk, len(xs))):
                out[i] = fn(xs[i])

    ths = [threading.Thread(target=run) for _ in range(nthreads)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return out


def map_20us(s2, tpe, k, n, runs, peer_cap):
    xs = [k] * n
    assert threads_dynamic(busy, xs[:100]) == [busy(x) for x in xs[:100]]
    load = Machine()
    with tg.use_scheduler(s2):
        ts, tm, tt = alternate([lambda: [busy(x) for x in xs], lambda: tg.map(busy, xs),
                                lambda: threads_dynamic(busy, xs)], runs)
    load = load.stop()
    sp = [a / b for a, b in zip(ts, tm)]
    res = {"items": n, "busy_units": k, "serial": summary(ts), "tg.map": summary(tm),
           "speedup_2w": summary(sp), "speedup_2w_judged": judged(sp, 1.8, "higher", load=load),
           "load": load, "speedup_2w_cpu_critical": map_critical_cpu(s2, busy, lambda: xs, runs),
           "threads_dynamic": summary(tt), "speedup_threads_dynamic": summary([a / b for a, b in zip(ts, tt)]),
           "map_over_threads_speed": summary([b / a for a, b in zip(tm, tt)])}
    report(f"tg.map over {n:,} items of ~20 us, speed-up over the serial loop", res, "speedup_2w", "x")
    print(f"    2 plain threads taking 8 items at a time from a shared counter (no scheduler: the "
          f"ceiling on these CPUs): speed-up {spread_text(res['speedup_threads_dynamic'], unit='x')}; "
          f"tg.map's speed over theirs, per round: {spread_text(res['map_over_threads_speed'])}", flush=True)
    for name, (f, m) in peers_map(busy, xs, tpe, peer_cap).items():
        r = summary(alternate([f], max(3, runs // 2))[0])
        r["items"] = m
        r["us_per_item"] = r["median"] / m * 1e6
        res["peer " + name] = r
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    runs = max(5, a.runs or (5 if a.quick else 9))
    k50, k20 = units_for(50), units_for(20)
    n_busy = 500 if a.quick else 4000
    n_map = 100_000 if a.quick else 1_000_000
    n_map20 = 1000 if a.quick else 10_000
    out = {"loadavg_start": os.getloadavg(), "runs": runs}
    with tg.Scheduler(1) as s1, tg.Scheduler(2) as s2, cf.ThreadPoolExecutor(2) as tpe:
        s1.compute(fan_out(1000, 0)), s2.compute(fan_out(1000, 0))  # warm up
        out["fanout_trivial"] = fan_out_trivial(s1, s2, CHILDREN, runs)
        out["fanout_50us"] = fan_out_busy(s1, s2, n_busy, k50, runs)
        out["map_trivial"] = map_trivial(s2, tpe, n_map, runs, 10_000 if a.quick else 100_000)
        out["map_20us"] = map_20us(s2, tpe, k20, n_map20, runs, 300 if a.quick else n_map20)
    out["loadavg_end"] = os.getloadavg()
    write_results(a.out, out, a.quick)


if __name__ == "__main__":
    main()
