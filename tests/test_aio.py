"""`await node` in asyncio: gather, wait_for cancelling the node, asyncio.timeout, refusal
inside a task, and the event loop never blocked while a node runs."""
import asyncio
import sys
import threading

import pytest

import taskgraph as tg
from future_tasks import add, fail, hold

pytestmark = pytest.mark.timeout(120)


@tg.task
def awaits_inside():
    n = add(1, 1)  # spawned

    async def inner():
        return await n
    return asyncio.run(inner())


def test_await_a_lazy_graph_and_gather(sched):
    async def main():
        with tg.use_scheduler(sched):
            x = add(1, 2)
            return await add(x, 10), await asyncio.gather(add(1, 1), add(2, 2), x)

    assert asyncio.run(main()) == (13, [2, 4, 3])


def test_await_raises_the_tasks_own_exception(sched):
    async def main():
        with tg.use_scheduler(sched):
            await fail("no good")

    with pytest.raises(ValueError, match="no good"):
        asyncio.run(main())


def test_await_never_blocks_the_loop(sched):
    """A heartbeat coroutine keeps ticking while a node that waits for it runs."""
    ev = threading.Event()
    ticks = []

    async def heartbeat():
        while True:
            ticks.append(1)
            if len(ticks) == 5:
                ev.set()  # the node finishes only after the loop ticked 5 times
            await asyncio.sleep(0.001)

    async def main():
        with tg.use_scheduler(sched):
            beat = asyncio.ensure_future(heartbeat())
            value = await hold(ev, "v")
            beat.cancel()
            return value

    assert asyncio.run(main()) == "v"
    assert len(ticks) >= 5


@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_wait_for_cancels_the_node(sched):
    ev = threading.Event()
    n = hold(ev)
    # No spares: the blocked tasks are to hold every worker (with spares, a task waiting on an
    # event gets one, and n would start: tests/test_blocking.py).
    held = tg.Scheduler(sched.workers, spares=0)

    async def main():
        with tg.use_scheduler(held):
            blocker = hold(ev)  # keeps every worker busy, so n has not started
            waiting = [hold(ev) for _ in range(len(held.stats()))]
            tg.wait(waiting + [blocker], timeout=0)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(n, 0.05)
            return waiting + [blocker]

    try:
        others = asyncio.run(main())
        ev.set()
        tg.wait(others + [n])
        assert n.cancelled()  # it had not started: it never ran
        with pytest.raises(tg.CancelledError):
            n.result()
    finally:
        ev.set()
        held.close()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is 3.11+")
@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_asyncio_timeout_cancels_the_node(sched):
    ev = threading.Event()

    async def main():
        with tg.use_scheduler(sched):
            n = hold(ev)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await n
            return n

    n = asyncio.run(main())
    seen = n.state
    ev.set()
    _, not_done = tg.wait([n], timeout=60)  # fails with the states rather than hang
    assert not not_done, (seen, n.state)
    assert n.done()  # cancelled before it ran, or ran (cancel() came while it was running)
    assert n.cancelled() or n.result() is None


@pytest.mark.thread_unsafe(reason="holds the shared scheduler's workers with blocked tasks: the same test in other threads would queue behind them")
def test_shield_keeps_the_node_going(sched):
    ev = threading.Event()

    async def main():
        with tg.use_scheduler(sched):
            n = hold(ev, 5)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(n), 0.05)
            ev.set()
            return n, await n

    n, value = asyncio.run(main())
    assert value == 5 and not n.cancelled()


def test_await_inside_a_task_is_refused(sched):
    with pytest.raises(tg.TaskgraphError, match="inside a task.*node.result"):
        sched.compute(awaits_inside())


def test_wrap_future_is_not_supported_ensure_future_is(sched):
    async def main():
        with tg.use_scheduler(sched):
            with pytest.raises((AssertionError, TypeError)):
                asyncio.wrap_future(add(1, 1))
            return await asyncio.ensure_future(add(2, 2))

    assert asyncio.run(main()) == 4


def test_await_in_serial_mode_runs_it_at_once():
    async def main():
        with tg.serial():
            return await add(3, 4)

    assert asyncio.run(main()) == 7
