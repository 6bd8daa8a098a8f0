"""The cutoff of recursive fork-join (docs/performance.md): fib(28) with cutoffs from 2 to 22,
c1 = T1 / T_serial on 1 worker and the speed-up over plain recursion on 2 workers (median of 5
alternating runs).

    python benchmarks/cutoff.py
"""
import statistics

import taskgraph as tg
from per_task import alternate, fib, fib_serial


def calls(n, cutoff):
    return 1 if n <= max(cutoff, 1) else 1 + calls(n - 1, cutoff) + calls(n - 2, cutoff)


def main(n=28):
    m = statistics.median
    with tg.Scheduler(workers=2) as s2, tg.Scheduler(workers=1) as s1:
        s2.compute(fib(20, 10))
        s1.compute(fib(20, 10))
        print(f"fib({n}): cutoff, tasks, c1 (1 worker), speed-up (2 workers)")
        for cutoff in (2, 6, 10, 14, 18, 22):
            ts, t1, t2 = alternate([lambda: fib_serial(n), lambda: s1.compute(fib(n, cutoff)),
                                    lambda: s2.compute(fib(n, cutoff))], 5)
            print(f"  cutoff {cutoff:2}: {calls(n, cutoff):7} tasks, c1 {m(t1) / m(ts):.2f}, "
                  f"speed-up {m(ts) / m(t2):.2f}")


if __name__ == "__main__":
    main()
