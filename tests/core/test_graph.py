"""Task records (csrc/graph.c) through the test-only cffi binding: claims, dependencies,
holds, finishing and releasing successors, and the cancel/start race."""
import pytest

_released = []


@pytest.fixture
def on_ready(ffi):
    """tg_task_finish's ready() callback: collects the successors it releases."""
    @ffi.def_extern()
    def tgtest_ready(ctx, t):
        _released.append(t)

    _released.clear()
    yield _released
    _released.clear()


def test_a_task_is_claimed_once_and_counts_as_live_in_its_run(ffi, lib):
    run = ffi.new("tg_run *")
    t = ffi.new("tg_task *")
    assert lib.tg_task_state(t) == lib.TG_NEW
    assert lib.tg_task_claim(t, run) == 1
    assert lib.tg_task_claim(t, run) == 0
    assert lib.tg_task_state(t) == lib.TG_PENDING
    assert lib.tg_run_live(run) == 1
    assert lib.tg_task_run(t) == run
    assert ffi.string(lib.tg_state_name(lib.TG_PENDING)) == b"pending"
    assert ffi.string(lib.tg_state_name(99)) == b"invalid"


def test_a_covered_child_leaves_its_runs_live_count_alone(ffi, lib, on_ready):
    """A child claimed with tg_task_claim_child is covered by its parent: neither its claim nor
    its finish touches run->live (no line shared between workers), so the run ends with the
    last counted task."""
    run = ffi.new("tg_run *")
    parent, kid = ffi.new("tg_task *"), ffi.new("tg_task *")
    assert lib.tg_task_claim(parent, run) == 1 and lib.tg_run_live(run) == 1
    assert lib.tg_task_claim_child(kid, run) == 1 and lib.tg_run_live(run) == 1
    assert lib.tg_task_claim_child(kid, run) == 0 and lib.tg_task_run(kid) == run
    assert lib.tg_task_release_hold(kid) == 1 and lib.tg_task_start(kid) == 1
    assert lib.tg_task_finish(kid, lib.TG_DONE, lib.tgtest_ready, ffi.NULL) == 0
    assert lib.tg_run_live(run) == 1
    lib.tg_task_release_hold(parent), lib.tg_task_start(parent)
    assert lib.tg_task_finish(parent, lib.TG_DONE, lib.tgtest_ready, ffi.NULL) == 1
    assert lib.tg_run_live(run) == 0


def test_a_fresh_child_is_claimed_ready_and_covered_without_read_modify_writes(ffi, lib, on_ready):
    """tg_task_claim_fresh_child (a task its maker has just made, tg_pool_spawn_fresh): the
    same outcome as tg_task_claim_child followed by tg_task_release_hold."""
    run = ffi.new("tg_run *")
    parent, kid = ffi.new("tg_task *"), ffi.new("tg_task *")
    assert lib.tg_task_claim(parent, run) == 1
    lib.tg_task_claim_fresh_child(kid, run)
    assert lib.tg_task_state(kid) == lib.TG_READY and lib.tg_task_run(kid) == run
    assert lib.tg_run_live(run) == 1  # covered: not counted
    assert lib.tg_task_claim_child(kid, run) == 0  # claimed: nobody else can claim it
    assert lib.tg_task_start(kid) == 1
    assert lib.tg_task_finish(kid, lib.TG_DONE, lib.tgtest_ready, ffi.NULL) == 0
    assert lib.tg_run_live(run) == 1


def test_finishing_a_predecessor_releases_its_successor_once(ffi, lib, on_ready):
    run = ffi.new("tg_run *")
    a, b = ffi.new("tg_task *"), ffi.new("tg_task *")
    assert lib.tg_task_claim(a, run) == 1 and lib.tg_task_claim(b, run) == 1
    assert lib.tg_task_depend(b, a) == lib.TG_DEP_WAIT
    assert lib.tg_task_release_hold(a) == 1  # no predecessor: ready
    assert lib.tg_task_release_hold(b) == 0  # waits for a
    assert lib.tg_task_state(a) == lib.TG_READY and lib.tg_task_state(b) == lib.TG_PENDING
    assert lib.tg_task_start(a) == 1
    assert lib.tg_task_finish(a, lib.TG_DONE, lib.tgtest_ready, ffi.NULL) == 0  # b still live
    assert on_ready == [b]
    assert lib.tg_task_state(a) == lib.TG_DONE and lib.tg_task_state(b) == lib.TG_READY
    assert lib.tg_task_depend(b, a) == lib.TG_DEP_DONE  # a finished with a result already
    assert lib.tg_task_start(b) == 1
    assert lib.tg_task_finish(b, lib.TG_DONE, lib.tgtest_ready, ffi.NULL) == 1  # ended the run
    assert lib.tg_run_live(run) == 0


def test_a_failed_predecessor_poisons_its_successor(ffi, lib, on_ready):
    run = ffi.new("tg_run *")
    a, b = ffi.new("tg_task *"), ffi.new("tg_task *")
    lib.tg_task_claim(a, run), lib.tg_task_claim(b, run)
    lib.tg_task_depend(b, a)
    lib.tg_task_release_hold(a), lib.tg_task_release_hold(b)
    lib.tg_task_start(a)
    lib.tg_task_finish(a, lib.TG_FAILED, lib.tgtest_ready, ffi.NULL)
    assert on_ready == [b]
    assert lib.tg_task_poisoned(b) == lib.TG_POISON_DEP
    assert lib.tg_task_start(b) == 0  # must not run
    c = ffi.new("tg_task *")
    lib.tg_task_claim(c, run)
    assert lib.tg_task_depend(c, a) == lib.TG_DEP_POISON


def test_cancel_and_start_exactly_one_wins(ffi, lib):
    run = ffi.new("tg_run *")
    t, u = ffi.new("tg_task *"), ffi.new("tg_task *")
    lib.tg_task_claim(t, run), lib.tg_task_claim(u, run)
    assert lib.tg_task_cancel(t, lib.TG_POISON_CANCEL) == 1
    assert lib.tg_task_start(t) == 0
    assert lib.tg_task_start(u) == 1
    assert lib.tg_task_cancel(u, lib.TG_POISON_CANCEL) == 0
    assert lib.tg_task_poisoned(u) == lib.TG_POISON_STARTED


def test_a_task_another_run_wants_is_not_skipped_when_its_own_run_is_cancelled(ffi, lib):
    run = ffi.new("tg_run *")
    t = ffi.new("tg_task *")
    assert lib.tg_task_claim(t, run) == 1
    lib.tg_task_want(t)                      # a concurrent compute needs it
    assert lib.tg_task_wanted(t) == 1
    assert lib.tg_task_run_skips(t) == 0     # the hand-out in the cancelled run runs it


def test_a_run_cancel_decided_before_anyone_wants_the_task_skips_it(ffi, lib):
    run = ffi.new("tg_run *")
    t = ffi.new("tg_task *")
    assert lib.tg_task_claim(t, run) == 1
    assert lib.tg_task_run_skips(t) == 1     # decided first (once, at the hand-out): skipped
    lib.tg_task_want(t)                      # too late for that hand-out
    assert lib.tg_task_wanted(t) == 1
