"""Cost of the C deque through the test-only cffi binding (tests/core/_binding.py: the core
compiled in cffi's API mode), against collections.deque.

Prints nanoseconds per operation for:
  push+pop      owner pushes one item and pops it back (one thread);
  push->steal   one thread pushes N items while another steals them (two threads);
and the same loops with collections.deque (append/pop, append/popleft). Each figure is the
median of 5 runs; min and max are shown. Usage: python -X gil=0 benchmarks/deque_binding.py [N]
(importing cffi 1.17 turns the GIL on in CPython 3.13t unless it is forced off).
"""
import collections
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "core"))
import _binding  # noqa: E402

_mod = _binding.build(_binding.default_build_dir())
ffi, lib = _mod.ffi, _mod.lib


def gil_enabled():
    probe = getattr(sys, "_is_gil_enabled", None)
    return True if probe is None else probe()


def push_pop_c(n):
    d = lib.tg_deque_new(64)
    out = ffi.new("uint64_t *")
    push, pop = lib.tg_deque_push, lib.tg_deque_pop
    t0 = time.perf_counter_ns()
    for i in range(n):
        push(d, i)
        pop(d, out)
    dt = time.perf_counter_ns() - t0
    lib.tg_deque_free(d)
    return dt / n


def push_pop_py(n):
    d = collections.deque()
    push, pop = d.append, d.pop
    t0 = time.perf_counter_ns()
    for i in range(n):
        push(i)
        pop()
    return (time.perf_counter_ns() - t0) / n


def push_steal_c(n):
    d = lib.tg_deque_new(64)
    got = [0]

    def thief():
        out = ffi.new("uint64_t *")
        steal, ok = lib.tg_deque_steal, lib.TG_OK
        k = 0
        while k < n:
            if steal(d, out) == ok:
                k += 1
        got[0] = k

    th = threading.Thread(target=thief)
    push = lib.tg_deque_push
    t0 = time.perf_counter_ns()
    th.start()
    for i in range(n):
        push(d, i)
    th.join()
    dt = time.perf_counter_ns() - t0
    assert got[0] == n
    lib.tg_deque_free(d)
    return dt / n


def push_steal_py(n):
    d = collections.deque()
    got = [0]

    def thief():
        popleft = d.popleft
        k = 0
        while k < n:
            try:
                popleft()
                k += 1
            except IndexError:
                pass
        got[0] = k

    th = threading.Thread(target=thief)
    push = d.append
    t0 = time.perf_counter_ns()
    th.start()
    for i in range(n):
        push(i)
    th.join()
    dt = time.perf_counter_ns() - t0
    assert got[0] == n
    return dt / n


def measure(fn, n, runs=5):
    xs = [fn(n) for _ in range(runs)]
    return statistics.median(xs), min(xs), max(xs)


def main(argv):
    n = int(argv[1]) if len(argv) > 1 else 200_000
    print(f"deque through the test cffi binding vs collections.deque: {n} items, median of 5 "
          f"(Python {sys.version.split()[0]}, GIL enabled: {gil_enabled()})")
    rows = [
        ("push+pop (1 thread)", push_pop_c, push_pop_py),
        ("push->steal (2 threads)", push_steal_c, push_steal_py),
    ]
    print(f"{'operation':26} {'tg_deque ns/item':>22} {'collections.deque ns/item':>28}")
    for name, c, py in rows:
        mc, lo_c, hi_c = measure(c, n)
        mp, lo_p, hi_p = measure(py, n)
        print(f"{name:26} {mc:8.0f} ({lo_c:5.0f}-{hi_c:5.0f}) {mp:14.0f} ({lo_p:5.0f}-{hi_p:5.0f})")


if __name__ == "__main__":
    main(sys.argv)
