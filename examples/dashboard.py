"""Watch taskgraph run: a live dashboard over a mixed workload.

    python examples/dashboard.py [--seconds 30] [--workers 2] [--port 0]

Opens a dashboard (``tg.dashboard``), prints its URL, and runs for ``--seconds``: batches
through a pipeline of three task functions (``load``, ``clean``, ``summarise``; a few batches
fail), a fork-join ``fib`` beside them, and one traced compute, whose summary, executed graph
and trace file show on the page. Open the URL in a browser while it runs. docs/dashboard.md
says what the page shows; `make pictures` draws docs/img/dashboard.png from this run.
"""
from __future__ import annotations

import argparse
import random
import threading
import time

import taskgraph as tg


@tg.task
def load(i):
    time.sleep(random.uniform(0.004, 0.012))
    return list(range(i % 7 + 3))


@tg.task
def clean(rows):
    time.sleep(random.uniform(0.002, 0.008))
    if random.random() < 0.02:
        raise ValueError("bad batch")
    return [r * 2 for r in rows]


@tg.task
def summarise(parts):
    time.sleep(0.01)
    return sum(sum(p) for p in parts)


def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


@tg.task(name="fib")
def fib(n, cutoff=15):
    if n <= cutoff:
        return fib_serial(n)
    a, b = fib(n - 1, cutoff), fib(n - 2, cutoff)
    return a.result() + b.result()


def work(s, stop, counts):
    """Batches and fib until stop is set; counts what finished."""
    while not stop.is_set():
        for _ in range(4):
            parts = [clean(load(i)) for i in range(40)]
            try:
                s.compute(summarise(parts))
                counts["batches"] += 1
            except ValueError:
                counts["failed"] += 1
        s.compute(fib(23))
        counts["fib"] += 1


def run(seconds=30.0, workers=2, port=0, window=10.0, while_running=None, quiet=False):
    """Runs the workload with a dashboard open. ``while_running(d)``, if given, is called on
    this thread while the workload runs, and the run ends when it returns; else it ends after
    ``seconds``. Returns what ran: {"batches", "failed", "fib", "traced", "speedup", "url"}
    (the traced compute's tasks and its achieved speed-up, work / wall)."""
    counts = {"batches": 0, "failed": 0, "fib": 0}
    stop = threading.Event()
    with tg.Scheduler(workers) as s, tg.dashboard(s, port=port, window=window) as d:
        if not quiet:
            print(f"dashboard: {d.url}", flush=True)
        with tg.trace() as tr:  # before the rest: the trace holds this compute alone
            assert s.compute(fib(22)) == 17711
        th = threading.Thread(target=work, args=(s, stop, counts))
        th.start()
        try:
            if while_running is not None:
                while_running(d)
            else:
                time.sleep(seconds)
        finally:
            stop.set()
            th.join()
    return {**counts, "traced": len(tr), "speedup": tr.work / tr.wall if tr.wall else 0.0,
            "url": d.url}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    r = run(a.seconds, a.workers, a.port)
    print(f"traced fib(22) = 17711 OK ({r['traced']} tasks); speed-up {r['speedup']:.2f}x "
          f"(work / wall); then {r['batches']} batches ({r['failed']} failed) and fib(23) "
          f"{r['fib']} times")


if __name__ == "__main__":
    main()
