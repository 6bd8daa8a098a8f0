"""taskgraph: task graphs and fork-join on a work-stealing scheduler for free-threaded Python."""
from taskgraph._native import GILWarning, gil_enabled

__all__ = ["GILWarning", "gil_enabled"]
__version__ = "0.1.0"
