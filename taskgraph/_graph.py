"""A lazy graph as plain data: what another process needs to run it (the dask backend) or to
rebuild it later (tg.save / tg.load).

Every node of the graph becomes an Entry: its task's function and arguments, with each Node
among the arguments replaced by ``Ref(k)``: the k-th of the entry's dependencies, whose
indices among the entries are in ``deps`` (``core.to_refs``; the container types are kept by
the same rules as when a task runs). So the arguments come back with
``core.from_refs(entry.args, [value of each dep, in deps order])``.
Dependencies that already finished with a result are not entries: their values stand in the
arguments instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import cloudpickle

from taskgraph._native import core
from taskgraph._state import State
from taskgraph.task import Task

__all__ = ["Entry", "walk", "export", "pickling_error"]



@dataclass
class Entry:
    """One node, as data."""
    key: str        # the node's key where it was built
    name: str       # its task's name
    fn: object      # the function
    args: tuple     # the positional arguments, then the keyword values; Ref(k) = deps[k]
    nargs: int      # how many of args are positional
    kwnames: tuple  # the keyword names
    deps: tuple     # indices of the entries it depends on, in the order of the Refs
    retries: int = 0         # the task's retry options (Task(..., retries=, retry_on=))
    retry_on: object = None

    def task(self):
        """The entry's function as a Task with its name and retry options: a module-level
        task is then pickled by reference (Task.__reduce__)."""
        return Task(self.fn, name=self.name, retries=self.retries,
                    retry_on=self.retry_on if self.retries else None)


def walk(targets):
    """The nodes under targets that have not finished with a result: (new, other). `new` is the
    NEW nodes in dependency order (each after what it depends on); `other` the nodes that are
    running somewhere, failed or were cancelled (their dependencies are not walked)."""
    order, seen, other = [], set(), []
    stack = [(n, False) for n in reversed(targets)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            order.append(n)
            continue
        if n in seen:
            continue
        seen.add(n)
        st = State.of(n)
        if st is State.DONE:
            continue
        if st is not State.NEW:
            other.append(n)
            continue
        stack.append((n, True))
        stack.extend((d, False) for d in reversed(n.dependencies) if d not in seen)
    return order, other


def export(nodes):
    """The entries of `nodes` (NEW nodes in dependency order, as from walk()): a list, and the
    index of each node. A node that ran meanwhile (another compute took it) raises ValueError."""
    index, entries = {}, []
    for n in nodes:
        inputs = core._inputs(n)
        if inputs is None:
            raise ValueError(f"node {n.key} ran while its graph was being exported")
        fn, args, nargs, kwnames, retries, retry_on = inputs
        mine = [d for d in n.dependencies if d in index]
        entries.append(Entry(key=n.key, name=n.name, fn=fn,
                             args=core.to_refs(args, {d: k for k, d in enumerate(mine)}, n.name),
                             nargs=nargs, kwnames=tuple(kwnames or ()),
                             deps=tuple(index[d] for d in mine), retries=retries,
                             retry_on=retry_on))
        index[n] = len(entries) - 1
    return entries, index


def pickling_error(entries, exc, what):
    """The TypeError to raise when pickling `entries` failed with `exc`: it names the first
    task whose function or argument cannot be pickled, and that value. `what` says what was
    being done, e.g. "cannot be sent to the cluster"."""
    for e in entries:
        for part, obj in [("function", e.fn)] + [(f"argument {i}", a) for i, a in enumerate(e.args)]:
            try:
                cloudpickle.dumps(obj)
            except Exception as inner:
                err = TypeError(f"task {e.key}: its {part} {obj!r:.80} {what} "
                                f"({type(inner).__name__}: {inner})")
                err.__cause__ = inner
                return err
    err = TypeError(f"tasks {', '.join(e.key for e in entries[:3])}: {what}: "
                    f"{type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err
