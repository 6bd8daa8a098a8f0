"""Runs: one compute() of a lazy graph from outside the workers. The graph is submitted in one
C call (``Engine.submit``: claim, edges, release), then the caller waits for the run's last
task, in short slices so that Ctrl-C and a timeout are seen at once."""
from __future__ import annotations

import time

from taskgraph._native import core
from taskgraph._state import State

__all__ = ["compute_nodes", "raise_first_error", "check_timeout", "refuse_nodes_of_runs_before_fork"]

# How often a thread waiting in compute() wakes up. Free-threaded CPython frees an object in
# the thread that created it: objects made on the caller's thread (task arguments) and dropped
# by the workers are only freed when the caller runs Python code again. (Lazy nodes give up
# their owner thread when made, docs/design/native.md, so their results do not wait.) Waking
# every 2 ms keeps such objects from piling up during long runs, for about 0.5% of a core.
WAIT_SLICE = 0.002


def check_timeout(timeout):
    """A compute's timeout: None or a number >= 0 (TypeError / ValueError naming it), checked
    before anything is submitted."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number >= 0 or None, got {type(timeout).__name__} "
                        f"{timeout!r:.80}")
    if not timeout >= 0:  # also NaN
        raise ValueError(f"timeout must be a number >= 0 or None, got {timeout!r}")


# Set in a child process after fork() if schedulers existed before it (scheduler.py's hook):
# computes there first check that the graph has no unfinished node of the parent's runs.
after_fork = False


def refuse_nodes_of_runs_before_fork(nodes):
    """In a child process after fork(): SchedulerClosedError if the lazy graph under nodes
    reaches an unfinished node of a compute started before the fork (its scheduler's threads
    are gone: it would never finish, and neither would what waits for it)."""
    seen = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if id(n) in seen or n.done():
            continue
        seen.add(id(n))
        core._check_owner(n)
        if State.of(n) is State.NEW:
            stack.extend(n.dependencies)


def compute_nodes(sched, nodes, timeout=None, progress=False, cancel_on_timeout=False):
    """Submits the lazy graph under nodes to sched as one run and waits until every node has
    finished. Returns the run (None when nothing had to run). Ctrl-C cancels the run and
    re-raises within about half a second. A timeout raises TimeoutError; with
    cancel_on_timeout (compute's deadline) it first cancels what has not started, else
    (result(timeout)) the work goes on."""
    pending = core.not_done(nodes)  # [n for n in nodes if not n.done()], in one C loop
    if not pending:
        return None
    if after_fork:
        refuse_nodes_of_runs_before_fork(pending)
    run = sched._engine.new_run()
    bar = None
    if progress:
        from taskgraph._progress import ProgressBar  # imports tqdm if installed: only when asked
        bar = ProgressBar(sched)  # counters read before anything starts
    try:
        total, others = sched._engine.submit(run, pending)
        if bar is not None:
            bar.set_total(total)
        _wait_run(run, timeout, bar, cancel_on_timeout)
    except KeyboardInterrupt:
        run.cancel("interrupted (KeyboardInterrupt)")
        run.wait(0.5)  # give running tasks a moment; never longer
        raise
    finally:
        if bar is not None:
            bar.close()
    if others:  # some were claimed by another run (a concurrent compute): awaited
        deadline = None if timeout is None else time.monotonic() + timeout
        for n in core.not_done(pending):
            n.exception(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return run


def _wait_run(run, timeout, bar, cancel_on_timeout):
    deadline = None if timeout is None else time.monotonic() + timeout
    last_bar = time.monotonic()
    while True:
        step = WAIT_SLICE
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                if cancel_on_timeout:
                    run.cancel(f"the compute timed out after {timeout} s")
                    raise TimeoutError(f"compute did not finish within {timeout} s: what had "
                                       "not started was cancelled (tasks still running finish "
                                       "in the background; they can check tg.cancelled())")
                raise TimeoutError(f"not done within {timeout} s (the work goes on; call "
                                   "result() to wait again)")
            step = min(step, left)
        if run.wait(step):
            if bar is not None:
                bar.finish()
            return
        if bar is not None and time.monotonic() - last_bar > 0.1:
            bar.update()
            last_bar = time.monotonic()


def raise_first_error(nodes, root):
    """Raises the root cause of the first node that did not finish with a result: `root`, the
    run's first failure, if there was one (a node cancelled by fail-fast raises what failed), else
    the node's own exception. Marks every node's outcome as observed. Like ``result()``, it
    raises a copy of the stored exception (``core.exception_copy``): each caller's traceback
    is its own and the stored one never grows."""
    first = core.first_error(nodes)  # n.exception() of each, in one C loop
    if first is not None:
        raise core.exception_copy(root if root is not None else first)
