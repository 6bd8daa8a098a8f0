"""Work inflation (docs/performance.md, "Work inflation"): programs whose work grows when
they run on two workers, each next to its free-threading-friendly rewrite.

For each program: the time on 1 and on 2 workers (the speed-up), the work recorded by a trace
on 1 and on 2 workers (the inflation, Trace.inflation), and the same search in plain threads
(1 thread doing everything against 2 threads doing half each), so that what is taskgraph's and
what is CPython's can be told apart. Medians of alternating runs.

    python benchmarks/inflation.py [--quick] [--out FILE]
"""
import argparse
import hashlib
import inspect
import statistics
import sys
import threading
import time

import taskgraph as tg
from _common import write_results


# ------------------------------------------------------------------ the programs
def _import_programs():
    """inflation_programs, loaded from its .pyc, compiled here first if need be: a program's
    constants are immortal only in code loaded from a .pyc (inflation_programs' docstring)."""
    import compileall
    import importlib
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inflation_programs.py")
    compileall.compile_file(path, quiet=2)
    return importlib.import_module("inflation_programs")


P = _import_programs()
N, FULL = P.N, P.FULL
queens_serial, queens, queens_serial_d, queens_d = (P.queens_serial, P.queens,
                                                      P.queens_serial_d, P.queens_d)
queens_serial_lit, queens_lit = P.queens_serial_lit, P.queens_lit
ROOT_CHILDREN, uts_count, uts, uts_nested_helper = (P.ROOT_CHILDREN, P.uts_count, P.uts,
                                                    P.uts_nested_helper)
# The same UTS source, for the forms that build it with exec() (their constants stay mortal).
UTS_SRC = inspect.getsource(P.uts_count) + "\n\n" + inspect.getsource(P.uts)


def run_threads(targets):
    """Runs each callable in a thread of its own: (wall seconds, CPU seconds summed over the
    threads). The CPU time is the work inflation's witness that a loaded machine cannot fake:
    a thread waiting for its core is not charged, one stalled on a contended cache line is."""
    cpu = [0.0] * len(targets)

    def run(i):
        c0 = time.thread_time()
        targets[i]()
        cpu[i] = time.thread_time() - c0
    ths = [threading.Thread(target=run, args=(i,)) for i in range(len(targets))]
    t0 = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    return time.perf_counter() - t0, sum(cpu)


def queens_threads(serial, nthreads):
    """The same search in plain threads: the first-row columns dealt out to nthreads."""
    def part(t):
        for c in range(t, N, nthreads):
            bit = 1 << c
            serial(bit, (bit << 1) & FULL, bit >> 1)
    return run_threads([lambda t=t: part(t) for t in range(nthreads)])


def uts_factory():
    """Everything defined inside a function (a common way to build a benchmark)."""
    ns = {"tg": tg, "ROOT_CHILDREN": ROOT_CHILDREN}
    body = "def _f():\n" + "\n".join("    " + ln for ln in UTS_SRC.splitlines()) + "\n    return uts\n"
    exec(compile(body, "<factory>", "exec"), ns)
    return ns["_f"]()


def uts_exec():
    """The module-level source run through exec() into a plain dict."""
    ns = {"tg": tg, "ROOT_CHILDREN": ROOT_CHILDREN}
    exec(compile(UTS_SRC, "<exec>", "exec"), ns)
    return ns["uts"]


# ------------------------------------------------------------------ hashing
BLOCK = b"x" * 256


def hash_loop(new, n):
    for _ in range(n):
        new(BLOCK).digest()


def hash_threads(new, nthreads, total):
    return run_threads([lambda: hash_loop(new, total // nthreads)] * nthreads)


# ------------------------------------------------------------------ measuring
def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def alternate(fns, reps):
    out = [[] for _ in fns]
    for r in range(reps):
        for j in range(len(fns)):
            k = (j + r) % len(fns)
            out[k].append(timed(fns[k]))
    return [statistics.median(x) for x in out]


def alternate_threads(one, two, reps):
    """Plain threads, 1 against 2, alternating: (wall speed-up, CPU-time inflation), medians."""
    runs = {1: [], 2: []}
    for r in range(reps):
        for k in ((1, 2) if r % 2 == 0 else (2, 1)):
            runs[k].append((one if k == 1 else two)())
    m = statistics.median
    return (m(w for w, _ in runs[1]) / m(w for w, _ in runs[2]),
            m(c for _, c in runs[2]) / m(c for _, c in runs[1]))


def measure_task(name, make_node, s1, s2, reps, threads=None):
    """1- and 2-worker times, the traces' work on each (inflation), plain threads if given."""
    t1, t2 = alternate([lambda: s1.compute(make_node()), lambda: s2.compute(make_node())], reps)
    traces = {}
    for w, s in ((1, s1), (2, s2)):
        best = None
        for _ in range(2):
            with tg.trace() as tr:
                s.compute(make_node())
            if best is None or tr.work < best.work:
                best = tr
        traces[w] = best
    row = {"program": name, "t1_s": t1, "t2_s": t2, "speedup": t1 / t2,
           "work1_ms": traces[1].work / 1e6, "work2_ms": traces[2].work / 1e6,
           "inflation": traces[2].inflation(traces[1])}
    if threads is not None:
        row["threads_speedup"], row["threads_cpu_inflation"] = alternate_threads(
            lambda: threads(1), lambda: threads(2), reps)
    line = (f"  {name:34} 1w {t1 * 1e3:7.1f} ms  2w {t2 * 1e3:7.1f} ms  speed-up "
            f"{row['speedup']:.2f}  work {row['work1_ms']:.0f} -> {row['work2_ms']:.0f} ms "
            f"(inflation {row['inflation']:.2f})")
    if threads is not None:
        line += (f"  threads {row['threads_speedup']:.2f} (CPU-time inflation "
                 f"{row['threads_cpu_inflation']:.2f})")
    print(line, flush=True)
    return row, traces


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default="benchmarks/results/inflation.json")
    p.add_argument("--traces", default=None, help="directory to save the queens traces in")
    a = p.parse_args(argv)
    reps = 2 if a.quick else 3
    print(f"Work inflation, {sys.version.split()[0]}, GIL enabled: {tg.gil_enabled()}")
    rows = []
    with tg.Scheduler(workers=1) as s1, tg.Scheduler(workers=2) as s2:
        assert s1.compute(queens()) == s1.compute(queens_d()) == 14200
        row, trs = measure_task("12-queens, module-level FULL", queens, s1, s2, reps,
                                lambda k: queens_threads(queens_serial, k))
        rows.append(row)
        if a.traces:
            import os
            os.makedirs(a.traces, exist_ok=True)
            trs[1].save(os.path.join(a.traces, "queens-1w.tgtrace"))
            trs[2].save(os.path.join(a.traces, "queens-2w.tgtrace"))
        rows.append(measure_task("12-queens, FULL as default argument", queens_d, s1, s2, reps,
                                 lambda k: queens_threads(queens_serial_d, k))[0])
        assert s1.compute(queens_lit()) == 14200
        rows.append(measure_task("12-queens, FULL as a literal", queens_lit, s1, s2, reps,
                                 lambda k: queens_threads(queens_serial_lit, k))[0])
        fact, ex = uts_factory(), uts_exec()
        assert s1.compute(uts()) == s1.compute(uts_nested_helper()) == s1.compute(fact()) \
            == s1.compute(ex())
        for name, t in (("UTS, module level", uts), ("UTS, nested helper", uts_nested_helper),
                        ("UTS, all inside a factory", fact), ("UTS, exec() into a dict", ex)):
            rows.append(measure_task(name, t, s1, s2, reps)[0])
    total = 20000 if a.quick else 100000
    for name, new in (("hashlib.sha1 (OpenSSL)", hashlib.sha1),
                      ("hashlib.blake2b (built in)", hashlib.blake2b)):
        sp, infl = alternate_threads(lambda: hash_threads(new, 1, total),
                                     lambda: hash_threads(new, 2, total), reps)
        rows.append({"program": name, "threads_speedup": sp, "threads_cpu_inflation": infl})
        print(f"  {name:34} 2 threads against 1: speed-up {sp:.2f}, CPU-time inflation "
              f"{infl:.2f}", flush=True)
    write_results(a.out, {"inflation": rows}, a.quick)


if __name__ == "__main__":
    main()
