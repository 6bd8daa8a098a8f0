"""Node: one call of a task, either lazy (built outside the workers, runs at compute time) or
spawned (created inside a running task, already on that worker's deque).

Representation: a Node is a ``list`` subclass with fixed slots (the constants below). This is
an internal choice for speed: free-threaded CPython 3.13 runs without the specializing
interpreter, where an attribute load or store costs about 47 ns but a list item about 26 ns,
and a Node with all its fields is built in one step. Users see only the methods and
properties; iterating, indexing or comparing a Node as a list is not part of the API
(equality and hashing are by identity).

A Node owns its C task record (slot T, a zero-filled ``tg_task`` allocated through cffi and
freed with the Node). The C core touches the record only while the node is in flight (claimed,
not finished); every in-flight node is reachable from Python (from its run's roots through the
arguments of pending consumers, or from its parent's list of children), so the record cannot be
freed under the core. See docs/design/scheduler.md.
"""
from __future__ import annotations

import time

from taskgraph import _context
from taskgraph._native import lib
from taskgraph.errors import SchedulerClosedError, TaskgraphError

__all__ = ["Node", "scan_nodes", "substitute", "deps_of", "NEW", "PENDING", "READY",
           "RUNNING", "DONE", "FAILED", "CANCELLED", "STATE_NAMES"]

NEW, PENDING, READY, RUNNING, DONE, FAILED, CANCELLED = range(7)
STATE_NAMES = ("new", "pending", "ready", "running", "done", "failed", "cancelled")

# Slots of a Node.
FN = 0      # the function to call
ARGS = 1    # positional arguments (tuple), dropped once the node ran
KWARGS = 2  # keyword arguments (dict), dropped once the node ran
DEPS = 3    # Nodes found in the arguments (list), () when none, None when not scanned yet
T = 4       # the C task record (cdata tg_task *)
ST = 5      # final state once known (DONE, FAILED, CANCELLED), else None
VAL = 6     # the value (DONE) or the exception (FAILED, CANCELLED)
H = 7       # cffi handle while queued (the C core's way back to the Node), else None
RUN = 8     # the Run it belongs to once claimed
PARENT = 9  # the Node whose task spawned this one, or None
KIDS = 10   # children spawned by its task and not yet known finished-and-seen, or None
SEEN = 11   # True once result()/exception() was called: its error has been observed
NAME = 12   # the task's name
ID = 13     # number for the key, given on first use of .key (0 until then)
SCHED = 14  # the Scheduler that claimed it, or None

_task_state = lib.tg_task_state
_set_id = lib.tg_task_set_id
_mode = _context.mode
_SERIAL = _context.SERIAL


class Node(list):
    """The result of calling a task: a node of the task graph.

    Outside a worker, calling a task builds a lazy Node and runs nothing. Inside a running task
    the call spawns the node at once onto the current worker's deque. A Node can be passed as
    an argument (anywhere inside lists, tuples, dicts and sets) to other tasks, which then
    depend on it and receive its value.
    """

    __slots__ = ("__weakref__",)
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    # ------------------------------------------------------------------ identity
    @property
    def key(self) -> str:
        """Readable, process-unique name: the task's name, the number of the thread that first
        asked, and that thread's counter, e.g. ``fib-3.1041``. Fixed on first use (threads
        that ask at the same time agree: the number is settled in C)."""
        i = self[ID]
        if not i:
            i = self[ID] = _set_id(self[T], _context.next_node_id())
        return f"{self[NAME]}-{i >> 40}.{i & 0xFFFFFFFFFF}"

    @property
    def name(self) -> str:
        """The task's name (the function's name unless ``@task(name=...)`` set one)."""
        return self[NAME]

    @property
    def state(self) -> str:
        """One of new, pending, ready, running, done, failed, cancelled."""
        st = self[ST]
        return STATE_NAMES[st if st is not None else _task_state(self[T])]

    @property
    def dependencies(self) -> tuple:
        """The Nodes found in this node's arguments, which it waits for. Empty once the node
        has finished: a finished node lets go of its inputs so they can be freed."""
        return tuple(deps_of(self))

    @property
    def parent(self):
        """The node whose task spawned this one (None for nodes built outside a worker)."""
        return self[PARENT]

    def __repr__(self):
        return f"<Node {self.key} {self.state}>"

    def __reduce__(self):
        raise TypeError(f"a taskgraph Node ({self.key}) cannot be pickled; pass its value")

    # ------------------------------------------------------------------ results
    def done(self) -> bool:
        """True when the node has finished: with a result, an exception, or cancelled.
        Never blocks, never starts a computation."""
        if self[ST] is not None:
            return True
        return _task_state(self[T]) >= DONE

    def result(self, timeout: float | None = None):
        """The node's value, computing it first if needed.

        * Outside a worker: a lazy node is computed on the default scheduler (like
          ``taskgraph.compute(node)``); a node already running elsewhere is waited for.
          ``timeout`` (seconds) raises ``TimeoutError`` if it is not done by then; the work
          goes on and a later call can wait again.
        * Inside a task: joins. The worker runs other tasks (its own children first, then
          stolen ones) until the node is done; the thread never blocks while there is work.
          ``timeout`` is not supported there (``TaskgraphError``). A task awaiting its own node
          raises ``TaskgraphError``.
        * On error: re-raises the task's own exception, with its original traceback and a note
          naming the task and the worker. A node that never ran raises ``CancelledError``
          saying why (a dependency failed, a sibling failed, Ctrl-C, the scheduler closed).
        """
        if timeout is not None:
            self._check_timeout_allowed()
        if self[ST] is None:
            self._wait(timeout)
        self[SEEN] = True
        if self[ST] == DONE:
            return self[VAL]
        raise self[VAL]

    def exception(self, timeout: float | None = None):
        """The exception the node finished with (None if it succeeded); waits like
        ``result()``. A cancelled node returns its ``CancelledError``."""
        if timeout is not None:
            self._check_timeout_allowed()
        if self[ST] is None:
            self._wait(timeout)
        self[SEEN] = True
        return None if self[ST] == DONE else self[VAL]

    def compute(self, **kwargs):
        """Same as ``taskgraph.compute(self, **kwargs)``."""
        return _context.api("compute")(self, **kwargs)

    def _check_timeout_allowed(self):
        m = _mode()
        if m is not None and m is not _SERIAL and (self[SCHED] is None or self[SCHED] is m.sched):
            raise TaskgraphError(
                f"result(timeout=...) of {self.key} inside task {m.current_key()}: a join "
                "inside a worker runs other work until the node is done and cannot time out")

    def _wait(self, timeout):
        m = _mode()
        if m is not None and m is not _SERIAL and (self[SCHED] is None or self[SCHED] is m.sched):
            m.join(self)
            return
        if _task_state(self[T]) == NEW:
            if m is _SERIAL:
                _context.api("run_serially")([self])
                return
            _context.api("default_scheduler")()._compute_nodes([self], timeout)
            return
        self._wait_polling(timeout)

    def _wait_polling(self, timeout):
        """Waits for a node in flight in another run, from a thread that is not one of that
        run's workers: polls the C state with growing sleeps (interruptible, no busy CPU)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0002
        while _task_state(self[T]) < DONE or self[ST] is None:
            sched = self[SCHED]
            if sched is not None and sched._drained and _task_state(self[T]) < DONE:
                raise SchedulerClosedError(
                    f"node {self.key} belongs to {sched!r}, which closed before it ran")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"node {self.key} not done after {timeout} s")
            time.sleep(delay)
            delay = min(delay * 2, 0.02)


# ---------------------------------------------------------------------- arguments
_CONTAINERS = (list, tuple, dict, set, frozenset)


def _scan_into(x, out):
    t = type(x)
    if t is Node:
        out.append(x)
    elif t is dict:
        for v in x.values():
            tv = type(v)
            if tv is Node:
                out.append(v)
            elif tv in _CONTAINERS:
                _scan_into(v, out)
    elif t in _CONTAINERS:
        for v in x:
            tv = type(v)
            if tv is Node:
                out.append(v)
            elif tv in _CONTAINERS:
                _scan_into(v, out)


def scan_nodes(args, kwargs=None, _nodey=None, type=type):
    """Nodes anywhere inside args (a tuple) and kwargs (a dict), without duplicates, in order
    of first appearance; () when there are none (the common fork-join case: checked with one
    set lookup per argument, names bound locally because globals are slow on 3.13t)."""
    for a in args:
        if type(a) in _nodey:
            break
    else:
        if not kwargs:
            return ()
    out = []
    _scan_into(args, out)
    if kwargs:
        _scan_into(kwargs, out)
    if len(out) > 1:
        seen = set()
        out = [n for n in out if not (id(n) in seen or seen.add(id(n)))]
    return out


scan_nodes.__defaults__ = (None, frozenset({Node, *_CONTAINERS}), type)


def deps_of(node):
    """The node's dependencies, scanning its arguments on first use."""
    d = node[DEPS]
    if d is None:
        args = node[ARGS]
        d = node[DEPS] = scan_nodes(args, node[KWARGS]) if args is not None else ()
    return d


def _value_of(n, consumer):
    st = n[ST]
    if st == DONE:
        return n[VAL]
    if st is None:
        raise TaskgraphError(
            f"task {consumer} received node {n.key}, which was not among its dependencies when "
            "it was submitted (was a list or dict changed after the call?) and is not finished")
    raise n[VAL]


def substitute(x, consumer="?"):
    """x with every Node inside lists, tuples, dicts, sets and frozensets replaced by its value.
    Containers holding a Node are rebuilt (same type); everything else, including containers
    without any Node, is passed through as the very same object."""
    t = type(x)
    if t is Node:
        return _value_of(x, consumer)
    if t is tuple or t is list:
        for i, v in enumerate(x):
            tv = type(v)
            if tv is Node or tv in _CONTAINERS:
                nv = substitute(v, consumer)
                if nv is not v:
                    out = list(x[:i])
                    out.append(nv)
                    out.extend(substitute(w, consumer) for w in x[i + 1:])
                    return out if t is list else tuple(out)
        return x
    if t is dict:
        for k, v in x.items():
            tv = type(v)
            if tv is Node or tv in _CONTAINERS:
                if substitute(v, consumer) is not v:
                    return {k2: substitute(v2, consumer) for k2, v2 in x.items()}
        return x
    if t is set or t is frozenset:
        if any(type(v) is Node or type(v) in _CONTAINERS for v in x):
            return t(substitute(v, consumer) for v in x)
        return x
    return x
