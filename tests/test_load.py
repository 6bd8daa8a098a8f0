"""Under load: no lost wake-ups (all workers asleep, then one submission from another thread,
1,000 times), and many submitter threads sharing one scheduler for 30 s with random DAGs and
fork-join trees: every result exact, every node run exactly once, no deadlock (pytest-timeout
dumps every thread's stack if one happens). Sizes shrink under the sanitizers and on the GIL
build (TASKGRAPH_STRESS_SECONDS overrides the duration)."""
import os
import random
import threading
import time

import pytest

import taskgraph as tg
from helpers import fib_calls, fib_serial
from taskgraph._native import FREE_THREADED_BUILD

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.thread_unsafe(reason="load tests own the machine: their bounds assume no other tests running"),
]
SANITIZED = bool(os.environ.get("TASKGRAPH_SANITIZED"))
STRESS_SECONDS = float(os.environ.get("TASKGRAPH_STRESS_SECONDS",
                                      30 if FREE_THREADED_BUILD and not SANITIZED else 5))


@tg.task
def one(x):
    return x + 1


def _all_asleep(s):
    return s._engine.sleeping() == s.workers


def test_no_lost_wake_up_after_all_workers_fell_asleep():
    rounds = 200 if SANITIZED else 1000
    go, done = threading.Event(), threading.Event()
    out = []
    stop = False

    with tg.Scheduler(workers=2) as s:
        def submitter():  # another thread: the one that wakes the sleepers
            while True:
                go.wait()
                go.clear()
                if stop:
                    return
                out.append(s.compute(one(len(out))))
                done.set()

        th = threading.Thread(target=submitter)
        th.start()
        worst = 0.0
        try:
            for r in range(rounds):
                deadline = time.monotonic() + 10
                while not _all_asleep(s):  # until both workers have gone to sleep again
                    assert time.monotonic() < deadline, "the workers never went to sleep"
                    time.sleep(0.0002)
                t0 = time.monotonic()
                go.set()
                assert done.wait(10), f"round {r}: the submission was never run (lost wake-up)"
                worst = max(worst, time.monotonic() - t0)
                done.clear()
        finally:
            stop = True
            go.set()
            th.join(10)
    assert out == list(range(1, rounds + 1))
    print(f"worst round {worst * 1e3:.2f} ms over {rounds} rounds")


# ---------------------------------------------------------------------- many submitters
@tg.task
def node_fn(tag, i, *inputs):
    """A DAG node: records that it ran, returns its index plus its inputs."""
    RAN.append((tag, i))
    return i + sum(inputs)


@tg.task(name="cfib")
def counted_fib(tag, n, cutoff):
    RAN.append((tag, n))
    if n <= max(cutoff, 1):
        return fib_serial(n)
    a, b = counted_fib(tag, n - 1, cutoff), counted_fib(tag, n - 2, cutoff)
    return a.result() + b.result()


RAN = []  # list.append is atomic on every build


def _random_dag(rng, tag):
    n = rng.randint(20, 150)
    nodes, want, deps = [], [], []
    for i in range(n):
        ds = rng.sample(range(i), k=min(i, rng.randint(0, 3)))
        nodes.append(node_fn(tag, i, *[nodes[d] for d in ds]))
        want.append(i + sum(want[d] for d in ds))
        deps.append(ds)
    sinks = [i for i in range(n) if rng.random() < 0.3] or [n - 1]
    # Only what the sinks need runs: the expected set of nodes run.
    needed, stack = set(), list(sinks)
    while stack:
        i = stack.pop()
        if i not in needed:
            needed.add(i)
            stack.extend(deps[i])
    return [nodes[i] for i in sinks], [want[i] for i in sinks], needed


def test_many_submitter_threads_share_one_scheduler():
    threads = 8
    errors, counts = [], [0] * threads
    RAN.clear()
    expected_runs = []  # (tag, frozenset of what must have run exactly once)
    lock = threading.Lock()
    stop_at = time.monotonic() + STRESS_SECONDS

    with tg.Scheduler(workers=2) as s:
        def submitter(t):
            rng = random.Random(1000 + t)
            k = 0
            try:
                while time.monotonic() < stop_at:
                    tag = (t, k)
                    k += 1
                    if rng.random() < 0.5:
                        sinks, want, needed = _random_dag(rng, tag)
                        assert s.compute(sinks) == want, tag
                        with lock:
                            expected_runs.append((tag, frozenset(needed)))
                    else:
                        n, cutoff = rng.randint(8, 16), rng.randint(0, 6)
                        assert s.compute(counted_fib(tag, n, cutoff)) == fib_serial(n), tag
                        with lock:
                            expected_runs.append((tag, fib_calls(n, cutoff)))
                    counts[t] += 1
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append((t, e))

        ths = [threading.Thread(target=submitter, args=(t,)) for t in range(threads)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(STRESS_SECONDS + 120)
        assert not any(th.is_alive() for th in ths), "a submitter never returned (deadlock)"
    assert not errors, errors[:3]
    assert all(c > 0 for c in counts)
    by_tag = {}
    for tag, i in RAN:
        by_tag.setdefault(tag, []).append(i)
    for tag, need in expected_runs:
        got = by_tag.get(tag, [])
        if isinstance(need, int):  # fork-join: how many tasks
            assert len(got) == need, (tag, len(got), need)
        else:  # a DAG: each needed node exactly once, nothing else
            assert sorted(got) == sorted(need), tag
    print(f"{sum(counts)} computes by {threads} threads in {STRESS_SECONDS:.0f} s, "
          f"{len(RAN)} tasks run, each exactly once")
