"""The benchmark suite behind `make bench` / `make bench-quick` (docs/benchmarks.md).

Runs seven workloads with taskgraph and the tools users would pick instead, on 1, 2 and 4
workers, in one process and one invocation so that every comparison is a ratio measured side
by side. Every figure is the median of at least 5 runs, with min and max. Writes a JSON list of
results; benchmarks/report.py turns it into the table and the plot.

    python benchmarks/suite.py [--quick] [--gil-subset] --out FILE

--gil-subset runs workloads 1, 3 and 6 for taskgraph and serial only (for the GIL build).

Beside the tables, the fork-join and DAG workloads (2-7) run serially and on taskgraph with 2
workers in alternated rounds (benchmarks/_common.py: at least 5), one speed-up per round, with
the machine's load: the figures report.py sets beside the same ones of another interpreter.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
from array import array
import json
import multiprocessing
import platform
import random
import statistics
import sys
import time

import taskgraph as tg
from _common import Machine, alternate, summary

RUNS = 5
WORKERS = (1, 2, 4)


# ---------------------------------------------------------------------- task bodies
def trivial(i):
    return i


def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


def busy(k):
    """Pure-Python work: about 0.08 us per unit of k on this machine (3.13t)."""
    s = 0
    for i in range(k):
        s += i * i % 7
    return s


def stencil_cell(k, a, b, c):
    busy(k)
    return (a + 2 * b + c) % 1000003


def sort_bucket(xs):
    return sorted(xs)


def coarse(k):
    return busy(k)


# ---------------------------------------------------------------------- taskgraph versions
trivial_t = tg.task(trivial, name="trivial")
stencil_t = tg.task(stencil_cell, name="cell")
coarse_t = tg.task(coarse, name="coarse")


@tg.task(name="fib")
def fib_t(n, cutoff=0):
    if n <= max(cutoff, 1):
        return fib_serial(n)
    a = fib_t(n - 1, cutoff)
    b = fib_t(n - 2, cutoff)
    return a.result() + b.result()


# Workload 4 runs the quicksort of examples/quicksort.py: the values travel as array('d'), the
# free-threading-friendly form (docs/performance.md); serial is the same algorithm, serially.
def quicksort_serial(a, cutoff):
    if len(a) <= cutoff:
        return array("d", sorted(a))
    p = a[len(a) // 2]
    return (quicksort_serial(array("d", [x for x in a if x < p]), cutoff)
            + array("d", [x for x in a if x == p])
            + quicksort_serial(array("d", [x for x in a if x > p]), cutoff))


@tg.task(name="qsort")
def quicksort_t(a, cutoff):
    if len(a) <= cutoff:
        return array("d", sorted(a))
    p = a[len(a) // 2]
    lo = quicksort_t(array("d", [x for x in a if x < p]), cutoff)
    hi = quicksort_t(array("d", [x for x in a if x > p]), cutoff)
    mid = array("d", [x for x in a if x == p])
    return lo.result() + mid + hi.result()


def uts_children(node_id, m, q):
    """Binomial UTS: a node has m children with probability q (seeded by its id)."""
    r = random.Random(node_id * 2654435761 % (1 << 32))
    return m if r.random() < q else 0


def uts_serial(node_id, m, q, k):
    busy(k)
    total = 1
    for c in range(uts_children(node_id, m, q)):
        total += uts_serial(node_id * m + c + 1, m, q, k)
    return total


@tg.task(name="uts")
def uts_t(node_id, m, q, k):
    busy(k)
    kids = [uts_t(node_id * m + c + 1, m, q, k) for c in range(uts_children(node_id, m, q))]
    return 1 + sum(x.result() for x in kids)


@tg.task(name="uts_root")
def uts_root_t(b0, m, q, k):
    kids = [uts_t(i + 1, m, q, k) for i in range(b0)]  # all pushed on one worker's deque
    return sum(x.result() for x in kids)


def uts_root_serial(b0, m, q, k):
    return sum(uts_serial(i + 1, m, q, k) for i in range(b0))


# ---------------------------------------------------------------------- measuring
def measure(fn, runs=RUNS, check=None):
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        xs.append(time.perf_counter() - t0)
        if check is not None and not check(out):
            raise AssertionError(f"wrong result: {str(out)[:80]}")
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": runs}


class Peers:
    """The tools, each kept warm across runs of one worker count."""

    def __init__(self, workers):
        self.w = workers
        self.tg = tg.Scheduler(workers=workers)
        self.tpe = cf.ThreadPoolExecutor(workers)
        self.ppe = cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver"))
        list(self.ppe.map(trivial, range(workers * 2)))  # start the processes
        import joblib
        self.joblib = joblib

    def close(self):
        self.tg.close()
        self.tpe.shutdown()
        self.ppe.shutdown()

    def jl(self, backend):
        return self.joblib.Parallel(n_jobs=self.w, backend=backend)

    def dask_compute(self, values):
        import dask
        return dask.compute(*values, scheduler="threads", num_workers=self.w)


def tools_available():
    try:
        import dask  # noqa: F401
        import joblib  # noqa: F401
        return True
    except ImportError:
        return False


# ---------------------------------------------------------------------- workloads
def w1_trivial(p, size, tools):
    n = size["trivial"]
    caps = {"processpool": size["trivial_proc"], "joblib-loky": size["trivial_proc"],
            "dask-threads": size["trivial_dask"]}
    out = {}
    for tool in tools:
        m = caps.get(tool, n)
        if tool == "serial":
            r = measure(lambda: [trivial(i) for i in range(m)])
        elif tool == "taskgraph":
            r = measure(lambda: p.tg.compute(*[trivial_t(i) for i in range(m)]))
        elif tool == "threadpool":
            r = measure(lambda: [f.result() for f in [p.tpe.submit(trivial, i) for i in range(m)]])
        elif tool == "processpool":
            r = measure(lambda: [f.result() for f in [p.ppe.submit(trivial, i) for i in range(m)]])
        elif tool.startswith("joblib"):
            be = "threading" if tool == "joblib-threads" else "loky"
            r = measure(lambda: p.jl(be)(p.joblib.delayed(trivial)(i) for i in range(m)))
        elif tool == "dask-threads":
            import dask
            r = measure(lambda: p.dask_compute([dask.delayed(trivial)(i) for i in range(m)]))
        else:
            continue
        r["tasks"] = m
        r["us_per_task"] = r["median"] / m * 1e6
        out[tool] = r
    return out


def fib_spawn_pair(s, size):
    n = size["fib_spawn"]
    return (lambda: fib_serial(n)), (lambda: s.compute(fib_t(n)))


def w2_fib_spawn(p, size, tools):
    n = size["fib_spawn"]
    ser, par = fib_spawn_pair(p.tg, size)
    out = {}
    expect = fib_serial(n)
    if "serial" in tools:
        out["serial"] = measure(ser)
    if "taskgraph" in tools:
        out["taskgraph"] = measure(par, check=lambda v: v == expect)
        out["taskgraph"]["tasks"] = _fib_calls(n, 0)
    for tool in tools:
        if tool not in out:
            out[tool] = {"na": "cannot express it: fork-join inside a bounded pool deadlocks "
                               "(dask cannot nest delayed); no honest equivalent without a cutoff"}
    return out


def _fib_calls(n, cutoff):
    return 1 if n <= max(cutoff, 1) else 1 + _fib_calls(n - 1, cutoff) + _fib_calls(n - 2, cutoff)


def _fib_leaves(n, cutoff):
    if n <= max(cutoff, 1):
        return [n]
    return _fib_leaves(n - 1, cutoff) + _fib_leaves(n - 2, cutoff)


def fib_cutoff_pair(s, size):
    n, c = size["fib_cut"], size["fib_cutoff"]
    return (lambda: fib_serial(n)), (lambda: s.compute(fib_t(n, c)))


def w3_fib_cutoff(p, size, tools):
    n, c = size["fib_cut"], size["fib_cutoff"]
    ser, par = fib_cutoff_pair(p.tg, size)
    expect = fib_serial(n)
    leaves = _fib_leaves(n, c)  # the closest equivalent for peers: top-level fan-out of leaves
    out = {}
    for tool in tools:
        if tool == "serial":
            r = measure(ser)
        elif tool == "taskgraph":
            r = measure(par, check=lambda v: v == expect)
            r["tasks"] = _fib_calls(n, c)
        elif tool == "threadpool":
            r = measure(lambda: sum(p.tpe.map(fib_serial, leaves)), check=lambda v: v == expect)
        elif tool == "processpool":
            r = measure(lambda: sum(p.ppe.map(fib_serial, leaves, chunksize=4)), check=lambda v: v == expect)
        elif tool.startswith("joblib"):
            be = "threading" if tool == "joblib-threads" else "loky"
            r = measure(lambda: sum(p.jl(be)(p.joblib.delayed(fib_serial)(x) for x in leaves)),
                        check=lambda v: v == expect)
        elif tool == "dask-threads":
            import dask
            r = measure(lambda: sum(p.dask_compute([dask.delayed(fib_serial)(x) for x in leaves])),
                        check=lambda v: v == expect)
        else:
            continue
        if tool != "taskgraph" and tool != "serial":
            r["note"] = f"top-level fan-out of the {len(leaves)} leaf calls"
        out[tool] = r
    return out


def _sample_sort_parts(xs, parts):
    """Serial part of the peers' equivalent: split into buckets by sampled splitters."""
    rnd = random.Random(7)
    sample = sorted(rnd.sample(xs, min(len(xs), parts * 32)))
    splitters = [sample[i * len(sample) // parts] for i in range(1, parts)]
    import bisect
    buckets = [[] for _ in range(parts)]
    for x in xs:
        buckets[bisect.bisect_right(splitters, x)].append(x)
    return buckets


def quicksort_input(size):
    rnd = random.Random(1)
    return array("d", (rnd.random() for _ in range(size["qsort"])))


def quicksort_pair(s, size, data=None):
    data, c = quicksort_input(size) if data is None else data, size["qsort_cutoff"]
    return (lambda: quicksort_serial(data, c)), (lambda: s.compute(quicksort_t(data, c)))


def w4_quicksort(p, size, tools):
    data = quicksort_input(size)
    ser, par = quicksort_pair(p.tg, size, data)
    xs = list(data)
    expect = sorted(xs)
    ok = lambda v: list(v) == expect  # noqa: E731
    out = {}
    parts = 4 * p.w
    for tool in tools:
        if tool == "serial":
            r = measure(ser, check=ok)
        elif tool == "taskgraph":
            r = measure(par, check=ok)
        elif tool == "threadpool":
            r = measure(lambda: [y for b in p.tpe.map(sort_bucket, _sample_sort_parts(xs, parts)) for y in b], check=ok)
        elif tool == "processpool":
            r = measure(lambda: [y for b in p.ppe.map(sort_bucket, _sample_sort_parts(xs, parts)) for y in b], check=ok)
        elif tool.startswith("joblib"):
            be = "threading" if tool == "joblib-threads" else "loky"
            r = measure(lambda: [y for b in p.jl(be)(p.joblib.delayed(sort_bucket)(b) for b in _sample_sort_parts(xs, parts)) for y in b], check=ok)
        elif tool == "dask-threads":
            import dask
            r = measure(lambda: [y for b in p.dask_compute([dask.delayed(sort_bucket)(b) for b in _sample_sort_parts(xs, parts)]) for y in b], check=ok)
        else:
            continue
        if tool not in ("taskgraph", "serial"):
            r["note"] = f"sample sort: serial bucketing into {parts} parts, parallel sorted()"
        out[tool] = r
    return out


def _stencil_serial(width, steps, k):
    row = [i % 97 for i in range(width)]
    for _ in range(steps):
        row = [stencil_cell(k, row[max(i - 1, 0)], row[i], row[min(i + 1, width - 1)])
               for i in range(width)]
    return row


def _stencil_taskgraph(s, width, steps, k):
    row = [i % 97 for i in range(width)]
    for _ in range(steps):
        row = [stencil_t(k, row[max(i - 1, 0)], row[i], row[min(i + 1, width - 1)])
               for i in range(width)]
    return s.compute(*row)


def stencil_pair(s, size):
    width, steps, k = size["stencil_w"], size["stencil_s"], size["stencil_k"]
    return (lambda: _stencil_serial(width, steps, k)), (lambda: _stencil_taskgraph(s, width, steps, k))


def w5_stencil(p, size, tools):
    width, steps, k = size["stencil_w"], size["stencil_s"], size["stencil_k"]
    ser, par = stencil_pair(p.tg, size)
    expect = _stencil_serial(width, steps, k)
    ok = lambda v: list(v) == expect  # noqa: E731
    tasks = width * steps
    out = {}

    def tpe_run():  # futures that block on their inputs (safe: inputs are submitted first)
        def cell(fa, fb, fc):
            return stencil_cell(k, *(f.result() if isinstance(f, cf.Future) else f for f in (fa, fb, fc)))
        row = [i % 97 for i in range(width)]
        for _ in range(steps):
            row = [p.tpe.submit(cell, row[max(i - 1, 0)], row[i], row[min(i + 1, width - 1)])
                   for i in range(width)]
        return [f.result() for f in row]

    def barrier_run(mapper):  # per-step map with a barrier: the closest non-DAG equivalent
        row = [i % 97 for i in range(width)]
        for _ in range(steps):
            row = list(mapper([(row[max(i - 1, 0)], row[i], row[min(i + 1, width - 1)])
                               for i in range(width)]))
        return row

    for tool in tools:
        if tool == "serial":
            r = measure(ser, check=ok)
        elif tool == "taskgraph":
            r = measure(par, check=ok)
        elif tool == "threadpool":
            r = measure(tpe_run, check=ok)
        elif tool == "dask-threads":
            import dask

            def dask_run():
                cell = dask.delayed(stencil_cell, pure=True)
                row = [i % 97 for i in range(width)]
                for _ in range(steps):
                    row = [cell(k, row[max(i - 1, 0)], row[i], row[min(i + 1, width - 1)])
                           for i in range(width)]
                return p.dask_compute(row)
            r = measure(dask_run, check=ok)
        elif tool == "processpool":
            r = measure(lambda: barrier_run(lambda args: p.ppe.map(_cell_star, [(k,) + a for a in args], chunksize=8)), check=ok)
            r["note"] = "per-step map with a barrier (futures cannot be passed to processes)"
        elif tool.startswith("joblib"):
            be = "threading" if tool == "joblib-threads" else "loky"
            r = measure(lambda: barrier_run(lambda args: p.jl(be)(p.joblib.delayed(stencil_cell)(k, *a) for a in args)), check=ok)
            r["note"] = "per-step map with a barrier (joblib has no task graph)"
        else:
            continue
        r["tasks"] = tasks
        out[tool] = r
    if "serial" in out:
        for tool, r in out.items():
            if "median" in r and tool != "serial":
                r["us_overhead_per_task"] = (r["median"] - out["serial"]["median"]) / tasks * 1e6
    return out


def _cell_star(args):
    return stencil_cell(*args)


def coarse_pair(s, size):
    n, k = size["coarse_n"], size["coarse_k"]
    return (lambda: [coarse(k) for _ in range(n)]), (lambda: list(s.compute(*[coarse_t(k) for _ in range(n)])))


def w6_coarse(p, size, tools):
    n, k = size["coarse_n"], size["coarse_k"]
    ser, par = coarse_pair(p.tg, size)
    expect = [coarse(k)] * n
    out = {}
    for tool in tools:
        if tool == "serial":
            r = measure(ser)
        elif tool == "taskgraph":
            r = measure(par, check=lambda v: v == expect)
        elif tool == "threadpool":
            r = measure(lambda: list(p.tpe.map(coarse, [k] * n)), check=lambda v: v == expect)
        elif tool == "processpool":
            r = measure(lambda: list(p.ppe.map(coarse, [k] * n, chunksize=8)), check=lambda v: v == expect)
        elif tool.startswith("joblib"):
            be = "threading" if tool == "joblib-threads" else "loky"
            r = measure(lambda: p.jl(be)(p.joblib.delayed(coarse)(k) for _ in range(n)), check=lambda v: v == expect)
        elif tool == "dask-threads":
            import dask
            r = measure(lambda: list(p.dask_compute([dask.delayed(coarse)(k) for _ in range(n)])), check=lambda v: v == expect)
        else:
            continue
        r["tasks"] = n
        out[tool] = r
    return out


UTS_M, UTS_Q = 4, 0.24


def uts_pair(s, size):
    b0, k = size["uts_b0"], size["uts_k"]
    return (lambda: uts_root_serial(b0, UTS_M, UTS_Q, k)), (lambda: s.compute(uts_root_t(b0, UTS_M, UTS_Q, k)))


def w7_uts(p, size, tools):
    ser, par = uts_pair(p.tg, size)
    expect = uts_root_serial(size["uts_b0"], UTS_M, UTS_Q, 0)
    out = {}
    if "serial" in tools:
        out["serial"] = measure(ser, check=lambda v: v == expect)
    if "taskgraph" in tools:
        before = p.tg.stats()
        r = measure(par, check=lambda v: v == expect)
        after = p.tg.stats()
        stolen = sum(a["stolen"] - b["stolen"] for a, b in zip(after, before)) / r["runs"]
        r["tasks"] = expect
        r["steals_per_s"] = stolen / r["median"]
        if "serial" in out:  # idle fraction: worker time not spent on the serial amount of work
            r["idle_fraction"] = max(0.0, 1 - out["serial"]["median"] / (p.w * r["median"]))
        out["taskgraph"] = r
    for tool in tools:
        if tool not in out:
            out[tool] = {"na": "cannot express it: tasks spawned by tasks, joined inside them"}
    return out


WORKLOADS = {
    1: ("trivial-task overhead", w1_trivial),
    2: ("fib, spawn at every level", w2_fib_spawn),
    3: ("fib with cutoff (leaves ~100 us)", w3_fib_cutoff),
    4: ("quicksort of floats", w4_quicksort),
    5: ("2-D stencil DAG", w5_stencil),
    6: ("coarse map (~1 ms tasks)", w6_coarse),
    7: ("unbalanced tree search (binomial UTS)", w7_uts),
}

FULL = dict(trivial=100_000, trivial_proc=20_000, trivial_dask=10_000, fib_spawn=20, fib_cut=30,
            fib_cutoff=14, qsort=1_000_000, qsort_cutoff=20_000, stencil_w=48, stencil_s=48,
            stencil_k=150, coarse_n=2000, coarse_k=12_000, uts_b0=300, uts_k=250)
QUICK = dict(trivial=10_000, trivial_proc=2_000, trivial_dask=2_000, fib_spawn=16, fib_cut=25,
             fib_cutoff=14, qsort=100_000, qsort_cutoff=5_000, stencil_w=16, stencil_s=16,
             stencil_k=150, coarse_n=200, coarse_k=12_000, uts_b0=40, uts_k=250)
# The fork-join and DAG workloads: (serial, taskgraph) as functions of no arguments, for the
# alternated rounds.
PAIRS = {2: fib_spawn_pair, 3: fib_cutoff_pair, 4: quicksort_pair, 5: stencil_pair,
         6: coarse_pair, 7: uts_pair}


def alternated_speedups(size, runs, workloads):
    """Each fork-join and DAG workload serially and on taskgraph with 2 workers, alternated,
    `runs` rounds: {workload: its times, the speed-up of each round, the machine's load}."""
    out = {}
    with tg.Scheduler(workers=2) as s:
        for k in workloads:
            if k not in PAIRS:
                continue
            ser, par = PAIRS[k](s, size)
            ser(), par()  # warm up
            m = Machine()
            t_ser, t_par = alternate([ser, par], runs)
            load = m.stop()
            sp = [a / b for a, b in zip(t_ser, t_par)]
            out[str(k)] = {"title": WORKLOADS[k][0], "serial": summary(t_ser),
                           "taskgraph_2w": summary(t_par), "speedup": summary(sp), "values": sp,
                           "load": load}
            print(f"  workload {k} ({WORKLOADS[k][0]}), 2 workers over serial, {runs} alternated "
                  f"rounds: {out[str(k)]['speedup']['median']:.2f} [{min(sp):.2f}-{max(sp):.2f}]",
                  flush=True)
    return out


ALL_TOOLS = ["serial", "taskgraph", "threadpool", "processpool", "joblib-threads", "joblib-loky",
             "dask-threads"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--gil-subset", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("--workloads", default="1,2,3,4,5,6,7",
                    help="comma-separated workload numbers (with --gil-subset: within 1,3,6)")
    a = ap.parse_args(argv)
    size = QUICK if a.quick else FULL
    wl = [int(x) for x in a.workloads.split(",")]
    tools = ALL_TOOLS if tools_available() else ["serial", "taskgraph", "threadpool", "processpool"]
    if a.gil_subset:
        wl, tools = [k for k in wl if k in (1, 3, 6)], ["serial", "taskgraph"]
    env = {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
           "gil_enabled": tg.gil_enabled(), "free_threaded_build": tg._native.FREE_THREADED_BUILD,
           "machine": platform.machine(), "cpus": tg.usable_cpus(), "quick": a.quick,
           "versions": _versions()}
    results = []
    t_start = time.time()
    for w in WORKERS:
        peers = Peers(w) if not a.gil_subset else _TgOnly(w)
        try:
            for k in wl:
                title, fn = WORKLOADS[k]
                t0 = time.time()
                res = fn(peers, size, [t for t in tools if not (t == "serial" and w != 1)])
                for tool, r in res.items():
                    results.append({"workload": k, "title": title, "tool": tool, "workers": w,
                                    "gil_enabled": tg.gil_enabled(), **r})
                print(f"[{time.time() - t_start:6.1f} s] workers={w} workload {k} ({title}) "
                      f"in {time.time() - t0:.1f} s", flush=True)
        finally:
            peers.close()
    alternated = {} if a.gil_subset else alternated_speedups(size, 5 if a.quick else 7, wl)
    with open(a.out, "w") as f:
        json.dump({"env": env, "results": results, "alternated": alternated}, f, indent=1)
    print(f"wrote {a.out}")


class _TgOnly:
    def __init__(self, workers):
        self.w = workers
        self.tg = tg.Scheduler(workers=workers)

    def close(self):
        self.tg.close()


def _versions():
    """Versions of taskgraph and the peers, read from the installed metadata: nothing is
    imported here (importing cffi, say, would turn the GIL on in CPython 3.13t)."""
    from importlib import metadata
    out = {"taskgraph": tg.__version__}
    for dist in ("dask", "joblib", "msgpack", "cloudpickle"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:  # optional
            pass
    return out


if __name__ == "__main__":
    main()
