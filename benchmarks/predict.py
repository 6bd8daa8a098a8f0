"""Predicted against measured speed-up (docs/benchmarks.md, "Predicted against measured speed-up").

For fork-join fib, the quicksort of examples/quicksort.py and a heat-equation stencil built as a
lazy graph, R >= 5 alternated rounds (benchmarks/_common.py), each running the program on 1
worker, on 2, and traced on each. Per round: the measured 2-worker speed-up (1-worker time over
2-worker time), the speed-up Trace.predict simulates from that round's 1-worker trace (and from
its 2-worker trace), their difference, and the work inflation (Trace.inflation: the 2-worker
trace's own time over the 1-worker one's), which the simulation cannot know. The 64-worker
prediction is printed too. Target, on fib: the simulated speed-up within 10% of the measured
one, in the median and the worst round.

    python benchmarks/predict.py [--quick] [--out FILE]
"""
import argparse
import sys
import time
from array import array

import taskgraph as tg
from _common import Machine, alternate, judged, load_text, spread_text, summary, write_results
from per_task import fib, load_example
from targets import PREDICT_PCT, PREDICT_PROGRAM

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
    PREDICT_PROGRAM: lambda: fib(27, 15),
    "quicksort 300,000 doubles, cutoff 10,000":
        lambda: qs.quicksort(qs.make_input(300_000, 1), 10_000),
    "heat stencil 8 chunks x 6 rounds (lazy DAG)": heat_graph,
}



def compute_time(s, make):
    """The time of s.compute of the graph make() builds (built beforehand)."""
    nodes = make()
    t0 = time.perf_counter()
    s.compute(nodes)
    return time.perf_counter() - t0


def traced(s, make, traces):
    def run():
        nodes = make()
        with tg.trace() as tr:
            s.compute(nodes)
        traces.append(tr)
        return 0.0
    return run


def program_rounds(name, make, s1, s2, reps):
    """reps alternated rounds of the program on 1 and 2 workers, untraced and traced."""
    compute_time(s1, make), compute_time(s2, make)  # warm up
    tr1, tr2 = [], []
    m = Machine()
    t1s, t2s, _, _ = alternate([lambda: compute_time(s1, make), lambda: compute_time(s2, make),
                                traced(s1, make, tr1), traced(s2, make, tr2)], reps,
                               timer=lambda f: f())
    load = m.stop()
    measured = [a / b for a, b in zip(t1s, t2s)]
    p1 = [t.predict((2, 64)) for t in tr1]
    sim1 = [p[0].simulated for p in p1]
    sim2 = [t.predict((2,))[0].simulated for t in tr2]
    err = [(p / m_ - 1) * 100 for p, m_ in zip(sim1, measured)]
    row = {"program": name, "tasks": len(tr1[0]), "load": load,
           "measured": summary(measured), "t1_s": summary(t1s), "t2_s": summary(t2s),
           "simulated_from_1w": summary(sim1), "simulated_from_2w": summary(sim2),
           "error_1w_pct": summary(err),
           "lower_from_1w": summary([p[0].lower for p in p1]),
           "upper_from_1w": summary([p[0].upper for p in p1]),
           "inflation": summary([b.inflation(a) for a, b in zip(tr1, tr2)]),
           "parallelism": summary([t.parallelism for t in tr1]),
           "p64_from_1w": {k: summary([getattr(p[1], k) for p in p1])
                           for k in ("lower", "simulated", "upper")}}
    if name == PREDICT_PROGRAM:
        row["abs_error_judged"] = judged([abs(e) for e in err], PREDICT_PCT, "lower", load=load)
    r = row
    print(f"  {name}: {r['tasks']} tasks, parallelism {r['parallelism']['median']:.1f}, inflation "
          f"{spread_text(r['inflation'])}\n"
          f"    measured 2-worker speed-up {spread_text(r['measured'])}; simulated from the "
          f"1-worker trace {spread_text(r['simulated_from_1w'])} (lower "
          f"{r['lower_from_1w']['median']:.2f}, upper {r['upper_from_1w']['median']:.2f}), from "
          f"the 2-worker trace {r['simulated_from_2w']['median']:.2f}; simulated over measured "
          f"{spread_text(r['error_1w_pct'], fmt='{:+.0f}', unit='%')}"
          + (f"; target within {PREDICT_PCT}%: {r['abs_error_judged']['verdict']}"
             if "abs_error_judged" in r else "") + f"; {load_text(load)}\n"
          f"    64 workers: {r['p64_from_1w']['lower']['median']:.1f} / "
          f"{r['p64_from_1w']['simulated']['median']:.1f} / {r['p64_from_1w']['upper']['median']:.1f}",
          flush=True)
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default="benchmarks/results/predict.json")
    a = p.parse_args(argv)
    reps = 5 if a.quick else 9
    print(f"Predicted against measured speed-up, {sys.version.split()[0]}, GIL enabled: "
          f"{tg.gil_enabled()}, {reps} alternated rounds")
    with tg.Scheduler(workers=1) as s1, tg.Scheduler(workers=2) as s2:
        rows = [program_rounds(name, make, s1, s2, reps) for name, make in PROGRAMS.items()]
    write_results(a.out, {"predict": rows, "rounds": reps}, a.quick)


if __name__ == "__main__":
    main()
