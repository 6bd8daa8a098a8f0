"""The @task decorator and what calling a task does, outside a worker and in serial mode."""
import functools
import pickle
import re
import sys
import threading
import weakref

import pytest

import taskgraph as tg
from helpers import run_script
from taskgraph._native import core


@tg.task
def add(a, b):
    return a + b


@tg.task
def total(items, scale=1):
    return scale * sum(items)


def test_calling_outside_a_worker_builds_a_lazy_node():
    calls = []

    @tg.task
    def f(x):
        calls.append(x)
        return x

    n = f(1)
    assert isinstance(n, tg.Node)
    assert n.state == "new" and not n.done()
    assert calls == []  # nothing ran
    assert n.result() == 1 and calls == [1]
    assert n.state == "done" and n.done()


def test_issue_example_values():
    x = add(1, 2)
    y = add(x, 10)
    z = total([x, y, 3], scale=x)
    assert tg.compute(y) == 13
    assert tg.compute(x, y) == (3, 13)
    assert z.compute() == 57


def test_decorator_options_and_fn():
    @tg.task(name="fib")
    def f(n):
        return n

    assert isinstance(f, tg.Task)
    assert f.name == "fib" and f(3).name == "fib"
    assert f.fn(5) == 5 and not isinstance(f.fn, tg.Task)
    assert f.__name__ == "f"  # functools.wraps


def test_lambdas_closures_methods_partials():
    k = 7
    clo = tg.task(lambda x: x + k)
    assert clo(1).result() == 8
    assert clo(1).name == "lambda"

    class Acc:
        def __init__(self, base):
            self.base = base

        @tg.task
        def plus(self, x):
            return self.base + x

    a = Acc(10)
    assert a.plus(5).result() == 15
    assert tg.task(functools.partial(pow, 2))(10).result() == 1024


@pytest.mark.parametrize("bad", [None, 3, [1]])
def test_non_callable_is_a_clear_error(bad):
    with pytest.raises(TypeError, match="needs a callable"):
        tg.task(bad)


def test_a_name_given_as_the_function_points_to_name():
    """@tg.task("fib") (meant: @tg.task(name="fib")) says how to name a task."""
    with pytest.raises(TypeError, match=r"got the str 'fib': to name a task, write "
                                        r"@task\(name='fib'\)"):
        tg.task("fib")
    with pytest.raises(TypeError, match="needs a callable"):
        tg.Task("fib")  # the type itself: plainly


def _f(a, b=2, *, c=3):
    return a + b + c


def _kw_only(a, *, must):
    return (a, must)


def _pos_only(a, /, b, **rest):
    return (a, b, rest)


def _star(*args, **kwargs):
    return (args, kwargs)


@pytest.mark.parametrize("task, args, kwargs, why", [
    (_f, (), {}, "missing a required argument: 'a'"),
    (_f, (1, 2, 3), {}, "too many positional arguments"),
    (_f, (1,), {"d": 4}, "got an unexpected keyword argument 'd'"),
    (_f, (1,), {"a": 1}, "multiple values for argument 'a'"),
    (_f, (), {"b": 1}, "missing a required argument: 'a'"),
    (_kw_only, (1,), {}, "missing a required (keyword-only )?argument: 'must'"),  # 3.11's words
    (_pos_only, (), {"a": 1, "b": 2},
     "(missing a required positional-only argument: 'a'|'a' parameter is positional only, but was passed as a keyword)"),
], ids=lambda x: "")
def test_a_call_the_function_refuses_fails_when_the_node_is_built(task, args, kwargs, why):
    """Checked against the function's signature when the task is called (inside a task, in
    serial mode and outside alike), not when the node runs: TypeError naming the task, what
    is wrong and the signature; no node is made."""
    t = tg.task(task)
    with pytest.raises(TypeError, match=rf"task {t.name}: {why} \(its signature: {t.name}\(") as e:
        t(*args, **kwargs)
    assert "refused when the node is built" in str(e.value)
    with tg.serial(), pytest.raises(TypeError, match=why):
        t(*args, **kwargs)

    @tg.task
    def parent():
        try:
            t(*args, **kwargs)
        except TypeError as e:
            return str(e)
        return "no error"
    assert re.search(why, tg.compute(parent(), workers=1))


def test_calls_the_function_takes_build_nodes_as_before():
    assert tg.compute(tg.task(_f)(1), tg.task(_f)(1, 2, c=4), tg.task(_f)(a=1, b=1),
                      tg.task(_kw_only)(1, must=2), tg.task(_kw_only)(a=1, must=2),
                      tg.task(_pos_only)(1, 2, a=3), tg.task(_pos_only)(1, b=2, z=4),
                      tg.task(_star)(1, 2, x=3), workers=1) == (
        6, 7, 5, (1, 2), (1, 2), (1, 2, {"a": 3}), (1, 2, {"z": 4}), ((1, 2), {"x": 3}))
    # Not a plain function: not checked when built (its errors come from result()).
    part = tg.task(functools.partial(_f, 1))
    assert part().compute(workers=1) == 6
    bad = part(1, 2, 3)  # too many for the partial: found when it runs
    with pytest.raises(TypeError):
        bad.compute(workers=1)


def test_the_check_follows_a_function_changed_after_decoration():
    """The cache of what the function takes only gates the check: a call it would refuse is
    refused only if the function, as it is now, refuses it too."""
    def g(a):
        return a
    t = tg.task(g)
    g.__defaults__ = (5,)  # now g() is fine
    assert t().compute(workers=1) == 5
    def h(a, b):
        return a + b
    g.__code__ = h.__code__
    g.__defaults__ = None
    assert t(1, 2).compute(workers=1) == 3  # more than the cache said: still fine


def test_bad_name_is_a_clear_error():
    with pytest.raises(TypeError, match="name"):
        tg.task(lambda: 1, name="")


def test_keys_are_readable_and_unique():
    nodes = [add(i, i) for i in range(1000)]
    keys = {n.key for n in nodes}
    assert len(keys) == 1000
    assert all(k.startswith("add-") for k in keys)
    n = nodes[0]
    first = n.key
    seen = []
    t = threading.Thread(target=lambda: seen.append(n.key))  # asked again on another thread
    t.start()
    t.join()
    assert seen == [first] and n.compute() == 0 and n.key == first  # fixed on first use
    assert repr(n) == f"<Node {first} done>"


def test_nodes_inside_containers_in_args_and_kwargs():
    x, y = add(1, 1), add(2, 2)

    @tg.task
    def show(a, b, *, c, d):
        return a, b, c, d

    n = show([x, (y, 1)], {"k": x, "s": {y}}, c=frozenset([x]), d={"deep": [[y]]})
    assert set(n.dependencies) == {x, y}
    assert n.result() == ([2, (4, 1)], {"k": 2, "s": {4}}, frozenset([2]), {"deep": [[4]]})


def test_shared_node_runs_once():
    calls = []

    @tg.task
    def src():
        calls.append(1)
        return 5

    s = src()
    outs = [add(s, i) for i in range(20)]
    assert tg.compute(*outs, workers=2) == tuple(5 + i for i in range(20))
    assert calls == [1]
    assert tg.compute(add(s, 100), workers=1) == 105  # finished nodes are not run again
    assert calls == [1]


def test_compute_passes_plain_values_through():
    x = add(1, 2)
    assert tg.compute([x, 4, {"a": x}]) == [3, 4, {"a": 3}]
    assert tg.compute(5) == 5


@pytest.mark.parametrize("what, match", [
    (lambda: 1, r"compute\(\) got the function .*<lambda>, not a Node"),
    (print, r"got the function print, not a Node"),
    (add, r"got the task 'add' itself, not a Node: call it first"),
])
def test_compute_of_a_function_or_task_is_a_clear_error(what, match):
    """tg.compute(lambda: 1) would return the lambda unchanged: a function or a task given
    where a Node belongs is refused before anything runs, on every backend."""
    with pytest.raises(TypeError, match=match):
        tg.compute(what)
    with pytest.raises(TypeError, match=match):
        tg.compute(add(1, 2), what, workers=1)
    with tg.Scheduler(1) as s, pytest.raises(TypeError, match=match):
        s.compute(what)
    assert tg.compute([print]) == [print]  # inside a container: a value like any other


def test_nodes_cannot_be_pickled():
    import pickle
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(add(1, 2))


@tg.task
def module_level(x):
    return x * 2


def test_tasks_pickle_by_reference_or_by_value():
    import cloudpickle

    # A decorated module-level function: by reference (the function itself is hidden).
    back = pickle.loads(pickle.dumps(module_level))
    assert back is module_level
    # Lambdas, closures, partials: by value, through cloudpickle; they keep working.
    k = 5
    for t, arg, want in [(tg.task(lambda x: x + k), 1, 6),
                         (tg.task(functools.partial(pow, 2), name="pow2"), 5, 32)]:
        t2 = cloudpickle.loads(cloudpickle.dumps(t))
        assert isinstance(t2, tg.Task) and t2.name == t.name
        assert t2(arg).compute(workers=1) == want


class Scaler:
    def __init__(self, k):
        self.k = k

    def times(self, x):
        return x * self.k


def test_rebuilt_tasks_and_methods_pickle_with_plain_pickle_where_their_function_does():
    # A Task rebuilt around a module-level task's function (as tg.save and the dask backend
    # do) is pickled by the name of the task its module defines.
    twin = tg.Task(module_level.fn, name="module_level")
    assert twin is not module_level
    assert pickle.loads(pickle.dumps(twin)) is module_level
    # Under another name it is a different task: by value (its function by reference).
    other = tg.Task(module_level.fn, name="renamed")
    with pytest.raises(pickle.PicklingError):
        pickle.dumps(other)  # plain pickle cannot name the hidden function ...
    import cloudpickle
    back = cloudpickle.loads(cloudpickle.dumps(other))  # ... cloudpickle carries it
    assert back.name == "renamed" and back(4).compute(workers=1) == 8
    # A bound method of a picklable object: pickle and cloudpickle alike.
    t = tg.task(Scaler(3).times)
    for dumps, loads in [(pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)]:
        t2 = loads(dumps(t))
        assert t2.name == t.name and t2(5).compute(workers=1) == 15
    # A module that no longer defines the task: a clear error when loading.
    from taskgraph._native import core
    with pytest.raises(ImportError, match="test_task.nothing_here is not a task"):
        core._task_by_name(__name__, "nothing_here")


def test_task_attributes_are_read_only_and_wrapped():
    assert module_level.__wrapped__.__name__ == "module_level"
    assert module_level.__doc__ is None and module_level.__name__ == "module_level"
    with pytest.raises(AttributeError):
        module_level.fn = print



# ---------------------------------------------------------------- defects found by review

def test_a_task_made_without_init_refuses_calls_instead_of_crashing():
    t = tg.Task.__new__(tg.Task)
    assert "not initialised" in repr(t)
    with pytest.raises(TypeError, match="never initialised"):
        t(1)
    with pytest.raises(TypeError, match="never initialised"):
        tg.Task(t)
    with pytest.raises(TypeError, match="never initialised"):
        t.retries


def test_a_task_cannot_be_initialised_twice():
    t = tg.Task(lambda x: x + 1, name="inc")
    with pytest.raises(TypeError, match="already initialised"):
        t.__init__(lambda x: x - 1, name="dec")
    assert t.name == "inc"
    with tg.serial():
        assert t(1).result() == 2


def test_reinitialising_a_task_while_its_call_scans_arguments_keeps_the_call_intact():
    # A metaclass lookup during the argument scan tries to re-initialise the task being
    # called: refused (TypeError inside the lookup, which the scan treats as "no such
    # attribute"), so the node keeps the function it was called with.
    box = {}

    class Meta(type):
        def __getattr__(cls, name):
            if name == "__dataclass_fields__":
                box["task"].__init__(lambda *a: "new fn", name="other")
            raise AttributeError(name)

    class Arg(metaclass=Meta):
        pass

    for i in range(50):
        box["task"] = tg.Task((lambda v: lambda *a: v)(i), retries=1)
        n = box["task"](Arg())
        with tg.serial():
            assert n.result() == i
        assert box["task"].name == "lambda"


def test_two_threads_initialising_one_blank_task_only_one_wins():
    t = tg.Task.__new__(tg.Task)
    go = threading.Barrier(2)
    errors = []

    def init(fn):
        go.wait()
        try:
            t.__init__(fn)
        except TypeError as e:
            errors.append(e)

    ths = [threading.Thread(target=init, args=(f,)) for f in (abs, len)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert len(errors) == 1
    assert t.fn in (abs, len)


# ---------------------------------------------------------------- generator and async functions
def _gen():
    yield 1


async def _coro():
    return 1


async def _agen():
    yield 1


@pytest.mark.parametrize("fn, kind", [(_gen, "a generator function"),
                                      (_coro, "an async \\(coroutine\\) function"),
                                      (_agen, "an async generator function")])
def test_generator_and_async_functions_are_refused_at_decoration(fn, kind):
    with pytest.raises(TypeError, match=f"{kind}.*never|{kind}.*without running"):
        tg.task(fn)
    with pytest.raises(TypeError, match=kind):
        tg.Task(fn, name="x")
    with pytest.raises(TypeError, match=kind):
        tg.task(functools.partial(fn))


def test_a_function_returning_a_generator_is_still_a_task():
    @tg.task
    def evens(n):
        return list(x for x in range(n) if x % 2 == 0)

    assert evens(5).result() == [0, 2, 4]


# --------------------------------------------------------------- which Tasks are immortal

IMMORTAL_TASKS = bool(core.FREE_THREADED) and sys.version_info[:2] == (3, 13)


def is_immortal(obj):
    before = sys.getrefcount(obj)
    more = [obj] * 10
    return sys.getrefcount(obj) == before and len(more) == 10


def fresh_top_level_function():
    """A new function whose code is not nested (as a module's own def), for this test alone."""
    ns = {}
    exec("def double(x):\n    return 2 * x\n", ns)
    return ns["double"]


@pytest.mark.skipif(not IMMORTAL_TASKS, reason="only CPython 3.13t makes top-level functions "
                    "immortal, and taskgraph their first Task with them")
def test_the_first_task_of_a_top_level_function_is_immortal_and_later_ones_are_freed():
    fn = fresh_top_level_function()
    first = tg.task(fn)
    again = tg.task(fn, name="again")
    assert is_immortal(first)
    assert not is_immortal(again)
    with tg.Scheduler(workers=2) as s:
        assert s.compute([first(i) for i in range(100)]) == [2 * i for i in range(100)]
        assert s.compute(again(21)) == 42
    ref = weakref.ref(again)
    del again
    assert ref() is None

    def nested(x):
        return x

    t = tg.task(nested)
    assert not is_immortal(t)
    ref = weakref.ref(t)
    del t
    assert ref() is None
