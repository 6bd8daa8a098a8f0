"""Tasks that wait: spare workers against a pool of threads (docs/api/waiting.md).

    python benchmarks/waiting.py [--quick] [--runs R] [--out FILE]

  1. 200 calls that each wait 50 ms (time.sleep, a stand-in for an HTTP request), made as a new
     user would: ThreadPoolExecutor() (its default, CPUs + 4 threads), ThreadPoolExecutor(32),
     taskgraph.Executor() with submit and with map, and tasks on a tg.Scheduler(): declared
     with `with tg.blocking():` inside a fork-join task, and @tg.task(blocking=True) as a lazy
     DAG. Each run makes its executor or scheduler anew (its threads' start-up is in the
     figure, as for a user's script). Target: <= 0.5 s for taskgraph.Executor() (submit) and
     for the tasks (ThreadPoolExecutor(32): ~0.35 s);
  2. the same calls through asyncio's loop.run_in_executor, on ThreadPoolExecutor() and on
     taskgraph.Executor();
  3. fib(28) with a cutoff at 16 on tg.Scheduler(2) while 100 tasks that each wait 50 ms are
     in flight (a thread keeps computing batches of 100 such tasks on the same scheduler until
     fib is done), against plain recursive fib(28): target >= 1.8x; beside it fib alone. A
     round times thirty computes of fib back to back (one takes ~20 ms, less than a batch's
     50 ms: timed alone, a round would catch a batch's start or none by chance; a round of
     ten, ~0.2 s, moved by 20-50% with this machine's bursts of a few milliseconds, a round
     of thirty by 8-12% on a calm machine); and, as a control, fib beside the same waits made by plain
     threads (batches of 100 time.sleep calls through a ThreadPoolExecutor(100)): what the
     waits' own wake-ups cost fib on these cores. Beside each, the waits begun a second: the
     plain threads, which wait for a core once their sleep ends, begin fewer;
  4. 10,000 waiting tasks (0.2 ms each) on tg.Scheduler(2): the most spare threads alive at
     once (target: never above the bound, Scheduler.spares), and how long after the last task
     the spare threads are gone (target: within a second; the default spare_idle is 0.5 s).

Timed alternatives run alternately (_common.alternate), R rounds (default 5; --quick 3, with
fewer tasks); medians with min and max, and the machine's load beside each figure.
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import os
import statistics
import sys
import threading
import time

import taskgraph as tg
from _common import (Machine, alternate, load_text, spread_text, summary, thread_schedstat, verdict,
                     write_results)
from per_task import fib, fib_serial

WAIT = 0.05


def waits(i):
    time.sleep(WAIT)
    return i


@tg.task
def waits_declared(i, dt=WAIT):
    with tg.blocking():
        time.sleep(dt)
    return i


@tg.task(blocking=True)
def waits_always(i):
    time.sleep(WAIT)
    return i


@tg.task
def fan(n):
    return sum(k.result() for k in [waits_declared(i) for i in range(n)])


def through_executor(make, n):
    with make() as ex:
        assert sum(f.result() for f in [ex.submit(waits, i) for i in range(n)]) == n * (n - 1) // 2


def through_map(make, n):
    with make() as ex:
        assert sum(ex.map(waits, range(n))) == n * (n - 1) // 2


def through_tasks(n):
    with tg.Scheduler() as s:
        assert s.compute(fan(n)) == n * (n - 1) // 2


def through_lazy_dag(n):
    with tg.Scheduler() as s:
        assert sum(s.compute([waits_always(i) for i in range(n)])) == n * (n - 1) // 2


def through_asyncio(make, n):
    async def go(ex):
        loop = asyncio.get_running_loop()
        return await asyncio.gather(*[loop.run_in_executor(ex, waits, i) for i in range(n)])

    with make() as ex:
        assert sum(asyncio.run(go(ex))) == n * (n - 1) // 2


def calls(runs, n):
    sides = {
        "threadpool_default": lambda: through_executor(cf.ThreadPoolExecutor, n),
        "threadpool_32": lambda: through_executor(lambda: cf.ThreadPoolExecutor(32), n),
        "taskgraph_executor": lambda: through_executor(tg.Executor, n),
        "taskgraph_executor_map": lambda: through_map(tg.Executor, n),
        "tasks_blocking": lambda: through_tasks(n),
        "tasks_blocking_option": lambda: through_lazy_dag(n),
        "asyncio_threadpool_default": lambda: through_asyncio(cf.ThreadPoolExecutor, n),
        "asyncio_taskgraph_executor": lambda: through_asyncio(tg.Executor, n),
    }
    m = Machine()
    times = alternate(list(sides.values()), runs)
    load = m.stop()
    out = {"calls": n, "wait_s": WAIT, "load": load}
    print(f"{n} calls waiting {WAIT * 1000:.0f} ms each ({load_text(load)}):")
    for (name, _), ts in zip(sides.items(), times):
        out[name] = {**summary(ts), "values": list(ts)}
        print(f"  {name:28s} {spread_text(out[name], unit=' s')}")
    for name in ("taskgraph_executor", "taskgraph_executor_map", "tasks_blocking", "tasks_blocking_option"):
        word, det = verdict(times[list(sides).index(name)], 0.5, "lower", load=load)
        out[f"verdict_{name}"] = {"word": word, **det}
        print(f"  target <= 0.5 s, {name}: {word}")
    return out


def scheduler_threads(s):
    """{thread id: (kind, s on a CPU, s ready to run without one)} of the live threads of
    scheduler s, kind "workers" or "spares" (Linux's /proc/self/task/<tid>/schedstat)."""
    out = {}
    for th in threading.enumerate():
        kind = ("workers" if th.name.startswith(f"taskgraph-{s.number}-w") else
                "spares" if th.name.startswith(s._spare_prefix) else None)
        st = thread_schedstat(th.native_id) if kind and th.native_id else None
        if st is not None:  # (None: ended meanwhile)
            out[th.native_id] = (kind, *st)
    return out


def threads_delta(before, after):
    """{kind: [CPU s, run-queue s]} used between two scheduler_threads() readings by the threads
    alive at the second (one that ended meanwhile is left out; one that started counts from 0)."""
    out = {}
    for tid, (kind, cpu, queued) in after.items():
        _, cpu0, queued0 = before.get(tid, (kind, 0.0, 0.0))
        d = out.setdefault(kind, [0.0, 0.0])
        d[0] += cpu - cpu0
        d[1] += queued - queued0
    return out


def fib_with_waiting(runs, n=28, cutoff=16, inflight=100, per_round=30):
    """fib(n) (cutoff) on Scheduler(2) while a thread keeps `inflight` waiting tasks going on
    the same scheduler; and fib alone; against plain recursive fib(n). Each figure of a round
    is the time of `per_round` computes back to back."""
    with tg.Scheduler(2) as s, cf.ThreadPoolExecutor(inflight) as pool:
        s.compute(fib(20, cutoff))
        list(pool.map(time.sleep, [0.001] * inflight))  # its threads started
        batches = [0, 0]  # batches of waits run beside fib: tasks, plain threads

        threads = {}  # per side: per round, the scheduler's threads' CPU and run-queue seconds

        def alone(side="alone"):
            c0, t0 = scheduler_threads(s), time.perf_counter()
            for _ in range(per_round):
                assert s.compute(fib(n, cutoff)) == fib_serial_value
            t, c1 = time.perf_counter() - t0, scheduler_threads(s)
            threads.setdefault(side, []).append(threads_delta(c0, c1))
            return t

        def serial():
            t0 = time.perf_counter()
            for _ in range(per_round):
                fib_serial(n)
            return time.perf_counter() - t0

        def beside(batch, side):  # times fib only (not the start of the waiting or its end)
            stop = threading.Event()

            def keep_going():
                while not stop.is_set():
                    batch()

            th = threading.Thread(target=keep_going)
            th.start()
            time.sleep(WAIT / 2)  # the first batch is waiting
            try:
                return alone(side)
            finally:
                stop.set()
                th.join()

        def tasks_batch():
            s.compute([waits_declared(i) for i in range(inflight)])
            batches[0] += 1

        def with_waits():
            return beside(tasks_batch, "with_waiting")

        def threads_batch():
            list(pool.map(time.sleep, [WAIT] * inflight))
            batches[1] += 1

        def with_thread_waits():
            return beside(threads_batch, "with_thread_waits")

        fib_serial_value = fib_serial(n)
        m = Machine()
        t_serial, t_alone, t_waits, t_threads = alternate(
            [serial, alone, with_waits, with_thread_waits], runs, timer=lambda f: f())
        load = m.stop()
        st = s.spare_stats()
    speed = [a / b for a, b in zip(t_serial, t_waits)]
    # What the waiting itself costs fib, per round (the machine's drift cancels): alone over with.
    kept = [a / b for a, b in zip(t_alone, t_waits)]
    out = {"n": n, "cutoff": cutoff, "inflight": inflight, "computes_per_round": per_round, "load": load,
           "serial": summary(t_serial), "alone": summary(t_alone), "with_waiting": summary(t_waits),
           "speedup_with_waiting": {**summary(speed), "values": speed},
           "speedup_alone": summary([a / b for a, b in zip(t_serial, t_alone)]),
           "with_over_alone": {**summary(kept), "values": kept},
           "thread_waits_over_alone": summary([a / b for a, b in zip(t_alone, t_threads)]),
           "threads_s": threads,
           "waiting_batches": batches[0], "thread_batches": batches[1],
           # Waits begun per second of the sides' timed fib (the batches run a little longer:
           # a side starts them WAIT/2 before fib and lets the last one finish).
           "waits_per_s": inflight * batches[0] / sum(t_waits),
           "thread_waits_per_s": inflight * batches[1] / sum(t_threads), "spare_stats": st}
    word, det = verdict(speed, 1.8, "higher", load=load)
    out["verdict"] = {"word": word, **det}
    print(f"fib({n}) cutoff {cutoff} on 2 workers with {inflight} waiting tasks in flight, "
          f"{per_round} computes a round ({load_text(load)}):")
    print(f"  serial {spread_text(out['serial'], unit=' s')}")
    print(f"  alone {spread_text(out['alone'], unit=' s')}, speed-up "
          f"{spread_text(out['speedup_alone'], fmt='{:.2f}', unit='x')}")
    print(f"  with waiting {spread_text(out['with_waiting'], unit=' s')}, speed-up "
          f"{spread_text(out['speedup_with_waiting'], fmt='{:.2f}', unit='x')} "
          f"({batches[0]} batches of {inflight}; peak {st['peak_threads']} spare threads)")
    print(f"  speed kept beside the waiting (alone's time over with's, per round): "
          f"{spread_text(out['with_over_alone'], fmt='{:.2f}')}, {out['waits_per_s']:.0f} waits "
          f"begun a second; beside the same waits in plain threads (ThreadPoolExecutor({inflight})): "
          f"{spread_text(out['thread_waits_over_alone'], fmt='{:.2f}')}, "
          f"{out['thread_waits_per_s']:.0f} waits begun a second")
    for side, what in (("alone", "alone"), ("with_waiting", "beside the waiting tasks"),
                       ("with_thread_waits", "beside the plain threads' waits")):
        parts = []
        for kind in ("workers", "spares"):
            rounds_ = [r[kind] for r in threads.get(side, []) if kind in r]
            if rounds_:
                cpu = statistics.median(r[0] for r in rounds_) * 1e3
                queued = statistics.median(r[1] for r in rounds_) * 1e3
                parts.append(f"{kind} {cpu:.0f} ms on a CPU, {queued:.0f} ms ready without one")
        if parts:
            print(f"  the scheduler's threads, median of a round, {what}: " + "; ".join(parts))
    print(f"  target >= 1.8x: {word}")
    return out


def bound_and_retirement(n):
    """n waiting tasks (0.2 ms each) on Scheduler(2): peak spare threads, and the time from the
    end of the compute until every spare thread is gone."""
    with tg.Scheduler(2) as s:
        prefix = f"taskgraph-{s.number}-s"

        def alive():
            return sum(1 for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive())

        peak, stop = [0], threading.Event()

        def watch():
            while not stop.is_set():
                peak[0] = max(peak[0], alive())
                time.sleep(0.0005)

        w = threading.Thread(target=watch)
        w.start()
        t0 = time.perf_counter()
        s.compute([waits_declared(i, 0.0002) for i in range(n)])
        t_run = time.perf_counter() - t0
        stop.set()
        w.join()
        t0 = time.perf_counter()
        while alive() and time.perf_counter() - t0 < 30:
            time.sleep(0.001)
        gone = time.perf_counter() - t0
        st = s.spare_stats()
    out = {"tasks": n, "bound": st["limit"], "peak_seen": peak[0], "peak_counted": st["peak_threads"],
           "peak": max(peak[0], st["peak_threads"]), "run_s": t_run, "gone_after_s": gone, "started": st["started"], "retired": st["retired"]}
    ok = max(peak[0], st["peak_threads"]) <= st["limit"] and gone <= 1.0
    out["verdict"] = "met" if ok else "missed"
    print(f"{n} waiting tasks: peak {max(peak[0], st['peak_threads'])} spare threads (bound "
          f"{st['limit']}), run {t_run:.2f} s, spares gone {gone:.2f} s after the last task: "
          f"{out['verdict']}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    runs = a.runs or (3 if a.quick else 5)
    here = os.path.dirname(os.path.abspath(__file__))
    out = a.out or os.path.join(here, "results", f"waiting-{sys.version_info[0]}{sys.version_info[1]}"
                                f"{'t' if not tg.gil_enabled() else ''}.json")
    res = {"calls": calls(runs, 200),
           "fib_with_waiting": fib_with_waiting(runs, 24 if a.quick else 28, 12 if a.quick else 16),
           "bound": bound_and_retirement(2_000 if a.quick else 10_000)}
    write_results(out, res, a.quick)


if __name__ == "__main__":
    main()
