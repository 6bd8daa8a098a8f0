"""Tracing: the record, work/span on graphs with known answers, records added by other
backends (the file formats: test_trace_files.py)."""
import dataclasses
import sys
import threading
import time

import pytest

import taskgraph as tg
from helpers import fib, fib_calls, fib_serial

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.thread_unsafe(reason="a trace records every task of the process: other threads' tasks would appear in it"),
]


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_record_has_every_task_once_with_valid_fields(workers):
    with tg.Scheduler(workers=workers) as s:
        with tg.trace() as tr:
            assert s.compute(fib(16, cutoff=6)) == 987
        stats = s.stats()
    recs = tr.records
    assert len(recs) == fib_calls(16, 6)
    assert len({r.key for r in recs}) == len(recs)
    assert all(r.start <= r.end and 0 <= r.own <= r.end - r.start for r in recs)
    assert all(0 <= r.worker < workers and r.scheduler == s.number for r in recs)
    assert all(r.state == "done" and r.name == "fib" for r in recs)
    keys = {r.key for r in recs}
    roots = [r for r in recs if r.parent is None]
    assert len(roots) == 1 and all(r.parent in keys for r in recs if r.parent)
    # stolen flags agree with the scheduler's own counters
    assert sum(r.stolen for r in recs) == sum(w["stolen"] for w in stats)
    assert [r.start for r in recs] == sorted(r.start for r in recs)


def test_data_dependencies_are_recorded():
    @tg.task
    def add(a, b):
        return a + b

    x, y = add(1, 2), add(3, 4)
    z = add(x, y)
    with tg.trace() as tr:
        assert tg.compute(z, workers=2) == 10
    by = {r.key: r for r in tr.records}
    assert set(by[z.key].deps) == {x.key, y.key}
    assert by[x.key].deps == [] and by[z.key].parent is None


def test_failures_and_cancellations_are_recorded():
    @tg.task
    def bad():
        raise ValueError("nope")

    @tg.task
    def after(x):
        return x

    b = bad()
    a = after(b)
    with tg.trace() as tr:
        with pytest.raises(ValueError):
            tg.compute(a, workers=1)
    by = {r.key: r for r in tr.records}
    assert by[b.key].state == "failed"
    assert by[b.key].error_type == "ValueError" and by[b.key].error == "nope"
    assert by[a.key].state == "cancelled" and by[a.key].error_type == "CancelledError"
    assert by[a.key].deps == [b.key]  # a cancelled task keeps its data edge in the record
    assert "failed 1, cancelled 1" in tr.summary()


def test_known_answer_chain_has_parallelism_one():
    @tg.task
    def step(x):
        time.sleep(0.002)
        return x + 1

    n = step(0)
    for _ in range(9):
        n = step(n)
    with tg.trace() as tr:
        assert tg.compute(n, workers=4) == 10
    assert tr.parallelism == pytest.approx(1.0, abs=0.01)
    assert tr.span == tr.work
    assert len(tr.critical_path()) == 10


def _simulated(tr, own_of, **fields):
    """The trace's records as recorded (tasks, parents, dependencies: the executed graph's
    structure) with fixed simulated own times: work, span and parallelism then depend on the
    structure alone, not on how busy the machine was while the tasks ran (and none of it is
    waiting: the measured CPU times are dropped with the measured own times)."""
    return tg.Trace([dataclasses.replace(r, own=own_of(r), cpu=None, blocked=0,
                                         **{k: f(i, r) for k, f in fields.items()})
                     for i, r in enumerate(tr.records)])


def test_known_answer_independent_tasks_have_parallelism_n():
    @tg.task
    def work(i):
        return i

    with tg.trace() as tr:
        assert tg.compute(*[work(i) for i in range(8)], workers=2) == tuple(range(8))
    recs = tr.records
    assert len(recs) == 8 and all(r.parent is None and r.deps == [] for r in recs)
    sim = _simulated(tr, lambda r: 10_000_000, worker=lambda i, r: i % 2)  # 10 ms each, 2 lanes
    assert sim.work == 80_000_000 and sim.span == 10_000_000
    assert sim.parallelism == 8.0
    assert len(sim.critical_path()) == 1
    assert "speed-up bound min(P, T1/T_inf) = 2.00" in sim.summary()


def test_known_answer_fib_parallelism_grows_with_n():
    # Measured own times depend on the machine's load (a preempted leaf lengthens the span), so
    # the known answer is checked on the recorded structure with simulated times: every leaf
    # (fib(16) or fib(15)) 1 ms of own work, every inner task 1 us. fib(n, cutoff 16) has
    # L = 2, 8, 55 leaves and L - 1 inner tasks for n = 17, 20, 24; its longest path runs
    # through n - 16 inner tasks and one leaf. So work = L ms + (L - 1) us,
    # span = 1 ms + (n - 16) us, and the parallelism grows with n.
    leaf, inner = 1_000_000, 1_000
    ps = []
    with tg.Scheduler(workers=2) as s:
        for n, leaves in ((17, 2), (20, 8), (24, 55)):
            with tg.trace() as tr:
                assert s.compute(fib(n, 16)) == fib_serial(n)
            recs = tr.records
            assert len(recs) == fib_calls(n, 16) == 2 * leaves - 1
            parents = {r.parent for r in recs}
            assert sum(r.key not in parents for r in recs) == leaves
            sim = _simulated(tr, lambda r: inner if r.key in parents else leaf)
            assert sim.work == leaves * leaf + (leaves - 1) * inner
            assert sim.span == leaf + (n - 16) * inner
            assert len(sim.critical_path()) == n - 16 + 1
            ps.append(sim.parallelism)
    assert ps[0] < ps[1] < ps[2], ps
    assert ps[0] == pytest.approx(2, rel=0.01) and ps[2] == pytest.approx(55, rel=0.01), ps


def test_own_time_excludes_time_spent_in_joins():
    @tg.task
    def child():
        time.sleep(0.02)

    @tg.task
    def parent():
        child().result()  # the parent waits 20 ms in a join

    with tg.trace() as tr:
        tg.compute(parent(), workers=1)
    by = {r.name: r for r in tr.records}
    # One worker: the child runs inside the parent's join, so the parent's own time leaves out
    # at least the child's whole run (whatever the load; 0.1 ms for rounding between clocks).
    assert by["parent"].own <= by["parent"].duration - by["child"].duration + 100_000
    assert by["child"].own >= 0.015e9  # sleep(0.02) never takes less
    assert tr.span == tr.work  # the child runs after the parent's own work: one path


def test_traces_do_not_nest():
    with tg.trace():
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with tg.trace():
                pass


def test_tracing_off_records_nothing_and_schedulers_made_inside_are_traced():
    with tg.Scheduler(workers=1) as s:
        s.compute(fib(8))
        with tg.trace() as tr:
            with tg.Scheduler(workers=2) as inner:  # created inside the block
                inner.compute(fib(8))
        s.compute(fib(8))
    assert len(tr.records) == fib_calls(8)
    assert {r.scheduler for r in tr.records} == {inner.number}


def test_progress_bar_counts_tasks(capfd):
    @tg.task
    def slow(i):
        time.sleep(0.002)
        return i

    out = tg.compute(*[slow(i) for i in range(100)], workers=2, progress=True)
    assert out == tuple(range(100))
    err = capfd.readouterr().err
    assert "100/100" in err
    # One bar, drawn once the total is known: no empty bar first (tqdm's "0task [..."), and
    # every drawing of it (tqdm or the plain one) shows the total.
    draws = [d for d in err.replace("\n", "\r").split("\r") if d.strip()]
    assert draws and all("/100" in d for d in draws), draws[:3]
    assert err.count("\n") == 1, err


def test_traces_opening_and_closing_while_tasks_run():
    """A trace closing while workers record never loses the workers or the compute: each
    closed trace holds complete records only (a task is recorded by the trace that was open
    when it started, if that trace is still open when it ends)."""
    import threading

    stop = threading.Event()
    done = []
    with tg.Scheduler(workers=2) as s:
        def work():
            while not stop.is_set():
                done.append(s.compute(fib(14, cutoff=4)))

        th = threading.Thread(target=work)
        th.start()
        traces = []
        for _ in range(200):
            with tg.trace() as tr:
                time.sleep(0.0005)
            traces.append(tr)
        stop.set()
        th.join(60)
        assert not th.is_alive()
    assert done and set(done) == {377}
    recs = [r for tr in traces for r in tr.records]
    assert recs, "nothing was recorded"
    assert all(r.name == "fib" and r.start <= r.end and r.state == "done" for r in recs)
    assert len({r.key for r in recs}) == len(recs)  # no task recorded twice


def test_records_of_spawned_and_lazy_tasks_name_their_parent_and_dependencies():
    @tg.task
    def leaf(i):
        return i

    @tg.task
    def tree():
        a, b = leaf(1), leaf(2)
        return a.result() + b.result()

    t, x = tree(), leaf(3)
    with tg.trace() as tr:
        assert tg.compute(t, x, workers=1) == (3, 3)
    by = {r.key: r for r in tr.records}
    kids = [r for r in tr.records if r.parent == t.key]
    assert len(kids) == 2 and by[t.key].parent is None and by[x.key].parent is None
    assert tr.meta.get("dropped", 0) == 0


def _record(key, start, own=1000):
    return tg.TaskRecord(key=key, name="remote", worker=0, scheduler=0, start=start,
                         end=start + own, own=own, parent=None, where="tcp://h:1")


def test_records_added_by_another_backend_join_the_trace():
    with tg.trace() as tr:
        tg.compute(fib(6), workers=1)
        tr.add_records([_record("remote-1", time.perf_counter_ns())])  # kept until the end
        assert tr.records is not None  # reading them while open does not lose them
    keys = [r.key for r in tr.records]
    assert "remote-1" in keys and len(keys) == fib_calls(6) + 1
    n = len(tr)
    tr.add_records([_record("remote-2", 0)])  # after the block: joins at once, in start order
    assert len(tr) == n + 1 and tr.records[0].key == "remote-2"
    assert tr.workers == len({r.lane for r in tr.records})


def test_add_records_refuses_anything_but_task_records():
    tr = tg.Trace()
    with pytest.raises(TypeError, match="add_records: records must be TaskRecords"):
        tr.add_records([_record("ok", 0), {"key": "bad"}])
    assert len(tr) == 0  # nothing added


def test_a_collection_while_a_trace_starts_may_free_a_scheduler():
    # Starting a trace makes a recorder per worker slot under the trace lock; on CPython 3.11
    # an allocation there may run the cyclic collector, which may free a closed scheduler held
    # in a cycle, whose engine then unregisters from the same lock: that deadlocked.
    from helpers import run_script
    p = run_script("""
        import gc, warnings
        warnings.simplefilter("ignore")
        import taskgraph as tg
        from taskgraph._native import core

        class Holder:
            pass

        alive = [tg.Scheduler(2) for _ in range(3)]  # hundreds of recorders at trace start
        gc.disable()
        h = Holder(); h.me = h; h.s = tg.Scheduler(2); h.s.close()
        del h                       # garbage in a cycle: a closed scheduler
        gc.set_threshold(1, 1, 1)   # an allocation of the trace's start collects it
        gc.enable()
        core.trace_start()
        core.trace_stop()
        gc.set_threshold(700, 10, 10)
        for s in alive:
            s.close()
        print("ok")
    """)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]


_MEMBARRIER_NR = {"x86_64": 324, "aarch64": 283}  # Linux's system call numbers


def _membarrier_private_expedited():
    """Whether this kernel offers membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) to us (a
    container's seccomp profile may refuse it)."""
    import ctypes
    import platform
    nr = _MEMBARRIER_NR.get(platform.machine())
    if not sys.platform.startswith("linux") or nr is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    q = libc.syscall(ctypes.c_long(nr), ctypes.c_int(0), ctypes.c_uint(0), ctypes.c_int(0))
    return q > 0 and bool(q & (1 << 3))


def test_where_the_kernel_offers_membarrier_the_records_writers_use_no_full_fence():
    """docs/design/native.md, "Recorders": the full barrier of the records' hazard protocol is
    the closer's (one membarrier per trace), not one per record, wherever Linux offers it;
    elsewhere both sides are seq_cst. The decision is taken at the first trace."""
    from taskgraph._native import core
    with tg.trace():
        pass
    expected = 1 if _membarrier_private_expedited() else 0
    assert core._trace_fences() == expected


@tg.task
def _tiny(i):
    return i


def test_traces_closed_while_workers_record_hold_whole_records_and_are_never_written_after():
    """The hazard protocol at work: 150 traces opened and closed while two workers run a
    stream of tiny tasks. Each trace holds only whole records of tasks that started while it
    was open, and is dropped at once: a record written after its trace closed would land in
    freed memory (the suite's AddressSanitizer run reports it)."""
    stop = threading.Event()
    counted = 0
    with tg.Scheduler(workers=2) as s:
        def churn():
            while not stop.is_set():
                s.compute([_tiny(i) for i in range(500)])

        th = threading.Thread(target=churn)
        th.start()
        try:
            for _ in range(150):
                opened = time.perf_counter_ns()
                with tg.trace() as tr:
                    time.sleep(0.0005)
                closed = time.perf_counter_ns()
                recs = tr.records
                del tr
                for r in recs:
                    assert r.name == "_tiny" and r.state == "done"
                    assert opened <= r.start <= r.end <= closed
                counted += len(recs)
        finally:
            stop.set()
            th.join()
    assert counted > 0
