"""taskgraph.Executor (taskgraph/executor/executor.py, csrc/py/executor.c): what CPython's own tests
(tests/test_executor_cpython.py) do not cover: nested submits that never deadlock, traces,
cancellation, exceptions with their tracebacks, shutdown, dropped executors, asyncio, bad
input, map's own semantics. Interpreter exit: tests/test_executor_exit.py."""
import asyncio
import concurrent.futures as cf
import gc
import re
import threading
import time
import traceback
import weakref

import pytest

import taskgraph as tg
from taskgraph.executor import Future

pytestmark = pytest.mark.timeout(120)


def closed(ex):
    """Waits until a pool shut down without waiting has closed (its closer thread joined)."""
    closer = ex._pool.closer
    if closer is not None:
        closer.join(60)
    assert ex.scheduler.closed


def square(x):
    return x * x


def boom(x):
    raise ValueError(f"bad item {x}")


# ---------------------------------------------------------------------- submit and futures
def test_submit_returns_a_real_concurrent_futures_future():
    with tg.Executor(2) as ex:
        f = ex.submit(square, 7)
        assert isinstance(f, cf.Future) and isinstance(f, Future)
        assert f.result() == 49 and f.done() and not f.cancelled() and f.exception() is None
        assert ex.submit(pow, 2, 10).result() == 1024
        g = ex.submit(dict, a=1, fn=2, self=3)  # keyword names of submit's own are free
        assert g.result() == {"a": 1, "fn": 2, "self": 3}
        assert "finished returned int" in repr(f)


def test_nodes_in_arguments_are_passed_as_they_are():
    @tg.task
    def one():
        return 1

    node = one()
    with tg.Executor(2) as ex:
        assert ex.submit(lambda n: n, node).result() is node
        assert ex.submit(lambda *a: a, [node]).result() == ([node],)
    assert not node.done()


@pytest.mark.parametrize("workers", [1, 2])
def test_nested_submit_fib_never_deadlocks(workers):
    with tg.Executor(workers) as ex:
        def fib(n):
            if n < 2:
                return n
            a, b = ex.submit(fib, n - 1), ex.submit(fib, n - 2)
            return a.result() + b.result()

        assert ex.submit(fib, 16).result() == 987


def test_deep_chain_of_waits_and_waits_on_outside_futures():
    with tg.Executor(2) as ex:
        def chain(n):
            return 0 if n == 0 else 1 + ex.submit(chain, n - 1).result()

        assert ex.submit(chain, 100).result() == 100  # each level nests a few frames
        # A call waiting for futures submitted from outside (queued, not its children) joins
        # them too: with both workers in such waits, nothing is stuck.
        gate = threading.Event()
        outside = [ex.submit(gate.wait) for _ in range(2)]
        waiters = [ex.submit(lambda: [f.result() for f in outside]) for _ in range(2)]
        time.sleep(0.05)
        gate.set()
        assert [w.result(timeout=60) for w in waiters] == [[True, True]] * 2


def test_submit_inside_a_call_runs_on_the_pool_and_map_inside_a_call_fork_joins():
    with tg.Executor(2, thread_name_prefix="pool") as ex:
        def outer():
            inner = ex.submit(threading.current_thread).result().name
            return inner, list(ex.map(square, range(100)))

        name, squares = ex.submit(outer).result()
        assert name.startswith("pool_") and squares == [x * x for x in range(100)]


def test_submit_from_another_schedulers_task_goes_to_the_executors_workers():
    with tg.Executor(2, thread_name_prefix="exec") as ex, tg.Scheduler(2) as s:
        @tg.task
        def from_task():
            return ex.submit(lambda: threading.current_thread().name).result()

        assert s.compute(from_task()).startswith("exec_")


def test_result_with_a_timeout_inside_a_call_blocks_like_the_standard_one():
    with tg.Executor(2) as ex:
        def waits_with_timeout():
            f = ex.submit(time.sleep, 0.5)
            with pytest.raises(TimeoutError):
                f.result(timeout=0.01)
            return f.result(timeout=30)  # the other worker runs it

        assert ex.submit(waits_with_timeout).result() is None


def test_a_call_waiting_for_its_own_future_gets_a_clear_error():
    with tg.Executor(2) as ex:
        box = []

        def me():
            while not box:
                time.sleep(0.001)
            return box[0].result()

        f = ex.submit(me)
        box.append(f)
        with pytest.raises(tg.TaskgraphError, match="its own node"):
            f.result()


@pytest.mark.thread_unsafe(reason="opens a trace, which records every task of the process")
def test_trace_records_the_executors_calls():
    with tg.Executor(2) as ex, tg.trace() as tr:
        def fib(n):
            return n if n < 2 else ex.submit(fib, n - 1).result() + ex.submit(fib, n - 2).result()

        assert ex.submit(fib, 10).result() == 55
        assert list(ex.map(square, range(1000))) == [x * x for x in range(1000)]
    names = [r.name for r in tr.records]
    assert names.count("fib") == 177  # every call of fib(10)'s tree, once
    assert any(n == "map[square]" for n in names)
    assert all(r.state == "done" for r in tr.records if r.name == "fib")


# ---------------------------------------------------------------------- exceptions
def test_exceptions_keep_their_traceback_and_get_a_note():
    with tg.Executor(2) as ex:
        f = ex.submit(boom, 3)
        with pytest.raises(ValueError, match="bad item 3") as info:
            f.result()
        frames = [fr.name for fr in traceback.extract_tb(info.value.__traceback__)]
        assert "boom" in frames
        assert any("taskgraph.Executor: raised by task boom-" in n for n in info.value.__notes__)
        assert f.exception() is info.value
        # One failing call cancels nothing else: the pool stays usable.
        assert [g.result() for g in [ex.submit(square, i) for i in range(10)]] == \
            [i * i for i in range(10)]


def test_base_exceptions_are_stored_too_and_the_worker_survives():
    with tg.Executor(1) as ex:
        f = ex.submit(lambda: (_ for _ in ()).throw(KeyboardInterrupt))
        assert isinstance(f.exception(), KeyboardInterrupt)
        assert ex.submit(square, 5).result() == 25


# ---------------------------------------------------------------------- cancellation
def test_one_worker_runs_calls_submitted_from_outside_in_submission_order():
    """Executor(1) is an ordered queue, as ThreadPoolExecutor(1) is: code that serialises work
    through it (a writer, a log) relies on that. The calls queue up behind a blocked one, so the
    worker takes them from the injector in batches."""
    with tg.Executor(1) as ex:
        gate = threading.Event()
        blocker = ex.submit(gate.wait, 30)
        ran = []
        fs = [ex.submit(ran.append, i) for i in range(300)]
        gate.set()
        assert blocker.result() is True
        for f in fs:
            f.result()
    assert ran == list(range(300))


def test_a_cancelled_future_never_runs():
    with tg.Executor(1) as ex:
        gate = threading.Event()
        blocker = ex.submit(gate.wait)
        ran = []
        f = ex.submit(ran.append, 1)
        assert f.cancel() and f.cancelled() and f.done()
        with pytest.raises(cf.CancelledError):
            f.result()
        gate.set()
        blocker.result()
        done, _ = cf.wait([f], timeout=10)  # notified once its worker passed it by
        assert done == {f}
    assert ran == []
    assert not blocker.cancel()  # finished: cannot be cancelled


def test_a_caller_blocked_in_wait_is_told_of_calls_cancelled_meanwhile():
    """The calls that shutdown(cancel_futures=True) drops are cancelled by the worker that
    drops them, at once: a thread blocked in concurrent.futures.wait on them (running no Python
    code, so it frees nothing queued to it) is told then, not at its timeout."""
    ex = tg.Executor(1)
    gate, started = threading.Event(), threading.Event()

    def running():
        started.set()
        gate.wait()

    first = ex.submit(running)
    assert started.wait(10)
    rest = [ex.submit(square, i) for i in range(20)]
    ex.shutdown(wait=False, cancel_futures=True)
    threading.Timer(0.2, gate.set).start()  # the worker drops the rest while we wait below
    t0 = time.monotonic()
    done, not_done = cf.wait(rest, timeout=20)
    assert not not_done and all(f.cancelled() for f in rest)
    assert time.monotonic() - t0 < 15  # told, not timed out (20 s)
    first.result(timeout=30)
    closed(ex)


def test_shutdown_with_cancel_futures_cancels_what_has_not_started():
    ex = tg.Executor(1)
    gate = threading.Event()
    started = threading.Event()
    seen = []

    def running():
        started.set()
        gate.wait()
        seen.append(tg.cancelled())
        return "finished"

    first = ex.submit(running)
    started.wait(10)
    rest = [ex.submit(square, i) for i in range(20)]
    ex.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert first.result(timeout=30) == "finished"
    done, not_done = cf.wait(rest, timeout=30)
    assert not not_done and all(f.cancelled() for f in rest)
    assert seen == [True]  # the running call saw tg.cancelled()
    closed(ex)


# ---------------------------------------------------------------------- shutdown
def test_submit_after_shutdown_raises_and_shutdown_is_idempotent():
    ex = tg.Executor(2)
    f = ex.submit(time.sleep, 0.2)
    ex.shutdown()
    assert f.done()  # wait=True waited for it
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        ex.submit(square, 1)
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        ex.map(square, [1])
    assert list(ex.map(square, [])) == []  # nothing to schedule, as the standard one
    ex.shutdown()
    ex.shutdown(wait=False)
    assert ex.scheduler.closed and all(not t.is_alive() for t in ex.scheduler._threads)


def test_shutdown_without_waiting_lets_the_work_finish():
    ex = tg.Executor(2)
    gate = threading.Event()
    fs = [ex.submit(gate.wait)] + [ex.submit(time.sleep, 0.01) for _ in range(6)]
    ex.shutdown(wait=False)  # returns while a call still waits for the gate
    assert not fs[0].done()
    gate.set()
    assert [f.result(timeout=30) for f in fs] == [True] + [None] * 6
    closed(ex)


def test_shutdown_inside_its_own_call():
    ex = tg.Executor(2)
    with pytest.raises(RuntimeError, match="would wait for itself"):
        ex.submit(ex.shutdown).result()
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(square, 1)
    closed(ex)


def test_a_dropped_executor_finishes_its_work_then_closes():
    ex = tg.Executor(2)
    threads = list(ex.scheduler._threads)
    results = ex.map(square, range(10))
    fs = [ex.submit(time.sleep, 0.02) for _ in range(4)]
    pool = weakref.ref(ex._pool)
    del ex
    gc.collect()
    assert list(results) == [x * x for x in range(10)]
    assert [f.result(timeout=30) for f in fs] == [None] * 4
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    p = pool()
    if p is not None and p.closer is not None:
        p.closer.join(30)


def test_context_manager_waits_and_closes():
    with tg.Executor(2) as ex:
        f = ex.submit(time.sleep, 0.1)
    assert f.done() and ex.scheduler.closed
    assert "shut down" in repr(ex)


# ---------------------------------------------------------------------- map
def test_map_results_in_order_and_the_exception_where_it_belongs():
    calls = []

    def f(x):
        calls.append(x)
        if x == 3:
            raise ValueError("three")
        return x * 10

    with tg.Executor(2) as ex:
        it = ex.map(f, range(8))
        for _ in range(1000):  # a failing call stops no other: all 8 run before any next()
            if len(calls) == 8:
                break
            time.sleep(0.01)
        assert sorted(calls) == list(range(8))
        assert [next(it) for _ in range(3)] == [0, 10, 20]
        with pytest.raises(ValueError, match="three") as info:
            next(it)
        assert any("raised by item 3 (of 8)" in n for n in info.value.__notes__)
        with pytest.raises(StopIteration):  # raising ended the iteration
            next(it)


def test_map_forms():
    with tg.Executor(2) as ex:
        assert list(ex.map(pow, [2, 3, 4], [5, 6])) == [32, 729]
        assert list(ex.map(square, range(100), chunksize=7)) == [x * x for x in range(100)]
        assert list(ex.map(square, iter(range(50)), buffersize=4)) == [x * x for x in range(50)]
        assert list(ex.map(square, (x for x in range(5)))) == [0, 1, 4, 9, 16]
        assert list(ex.map(square, [])) == []


def test_map_starts_at_once_and_its_timeout_counts_from_the_call():
    with tg.Executor(2) as ex:
        started = threading.Event()
        it = ex.map(lambda x: started.set() or x, [1, 2])
        assert started.wait(10)  # before any next()
        assert list(it) == [1, 2]
        it = ex.map(time.sleep, [0.0, 0.6], timeout=0.3)
        time.sleep(0.35)  # the timeout has passed: counted from the call, not from next()
        assert next(it) is None  # done in time: still yielded
        with pytest.raises(TimeoutError):  # (counted from this next(), it would be done)
            next(it)


def test_closing_the_map_iterator_cancels_what_has_not_started():
    ran = []
    gate = threading.Event()

    def slow(x):
        ran.append(x)
        if x:
            gate.wait()
        return x

    with tg.Executor(1) as ex:
        it = ex.map(slow, range(100))
        assert next(it) == 0
        it.close()  # the items not started never run (those of a block begun finish)
        gate.set()
    assert ran[:1] == [0] and len(ran) < 10  # blocks of 1, then 2 items (item 1 waits)
    # As with concurrent.futures, an iterator closed before its first next() has not
    # started (its cleanup never runs): every call then runs.


def test_map_keeps_no_reference_to_results_already_yielded():
    class Box:
        pass

    with tg.Executor(2) as ex:
        for box in ex.map(lambda _: Box(), range(5)):
            ref = weakref.ref(box)
            del box
            for _ in range(1000):
                gc.collect()
                if ref() is None:
                    break
                time.sleep(0.01)
            assert ref() is None


# ---------------------------------------------------------------------- interop
def test_wait_and_as_completed_of_concurrent_futures():
    with tg.Executor(2) as ex:
        gate = threading.Event()
        slow, quick = ex.submit(gate.wait), ex.submit(square, 3)
        done, not_done = cf.wait([slow, quick], return_when=cf.FIRST_COMPLETED, timeout=30)
        assert done == {quick} and not_done == {slow}
        gate.set()
        assert {f.result() for f in cf.as_completed([slow, quick], timeout=30)} == {True, 9}


def test_asyncio_run_in_executor_and_wrap_future():
    with tg.Executor(2) as ex:
        async def main():
            loop = asyncio.get_running_loop()
            a = await loop.run_in_executor(ex, square, 6)
            b = await asyncio.wrap_future(ex.submit(square, 7))
            c = await asyncio.gather(*(loop.run_in_executor(ex, square, i) for i in range(5)))
            with pytest.raises(ValueError, match="bad item 1"):
                await loop.run_in_executor(ex, boom, 1)
            return a, b, c

        assert asyncio.run(main()) == (36, 49, [0, 1, 4, 9, 16])


def test_asyncio_cancelling_the_await_cancels_a_call_not_started():
    with tg.Executor(1) as ex:
        gate = threading.Event()
        blocker = ex.submit(gate.wait)
        ran = []

        async def main():
            fut = asyncio.wrap_future(ex.submit(ran.append, 1))
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(fut, 0.05)

        asyncio.run(main())
        gate.set()
        blocker.result()
    assert ran == []


def test_done_callbacks():
    with tg.Executor(2) as ex:
        seen = []
        f = ex.submit(square, 4)
        f.add_done_callback(lambda g: seen.append(g.result()))
        f.result()
        for _ in range(3000):  # the callback runs on the worker, after the result is set
            if seen:
                break
            time.sleep(0.01)
        f.add_done_callback(lambda g: seen.append("late"))  # done: called at once
        assert seen == [16, "late"]


@tg.task
def marked():
    return "ran"


def test_a_done_callback_runs_as_no_task():
    """A task called in a future's done callback builds a lazy node, as in a node's callback:
    it is not a child of the call the worker just finished (which would sync it, or adopt its
    failure)."""
    states = []
    done = threading.Event()

    def callback(fut):
        node = marked()
        states.append(node.state)
        done.set()

    with tg.Executor(1) as ex:
        f = ex.submit(square, 3)
        f.add_done_callback(callback)
        assert done.wait(60)
    assert states == ["new"]


def test_a_calls_future_is_completed_once_the_tasks_it_called_have_finished():
    gate = threading.Event()

    @tg.task
    def slow_child():
        gate.wait(60)
        return "child"

    def parent():
        slow_child()  # not read: synced at the call's end, as a task's child
        return "parent"

    with tg.Executor(2) as ex:
        f = ex.submit(parent)
        done, _ = cf.wait([f], timeout=1.0)  # the child holds the call's end back
        assert not done
        gate.set()
        assert f.result(timeout=60) == "parent"


def test_many_threads_submitting_at_once():
    with tg.Executor(2) as ex:
        out = []

        def client(k):
            out.append(sum(f.result() for f in [ex.submit(square, i) for i in range(300)]))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert out == [sum(i * i for i in range(300))] * 4


# ---------------------------------------------------------------------- construction
def test_initializer_runs_once_per_worker_before_it_takes_a_call():
    names = []
    lock = threading.Lock()

    def init(tag):
        with lock:
            names.append((tag, threading.current_thread().name))

    def seen():
        with lock:
            return (threading.current_thread().name in [n for _, n in names])

    with tg.Executor(3, thread_name_prefix="ini", initializer=init, initargs=("x",)) as ex:
        assert all(f.result() for f in [ex.submit(seen) for _ in range(30)])
    threads = [n for _, n in names]
    assert all(tag == "x" for tag, _ in names)
    assert len(threads) == len(set(threads))  # once per thread
    assert {"ini_0", "ini_1", "ini_2"} <= set(threads)
    # Any other is a spare thread, which runs it too before its first call (docs/api/executor.md):
    # on a loaded machine a call can wait on the lock long enough (its holder descheduled) for
    # the manager to find the wait and put a spare on duty.
    assert all(re.fullmatch(r"ini_s\d+", n) for n in set(threads) - {"ini_0", "ini_1", "ini_2"}), threads


def test_a_failing_initializer_breaks_the_executor(caplog):
    ex = tg.Executor(2, initializer=boom, initargs=(0,))
    try:
        f = ex.submit(square, 1)
    except cf.thread.BrokenThreadPool:
        pass  # broken already
    else:
        with pytest.raises(cf.thread.BrokenThreadPool, match="initializer failed"):
            f.result(timeout=60)
    deadline = time.monotonic() + 60
    while not ex._broken and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(cf.thread.BrokenThreadPool, match="initializer failed"):
        ex.submit(square, 1)
    assert "broken" in repr(ex)
    assert "Exception in initializer" in caplog.text and "bad item 0" in caplog.text
    ex.shutdown()


@pytest.mark.parametrize("bad, error, match", [
    (0, ValueError, "max_workers must be greater than 0"),
    (-1, ValueError, "max_workers must be greater than 0"),
    ("2", TypeError, "max_workers must be an int or None"),
    (True, TypeError, "max_workers must be an int or None"),
    (10**6, ValueError, "max_workers must be <="),
])
def test_bad_max_workers(bad, error, match):
    with pytest.raises(error, match=match):
        tg.Executor(bad)


def test_bad_arguments_are_refused_before_anything_runs():
    with pytest.raises(TypeError, match="initializer must be a callable"):
        tg.Executor(1, initializer=3)
    with tg.Executor(1) as ex:
        with pytest.raises(TypeError, match="fn must be callable, got int 3"):
            ex.submit(3)
        with pytest.raises(TypeError):
            ex.submit()
        with pytest.raises(TypeError, match="fn must be callable"):
            ex.map(None, [1])
        with pytest.raises(TypeError, match="argument 1 is not iterable"):
            ex.map(square, 5)
        with pytest.raises(ValueError, match="chunksize must be None or > 0"):
            ex.map(square, [1], chunksize=0)
        with pytest.raises(TypeError, match="buffersize must be an integer or None"):
            ex.map(square, [1], buffersize="2")
        with pytest.raises(ValueError, match="buffersize must be None or > 0"):
            ex.map(square, [1], buffersize=0)
        assert ex.submit(square, 3).result() == 9


def test_default_workers_and_scheduler():
    with tg.Executor() as ex:
        assert ex._max_workers == tg.usable_cpus() == ex.scheduler.workers
        assert ex.submit(square, 3).result() == 9
        assert sum(s["tasks_run"] for s in ex.scheduler.stats()) >= 1


def test_futures_results_and_arguments_do_not_outlive_their_use():
    class Box:
        pass

    with tg.Executor(2) as ex:
        args = [Box() for _ in range(100)]
        fs = [ex.submit(lambda b: Box(), a) for a in args]
        fs += [ex.submit(boom, i) for i in range(50)]
        gate = threading.Event()
        blocker = ex.submit(gate.wait)
        cancelled = [ex.submit(Box) for _ in range(20)]
        for f in cancelled:
            f.cancel()
        gate.set()
        blocker.result()
        results = [weakref.ref(f.result()) for f in fs[:100]]
        assert all(isinstance(f.exception(), ValueError) for f in fs[100:])
        refs = [weakref.ref(x) for x in fs + cancelled + args]
        del fs, cancelled, args, f
    for _ in range(1000):  # objects dropped on a worker are freed by their owner thread
        gc.collect()
        if not any(r() is not None for r in refs + results):
            break
        time.sleep(0.01)
    assert [r() for r in refs + results if r() is not None] == []
