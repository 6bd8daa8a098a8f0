"""Task functions that are likely to slow each other down on a free-threaded CPython.

On 3.13t a function defined at module level gets *deferred* reference counting: calling it
from several threads does not write its reference count. A nested function (a closure, a
function made inside another function or a factory: ``__qualname__`` contains
``"<locals>"``) and a function whose module is not a real module (code run by ``exec()`` into a
dict) do not, so workers calling the same one all write one shared counter, and the cache line
bounces between the cores (docs/performance.md, "Work inflation"). ``note`` is called once per
``@task``; ``Trace.summary()`` names the hazards among the tasks it shows, once. Records carry task
names only, so a name that was also given to a module-level function is never flagged.
"""
from __future__ import annotations

import sys
import threading

__all__ = ["note", "hazard_of", "hazards_for"]

_LOCK = threading.Lock()
_BY_NAME: dict = {}   # task name -> (qualname, reason) of a task function with a hazard
_CLEAN: set = set()   # task names also given to a function without one (never flagged: a
                      # trace record carries the name only, so it could be either function)


def hazard_of(fn) -> str | None:
    """Why calling fn from several workers may contend, or None (cheap: two attribute reads)."""
    fn = getattr(fn, "func", fn)  # a functools.partial: its function
    qual = getattr(fn, "__qualname__", None)
    if not isinstance(qual, str):
        return None
    if "<locals>" in qual:
        return "a nested function (defined inside another function)"
    mod = getattr(fn, "__module__", None)
    glb = getattr(fn, "__globals__", None)
    if glb is not None:
        m = sys.modules.get(mod) if isinstance(mod, str) else None
        if m is None or getattr(m, "__dict__", None) is not glb:
            return "defined by exec() or in a namespace that is not a module"
    return None


def note(fn, name) -> None:
    """Remembers a task function with a hazard under its task name (called by ``@task``)."""
    why = hazard_of(fn)
    with _LOCK:
        if why is None:
            _CLEAN.add(name)
        else:
            _BY_NAME[name] = (getattr(fn, "__qualname__", name), why)


def hazards_for(names) -> list[str]:
    """One line per recorded task name whose function has a hazard (sorted by name)."""
    with _LOCK:
        found = {n: _BY_NAME[n] for n in set(names) if n in _BY_NAME and n not in _CLEAN}
    return [f"task {n!r} ({qual}) is {why}" for n, (qual, why) in sorted(found.items())]
