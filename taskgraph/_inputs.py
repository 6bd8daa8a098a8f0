"""The inputs of ``tg.map`` and ``Executor.map``: one table of the kinds they accept, and one
plan per kind.

``tg.map`` reads each input at its own best (never copying it into a list when it need not):

- **index** (``list``, ``tuple``, ``range``): read in place by index, in C (a range makes
  its numbers on the worker that needs them);
- **slice** (``str``, ``bytes``, ``bytearray``, ``array.array``, numpy arrays): a block at a
  time, ``items[lo:hi]``;
- **copy** (``dict``, its keys; dict views ``keys()``, ``values()``, ``items()``; ``set``,
  ``frozenset``, ``collections.deque``): copied into a list (one C loop, faster than pulling
  them: their own iteration is that loop), then read by index;
- **pull** (anything else: generators, iterators, user sequences, ``memoryview``): pulled in
  chunks, in order, under a lock, while earlier chunks run.

Types are matched exactly (a subclass may iterate otherwise: it is pulled).

Several inputs are zipped: when none is pulled, the copied ones are copied and all are read a
block at a time, zipped (plan "zip"; they stop at the shortest, as ``zip``); when one is
pulled, ``zip(*inputs)`` is pulled (so each input is read exactly as ``builtins.map`` reads it,
and an input that raises does so at the same item).

What ``builtins.map`` does that a parallel map cannot: read an input while ``fn`` changes it.
An input read by index, slice or copy whose length changes while the map runs raises
``RuntimeError`` for the first item it lost (or, when it grew, the first item the map did not
run), never results computed from deleted items: builtins.map raises ``RuntimeError`` too for
a dict view, a set or a deque that changes size (with the same words, which the message
starts with), and would read a list's new length. A pulled input is read ahead of ``fn``
(chunks run while the next is pulled): one that has a length and ends up shorter than what
was read from it raises the same way (a growth is read, as builtins.map reads it).

``Executor.map`` reads its inputs when it is called, as ``concurrent.futures`` does: every
kind is snapshotted into a list there (``zip(*inputs)`` for several; an input that raises does
so in ``map()``), except with ``buffersize``, which pulls ``zip(*inputs)`` lazily.
"""
from __future__ import annotations

import array
import collections

__all__ = ["plan", "resized"]

# Sequences whose slices are cheap and iterate like the sequence itself. Not memoryview: on
# the free-threaded build, slicing one memoryview from several threads at once can release it
# under them (CPython gh-155606); a memoryview is pulled, one thread at a time.
_SLICEABLE = (str, bytes, bytearray, array.array)
# Sized containers that cannot be indexed but copy into a list in one C loop faster than they
# can be pulled in chunks (a million dict keys: 69 ms of CPU copied and mapped by index,
# against 99 ms pulled; their own iteration is that same C loop).
_DICT_VIEWS = (dict, type({}.keys()), type({}.values()), type({}.items()))
_COPIED = _DICT_VIEWS + (set, frozenset, collections.deque)
# What builtins.map raises when one of them changes size while it is read (the same words).
_BUILTIN_WORDS = {**{t: "dictionary changed size during iteration" for t in _DICT_VIEWS},
                  set: "Set changed size during iteration",
                  frozenset: "Set changed size during iteration",
                  collections.deque: "deque mutated during iteration"}


def kind(x) -> str:
    """How tg.map reads the input x on its own: "index", "slice", "copy" or "pull"."""
    t = type(x)
    if t is list or t is tuple or t is range:
        return "index"
    if t in _COPIED:
        return "copy"
    if t in _SLICEABLE or (t.__name__ == "ndarray" and t.__module__ == "numpy"):
        return "slice"
    return "pull"


def _length(x):
    """len(x) of a pulled input that has one, else None (a generator; a __len__ that raises
    or does not give an int: such an input is not watched)."""
    if not hasattr(type(x), "__len__"):
        return None
    try:
        n = len(x)
    except Exception:  # noqa: BLE001 - the user's __len__: a look, never an error of the map
        return None
    return n


def plan(iterables):
    """(kind, src, n, sized) for tg.map's inputs (see the table above): kind is "index",
    "slice", "zip" (src: the tuple of inputs, copied ones copied) or "pull" (src: the input,
    or zip() of them); n the number of items (None when pulled); sized the (position, input,
    length) of each input whose length is watched (every one, and a pulled one that has a
    length)."""
    kinds = [kind(x) for x in iterables]
    if "pull" in kinds:
        sized = tuple((k, x, m) for k, x in enumerate(iterables)
                      if (m := _length(x)) is not None)
        return "pull", iterables[0] if len(iterables) == 1 else zip(*iterables), None, sized
    sized = tuple((k, x, len(x)) for k, x in enumerate(iterables))
    xs = [list(x) if k == "copy" else x for x, k in zip(iterables, kinds)]
    if len(xs) == 1:
        return ("index" if kinds[0] == "copy" else kinds[0]), xs[0], len(xs[0]), sized
    return "zip", tuple(xs), min(len(x) for x in xs), sized


def resized(sized, n, pulled=False):
    """(item, RuntimeError) if an input of `sized` (plan's) changed length since the map
    started over n items (pulled: n items were read): item is the first one an input lost
    (the smallest new length below n) or, if none lost one and the input was not pulled, n
    (the first item the map did not run); else None."""
    changed = []
    for k, x, was in sized:
        now = _length(x) if pulled else len(x)
        if now is not None and now != was and (now < n or not pulled):
            changed.append((k, x, was, now))
    if not changed:
        return None
    item = min([now for _, _, _, now in changed if now < n] or [n])
    k, x, was, now = min(changed, key=lambda c: c[3])
    which = f"input {k + 1}" if len(sized) > 1 else "the input"
    facts = (f"taskgraph.map: {which} ({type(x).__name__}) changed size while map was "
             f"running: {was} items when it started, {now} now")
    words = _BUILTIN_WORDS.get(type(x))
    return item, RuntimeError(f"{words} ({facts})" if words else facts)
