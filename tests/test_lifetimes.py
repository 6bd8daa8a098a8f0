"""What the docs promise about memory and lifetimes, each checked where a user meets it: outside
a task and inside one (a @tg.task, a tg.map item, an Executor call).

| promise | where | test |
|---|---|---|
| dask.get: "intermediate values are freed as soon as the last task that needs them has run" | docs/dask.md, get()'s docstring | test_dask_get_frees_each_intermediate_once_consumed |
| "a node drops its inputs once it has run, so an intermediate result is freed once its last consumer has run and nobody holds its Node" (a lazy graph, computed outside a task or inside one) | docs/reliability.md, Memory | test_a_lazy_chain_frees_each_result_once_consumed (and tests/test_memory.py's chain of 100,000) |
| "a child read by its parent is dropped from the parent's list of children at once" | docs/reliability.md | tests/test_scheduler.py (a loop that spawns, joins and drops children keeps at most 4) |
| Executor.map: "yielded results are not kept by the iterator" | docs/api.md | tests/test_executor.py::test_map_keeps_no_reference_to_results_already_yielded |
| Executor: the user's objects are let go right after the call | csrc/py/executor.c, docs/api.md | tests/test_executor.py::test_futures_results_and_arguments_do_not_outlive_their_use |
| spawning, failing and cancelling leave no object behind | docs/reliability.md | tests/test_leaks.py, tests/test_memory.py's soak |
"""
import gc
import threading

import pytest

import taskgraph as tg

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.thread_unsafe(reason="counts live objects of a class shared by the "
                                        "module")]

N = 200
ALLOWED = 4  # live intermediates at once that still mean "freed once consumed" (a chain: 2)


class Step:
    """One intermediate value, counted while alive (peak: the most alive at once)."""
    lock = threading.Lock()
    live = 0
    peak = 0

    def __init__(self, i):
        self.i = i
        self.payload = bytearray(1 << 12)
        with Step.lock:
            Step.live += 1
            Step.peak = max(Step.peak, Step.live)

    def __del__(self):
        with Step.lock:
            Step.live -= 1

    @classmethod
    def reset(cls):
        gc.collect()
        with cls.lock:
            cls.peak = cls.live


def step(prev):
    return Step(0 if prev is None else prev.i + 1)


def last(prev):
    return prev.i


@tg.task
def run_in_a_task(call):
    return call()


def run_in_a_map_item(call):
    return tg.map(lambda _: call(), [0])[0]


def run_in_an_executor_call(call):
    with tg.Executor(2) as ex:
        return ex.submit(call).result()


WHERE = {
    "outside a task": lambda call: call(),
    "inside a @tg.task": lambda call: tg.compute(run_in_a_task(call)),
    "inside a tg.map item": run_in_a_map_item,
    "inside an Executor call": run_in_an_executor_call,
}


def peak_of(where, call):
    Step.reset()
    assert WHERE[where](call) == N - 1
    gc.collect()
    assert Step.live == 0
    return Step.peak


@pytest.mark.parametrize("where", sorted(WHERE))
def test_dask_get_frees_each_intermediate_once_consumed(where):
    tgd = pytest.importorskip("taskgraph.dask")
    dsk = {"s0": (step, None)}
    for i in range(1, N):
        dsk[f"s{i}"] = (step, f"s{i - 1}")
    dsk["out"] = (last, f"s{N - 1}")
    assert peak_of(where, lambda: tgd.get(dsk, "out")) <= ALLOWED


@pytest.mark.parametrize("where", sorted(WHERE))
def test_a_lazy_chain_frees_each_result_once_consumed(where):
    """A lazy graph (built outside any task) computed here: outside, or inside a task, where
    only the node given to compute is the task's child."""
    t_step, t_last = tg.task(step), tg.task(last)
    node = t_step(None)
    for _ in range(1, N):
        node = t_step(node)
    out = t_last(node)
    del node  # held only by its dependents from now on
    assert peak_of(where, lambda: tg.compute(out)) <= ALLOWED


@tg.task
def fails_at_the_end(prev):
    raise ValueError("the last step failed")


def test_inside_a_task_a_failing_graph_still_fails_its_compute_and_nothing_runs_after_the_task():
    """The nodes a compute inside a task submits are its children through the nodes given
    (their dependencies are waited for through them): a failure deep in the graph is raised,
    and when the task ends every node it submitted has finished."""
    t_step = tg.task(step)
    seen = []

    @tg.task
    def parent():
        node = t_step(None)
        for _ in range(1, 50):
            node = t_step(node)
        bad = fails_at_the_end(node)
        try:
            tg.compute(bad)
        except ValueError as e:
            seen.append(str(e))
        return node.result().i

    assert tg.compute(parent()) == 49
    assert seen == ["the last step failed"]

    @tg.task
    def parent_lets_it_go():
        node = t_step(None)
        for _ in range(1, 50):
            node = t_step(node)
        fails_at_the_end(node)  # spawned (its argument submitted with it), never read
        return "parent"

    with pytest.raises(ValueError, match="the last step failed"):
        tg.compute(parent_lets_it_go())
