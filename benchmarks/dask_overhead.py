"""What a task costs locally and on a dask.distributed cluster, side by side (docs/scaling.md).

    python benchmarks/dask_overhead.py [--quick] [--out FILE]

The cluster is a LocalCluster on this machine: 2 worker processes with 1 thread each, on
loopback, no dashboard (the tests' cluster). Every figure is per task, trivial task bodies,
median of R runs:

  lazy       a flat lazy DAG of N independent trivial tasks, one compute;
  fork-join  one task spawning N trivial children and joining them;
  fib        fib(32) with a cutoff at 24 (about 100 tasks, leaves of ~5-15 ms): the whole
             run, and the speed-up over plain recursive Python (on one machine a cluster
             cannot beat the local scheduler; the row shows how coarse tasks must be for
             the cluster's per-task cost to stop mattering);

on the local scheduler (2 workers), on the DaskScheduler, and, for reference, plain dask:
client.map + gather of N trivial calls, and a dask.delayed graph of N calls computed on the
client. The cluster numbers are dominated by dask's own per-task cost (scheduler round trips,
serialization, the worker's event loop), which taskgraph cannot remove: the point of the
backend is more machines, not cheaper tasks.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import time

import taskgraph as tg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The tasks of the per-task benchmark (the cluster's workers import that module too).
from per_task import fib, fib_serial, spawn_many, trivial  # noqa: E402


def plain_trivial(i):
    return i


def median_time(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    # distributed's sampling profiler reads other threads' frames (unsafe on 3.13t): off.
    os.environ["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] = "False"
    os.environ["PYTHONPATH"] = os.pathsep.join([HERE] + sys.path)  # workers import this module
    import dask
    import distributed
    from taskgraph.dask import DaskScheduler
    dask.config.refresh()

    n_lazy = 500 if a.quick else 2000
    n_fork = 200 if a.quick else 1000
    fib_n, fib_cut = (28, 20) if a.quick else (32, 24)
    reps = 3 if a.quick else 5
    rows = []

    def row(workload, backend, tasks, secs, times, **extra):
        r = {"workload": workload, "backend": backend, "tasks": tasks, "seconds": secs,
             "us_per_task": secs / tasks * 1e6, "runs": times, **extra}
        rows.append(r)
        print(f"  {workload:10s} {backend:28s} {tasks:6d} tasks  {secs * 1e3:9.1f} ms  "
              f"{r['us_per_task']:9.1f} us/task", flush=True)

    fib_tasks = sum(1 for _ in _fib_nodes(fib_n, fib_cut))
    serial_fib, serial_runs = median_time(lambda: fib_serial(fib_n), reps)

    print(f"local scheduler, 2 workers (Python {platform.python_version()}, "
          f"GIL enabled: {tg.gil_enabled()})", flush=True)
    with tg.Scheduler(workers=2) as s:
        s.compute([trivial(i) for i in range(100)])  # warm-up
        secs, ts = median_time(lambda: s.compute([trivial(i) for i in range(n_lazy)]), reps)
        row("lazy", "taskgraph local", n_lazy, secs, ts)
        secs, ts = median_time(lambda: s.compute(spawn_many(n_fork)), reps)
        row("fork-join", "taskgraph local", n_fork + 1, secs, ts)
        secs, ts = median_time(lambda: s.compute(fib(fib_n, fib_cut)), reps)
        row("fib", "taskgraph local", fib_tasks, secs, ts, speedup=serial_fib / secs)

    print("LocalCluster: 2 worker processes x 1 thread, loopback", flush=True)
    t0 = time.perf_counter()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1",
                                  silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client:
        startup = time.perf_counter() - t0
        ds = DaskScheduler(client)
        ds.compute([trivial(i) for i in range(50)])  # warm-up: imports on the workers
        client.gather(client.map(plain_trivial, range(50), pure=False))
        secs, ts = median_time(lambda: ds.compute([trivial(i) for i in range(n_lazy)]), reps)
        row("lazy", "taskgraph on dask", n_lazy, secs, ts)
        secs, ts = median_time(
            lambda: client.gather(client.map(plain_trivial, range(n_lazy), pure=False)), reps)
        row("lazy", "dask client.map + gather", n_lazy, secs, ts)
        delayed = dask.delayed(plain_trivial, pure=False)
        secs, ts = median_time(
            lambda: dask.compute(*[delayed(i) for i in range(n_lazy)], scheduler=client), reps)
        row("lazy", "dask.delayed on the client", n_lazy, secs, ts)
        fork_reps = max(2, reps - 2)
        secs, ts = median_time(lambda: ds.compute(spawn_many(n_fork)), fork_reps)
        row("fork-join", "taskgraph on dask", n_fork + 1, secs, ts)
        secs, ts = median_time(lambda: ds.compute(fib(fib_n, fib_cut)), fork_reps)
        row("fib", "taskgraph on dask", fib_tasks, secs, ts, speedup=serial_fib / secs)

    doc = {"env": {"python": platform.python_version(), "gil_enabled": tg.gil_enabled(),
                   "cpus": os.cpu_count(), "quick": a.quick,
                   "distributed": distributed.__version__, "dask": dask.__version__,
                   "cluster_start_s": startup},
           "fib": {"n": fib_n, "cutoff": fib_cut, "serial_s": serial_fib, "serial_runs": serial_runs},
           "rows": rows}
    print(f"cluster start-up {startup:.2f} s; fib({fib_n}) serial {serial_fib * 1e3:.0f} ms, "
          f"{fib_tasks} tasks with cutoff {fib_cut}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {a.out}")
    return doc


def _fib_nodes(n, cutoff):
    """One item per task of fib(n, cutoff) (for the per-task figures)."""
    stack = [n]
    while stack:
        k = stack.pop()
        yield k
        if k > cutoff:
            stack += [k - 1, k - 2]


if __name__ == "__main__":
    main()
