"""Arguments: Nodes found wherever dask.delayed finds them (and in list/dict subclasses),
replaced by their values with the container types kept; everything else passed as is."""
import collections
import dataclasses
import re
import typing

import pytest

import taskgraph as tg
from helpers import run_script

pytestmark = pytest.mark.timeout(120)


@tg.task
def val(x):
    return x


@tg.task
def echo(*args, **kwargs):
    return args, kwargs


class Point(typing.NamedTuple):
    x: object
    y: object


Pair = collections.namedtuple("Pair", "a b")


@dataclasses.dataclass
class Box:
    item: object
    label: str = "box"
    extra: object = dataclasses.field(default=None, init=False)


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: object
    b: object


class MyDict(dict):
    pass


class MyList(list):
    pass


def test_plain_containers_nested_in_args_and_kwargs():
    a, b = val(1), val(2)
    n = echo([a, (b, 1)], {"k": a, "s": {b}}, c=frozenset([a]), d={"deep": [[b]]})
    assert n.dependencies == (a, b)
    assert n.compute() == (([1, (2, 1)], {"k": 1, "s": {2}}), {"c": frozenset([1]), "d": {"deep": [[2]]}})


def test_namedtuples_dataclasses_slices_keep_their_types():
    a, b = val(1), val(2)
    box = Box(item=[a])
    box.extra = b  # a field __init__ does not take
    n = echo(Point(a, b), Pair(b, 3), box, Frozen(a, {"b": b}), slice(a, b, None))
    assert set(n.dependencies) == {a, b}
    (p, pair, bx, fr, sl), _ = n.compute()
    assert type(p) is Point and p == Point(1, 2)
    assert type(pair) is Pair and pair == Pair(2, 3)
    assert type(bx) is Box and bx.item == [1] and bx.label == "box" and bx.extra == 2
    assert type(fr) is Frozen and fr == Frozen(1, {"b": 2})
    assert sl == slice(1, 2, None)


def test_dict_and_list_subclasses_keep_their_type_and_state():
    a = val(5)
    dd = collections.defaultdict(list, {"x": a})
    od = collections.OrderedDict([("z", a), ("y", 1)])
    md = MyDict(k=a)
    md.tag = "kept"
    ml = MyList([a, 2])
    ml.tag = "kept too"
    c = collections.Counter({"n": 1})
    (dd2, od2, md2, ml2, c2), _ = echo(dd, od, md, ml, c).compute()
    assert type(dd2) is collections.defaultdict and dd2.default_factory is list and dd2["x"] == 5
    assert type(od2) is collections.OrderedDict and list(od2.items()) == [("z", 5), ("y", 1)]
    assert type(md2) is MyDict and md2 == {"k": 5} and md2.tag == "kept"
    assert type(ml2) is MyList and ml2 == [5, 2] and ml2.tag == "kept too"
    assert c2 is c  # no Node inside: the very same object


def test_containers_without_nodes_are_passed_as_the_same_objects():
    big = list(range(100_000))
    d = {"a": [1, 2]}
    a = val(1)

    @tg.task
    def ident(x, y, z):
        return x is big and y is d and z == 1

    assert ident(big, d, a).compute() is True
    assert ident(big, d, 1).dependencies == ()


def test_nodes_as_dict_keys_are_not_dependencies():
    a = val(1)
    n = echo({a: "key"})
    assert n.dependencies == ()
    (d,), _ = n.compute()
    assert list(d) == [a]  # passed as is, like dask


def test_a_container_that_contains_itself_is_a_clear_error_naming_the_task():
    loop = []
    loop.append(loop)
    with pytest.raises(RecursionError, match="arguments of task val nest containers deeper"):
        val(loop)
    deep = [val(1)]
    for _ in range(999):
        deep = [deep]
    assert val(deep).dependencies  # 1000 levels are fine


def test_a_container_changed_after_the_call_is_a_clear_error():
    # Arguments are scanned when the task is called: a Node put into a container afterwards
    # is not a dependency. When the node has dependencies (so its arguments are substituted
    # when it runs) and finds such a Node unfinished, that is a clear error.
    items = [val(0)]
    n = val(items)
    late = val(1)
    items.append(late)  # a Node added afterwards, never computed
    with pytest.raises(tg.TaskgraphError, match=re.escape(late.key) + ".*not among its dependencies"):
        tg.compute(n, workers=1)


def test_a_failed_node_inside_a_container_cancels_the_consumer():
    @tg.task
    def bad():
        raise KeyError("k")

    b = bad()
    n = echo({"x": [b]})
    with pytest.raises(KeyError):
        tg.compute(n, workers=2)
    assert n.state == "cancelled"


def test_huge_flat_argument_with_one_node():
    a = val(7)
    xs = list(range(1_000_000)) + [a]

    @tg.task
    def last(v):
        return v[-1], len(v)

    assert last(xs).compute() == (7, 1_000_001)


# ---------------------------------------------------------------- defects found by review

def test_an_argument_list_changed_by_a_metaclass_during_the_scan_does_not_crash():
    # Classifying a list item can run Python code (a metaclass __getattr__ for
    # __dataclass_fields__) that drops the item from the list: the scan must hold its own
    # reference (it once used the freed item). Run in a subprocess: a crash must not kill pytest.
    code = """
        import taskgraph as tg
        L = []
        class Meta(type):
            def __getattr__(cls, name):
                if name == "__dataclass_fields__" and L:
                    L.clear()          # drops the only reference to the item being classified
                    return {}
                raise AttributeError(name)
        class Evil(metaclass=Meta):
            def __init__(self):
                self.payload = [object() for _ in range(10)]
        @tg.task
        def f(x):
            return x
        errors = 0
        for i in range(2000):
            L.append(Evil())
            try:
                n = f(L)
            except TypeError:      # the metaclass lied: dataclasses.fields() refuses it
                errors += 1
            junk = [Evil() for _ in range(5)]
        print("ok", errors)
    """
    r = run_script(code, timeout=120, env_extra={"PYTHONMALLOC": "debug"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ok")


def test_keyboard_interrupt_while_classifying_an_argument_propagates():
    class Meta(type):
        def __getattr__(cls, name):
            if name == "__dataclass_fields__":
                raise KeyboardInterrupt
            raise AttributeError(name)

    class Odd(metaclass=Meta):
        pass

    @tg.task
    def f(x):
        return x

    with pytest.raises(KeyboardInterrupt):
        f(Odd())
    with pytest.raises(KeyboardInterrupt):
        f([1, Odd()])


def test_an_ordinary_error_while_classifying_an_argument_means_a_plain_value():
    class Meta(type):
        def __getattr__(cls, name):
            raise ValueError("not telling")

    class Odd(metaclass=Meta):
        pass

    @tg.task
    def f(x):
        return type(x).__name__

    with tg.Scheduler(1) as s:
        assert s.compute(f(Odd())) == "Odd"
