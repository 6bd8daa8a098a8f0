"""Saving a lazy graph to a file, and loading it back to run it later or elsewhere.

    tg.save([x, y], "work.tggraph")
    x2, y2 = tg.load("work.tggraph")    # new lazy Nodes; compute them on any scheduler

**Loading a graph file runs code.** The file holds the tasks' functions and arguments pickled
with cloudpickle, and unpickling can execute anything: load only files you trust, as with any
pickle. A file is checked (its header, version, length and SHA-256) before anything in it is
unpickled, so a damaged or foreign file is refused with ``GraphFileError`` without running it.
"""
from __future__ import annotations

import hashlib
import os
import struct

import cloudpickle

from taskgraph._graph import export, pickling_error, walk
from taskgraph._paths import fspath
from taskgraph._native import core
from taskgraph.task import Task

__all__ = ["save", "load", "GraphFileError", "FORMAT_VERSION"]

MAGIC = b"\x89taskgraph-graph\r\n\x1a\n"
FORMAT_VERSION = 1
_HEAD = struct.Struct("<HQ32s")  # version, payload length, sha256 of the payload

Node = core.Node


class GraphFileError(ValueError):
    """A file that tg.load cannot read: not a taskgraph graph file, another format version,
    truncated or damaged. Nothing in it was run."""


def _targets(nodes):
    single = isinstance(nodes, Node)
    if not single and not hasattr(type(nodes), "__iter__"):
        raise TypeError(f"tg.save takes a Node or a list of Nodes, got {type(nodes).__name__} "
                        f"{nodes!r:.80}")
    targets = [nodes] if single else list(nodes)
    for t in targets:
        if not isinstance(t, Node):
            raise TypeError(f"tg.save takes a Node or a list of Nodes, got {type(t).__name__} {t!r:.80}")
    return single, targets


def save(nodes, path) -> None:
    """Writes the lazy graph under `nodes` (a Node or a list of Nodes) to `path`.

    Nodes that already finished with a result are saved as their values. Errors: a node that
    is running or failed cannot be saved (``ValueError``, naming it); a function or argument
    that cannot be pickled raises ``TypeError`` naming its task; ``OSError`` if the file cannot
    be written. Inside or outside a worker alike; nothing runs.
    """
    single, targets = _targets(nodes)
    path = fspath(path, "tg.save")
    order, other = walk(targets)
    if other:
        n = other[0]
        raise ValueError(f"cannot save node {n.key}: it is {n.state} (save a graph before computing "
                         "it, or once it has finished)")
    entries, index = export(order)
    outs = [("ref", index[t]) if t in index else ("value", t.result()) for t in targets]
    # Functions as Tasks (with their names and retry options): a module-level task is then
    # saved by reference (Task.__reduce__).
    rows = [(e.key, e.name, e.task(), e.args, e.nargs, e.kwnames, e.deps)
            for e in entries]
    try:
        payload = cloudpickle.dumps({"entries": rows, "targets": outs, "single": single})
    except Exception as exc:
        err = pickling_error(entries, exc, "cannot be pickled (the graph was not saved)")
        raise err from err.__cause__
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + _HEAD.pack(FORMAT_VERSION, len(payload), hashlib.sha256(payload).digest()))
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load(path):
    """Reads a graph written by ``save`` and builds it again as new lazy Nodes (with new keys):
    returns one Node, or a list, as it was saved (values of nodes that had finished come back
    as they are).

    **Runs code**: see the module's warning. Errors: ``GraphFileError`` for a file that is not a
    graph file, of another version, truncated or damaged (checked before anything is
    unpickled); ``OSError`` if it cannot be read. Outside a worker the Nodes are lazy; inside a
    task, building them spawns them, as calling the tasks there would.
    """
    path = fspath(path, "tg.load")
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        raise GraphFileError(f"{path}: not a taskgraph graph file")
    head = data[len(MAGIC):len(MAGIC) + _HEAD.size]
    if len(head) < _HEAD.size:
        raise GraphFileError(f"{path}: truncated taskgraph graph file (no complete header)")
    version, length, digest = _HEAD.unpack(head)
    if version != FORMAT_VERSION:
        raise GraphFileError(f"{path}: graph file version {version}; this taskgraph reads "
                             f"version {FORMAT_VERSION}")
    payload = data[len(MAGIC) + _HEAD.size:]
    if len(payload) != length:
        raise GraphFileError(f"{path}: truncated or damaged taskgraph graph file "
                             f"({len(payload)} of {length} bytes)")
    if hashlib.sha256(payload).digest() != digest:
        raise GraphFileError(f"{path}: damaged taskgraph graph file (checksum mismatch)")
    try:
        doc = cloudpickle.loads(payload)
        rows, outs, single = doc["entries"], doc["targets"], doc["single"]
    except Exception as e:  # the checksum matched: written by another version, most likely
        raise GraphFileError(f"{path}: unreadable taskgraph graph file ({type(e).__name__}: {e})") from None
    nodes = []
    for key, name, fn, args, nargs, kwnames, deps in rows:
        args = core.from_refs(args, [nodes[j] for j in deps], name)
        if not isinstance(fn, Task):
            raise GraphFileError(f"{path}: unreadable taskgraph graph file (row {key!r} holds no task)")
        node = fn(*args[:nargs], **dict(zip(kwnames, args[nargs:])))  # the Task, as saved
        nodes.append(node)
    results = [nodes[v] if kind == "ref" else v for kind, v in outs]
    return results[0] if single else results
