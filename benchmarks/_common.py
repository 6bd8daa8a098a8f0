"""What the benchmark scripts share: alternated timing, medians with their spread, the machine's
idle share beside every figure, the verdict on a target, and writing the results.

A figure is believed only with its conditions. Every timed comparison here runs its sides
alternately (`alternate`), at least 5 rounds, so that a drift of the machine lands on every side
alike; a figure is the median of its runs, printed with its min and max; and every measurement
records how much of the machine the other programs used meanwhile (`Machine`, from
/proc/stat), because these VMs are shared and a loaded machine moves a ratio by more than the
effects the targets are about. A target counts as met only when it holds in the median *and*
in the worst run (or that run stays above the floor, where the target gives one), on an idle
machine (`verdict`)."""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time

# A machine counts as idle for a figure when the other programs used at most this share of its
# CPU time while the figure was measured.
IDLE_OTHERS_MAX = 0.10
MIN_RUNS = 5


def environment(quick):
    """The facts a figure depends on, stored beside it."""
    import taskgraph as tg  # here, so that report.py (any interpreter) can use the verdicts
    return {"python": sys.version.split()[0], "gil_enabled": tg.gil_enabled(),
            "machine": platform.machine(), "cpus": tg.usable_cpus(), "quick": quick,
            "loadavg": os.getloadavg()}


def write_results(path, results, quick):
    """Writes {"env": ..., **results} to path as JSON (the directories made as needed)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump({"env": environment(quick), **results}, fh, indent=1)
    print(f"wrote {path}")


# ---------------------------------------------------------------------- the machine's load
def _cpu_ticks():
    """(total, idle) jiffies of all CPUs from /proc/stat, or None where it cannot be read."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal (guest time is counted in user already)
    total = sum(f[:8])
    return total, f[3] + f[4]


def _own_cpu():
    """CPU seconds of this process and of its children that ended and were waited for (a
    benchmark's own subprocesses are not other programs)."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


class Machine:
    """How the machine was used over a stretch of time: `Machine()` starts it, `.stop()` ends it
    and returns {"idle_share": the machine's idle CPU share, "others_share": the share used by
    other programs (all CPU time that was not idle and not this process's or its waited
    children's), "seconds"}. From /proc/stat (10 ms ticks: short stretches are coarse; a figure
    sums its runs) and this process's own CPU time. Empty where /proc/stat is missing."""

    def __init__(self):
        self.t0, self.ticks0, self.cpu0 = time.perf_counter(), _cpu_ticks(), _own_cpu()

    def stop(self):
        ticks, cpu = _cpu_ticks(), _own_cpu()
        out = {"seconds": time.perf_counter() - self.t0}
        if ticks is None or self.ticks0 is None:
            return out
        hz = os.sysconf("SC_CLK_TCK")
        # A stretch too short for the 10 ms ticks to say anything is extended, idle on our
        # side, until it spans 20 ticks (at most half a second): the machine's load around it.
        deadline = time.perf_counter() + 0.5
        while ticks[0] - self.ticks0[0] < 20 and time.perf_counter() < deadline:
            time.sleep(0.02)
            ticks, cpu = _cpu_ticks(), _own_cpu()
        total = ticks[0] - self.ticks0[0]
        if total <= 0:
            return out
        idle = ticks[1] - self.ticks0[1]
        ours = (cpu - self.cpu0) * hz
        out["idle_share"] = idle / total
        out["others_share"] = min(1.0, max(0.0, (total - idle - ours) / total))
        return out


def is_idle(load):
    """Whether a Machine().stop() record describes an idle machine (see IDLE_OTHERS_MAX)."""
    return load.get("others_share", 1.0) <= IDLE_OTHERS_MAX


def load_text(load):
    if "others_share" not in load:
        return "machine load unknown"
    return (f"idle {load['idle_share'] * 100:.0f}%, other programs {load['others_share'] * 100:.0f}%"
            f"{'' if is_idle(load) else ' (BUSY machine)'}")


def worker_cpu(s):
    """On-CPU seconds of each worker thread of taskgraph scheduler s so far (Linux: the first
    field of /proc/self/task/<tid>/schedstat), or None where that cannot be read. The busier
    worker's share of a run, set against the 1-worker run's, is a speed-up that other
    programs on a shared machine do not move (time spent waiting or descheduled is not in
    it: the wall-clock figure is still the one a target is judged by)."""
    st = worker_schedstat(s)
    return None if st is None else [cpu for cpu, _ in st]


def thread_schedstat(tid):
    """(on-CPU seconds, seconds ready to run without a CPU) of thread tid of this process so
    far: the first two fields of /proc/self/task/<tid>/schedstat; None where that cannot be
    read (not Linux, or the thread ended)."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as fh:
            f = fh.read().split()
        return int(f[0]) / 1e9, int(f[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def worker_schedstat(s):
    """(on-CPU seconds, seconds ready to run but waiting for a CPU) of each worker thread of
    scheduler s so far: the first two fields of /proc/self/task/<tid>/schedstat, or None where
    that cannot be read. Read them when the workers are parked (the kernel brings the fields
    up to date when a thread is switched out)."""
    import threading
    out = []
    for i in range(s.workers):
        th = [t for t in threading.enumerate() if t.name == f"taskgraph-{s.number}-w{i}"]
        st = thread_schedstat(th[0].native_id) if th else None
        if st is None:
            return None
        out.append(st)
    return out


# ---------------------------------------------------------------------- timing
def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def alternate(fns, reps, settle=False, timer=timed):
    """Runs the functions in turn, reps rounds, rotating the order each round (each follows
    each other equally often, so what one leaves behind, garbage or objects for this thread
    to free, lands on all of them alike); the list of times of each, as timer(fn) gives them
    (timer=lambda f: f() for functions that time a part of themselves). (Not gc.collect()
    between runs: on 3.13t a full collection makes the next large allocation burst trigger
    many more collections, which is not how a program runs.)

    settle: each timed call comes right after an untimed call of the same function. For
    functions that run on different threads (two schedulers, or a scheduler and a
    ThreadPoolExecutor): a run that follows the other pool's run finds its own threads'
    memory out of the caches, and pays for it. Measured (50,000 trivial children, one
    spawner): 1 worker 11.5 ms after its own run, 15.3 ms after the 2-worker run; the
    2-worker run 12.8 and 16.8 ms. Without settling, a round's ratio then swings with the
    order of its two runs (0.7 to 2.0 for the same code), and the spread measures the
    order, not the scheduler."""
    out = [[] for _ in fns]
    for r in range(reps):
        for j in range(len(fns)):
            k = (j + r) % len(fns)
            if settle:
                fns[k]()
            out[k].append(timer(fns[k]))
    return out


def summary(xs):
    """Median, min, max, the spread ((max - min) / median) and the runs of a list of figures."""
    med = statistics.median(xs)
    return {"median": med, "min": min(xs), "max": max(xs),
            "spread": (max(xs) - min(xs)) / med if med else 0.0, "runs": len(xs)}


def spread_text(s, fmt="{:.3g}", unit=""):
    return (f"{fmt.format(s['median'])}{unit} [{fmt.format(s['min'])}-{fmt.format(s['max'])}, "
            f"spread {s['spread'] * 100:.0f}%, {s['runs']} runs]")


def verdict(values, target, better, floor=None, load=None):
    """Whether a target is met by a list of per-run figures (ratios of alternated pairs, rates):
    the median must reach `target` and the worst run `floor` (the target itself where no floor
    is given), on an idle machine. Returns (word, details): word is "met", "missed", or
    "not judged (busy machine)" when the figure holds but the machine was not idle."""
    s = summary(values)
    worst = s["min"] if better == "higher" else s["max"]
    word, det = judge(s["median"], worst, target, better, floor, load)
    return word, {**det, "runs": s["runs"], "spread": s["spread"]}


def judge(median, worst, target, better, floor=None, load=None):
    """verdict() on a figure given as its median and its worst run (a figure derived from
    two runs' summaries, such as one interpreter's speed-up over another's)."""
    def holds(x, t):
        return x >= t if better == "higher" else x <= t
    ok = holds(median, target) and holds(worst, target if floor is None else floor)
    idle = load is None or is_idle(load)
    word = "met" if ok and idle else "missed" if not ok else "not judged (busy machine)"
    return word, {"target": target, "floor": floor, "better": better, "median": median,
                  "worst": worst, "idle": idle}


def judged(values, target, better, floor=None, load=None):
    """verdict() as one dict: {"verdict", "values", target, median, worst, ...}."""
    word, det = verdict(values, target, better, floor=floor, load=load)
    return {"verdict": word, "values": list(values), **det}


def verdict_cell(word):
    """A verdict as a table shows it: a miss in bold, a figure not judged in italics."""
    return {"met": "met", "missed": "**missed**"}.get(word, f"*{word}*")
