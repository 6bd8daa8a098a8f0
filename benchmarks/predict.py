"""Predicted against measured speed-up (docs/benchmarks.md, "Predicted speed-up").

For fork-join fib, the quicksort of examples/quicksort.py and a heat-equation stencil built as a
lazy graph: a trace on 1 worker predicts the speed-up on 2 (Trace.predict: lower bound,
simulated work stealing, upper bound), which is compared with the measured one (median wall
time on 1 worker / on 2, alternating runs). The prediction from the 2-worker trace (its steal
costs measured) and the 64-worker prediction are printed too. The simulated figure should be
within 10% of the measured speed-up when the tasks do not slow each other down (work inflation
1.0); the inflation of each program is printed beside it, since the simulation cannot know it.

    python benchmarks/predict.py [--quick] [--out FILE]
"""
import argparse
import statistics
import sys
import time
from array import array

import taskgraph as tg
from _common import write_results
from per_task import fib, load_example

qs = load_example("quicksort.py")


@tg.task(name="heat")
def heat(left, mid, right, steps):
    """One chunk of a 1-D heat equation advanced `steps` time steps (its neighbours' edge
    values from the previous step)."""
    a = array("d", mid)
    lo = left[-1] if left is not None else a[0]
    hi = right[0] if right is not None else a[-1]
    for _ in range(steps):
        prev = lo
        n = len(a)
        for i in range(n):
            nxt = a[i + 1] if i + 1 < n else hi
            v = a[i] + 0.25 * (prev - 2 * a[i] + nxt)
            prev = a[i]
            a[i] = v
    return a


def heat_graph(chunks=8, size=600, rounds=6, steps=2):
    row = [array("d", [float(i % 7) for i in range(size)]) for _ in range(chunks)]
    for _ in range(rounds):
        row = [heat(row[i - 1] if i else None, row[i], row[i + 1] if i + 1 < chunks else None,
                    steps) for i in range(chunks)]
    return row


PROGRAMS = {
    "fib(27), cutoff 15": lambda: fib(27, 15),
    "quicksort 300,000 doubles, cutoff 10,000":
        lambda: qs.quicksort(qs.make_input(300_000, 1), 10_000),
    "heat stencil 8 chunks x 6 rounds (lazy DAG)": heat_graph,
}


def timed(s, make):
    nodes = make()
    t0 = time.perf_counter()
    s.compute(nodes)
    return time.perf_counter() - t0


def best_trace(s, make, runs=2):
    best = None
    for _ in range(runs):
        nodes = make()
        with tg.trace() as tr:
            s.compute(nodes)
        if best is None or tr.work < best.work:
            best = tr
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default="benchmarks/results/predict.json")
    a = p.parse_args(argv)
    reps = 3 if a.quick else 5
    print(f"Predicted against measured speed-up, {sys.version.split()[0]}, GIL enabled: "
          f"{tg.gil_enabled()}")
    rows = []
    with tg.Scheduler(workers=1) as s1, tg.Scheduler(workers=2) as s2:
        for name, make in PROGRAMS.items():
            timed(s1, make)
            timed(s2, make)
            t1s, t2s = [], []
            for r in range(reps):
                for s, out in ((s1, t1s), (s2, t2s))[::1 if r % 2 else -1]:
                    out.append(timed(s, make))
            measured = statistics.median(t1s) / statistics.median(t2s)
            tr1, tr2 = best_trace(s1, make), best_trace(s2, make)
            p1 = tr1.predict((2, 64))
            p2 = tr2.predict((2, 64))
            row = {"program": name, "tasks": len(tr1), "measured": measured,
                   "t1_s": statistics.median(t1s), "t2_s": statistics.median(t2s),
                   "inflation": tr2.inflation(tr1), "parallelism": tr1.parallelism,
                   "from_1w": {"lower": p1[0].lower, "simulated": p1[0].simulated,
                               "upper": p1[0].upper},
                   "from_2w": {"lower": p2[0].lower, "simulated": p2[0].simulated,
                               "upper": p2[0].upper},
                   "p64_from_1w": p1[1]._asdict(), "p64_from_2w": p2[1]._asdict()}
            row["error_1w"] = row["from_1w"]["simulated"] / measured - 1
            row["error_2w"] = row["from_2w"]["simulated"] / measured - 1
            # What the simulation cannot know, measured: the 1-worker prediction divided by the
            # work inflation of the 2-worker run.
            row["simulated_over_inflation"] = p1[0].simulated / row["inflation"]
            rows.append(row)
            print(f"  {name}: {len(tr1)} tasks, parallelism {tr1.parallelism:.1f}, inflation "
                  f"{row['inflation']:.2f}\n"
                  f"    measured 2-worker speed-up {measured:.2f}; predicted from the 1-worker "
                  f"trace {p1[0].lower:.2f} / {p1[0].simulated:.2f} / {p1[0].upper:.2f} "
                  f"(lower / simulated / upper; simulated {100 * row['error_1w']:+.0f}%), from "
                  f"the 2-worker trace simulated {p2[0].simulated:.2f} "
                  f"({100 * row['error_2w']:+.0f}%); 1-worker prediction / inflation "
                  f"{row['simulated_over_inflation']:.2f}\n"
                  f"    64 workers: {p1[1].lower:.1f} / {p1[1].simulated:.1f} / "
                  f"{p1[1].upper:.1f}", flush=True)
    write_results(a.out, {"predict": rows}, a.quick)


if __name__ == "__main__":
    main()
