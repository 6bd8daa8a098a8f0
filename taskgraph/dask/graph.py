"""A dask graph as taskgraph Nodes: the conversion behind ``taskgraph.dask.get``.

One lazy Node per dask task, built in one pass over the graph in its own order (dependencies
first in the graphs dask makes), then a depth-first walk from the requested keys for what the
pass left (iterative: chains of any length; it names a missing key or a cycle). The engine
then submits them in one call and runs each through its one task runner (csrc/py/rules.c),
like any other lazy graph; Nodes nobody asked for never run.

What each kind of dask entry becomes:

* a task whose arguments are dependencies and plain constants (a legacy ``(func, *args)``
  tuple, or a ``dask._task_spec.Task`` of ``TaskRef``s and constants): a Node that calls
  ``func`` directly from C (``core.call_in_copy(context, func, *args)``) with the
  dependencies' Nodes among its arguments, so the engine hands it their values: no Python
  frame of ours per task;
* a fused task (dask's linear fusion, ``_execute_subgraph``, which dask runs with a small
  scheduler of its own inside one task, at tens of microseconds per call): one Node per task
  of its inner graph, each run as a task of its own;
* any other task (nested tasks, containers holding keys, ``List``/``Dict``/... nodes): dask
  converts it (``convert_legacy_task``) and its own ``__call__`` runs it with the values of its
  dependencies, as dask's local scheduler does;
* data (``DataNode``, a legacy literal, a value given in ``cache``): passed to its dependents
  as it is if it is a plain constant, else a Node finished at once with the value (it never
  runs, nothing looks inside the value);
* an ``Alias``: the Node of its target.

The rules of what a legacy argument refers to are dask's (``convert_legacy_task``): this
module decides only the common case itself (an int, float, str or tuple equal to a key of
the graph is that key's value) and hands everything else to dask.

The Node's task name is the key's prefix (``key_name``: what ``dask.utils.key_split`` gives,
as dask's task stream names tasks, without its cache and without interning the name), so traces, summaries and pictures group dask keys the way dask shows them.
Every task runs in a copy of the caller's context (``contextvars``), its own, as dask's
threaded scheduler runs it: a task sees the caller's context variables (on 3.14t,
``warnings.catch_warnings`` too, which lives in one), and what it sets stays its own.
Intermediate values are freed as soon as their last dependent has run: a Node's value is held
only by the Node, and a Node only by its dependents' arguments until they run (this module
keeps no reference once the graph is built).
"""
from __future__ import annotations

import contextvars
import functools
import re
import threading
import types
import weakref

from dask._task_spec import (Alias, DataNode, GraphNode, Task as DaskTask, TaskRef,
                             _execute_subgraph, _is_dask_future, convert_legacy_task)

from taskgraph._native import core
from taskgraph.errors import CancelledError, add_note, get_mark, set_mark

__all__ = ["GraphBuilder"]

# A C function: calls its second argument with the rest in a fresh copy of its first, the
# caller's context (see the module's docstring).
_call = core.call_in_copy
_CONTAINERS = (list, tuple, dict, set, frozenset)
# Constants passed to a function as they are: taskgraph does not look inside them.
_PLAIN = frozenset({int, float, str, bytes, bool, complex, type(None), slice, range})
_SMALL_TUPLE = 32  # a tuple of plain constants up to this long (an index) is passed as is
# The types of most task functions: callable, and not a task-spec object (dask's rule).
_FUNCTION_TYPES = frozenset({types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                             functools.partial})

# The entries' kinds once parsed.
_CALL, _SPEC, _DATA, _ALIAS, _FUSED = range(5)

# core.Task objects by (name, retries), shared by every call: bounded, the oldest dropped past
# _CACHED (with its name: names are not interned, so a key's prefix made new per call is not
# kept). One graph gives at most _MAX_NAMES names; its keys with further prefixes run as tasks
# named "dask".
_TASKS: dict = {}
_TASKS_LOCK = threading.Lock()
_CACHED = 4096
_MAX_NAMES = 1000
_FALLBACK_NAME = "dask"


_HEX = re.compile(r"[a-f]+")
_HEX32 = re.compile(r"[a-f0-9]{32}")


def key_name(key) -> str:
    """The name of a dask key, as ``dask.utils.key_split`` gives it (``('x-1f2e', 3)`` ->
    ``'x'``, ``'inc-<uuid>'`` -> ``'inc'``, ``'load_3_17'`` -> ``'load_3_17'``), computed the
    same way without key_split's two kinds of bookkeeping on the user's key: its cache of up
    to 100,000 keys, and ``sys.intern`` of the name, which on a free-threaded build keeps every
    name (here often the whole key, made new per call) for the life of the process. Never
    raises ("Other" for what it cannot read, as key_split)."""
    s = key
    try:
        while type(s) is tuple:
            s = s[0]
        if type(s) is bytes:
            s = s.decode()
        words = s.split("-")
        if not words[0][0].isalpha():
            result = words[0].split(",")[0].strip("_'()\"")
        else:
            result = words[0]
        for word in words[1:]:
            if word.isalpha() and not (len(word) == 8 and _HEX.match(word) is not None):
                result += f"-{word}"
            else:
                break
        if len(result) == 32 and _HEX32.match(result):
            return "data"
        if result[0] == "<":
            result = result.strip("<>").split()[0].split(".")[-1]
        return result
    except Exception:  # noqa: BLE001 - as key_split
        return "Other"


def _task_named(name, retries):
    t = _TASKS.get((name, retries))
    if t is not None:
        return t
    with _TASKS_LOCK:
        t = _TASKS.get((name, retries))
        if t is None:
            t = core.Task(_call, name=name, retries=retries)
            if len(_TASKS) >= _CACHED:
                del _TASKS[next(iter(_TASKS))]
            _TASKS[(name, retries)] = t
    return t


def _run_spec(spec, keys, *values):
    """Runs a dask task-spec node the way dask's local scheduler does: with the values of its
    dependencies by key."""
    return spec(dict(zip(keys, values)))


def _plain_const(a):
    """Whether the spec argument a is passed to its function as it is, with no look inside
    (scalars, slices, short tuples of them, and objects that are not containers)."""
    t = type(a)
    if t in _PLAIN:
        return True
    if t is tuple:
        if len(a) > _SMALL_TUPLE:
            return False
        for x in a:
            if type(x) not in _PLAIN:
                return False
        return True
    return not isinstance(a, _CONTAINERS) and not isinstance(a, GraphNode) and not isinstance(a, TaskRef)


class _Again:
    """A key on the walk's stack whose dependencies were pushed above it: built when popped."""
    __slots__ = ("key", "entry")

    def __init__(self, key, entry):
        self.key, self.entry = key, entry


# An entry, once parsed, is one of (its dependencies' keys always last):
#   (_CALL, call, kwargs, refs, kwrefs, deps): call(*...) with call = (func, *args), and the
#       key refs[j][1] at position refs[j][0] of call (kwrefs: (name, key) in kwargs);
#   (_SPEC, spec, deps): a task-spec node run by its own __call__;
#   (_FUSED, spec, deps): a fused task, one Node per part (GraphBuilder._expand);
#   (_DATA, value, ()); (_ALIAS, target, (target,)).
_NO_REFS = object()  # a legacy call with no key among its arguments: the tuple is the call


def _legacy_arg(a, keyset):
    """What the legacy task argument a is, by dask's rules (convert_legacy_task): 1 a key of
    the graph (an int, float, str or tuple equal to one), 0 a constant, -1 anything dask has to
    convert (a nested task, a container, a task-spec object, a future)."""
    if isinstance(a, (int, float, str)):
        return 1 if a in keyset else 0
    if isinstance(a, tuple):
        if type(a) is not tuple:
            return -1  # a namedtuple
        try:
            return 1 if a in keyset else -1
        except TypeError:  # unhashable inside
            return -1
    if isinstance(a, (list, dict, set, frozenset, GraphNode, TaskRef)) or _is_dask_future(a):
        return -1
    return 0


def _legacy_call(task, keyset):
    """The entry of a legacy (func, *args) tuple whose arguments are keys and constants:
    _NO_REFS if none is a key; None for anything else (dask converts it). Per task: kept to
    the fewest bytecodes (CPython 3.13t does not specialize them)."""
    if not task:
        return None
    f = task[0]
    if type(f) not in _FUNCTION_TYPES and (not callable(f) or isinstance(f, GraphNode)):
        return None
    refs = None
    i = 0
    for a in task:  # the function first (i == 0), then the arguments
        if i:
            ta = type(a)
            if ta is int or ta is str or ta is float or ta is tuple:
                try:
                    if a not in keyset:
                        if ta is tuple:
                            return None  # a nested task or a container: dask converts it
                        i += 1
                        continue
                except TypeError:  # a tuple with something unhashable inside
                    return None
            else:
                k = _legacy_arg(a, keyset)
                if k == 0:
                    i += 1
                    continue
                if k < 0:
                    return None
            if refs is None:
                refs = []
            refs.append((i, a))
        i += 1
    if refs is None:
        return _NO_REFS
    return (_CALL, task, None, refs, None, [k for _, k in refs])


def _spec_call(spec):
    """The entry of a dask Task whose arguments are TaskRefs and plain constants, else None
    (its own __call__ runs it, see _run_spec)."""
    refs = kwrefs = None
    args = spec.args
    for i in range(len(args)):
        a = args[i]
        if type(a) is TaskRef:
            if refs is None:
                refs = []
            refs.append((i + 1, a.key))
        elif type(a) not in _PLAIN and not _plain_const(a):
            return None
    kwargs = spec.kwargs or None
    if kwargs:
        for name, a in kwargs.items():
            if type(a) is TaskRef:
                if kwrefs is None:
                    kwrefs = []
                kwrefs.append((name, a.key))
            elif not _plain_const(a):
                return None
    call = (spec.func, *args)
    if refs is None and kwrefs is None:
        return (_CALL, call, kwargs, None, None, ())
    deps = [k for _, k in refs] if refs else []
    if kwrefs:
        deps.extend(k for _, k in kwrefs)
    return (_CALL, call, kwargs, refs, kwrefs, deps)


class _Part:
    """The label of a Node made from one task of a fused subgraph: the graph's key and the
    task's own key inside it."""
    __slots__ = ("key", "part")

    def __init__(self, key, part):
        self.key, self.part = key, part


def _fused_parts(spec):
    """(inner graph, output key, input keys, input arguments) of a dask Task that runs a fused
    subgraph (``GraphNode.fuse``: ``_execute_subgraph(inner, outkey, inkeys, *inputs)``), or
    None if spec is not one in that shape."""
    if spec.func is not _execute_subgraph or spec.kwargs or len(spec.args) < 3:
        return None
    inner, outkey, inkeys = spec.args[0], spec.args[1], spec.args[2]
    if (type(inner) is not dict or type(inkeys) is not tuple
            or len(spec.args) != 3 + len(inkeys) or outkey not in inner):
        return None
    return inner, outkey, inkeys, spec.args[3:]


class GraphBuilder:
    """Builds the Nodes of one dask graph. ``nodes(keys)`` returns the Node (or the plain
    constant) of each key; ``failure(exc)`` is what to raise for exc, a failure of their
    compute (with a note naming the dask key whose task raised it)."""

    def __init__(self, dsk, cache=None, retries=None, track=False, context=None):
        self.dsk = dsk
        # The caller's context: each task runs in a copy of its own (see the module's doc).
        self.context = context if context is not None else contextvars.copy_context()
        # Weak references to the Nodes made (track=True, inside a task): a failure raised to
        # the caller is marked as seen, so that the task's end does not raise it again.
        self.track = [] if track else None
        self.cache = cache or None
        self.retries = retries or None  # {key: int}
        self.keyset = dsk if not self.cache else _Both(dsk, self.cache)
        self.made = {}
        self.order = []       # the label (dask key, or _Part) of each Node made, in order
        self.first = None     # (thread, number) of the first Node's key (see _label)
        self.tasks = {}       # raw key name -> core.Task (no retries), for this graph
        self.names = set()    # the task names given so far

    def nodes(self, keys):
        """The Node (or plain constant) of each key (KeyError for a key the graph does not
        have)."""
        dsk, cache = self.dsk, self.cache
        for k in keys:
            if k not in dsk and not (cache and k in cache):
                raise KeyError(k)
        self._sweep()
        self._walk(keys, dsk, self.made, None)
        made = self.made
        out = [made[k] for k in keys]
        self.made = None  # from now on only the Nodes' dependents hold them
        return out

    # ------------------------------------------------------------------ the two passes
    def _sweep(self):
        """One pass over the graph in its own order, which is dependencies first in the graphs
        dask makes: each entry whose dependencies are made by then is built (the others are
        left to _walk). Keys nobody asked for get a Node too, which never runs and is freed
        at the end (dask's local schedulers convert the whole graph as well). The common
        entries (a call whose arguments are keys and plain constants) are handled inline:
        this loop is the conversion's cost per task."""
        made, keyset, order, tasks, dsk = self.made, self.keyset, self.order, self.tasks, self.dsk
        ctx = self.context
        inline = self.cache is None and self.retries is None
        plain = self.track is None
        for key, task in dsk.items():
            e = call = None
            if inline:
                tt = type(task)
                if tt is tuple:
                    e = _legacy_call(task, keyset)
                    if e is _NO_REFS:  # the tuple is the call
                        call = task
                elif tt is DaskTask:
                    e = _spec_call(task)
            if call is None:
                if e is None:
                    try:
                        e = self._parse(key, dsk)
                    except KeyError:  # an entry that names only itself: _walk says so if needed
                        continue
                if not all(d in made for d in e[-1]):
                    continue  # left to _walk
                if not inline or e[0] != _CALL or e[2] is not None:
                    self._build(key, e, made, None)
                    continue
                call = e[1]  # _build's first case, inline
                if e[3]:
                    call = list(call)
                    for i, k in e[3]:
                        call[i] = made[k]
            raw = key[0] if type(key) is tuple and key else key
            t = tasks.get(raw)
            if t is None:
                t = self._task_for(key)
            made[key] = node = t(ctx, *call)
            if not order or not plain:
                self._made(node, key)
            else:
                order.append(key)

    def _walk(self, keys, dsk, made, fused_in):
        """Makes the Nodes of keys (of graph dsk, into made) that are not made yet, and of
        what they depend on, dependencies first (depth first, with an explicit stack: chains
        of any length); says which key is missing or part of a cycle. fused_in: the key of the
        fused task whose inner graph dsk is, or None."""
        cache = self.cache if dsk is self.dsk else None
        parsed = {}
        stack = [k for k in reversed(keys) if k not in made]
        pop, push = stack.pop, stack.append
        while stack:
            key = pop()
            if type(key) is _Again:  # its dependencies are made now
                self._build(key.key, key.entry, made, fused_in)
                continue
            if key in made:
                continue
            if key in parsed:
                raise RuntimeError(f"Cycle detected in the dask graph: key {key!r} depends on "
                                   "itself through its dependencies")
            entry = self._parse(key, dsk)
            todo = [d for d in entry[-1] if d not in made]
            if not todo:
                self._build(key, entry, made, fused_in)
                continue
            parsed[key] = entry
            push(_Again(key, entry))
            for d in todo:
                if d not in dsk and not (cache and d in cache):
                    raise ValueError(f"Missing dependency {d!r} of dask key {key!r}: it is not "
                                     "in the graph")
                push(d)

    # ------------------------------------------------------------------ parsing
    def _parse(self, key, dsk):
        """The entry of key in dsk (see _Again)."""
        if self.cache is not None and dsk is self.dsk and key in self.cache:
            return (_DATA, self.cache[key], ())  # a value given: used as it is
        task = dsk[key]
        if type(task) is tuple:
            e = _legacy_call(task, self.keyset)
            if e is _NO_REFS:
                return (_CALL, task, None, None, None, ())
            if e is not None:
                return e
        if not isinstance(task, GraphNode):
            task = convert_legacy_task(key, task, self.keyset)
            if not isinstance(task, GraphNode):
                return (_DATA, task, ())
        t = type(task)
        if t is DaskTask:
            e = _spec_call(task)
            if e is not None:
                return e
            if _fused_parts(task) is not None:
                return (_FUSED, task, tuple(task.dependencies))
        elif t is DataNode:
            return (_DATA, task.value, ())
        elif t is Alias:
            if task.target == key:  # dask drops such an entry: the key is not in the graph
                raise KeyError(key)
            return (_ALIAS, task.target, (task.target,))
        return (_SPEC, task, tuple(task.dependencies))

    # ------------------------------------------------------------------ building
    def _task_for(self, key):
        """The core.Task (its name: the key's prefix) that key's Node is made with."""
        if self.retries is not None:
            n = self.retries.get(key, 0)
            if n:
                return _task_named(self._name(key), n)
        raw = key[0] if type(key) is tuple and key else key
        t = self.tasks.get(raw)
        if t is None:
            t = self.tasks[raw] = _task_named(self._name(key), 0)
        return t

    def _name(self, key):
        name = key_name(key) or _FALLBACK_NAME
        if name not in self.names:
            if len(self.names) >= _MAX_NAMES:
                return _FALLBACK_NAME
            self.names.add(name)
        return name

    def _build(self, key, entry, made, fused_in):
        """Makes key's Node from its entry into made (its dependencies are made)."""
        kind = entry[0]
        if kind == _CALL:
            _, call, kwargs, refs, kwrefs, _ = entry
            if refs:
                call = list(call)
                for i, k in refs:
                    call[i] = made[k]
            if kwrefs:
                kwargs = dict(kwargs)
                for name, k in kwrefs:
                    kwargs[name] = made[k]
            t = self._task_for(key)
            node = t(self.context, *call, **kwargs) if kwargs else t(self.context, *call)
        elif kind == _ALIAS:
            made[key] = made[entry[1]]
            return
        elif kind == _DATA:
            value = entry[1]
            if _plain_const(value):  # passed to its dependents as it is: no Node
                made[key] = value
                return
            node = self._task_for(key)()  # a Node finished at once with the value
            core._claim(node)
            core._settle(node, core.DONE, value)
        elif kind == _FUSED:
            made[key] = self._expand(key, entry[1], made, fused_in)
            return
        else:  # _SPEC
            deps = entry[2]
            node = self._task_for(key)(self.context, _run_spec, entry[1], deps,
                                       *[made[d] for d in deps])
        self._made(node, key if fused_in is None else _Part(fused_in, key))
        made[key] = node

    def _made(self, node, label):
        if not self.order:
            self.first = _key_number(node.key)
        self.order.append(label)
        if self.track is not None:
            self.track.append(weakref.ref(node))

    def _expand(self, key, spec, made, fused_in):
        """The Node of a fused task (dask's linear fusion of a chain of tasks, which dask runs
        with its own small scheduler inside one task): one Node per task of its inner graph,
        so that each runs as a task of its own (an intermediate value is freed as soon as the
        next one has run; the trace shows each). Returns the Node of its output."""
        inner, outkey, inkeys, inputs = _fused_parts(spec)
        scope = {}  # the inner graph's keys: inner names may repeat in other fused tasks
        part = key if fused_in is None else fused_in
        for ik, a in zip(inkeys, inputs):
            if type(a) is TaskRef:
                scope[ik] = made[a.key]
            elif type(a) is Alias:
                scope[ik] = made[a.target]
            elif type(a) is DataNode:
                self._build(ik, (_DATA, a.value, ()), scope, part)
            elif isinstance(a, GraphNode):  # evaluated with the values of the graph's keys
                deps = tuple(a.dependencies)
                scope[ik] = self._task_for(ik)(self.context, _run_spec, a, deps,
                                               *[made[d] for d in deps])
                self._made(scope[ik], _Part(part, ik))
            else:
                self._build(ik, (_DATA, a, ()), scope, part)
        self._walk([outkey], inner, scope, part)
        return scope[outkey]

    # ------------------------------------------------------------------ errors
    def _label(self, exc):
        """The label of the Node of ours whose task raised exc, or None. taskgraph's note
        marks exc with the Node's key, made of its thread's number and a counter: the Nodes
        made here have consecutive numbers from the first one's."""
        mark = get_mark(exc, "__taskgraph_task__")
        if not isinstance(mark, str) or self.first is None:
            return None
        num = _key_number(mark)
        if num is None or num[0] != self.first[0]:
            return None
        i = num[1] - self.first[1]
        return self.order[i] if 0 <= i < len(self.order) else None

    def failure(self, exc):
        """What the compute of these Nodes should raise for exc, with a note naming the dask
        key whose task raised it. Inside a task and in serial mode, a target whose dependency
        failed raises CancelledError caused by that failure: the failure itself (a copy) is
        raised instead, as outside."""
        root = exc
        while isinstance(root, CancelledError) and isinstance(root.__cause__, BaseException):
            root = root.__cause__
        label = self._label(root)
        # Not raised by a task of this graph, as far as can be told: the root's mark names
        # another node, or there is no cause to go down to. (An exception that refused the
        # mark, a frozen dataclass, is raised without the note on the dask key.)
        if label is None and (root is exc or get_mark(root, "__taskgraph_task__") is not None):
            return exc
        if root is not exc:
            root = core.exception_copy(root)
            set_mark(root, "__suppress_context__", True)
        if label is not None:
            where = (f"dask key {label.key!r} (its fused task {label.part!r})"
                     if type(label) is _Part else f"dask key {label!r}")
            add_note(root, f"taskgraph.dask.get: raised by the task of {where}")
        for ref in self.track or ():
            n = ref()
            if n is not None and n.done():
                n.exception()  # seen: delivered to the caller here
        return root


def _key_number(node_key):
    """(thread, number) of a Node key "<name>-<thread>.<number>", or None."""
    _, _, tail = node_key.rpartition("-")
    thread, _, num = tail.partition(".")
    try:
        return int(thread), int(num)
    except ValueError:
        return None


class _Both:
    """The keys of the graph and of the cache, for dask's rule of what an argument refers to."""
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __contains__(self, k):
        return k in self.a or k in self.b
