"""The two faces of the C core, loaded once: ``core`` and ``ffi``/``lib``.

* ``core`` is ``taskgraph._core``, the extension written against the CPython C API
  (csrc/py/): Task, Node, the worker loop, joins, graph submission, trace recording. It owns
  every per-task step.
* ``lib`` is cffi's binding (ABI mode) of the same shared object: the C core's functions that
  are not per task (creating, shutting down and freeing pools, counters, trace buffers, the
  deque checks). ``ffi.dlopen`` of the extension's own file reaches the very pool and buffers
  the extension uses, so there is one copy of the core per process. Which call crosses which
  face, and why: docs/design/native.md.

Constants (task states, stat names, result codes) come from ``core``; nothing here repeats
them as numbers. On import:

* if the extension is missing or was built for another interpreter, an ImportError says how to
  build it (``make setup``, or ``pip install -e .``);
* every cffi function is touched once on the importing thread (cffi 1.17 fills some tables
  lazily, which must not first happen on two threads at once);
* if the GIL is on (a GIL build of CPython, or a free-threaded one where something re-enabled
  it), a single ``GILWarning`` explains that tasks run correctly but without parallel
  speed-up, and how to get the GIL off.
"""
from __future__ import annotations

import sys
import sysconfig
import warnings

try:
    from taskgraph import _core as core
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "taskgraph's C extension (taskgraph._core) is not built for this interpreter "
        f"({sys.executable}, {sys.version.split()[0]}): run `make setup` in the source tree, "
        f"or `pip install --no-build-isolation -e .` ({e})"
    ) from e

import cffi

__all__ = ["core", "ffi", "lib", "GILWarning", "gil_enabled", "FREE_THREADED_BUILD"]

#: True when this interpreter was built with --disable-gil (3.13t, 3.14t, ...).
FREE_THREADED_BUILD = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

# The core's functions that cffi binds: only functions (no constants, no struct layouts:
# those are read from the C side at run time).
CDEF = """
typedef struct tg_pool tg_pool;
typedef struct tg_deque tg_deque;
typedef struct tg_tracebuf tg_tracebuf;

tg_pool *tg_pool_new(int nworkers);
void tg_pool_free(tg_pool *p);
void tg_pool_shutdown(tg_pool *p);
int tg_pool_is_shutdown(const tg_pool *p);
int tg_pool_workers(const tg_pool *p);
int tg_pool_sleeping(tg_pool *p);
void tg_pool_stats(tg_pool *p, int w, int64_t *out);
int64_t tg_pool_queued(tg_pool *p);

tg_deque *tg_deque_new(int64_t initial_capacity);
void tg_deque_free(tg_deque *d);
int tg_deque_push(tg_deque *d, uint64_t item);
int tg_deque_pop(tg_deque *d, uint64_t *out);
int tg_deque_steal(tg_deque *d, uint64_t *out);
int64_t tg_deque_size(tg_deque *d);
int64_t tg_deque_capacity(tg_deque *d);

tg_tracebuf *tg_tracebuf_new(void);
void tg_tracebuf_free(tg_tracebuf *b);
int64_t tg_tracebuf_count(const tg_tracebuf *b);
int64_t tg_tracebuf_dropped(const tg_tracebuf *b);
int64_t tg_tracebuf_copy(const tg_tracebuf *b, int64_t first, int64_t n, void *dst);
int64_t tg_tracebuf_nids(const tg_tracebuf *b);
void tg_tracebuf_copy_ids(const tg_tracebuf *b, uint64_t *dst);
const char *tg_trace_rec_format(void);
int tg_trace_rec_size(void);
const char *tg_trace_rec_fields(void);
int64_t tg_clock_mono_ns(void);
int tg_clock_tsc(void);
void tg_clock_origin(int64_t *ticks, int64_t *ns);
void tg_clock_pair(int64_t *ticks, int64_t *ns);
void tg_trace_gc_phase(int starting);

const char *tg_state_name(int state);
"""

ffi = cffi.FFI()
ffi.cdef(CDEF)
lib = ffi.dlopen(core.__file__)


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
    for t in ("tg_pool *", "tg_deque *", "tg_tracebuf *", "uint64_t *", "int64_t[]", "char[]",
              "uintptr_t", "uint64_t[]", "int64_t *"):
        ffi.typeof(t)
    p = lib.tg_pool_new(1)
    stats = ffi.new("int64_t[]", core.NSTATS)
    lib.tg_pool_stats(p, 0, stats)
    lib.tg_pool_queued(p)
    lib.tg_pool_workers(p)
    lib.tg_pool_shutdown(p)
    lib.tg_pool_is_shutdown(p)
    lib.tg_pool_free(p)
    d = lib.tg_deque_new(2)
    out = ffi.new("uint64_t *")
    lib.tg_deque_push(d, 1)
    lib.tg_deque_steal(d, out)
    lib.tg_deque_pop(d, out)
    lib.tg_deque_size(d)
    lib.tg_deque_capacity(d)
    lib.tg_deque_free(d)
    b = lib.tg_tracebuf_new()
    lib.tg_tracebuf_copy(b, 0, 0, ffi.NULL)
    lib.tg_tracebuf_copy_ids(b, ffi.NULL)
    lib.tg_tracebuf_count(b), lib.tg_tracebuf_nids(b), lib.tg_tracebuf_dropped(b)
    lib.tg_tracebuf_free(b)
    ffi.string(lib.tg_trace_rec_format()), ffi.string(lib.tg_trace_rec_fields())
    lib.tg_trace_rec_size(), lib.tg_clock_mono_ns(), lib.tg_clock_tsc()
    a, b = ffi.new("int64_t *"), ffi.new("int64_t *")
    lib.tg_clock_origin(a, b)
    lib.tg_clock_pair(a, b)
    ffi.string(lib.tg_state_name(0))
    int(ffi.cast("uintptr_t", ffi.NULL))


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
