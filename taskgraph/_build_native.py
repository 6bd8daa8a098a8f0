"""cffi build script for taskgraph._cnative (the C scheduler core in csrc/).

Run by setuptools through ``cffi_modules`` in setup.py (``make setup`` does it). The C
declarations below are the whole C face that Python sees; ``taskgraph/_native.py`` loads it.
"""
import os
import sysconfig

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(os.path.dirname(HERE), "csrc")
SOURCES = ["deque.c"]

CDEF = """
typedef enum { TG_OK = 0, TG_EMPTY = 1, TG_RETRY = 2 } tg_status;
typedef struct tg_deque tg_deque;
tg_deque *tg_deque_new(int64_t initial_capacity);
void tg_deque_free(tg_deque *d);
int tg_deque_push(tg_deque *d, uint64_t item);
tg_status tg_deque_pop(tg_deque *d, uint64_t *out);
tg_status tg_deque_steal(tg_deque *d, uint64_t *out);
int64_t tg_deque_size(tg_deque *d);
int64_t tg_deque_capacity(tg_deque *d);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)

macros = []
if sysconfig.get_config_var("Py_GIL_DISABLED"):
    # cffi's generated module defines Py_LIMITED_API, which free-threaded headers reject.
    macros.append(("_CFFI_NO_LIMITED_API", None))

ffibuilder.set_source(
    "taskgraph._cnative",
    '#include "deque.h"\n',
    sources=[os.path.relpath(os.path.join(CSRC, s)) for s in SOURCES],
    include_dirs=[os.path.relpath(CSRC)],
    define_macros=macros,
    extra_compile_args=["-std=c11", "-O2", "-Wall"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
