"""Node: the C type's whole API (result, exception, done, key, name, state, dependencies,
parent, compute), identity, pickling, arguments of result()."""
import pickle
import re
import threading
import time

import pytest

import taskgraph as tg
from helpers import run_script

pytestmark = pytest.mark.timeout(120)


@tg.task
def add(a, b):
    return a + b


@tg.task
def boom(msg):
    raise ValueError(msg)


def test_nodes_come_only_from_tasks():
    with pytest.raises(TypeError):
        tg.Node()
    assert isinstance(add(1, 2), tg.Node)
    assert not isinstance(add(1, 2), list)  # no internal slots to iterate


def test_identity_equality_and_hashing():
    a, b = add(1, 2), add(1, 2)
    assert a == a and a != b and not (a == b)
    assert len({a, b, a}) == 2
    d = {a: "x"}
    assert d[a] == "x" and b not in d


def test_cannot_be_pickled_with_a_message_naming_it():
    n = add(1, 2)
    with pytest.raises(TypeError, match=re.escape(n.key) + ".*cannot be pickled; pass its value"):
        pickle.dumps(n)


def test_key_format_unique_and_stable_across_threads():
    nodes = [add(i, i) for i in range(1000)]
    keys = {}

    def name_half(part):  # threads racing to name the same nodes must agree
        keys[part] = [n.key for n in nodes]

    ths = [threading.Thread(target=name_half, args=(i,)) for i in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert keys[0] == keys[1] == keys[2] == keys[3]
    assert len(set(keys[0])) == 1000
    assert all(re.fullmatch(r"add-\d+\.\d+", k) for k in keys[0])
    # nodes named on other threads get other thread numbers
    made = []
    ths = [threading.Thread(target=lambda: made.append(add(0, 0).key)) for _ in range(8)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert len(set(made)) == 8


def test_repr_name_and_states():
    n = add(1, 2)
    assert n.name == "add" and n.state == "new" and not n.done()
    assert repr(n) == f"<Node {n.key} new>"
    assert n.result() == 3 and n.state == "done" and n.done()
    f = boom("x")
    assert isinstance(f.exception(), ValueError) and f.state == "failed"
    c = add(f, 1)  # its dependency failed in an earlier compute: it never runs
    with pytest.raises(tg.CancelledError, match=re.escape(f.key) + " failed") as ei:
        tg.compute(c)
    assert isinstance(ei.value.__cause__, ValueError)
    assert c.state == "cancelled" and isinstance(c.exception(), tg.CancelledError)


@tg.task
def pair(a, b):
    return (a, b)


def test_dependencies_are_dropped_once_finished():
    x, y = add(1, 2), add(3, 4)
    z = pair(x, [y, x])
    assert z.dependencies == (x, y)  # unique, in order of first appearance
    assert x.dependencies == ()
    assert z.compute() == (3, [7, 3])
    assert z.done() and z.dependencies == ()


def test_parent_is_the_spawning_node():
    seen = {}

    @tg.task
    def child():
        return 1

    @tg.task
    def parent():
        c = child()
        seen["child"] = c
        return c.result()

    p = parent()
    assert p.compute(workers=1) == 1
    assert p.parent is None
    assert seen["child"].parent is p


def test_result_and_exception_arguments_are_checked():
    n = add(1, 2)
    n.result()
    with pytest.raises(ValueError, match="timeout"):
        add(1, 2).result(timeout=-1)
    with pytest.raises(TypeError):
        n.result(1, 2)
    with pytest.raises(TypeError):
        n.result(wait=1)
    with pytest.raises(TypeError):
        n.exception(timeout="soon")
    assert n.result(timeout=None) == 3 and n.exception(timeout=0) is None


def test_result_timeout_outside_a_worker_then_waits_again():
    gate = threading.Event()

    @tg.task
    def slow():
        gate.wait(10)
        return "late"

    with tg.Scheduler(workers=1) as s:
        n = slow()
        t = threading.Thread(target=lambda: s.compute(n))
        t.start()
        while n.state == "new":
            time.sleep(0.001)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match=re.escape(n.key)):
            n.result(timeout=0.1)
        assert 0.09 <= time.monotonic() - t0 < 5  # never early; the upper bound only detects a hang
        gate.set()
        assert n.result(timeout=10) == "late"
        t.join()


def test_compute_method_is_taskgraph_compute():
    n = add(add(1, 1), 1)
    assert n.compute(workers=2) == 3
    with pytest.raises(TypeError):
        n.compute(1)


def test_gather_of_one_node_is_its_value():
    n = add(20, 22)
    assert tg.gather(n) == [42]
    assert tg.gather([add(1, 1), add(2, 2)]) == [2, 4]


def test_a_task_awaiting_its_ancestor_is_an_error_not_a_hang():
    box = []

    @tg.task
    def grandchild():
        return box[0].result()  # the root waits for us (implicit sync): would never end

    @tg.task
    def child():
        return grandchild().result()

    @tg.task
    def root():
        return child().result()

    r = root()
    box.append(r)
    with pytest.raises(tg.TaskgraphError, match="one of the tasks that spawned it"):
        r.compute(workers=2)


def test_dependencies_read_while_the_node_runs_elsewhere():
    # The property may be read from any thread while a worker drops the inputs.
    stop = threading.Event()
    nodes = []

    def reader():
        while not stop.is_set():
            for n in list(nodes):
                deps = n.dependencies
                assert isinstance(deps, tuple) and len(deps) in (0, 2)

    th = threading.Thread(target=reader)
    th.start()
    try:
        with tg.Scheduler(workers=2) as s:
            for _ in range(20):
                base = [add(i, i) for i in range(50)]
                nodes[:] = [add(base[i], base[i + 1]) for i in range(49)]
                s.compute(nodes)
    finally:
        stop.set()
        th.join()


# ---------------------------------------------------------------- defects found by review

def test_tasks_of_two_schedulers_joining_one_lazy_node_both_finish():
    # Both see the node NEW; one scheduler claims it, the other's join must still be woken
    # (it polls: the finisher only wakes its own pool's joiners).
    @tg.task
    def slow():
        time.sleep(0.002)
        return 1

    gate = threading.Barrier(2)
    box = {}

    @tg.task
    def waiter(i):
        gate.wait(timeout=30)
        return box["n"].result()

    with tg.Scheduler(1) as s1, tg.Scheduler(1) as s2:
        for it in range(60):
            box["n"] = slow()
            out = {}
            ths = [threading.Thread(target=lambda k=k, s=s: out.setdefault(k, s.compute(waiter(it), timeout=60)))
                   for k, s in (("a", s1), ("b", s2))]
            for th in ths:
                th.start()
            for th in ths:
                th.join(60)
            assert out == {"a": 1, "b": 1}, (it, out, box["n"].state)


def test_a_task_joining_a_node_claimed_inline_elsewhere_finishes():
    # A node another thread runs in serial mode (claimed inline, in no pool): the joining
    # worker is woken by nobody and must see the finish by itself.
    started, release = threading.Event(), threading.Event()

    @tg.task
    def held():
        started.set()
        release.wait(30)
        return 7

    n = held()

    def run_inline():
        with tg.serial():
            n.result()

    th = threading.Thread(target=run_inline)
    th.start()
    assert started.wait(30)

    @tg.task
    def joiner():
        return n.result() + 1

    with tg.Scheduler(1) as s:
        timer = threading.Timer(0.1, release.set)
        timer.start()
        assert s.compute(joiner(), timeout=60) == 8
    th.join(30)


class _Boom(ValueError):
    pass


@tg.task
def _boom():
    raise _Boom("x")


def _tb_len(e):
    k, tb = 0, e.__traceback__
    while tb:
        k, tb = k + 1, tb.tb_next
    return k


def test_result_raises_a_fresh_copy_whose_traceback_does_not_grow():
    with tg.Scheduler(1) as s:
        n = _boom()
        with pytest.raises(_Boom):
            s.compute(n)
        lengths = []
        for _ in range(50):
            try:
                n.result()
            except _Boom as e:
                lengths.append(_tb_len(e))
                assert e is not n.exception()
                assert e.args == ("x",)
                assert e.__notes__ == n.exception().__notes__
                assert any("raised by task" in note for note in e.__notes__)
        assert len(set(lengths)) == 1          # each raise has its own, equally long, traceback
        original = n.exception()
        assert _tb_len(original) == _tb_len(n.exception())  # the stored one never grows
        assert original.__traceback__ is not None           # and keeps the task's frames


def test_many_threads_raising_one_failed_nodes_error_each_get_their_own():
    with tg.Scheduler(1) as s:
        n = _boom()
        with pytest.raises(_Boom):
            s.compute(n)
        before = _tb_len(n.exception())
        go = threading.Barrier(4)
        errors = []

        def hammer():
            go.wait()
            for _ in range(2000):
                try:
                    n.result()
                except _Boom as e:
                    if e is n.exception():
                        errors.append("shared object raised")
                except BaseException as e:  # noqa: BLE001 - anything else is a defect
                    errors.append(repr(e))

        ths = [threading.Thread(target=hammer) for _ in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(120)
        assert errors == []
        assert _tb_len(n.exception()) == before


def test_an_exception_that_cannot_be_rebuilt_from_its_args_is_still_raised():
    class Picky(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")
            self.a, self.b = a, b

    @tg.task
    def picky():
        raise Picky(1, 2)

    with tg.Scheduler(1) as s:
        n = picky()
        with pytest.raises(Picky) as info:
            s.compute(n)
        assert (info.value.a, info.value.b) == (1, 2)
        with pytest.raises(Picky) as again:
            n.result()
        assert (again.value.a, again.value.b) == (1, 2)


# ---------------------------------------------------------------- hints for common mistakes
HINT = r"is a taskgraph Node, not its value: call \.result\(\)"


@pytest.mark.parametrize("use", [
    lambda n: n + 1, lambda n: 1 + n, lambda n: n - 1, lambda n: 2 * n, lambda n: n / 2,
    lambda n: n // 2, lambda n: n % 2, lambda n: n ** 2, lambda n: pow(2, n), lambda n: -n,
    lambda n: abs(n), lambda n: ~n, lambda n: n & 1, lambda n: n | 1, lambda n: n ^ 1,
    lambda n: n << 1, lambda n: n >> 1, lambda n: n @ n, lambda n: divmod(n, 2),
    lambda n: n < 1, lambda n: 1 < n, lambda n: n >= n, lambda n: sorted([n, n]),
    lambda n: len(n), lambda n: list(n), lambda n: [x for x in n], lambda n: max(n),
    lambda n: f"{n:.2f}", lambda n: format(n, ">10"), lambda n: int(n), lambda n: float(n),
    lambda n: round(n), lambda n: round(n, 2), lambda n: n["a"], lambda n: n[0],
    lambda n: __import__("math").floor(n), lambda n: __import__("math").ceil(n),
    lambda n: __import__("math").trunc(n), lambda n: __import__("math").sqrt(n),
    lambda n: "%(a)s" % n,
], ids=lambda f: "use")
def test_using_a_node_as_its_value_says_to_call_result(use):
    n = add(1, 2)
    with pytest.raises(TypeError, match=HINT) as e:
        use(n)
    assert n.key in str(e.value)
    assert n.state == "new"  # nothing ran


def test_unpacking_a_node_says_to_call_result():
    with pytest.raises(TypeError, match=HINT):
        a, b = add(1, 2)


def test_in_place_operator_says_to_call_result():
    total = 0
    with pytest.raises(TypeError, match=HINT):
        total += add(1, 2)


def test_identity_hash_and_truth_are_kept():
    a, b = add(1, 2), add(1, 2)
    assert a == a and a != b and not (a == b)
    assert {a: 1, b: 2}[a] == 1 and len({a, b, a}) == 2
    assert bool(a) and (a if a else None) is a  # `if node:` keeps working
    assert a != 3 and a in [b, a] and a not in [b]


def test_other_types_still_combine_with_nodes():
    """A type whose reflected operators accept Nodes keeps working (its turn comes first)."""
    class Expr:
        def __radd__(self, other):
            return ("radd", other)

        def __gt__(self, other):  # the reflection of other < self
            return ("gt", other)

    n = add(1, 2)
    assert n + Expr() == ("radd", n)
    assert (n < Expr()) == ("gt", n)


def test_a_node_is_not_an_index_or_sequence_to_the_c_api():
    """No nb_index, no sq_item: indexes and sequence checks refuse a Node plainly; a timeout
    (converted to a number) gets the hint."""
    import operator
    n = add(1, 2)
    with pytest.raises(TypeError) as e:
        operator.index(n)
    assert "not its value" not in str(e.value)
    with pytest.raises(TypeError) as e:
        [1, 2, 3][n]
    assert "not its value" not in str(e.value)
    with pytest.raises(TypeError, match=HINT):
        n.result(timeout=n)
    assert n.state == "new"


def test_formatting_a_node_without_a_spec_is_its_str():
    n = add(1, 2)
    assert f"{n}" == format(n, "") == str(n) == repr(n) and n.key in f"{n}"
    assert "%s" % n == str(n)


# ------------------------------------------------------------------ the worker's node memory
@tg.task
def _leaf_for_cache(i):
    return i


@tg.task
def _spawn_drop_collect(n):
    """Spawns n children, drops them all (their memory goes to this worker's node cache), then
    collects and lists what the collector sees, from inside the task."""
    import gc
    kids = [_leaf_for_cache(i) for i in range(n)]
    total = sum(k.result() for k in kids)
    del kids
    gc.collect()  # stops the world with cached blocks in the heap
    seen = sum(1 for o in gc.get_objects() if type(o) is tg.Node and o.name == "_leaf_for_cache")
    again = [_leaf_for_cache(i) for i in range(n)]  # built in the cached memory
    return total, seen, sum(k.result() for k in again)


def test_the_collector_never_sees_the_memory_a_worker_keeps_for_its_next_nodes():
    """csrc/py/noderec.c, tg_node_alloc: a worker builds its next nodes in the memory of those
    it freed (up to 128), skipping the allocator and the collector's bookkeeping. A cached
    block is untracked: a collection walks the heap past it, and gc.get_objects() never
    returns it; nodes built there work as any other."""
    with tg.Scheduler(workers=1) as s:
        assert s.compute(_spawn_drop_collect(100)) == (4950, 0, 4950)
