/* The bottom layer of taskgraph._core's C-API face: the module's state (the exception
 * classes and interned strings set at import, `TG`), the per-thread state (`TG_TLS`), node key
 * numbers, the C stack check, the MemoryError kept for out-of-memory paths, the detached
 * lock, and the fault sites of test builds. Every other file of csrc/py/ includes it; it
 * includes none of them. The layers above are listed in docs/design/native.md. */
#ifndef TG_PY_STATE_H
#define TG_PY_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "../graph.h"
#include "../pool.h"
#include "../deque.h"
#include "../trace.h"
#include "compat.h"

/* The per-thread runner of a worker thread (worker.h); only its address is kept here. */
typedef struct tg_runner Runner;

typedef struct {
    /* Set once by taskgraph._native/_configure before any worker starts; read-only after. */
    PyObject *CancelledError, *SchedulerClosedError, *TaskgraphError, *BrokenSchedulerError;
    PyObject *hook_compute;         /* compute(node, **kw): Node.compute */
    PyObject *hook_compute_lazy;    /* (nodes, timeout): a NEW node's result() outside workers */
    PyObject *hook_run_serially;    /* (nodes): run a lazy graph in this thread */
    PyObject *str_spawn, *str_wait;
    PyObject *state_names[TG_NSTATES]; /* interned */
    PyObject *str_taskgraph_task, *str_add_note, *str_fields, *str_dataclass_fields,
        *str_field_type, *str_name, *str_dot, *str_call_parens, *str_notes, *str_backend_key;
    PyObject *task_by_name;         /* the module's _task_by_name (Task pickling) */
    PyObject *task_with_options;    /* the module's _task_with_options (Task pickling) */
    PyObject *memory_error;         /* a MemoryError instance, made at import */
    PyObject *first_tasks;          /* dict: top-level function -> its first Task (task.c) */
} tg_globals;

extern tg_globals TG;

/* Per-thread state (a C thread-local: every Python thread is an OS thread). */
typedef struct {
    Runner *worker;     /* the runner of the worker thread this is, or NULL */
    int serial;         /* depth of `with taskgraph.serial():` */
    uint64_t thread_no; /* 1 + process-unique number, for node keys (0: none yet) */
    uint64_t seq;       /* nodes named on this thread */
    char *stack_low;    /* below this address the C stack is nearly used up (tg_c_stack_low) */
    int stack_known;    /* 1: stack_low is set; -1: unknown (no check) */
    /* A backend that runs this thread's task calls elsewhere (the dask backend, while a dask
     * worker thread runs a task): calling a task calls backend.spawn(node), and waiting for
     * an unfinished node calls backend.wait(node, timeout). Borrowed, or NULL: the strong
     * reference is in the thread state's dict, which CPython clears when the thread ends. */
    PyObject *backend;
    /* A worker's results let go, for the dashboard's results-held count, not yet subtracted
     * from the total (livefeed.h). */
    int64_t held;
} tg_tls;

extern _Thread_local tg_tls TG_TLS;

/* Whether the calling thread's C stack is nearly used up (nested joins and serial calls
 * check it: they raise RecursionError rather than overflow, whatever the recursion limit). */
int tg_c_stack_low(void);
/* A MemoryError instance (new reference) for the paths where building an exception failed:
 * a node's value is always an exception instance. */
PyObject *tg_memory_error(void);

/* A fresh key number for a node made on this thread: (thread number << 40) | counter. */
uint64_t tg_next_node_id(void);
/* The same, from this thread's state already in hand (one thread-local lookup fewer). */
static inline uint64_t tg_node_id_at(tg_tls *tls) {
    return tls->thread_no ? ((tls->thread_no - 1) << 40) | ++tls->seq : tg_next_node_id();
}
/* The address below which this thread's C stack is nearly used up (as tg_c_stack_low
 * judges), or NULL where it is unknown: a worker keeps it in its Runner. */
const char *tg_c_stack_limit(void);
/* Whether the C stack of this thread is nearly used up, given tg_c_stack_limit()'s answer. */
static inline int tg_c_stack_below(const char *limit) {
    /* The frame address, not a local's: under AddressSanitizer locals may live on a fake
     * stack on the heap. */
    return limit && (const char *)__builtin_frame_address(0) < limit;
}

/* Fault injection (test builds only: compiled in with -DTG_FAULTS, which setup.py passes when
 * TASKGRAPH_TEST_BUILD=1, as `make setup` and tools/asan.sh do; a wheel or sdist build has no
 * fault site and no _arm_fault). The n-th occurrence of a site fails as if out of memory. */
typedef enum {
    TG_FAULT_NODE_ALLOC = 0, /* building a Node */
    TG_FAULT_CLAIM,          /* claiming a node during a submission */
    TG_FAULT_EDGE,           /* adding an edge during a submission */
    TG_FAULT_SPAWN,          /* queueing a spawned node */
    TG_FAULT_RESULT,         /* storing a task's result (an internal failure: breaks the engine) */
    TG_FAULT_RECORD,         /* the trace observer (an internal failure: breaks the engine) */
    TG_FAULT_WORKER,         /* a worker thread stops between two tasks (breaks the engine) */
    TG_FAULT_NSITES
} tg_fault_site;

#ifdef TG_FAULTS
extern _Atomic int tg_faults_armed;
int tg_fault_hit(tg_fault_site site);
/* _arm_fault(site, n) of the module: the n-th occurrence of site fails (0 disarms). */
PyObject *tg_py_arm_fault(PyObject *mod, PyObject *args);
static inline int tg_fault(tg_fault_site site) {
    /* Relaxed: tests arm faults before the code they target runs. */
    return atomic_load_explicit(&tg_faults_armed, memory_order_relaxed) && tg_fault_hit(site);
}
#else
static inline int tg_fault(tg_fault_site site) { (void)site; return 0; }
#endif

/* Locks a pthread mutex that may be held while Python allocates: if it is busy, waits
 * detached from the interpreter (so a stop-the-world collection, or the GIL, is never
 * waited on while blocked). */
void tg_lock_detached(pthread_mutex_t *mu);

#endif
