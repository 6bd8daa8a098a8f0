"""Tasks shared by several test modules."""
import taskgraph as tg


def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


@tg.task(name="fib")
def fib(n, cutoff=0):
    if n <= max(cutoff, 1):
        return fib_serial(n)
    a = fib(n - 1, cutoff)
    b = fib(n - 2, cutoff)
    return a.result() + b.result()


def fib_calls(n, cutoff=0):
    """How many tasks fib(n, cutoff) creates."""
    return 1 if n <= max(cutoff, 1) else 1 + fib_calls(n - 1, cutoff) + fib_calls(n - 2, cutoff)


def scaled(n, small):
    """n, or small under the sanitizer builds (make test-asan sets TASKGRAPH_SANITIZED)."""
    import os
    return small if os.environ.get("TASKGRAPH_SANITIZED") else n


@tg.task
def qsort(xs, cutoff=64):
    if len(xs) <= cutoff:
        return sorted(xs)
    pivot = xs[len(xs) // 2]
    lo = qsort([x for x in xs if x < pivot], cutoff)
    hi = qsort([x for x in xs if x > pivot], cutoff)
    mid = [x for x in xs if x == pivot]
    return lo.result() + mid + hi.result()
