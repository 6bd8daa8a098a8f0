/* taskgraph._core: the per-task path written against the CPython C API, beside the plain-C
 * scheduler core (csrc/ *.c) that it embeds. One concept per file:
 *
 *   module.c    the module: constants, configuration from Python, per-thread state, faults
 *   task.c      Task: the decorated function; calling it builds (and spawns) a Node
 *   node.c      Node: one call of a task; result(), exception(), done(), key, ...
 *   args.c      finding the Nodes inside arguments, and replacing them by their values
 *   run.c       Run: one compute() call (its C tg_run, its first error, its end)
 *   engine.c    Engine: the native half of a Scheduler (workers, runs, close, drain)
 *   worker.c    the worker loop and joins: run, skip, finish, spawn, sync children
 *   submit.c    submitting a lazy graph in one call (claim, edges, release)
 *   recorder.c  tracing: the observer that records each task into per-worker C buffers
 *   callbacks.c the Future protocol on Node: done callbacks, cancelled/running, __await__
 *   hints.c     clear errors for common mistakes (a Node used as its value, async @task)
 *
 * Ownership of objects that cross threads is documented in docs/design/native.md; the rules
 * each file relies on are repeated next to the fields below. */
#ifndef TG_PY_H
#define TG_PY_H

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

typedef struct NodeObject NodeObject;
typedef struct RunObject RunObject;
typedef struct EngineObject EngineObject;
typedef struct RecorderObject RecorderObject;
typedef struct tg_worker_state Worker;

/* ---------------------------------------------------------------- Node (node.c) */
struct NodeObject {
    PyObject_VAR_HEAD    /* ob_size: the number of argument slots (args[] below) */
    tg_task t;           /* the core's record, embedded: NODE_OF(task) finds the Node */
    /* Inputs. Written when the node is built; read and dropped by whoever runs it (the thread
     * that claimed it inline, or the worker it was handed to), never by anyone else, except
     * deps, which the `dependencies` property reads under the node's critical section. */
    PyObject *fn;
    Py_ssize_t nargs;    /* how many of args[] are positional; the rest are keyword values */
    PyObject *kwnames;   /* tuple of keyword names, or NULL */
    PyObject *deps;      /* tuple of the Nodes found in args (unique, in order), or NULL */
    /* Output: written once by the runner before tg_task_finish publishes the final state
     * (release); read by anyone after seeing that state (acquire). */
    PyObject *value;     /* the result (done) or the exception (failed, cancelled) */
    PyObject *name;      /* the task's name, interned (immortal on free-threaded builds) */
    /* The node whose task spawned it (or submitted it from inside a task), or NULL: strong,
     * stored once by the claimer (release), read with tg_node_parent (acquire) by any thread
     * (`parent` property, joins checking ancestry); cleared only when the node dies. */
    _Atomic(NodeObject *) parent;
    /* Children spawned by its task and not synced yet: a list owned by the thread running
     * the task (strong references through `sibling`). */
    NodeObject *kids;
    NodeObject *sibling;
    /* The engine that claimed it: compared, never dereferenced. Relaxed atomic: a reader that
     * sees NULL for a node claimed a moment ago only waits the slower way (polling). */
    _Atomic(const void *) owner;
    int32_t nkids;
    uint8_t lazy;            /* built lazily (visible to user code before anyone claimed it):
                              * its inputs are dropped under its critical section, so that
                              * _inputs() may read them from another thread (export, save) */
    _Atomic uint8_t seen;    /* result()/exception() was called: its error has been observed */
    _Atomic uint8_t failing; /* its task failed and `value` holds the exception (release) */
    /* node.cancel() was called (TG_CANCEL_ASKED), and found the task running
     * (TG_CANCEL_RUNNING: its task may stop early; its children not started never run).
     * Relaxed: a request; the skip that acts on it is ordered by tg_task_cancel. */
    _Atomic uint8_t cancel;
    PyObject *retry;         /* the task's (retries, retry_on) tuple, or NULL: no retries.
                              * Fixed from creation (strong). */
    /* Done callbacks: NULL (none added), a list (strong; changed under the node's critical
     * section) or a marker once they ran. See callbacks.c for the hand-off with the finisher. */
    _Atomic(PyObject *) callbacks;
    PyObject *weakreflist;
    /* The arguments, inline (one object per node, not two: fewer allocations and fewer
     * objects for the cyclic collector to walk); called with vectorcall straight from here.
     * Set to NULL once the node has run. */
    PyObject *args[1];
};

#define NODE_OF(task) ((NodeObject *)((char *)(task) - offsetof(NodeObject, t)))

static inline NodeObject *tg_node_parent(const NodeObject *n) {
    /* Acquire: pairs with the release store of the claimer (tg_node_set_parent). */
    return atomic_load_explicit(&((NodeObject *)n)->parent, memory_order_acquire);
}
/* Makes p (a strong reference is taken) the parent of n, which the caller just claimed. */
static inline void tg_node_set_parent(NodeObject *n, NodeObject *p) {
    Py_INCREF(p);
    /* Release: pairs with the acquire in tg_node_parent. */
    atomic_store_explicit(&n->parent, p, memory_order_release);
}


enum { TG_CANCEL_ASKED = 1, TG_CANCEL_RUNNING = 2 };

extern PyTypeObject TG_NodeType;
#define Node_Check(o) Py_IS_TYPE((o), &TG_NodeType)

/* A new NEW node for fn(*args, **kw) given in vectorcall form; scans the arguments. */
NodeObject *tg_node_new(PyObject *fn, PyObject *name, PyObject *retry, PyObject *const *args,
                        size_t nargsf, PyObject *kwnames);
/* Whether the task of n (running) should stop: node.cancel() was called on it or on a task
 * that spawned it, or its run was cancelled (fail fast, Ctrl-C, timeout, close). */
/* A lazy node, just made, gives up its owner thread (free-threaded builds): whichever
 * thread drops its last reference frees it at once (see node.c). */
void tg_node_unown(NodeObject *n);
/* node.cancel() was called on n or on a task that spawned it (the flags only). */
int tg_node_cancel_asked(NodeObject *n);
/* The same, or n's run was cancelled: what taskgraph.cancelled() answers. */
int tg_node_cancel_requested(NodeObject *n);
/* Its key, e.g. "fib-3.1041": the task's name, the number of the thread that made the node
 * and that thread's counter (given when the node is made). */
PyObject *tg_node_key(NodeObject *n);
/* The exception a waiter raises for exc: a copy with its own traceback (see node.c). New
 * reference; never fails (at worst exc itself). */
PyObject *tg_exception_copy(PyObject *exc);
/* The value (new reference) or NULL with (a copy of) the node's exception raised; marks it
 * seen. The node must have finished. */
PyObject *tg_node_outcome(NodeObject *n);
/* Drops the inputs of a node that has run (or will never run). */
void tg_node_drop_inputs(NodeObject *n);
/* (fn, args tuple, number of positional args, kwnames or None, retries, retry_on or None) of a
 * lazy node whose inputs are still there, None if they were dropped (it ran); read under the
 * node's critical section. */
PyObject *tg_node_inputs(NodeObject *n);
/* Waits, without a worker, until a node claimed by someone else finishes (timeout < 0: no
 * limit). 0, or -1 with TimeoutError or a signal's exception raised. */
int tg_node_wait_external(NodeObject *n, double timeout);

/* ---------------------------------------------------------------- Task (task.c) */
/* A Task is immutable once initialised: __init__ runs once (a second call raises TypeError),
 * and fn, name and retry never change after `ready` is published. */
enum { TG_TASK_BLANK = 0, TG_TASK_INITIALISING = 1, TG_TASK_READY = 2 };

typedef struct {
    PyObject_HEAD
    _Atomic int ready;   /* TG_TASK_*: a CAS claims the one initialisation; release when ready */
    PyObject *fn;
    PyObject *name;      /* interned str */
    PyObject *retry;     /* (retries, retry_on) or NULL: given to each of its nodes */
    PyObject *dict;      /* functools.update_wrapper writes __name__, __doc__, ... here */
    PyObject *weakreflist;
    vectorcallfunc vectorcall;
} TaskObject;

extern PyTypeObject TG_TaskType;

/* ---------------------------------------------------------------- arguments (args.c) */
/* The Nodes inside args[0..n) (and, recursively, inside lists, tuples, dicts, sets,
 * frozensets, namedtuples, slices and dataclass instances): a new tuple of unique Nodes in
 * order of first appearance, NULL with no error when there are none, NULL with an error
 * (naming `who`) when a structure nests too deeply. */
PyObject *tg_scan(PyObject *const *args, Py_ssize_t n, PyObject *who);
/* x with every Node inside replaced by its value (containers holding a Node are rebuilt, the
 * rest passed through as the same object). A Node that is not finished raises
 * TaskgraphError naming `who`; one that failed raises its exception. New reference. */
PyObject *tg_substitute(PyObject *x, PyObject *who);
/* A graph's arguments as plain data: x with every Node replaced by Ref(index_of[node]), and
 * back: x with every Ref(i) replaced by values[i]. Same container rules. */
extern PyTypeObject TG_RefType;
PyObject *tg_to_refs(PyObject *x, PyObject *index_of, PyObject *who);
PyObject *tg_from_refs(PyObject *x, PyObject *values, PyObject *who);

/* ---------------------------------------------------------------- Run (run.c) */
struct RunObject {
    PyObject_HEAD
    tg_run r;               /* the core's run: its tasks point here (RUN_OF finds this) */
    EngineObject *engine;   /* strong */
    pthread_mutex_t mu;     /* guards ended, error, reason; no Python call while held */
    pthread_cond_t cv;      /* signalled when the run ends */
    int ended;
    int registered;         /* in its engine's list of active runs (engine->mu) */
    PyObject *error;        /* the first failure of a top-level task */
    PyObject *reason;       /* why it was cancelled (str) */
    RunObject *prev, *next; /* the engine's active runs (engine->mu) */
    /* Set (never cleared) when node.cancel() found one of its tasks running: from then on a
     * task of this run checks its ancestors before it starts. Relaxed: a hint; seen late, a
     * child of a cancelled task may start, and its task can still check tg.cancelled(). */
    _Atomic int cancel_running;
};

#define RUN_OF(run) ((RunObject *)((char *)(run) - offsetof(RunObject, r)))

extern PyTypeObject TG_RunType;
/* The lock under which a run reached through one of its unfinished nodes stays alive
 * (node.cancel(); see run.c). No Python call while it is held. */
void tg_runs_lock(void);
void tg_runs_unlock(void);
/* In a child process after fork(): resets the runs' lock and remembers the fork. */
void tg_runs_forked(void);
/* Whether this process is the child of a fork() made while taskgraph was loaded. */
int tg_runs_after_fork(void);
/* Run objects alive (the leak test reads it). */
int64_t tg_live_runs(void);

/* The run's last task finished (or its submitter let go last): wakes its waiters and drops
 * the engine's reference to it. Called once, by whoever took live to 0. */
void tg_run_ended(RunObject *run);
/* Cancels the run; records the reason (str, borrowed) and the error (borrowed, may be NULL)
 * if none was recorded yet. */
void tg_run_cancel_with(RunObject *run, PyObject *reason, PyObject *error);

/* ---------------------------------------------------------------- Engine (engine.c) */
/* Own-time accounting while tracing: one frame per task running (nested) on a worker. The
 * time a task spends inside its joins is the duration of the tasks that ran nested in them
 * (each adds its duration to the frame below it when it ends) plus the time the worker was
 * idle inside them (the idle hooks add it): no clock is read per join. */
typedef struct {
    int64_t join;     /* ticks spent inside joins by the task in this frame */
    int64_t join_gc;  /* collection ticks inside those joins */
    int traced;       /* the task is being recorded (its joins are timed) */
} tg_frame;

struct tg_worker_state {
    _Alignas(64) EngineObject *engine; /* borrowed: the engine outlives its threads */
    int index;
    int depth;               /* joins nested on this thread */
    NodeObject *current;     /* the node whose task runs on this thread, or NULL */
    PyThreadState *saved;    /* while idle (detached from the interpreter) */
    tg_frame *frames;        /* one per task running (nested) on this thread */
    int nframes, capframes;
    int64_t idle_t0, idle_g0; /* start of an idle period inside a traced task's join */
    int died;                /* an injected fault stopped this worker (TG_FAULT_WORKER) */
    /* Tracing: the open trace's recorder for this worker (set and cleared by
     * recorder.c under the module's trace lock) and the hazard flag a worker raises while it
     * writes a record (the closer waits for it to drop). */
    _Atomic(RecorderObject *) rec;
    _Atomic int rec_busy;
};

struct EngineObject {
    PyObject_HEAD
    tg_pool *pool;           /* owned: made by the constructor, freed by the dealloc */
    Worker *workers;
    int nworkers;
    int number;              /* Scheduler.number */
    int max_help_depth;
    PyObject *label;         /* the Scheduler's repr, for messages */
    pthread_mutex_t mu;      /* guards runs and closed; no Python call while held */
    RunObject *runs;         /* active runs (strong references) */
    _Atomic int closed;
    PyObject *broken;        /* why the engine is broken (str, under mu), or NULL */
    EngineObject *live_prev, *live_next; /* the module's live engines (trace lock) */
    int live;
    _Atomic int forked;      /* in a child process: made before fork() (never used there) */
    /* How the workers end (all under mu): threads expected to run work(), how many returned
     * from it for good, whether the Scheduler was dropped without close() (the last worker
     * to leave then drains), whether the queues were drained (once). */
    int nthreads, exited, orphaned, drained;
};

extern PyTypeObject TG_EngineType;

/* Registers run as active (first submission). -1 with SchedulerClosedError if closed. */
int tg_engine_add_run(EngineObject *e, RunObject *run);
void tg_engine_forget_run(EngineObject *e, RunObject *run);
/* An internal failure (reason: str, borrowed): marks the engine broken, like BrokenThreadPool.
 * Every active run is cancelled with BrokenSchedulerError(reason) as its error, and new
 * computes raise it; close() still works. The first reason stays. Never raises. */
void tg_engine_break(EngineObject *e, PyObject *reason);
/* In a child process after fork(): marks an engine made before the fork closed for good
 * (its threads are gone, its locks may be held). Single-threaded (the after-fork hook). */
void tg_engine_mark_forked(EngineObject *e);
/* 0, or -1 with SchedulerClosedError if n is unfinished and belongs to an engine made before
 * fork() (it can never finish in this child process): waiters call it before they wait. */
int tg_engine_check_owner(NodeObject *n);

/* ---------------------------------------------------------------- worker (worker.c) */
extern tg_idle_fn tg_idle_begin, tg_idle_end;
/* Runs tasks on W until `awaited` finishes (or, when NULL, until the pool shuts down). */
tg_find tg_wait_until(Worker *W, NodeObject *awaited);
/* Adds n (just claimed by parent's thread) to parent's children; prunes finished ones. */
void tg_add_kid(NodeObject *parent, NodeObject *n);
/* Pushes a node built inside a running task onto W's deque (or submits it with its edges). */
int tg_spawn(Worker *W, NodeObject *n);
/* result()/exception() inside a worker of the node's engine: 0 when it finished, -1 with an
 * error (own node, awaiting an ancestor, the pool shut down). */
int tg_join(Worker *W, NodeObject *n);
/* Runs a NEW node at once in the calling thread (serial elision). 1 if it ran (its outcome
 * is stored; KeyboardInterrupt and SystemExit are also raised: returns -1), 0 if someone else
 * had claimed it. */
int tg_run_inline(NodeObject *n);
/* drain(): skips a task left in a queue after shutdown, as worker W (single-threaded). */
void tg_drain_one(Worker *W, tg_task *t);
/* Finishes a node that a backend claimed with tg_task_claim_inline and ran elsewhere (the
 * dask backend): stores value (a result, or the exception) and publishes the final state. */
void tg_finish_external(NodeObject *n, int final, PyObject *value);
/* Finishes a task that a shut-down pool refused (or will never run) as cancelled, with
 * everything that refusal cascades to. The caller gives up its core reference to each. */
void tg_cancel_refused(tg_task *refused);

/* The rules of a failed call, shared by every backend (worker.c; the dask backend reaches
 * them as core._note_origin, _note_attempts, _note_sibling, _retry_wanted). None raises. */
void tg_note_origin(PyObject *exc, PyObject *key, PyObject *where);
void tg_note_attempts(PyObject *exc, PyObject *key, int attempts, PyObject *retries);
void tg_note_sibling(PyObject *exc, PyObject *pkey, PyObject *kkey, PyObject *kexc);
int tg_retry_wanted(PyObject *retry, PyObject *exc, int attempt);

/* ---------------------------------------------------------------- submit (submit.c) */
/* Claims, wires and releases the lazy graph under nodes[0..n) as part of run. From worker W
 * (not NULL: ready nodes go onto its deque, and each claimed node becomes a child of
 * W->current) or from outside (W NULL: the injector). Returns how many nodes it claimed, or
 * -1 with an error (what it claimed then drains as cancelled: the run is cancelled). */
Py_ssize_t tg_submit(EngineObject *e, RunObject *run, PyObject *const *nodes, Py_ssize_t n, Worker *W);

/* ---------------------------------------------------------------- recorder (recorder.c) */
struct RecorderObject {
    PyObject_HEAD
    tg_tracebuf *buf;
    PyObject *objects;   /* list: names, and (type name, message) of errors; written by the
                          * worker while the trace is open, read after it closed */
    int sched_no, worker;
    PyObject *last_name; /* cache of the last name's index */
    int32_t last_index;
    PyObject **keys; int32_t *vals; /* open-addressing table: name object -> index */
    int64_t cap, used;
};

extern PyTypeObject TG_RecorderType;

typedef struct {
    RecorderObject *rec; /* the recorder when the task started, or NULL */
    int timed;           /* recorded, or nested in a recorded task (its time is a join's) */
    int64_t t0, g0;      /* its start, and the collection total then */
    int attempt;         /* 0, or which attempt of a retried task (set before tg_rec_end) */
} tg_rec_start;

/* Called when a task starts, after its frame was pushed. */
static inline void tg_rec_begin(Worker *W, tg_rec_start *s) {
    /* Acquire: pairs with the release store in recorder.c that attaches a recorder. */
    s->rec = atomic_load_explicit(&W->rec, memory_order_acquire);
    int n = W->nframes;
    s->timed = s->rec || (n > 1 && n <= W->capframes && W->frames[n - 2].traced);
    if (n <= W->capframes) W->frames[n - 1].traced = s->rec != NULL;
    s->attempt = 0;
    if (s->timed) {
        s->t0 = tg_clock_ticks();
        s->g0 = tg_trace_gc_ticks();
    }
}
/* Called when a task finishes (finished with state final), after its frame was popped:
 * adds its duration to the task it ran nested in, and records it if the trace that was open
 * when it started is still open. Never raises: a record that cannot be written is dropped
 * and counted. */
void tg_rec_end(Worker *W, const tg_rec_start *s, NodeObject *n, int final, const tg_frame *f);
/* Called when attempt `attempt` of a task with retries failed and it runs again (its frame
 * still pushed): records the attempt as failed, then restarts the clock for the next. */
void tg_rec_attempt(Worker *W, tg_rec_start *s, NodeObject *n, int attempt);
/* trace_start() / trace_stop() of the module (see recorder.c). */
PyObject *tg_trace_start(PyObject *mod, PyObject *unused);
PyObject *tg_trace_stop(PyObject *mod, PyObject *unused);
/* Attaches recorders to an engine's workers if a trace is open (engine creation). */
int tg_trace_attach_engine(EngineObject *e);
void tg_trace_engine_gone(EngineObject *e);
/* In a child process after fork() (single-threaded): resets the trace lock and marks every
 * engine made before the fork (tg_engine_mark_forked), forgetting them. */
void tg_trace_after_fork_child(void);
/* The module's functions for the records' clock (trace.h): clock_origin() and clock_pair()
 * -> (ticks, ns); clock_tsc() -> bool; trace_gc_phase(starting). */
PyObject *tg_py_clock_origin(PyObject *mod, PyObject *unused);
PyObject *tg_py_clock_pair(PyObject *mod, PyObject *unused);
PyObject *tg_py_clock_tsc(PyObject *mod, PyObject *unused);
PyObject *tg_py_trace_gc_phase(PyObject *mod, PyObject *starting);

/* _task_by_name(module, qualname) -> the Task defined there (unpickling a rebuilt Task). */
PyObject *tg_task_by_name(PyObject *unused, PyObject *args);
/* _task_with_options(fn, name, retries, retry_on) -> Task (unpickling a Task with retries). */
PyObject *tg_task_with_options(PyObject *unused, PyObject *args);

/* ---------------------------------------------------------------- module (module.c) */
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
} tg_globals;

extern tg_globals TG;

/* Per-thread state (a C thread-local: every Python thread is an OS thread). */
typedef struct {
    Worker *worker;     /* the worker running on this thread, or NULL */
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

/* Fault injection (tests only): the n-th occurrence of a site fails as if out of memory. */
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

extern _Atomic int tg_faults_armed;
int tg_fault_hit(tg_fault_site site);
static inline int tg_fault(tg_fault_site site) {
    /* Relaxed: tests arm faults before the code they target runs. */
    return atomic_load_explicit(&tg_faults_armed, memory_order_relaxed) && tg_fault_hit(site);
}

/* Locks a pthread mutex that may be held while Python allocates: if it is busy, waits
 * detached from the interpreter (so a stop-the-world collection, or the GIL, is never
 * waited on while blocked). */
void tg_lock_detached(pthread_mutex_t *mu);

/* The scheduler's label for messages: "<taskgraph.Scheduler #n ...>". */
#define ENGINE_LABEL(e) ((e)->label)

#endif
