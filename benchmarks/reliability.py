"""The reliability figures (docs/reliability.md): cancelling a running compute, Ctrl-C
latency, wake-up latency after all workers fell asleep, a per-compute deadline, and many
submitter threads sharing one scheduler.

    python benchmarks/reliability.py [--quick] [--out FILE]

  1. cancel: 10,000 tasks of 10 ms on 2 workers, every node cancelled from another thread
     50 ms after compute() started: how long compute() takes to raise after the cancel call,
     tasks started after it returned (must be 0), and done + failed + cancelled (must be
     10,000 exactly);
  2. Ctrl-C (_thread.interrupt_main) 0.3 s into a lazy DAG, a deep fork-join, a chain of
     helping joins, and during close() while a task runs: seconds from the interrupt to the
     KeyboardInterrupt;
  3. wake-ups: rounds of "both workers asleep, then one compute() from another thread": the
     median and worst time for it to finish (a lost wake-up would never finish);
  4. deadline: compute(timeout=0.2) of 2,000 x 10 ms tasks: how late TimeoutError comes, and
     tasks started after it;
  5. 8 threads submitting random DAGs and fork-join trees to one scheduler: computes and
     tasks per second, every result checked, each node counted as run exactly once.
"""
from __future__ import annotations

import _thread
import argparse
import collections
import random
import signal
import statistics
import sys
import threading
import time

import taskgraph as tg
from _common import write_results


# ---------------------------------------------------------------------- 1. cancel
def sleepers(n):
    """n lazy tasks of 10 ms that count how many started: (nodes, started)."""
    started = [0]
    lock = threading.Lock()

    @tg.task
    def work(i):
        with lock:
            started[0] += 1
        time.sleep(0.01)
        return i

    return [work(i) for i in range(n)], started


def cancel_figure(n=10_000):
    nodes, started = sleepers(n)
    box = {}

    def canceller():
        time.sleep(0.05)
        box["t"] = time.perf_counter()
        box["returned"] = sum(node.cancel() for node in nodes)

    with tg.Scheduler(workers=2) as s:
        th = threading.Thread(target=canceller)
        th.start()
        try:
            s.compute(nodes)
        except tg.CancelledError:
            pass
        back = time.perf_counter()
        th.join()
        at_return = started[0]
        time.sleep(0.3)
        after = started[0] - at_return
    states = collections.Counter(node.state for node in nodes)
    return {"tasks": n, "returned_after_cancel_ms": (back - box["t"]) * 1e3,
            "started_after_return": after, "done": states["done"], "failed": states["failed"],
            "cancelled": states["cancelled"], "cancel_returned_true": box["returned"],
            "accounted": states["done"] + states["failed"] + states["cancelled"]}


# ---------------------------------------------------------------------- 2. Ctrl-C
@tg.task
def slow_leaf(n):
    time.sleep(0.002)
    return n


@tg.task(name="sfib")
def slow_fib(n):
    if n < 2:
        return slow_leaf(n).result()
    a, b = slow_fib(n - 1), slow_fib(n - 2)
    return a.result() + b.result()


@tg.task
def deep(d):
    return 0 if d == 0 else deep(d - 1).result() + (time.sleep(0.001) or 1)


def _interrupted(fn):
    """Seconds from _thread.interrupt_main (0.3 s into fn) to the KeyboardInterrupt."""
    box = {}

    def fire():
        box["t"] = time.perf_counter()
        _thread.interrupt_main()

    timer = threading.Timer(0.3, fire)
    timer.start()
    try:
        fn()
    except KeyboardInterrupt:
        back = time.perf_counter()
    else:
        raise AssertionError("no KeyboardInterrupt")
    timer.join()
    return back - box["t"]


def ctrl_c_figures(reps):
    out = {}
    cases = {"lazy DAG": lambda: [slow_leaf(i) for i in range(3000)],
             "deep fork-join": lambda: slow_fib(20),
             "chain of joins": lambda: deep(800)}
    for name, make in cases.items():
        lat = []
        for _ in range(reps):
            s = tg.Scheduler(workers=2)
            work = make()
            lat.append(_interrupted(lambda: s.compute(work)))
            s.close()
        out[name] = lat
    lat = []
    for _ in range(reps):  # inside close(), waiting for a task that does not cooperate
        s = tg.Scheduler(workers=2)
        release = threading.Event()

        @tg.task
        def stubborn():
            release.wait(30)
            return 1

        n = stubborn()
        th = threading.Thread(target=lambda: s.compute(n))
        th.start()
        while n.state != "running":
            time.sleep(0.001)
        lat.append(_interrupted(s.close))
        release.set()
        th.join()
        s.close()
    out["during close()"] = lat
    return {k: {"median_ms": statistics.median(v) * 1e3, "worst_ms": max(v) * 1e3, "reps": reps}
            for k, v in out.items()}


# ---------------------------------------------------------------------- 3. wake-ups
@tg.task
def one(x):
    return x + 1


def wake_figure(rounds):
    lat, go, done = [], threading.Event(), threading.Event()
    stop = [False]
    with tg.Scheduler(workers=2) as s:
        def submitter():
            while True:
                go.wait()
                go.clear()
                if stop[0]:
                    return
                s.compute(one(1))
                done.set()

        th = threading.Thread(target=submitter)
        th.start()
        for _ in range(rounds):
            while s._engine.sleeping() != s.workers:
                time.sleep(0.0002)
            t0 = time.perf_counter()
            go.set()
            if not done.wait(10):
                raise AssertionError("a submission never ran: lost wake-up")
            lat.append(time.perf_counter() - t0)
            done.clear()
        stop[0] = True
        go.set()
        th.join()
    lat.sort()
    return {"rounds": rounds, "median_ms": statistics.median(lat) * 1e3,
            "p99_ms": lat[int(0.99 * (len(lat) - 1))] * 1e3, "worst_ms": lat[-1] * 1e3}


# ---------------------------------------------------------------------- 4. deadline
def deadline_figure(n=2000, timeout=0.2):
    nodes, started = sleepers(n)
    with tg.Scheduler(workers=2) as s:
        t0 = time.perf_counter()
        try:
            s.compute(nodes, timeout=timeout)
        except TimeoutError:
            late = time.perf_counter() - t0 - timeout
        else:
            raise AssertionError("no TimeoutError")
        at_return = started[0]
        time.sleep(0.2)
        after = started[0] - at_return
    states = collections.Counter(node.state for node in nodes)
    return {"tasks": n, "timeout_s": timeout, "late_ms": late * 1e3,
            "started_after_return": after, "done": states["done"],
            "cancelled": states["cancelled"]}


# ---------------------------------------------------------------------- 5. submitters
RAN = []


@tg.task
def node_fn(tag, i, *inputs):
    RAN.append((tag, i))
    return i + sum(inputs)


def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


@tg.task(name="cfib")
def counted_fib(tag, n, cutoff):
    RAN.append((tag, n))
    if n <= max(cutoff, 1):
        return fib_serial(n)
    a, b = counted_fib(tag, n - 1, cutoff), counted_fib(tag, n - 2, cutoff)
    return a.result() + b.result()


def fib_calls(n, cutoff):
    return 1 if n <= max(cutoff, 1) else 1 + fib_calls(n - 1, cutoff) + fib_calls(n - 2, cutoff)


def submitters_figure(seconds, threads=8):
    RAN.clear()
    expected, errors, counts = [], [], [0] * threads
    stop_at = time.monotonic() + seconds

    def submitter(t, s):
        rng = random.Random(t)
        k = 0
        try:
            while time.monotonic() < stop_at:
                tag = (t, k)
                k += 1
                if rng.random() < 0.5:
                    n = rng.randint(20, 150)
                    nodes, want = [], []
                    for i in range(n):
                        ds = rng.sample(range(i), k=min(i, rng.randint(0, 3)))
                        nodes.append(node_fn(tag, i, *[nodes[d] for d in ds]))
                        want.append(i + sum(want[d] for d in ds))
                    if s.compute(nodes) != want:
                        raise AssertionError(f"wrong DAG result {tag}")
                    expected.append((tag, n))
                else:
                    n, c = rng.randint(8, 16), rng.randint(0, 6)
                    if s.compute(counted_fib(tag, n, c)) != fib_serial(n):
                        raise AssertionError(f"wrong fib {tag}")
                    expected.append((tag, fib_calls(n, c)))
                counts[t] += 1
        except BaseException as e:  # noqa: BLE001 - reported
            errors.append(repr(e))

    t0 = time.perf_counter()
    with tg.Scheduler(workers=2) as s:
        ths = [threading.Thread(target=submitter, args=(t, s)) for t in range(threads)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    secs = time.perf_counter() - t0
    ran = collections.Counter(tag for tag, _ in RAN)
    exact = not errors and all(ran[tag] == n for tag, n in expected)
    return {"threads": threads, "seconds": secs, "computes": sum(counts), "tasks": len(RAN),
            "tasks_per_s": len(RAN) / secs, "every_node_once_and_results_exact": exact,
            "errors": errors[:3]}


# ---------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    q = a.quick
    if threading.current_thread() is not threading.main_thread():
        sys.exit("run me as a script: Ctrl-C reaches the main thread only")
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # a background job: interrupt_main
        signal.signal(signal.SIGINT, signal.default_int_handler)  # would do nothing
    print(f"reliability figures: Python {sys.version.split()[0]}, GIL enabled {tg.gil_enabled()}, "
          f"{tg.usable_cpus()} CPUs, {'quick' if q else 'full'}", flush=True)
    res = {}
    res["cancel"] = c = cancel_figure()
    print(f"  cancel 10,000 x 10 ms after 50 ms: compute() raised {c['returned_after_cancel_ms']:.0f} "
          f"ms after the cancel call (target < 1,000 ms); started afterwards: "
          f"{c['started_after_return']}; done {c['done']:,} + failed {c['failed']:,} + cancelled "
          f"{c['cancelled']:,} = {c['accounted']:,}", flush=True)
    res["ctrl_c"] = cc = ctrl_c_figures(3 if q else 10)
    for k, v in cc.items():
        print(f"  Ctrl-C, {k}: median {v['median_ms']:.1f} ms, worst {v['worst_ms']:.1f} ms "
              f"(target < 1,000 ms; {v['reps']} runs)", flush=True)
    res["wake"] = w = wake_figure(200 if q else 1000)
    print(f"  wake-ups, {w['rounds']:,} rounds of both workers asleep then one compute from "
          f"another thread: median {w['median_ms']:.2f} ms, p99 {w['p99_ms']:.2f} ms, worst "
          f"{w['worst_ms']:.2f} ms (target < 1,000 ms)", flush=True)
    res["deadline"] = d = deadline_figure()
    print(f"  compute(timeout=0.2) of 2,000 x 10 ms: TimeoutError {d['late_ms']:.1f} ms late; "
          f"started afterwards {d['started_after_return']}; {d['done']} done, "
          f"{d['cancelled']:,} cancelled", flush=True)
    res["submitters"] = m = submitters_figure(5 if q else 30)
    print(f"  8 submitter threads for {m['seconds']:.0f} s: {m['computes']:,} computes, "
          f"{m['tasks']:,} tasks ({m['tasks_per_s']:,.0f}/s), every result exact and every node "
          f"run once: {m['every_node_once_and_results_exact']}", flush=True)
    if a.out:
        write_results(a.out, res, q)
    return res


if __name__ == "__main__":
    main()
