/* Run (run.c): one compute() call, and the run registry of an engine (its active runs, whether
 * it still takes new ones). Layer 5 (docs/design/native.md): the engine embeds its registry
 * (tg_runs); the layers below the engine reach the engine only through it. */
#ifndef TG_PY_RUN_H
#define TG_PY_RUN_H

#include "noderec.h"

typedef struct RunObject RunObject;

/* An engine's run registry, embedded in the engine (engine.h). */
typedef struct tg_runs {
    pthread_mutex_t mu;     /* guards runs and broken (and the engine's closing counters); no
                             * Python call while held */
    RunObject *runs;        /* active runs (strong references) */
    _Atomic int closed;     /* close began: new runs are refused (written under mu) */
    PyObject *broken;       /* why the engine is broken (str, under mu), or NULL */
    PyObject *label;        /* the Scheduler's repr, for messages (the engine's reference) */
    struct tg_watch *watch0; /* the first worker's tracing state (recorder.h): its live feed,
                              * when one is attached, counts submissions from outside */
} tg_runs;

struct RunObject {
    PyObject_HEAD
    tg_run r;               /* the core's run: its tasks point here (RUN_OF finds this) */
    PyObject *owner;        /* strong: the engine, which holds `engine` and the pool */
    tg_runs *engine;        /* its engine's run registry (in the owner) */
    pthread_mutex_t mu;     /* guards ended, error, reason; no Python call while held */
    pthread_cond_t cv;      /* signalled when the run ends */
    int ended;
    int registered;         /* in its engine's list of active runs (engine->mu) */
    PyObject *error;        /* the first failure of a top-level task */
    PyObject *reason;       /* why it was cancelled (str) */
    RunObject *prev, *next; /* the engine's active runs (engine->mu) */
    /* Set (never cleared) when node.cancel() found one of its tasks running, or when such a
     * task saw the request before node.cancel() set this (taskgraph.cancelled(), module.c):
     * from then on a task of this run checks its ancestors before it starts. Relaxed: a hint;
     * seen late, a child of a cancelled task may start, and its task can still check
     * tg.cancelled(). */
    _Atomic int cancel_running;
    /* taskgraph.Executor's run (executor.c): 0 for a compute's run; TG_EXEC_OPEN while it
     * takes calls: a failed call is its own future's, never its run's (no fail-fast,
     * worker.c); TG_EXEC_REFUSING from shutdown() on: submit refuses (seq_cst, see
     * executor.c's hand-off between submit and release). */
    _Atomic int exec;
    int drain_holds;        /* holds of syncs cut short by the shutdown (engine->mu) */
    NodeObject *drain_kids; /* their children (strong, through `sibling`; engine->mu) */
};

#define RUN_OF(run) ((RunObject *)((char *)(run) - offsetof(RunObject, r)))
enum { TG_EXEC_OPEN = 1, TG_EXEC_REFUSING = 2 };

extern PyTypeObject TG_RunType;
/* A new run of the engine `owner` (a strong reference is taken), on its pool and registry
 * (Engine.new_run()). NULL with an error. */
RunObject *tg_run_new(PyObject *owner, tg_pool *pool, tg_runs *reg);
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

/* Registers run as active (first submission). -1 with SchedulerClosedError if closed, or
 * BrokenSchedulerError if broken. */
int tg_runs_add(tg_runs *e, RunObject *run);
/* The active runs, as new references (count in *n), or NULL (*n = -1: out of memory). */
RunObject **tg_runs_active(tg_runs *e, int *n);
/* A task's sync was cut short by its engine's shutdown: the task finishes while children it
 * spawned (covered by it: not counted in the run, no reference of the core; join.c) may still
 * run or wait in a queue. Holds the run open, and keeps `kids` (the task's list of children,
 * strong references through `sibling`, taken over), until the engine has drained its queues,
 * so that neither the run nor a child is freed before its runner is done with it. Called by
 * a task of the run while it runs. */
void tg_run_hold_until_drain(RunObject *run, NodeObject *kids);
/* After the drain (every worker returned, the queues emptied): lets go of those holds and
 * children, ending the runs that were waiting only for them. */
void tg_runs_release_drain_holds(tg_runs *e);
/* An internal failure (reason: str, borrowed): marks the engine broken, like BrokenThreadPool.
 * Every active run is cancelled with BrokenSchedulerError(reason) as its error, and new
 * computes raise it; close() still works. The first reason stays. Never raises. */
void tg_runs_break(tg_runs *e, PyObject *reason);

#endif
