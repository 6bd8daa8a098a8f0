/* The worker loop (worker.c): the per-thread Runner of a worker, running and skipping tasks,
 * finishing nodes and cancelling what a shut-down pool refused, syncing a task's children, the
 * serial (inline) run, each task's body run through the one runner (rules.h). Layer 6 (docs/design/native.md): it
 * calls the observer (recorder.h) through its begin/end/idle hooks and reaches its engine only
 * through the Runner's fields and the engine's run registry (run.h). */
#ifndef TG_PY_WORKER_H
#define TG_PY_WORKER_H

#include "args.h"
#include "lease.h"
#include "rules.h"
#include "recorder.h"
#include "run.h"

/* A worker thread's runner: the Python face's per-thread record (the core's per-thread record
 * is pool.c's tg_worker). One per worker, in its engine's array; written by its own thread
 * only, except at the engine's creation. */
struct tg_runner {
    _Alignas(64) PyObject *engine; /* borrowed: its engine (which outlives its threads); node
                                    * owners are compared with it, current_engine() returns it */
    tg_pool *pool;           /* the engine's pool */
    tg_runs *runs;           /* the engine's run registry (its label; breaking it) */
    tg_watch *watch;         /* its tracing state (recorder.c) */
    int index;
    int max_help_depth;      /* the engine's: nested joins that still steal */
    int depth;               /* joins nested on this thread */
    /* The node whose task's own code runs on this thread, or NULL: set only from the call of
     * its function to the start of its sync (execute), so that code the engine runs on its
     * own behalf (drops, notes, callbacks, other tasks in a join) runs as no task; a task
     * called there builds a lazy node (docs/design/native.md, "Code that runs as no task"). */
    NodeObject *current;
    PyThreadState *saved;    /* while idle (detached from the interpreter) */
    const char *stack_low;   /* its thread's tg_c_stack_limit() (set when the thread starts) */
    int died;                /* an injected fault stopped this worker (TG_FAULT_WORKER) */
    int blocking;            /* declared waits open on this thread (blocking.c; nested count) */
    /* The Tasks of the nodes it spawns, each held once through a lease the nodes share
     * (lease.h); let go when it has nothing to run at its outermost level, and at its exit. */
    tg_leases leases;
    tg_node_cache nodes;     /* the memory of nodes it freed, for its next ones (noderec.h) */
};

extern tg_idle_fn tg_idle_begin, tg_idle_end;
/* Sets aside the task whose code runs on this thread, if any: until tg_resume_task, Python
 * code run here (a finalizer, a callback) runs as no task, so a task it calls builds a lazy
 * node instead of being spawned into that task. Returns what tg_resume_task takes. */
static inline NodeObject *tg_suspend_task(void) {
    Runner *W = TG_TLS.worker;
    NodeObject *cur = W ? W->current : NULL;
    if (cur) W->current = NULL;
    return cur;
}
static inline void tg_resume_task(NodeObject *cur) {
    if (cur) TG_TLS.worker->current = cur;
}
/* Waits (detached) until the runner of finished child k has retired it (noderec.h). */
void tg_wait_retired(NodeObject *k);
/* Drops a chain of children (linked through `sibling`, each holding a strong reference) on
 * W's thread, each once its runner has retired it. Their finalizers (and their results') run
 * here as no task: not as part of the task whose list they were on (a task they call would be
 * spawned into it, maybe after its sync: an orphan); the chain is off that list already (they
 * may prune it). */
static inline void tg_drop_kids(Runner *W, NodeObject *kids) {
    NodeObject *cur = W->current;
    W->current = NULL;
    while (kids) {
        NodeObject *next = kids->sibling;
        kids->sibling = NULL;
        if (!tg_kid_retired(kids)) tg_wait_retired(kids);
        Py_DECREF(kids);
        kids = next;
    }
    W->current = cur;
}
/* Runs tasks on W until `awaited` finishes (or, when NULL, until the pool shuts down). */
tg_find tg_wait_until(Runner *W, NodeObject *awaited);
/* Waits for n as a join of the task running on W (nested helping, counted in the join depth);
 * `foreign`: n may finish without waking this pool, so the join polls while parked. */
tg_find tg_join_wait(Runner *W, NodeObject *n, int foreign);
/* Whether the pending node n waits, directly or through other pending nodes, for cur or one of
 * the tasks that spawned it (*via: that task). -1 on error. */
int tg_depends_on_waiter(NodeObject *cur, NodeObject *n, NodeObject **via);
/* The RecursionError of a task whose thread's C stack is too low for more nesting (`doing`
 * says what it was doing); never NULL. */
PyObject *tg_stack_error(NodeObject *n, const char *doing);
/* n failed with exc (stolen): stores it and publishes `failing`. */
void tg_set_failing(NodeObject *n, PyObject *exc);
/* Finishes n (W: the worker finishing it, or NULL) and handles what that causes: the end of
 * its run, and successors that a shut-down pool refused. */
void tg_finish(Runner *W, NodeObject *n, int final);
/* Runs a NEW node at once in the calling thread (serial elision). 1 if it ran (its outcome
 * is stored; KeyboardInterrupt and SystemExit are also raised: returns -1), 0 if someone else
 * had claimed it. */
int tg_run_inline(NodeObject *n);
/* drain(): skips a task left in a queue after shutdown, as worker W (single-threaded). */
void tg_drain_one(Runner *W, tg_task *t);
/* Finishes a node that a backend claimed with tg_task_claim_inline and ran elsewhere (the
 * dask backend): stores value (a result, or the exception) and publishes the final state. */
void tg_finish_external(NodeObject *n, int final, PyObject *value);
/* Finishes a task that a shut-down pool refused (or will never run) as cancelled, with
 * everything that refusal cascades to. The caller gives up its core reference to each. */
void tg_cancel_refused(tg_task *refused);

#endif
