"""The worker pool (csrc/pool.c) through the test-only cffi binding, with this thread as a
worker: injected tasks are found and finished, counters count, a shut-down pool refuses
injections and hands out what is left to drain."""
import threading


def _ready_task(ffi, lib, run):
    t = ffi.new("tg_task *")
    assert lib.tg_task_claim(t, run) == 1
    assert lib.tg_task_release_hold(t) == 1
    return t


def test_injected_tasks_are_found_once_and_end_their_run(ffi, lib):
    p = lib.tg_pool_new(2)
    try:
        assert lib.tg_pool_workers(p) == 2 and not lib.tg_pool_is_shutdown(p)
        run = ffi.new("tg_run *")
        run.pool = p
        tasks = [_ready_task(ffi, lib, run) for _ in range(5)]
        arr = ffi.new("tg_task *[]", tasks)
        assert lib.tg_pool_inject(p, arr, len(tasks)) == lib.TG_PUSH_QUEUED
        assert lib.tg_pool_queued(p) == 5
        out = ffi.new("tg_task **")
        refused = ffi.new("tg_task **")
        found, ended = [], 0
        for _ in tasks:
            assert lib.tg_pool_find(p, 0, ffi.NULL, 1, ffi.NULL, out) == lib.TG_FIND_RUN
            found.append(out[0])
            ended += lib.tg_pool_finish(p, 0, out[0], lib.TG_DONE, refused)
            assert refused[0] == ffi.NULL
        assert sorted(int(ffi.cast("uintptr_t", t)) for t in found) == \
            sorted(int(ffi.cast("uintptr_t", t)) for t in tasks)
        assert ended == 1 and lib.tg_run_live(run) == 0
        assert lib.tg_pool_queued(p) == 0
        stats = ffi.new("int64_t[]", lib.TG_NSTATS)
        lib.tg_pool_stats(p, 0, stats)
        assert stats[lib.TG_STAT_RUN] == 5 and stats[lib.TG_STAT_INJECTED] == 5
        lib.tg_pool_shutdown(p)
        assert lib.tg_pool_find(p, 0, ffi.NULL, 1, ffi.NULL, out) == lib.TG_FIND_SHUTDOWN
    finally:
        lib.tg_pool_free(p)


def test_shutdown_wakes_a_parked_worker_and_refuses_injections(ffi, lib):
    p = lib.tg_pool_new(1)
    answer = []

    def worker():
        out = ffi.new("tg_task **")
        answer.append(lib.tg_pool_find(p, 0, ffi.NULL, 1, ffi.NULL, out))

    th = threading.Thread(target=worker)
    th.start()
    lib.tg_pool_shutdown(p)  # whether the worker parked yet or not, it must return
    th.join(timeout=60)
    assert not th.is_alive() and answer == [lib.TG_FIND_SHUTDOWN]
    run = ffi.new("tg_run *")
    run.pool = p
    t = _ready_task(ffi, lib, run)
    assert lib.tg_pool_inject(p, ffi.new("tg_task *[]", [t]), 1) == lib.TG_PUSH_REFUSED
    lib.tg_pool_free(p)


def test_drain_hands_out_what_shutdown_left_queued(ffi, lib):
    p = lib.tg_pool_new(1)
    run = ffi.new("tg_run *")
    run.pool = p
    tasks = [_ready_task(ffi, lib, run) for _ in range(3)]
    assert lib.tg_pool_inject(p, ffi.new("tg_task *[]", tasks), 3) == lib.TG_PUSH_QUEUED
    lib.tg_pool_shutdown(p)
    out = ffi.new("tg_task **")
    refused = ffi.new("tg_task **")
    drained = 0
    while lib.tg_pool_drain(p, out):
        assert out[0].skip == 1
        lib.tg_pool_finish(p, 0, out[0], lib.TG_CANCELLED, refused)
        drained += 1
    assert drained == 3 and lib.tg_run_live(run) == 0
    lib.tg_pool_free(p)
