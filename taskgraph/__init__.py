"""taskgraph: task graphs and fork-join on a work-stealing scheduler for free-threaded Python.

    import taskgraph as tg

    @tg.task
    def add(a, b):
        return a + b

    x = add(1, 2)           # a lazy Node: nothing runs yet
    tg.compute(add(x, 10))  # -> 13, on the default scheduler

Calling a task inside a running task spawns it at once onto the worker's deque (fork-join);
``node.result()`` joins it. See README.md and docs/api.md.
"""
from taskgraph._native import GILWarning, core, gil_enabled
from taskgraph.errors import (BrokenSchedulerError, CancelledError, SchedulerClosedError,
                              TaskgraphError)
from taskgraph.task import Task, cancelled, task
from taskgraph.blocking import blocking
from taskgraph.serial import serial
from taskgraph.scheduler import (Scheduler, current_scheduler, default_scheduler, usable_cpus,
                                 use_scheduler)
from taskgraph.compute import compute, gather
from taskgraph._map import map
from taskgraph.trace.viz import GraphvizError, visualize
from taskgraph.trace import TaskRecord, Trace, TraceFormatError, trace, write_trace_files
from taskgraph.saving import GraphFileError, load, save
from taskgraph._state import State
from taskgraph.executor.wait import (ALL_COMPLETED, FIRST_COMPLETED, FIRST_EXCEPTION, as_completed,
                                    wait)
from taskgraph.executor import Executor
from taskgraph.dashboard import Dashboard, dashboard
from taskgraph import _hooks

_hooks.install()  # the C extension's exception classes and call-backs, in one explicit call

Node = core.Node

__all__ = [
    "task", "Task", "Node", "compute", "gather", "serial", "Scheduler", "default_scheduler",
    "usable_cpus", "CancelledError", "SchedulerClosedError", "TaskgraphError", "GILWarning",
    "gil_enabled", "trace", "Trace", "TaskRecord", "TraceFormatError", "visualize",
    "GraphvizError", "write_trace_files", "current_scheduler", "use_scheduler", "save", "load",
    "GraphFileError", "cancelled", "BrokenSchedulerError", "map", "State",
    "wait", "as_completed", "FIRST_COMPLETED", "FIRST_EXCEPTION", "ALL_COMPLETED",
    "Executor", "dashboard", "Dashboard", "blocking",
]
__version__ = "0.1.0"
