"""Adversarial scheduling shapes: is P workers ever slower than 1? (docs/benchmarks.md,
"Shapes that must not lose to one worker").

    python benchmarks/shapes.py [--quick] [--runs R] [--workers P] [--only a,b] [--out FILE]

Each shape runs on a 1-worker and a P-worker scheduler (P = 2 unless given), alternately, R
rounds (at least 5); the figure per round is the P-worker time over the 1-worker time (below 1:
P workers win), with the 1-worker cost per task, the steal attempts and steals per P-worker run
(from Scheduler.stats()), and the machine's load over the whole shape. The shapes are the ones
a work-stealing scheduler is known to lose on when its thieves are too eager or too slow:

  fanout_task     one task spawns n trivial children, then joins them (the steal storm:
                  a thief faster than the spawner used to take one child per steal)
  fanout_inject   n trivial lazy tasks computed from the main thread (the injector path)
  wide_dag        a lazy DAG, `layers` layers of `width` trivial tasks, each reading 2 of the
                  layer before
  small_maps      many small tg.map calls in a row, from the main thread
  small_maps_task the same inside one task (nested maps, no injector)
  spawn_join      one task that spawns a child and joins it at once, n times (the only item
                  on the spawner's deque is always the one it is about to pop)
  chain           a task chain: each spawns the next and joins it, depth d
  fanout_50us     one task spawns children of ~50 us each (the shape that must speed up)
  fib_every       fib spawning a task at every level (fine-grained fork-join: both workers
                  run task bodies that read the same Task object; while it was an ordinary
                  object, its reference count made 2 workers slower than 1)
  after_fanout    a fan-out of trivial children, then, in the same scheduler, a fork-join of
                  coarse leaves (a thief's verdict on the fine work must not hold back the
                  next: a gate learnt on the fan-out used to keep the fork-join on one worker)
"""
from __future__ import annotations

import argparse
import os
import sys

import taskgraph as tg
from _common import Machine, alternate, load_text, spread_text, summary, verdict, worker_cpu, write_results
from map_fanout import units_for
from per_task import fib
from suite import busy

sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))


@tg.task(name="trivial")
def trivial(i):
    return i


def trivial_plain(i):
    return i


@tg.task(name="pair")
def pair(a, b):
    return 1


@tg.task(name="fan_out")
def fan_out(n):
    kids = [trivial(i) for i in range(n)]
    return sum(k.result() for k in kids)


@tg.task(name="spawn_join")
def spawn_join(n):
    s = 0
    for i in range(n):
        s += trivial(i).result()
    return s


@tg.task(name="link")
def link(d):
    return link(d - 1).result() + 1 if d else 0


@tg.task(name="maps_in_task")
def maps_in_task(m, k):
    return sum(len(tg.map(trivial_plain, range(k))) for _ in range(m))


busy_t = tg.task(busy, name="busy")


@tg.task(name="fan_out_busy")
def fan_out_busy(n, k):
    kids = [busy_t(k) for _ in range(n)]
    return sum(c.result() for c in kids)


def fib_tasks(n, cutoff):
    return 1 if n <= cutoff else 1 + fib_tasks(n - 1, cutoff) + fib_tasks(n - 2, cutoff)


def after_fanout(s, n, fib_n):
    s.compute(fan_out(n))
    return s.compute(fib(fib_n, 14))


def wide_dag(width, layers):
    prev = [trivial(i) for i in range(width)]
    for _ in range(layers - 1):
        prev = [pair(prev[i], prev[(i + 1) % width]) for i in range(width)]
    return prev


def shapes(q):
    """name -> (make a runner for scheduler s, tasks per run, description)."""
    n = 10_000 if q else 50_000
    width, layers = (200, 10) if q else (1000, 20)
    m, k = (100, 100) if q else (500, 200)
    d = 200 if q else 500
    chains = 5 if q else 20
    nb = 200 if q else 2000
    kb = units_for(50)
    fan_small, fib_n = (2000, 23) if q else (5000, 26)
    fine_n = 18 if q else 21
    return {
        "fanout_task": (lambda s: lambda: s.compute(fan_out(n)), n,
                        f"one task spawns {n:,} trivial children and joins them"),
        "fanout_inject": (lambda s: lambda: s.compute([trivial(i) for i in range(n)]), n,
                          f"{n:,} trivial lazy tasks built and computed from the main thread"),
        "wide_dag": (lambda s: lambda: s.compute(wide_dag(width, layers)), width * layers,
                     f"lazy DAG of {layers} layers x {width} trivial tasks, 2 edges each"),
        "small_maps": (lambda s: lambda: [s.compute_map(trivial_plain, range(k)) for _ in range(m)],
                       m * k, f"{m} calls of tg.map over {k} trivial items, from the main thread"),
        "small_maps_task": (lambda s: lambda: s.compute(maps_in_task(m, k)), m * k,
                            f"{m} calls of tg.map over {k} trivial items inside one task"),
        "spawn_join": (lambda s: lambda: s.compute(spawn_join(n // 2)), n // 2,
                       f"one task spawns a trivial child and joins it at once, {n // 2:,} times"),
        "chain": (lambda s: lambda: [s.compute(link(d)) for _ in range(chains)], d * chains,
                  f"{chains} task chains of depth {d} (each task spawns the next and joins it)"),
        "fanout_50us": (lambda s: lambda: s.compute(fan_out_busy(nb, kb)), nb,
                        f"one task spawns {nb:,} children of ~50 us and joins them"),
        "fib_every": (lambda s: lambda: s.compute(fib(fine_n)), fib_tasks(fine_n, 1),
                      f"fib({fine_n}) spawning a task at every level"),
        "after_fanout": (lambda s: lambda: after_fanout(s, fan_small, fib_n),
                         fan_small + 1 + fib_tasks(fib_n, 14),
                         f"a fan-out of {fan_small:,} trivial children, then fib({fib_n}) cut off at 14 "
                         "(leaves ~0.1-1 ms) in the same scheduler"),
    }


class _Sched(tg.Scheduler):
    def compute_map(self, fn, xs):
        with tg.use_scheduler(self):
            return tg.map(fn, xs)


def with_cpu(s, f, acc):
    """f, also appending the busiest worker's CPU seconds of each call to acc."""
    def run():
        b = worker_cpu(s)
        f()
        a = worker_cpu(s)
        if a is not None and b is not None:
            acc.append(max(x - y for x, y in zip(a, b)))
    return run


def measure(name, make, tasks, desc, s1, sp, runs):
    c1, cp = [], []
    one, many = with_cpu(s1, make(s1), c1), with_cpu(sp, make(sp), cp)
    one(), many()  # warm up
    del c1[:], cp[:]
    before = sp.stats()
    load = Machine()
    t1, tp = alternate([one, many], runs, settle=True)  # (_common.alternate: why settle)
    load = load.stop()
    after = sp.stats()
    # Settling doubled the calls: the CPU figures of the timed ones, and the counters per call.
    c1, cp = c1[1::2], cp[1::2]
    d = [{key: (a[key] - b[key]) / 2 for key in a if key != "worker"} for a, b in zip(after, before)]
    ratios = [b / a for a, b in zip(t1, tp)]
    word, det = verdict(ratios, 1.0, "lower", load=load)
    det["values"] = ratios
    res = {"description": desc, "tasks": tasks, "workers": sp.workers,
           "us_per_task_1w": summary([t / tasks * 1e6 for t in t1]),
           "us_per_task_pw": summary([t / tasks * 1e6 for t in tp]),
           "ratio_pw_over_1w": summary(ratios), "verdict": word, "judged": det, "load": load,
           "cpu_critical_ratio": (summary([b / a for a, b in zip(c1, cp)]) if len(c1) == len(cp) == runs
                                  else None),
           "steal_attempts_per_run": sum(w["steal_attempts"] for w in d) / runs,
           "stolen_per_run": sum(w["stolen"] for w in d) / runs,
           "parks_per_run": sum(w["parks"] for w in d) / runs,
           "looks_per_run": sum(w.get("looks", 0) for w in d) / runs,
           "tasks_run_share": [w["tasks_run"] / max(1, sum(x["tasks_run"] for x in d)) for w in d]}
    print(f"{name}: {desc}\n    1 worker {spread_text(res['us_per_task_1w'], unit=' us/task')}\n"
          f"    {sp.workers} workers {spread_text(res['us_per_task_pw'], unit=' us/task')}\n"
          f"    {sp.workers}w / 1w per run {spread_text(res['ratio_pw_over_1w'])}: {word}; "
          f"steal attempts {res['steal_attempts_per_run']:.0f}, looks {res['looks_per_run']:.0f}, "
          f"stolen {res['stolen_per_run']:.0f}, "
          f"parks {res['parks_per_run']:.0f} per run; {load_text(load)}"
          + (f"\n    busiest worker's CPU, {sp.workers}w / 1w: {spread_text(res['cpu_critical_ratio'])}"
             if res["cpu_critical_ratio"] else ""), flush=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    runs = max(5, a.runs or (5 if a.quick else 9))
    out = {"loadavg_start": os.getloadavg(), "runs": runs}
    with _Sched(1) as s1, _Sched(a.workers) as sp:
        for name, (make, tasks, desc) in shapes(a.quick).items():
            if a.only and name not in a.only.split(","):
                continue
            out[name] = measure(name, make, tasks, desc, s1, sp, runs)
    out["loadavg_end"] = os.getloadavg()
    if a.out:
        write_results(a.out, out, a.quick)


if __name__ == "__main__":
    main()
