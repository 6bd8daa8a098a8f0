"""Trace.summary()'s figures and the words around them (taskgraph.trace.analysis): the pool size
beside the workers that ran tasks, and an achieved speed-up above the bound explained."""
import pytest

import taskgraph as tg

MS = 1_000_000
pytestmark = pytest.mark.thread_unsafe(reason="a trace records every task of the process")


def rec(key, lane, start, end, own=None, parent=None, scheduler=1):
    return tg.TaskRecord(key=key, name=key.split("-")[0], worker=lane, scheduler=scheduler,
                         start=start, end=end, own=end - start if own is None else own,
                         parent=parent)


def test_summary_says_the_pool_size_and_how_many_workers_ran_tasks(tmp_path):
    @tg.task
    def one():
        return 1

    with tg.Scheduler(workers=2) as s, tg.trace() as tr:
        assert s.compute(one()) == 1
    assert tr.workers == 1 and tr.pool_size == 2
    head = tr.summary().splitlines()[0]
    assert "on a pool of 2 workers, 1 of which ran tasks" in head, head
    assert "speed-up bound min(P, T1/T_inf) = 1.00" in tr.summary()
    tr.save(tmp_path / "t.tgtrace")
    assert tg.Trace.load(tmp_path / "t.tgtrace").summary().splitlines()[0] == head
    # A trace that does not say (records made by hand, or saved by an older version).
    bare = tg.Trace(tr.records)
    assert bare.pool_size is None and "tasks on 1 worker," in bare.summary()


def test_summary_of_a_pool_whose_workers_all_ran_tasks_names_it_once():
    @tg.task
    def slow(i):
        import time
        time.sleep(0.05)
        return i

    with tg.Scheduler(workers=2) as s, tg.trace() as tr:
        assert s.compute([slow(i) for i in range(4)]) == [0, 1, 2, 3]
    assert tr.pool_size == 2
    if tr.workers == 2:  # (a worker descheduled for 100 ms would leave the other all four)
        assert "tasks on 2 workers, wall" in tr.summary()


def test_summary_explains_an_achieved_speed_up_above_the_bound():
    """A parent that keeps working while its two children run: the span model puts its own
    work before theirs (span 20 ms), but the three ran side by side in 10 ms."""
    recs = [rec("parent-1", 0, 0, 10 * MS), rec("kid-2", 1, 0, 10 * MS, parent="parent-1"),
            rec("kid-3", 2, 0, 10 * MS, parent="parent-1")]
    tr = tg.Trace(recs)
    assert tr.work == 30 * MS and tr.span == 20 * MS and tr.wall == 10 * MS
    text = tr.summary()
    assert "speed-up bound min(P, T1/T_inf) = 1.50; achieved T1/wall = 3.00" in text
    assert "achieved is above the bound: the span is overestimated here" in text
    assert "docs/trace.md#work-span-parallelism" in text
    # Achieved below the bound: nothing to explain.
    chain = tg.Trace([rec("a-1", 0, 0, MS), rec("b-2", 0, MS, 2 * MS, parent="a-1")])
    assert "above the bound" not in chain.summary()
