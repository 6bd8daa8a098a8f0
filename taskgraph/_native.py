"""Loading of the C core (``taskgraph._cnative``, built by cffi) and runtime checks.

This is the only module that imports the extension. It exports ``ffi`` and ``lib``. On import:

* if the extension is missing or was built for another interpreter, an ImportError says how to
  build it (``make setup``, or ``pip install -e .``);
* every C function and type used by taskgraph is touched once on the importing thread, because
  cffi 1.17 fills some of its tables lazily and that must not first happen on two workers at once;
* if the GIL is on (a GIL build of CPython, or a free-threaded one where something re-enabled it),
  a single ``GILWarning`` explains that tasks will run correctly but without parallel speed-up,
  and how to get the GIL off.
"""
from __future__ import annotations

import sys
import sysconfig
import warnings

try:
    from taskgraph._cnative import ffi, lib
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "taskgraph's C core (taskgraph._cnative) is not built for this interpreter "
        f"({sys.executable}, {sys.version.split()[0]}): run `make setup` in the source tree, "
        f"or `pip install --no-build-isolation -e .` ({e})"
    ) from e

__all__ = ["ffi", "lib", "GILWarning", "gil_enabled", "FREE_THREADED_BUILD"]

#: True when this interpreter was built with --disable-gil (3.13t, 3.14t, ...).
FREE_THREADED_BUILD = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


class GILWarning(RuntimeWarning):
    """Warned once at import when the GIL is enabled: no parallel speed-up is possible."""


def gil_enabled() -> bool:
    """Whether the GIL is on right now (always True on a GIL build)."""
    probe = getattr(sys, "_is_gil_enabled", None)
    return True if probe is None else bool(probe())


def _warm_up() -> None:
    # cffi 1.17 initialises type and function tables lazily: do it here, on one thread.
    for name in dir(lib):
        getattr(lib, name)
    d = lib.tg_deque_new(2)
    out = ffi.new("uint64_t *")
    lib.tg_deque_push(d, 1)
    lib.tg_deque_steal(d, out)
    lib.tg_deque_pop(d, out)
    lib.tg_deque_size(d)
    lib.tg_deque_capacity(d)
    lib.tg_deque_free(d)
    h = ffi.new_handle(_warm_up)
    ffi.from_handle(h)
    # The scheduler's functions and types, once each, on a one-worker pool.
    p = lib.tg_pool_new(1)
    run = ffi.new("tg_run *")
    ta, tb = ffi.new("tg_task *"), ffi.new("tg_task *")
    ha, hb = ffi.new_handle("a"), ffi.new_handle("b")
    tasks = {"a": ta, "b": tb}
    o = ffi.new("void **")
    stats = ffi.new("int64_t[]", lib.TG_NSTATS)
    lib.tg_run_hold(run)
    lib.tg_task_claim(ta, ha, run)
    lib.tg_task_claim(tb, hb, run)
    lib.tg_task_depend(tb, ta)
    lib.tg_submit(p, -1, ta)
    lib.tg_submit(p, -1, tb)
    lib.tg_task_cancel(tb)
    lib.tg_task_state(ta)
    lib.tg_task_set_id(ta, 1)
    lib.tg_pool_queued(p)
    lib.tg_pool_stats(p, 0, stats)
    lib.tg_pool_shutdown(p)
    r = lib.tg_pool_drain(p, ffi.NULL, 0, o)
    while r != lib.TG_NEXT_SHUTDOWN:
        done = tasks[ffi.from_handle(o[0])] if r == lib.TG_NEXT_SKIP else ffi.NULL
        (done.worker, done.skip, done.stolen) if done != ffi.NULL else None
        r = lib.tg_pool_drain(p, done, lib.TG_CANCELLED, o)
    lib.tg_run_cancel(run)
    lib.tg_run_release(run)
    lib.tg_state_name(0)
    lib.tg_pool_free(p)
    # tg_spawn / tg_next / tg_join are touched by the same declarations above (cffi builds
    # each function's wrapper on first getattr, done for all names at the top).


def _check_gil() -> None:
    if not gil_enabled():
        return
    if FREE_THREADED_BUILD:
        why = ("it is on in this free-threaded interpreter (forced by -X gil=1 or PYTHON_GIL=1, "
               "or re-enabled by an extension module: cffi 1.17's backend does so on CPython "
               "3.13t unless the GIL is forced off)")
        fix = ("run Python with -X gil=0 or PYTHON_GIL=0; the .venv made by `make setup` does "
               "this for you")
    else:
        why = f"this CPython {sys.version.split()[0]} is a GIL build"
        fix = ("use a free-threaded CPython (3.14t, or 3.13t with -X gil=0); `make setup` "
               "provides one in .venv")
    warnings.warn(
        f"taskgraph: the GIL is enabled: {why}. Tasks run correctly but one at a time, so there "
        f"is no parallel speed-up. To fix: {fix}.",
        GILWarning,
        stacklevel=3,
    )


_warm_up()
_check_gil()
