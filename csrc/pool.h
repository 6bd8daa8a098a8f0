/* The worker pool: one Chase-Lev deque per worker, an injector queue for work submitted from
 * outside the workers, the find-work loop (own deque, injector, steal, park), parking, and
 * per-worker counters.
 *
 * The worker threads themselves are Python threads (they run Python task bodies); each calls
 * tg_next / tg_join with its own index. Sleep protocol: docs/design/sleep.md. */
#ifndef TG_POOL_H
#define TG_POOL_H

#include <stdint.h>

#include "graph.h"

typedef struct tg_pool tg_pool;

/* Results of tg_next / tg_join. */
enum {
    TG_NEXT_TASK = 0,     /* *out holds the handle of a task to run (state RUNNING) */
    TG_NEXT_ENDED = 1,    /* finishing `done` ended its run; call again with done = NULL */
    TG_NEXT_JOINED = 2,   /* tg_join only: the awaited task has finished */
    TG_NEXT_SHUTDOWN = 3, /* the pool is shutting down */
    TG_NEXT_SKIP = 4      /* *out holds a task that must not run (poisoned or its run was
                           * cancelled): finish it as cancelled */
};

/* Per-worker counters, indices into the array filled by tg_pool_stats. */
enum {
    TG_STAT_RUN = 0,        /* tasks handed to this worker (run or skipped) */
    TG_STAT_SPAWNED,        /* tasks created from inside this worker's tasks (tg_spawn/tg_submit) */
    TG_STAT_STOLEN,         /* tasks this worker stole from another worker */
    TG_STAT_STEAL_ATTEMPTS, /* steal calls (ok, empty or retry) */
    TG_STAT_INJECTED,       /* tasks this worker took from the injector */
    TG_STAT_PARKS,          /* times this worker slept */
    TG_NSTATS
};

/* A pool for nworkers workers (1..4096). NULL when out of memory or nworkers is invalid. */
tg_pool *tg_pool_new(int nworkers);
/* Frees the pool. Every worker must have returned from tg_next/tg_join for good. */
void tg_pool_free(tg_pool *p);
/* Makes every tg_next/tg_join return TG_NEXT_SHUTDOWN (after finishing the task passed in) and
 * wakes every parked worker. Idempotent. */
void tg_pool_shutdown(tg_pool *p);

/* Claims a NEW task for run, with no dependencies, and makes it ready: pushed onto worker w's
 * deque (w >= 0, only from that worker's thread) or onto the injector (w < 0, any thread).
 * Returns 1, 0 when the task had been claimed already, -1 when out of memory. */
int tg_spawn(tg_pool *p, int w, tg_task *t, void *handle, tg_run *run);
/* Drops the hold of a claimed task (after its tg_task_depend calls); if it is ready, pushes it
 * as tg_spawn does. Returns 1 if pushed, 0 if it waits for predecessors, -1 on out of memory. */
int tg_submit(tg_pool *p, int w, tg_task *t);
/* Worker w's loop step: finishes `done` (if not NULL) with state `final`, then finds the next
 * task (own deque, injector, steal, park). Blocks, without using CPU, while there is no work. */
int tg_next(tg_pool *p, int w, tg_task *done, int final, void **out);
/* Worker w's join step: finishes `done` (if not NULL), then returns TG_NEXT_JOINED if
 * `awaited` has finished; else finds a task to run meanwhile: own deque first, then (if
 * steal) the worker that stole `awaited`, other workers and the injector; parks if there is
 * none until `awaited` finishes or work appears. */
int tg_join(tg_pool *p, int w, tg_task *awaited, tg_task *done, int final, int steal, void **out);
/* After shutdown, once every worker has returned for good: finishes `done` (if not NULL; its
 * released successors go onto worker 0's deque) and takes any task left in a deque or the
 * injector (TG_NEXT_SKIP), or returns TG_NEXT_ENDED when finishing
 * `done` ended its run, or TG_NEXT_SHUTDOWN when nothing is left. Single-threaded. */
int tg_pool_drain(tg_pool *p, tg_task *done, int final, void **out);
/* Sets the run's cancelled flag: its tasks that have not started are handed out with skip=1. */
void tg_run_cancel(tg_run *r);
/* Copies worker w's counters into out[0..TG_NSTATS-1]. Any thread. */
void tg_pool_stats(tg_pool *p, int w, int64_t *out);
/* Approximate number of queued tasks (all deques and the injector). */
int64_t tg_pool_queued(tg_pool *p);

#endif
