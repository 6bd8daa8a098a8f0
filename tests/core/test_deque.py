"""The Chase-Lev deque (csrc/deque.c) through the test-only cffi binding: LIFO for the owner,
FIFO for thieves, every item taken exactly once under a concurrent thief."""
import random
import threading

import pytest


def test_deque_owner_pops_lifo_thief_steals_fifo_and_status_values(ffi, lib):
    d = lib.tg_deque_new(2)
    out = ffi.new("uint64_t *")
    try:
        assert lib.tg_deque_pop(d, out) == lib.TG_EMPTY
        assert lib.tg_deque_steal(d, out) == lib.TG_EMPTY
        for i in range(1, 11):
            assert lib.tg_deque_push(d, i) == 0
        assert lib.tg_deque_size(d) == 10
        assert lib.tg_deque_capacity(d) >= 10
        assert lib.tg_deque_steal(d, out) == lib.TG_OK and out[0] == 1
        assert lib.tg_deque_pop(d, out) == lib.TG_OK and out[0] == 10
        assert {lib.TG_OK, lib.TG_EMPTY, lib.TG_RETRY} == {0, 1, 2}
    finally:
        lib.tg_deque_free(d)


def test_a_deque_without_thieves_pops_lifo_and_looks_show_every_change(ffi, lib):
    """tg_deque_pop_alone (a pool of one worker) pops as tg_deque_pop does; tg_deque_look sees
    the size, and a top/bottom/push count that tells a pop and a push apart from no change."""
    d = lib.tg_deque_new(2)
    out = ffi.new("uint64_t *")
    top, bottom, pushes = ffi.new("int64_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
    try:
        assert lib.tg_deque_pop_alone(d, out) == lib.TG_EMPTY
        for i in range(1, 6):
            assert lib.tg_deque_push(d, i) == 0
        assert lib.tg_deque_look(d, top, bottom, pushes) == 5 and pushes[0] == 5
        assert [lib.tg_deque_pop_alone(d, out) == lib.TG_OK and out[0] for _ in range(2)] == [5, 4]
        assert lib.tg_deque_steal(d, out) == lib.TG_OK and out[0] == 1
        seen = (top[0], bottom[0], pushes[0])
        assert lib.tg_deque_look(d, top, bottom, pushes) == 2
        assert (top[0], bottom[0], pushes[0]) != seen
        seen = (top[0], bottom[0], pushes[0])
        assert lib.tg_deque_pop(d, out) == lib.TG_OK and lib.tg_deque_push(d, 9) == 0
        assert lib.tg_deque_look(d, top, bottom, pushes) == 2
        assert (top[0], bottom[0]) == seen[:2] and pushes[0] == seen[2] + 1  # pop + push: told apart
        assert [lib.tg_deque_pop_alone(d, out) == lib.TG_OK and out[0] for _ in range(2)] == [9, 2]
        assert lib.tg_deque_pop_alone(d, out) == lib.TG_EMPTY and lib.tg_deque_size(d) == 0
    finally:
        lib.tg_deque_free(d)


@pytest.mark.parametrize("n", [1, 13, 4000, 60000])
def test_every_item_taken_exactly_once_with_a_concurrent_thief(ffi, lib, n):
    """Owner pushes and pops at random while a thief steals: each item is taken exactly once."""
    d = lib.tg_deque_new(2)
    stop = threading.Event()
    stolen = []

    def thief():
        out = ffi.new("uint64_t *")
        mine = []
        while True:
            s = lib.tg_deque_steal(d, out)
            if s == lib.TG_OK:
                mine.append(out[0])
            elif s == lib.TG_EMPTY and stop.is_set():
                break
        stolen.extend(mine)

    th = threading.Thread(target=thief)
    th.start()
    rnd = random.Random(n)
    out = ffi.new("uint64_t *")
    popped = []
    for i in range(1, n + 1):
        lib.tg_deque_push(d, i)
        if rnd.random() < 0.4 and lib.tg_deque_pop(d, out) == lib.TG_OK:
            popped.append(out[0])
    while lib.tg_deque_pop(d, out) == lib.TG_OK:
        popped.append(out[0])
    stop.set()
    th.join(timeout=60)
    assert not th.is_alive()
    lib.tg_deque_free(d)
    taken = popped + stolen
    assert len(taken) == n
    assert sorted(taken) == list(range(1, n + 1))
    assert stolen == sorted(stolen)  # a thief sees items in FIFO order
