"""The ``@task`` decorator and the Task wrapper it returns."""
from __future__ import annotations

import functools

from taskgraph import _context
from taskgraph._native import ffi
from taskgraph.node import Node

__all__ = ["Task", "task"]

_mode = _context.mode
_SERIAL = _context.SERIAL
_new_task = ffi.new


class Task:
    """A function made into a task. Calling it returns a :class:`Node`:

    * outside a worker: a lazy Node; nothing runs until ``compute``/``result``;
    * inside a running task: the Node is spawned at once onto this worker's deque (idle workers
      may steal it) and the caller keeps running; join it with ``result()``;
    * inside ``with taskgraph.serial():``: the function runs at once in the calling thread and
      the returned Node is already finished (its exception, if any, is raised by ``result()``).

    Arguments may contain Nodes anywhere inside lists, tuples, dicts and sets (args and
    kwargs); the task then depends on them and receives their values. ``fn`` is the
    undecorated function. Tasks work as methods too (the instance is passed as usual).
    """

    __slots__ = ("fn", "name", "__dict__", "__weakref__")

    def __init__(self, fn, name=None):
        if not callable(fn):
            raise TypeError(f"taskgraph.task needs a callable, got {type(fn).__name__} {fn!r}")
        if isinstance(fn, Task):
            fn = fn.fn
        self.fn = fn
        self.name = name if name is not None else _name_of(fn)
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"task name must be a non-empty str, got {self.name!r}")
        try:
            functools.update_wrapper(self, fn)
        except (AttributeError, TypeError):  # e.g. functools.partial, builtins
            pass

    def __call__(self, *args, **kwargs):
        # The layout of taskgraph.node.Node: FN ARGS KWARGS DEPS T ST VAL H RUN PARENT KIDS
        # SEEN NAME ID SCHED (built in one step: see node.py on why a list).
        node = Node((self.fn, args, kwargs, None, _new_task("tg_task *"), None, None, None,
                     None, None, None, False, self.name, 0, None))
        mode = _mode()
        if mode is not None:
            if mode is _SERIAL:
                _context.api("run_serially")([node])
            else:
                mode.spawn(node)
        return node

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self):
        return f"<taskgraph.Task {self.name}>"


def _name_of(fn):
    name = getattr(fn, "__name__", None)
    if name is None and isinstance(fn, functools.partial):
        name = getattr(fn.func, "__name__", None)
    if name is None:
        name = type(fn).__name__
    return "lambda" if name == "<lambda>" else name


_NO_FN = object()


def task(fn=_NO_FN, *, name: str | None = None):
    """Make a function into a task: ``@task``, ``@task(name="fib")`` or ``task(f)``.

    Errors: a non-callable raises ``TypeError`` naming it; so does a bad ``name``. Nothing runs
    at decoration time, inside or outside a worker.
    """
    if fn is _NO_FN:
        return lambda f: Task(f, name=name)
    return Task(fn, name=name)
