"""The memory figures: intermediate results released during a run, bytes per lazy node, and a
soak with no growth (docs/reliability.md).

    python benchmarks/memory.py [--quick] [--out FILE]

Memory is measured from /proc/self/status: the peak is VmHWM after resetting it to the
current RSS (writing "5" to /proc/self/clear_refs) just before the part measured, or, where
that is not permitted, the largest VmRSS seen by a sampler thread (every millisecond).
Python-allocated bytes come from tracemalloc, in a second pass of its own (it slows
allocation and takes memory of its own).

  1. a lazy chain of 100,000 tasks, each making a fresh 1 MiB bytearray from the previous
     task's output, computed on 2 workers: peak RSS growth over the RSS before the run, the
     largest number of 1 MiB results alive at once, and those still alive when compute()
     returned; the target is a few MB, not 100 GB;
     fork-join: one task spawning 100,000 children of 1 MiB each, joining and dropping them
     one at a time: the same figures;
  2. a 1,000,000-node lazy DAG (each node depends on 0, 1 or 2 earlier ones): bytes per node
     while built (RSS, and tracemalloc's Python-allocated bytes), the peak during compute,
     after compute (the nodes hold their results, their inputs dropped) and after dropping
     them;
  3. a soak: 10 rounds of 100,000 spawned tasks, 10,000 of them failing (caught by their
     parent through result()), 10,000 lazy tasks cancelled because their dependency failed
     and spawned children cancelled by their parent's failure (fail fast); after each round
     RSS, sys.getallocatedblocks(), gc-tracked objects, live Nodes and Runs; the growth from
     round 2 to the last; then, under tracemalloc, the Python-allocated bytes still held
     after 3 more rounds (a reference leak shows there, whatever the allocator keeps).
"""
from __future__ import annotations

import argparse
import gc
import sys
import threading
import time
import tracemalloc

import taskgraph as tg
from _common import write_results
from taskgraph._native import core

MiB = 1 << 20


# ---------------------------------------------------------------------- measuring
def status(*fields):
    """Fields of /proc/self/status in bytes (VmRSS, VmHWM, ...)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in fields:
                out[k] = int(v.split()[0]) * 1024
    return out


def rss():
    return status("VmRSS")["VmRSS"]


class PeakRSS:
    """The peak RSS while the with block runs: VmHWM reset at entry (clear_refs), or a
    sampler thread where resetting is not permitted. .base: RSS at entry; .peak; .growth."""

    def __init__(self, sample_every=0.001):
        self.every = sample_every

    def __enter__(self):
        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.mode = "VmHWM"
        except OSError:
            self.mode = "sampled"
        self.base = rss()
        self._max = self.base
        self._stop = threading.Event()
        if self.mode == "sampled":
            self._th = threading.Thread(target=self._sample, daemon=True)
            self._th.start()
        return self

    def _sample(self):
        while not self._stop.wait(self.every):
            self._max = max(self._max, rss())

    def __exit__(self, *exc):
        self._stop.set()
        if self.mode == "sampled":
            self._th.join()
            self.peak = max(self._max, rss())
        else:
            self.peak = status("VmHWM")["VmHWM"]
        self.growth = self.peak - self.base
        return False


def settle():
    for _ in range(2):
        gc.collect()
        time.sleep(0.005)


# ---------------------------------------------------------------------- 1. 1 MiB results
FREED = []  # one entry per MB freed: list.append is atomic, unlike a counter


class MB(bytearray):
    """A 1 MiB result that counts its frees."""
    __slots__ = ()

    def __del__(self):
        FREED.append(None)


@tg.task(name="step")
def step(prev, i, peak):
    # results made so far: i (the chain runs one task at a time); alive: made minus freed
    alive = i - len(FREED)
    if alive > peak[0]:
        peak[0] = alive
    b = MB(prev) if prev is not None else MB(MiB)  # a fresh copy: nothing shared
    b[i % MiB] = (b[i % MiB] + 1) & 0xFF
    return b


def chain(n, workers=2):
    """A lazy chain of n tasks of 1 MiB each; its memory figures."""
    peak = [0]
    with tg.Scheduler(workers=workers) as s:
        s.compute(step(step(None, 0, [0]), 1, [0]))  # warm up: threads, caches
        settle()
        FREED.clear()
        node = step(None, 0, peak)
        for i in range(1, n):
            node = step(node, i, peak)
        with PeakRSS() as m:
            t0 = time.perf_counter()
            out = s.compute(node)
            secs = time.perf_counter() - t0
        alive_at_return = n - len(FREED) - 1  # the last result is returned: not counted
        time.sleep(0.1)
        alive_later = n - len(FREED) - 1
        assert len(out) == MiB
        del out, node
        settle()
        leaked = n - len(FREED)
    return {"tasks": n, "workers": workers, "result_bytes": MiB, "seconds": secs,
            "peak_rss_growth_mb": m.growth / MiB, "rss_mode": m.mode,
            "peak_results_alive": peak[0], "results_alive_at_return": alive_at_return,
            "results_alive_100ms_later": alive_later, "results_alive_after_gc": leaked}


@tg.task(name="make_mb")
def make_mb(i):
    b = MB(MiB)
    b[i % MiB] = 1
    return b


@tg.task(name="fork_join_mb")
def fork_join_mb(n):
    peak = 0
    base = len(FREED)
    for i in range(n):
        b = make_mb(i)
        assert len(b.result()) == MiB
        del b
        alive = i + 1 - (len(FREED) - base)
        if alive > peak:
            peak = alive
    return peak


def fork_join(n, workers=2):
    with tg.Scheduler(workers=workers) as s:
        s.compute(fork_join_mb(10))
        settle()
        FREED.clear()
        with PeakRSS() as m:
            t0 = time.perf_counter()
            peak = s.compute(fork_join_mb(n))
            secs = time.perf_counter() - t0
        alive_at_return = n - len(FREED)
        settle()
        leaked = n - len(FREED)
    return {"tasks": n, "workers": workers, "result_bytes": MiB, "seconds": secs,
            "peak_rss_growth_mb": m.growth / MiB, "rss_mode": m.mode,
            "peak_results_alive": peak, "results_alive_at_return": alive_at_return,
            "results_alive_after_gc": leaked}


# ---------------------------------------------------------------------- 2. bytes per node
@tg.task(name="src")
def src(a):
    return a


@tg.task(name="one")
def one(a):
    return (a + 1) & 0xFF  # small ints are shared: the results cost no memory of their own


@tg.task(name="two")
def two(a, b):
    return (a + b) & 0xFF


def build_dag(n):
    """n lazy nodes; node i depends on none (i % 3 == 0), on i - 1, or on i - 1 and i // 2."""
    nodes = []
    append = nodes.append
    for i in range(n):
        k = i % 3
        if k == 0:
            append(src(7))
        elif k == 1:
            append(one(nodes[i - 1]))
        else:
            append(two(nodes[i - 1], nodes[i // 2]))
    return nodes


def dag(n, workers=2):
    with tg.Scheduler(workers=workers) as s:
        s.compute(build_dag(1000))
        settle()
        base = rss()
        t0 = time.perf_counter()
        nodes = build_dag(n)
        build_s = time.perf_counter() - t0
        gc.collect()
        built = rss() - base
        list_bytes = sys.getsizeof(nodes)
        with PeakRSS() as m:
            t0 = time.perf_counter()
            out = s.compute(nodes)
            compute_s = time.perf_counter() - t0
        assert len(out) == n
        del out
        settle()
        after = rss() - base
        del nodes
        settle()
        dropped = rss() - base
        # tracemalloc's figure: Python-allocated bytes (objects, not the C core's records)
        tracemalloc.start()
        tm0 = tracemalloc.get_traced_memory()[0]
        nodes = build_dag(n)
        tm_built = tracemalloc.get_traced_memory()[0] - tm0
        s.compute(nodes)
        settle()
        tm_after = tracemalloc.get_traced_memory()[0] - tm0
        del nodes
        settle()
        tm_dropped = tracemalloc.get_traced_memory()[0] - tm0
        tracemalloc.stop()
    return {"nodes": n, "edges": sum(i % 3 for i in range(n)), "workers": workers,
            "build_seconds": build_s, "compute_seconds": compute_s,
            "list_bytes_per_node": list_bytes / n,
            "rss_bytes_per_node_built": built / n,
            "rss_bytes_per_node_built_without_list": (built - list_bytes) / n,
            "rss_bytes_per_node_peak_during_compute": (m.peak - base) / n, "rss_mode": m.mode,
            "rss_bytes_per_node_after_compute": after / n,
            "rss_bytes_per_node_after_drop": dropped / n,
            "traced_bytes_per_node_built": tm_built / n,
            "traced_bytes_per_node_after_compute": tm_after / n,
            "traced_bytes_per_node_after_drop": tm_dropped / n}


# ---------------------------------------------------------------------- 3. soak
class Boom(Exception):
    pass


@tg.task(name="kid")
def kid(i):
    if i % 10 == 0:
        raise Boom(i)
    return i


@tg.task(name="parent")
def parent(k):
    """Spawns k children; one in ten fails, caught here through result()."""
    kids = [kid(i) for i in range(k)]
    ok = failed = 0
    for c in kids:
        try:
            c.result()
            ok += 1
        except Boom:
            failed += 1
    return ok, failed


@tg.task(name="dependent")
def dependent(x, i):
    return i


DOOMED_KIDS = []  # the children of doomed tasks, to count the cancelled ones


@tg.task(name="doomed")
def doomed(k):
    """Spawns k children and fails at once: the children not started are cancelled."""
    DOOMED_KIDS.extend(kid(i * 10 + 1) for i in range(k))
    raise Boom("doomed")


def soak_round(s, spawned=100_000, failures=10_000, cancelled=10_000):
    k = 1000
    res = s.compute([parent(k) for _ in range(spawned // k)])
    ok = sum(r[0] for r in res)
    failed = sum(r[1] for r in res)
    assert failed == spawned // 10 and ok + failed == spawned
    # dependents of a failure: cancelled, never run
    bad = kid(0)
    deps = [dependent(bad, i) for i in range(cancelled)]
    try:
        s.compute(deps)
    except Boom:
        pass
    else:
        raise AssertionError("no failure")
    n_cancelled = sum(d.state == "cancelled" for d in deps)
    assert n_cancelled == cancelled, n_cancelled
    del bad, deps
    # fail fast: children of a failing parent that had not started
    for _ in range(10):
        try:
            s.compute(doomed(failures // 10))
        except Boom:
            pass
    ff = sum(c.state == "cancelled" for c in DOOMED_KIDS)
    extra = len(DOOMED_KIDS)
    DOOMED_KIDS.clear()
    return {"spawned": spawned + extra + 10, "failed": failed + 1 + 10,
            "cancelled": n_cancelled + ff}


def census():
    """Memory and objects alive now, after settling."""
    settle()
    objs = gc.get_objects()
    nodes = sum(type(o) is tg.Node for o in objs)
    out = {"rss_mb": rss() / MiB, "allocated_blocks": sys.getallocatedblocks(),
           "gc_objects": len(objs), "live_nodes": nodes, "live_runs": core._live_runs()}
    del objs
    return out


def soak(rounds, per_round=100_000, workers=2):
    rows = []
    totals = {"spawned": 0, "failed": 0, "cancelled": 0}
    t0 = time.perf_counter()
    with tg.Scheduler(workers=workers) as s:
        for r in range(rounds):
            c = soak_round(s, per_round, per_round // 10, per_round // 10)
            for key in totals:
                totals[key] += c[key]
            rows.append({"round": r + 1, **c, **census()})
        traced = traced_growth(s, per_round)
    secs = time.perf_counter() - t0
    first, last = rows[1], rows[-1]  # round 2: after the first round filled caches
    growth = {k: last[k] - first[k] for k in
              ("rss_mb", "allocated_blocks", "gc_objects", "live_nodes", "live_runs")}
    return {"rounds": rows, "totals": totals, "seconds": secs, "growth_round2_to_last": growth,
            "traced_growth_bytes": traced, "workers": workers}


def traced_growth(s, per_round, rounds=3):
    """Python-allocated bytes (tracemalloc, whatever the allocator keeps in RSS) still held
    after `rounds` more soak rounds than a baseline taken after one warm-up round."""
    tracemalloc.start()
    try:
        soak_round(s, per_round, per_round // 10, per_round // 10)
        settle()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds):
            soak_round(s, per_round, per_round // 10, per_round // 10)
        settle()
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    q = a.quick
    print(f"memory figures: Python {sys.version.split()[0]}, GIL enabled {tg.gil_enabled()}, "
          f"{tg.usable_cpus()} CPUs, {'quick' if q else 'full'}", flush=True)
    res = {}

    n = 10_000 if q else 100_000
    res["chain"] = c = chain(n)
    print(f"  chain of {n:,} x 1 MiB, 2 workers: peak RSS growth {c['peak_rss_growth_mb']:.1f} MB "
          f"({c['rss_mode']}), at most {c['peak_results_alive']} results alive at once, "
          f"{c['results_alive_at_return']} alive when compute returned "
          f"({c['results_alive_100ms_later']} 100 ms later), {c['results_alive_after_gc']} "
          f"after gc; {c['seconds']:.1f} s", flush=True)
    res["fork_join"] = f = fork_join(n)
    print(f"  fork-join, {n:,} children x 1 MiB joined and dropped one at a time: peak RSS "
          f"growth {f['peak_rss_growth_mb']:.1f} MB, at most {f['peak_results_alive']} alive, "
          f"{f['results_alive_at_return']} at return, {f['results_alive_after_gc']} after gc; "
          f"{f['seconds']:.1f} s", flush=True)

    n = 200_000 if q else 1_000_000
    res["dag"] = d = dag(n)
    print(f"  lazy DAG of {n:,} nodes ({d['edges']:,} edges): built {d['rss_bytes_per_node_built']:.0f} "
          f"B/node RSS ({d['rss_bytes_per_node_built_without_list']:.0f} without the list of "
          f"nodes), {d['traced_bytes_per_node_built']:.0f} B/node Python-allocated; peak during "
          f"compute {d['rss_bytes_per_node_peak_during_compute']:.0f} B/node; after compute "
          f"{d['rss_bytes_per_node_after_compute']:.0f} B/node RSS, "
          f"{d['traced_bytes_per_node_after_compute']:.0f} traced; dropped: "
          f"{d['traced_bytes_per_node_after_drop']:.1f} traced; build {d['build_seconds']:.2f} s, "
          f"compute {d['compute_seconds']:.2f} s", flush=True)

    rounds, per = (4, 50_000) if q else (10, 100_000)
    res["soak"] = so = soak(rounds, per)
    print(f"  soak, {rounds} rounds: {so['totals']['spawned']:,} spawned, "
          f"{so['totals']['failed']:,} failed, {so['totals']['cancelled']:,} cancelled, "
          f"{so['seconds']:.1f} s", flush=True)
    print("    round |  RSS MB | alloc. blocks | gc objects | Nodes | Runs")
    for r in so["rounds"]:
        print(f"    {r['round']:5d} | {r['rss_mb']:7.1f} | {r['allocated_blocks']:13,d} | "
              f"{r['gc_objects']:10,d} | {r['live_nodes']:5d} | {r['live_runs']:4d}")
    g = so["growth_round2_to_last"]
    print(f"    growth from round 2 to {rounds}: RSS {g['rss_mb']:+.1f} MB, blocks "
          f"{g['allocated_blocks']:+,d}, gc objects {g['gc_objects']:+,d}, Nodes "
          f"{g['live_nodes']:+d}, Runs {g['live_runs']:+d}; Python-allocated bytes (tracemalloc) "
          f"over 3 more rounds: {so['traced_growth_bytes'] / MiB:+.2f} MB", flush=True)

    if a.out:
        write_results(a.out, res, q)
    return res


if __name__ == "__main__":
    main()
