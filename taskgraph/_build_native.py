"""cffi build script for taskgraph._cnative (the C scheduler core in csrc/).

Run by setuptools through ``cffi_modules`` in setup.py (``make setup`` does it). The C
declarations below are the whole C face that Python sees; ``taskgraph/_native.py`` loads it.
"""
import os
import sysconfig

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(os.path.dirname(HERE), "csrc")
SOURCES = ["deque.c", "graph.c", "pool.c"]

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

/* graph.h: only the plain fields are declared; cffi takes the layout from the C compiler. */
enum { TG_NEW = 0, TG_PENDING = 1, TG_READY = 2, TG_RUNNING = 3, TG_DONE = 4, TG_FAILED = 5,
       TG_CANCELLED = 6 };
typedef struct { ...; } tg_run;
typedef struct {
    int32_t worker;
    int32_t skip;
    int32_t stolen;
    ...;
} tg_task;
enum { TG_DEP_WAIT = 0, TG_DEP_DONE = 1, TG_DEP_POISON = 2 };
int tg_task_claim(tg_task *t, void *handle, tg_run *run);
int tg_task_depend(tg_task *succ, tg_task *pred);
int tg_task_release_hold(tg_task *t);
void tg_task_cancel(tg_task *t);
int tg_task_state(const tg_task *t);
uint64_t tg_task_set_id(tg_task *t, uint64_t id);
void tg_run_hold(tg_run *r);
int tg_run_release(tg_run *r);
const char *tg_state_name(int state);

/* pool.h */
typedef struct tg_pool tg_pool;
enum { TG_NEXT_TASK = 0, TG_NEXT_ENDED = 1, TG_NEXT_JOINED = 2, TG_NEXT_SHUTDOWN = 3,
       TG_NEXT_SKIP = 4 };
enum { TG_STAT_RUN = 0, TG_STAT_SPAWNED, TG_STAT_STOLEN, TG_STAT_STEAL_ATTEMPTS,
       TG_STAT_INJECTED, TG_STAT_PARKS, TG_NSTATS };
tg_pool *tg_pool_new(int nworkers);
void tg_pool_free(tg_pool *p);
void tg_pool_shutdown(tg_pool *p);
int tg_spawn(tg_pool *p, int w, tg_task *t, void *handle, tg_run *run);
int tg_submit(tg_pool *p, int w, tg_task *t);
int tg_next(tg_pool *p, int w, tg_task *done, int final, void **out);
int tg_join(tg_pool *p, int w, tg_task *awaited, tg_task *done, int final, int steal, void **out);
int tg_pool_drain(tg_pool *p, tg_task *done, int final, void **out);
void tg_run_cancel(tg_run *r);
void tg_pool_stats(tg_pool *p, int w, int64_t *out);
int64_t tg_pool_queued(tg_pool *p);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)

macros = []
if sysconfig.get_config_var("Py_GIL_DISABLED"):
    # cffi's generated module defines Py_LIMITED_API, which free-threaded headers reject.
    macros.append(("_CFFI_NO_LIMITED_API", None))

ffibuilder.set_source(
    "taskgraph._cnative",
    '#include "deque.h"\n#include "graph.h"\n#include "pool.h"\n',
    sources=[os.path.relpath(os.path.join(CSRC, s)) for s in SOURCES],
    include_dirs=[os.path.relpath(CSRC)],
    define_macros=macros,
    extra_compile_args=["-std=c11", "-O2", "-Wall"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
