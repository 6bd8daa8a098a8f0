"""What an open dashboard costs the tasks (docs/dashboard.md, "Cost").

    python benchmarks/dashboard.py [--quick] [--out FILE]

Two figures, each the extra time with a dashboard open against the same runs without one, on
one 2-worker scheduler, from 12 rounds (6 with --quick). In a round three sides come in turn:
without a dashboard, with one open, and without again; each side makes an untimed run and then
three timed ones, its figure the fastest of the three (timeit's advice: the slower runs are
other programs' doing, not the code's; every run is long enough to hold several of the
sampler's drains, so the fastest holds them too). A round's figure is the ratio of the side
with a dashboard to the side without; the side without again gives the same ratio between two
sides of the same code (A/A), the noise a round's figure carries on this machine, printed
beside. The sides of a round come in one of their six orders, each order in as many rounds:
each side follows each other equally often, so what closing a dashboard leaves to the next
side (its threads ending, its memory freed) lands on the control as often as on the side
without. A first round, untimed, warms the process up (the first dashboard opened imports its
modules and starts its threads; the first half-million tasks take their memory from the
kernel). The cyclic collector is off in the rounds, as timeit turns it off: whether a
collection falls in a run depends on where the allocation count stands when the run starts,
and a collection over half a million pending tasks moves a trivial-task run by 20-30% either
way, with or without a dashboard (the process's memory stays flat without it: these tasks
make no cycles). "Open" means what a user has: the dashboard's server and sampler running and
a page reading its event stream (a client thread here, reading every update). Opening and
closing the dashboard is outside the timed runs.

  1. trivial tasks, spawned (children of one task) and lazy (a flat graph computed from
     outside), 500,000 a run: per round the larger of the two extras; target <= 10%;
  2. fib(28) with a cutoff at 16 (fork-join, ~100 us tasks), ten computes a run: target <= 2%.

Beside each wall-clock figure, the same ratio of the process's CPU time (all its threads: the
workers, the sampler, the server), which other programs on a shared machine move less.
"""
from __future__ import annotations

import argparse
import gc
import http.client
import itertools
import statistics
import sys
import threading
import time

import taskgraph as tg
from _common import Machine, load_text, spread_text, summary, verdict, write_results
from per_task import spawn_many, trivial



def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


@tg.task(name="fib")
def fib(n, cutoff):
    if n <= cutoff:
        return fib_serial(n)
    a = fib(n - 1, cutoff)
    b = fib(n - 2, cutoff)
    return a.result() + b.result()


class Page:
    """A page reading the dashboard's event stream, as a browser would."""

    def __init__(self, d):
        self.conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
        self.conn.request("GET", "/events")
        self.resp = self.conn.getresponse()
        self.events = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            while True:
                line = self.resp.fp.readline()
                if not line:
                    return
                self.events += line.startswith(b"data:")
        except (OSError, ValueError):
            return

    def close(self):
        self.conn.close()


SIDES = ("off", "on", "again")  # "again": a second run without, the A/A control
ORDERS = list(itertools.permutations(SIDES))  # a round's order: each in as many rounds
TIMED = 3  # timed runs of a side in a round: its figure is the fastest (timeit's rule)


def measure(s, fn, reps, timed=TIMED):
    """Rounds of fn without a dashboard, with one open, and without again (the order going
    through ORDERS), the cyclic collector off: per side, (wall, cpu) lists, a round's figure
    the fastest of the side's `timed` runs, which follow an untimed one."""
    out = {side: ([], []) for side in SIDES}
    events = dropped = 0
    collecting = gc.isenabled()
    gc.disable()
    try:
        for r in range(-1, reps):  # round -1: the warm-up, not counted
            for side in ORDERS[r % len(ORDERS)]:
                d = page = None
                if side == "on":
                    d = tg.dashboard(s)
                    page = Page(d)
                try:
                    fn()  # settle: the timed runs follow a run of their own
                    runs = []
                    for _ in range(timed):
                        c0, t0 = time.process_time(), time.perf_counter()
                        fn()
                        runs.append((time.perf_counter() - t0, time.process_time() - c0))
                    wall, cpu = min(runs)
                finally:
                    if d is not None:
                        page.close()
                        events += page.events
                        d.model.tick()
                        dropped += sum(l["dropped"] for l in d.snapshot()["lanes"])
                        d.close()
                if r >= 0:
                    out[side][0].append(wall)
                    out[side][1].append(cpu)
    finally:
        if collecting:
            gc.enable()
    print(f"    ({fn.__name__}: {events} updates read, {dropped} records dropped by full rings)", flush=True)
    return out, events


def ratios(pairs, k, side="on"):
    """Per round, the largest side/off ratio of measure k (0 wall, 1 CPU) over the workloads, as
    % extra (side "again": what two runs of the same code differ by, the noise of a round)."""
    rounds = len(pairs[0]["off"][k])
    return [max(p[side][k][r] / p["off"][k][r] for p in pairs) * 100 - 100 for r in range(rounds)]


def figure(results, key, label, pairs, target, load, **details):
    extra, extra_cpu, noise = ratios(pairs, 0), ratios(pairs, 1), ratios(pairs, 0, "again")
    word, det = verdict(extra, target, "lower", load=load)
    s, sc, sn = summary(extra), summary(extra_cpu), summary(noise)
    results.append({"key": key, "label": label, "value": s["median"], "unit": "% extra",
                    "target": target, "better": "lower", "met": word == "met", "verdict": word,
                    "worst": det["worst"], "summary": s, "values": extra, "cpu_summary": sc,
                    "cpu_values": extra_cpu, "a_a_summary": sn, "a_a_values": noise,
                    "load": load, **details})
    print(f"  {label}: {spread_text(s, fmt='{:.1f}', unit=' %')} extra (target <= {target}) "
          f"{word.upper() if word == 'missed' else word}; CPU time "
          f"{spread_text(sc, fmt='{:.1f}', unit=' %')}; two runs without, the same way (A/A): "
          f"{spread_text(sn, fmt='{:.1f}', unit=' %')}; {load_text(load)}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    reps = len(ORDERS) * (1 if a.quick else 2)
    # Runs long enough for the sampler to drain the rings as it does in a steady state (a
    # dashboard opened for a 40 ms run would see its rings fill before its first drain).
    n = 100_000 if a.quick else 500_000
    print(f"dashboard cost: Python {sys.version.split()[0]}, GIL enabled {tg.gil_enabled()}, "
          f"{tg.usable_cpus()} CPUs, {'quick' if a.quick else 'full'}, {reps} rounds", flush=True)
    res = []
    with tg.Scheduler(2) as s:
        def spawned():
            s.compute(spawn_many(n))

        def lazy():
            s.compute([trivial(i) for i in range(n)])

        def fib28():  # ten computes a run: one takes ~50 ms, a few of the sampler's ticks
            for _ in range(10):
                assert s.compute(fib(28, 16)) == 317811

        m = Machine()
        sp, ev1 = measure(s, spawned, reps)
        lz, ev2 = measure(s, lazy, reps)
        load = m.stop()
        per = {f"{k}{'_dashboard' if side == 'on' else ''}": statistics.median(v[side][0]) / n * 1e9
               for k, v in (("spawned", sp), ("lazy", lz)) for side in ("off", "on")}
        figure(res, "trivial", "trivial tasks with a dashboard open (per round, the larger extra "
               "of spawned and lazy)", [sp, lz], 10, load, ns_per_task=per, tasks=n,
               events_read=ev1 + ev2, spawned=ratios([sp], 0), lazy=ratios([lz], 0))
        m = Machine()
        fb, ev3 = measure(s, fib28, reps)
        load = m.stop()
        figure(res, "fib_cutoff", "fib(28) cutoff 16 with a dashboard open", [fb], 2, load,
               seconds_off=statistics.median(fb["off"][0]) / 10, events_read=ev3)
    if a.out:
        write_results(a.out, {"figures": res}, a.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
