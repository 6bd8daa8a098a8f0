"""Task functions that are likely to slow each other down on a free-threaded CPython.

On 3.13t a function defined at module level gets *deferred* reference counting: calling it
from several threads does not write its reference count. A nested function (a closure, a
function made inside another function or a factory: ``__qualname__`` contains
``"<locals>"``) and a function whose module is not a real module (code run by ``exec()`` into a
dict) do not, so workers calling the same one all write one shared counter, and the cache line
bounces between the cores (docs/performance.md, "Work inflation"). The same holds for the
literal constants of code made by the builtin ``compile()`` (a module imported with no valid
``.pyc``, ``exec(compile(...))``): 3.13t and 3.14t leave them mortal, and every read of one by
a worker writes its count. So does every read of a module global that holds a plain mortal
object (``FULL = (1 << N) - 1``, a table in a dict): the interpreter counts a reference to it
per read, where functions, classes and modules it reads as globals are immortal (3.13t) or
counted with deferred reference counting (3.14t). ``note`` is called once per
``@task``; ``Trace.summary()`` names the hazards among the tasks it shows, once. Records carry task
names only, so a name that was also given to a module-level function is never flagged.
"""
from __future__ import annotations

import dis
import sys
import threading
import types

__all__ = ["note", "hazard_of", "hazards_for"]

_LOCK = threading.Lock()
_BY_NAME: dict = {}   # task name -> (qualname, reason) of a task function with a hazard
_CLEAN: dict = {}     # task names also given to a function without one (never flagged: a
                      # trace record carries the name only, so it could be either function)
# Each holds the names of the last _MAX_NAMES tasks made (oldest dropped first): task names
# can be made new per call (name=f"job-{i}"), and what is noted about them is a hint, not
# worth memory without end; the tasks a trace shows were made last, mostly.
_MAX_NAMES = 1000


def _remember(table, name, value):
    """table[name] = value, as its newest entry, dropping the oldest past _MAX_NAMES."""
    table.pop(name, None)
    table[name] = value
    if len(table) > _MAX_NAMES:
        del table[next(iter(table))]


# What sys.getrefcount reports for an immortal object on 3.13t; 3.14 asks sys._is_immortal.
_IMMORTAL_COUNT = 0xFFFFFFFF
_is_immortal = getattr(sys, "_is_immortal", None) or (
    lambda o: sys.getrefcount(o) >= _IMMORTAL_COUNT)
# The constants CPython would make immortal (bool is an int, and always immortal).
_SCALARS = (int, float, complex, bytes)


def _mortal_constant(code, depth=0):
    """A literal constant of code (or of the code nested in it) that is not immortal, else
    None. Only asked where the GIL is off: with it, nothing is contended."""
    for c in code.co_consts:
        if type(c) in _SCALARS and not _is_immortal(c):
            return c
        if depth < 4 and hasattr(c, "co_consts"):
            found = _mortal_constant(c, depth + 1)
            if found is not None:
                return found
    return None


# Objects a global read counts a reference to on a free-threaded build (functions, classes and
# modules are immortal or deferred there); only these kinds are named, so that no legitimate
# global (a function, a class, a module, a task) is ever flagged.
_DATA = (int, float, complex, str, bytes, tuple, list, dict, set, frozenset)


def _mortal_global(code, glb, depth=0):
    """(name, value) of a module global that code (or code nested in it, or a module-level
    function of the same module it calls, one level down) reads and that holds a plain object
    which is not immortal, else None."""
    for ins in dis.get_instructions(code):
        if ins.opname != "LOAD_GLOBAL" or not isinstance(ins.argval, str):
            continue
        v = glb.get(ins.argval)
        if type(v) in _DATA and not _is_immortal(v):
            return ins.argval, v
        if depth == 0 and isinstance(v, types.FunctionType) and v.__globals__ is glb:
            found = _mortal_global(v.__code__, glb, 1)
            if found is not None:
                return found
    if depth < 2:
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                found = _mortal_global(c, glb, depth + 1)
                if found is not None:
                    return found
    return None


def hazard_of(fn) -> str | None:
    """Why calling fn from several workers may contend, or None (cheap: a few attribute reads
    and a look at the code's constants)."""
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
    code = getattr(fn, "__code__", None)
    gil_off = not getattr(sys, "_is_gil_enabled", lambda: True)()
    if gil_off and code is not None:
        c = _mortal_constant(code)
        if c is not None:
            return (f"code made by compile() (imported with no .pyc, or exec(compile(...))): its "
                    f"constant {c!r:.40} is not immortal, so every worker that reads it writes "
                    "its reference count")
        g = _mortal_global(code, glb) if isinstance(glb, dict) else None
        if g is not None:
            name, v = g
            return (f"reading the module global {name!r}, whose {type(v).__name__} value is "
                    "not immortal: every worker that reads it writes its reference count, one "
                    "cache line for all of them; write the value as a literal where it is used "
                    "(a constant of the code, immortal once loaded from a .pyc)")
    return None


def note(fn, name) -> None:
    """Remembers a task function with a hazard under its task name (called by ``@task``)."""
    try:
        why = hazard_of(fn)
        qual = getattr(fn, "__qualname__", name) if why is not None else None
    except Exception:  # noqa: BLE001 - an attribute of the user's that raises: a hint less
        return
    with _LOCK:
        if why is None:
            _remember(_CLEAN, name, True)
        else:
            _remember(_BY_NAME, name, (qual, why))


def hazards_for(names) -> list[str]:
    """One line per recorded task name whose function has a hazard (sorted by name)."""
    with _LOCK:
        found = {n: _BY_NAME[n] for n in set(names) if n in _BY_NAME and n not in _CLEAN}
    return [f"task {n!r} ({qual}) is {why}" for n, (qual, why) in sorted(found.items())]
