/* Engine (engine.c): the native half of a taskgraph.Scheduler: its pool, its runners (one per
 * worker thread), its run registry, its observer, closing and draining. Layer 8
 * (docs/design/native.md). */
#ifndef TG_PY_ENGINE_H
#define TG_PY_ENGINE_H

#include "submit.h"

typedef struct EngineObject EngineObject;

struct EngineObject {
    PyObject_HEAD
    tg_pool *pool;           /* owned: made by the constructor, freed by the dealloc */
    Runner *workers;         /* one runner per slot: the workers, then the spares */
    tg_observer *obs;        /* owned: the tracing state of its workers (recorder.c) */
    int nworkers;
    int nslots;              /* nworkers + the spare slots (pool.h, tg_pool_new_spares) */
    int64_t spare_idle_ns;   /* how long a spare thread waits off duty before it ends */
    int number;              /* Scheduler.number */
    int max_help_depth;
    PyObject *label;         /* the Scheduler's repr, for messages */
    tg_runs reg;             /* its active runs, closed, broken (run.c); reg.mu also guards
                              * the counters below */
    EngineObject *live_prev, *live_next; /* the live engines (engine.c's lock) */
    int live;
    _Atomic int forked;      /* in a child process: made before fork() (never used there) */
    /* How the workers end (all under reg.mu): threads expected to run work(), how many
     * returned from it for good, whether the Scheduler was dropped without close() (the last
     * worker to leave then drains), whether the queues were drained (once). */
    int nthreads, exited, orphaned, drained;
};

extern PyTypeObject TG_EngineType;

/* In a child process after fork(): marks an engine made before the fork closed for good
 * (its threads are gone, its locks may be held). Single-threaded (the after-fork hook). */
void tg_engine_mark_forked(EngineObject *e);
/* In a child process after fork() (single-threaded): marks every engine alive (all made
 * before the fork) with tg_engine_mark_forked and forgets them; resets their list's lock. */
void tg_engines_after_fork_child(void);
/* 0, or -1 with SchedulerClosedError if n is unfinished and belongs to an engine made before
 * fork() (it can never finish in this child process): waiters call it before they wait. */
int tg_engine_check_owner(NodeObject *n);

#endif
