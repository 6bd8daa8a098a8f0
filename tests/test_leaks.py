"""No growth: thousands of computes, spawns, failures and cancellations leave no Node, Run,
result, argument or exception behind, and no extra reference on anything they touched.

The C extension owns Python objects across threads (docs/design/native.md); a missing
Py_DECREF shows here as a shared object's reference count that keeps climbing, or as a Node
that never dies. (tools/asan.sh runs these tests against the AddressSanitizer build too,
which catches the opposite mistake: a reference dropped once too often.)"""
import functools
import gc
import sys
import time
import weakref

import pytest

import taskgraph as tg
from helpers import scaled
from taskgraph._native import core

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.thread_unsafe(reason="counts process-wide objects, Runs and allocated blocks"),
]


class Payload:
    """An argument / result that supports weak references."""

    def __init__(self, v):
        self.v = v


SHARED = Payload("shared")           # passed to every task: its refcount must come back
ERROR = ValueError("always the same")  # raised by failing tasks


class Boom(Exception):
    pass


def _leaf(p, i):
    return Payload(i)


# The leak check below counts references to this Task, so its count must be the plain one: a
# Task of a top-level function is immortal (the first one, on 3.13t) or counted with deferred
# reference counting (3.14t), as CPython treats the function itself (csrc/py/task.c); a Task
# of a partial is neither.
leaf = tg.task(functools.partial(_leaf), name="leaf")


@tg.task
def fails(p, i):
    raise Boom(i)


@tg.task
def raises_shared(p):
    raise ERROR


@tg.task
def fan(p, n):
    kids = [leaf(p, i) for i in range(n)]
    return sum(k.result().v for k in kids)


@tg.task
def fan_one_fails(p, n):
    kids = [leaf(p, i) for i in range(n)] + [fails(p, -1)]
    return [k.result() for k in kids]


@tg.task
def combine(p, xs):
    return Payload(sum(x.v for x in xs))


def one_round(s, i, refs):
    """One of everything: a lazy DAG, fork-join spawns, a failure with fail-fast
    cancellations, a failing child, the same exception object raised again."""
    leaves = [leaf(SHARED, j) for j in range(8)]
    top = combine(SHARED, leaves)
    refs.extend(weakref.ref(n) for n in leaves + [top])
    out = s.compute(top)
    refs.append(weakref.ref(out))
    assert out.v == 28
    assert s.compute(fan(SHARED, 6)) == 15
    bad = fails(SHARED, i)
    cancelled = [leaf(SHARED, j) for j in range(20)]
    refs.extend(weakref.ref(n) for n in cancelled + [bad])
    with pytest.raises(Boom):
        s.compute(bad, *cancelled)
    with pytest.raises(Boom):
        s.compute(fan_one_fails(SHARED, 4))
    with pytest.raises(ValueError):
        s.compute(raises_shared(SHARED))
    # Raising one shared exception object stores each raise's traceback (and so this frame)
    # on it: plain Python behaviour, not ours to keep.
    ERROR.__traceback__ = None
    with tg.serial():
        assert leaf(SHARED, 1).result().v == 1


def settle():
    for _ in range(3):
        gc.collect()
        time.sleep(0.01)


def test_thousands_of_computes_leave_nothing_behind():
    rounds = scaled(1500, 150)
    with tg.Scheduler(workers=2) as s:
        refs = []
        for i in range(50):  # warm-up: caches, free lists, the first trace
            one_round(s, i, refs)
        settle()
        assert sys.getrefcount(leaf) < 1000  # mortal: its count shows a leak
        base = {"shared": sys.getrefcount(SHARED), "error": sys.getrefcount(ERROR),
                "task": sys.getrefcount(leaf), "objects": len(gc.get_objects()),
                "runs": core._live_runs()}
        refs = []
        for i in range(rounds):
            one_round(s, i, refs)
            if i % 100 == 0:
                with tg.trace() as tr:
                    one_round(s, i, [])
                assert len(tr.records) > 0
                del tr
        settle()
        alive = [r() for r in refs if r() is not None]
        assert not alive, f"{len(alive)} of {len(refs)} nodes/results still alive: {alive[:3]}"
        del refs, alive  # the test's own weak references are objects too
        settle()
        after = {"shared": sys.getrefcount(SHARED), "error": sys.getrefcount(ERROR),
                 "task": sys.getrefcount(leaf), "objects": len(gc.get_objects()),
                 "runs": core._live_runs()}
    for k in ("shared", "error", "task", "runs"):
        assert after[k] == base[k], (k, base[k], after[k])
    assert after["objects"] - base["objects"] < 2000, (base["objects"], after["objects"])


def test_many_spawns_and_cancellations_leave_no_node():
    refs = []

    @tg.task
    def child(i):
        return Payload(i)

    @tg.task
    def parent(n):
        kids = [child(i) for i in range(n)]
        refs.extend(weakref.ref(k) for k in kids)
        if n % 2:
            raise Boom(n)  # children not started are cancelled
        return len(kids)

    with tg.Scheduler(workers=2) as s:
        for n in range(scaled(400, 60)):
            if n % 2:
                with pytest.raises(Boom):
                    s.compute(parent(n))
            else:
                assert s.compute(parent(n)) == n
    settle()
    assert sum(r() is not None for r in refs) == 0


def test_done_callbacks_wait_and_await_leave_no_node():
    """A callback that refers to its node (a cycle through the node's callback list), one
    on a node that never runs, one removed, and what tg.wait, tg.as_completed and await
    register: every node dies, and SHARED's count comes back."""
    import asyncio
    base = sys.getrefcount(SHARED)
    refs = []
    with tg.Scheduler(2) as s, tg.use_scheduler(s):
        for i in range(200):
            ran = leaf(SHARED, i)
            ran.add_done_callback(lambda n, me=ran: me.key)  # node -> list -> lambda -> node
            never = leaf(SHARED, i)
            never.add_done_callback(lambda n, me=never: me)
            removed = leaf(SHARED, i)
            cb = removed.add_done_callback
            removed.add_done_callback(cb)
            removed.remove_done_callback(cb)
            waited = [leaf(SHARED, j) for j in range(3)]
            tg.wait(waited, return_when=tg.FIRST_COMPLETED)
            tg.wait(waited)
            listed = list(tg.as_completed([leaf(SHARED, j) for j in range(3)]))
            awaited = leaf(SHARED, i)
            assert asyncio.run(_await(awaited)).v == i
            s.compute(ran, removed)
            refs.extend(weakref.ref(n) for n in [ran, never, removed, awaited, *waited, *listed])
            del ran, never, removed, cb, waited, listed, awaited
    settle()
    alive = [r() for r in refs if r() is not None]
    assert alive == [], alive[:5]
    assert sys.getrefcount(SHARED) <= base + 1


async def _await(node):
    return await node
