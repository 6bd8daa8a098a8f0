"""What one fork-join task costs, piece by piece, measured inside a worker thread.

py-spy (0.4.3) records no Python frames from free-threaded CPython 3.13 and perf has no
hardware counters on these VMs, so this script is the profile behind docs/benchmarks.md: it
times each step that spawning, running and joining a task performs, in a loop of 20,000, on
the interpreter that runs it (median of 5 loops, ns per step).

    python benchmarks/primitives.py
"""
import statistics
import sys
import time

import taskgraph as tg
from taskgraph import _context
from taskgraph._native import ffi, lib
from taskgraph.node import Node, scan_nodes

N = 20_000


def f():
    return 1


def plain_call():
    f()


@tg.task
def probe():
    w = _context.mode()
    pool = w.pool
    node = Node((f, (), {}, None, ffi.new("tg_task *"), None, None, None, None, None, None,
                 False, "f", 0, None))
    h = ffi.new_handle(node)
    steps = {
        "a Python call (baseline)": plain_call,
        "ContextVar read (which worker am I?)": _context.mode,
        "build a Node (15-slot list)": lambda: Node((f, (), {}, None, None, None, None, None, None,
                                                     None, None, False, "f", 0, None)),
        "allocate its C task record (ffi.new)": lambda: ffi.new("tg_task *"),
        "scan two int arguments for Nodes": lambda: scan_nodes((1, 2), {}),
        "cffi handle for the Node": lambda: ffi.new_handle(node),
        "back from the handle": lambda: ffi.from_handle(h),
        "one cffi call (tg_task_state)": lambda: lib.tg_task_state(node[4]),
        "one cffi call (tg_pool_queued)": lambda: lib.tg_pool_queued(pool),
    }
    out = {}
    for name, fn in steps.items():
        xs = []
        for _ in range(5):
            t0 = time.perf_counter_ns()
            for _ in range(N):
                fn()
            xs.append((time.perf_counter_ns() - t0) / N)
        out[name] = statistics.median(xs)
    return out


def main():
    print(f"cost of the steps of a task, inside a worker (Python {sys.version.split()[0]}, "
          f"GIL enabled: {tg.gil_enabled()}); ns per step incl. a lambda call (~30-60 ns)")
    with tg.Scheduler(workers=1) as s:
        for name, ns in s.compute(probe()).items():
            print(f"  {name:40} {ns:7.0f} ns")


if __name__ == "__main__":
    main()
