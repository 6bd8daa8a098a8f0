"""The Scheduler: lifecycle (threads, close, closed errors), idle CPU, memory release, the GIL."""
import collections
import gc
import random
import sys
import threading
import time
import weakref

import pytest

import taskgraph as tg
from helpers import fib, qsort
from taskgraph._native import FREE_THREADED_BUILD

pytestmark = pytest.mark.timeout(120)


@tg.task
def _ok(x):
    return x


# ---------------------------------------------------------------------- lifecycle
@pytest.mark.thread_unsafe(reason="counts the process's threads")
def test_creating_and_closing_100_schedulers_leaves_no_thread():
    before = threading.active_count()
    for i in range(100):
        with tg.Scheduler(workers=2) as s:
            if i % 10 == 0:
                assert s.compute(_ok(i)) == i
    assert threading.active_count() == before


def test_closed_scheduler_is_a_clear_error():
    s = tg.Scheduler(workers=1)
    s.close()
    s.close()  # idempotent
    with pytest.raises(tg.SchedulerClosedError, match="closed"):
        s.compute(_ok(1))
    assert s.stats()[0]["worker"] == 0  # last counters stay readable


def test_close_cancels_queued_work_of_a_running_compute():
    gate = threading.Event()

    @tg.task
    def blocker():
        gate.wait(10)
        return "ran"

    @tg.task
    def later(x):
        return x

    s = tg.Scheduler(workers=1)
    first = blocker()
    rest = [later(first) for _ in range(10)]
    errors = []

    def run():
        try:
            s.compute(*rest)
        except BaseException as e:  # noqa: BLE001 - recorded for the assertion
            errors.append(e)

    th = threading.Thread(target=run)
    th.start()
    time.sleep(0.2)
    closer = threading.Thread(target=s.close)
    closer.start()
    time.sleep(0.1)
    gate.set()  # the running task finishes; close() cancels the rest
    closer.join(10)
    th.join(10)
    assert not th.is_alive() and not closer.is_alive()
    assert first.result() == "ran"
    assert errors and isinstance(errors[0], tg.CancelledError)
    assert all(n.state == "cancelled" for n in rest)
    with pytest.raises(tg.CancelledError, match="closed"):
        rest[0].result()


@pytest.mark.parametrize("bad", [0, -1])
def test_workers_below_one_is_an_error(bad):
    with pytest.raises(ValueError, match="workers must be >= 1"):
        tg.Scheduler(workers=bad)


@pytest.mark.parametrize("bad", [1.5, "2", True])
def test_workers_not_an_int_is_an_error(bad):
    with pytest.raises(TypeError, match="workers must be an int"):
        tg.Scheduler(workers=bad)


def test_close_inside_own_task_is_an_error():
    with tg.Scheduler(workers=1) as s:
        @tg.task
        def closer():
            s.close()

        with pytest.raises(tg.TaskgraphError, match="inside its own task"):
            s.compute(closer())


def test_one_off_scheduler_and_default_scheduler():
    assert tg.compute(fib(15), workers=2) == 610
    d = tg.default_scheduler()
    assert d is tg.default_scheduler()
    assert d.workers == tg.usable_cpus()
    assert fib(12).result() == 144


@tg.task
def _where():
    return threading.current_thread().name


def test_a_with_block_makes_the_scheduler_current_for_compute_and_result():
    assert tg.current_scheduler() is tg.default_scheduler()
    with tg.Scheduler(workers=1) as a:
        assert tg.current_scheduler() is a
        assert _where().result().startswith(f"taskgraph-{a.number}-")  # result() runs on a
        with tg.Scheduler(workers=1) as b:  # nests: the innermost wins
            assert tg.compute(_where()).startswith(f"taskgraph-{b.number}-")
        assert tg.current_scheduler() is a
    assert tg.current_scheduler() is tg.default_scheduler()


# Where the interpreter gives a new thread a copy of its creator's context (free-threaded 3.14
# by default), threads inherit `with` blocks; elsewhere (3.13t, the GIL builds) they start with
# none. taskgraph follows the interpreter's rule: the current scheduler is a context variable.
INHERITS = bool(getattr(sys.flags, "thread_inherit_context", 0))


def _in_thread(fn, **kw):
    got = []
    t = threading.Thread(target=lambda: got.append(fn()), **kw)
    t.start()
    t.join()
    return got[0]


def test_a_thread_started_inside_a_with_block_sees_its_scheduler_where_threads_inherit_contexts():
    with tg.Scheduler(workers=1) as a:
        seen = _in_thread(tg.current_scheduler)
        assert seen is (a if INHERITS else tg.default_scheduler())
        if sys.version_info >= (3, 14):  # a thread given a fresh context starts with no block
            import contextvars
            assert _in_thread(tg.current_scheduler, context=contextvars.Context()) \
                is tg.default_scheduler()
        started = threading.Event()
        release = threading.Event()
        late = []

        def wait_then_look():
            started.set()
            release.wait(30)
            late.append(tg.current_scheduler())
        t = threading.Thread(target=wait_then_look)
        t.start()
        started.wait(30)
    release.set()  # a: closed meanwhile; the thread falls back to the default
    t.join()
    assert late == [tg.default_scheduler()]


@tg.task
def _thread_in_task():
    return _in_thread(lambda: (tg.current_scheduler(), tg.compute(_where())))


def test_a_thread_started_inside_a_task_sees_the_tasks_scheduler_where_threads_inherit_contexts():
    with tg.Scheduler(workers=2) as s:
        with tg.Scheduler(workers=1) as outer:  # the scheduler is made inside another block
            inner = tg.Scheduler(workers=2)  # one waits for the thread, one runs its compute
        try:
            seen, where = inner.compute(_thread_in_task())
            if INHERITS:
                assert seen is inner and where.startswith(f"taskgraph-{inner.number}-")
            else:
                assert seen is tg.default_scheduler()
            # a worker outside any task (a done callback) sees the default, on every version
            box, done = [], threading.Event()
            node = _ok(1)
            node.add_done_callback(lambda _: (box.append(tg.current_scheduler()), done.set()))
            inner.compute(node)
            assert done.wait(30) and box == [tg.default_scheduler()]
            assert outer.closed and not s.closed
        finally:
            inner.close()


def test_use_scheduler_does_not_close_and_skips_closed_schedulers():
    s = tg.Scheduler(workers=1)
    try:
        with tg.use_scheduler(s) as got:
            assert got is s and tg.current_scheduler() is s
            assert _where().result().startswith(f"taskgraph-{s.number}-")
        assert not s.closed
        with tg.use_scheduler(s):
            s.close()  # closed inside the block: the default takes over, not an error
            assert s.closed and tg.current_scheduler() is tg.default_scheduler()
            assert _where().result().startswith(f"taskgraph-{tg.default_scheduler().number}-")
    finally:
        s.close()


def test_compute_rejects_what_is_not_a_scheduler():
    with pytest.raises(TypeError, match="scheduler must be a taskgraph.Scheduler or backend, got 3"):
        tg.compute(_ok(1), scheduler=3)


# ---------------------------------------------------------------------- resources
@pytest.mark.thread_unsafe(reason="measures the process's CPU time")
def test_idle_scheduler_uses_almost_no_cpu():
    with tg.Scheduler(workers=4) as s:
        s.compute(fib(18))
        time.sleep(0.3)  # searching workers park within microseconds; allow slack
        t0, c0 = time.monotonic(), time.process_time()
        time.sleep(1.0)
        cpu = time.process_time() - c0
        wall = time.monotonic() - t0
    assert cpu / wall < 0.02, f"idle scheduler used {100 * cpu / wall:.1f}% of a core"


class Blob:
    alive = weakref.WeakSet()

    def __init__(self, i):
        self.i = i
        self.data = bytearray(1 << 20)  # 1 MiB
        Blob.alive.add(self)


@pytest.mark.thread_unsafe(reason="counts 1 MiB results alive in the whole process")
def test_intermediate_results_are_released_during_the_run():
    peak = [0]

    @tg.task
    def step(prev, i):
        time.sleep(0.0005)  # some work
        peak[0] = max(peak[0], len(Blob.alive))
        return Blob(i)

    node = step(None, 0)
    for i in range(1, 2000):
        node = step(node, i)
    with tg.Scheduler(workers=2) as s:
        out = s.compute(node)
    assert out.i == 1999
    # A chain of 2000 tasks of 1 MiB each: a result is freed once its consumer ran, by the
    # worker that ran it, so only a few are alive at once.
    assert peak[0] <= 6, f"{peak[0]} blobs alive at once"
    del out, node
    gc.collect()
    assert len(Blob.alive) == 0


@pytest.mark.thread_unsafe(reason="counts 1 MiB results alive in the whole process")
def test_fork_join_results_are_released_when_joined_and_dropped():
    @tg.task
    def make(i):
        return Blob(i)

    @tg.task
    def consume(n):
        peak = 0
        for i in range(n):
            b = make(i)
            b.result()
            del b
            peak = max(peak, len(Blob.alive))
        return peak

    with tg.Scheduler(workers=2) as s:
        peak = s.compute(consume(300))
    assert peak <= 4, peak  # a child read by its parent is forgotten at once: not 300


@pytest.mark.skipif(not FREE_THREADED_BUILD, reason="GIL build")
def test_gil_stays_off_throughout():
    with tg.Scheduler(workers=2) as s:
        s.compute(fib(16))
        s.compute(qsort([random.random() for _ in range(2000)]))
        assert sys._is_gil_enabled() is False
    assert sys._is_gil_enabled() is False


def test_close_while_other_threads_compute_and_read_stats():
    """close() never frees what a concurrent compute() or stats() uses: they either finish,
    or fail with SchedulerClosedError / CancelledError; stats() keeps working after close."""
    for _ in range(20):
        s = tg.Scheduler(workers=2)
        stop = threading.Event()
        errors = []

        def computer():
            while not stop.is_set():
                try:
                    s.compute(fib(12))
                except (tg.SchedulerClosedError, tg.CancelledError):
                    pass
                except BaseException as e:  # noqa: BLE001 - recorded for the assertion
                    errors.append(e)

        def reader():
            while not stop.is_set():
                assert len(s.stats()) == 2

        ths = [threading.Thread(target=computer), threading.Thread(target=computer),
               threading.Thread(target=reader)]
        for th in ths:
            th.start()
        time.sleep(0.02)
        s.close()
        time.sleep(0.01)
        stop.set()
        for th in ths:
            th.join(30)
        assert not any(th.is_alive() for th in ths)
        assert not errors, errors
        assert sum(w["tasks_run"] for w in s.stats()) > 0


def test_interpreter_exit_does_not_wait_forever_for_a_stuck_task():
    import subprocess
    code = ("import threading, taskgraph as tg\n"
            "@tg.task\n"
            "def stuck():\n"
            "    threading.Event().wait()\n"
            "s = tg.Scheduler(workers=1)\n"
            "import _thread\n"
            "t = threading.Thread(target=lambda: s.compute(stuck()), daemon=True)\n"
            "t.start()\n"
            "import time; time.sleep(0.3)\n"
            "print('leaving', flush=True)\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "leaving"
    assert time.monotonic() - t0 < 20  # EXIT_TIMEOUT (5 s) plus start-up
    assert "still running at exit" in r.stderr


def test_current_scheduler_inside_a_task_is_the_one_running_it():
    from taskgraph import scheduler as sched_mod

    @tg.task
    def which():
        return tg.current_scheduler()

    before = sched_mod._default
    with tg.Scheduler(1) as s:
        assert s.compute(which()) is s
        with tg.Scheduler(1) as other:
            assert other.compute(which()) is other
    assert sched_mod._default is before   # asking did not create the default scheduler


# ---------------------------------------------------------------------- dropped without close()
def _wait_until(cond, what, seconds=60):
    """Polls cond() until it holds (a watchdog, not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, f"still waiting after {seconds} s: {what}"
        time.sleep(0.01)


def _threads_of(number):
    return [t for t in threading.enumerate() if t.name.startswith(f"taskgraph-{number}-") and t.is_alive()]


@pytest.mark.thread_unsafe(reason="collects garbage and watches the process's threads")
def test_schedulers_dropped_without_close_stop_their_threads():
    numbers = []
    for i in range(10):
        s = tg.Scheduler(2)
        assert s.compute(_ok(i)) == i
        numbers.append(s.number)
        del s
    gc.collect()
    _wait_until(lambda: not any(_threads_of(n) for n in numbers),
                "worker threads of dropped schedulers")


@tg.task
def _blocker(started, gate):
    started.set()
    assert gate.wait(60)
    return "ran"


@pytest.mark.thread_unsafe(reason="collects garbage and watches the process's threads")
def test_dropping_a_scheduler_cancels_its_queued_nodes_and_drains_them_once():
    """Work queued on a scheduler that nobody holds any more (result(timeout) left it running)
    is cancelled when the scheduler is dropped: every node finishes, none waits forever."""
    started, gate = threading.Event(), threading.Event()
    s = tg.Scheduler(1)
    number = s.number
    block = _blocker(started, gate)
    queued = [_ok(i) for i in range(20)]
    with tg.use_scheduler(s):
        try:
            block.result(timeout=0)  # submitted; goes on running after the TimeoutError
        except TimeoutError:
            pass
        assert started.wait(60)  # the only worker is busy: what follows stays queued
        for n in queued:
            try:
                n.result(timeout=0)
            except TimeoutError:
                pass
    assert not any(n.done() for n in queued)
    ref = weakref.ref(s)
    del s
    gc.collect()
    assert ref() is None
    gate.set()
    _wait_until(lambda: all(n.done() for n in queued) and block.done(), "nodes to finish")
    for n in queued:
        e = n.exception()
        assert isinstance(e, tg.CancelledError), e
        assert "dropped without close()" in str(e), str(e)
    _wait_until(lambda: not _threads_of(number), "the dropped scheduler's worker to exit")


@tg.task
def _drop_last_reference(holder, gate):
    assert gate.wait(60)
    holder.clear()  # the last reference: the finalizer runs here, on this worker thread
    gc.collect()
    return "dropped"


@pytest.mark.thread_unsafe(reason="collects garbage and watches the process's threads")
def test_a_scheduler_dropped_by_its_own_task_shuts_down_without_joining_itself():
    gate = threading.Event()
    holder = [tg.Scheduler(1)]
    number = holder[0].number
    n = _drop_last_reference(holder, gate)
    with tg.use_scheduler(holder[0]):
        try:
            n.result(timeout=0)
        except TimeoutError:
            pass
    gate.set()
    _wait_until(n.done, "the task that dropped its scheduler")
    _wait_until(lambda: not _threads_of(number), "the worker to exit")
    assert n.exception() is None and n.result() == "dropped"


def test_default_scheduler_and_with_blocks_still_work_after_dropped_ones():
    numbers = [tg.Scheduler(1).number for _ in range(3)]  # each dropped at once
    gc.collect()
    with tg.Scheduler(2) as s:
        assert s.compute(fib(10)) == 55
    assert tg.compute(fib(10)) == 55
    _wait_until(lambda: not any(_threads_of(n) for n in numbers), "the dropped schedulers' workers")


# ---------------------------------------------------------------------- fork()
_FORK_SCRIPT = r'''
import faulthandler, os, sys, threading, warnings
warnings.simplefilter("ignore", DeprecationWarning)   # 3.12+: fork() with threads running
import taskgraph as tg

@tg.task
def inc(x):
    return x + 1

@tg.task
def wait_for(gate):
    gate.wait()
    return "parent"

assert tg.compute(inc(1)) == 2                          # the default scheduler has started
s = tg.Scheduler(2)
assert s.compute(inc(2)) == 3
gate = threading.Event()
in_flight = wait_for(gate)
with tg.use_scheduler(s):
    try:
        in_flight.result(timeout=0)                     # running on s when the fork happens
    except TimeoutError:
        pass
pid = os.fork()
if pid == 0:
    faulthandler.dump_traceback_later(30, exit=True)    # a hang fails with stacks, not forever
    def check(what, fn, needle):
        try:
            fn()
        except tg.SchedulerClosedError as e:
            assert needle in str(e), (what, str(e))
            print("child:", what, "refused", flush=True)
        else:
            raise AssertionError(what + " did not raise")
    print("child: compute", tg.compute(inc(10)), flush=True)
    assert s.closed and "closed" in repr(s)
    check("s.compute", lambda: s.compute(inc(1)), "made before fork()")
    check("in_flight.result", in_flight.result, "made before fork()")
    check("a new node on a parent's node", lambda: tg.compute(inc(in_flight)), "made before fork()")
    s.close()                                           # closed there already: returns
    assert len(s.stats()) == 2
    assert s.spare_stats()["limit"] == 128 and s.spare_stats()["threads"] == 0  # no lock taken
    with tg.Scheduler(2) as t:
        print("child: new scheduler", t.compute(inc(20)), flush=True)
    print("child: done", flush=True)
    sys.stdout.flush()
    os._exit(0)
faulthandler.dump_traceback_later(90, exit=True)        # the parent's side too: stacks, not a hang
_, status = os.waitpid(pid, 0)
gate.set()
assert in_flight.result() == "parent"
s.close()
print("parent: child exit status", os.waitstatus_to_exitcode(status), flush=True)
'''

_MP_SCRIPT = r'''
import multiprocessing as mp, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import taskgraph as tg

@tg.task
def inc(x):
    return x + 1

def work(x):
    return tg.compute(inc(x))

if __name__ == "__main__":
    print("parent:", tg.compute(inc(0)), flush=True)
    with mp.get_context("fork").Pool(2) as p:
        print("children:", p.map_async(work, [1, 2, 3]).get(timeout=60), flush=True)
'''


def _run_script(code, tmp_path):
    import subprocess
    path = tmp_path / "script.py"
    path.write_text(code)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork() here")
def test_after_fork_the_child_computes_on_a_new_default_and_refuses_the_parents_schedulers(tmp_path):
    r = _run_script(_FORK_SCRIPT, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "child: compute 11" in out, out + r.stderr
    assert "child: s.compute refused" in out
    assert "child: in_flight.result refused" in out
    assert "child: a new node on a parent's node refused" in out
    assert "child: new scheduler 21" in out
    assert "child: done" in out
    assert "parent: child exit status 0" in out


_FORK_DROP_SCRIPT = r'''
import os, warnings, weakref
warnings.simplefilter("ignore", DeprecationWarning)
import taskgraph as tg
from taskgraph import scheduler

@tg.task
def inc(x):
    return x + 1

assert tg.compute(inc(1)) == 2           # the default scheduler, held by the module only
d = scheduler.default_scheduler()
engine = d._engine
seen = []
weakref.finalize(d, lambda: seen.append(engine.forked))
del d
pid = os.fork()
if pid == 0:                              # the after-fork hook let the default go
    os._exit(0 if seen == [True] else 3)
_, status = os.waitpid(pid, 0)
print("child exit status", os.waitstatus_to_exitcode(status), "seen in the parent", seen, flush=True)
'''


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork() here")
def test_after_fork_a_scheduler_let_go_in_the_child_is_already_marked_forked(tmp_path):
    # The child's after-fork hook lets the parent's default scheduler go; the scheduler's
    # weakref callback then shuts its pool down (taking the pool's locks) unless its engine
    # is marked as made before fork() first. A thread of the parent may have held one of those
    # locks at the fork (the spares' manager holds its own most of the time): the child hung
    # there, about once in 75 runs of the fork test under ASan on a loaded machine.
    r = _run_script(_FORK_DROP_SCRIPT, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "child exit status 0 seen in the parent []" in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork() here")
def test_multiprocessing_fork_children_compute_after_the_parent_started_a_scheduler(tmp_path):
    r = _run_script(_MP_SCRIPT, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "parent: 1" in r.stdout
    assert "children: [2, 3, 4]" in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------------- nodes of another scheduler
def test_nodes_of_another_scheduler_are_waited_for_not_joined_and_values_flow():
    """A node running on scheduler B, awaited inside a task of scheduler A, is waited for (A's
    worker cannot run B's tasks); a node finished on A is a plain value on B; computing on B a
    node A is running waits for A's result (each node runs once)."""
    gate = threading.Event()
    runs = collections.Counter()

    @tg.task
    def add(a, b=0):
        return a + b

    @tg.task
    def held(x):
        runs["held"] += 1
        gate.wait(30)
        return x * 10

    box = {}

    @tg.task
    def awaits():
        return box["h"].result() + 1  # B's node: waited for, not joined

    with tg.Scheduler(workers=1) as a, tg.Scheduler(workers=1) as b:
        h = box["h"] = held(4)
        on_b = threading.Thread(target=lambda: b.compute(h))
        on_b.start()
        while h.state != "running":
            gate.wait(0.001)
        waiter = awaits()
        out = {}
        th = threading.Thread(target=lambda: out.setdefault("a", a.compute(waiter)))
        th.start()
        also = threading.Thread(target=lambda: out.setdefault("a2", a.compute(h)))
        also.start()
        gate.set()
        th.join(30), also.join(30), on_b.join(30)
        assert out == {"a": 41, "a2": 40} and runs["held"] == 1
        assert b.compute(add(h, 2)) == 42  # finished on B, used on B and A alike
        assert a.compute(add(h, 3)) == 43


# ---------------------------------------------------------------------- a worker's frame stack
def _dive(n):
    return 0 if n == 0 else _dive(n - 1) + 1


@tg.task
def _new_pages_of_dives(times, depth):
    """The minor page faults this worker thread takes while a plain recursion goes `depth`
    calls deep and back, `times` times: each fresh mapping of frame memory costs at least one.
    Nothing else is allocated (small ints only: a depth of at most 256), so that an allocator
    that does not reuse freed memory at once (AddressSanitizer's) adds no faults of its own."""
    import resource
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(times):
        assert _dive(depth) == depth
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RUSAGE_THREAD is Linux's")
def test_a_recursion_inside_a_task_does_not_map_frame_memory_on_every_call():
    # CPython maps a new chunk for a thread's frames when a call does not fit, and unmaps it as
    # soon as that call returns; 250 nested calls need about 30 KiB, more than the 16 KiB chunk
    # a thread starts with. Without the worker's reserve (scheduler._worker_main), each dive
    # below mapped and unmapped a chunk: at least 2,000 page faults (an unmap with a second
    # worker running also interrupts the other core). With it, the dives stay in memory the
    # worker already holds.
    with tg.Scheduler(workers=1) as s:
        s.compute(_new_pages_of_dives(5, 250))  # the first dives touch the reserve's pages
        faults = s.compute(_new_pages_of_dives(2000, 250))
    assert faults < 200, f"{faults} page faults for 2,000 dives of 250 calls"
