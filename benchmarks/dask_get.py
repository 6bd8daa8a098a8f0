"""taskgraph.dask.get against dask's own local schedulers (docs/benchmarks.md, docs/dask.md).

    python benchmarks/dask_get.py [--quick] [--out FILE]

Each comparison runs its contenders alternately, R rounds (the order rotated every round), and
compares medians: these shared machines drift by tens of percent within a minute, and
alternating spreads the drift over every side. The load average is recorded at the start and
the end.

  flat    20,000 independent tiny tasks (a dict of legacy tasks, {("inc", i): (inc, i)}, every
          key requested): microseconds per task, end to end (the call of the get function:
          dask's conversion or ours, scheduling, running, collecting the results), for
          taskgraph on 2 workers and on 1, dask.threaded.get (2 workers), dask.get (sync) and
          dask.local.get_sync (the same function as dask.get in current dask);
  tree    a binary reduction tree of about 20,000 tasks, the same contenders;
  convert the share of taskgraph's time spent building the Nodes from the dask graph;
  array   a dask.array reduction, (sin(x) + 1).sum() of random numbers, with 1,600 small chunks
          (overhead-bound) and with 16 large chunks of 32 MB (compute-bound): taskgraph against
          scheduler="threads" (2 workers) and "sync", end to end (x.compute(), which includes
          dask's own graph building and optimization, the same for all) and the scheduler
          alone (its get function on the materialized graph);
  memory  the peak RSS of a streaming reduction, (x + 1).sum() over 2 GB of random numbers
          in 256 chunks of 8 MB, each run in a fresh process (Linux: the peak is reset just
          before the compute through /proc/self/clear_refs and read from VmHWM after it):
          taskgraph against dask.threaded.get, 2 workers each.

Targets: flat >= 20x dask.threaded.get (2 workers) and faster than dask.get on 1
worker; array small chunks >= 3x scheduler="threads", large chunks no slower; memory within
1.2x of dask.threaded.get.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time

import taskgraph as tg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _common import write_results  # noqa: E402
from per_task import alternate, summary  # noqa: E402

import dask  # noqa: E402
import dask.local  # noqa: E402
import dask.threaded  # noqa: E402
import taskgraph.dask  # noqa: E402
from taskgraph.dask.graph import GraphBuilder  # noqa: E402

TG = taskgraph.dask.get


def inc(x):
    return x + 1


def add(a, b):
    return a + b


def flat_graph(n):
    dsk = {("inc", i): (inc, i) for i in range(n)}
    return dsk, list(dsk)


def tree_graph(n):
    """A binary reduction over n/2 leaves: about n tasks; the root key."""
    leaves = n // 2
    dsk = {("x", 0, i): (inc, i) for i in range(leaves)}
    level, width = 0, leaves
    while width > 1:
        for i in range(width // 2):
            dsk[("x", level + 1, i)] = (add, ("x", level, 2 * i), ("x", level, 2 * i + 1))
        if width % 2:
            dsk[("x", level + 1, width // 2)] = (inc, ("x", level, width - 1))
        width = width // 2 + width % 2
        level += 1
    return dsk, ("x", level, 0)


def per_task(dsk, keys, s1, s2, runs):
    """us per task of every contender on one graph (alternated), and the ratios."""
    n = len(dsk)
    names = ["taskgraph 2w", "taskgraph 1w", "dask.threaded.get 2w", "dask.get", "dask.local.get_sync"]
    fns = [lambda: TG(dsk, keys, scheduler=s2), lambda: TG(dsk, keys, scheduler=s1),
           lambda: dask.threaded.get(dsk, keys, num_workers=2), lambda: dask.get(dsk, keys),
           lambda: dask.local.get_sync(dsk, keys)]
    expect = dask.get(dsk, keys)
    assert all(f() == expect for f in fns[:2]), "taskgraph.dask.get disagrees with dask.get"
    times = alternate(fns, runs)
    out = {"tasks": n, "us_per_task": {}}
    for name, ts in zip(names, times):
        s = summary(ts)
        out["us_per_task"][name] = {k: (v / n * 1e6 if k != "runs" else v) for k, v in s.items()}
    med = {k: v["median"] for k, v in out["us_per_task"].items()}
    out["speedup_vs_threaded_2w"] = med["dask.threaded.get 2w"] / med["taskgraph 2w"]
    out["speedup_vs_sync_1w"] = med["dask.get"] / med["taskgraph 1w"]
    conv = [_timed(lambda: GraphBuilder(dsk).nodes(keys if isinstance(keys, list) else [keys]))
            for _ in range(runs)]
    out["convert_us_per_task"] = statistics.median(conv) / n * 1e6
    print(f"  {n} tasks, us/task: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items())
          + f"; conversion {out['convert_us_per_task']:.2f}; "
          f"{out['speedup_vs_threaded_2w']:.1f}x threaded (2w), "
          f"{out['speedup_vs_sync_1w']:.1f}x dask.get (1w)", flush=True)
    return out


def _timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def array_case(shape, chunks, s2, runs):
    """(sin(x) + 1).sum() on taskgraph, "threads" (2 workers) and "sync": end to end and the
    scheduler alone on the materialized graph."""
    import dask.array as da
    import numpy as np
    from dask.base import collections_to_expr
    x = da.random.default_rng(0).random(shape, chunks=chunks)
    y = (da.sin(x) + 1).sum()
    tg_get = functools.partial(TG, scheduler=s2)
    expr = collections_to_expr([y]).optimize()
    graph, keys = dict(expr.__dask_graph__()), expr.__dask_keys__()
    np.testing.assert_allclose(y.compute(scheduler=tg_get), y.compute(scheduler="sync"))
    names = ["taskgraph", "threads", "sync"]
    e2e = alternate([lambda: y.compute(scheduler=tg_get),
                     lambda: y.compute(scheduler="threads", num_workers=2),
                     lambda: y.compute(scheduler="sync")], runs)
    alone = alternate([lambda: TG(graph, keys, scheduler=s2),
                       lambda: dask.threaded.get(graph, keys, num_workers=2),
                       lambda: dask.get(graph, keys)], runs)
    out = {"shape": list(shape), "chunks": list(chunks), "nchunks": x.npartitions,
           "graph_tasks": len(graph),
           "compute_s": {n: summary(t) for n, t in zip(names, e2e)},
           "get_s": {n: summary(t) for n, t in zip(names, alone)}}
    for what in ("compute_s", "get_s"):
        m = {n: v["median"] for n, v in out[what].items()}
        out[what.replace("_s", "_speedup_vs_threads")] = m["threads"] / m["taskgraph"]
    print(f"  array {x.npartitions} chunks: compute() {_ms(out['compute_s'])}, "
          f"{out['compute_speedup_vs_threads']:.2f}x threads; get alone {_ms(out['get_s'])}, "
          f"{out['get_speedup_vs_threads']:.2f}x threads", flush=True)
    return out


def _ms(d):
    return ", ".join(f"{n} {v['median'] * 1e3:.1f} ms" for n, v in d.items())


_MEMORY_RUN = """
import sys, time
import dask, dask.array as da, dask.threaded
import taskgraph.dask

def status(field):  # kB, from /proc/self/status
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith(field + ":"))

which, n, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
x = da.random.default_rng(0).random(n, chunks=chunk)
y = (x + 1).sum()
get = (taskgraph.dask.get if which == "taskgraph"
       else lambda d, k, **kw: dask.threaded.get(d, k, num_workers=2))
kw = {"num_workers": 2} if which == "taskgraph" else {}
y.compute(scheduler="sync")  # imports and first-use allocations out of the way
with open("/proc/self/clear_refs", "w") as fh:  # the peak (VmHWM) restarts from here
    fh.write("5")
base = status("VmRSS")
t0 = time.perf_counter()
v = y.compute(scheduler=get, **kw)
t = time.perf_counter() - t0
print(base, status("VmHWM"), t, v)
"""


def memory(runs, quick):
    """Peak RSS (MiB) of the streaming reduction, each run in a fresh process, alternated."""
    n = (1 << 25) if quick else (1 << 28)   # 256 MiB or 2 GiB of float64
    chunk = 1 << 20                          # 8 MiB chunks
    out = {"bytes": n * 8, "chunk_bytes": chunk * 8, "chunks": n // chunk, "runs": {}}
    res = {"taskgraph": [], "dask.threaded.get": []}
    for r in range(runs):
        for which in (["taskgraph", "threaded"] if r % 2 == 0 else ["threaded", "taskgraph"]):
            p = subprocess.run([sys.executable, "-c", _MEMORY_RUN, which, str(n), str(chunk)],
                               capture_output=True, text=True, timeout=600)
            if p.returncode:
                raise RuntimeError(f"memory run ({which}) failed: {p.stderr[-2000:]}")
            base, peak, t, _ = p.stdout.split()
            res["taskgraph" if which == "taskgraph" else "dask.threaded.get"].append(
                {"base_mib": int(base) / 1024, "peak_mib": int(peak) / 1024, "seconds": float(t)})
    for name, rs in res.items():
        out["runs"][name] = rs
        out[name] = {"peak_mib": statistics.median(r["peak_mib"] for r in rs),
                     "above_base_mib": statistics.median(r["peak_mib"] - r["base_mib"] for r in rs),
                     "seconds": statistics.median(r["seconds"] for r in rs)}
    out["peak_ratio"] = out["taskgraph"]["peak_mib"] / out["dask.threaded.get"]["peak_mib"]
    out["above_base_ratio"] = (out["taskgraph"]["above_base_mib"]
                               / out["dask.threaded.get"]["above_base_mib"])
    print(f"  memory, {out['bytes'] / 2**30:.2f} GiB in {out['chunks']} chunks: peak RSS "
          f"taskgraph {out['taskgraph']['peak_mib']:.0f} MiB, threaded "
          f"{out['dask.threaded.get']['peak_mib']:.0f} MiB ({out['peak_ratio']:.2f}x; above the "
          f"start {out['above_base_ratio']:.2f}x)", flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    runs = 3 if a.quick else 7
    n = 5_000 if a.quick else 20_000
    res = {"loadavg_start": list(os.getloadavg()),
           "versions": {"dask": dask.__version__}}
    with tg.Scheduler(1) as s1, tg.Scheduler(2) as s2:
        print("per task, flat graph:", flush=True)
        res["flat"] = per_task(*flat_graph(n), s1, s2, runs)
        print("per task, tree graph:", flush=True)
        res["tree"] = per_task(*tree_graph(n), s1, s2, runs)
        try:
            import numpy
            res["versions"]["numpy"] = numpy.__version__
        except ImportError:
            print("numpy is not installed: no dask.array figures")
        else:
            print("dask.array:", flush=True)
            res["array_small"] = array_case((400, 400), (10, 10), s2, runs)
            res["array_large"] = array_case((8000, 8000) if not a.quick else (4000, 4000),
                                            (2000, 2000) if not a.quick else (1000, 1000), s2,
                                            runs)
    if "array_small" in res:
        print("memory (fresh processes):", flush=True)
        res["memory"] = memory(3 if not a.quick else 1, a.quick)
    res["loadavg_end"] = list(os.getloadavg())
    res["targets"] = _targets(res)
    for t in res["targets"]:
        print(f"  {t['label']}: {t['value']:.3g} (target {t['target']}) "
              f"{'met' if t['met'] else 'MISSED'}")
    if a.out:
        write_results(a.out, res, a.quick)
    else:
        print(json.dumps(res, indent=1))


def _targets(res):
    out = []

    def target(label, value, want, met):
        out.append({"label": label, "value": value, "target": want, "met": bool(met)})

    target("flat: dask.threaded.get (2w) / taskgraph (2w)", res["flat"]["speedup_vs_threaded_2w"],
           ">= 20x", res["flat"]["speedup_vs_threaded_2w"] >= 20)
    target("flat: dask.get / taskgraph (1w)", res["flat"]["speedup_vs_sync_1w"], "> 1x",
           res["flat"]["speedup_vs_sync_1w"] > 1)
    if "array_small" in res:
        s, lg = res["array_small"], res["array_large"]
        target("array, 1,600 small chunks, compute(): threads / taskgraph",
               s["compute_speedup_vs_threads"], ">= 3x", s["compute_speedup_vs_threads"] >= 3)
        target("array, 1,600 small chunks, get alone: threads / taskgraph",
               s["get_speedup_vs_threads"], ">= 3x", s["get_speedup_vs_threads"] >= 3)
        target("array, large chunks, compute(): threads / taskgraph",
               lg["compute_speedup_vs_threads"], ">= 1x (no slower)",
               lg["compute_speedup_vs_threads"] >= 1)
    if "memory" in res:
        target("memory: peak RSS taskgraph / dask.threaded.get", res["memory"]["peak_ratio"],
               "<= 1.2x", res["memory"]["peak_ratio"] <= 1.2)
    return out


if __name__ == "__main__":
    main()
