"""The future that ``taskgraph.Executor.submit`` returns: a ``concurrent.futures.Future``
subclass, so that ``concurrent.futures.wait``, ``as_completed``, ``asyncio.wrap_future`` and
``loop.run_in_executor`` take it as they take any other.

Two things differ from the base class, both under the same rules (state, waiters and
callbacks change only under ``_condition``):

* ``_condition`` is a ``threading.RLock``, not a ``threading.Condition`` over one. That is
  all ``wait()``, ``as_completed()`` and the base class's methods ask of it (acquire and
  release, re-entrantly: ``wait()`` calls ``f.exception()`` with ``f._condition`` held);
  the Condition that a blocking ``result()`` or ``exception()`` sleeps on is made over that
  lock by the first such waiter (``_cv``), and notified whenever the state becomes final. A
  Condition costs about 1.2 us to make on CPython 3.13t, 80 % of a plain Future's creation
  (docs/benchmarks.md, "Executor"), and most futures are never waited for while pending.
* Inside a worker thread, ``result()`` and ``exception()`` without a timeout join the
  future's node first (as ``node.result()`` does in a task): the worker runs other work
  until the node is done, so a task that waits for futures it submitted never deadlocks
  the pool. With a timeout they block like the base class's.

The worker runs the call and completes the future in C (the node's work item, csrc/py/
executor.c: the common case of set_running_or_notify_cancel and set_result there, every
other case in the methods below); a call that left children behind is completed once its
node has synced them (``_tg_settle``); a work item dropped without having run cancels its
future, or fails it with ``BrokenThreadPool`` when the executor broke (``_tg_never_ran``).
"""
from __future__ import annotations

import _thread
import threading
from concurrent import futures as _cf
from concurrent.futures._base import (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, LOGGER as _LOGGER,
                                      PENDING, RUNNING, BrokenExecutor, InvalidStateError)
from concurrent.futures.thread import BrokenThreadPool

from taskgraph._native import core
from taskgraph.errors import BrokenSchedulerError, add_note, get_mark

__all__ = ["Future"]

# threading.RLock's C type: re-entrant like the base class's Condition (wait() calls
# f.exception() with f._condition held).
_Lock = _thread.RLock
_Condition = threading.Condition
_current_node = core.current_node
_CancelledError = _cf.CancelledError
_DONE = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)


class _Waiters:
    """``_waiters``, made on first use: ``concurrent.futures.wait`` and ``as_completed`` append
    to it (and remove from it) under ``_condition``; most futures never have a waiter. A
    non-data descriptor: once made, the instance's own list is found first."""

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        waiters = obj._waiters = []
        obj._any_waiters = True
        return waiters


class Future(_cf.Future):
    """A ``concurrent.futures.Future`` made by ``taskgraph.Executor.submit`` (see the module's
    docstring for how it differs inside): results, exceptions, cancellation, callbacks and
    waiting behave as the base class documents."""

    # What Future.__init__ sets per instance, as slots: a store or a read is a member
    # descriptor's, not a lookup in the instance's values (CPython 3.13t does not specialise
    # attribute access: a store there costs about 350 instructions), and Executor.submit
    # fills them in C straight after allocation (csrc/py/executor.c's new_future: keep the
    # two alike). _condition is an RLock where the base makes a Condition; _waiters stays in
    # the instance's dict, made on first use (_Waiters).
    __slots__ = ("_condition", "_node", "_state", "_result", "_exception", "_cv",
                 "_any_waiters", "_done_callbacks")
    _waiters = _Waiters()

    def __init__(self):
        self._condition = _Lock()
        self._node = None          # the Node that runs the call (joined inside a worker)
        self._state = PENDING
        self._result = None
        self._exception = None
        self._cv = None            # the Condition over _condition, made by a blocking waiter
        self._any_waiters = False
        self._done_callbacks = ()  # a list once a callback is added (add_done_callback)

    # ------------------------------------------------------------------ waiting
    def _sleep(self, timeout):
        """Waits (``_condition`` held) until notified or timeout seconds passed."""
        cv = self._cv
        if cv is None:
            cv = self._cv = _Condition(self._condition)
        cv.wait(timeout)

    def _notify(self):
        """The state became final (``_condition`` held): wakes the blocking waiters."""
        if self._cv is not None:
            self._cv.notify_all()

    def _join(self):
        """Inside a task: joins the node (the worker runs other work until it is done), so
        that the wait below finds the future finished. Outside a task: nothing."""
        if self._state in (PENDING, RUNNING) and _current_node() is not None:
            node = self._node
            if node is not None:
                node.exception()  # joins (returns a failure, never raises it: the future
                                  # gets the call's outcome from the node or its work item)

    # result(timeout=None) is installed by core._exec_configure (taskgraph/executor/executor.py):
    # the common case (finished with a value) in C (csrc/py/executor.c's future_result), the
    # rest here.
    def _result_slow(self, timeout=None):
        """result() but for its common case: as ``concurrent.futures.Future.result``; inside
        a task, without a timeout, it joins (see the module's docstring)."""
        if timeout is None:
            self._join()
        try:
            with self._condition:
                state = self._state
                if state == FINISHED:
                    return self.__get_result()
                if state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                    raise _CancelledError()
                self._sleep(timeout)
                state = self._state
                if state == FINISHED:
                    return self.__get_result()
                if state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                    raise _CancelledError()
                raise TimeoutError()
        finally:
            self = None  # no cycle through the raised exception's traceback

    def exception(self, timeout=None):
        """As ``concurrent.futures.Future.exception``; inside a task, without a timeout, it
        joins (see the module's docstring)."""
        if timeout is None:
            self._join()
        with self._condition:
            state = self._state
            if state == FINISHED:
                return self._exception
            if state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                raise _CancelledError()
            self._sleep(timeout)
            state = self._state
            if state == FINISHED:
                return self._exception
            if state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                raise _CancelledError()
            raise TimeoutError()

    def __get_result(self):
        if self._exception is not None:
            try:
                raise self._exception
            finally:
                self = None  # no cycle through the exception's traceback
        return self._result

    def add_done_callback(self, fn):
        """As ``concurrent.futures.Future.add_done_callback``: fn(future) when it finishes or
        is cancelled, on the thread that completes it, or at once if it is done already."""
        with self._condition:
            if self._state not in _DONE:
                if self._done_callbacks == ():
                    self._done_callbacks = []
                self._done_callbacks.append(fn)
                return
        try:
            fn(self)
        except Exception:
            _LOGGER.exception('exception calling callback for %r', self)

    # ------------------------------------------------------------------ completing
    def cancel(self):
        """As ``concurrent.futures.Future.cancel``: True unless the call is running or done.
        A cancelled call never runs."""
        with self._condition:
            if self._state in (RUNNING, FINISHED):
                return False
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                return True
            self._state = CANCELLED
            self._notify()
        self._invoke_callbacks()
        return True

    def set_result(self, result):
        with self._condition:
            if self._state in _DONE:
                raise InvalidStateError('{}: {!r}'.format(self._state, self))
            self._result = result
            self._state = FINISHED
            if self._any_waiters:
                for waiter in self._waiters:
                    waiter.add_result(self)
            self._notify()
        if self._done_callbacks:
            self._invoke_callbacks()

    def set_exception(self, exception):
        with self._condition:
            if self._state in _DONE:
                raise InvalidStateError('{}: {!r}'.format(self._state, self))
            self._exception = exception
            self._state = FINISHED
            if self._any_waiters:
                for waiter in self._waiters:
                    waiter.add_exception(self)
            self._notify()
        if self._done_callbacks:
            self._invoke_callbacks()

    # ------------------------------------------------------------------ the worker's side
    # The call itself runs in C (csrc/py/executor.c's run_call: PENDING -> RUNNING, the call,
    # RUNNING -> FINISHED with the result, the callbacks), with every other case here.
    def _tg_start(self):
        """The call is about to run and the future was not PENDING: True if it may run
        (PENDING after all), else False, a cancelled future being marked notified as
        ``set_running_or_notify_cancel`` does (the call then never runs)."""
        with self._condition:
            state = self._state
            if state is PENDING:
                self._state = RUNNING
                return True
            if state is CANCELLED:
                self._state = CANCELLED_AND_NOTIFIED
                if self._any_waiters:
                    for waiter in self._waiters:
                        waiter.add_cancelled(self)
            return False

    def _tg_failed(self, exc, node=None):
        """The call raised exc (any BaseException): noted (task, thread) and stored. node: the
        call's node, when it is not the current one."""
        node = node or _current_node()
        add_note(exc, f"taskgraph.Executor: raised by task "
                      f"{node.key if node is not None else '?'} on thread "
                      f"{threading.current_thread().name}")
        self.set_exception(exc)

    def _tg_settle(self, node):
        """A done callback of the call's node, for a call that left children behind (tasks it
        called, graphs it computed): the node's outcome is the call's own, or the failure of
        a child nobody read (its sync's rule, as for any task); the future gets it now that
        the node has synced them. Runs on the finishing worker, as no task."""
        exc = node.exception()  # finished: no wait; its failure is read here
        if exc is None:
            self.set_result(node.result())
        elif get_mark(exc, "__taskgraph_task__") is not None:  # noted by taskgraph already
            self.set_exception(exc)
        else:
            self._tg_failed(exc, node)

    def _tg_never_ran(self, why=None):
        """The call was dropped without running (its node was skipped, with the CancelledError
        why: the executor was shut down with cancel_futures=True, or broke, or its scheduler
        closed): the future ends cancelled, or, when the executor broke (why's cause is a
        BrokenThreadPool, or a BrokenSchedulerError of its scheduler), fails with
        BrokenThreadPool as ThreadPoolExecutor's pending calls do; waiters and callbacks are
        told."""
        cause = getattr(why, "__cause__", None)
        broken = None  # one of its own per future, as ThreadPoolExecutor makes them
        if isinstance(cause, (BrokenExecutor, BrokenSchedulerError)):
            broken = BrokenThreadPool(str(cause))
        with self._condition:
            state = self._state
            if state not in (PENDING, CANCELLED):
                return
            if broken is not None and state is PENDING:
                self._exception = broken
                self._state = FINISHED
                if self._any_waiters:
                    for waiter in self._waiters:
                        waiter.add_exception(self)
            else:
                self._state = CANCELLED_AND_NOTIFIED
                if self._any_waiters:
                    for waiter in self._waiters:
                        waiter.add_cancelled(self)
            self._notify()
        if state == PENDING:
            self._invoke_callbacks()

