"""``tg.wait`` and ``tg.as_completed``: concurrent.futures' functions for Nodes. Lazy nodes are
started without blocking (as ``ray.wait`` does); the waiting thread is woken by the nodes' done
callbacks. Inside a task they join instead (the worker keeps running other tasks)."""
from __future__ import annotations

import concurrent.futures as _cf
import queue
import threading
import time
from collections import namedtuple

from taskgraph._native import core
from taskgraph.executor.nowait import submit_nowait
from taskgraph.errors import TaskgraphError
from taskgraph.runs import check_timeout

Node = core.Node

__all__ = ["wait", "as_completed", "FIRST_COMPLETED", "FIRST_EXCEPTION", "ALL_COMPLETED",
           "DoneAndNotDone"]

# The very constants of concurrent.futures, so code written for it keeps working.
FIRST_COMPLETED = _cf.FIRST_COMPLETED
FIRST_EXCEPTION = _cf.FIRST_EXCEPTION
ALL_COMPLETED = _cf.ALL_COMPLETED
_RETURN_WHEN = (FIRST_COMPLETED, FIRST_EXCEPTION, ALL_COMPLETED)

DoneAndNotDone = namedtuple("DoneAndNotDone", "done not_done")


def _nodes_of(nodes, fn):
    """The unique Nodes of an iterable, in order; TypeError naming what is not one."""
    if isinstance(nodes, Node):
        raise TypeError(f"tg.{fn} takes an iterable of Nodes, got one Node {nodes!r}: "
                        f"write tg.{fn}([node])")
    try:
        items = list(nodes)
    except TypeError:
        raise TypeError(f"tg.{fn} takes an iterable of Nodes, got {type(nodes).__name__} "
                        f"{nodes!r:.80}") from None
    for x in items:
        if not isinstance(x, Node):
            raise TypeError(f"tg.{fn} takes Nodes only, got {type(x).__name__} {x!r:.80}")
    return list(dict.fromkeys(items))


def _refuse_timeout_in_task(fn, timeout):
    if timeout is not None:
        raise TaskgraphError(f"tg.{fn}(timeout=...) inside a task: a join inside a worker runs "
                             "other work until a node is done and cannot time out")


def _blocking(seconds):
    """A wait's timeout for threading's blocking calls: None (no limit) for one beyond what
    they accept (``float('inf')``, or more than ``threading.TIMEOUT_MAX``, 292 years)."""
    return None if seconds is None or seconds > threading.TIMEOUT_MAX else seconds


def _satisfied(done, nodes, return_when):
    if len(done) == len(nodes):
        return True
    if return_when == FIRST_COMPLETED:
        return bool(done)
    # As concurrent.futures: a cancelled node is not an exception here.
    return return_when == FIRST_EXCEPTION and any(n.state == "failed" for n in done)


def wait(nodes, timeout=None, return_when=ALL_COMPLETED):
    """Waits until ``return_when`` holds for ``nodes`` (an iterable of Nodes) and returns
    ``(done, not_done)``, two sets, as ``concurrent.futures.wait``: ``ALL_COMPLETED``,
    ``FIRST_COMPLETED``, or ``FIRST_EXCEPTION`` (a node that failed; a cancelled one does not
    count, as in concurrent.futures; without one it is ALL_COMPLETED).

    * Outside a task: lazy nodes are started on the current scheduler without waiting, each as
      a compute of its own (one failing does not cancel the others); the call returns when
      the condition holds or after ``timeout`` seconds (no error: look at ``not_done``).
      Nothing is cancelled by it, on timeout or Ctrl-C (``KeyboardInterrupt`` propagates).
    * Inside a task: it joins the unfinished nodes one at a time, in the order given (the
      worker runs other tasks meanwhile), until the condition holds, so it may return later
      than the first completion; ``timeout`` is refused there (``TaskgraphError``).
    * In serial mode lazy nodes run at once, in this thread.
    * Errors: ``TypeError`` for something that is not a Node (or one Node instead of a list);
      ``ValueError`` for another ``return_when``; ``TypeError``/``ValueError`` for a bad
      ``timeout``; ``SchedulerClosedError`` if the current scheduler is closed. The nodes'
      own exceptions are not raised: ask each node.
    """
    nodes = _nodes_of(nodes, "wait")
    check_timeout(timeout)
    if return_when not in _RETURN_WHEN:
        raise ValueError(f"return_when must be FIRST_COMPLETED, FIRST_EXCEPTION or "
                         f"ALL_COMPLETED, got {return_when!r:.80}")
    if core._in_task():
        _refuse_timeout_in_task("wait", timeout)
        while not _satisfied([n for n in nodes if n.done()], nodes, return_when):
            for n in nodes:
                if not n.done():
                    n._wait()  # joins; a failure stays unread: the task's sync reports it
                    break
    elif not _satisfied([n for n in nodes if n.done()], nodes, return_when):
        _wait_outside(nodes, timeout, return_when)
    done = {n for n in nodes if n.done()}
    return DoneAndNotDone(done, set(nodes) - done)


def _wait_outside(nodes, timeout, return_when):
    pending = [n for n in nodes if not n.done()]
    submit_nowait(pending)
    woken = threading.Event()
    lock = threading.Lock()
    finished = set(nodes).difference(pending)  # the same snapshot as pending

    def on_done(node):  # on the thread that finished the node
        with lock:
            finished.add(node)
            hit = _satisfied(finished, nodes, return_when)
        if hit:
            woken.set()

    if _satisfied(finished, nodes, return_when):  # finished since the caller looked
        return
    try:
        for n in pending:
            n.add_done_callback(on_done)
        woken.wait(_blocking(timeout))
    finally:
        for n in pending:
            n.remove_done_callback(on_done)


def as_completed(nodes, timeout=None):
    """An iterator over ``nodes`` (an iterable of Nodes; duplicates once) that yields each node
    as it finishes (with a result, an exception or cancelled), as
    ``concurrent.futures.as_completed``: those finished already first.

    * Outside a task: lazy nodes are started at once, when ``as_completed`` is called,
      without waiting (each as a compute of its own). ``TimeoutError`` ("N (of M) nodes
      unfinished") from ``next()`` once ``timeout`` seconds have passed since the call;
      nothing is cancelled then, nor on Ctrl-C.
    * Inside a task: it joins the unfinished nodes in the order given (the worker runs other
      tasks meanwhile) and yields what has finished after each join; ``timeout`` is refused
      (``TaskgraphError``).
    * Errors: as ``tg.wait`` (checked at the call, not at the first ``next()``).
    """
    nodes = _nodes_of(nodes, "as_completed")
    check_timeout(timeout)
    if core._in_task():
        _refuse_timeout_in_task("as_completed", timeout)
        return _joined_in_order(nodes)
    end = None if timeout is None else time.monotonic() + timeout
    submit_nowait([n for n in nodes if not n.done()])
    return _yield_as_done(nodes, end, timeout)


def _joined_in_order(nodes):
    pending = list(nodes)
    while pending:
        done = [n for n in pending if n.done()]
        if not done:
            pending[0]._wait()  # joins (without reading the outcome: the caller does)
            continue
        for n in done:
            pending.remove(n)
            yield n


def _yield_as_done(nodes, end, timeout):
    ended = queue.SimpleQueue()
    pending = set()
    for n in nodes:
        if not n.done():
            pending.add(n)
            n.add_done_callback(ended.put)  # called at once if it finished meanwhile
    try:
        for n in nodes:
            if n not in pending:
                yield n
        while pending:
            left = None if end is None else end - time.monotonic()
            try:
                if left is not None and left <= 0:
                    raise queue.Empty
                n = ended.get(timeout=_blocking(left))
            except queue.Empty:
                raise TimeoutError(f"{len(pending)} (of {len(nodes)}) nodes unfinished after "
                                   f"{timeout} s") from None
            if n in pending:
                pending.discard(n)
                yield n
    finally:
        for n in pending:
            n.remove_done_callback(ended.put)
