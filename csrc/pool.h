/* The worker pool: one Chase-Lev deque per worker, an injector queue for work submitted from
 * outside the workers, the find-work loop (own deque, injector, steal, park), parking, and
 * per-worker counters.
 *
 * The worker threads are created by the caller (Python threads in taskgraph, pthreads in the C
 * tests); each calls tg_pool_find with its own index. Sleep protocol: docs/design/sleep.md. */
#ifndef TG_POOL_H
#define TG_POOL_H

#include <stdint.h>

#include "counters.h"
#include "graph.h"

typedef struct tg_pool tg_pool;

/* What tg_pool_find hands back. */
typedef enum {
    TG_FIND_RUN = 0,     /* *out: a task to run (state RUNNING, handed to this worker) */
    TG_FIND_SKIP = 1,    /* *out: a task that must not run (poisoned, or its run was
                          * cancelled): finish it as TG_CANCELLED */
    TG_FIND_JOINED = 2,  /* the awaited task has finished */
    TG_FIND_SHUTDOWN = 3 /* the pool is shutting down */
} tg_find;

/* What happened to a task given to the pool. */
typedef enum {
    TG_PUSH_WAITING = 0, /* released; its predecessors will queue it when they finish */
    TG_PUSH_QUEUED = 1,  /* ready and queued */
    TG_PUSH_TAKEN = 2,   /* tg_pool_spawn only: the task had been claimed already */
    TG_PUSH_NOMEM = -1,  /* out of memory: not queued (the task is ready: the caller owns it) */
    TG_PUSH_REFUSED = -2 /* the pool is shut down: not queued (the caller owns the ready task
                          * and must finish it as cancelled) */
} tg_push;

/* Called by tg_pool_find around everything it does once the worker's own deque is empty
 * (searching the injector and other deques, parking), with find's idle_ctx. The Python face
 * detaches the thread from the interpreter there. Neither may touch the pool. */
typedef void (*tg_idle_fn)(void *ctx);

/* The most workers a pool has (taskgraph.Scheduler's limit too: exported as MAX_WORKERS). */
#define TG_MAX_WORKERS 4096

/* A pool for nworkers workers (1..TG_MAX_WORKERS). NULL when out of memory or nworkers is
 * invalid. */
tg_pool *tg_pool_new(int nworkers);
/* Frees the pool. Every worker must have returned from tg_pool_find for good. */
void tg_pool_free(tg_pool *p);
/* From now on tg_pool_find returns TG_FIND_SHUTDOWN once the worker's own deque is empty
 * (what is left in other queues stays for tg_pool_drain), injections are refused, and every
 * parked worker wakes. Idempotent. */
void tg_pool_shutdown(tg_pool *p);
int tg_pool_is_shutdown(const tg_pool *p);
int tg_pool_workers(const tg_pool *p);
/* How many workers are parked waiting for new work right now (a snapshot, for tests and
 * tools: the no-lost-wake-up test waits until every worker sleeps before it submits). */
int tg_pool_sleeping(tg_pool *p);
/* Worker w only: whether handing out work now would feed an idle worker: w's own deque is
 * empty (nothing there to steal) and some worker is searching or parked waiting for work.
 * A hint for adaptive splitting (tg.map), read without synchronisation. */
int tg_pool_wants_work(tg_pool *p, int w);
void tg_pool_set_idle_hooks(tg_pool *p, tg_idle_fn begin, tg_idle_fn end);
/* Tests only: probe(ctx, w) is called by a worker about to park, after it has registered as a
 * sleeper and before it re-checks the queues (docs/design/sleep.md); a test holds it there to
 * prove that a wake-up in that window is not lost. NULL removes the probe. */
void tg_pool_set_park_probe(tg_pool *p, void (*probe)(void *ctx, int w), void *ctx);

/* Claims t for run (run->pool == p) as a child covered by the task running on worker w
 * (tg_task_claim_child: that task finishes only after t, or holds the run) and pushes it onto
 * worker w's own deque. Only from worker w's thread. TG_PUSH_QUEUED, TG_PUSH_TAKEN (claimed
 * already) or TG_PUSH_NOMEM (claimed, ready, not queued). */
tg_push tg_pool_spawn(tg_pool *p, int w, tg_task *t, tg_run *run);
/* tg_pool_spawn for a NEW task the caller has just made and that no other thread can reach yet
 * (tg_task_claim_fresh_child: no read-modify-write): TG_PUSH_QUEUED or TG_PUSH_NOMEM (claimed,
 * ready, not queued). Only from worker w's thread. */
tg_push tg_pool_spawn_fresh(tg_pool *p, int w, tg_task *t, tg_run *run);
/* Drops the hold of a claimed task (after its tg_task_depend calls); if that makes it ready,
 * pushes it onto worker w's own deque (only from worker w's thread). */
tg_push tg_pool_release(tg_pool *p, int w, tg_task *t);
/* The same from a thread that is not one of p's workers: a ready task goes to the injector.
 * May answer TG_PUSH_REFUSED. Test-facing: the C tests (csrc/tests) queue single tasks with
 * it; the Python face releases through tg_pool_release and tg_pool_inject_ready. */
tg_push tg_pool_release_external(tg_pool *p, tg_task *t);
/* Puts n ready tasks (state READY) on the injector in one step: TG_PUSH_QUEUED for all, or
 * TG_PUSH_REFUSED / TG_PUSH_NOMEM for none. */
tg_push tg_pool_inject(tg_pool *p, tg_task *const *tasks, int64_t n);
/* Finishes t with state final and releases its successors. The caller is worker w of p
 * (w >= 0: released successors of p go onto its deque) or not a worker (w < 0, p may be NULL:
 * they go to the injector). A successor of another pool goes to that pool's injector. A
 * successor that a shut-down pool refuses is appended to *refused (chained through
 * tg_task.link; refused must not be NULL, *refused may be): the caller owns it and must
 * finish it as cancelled. Wakes the workers parked in a join for
 * t. Returns 1 if the finish ended t's run. */
int tg_pool_finish(tg_pool *p, int w, tg_task *t, tg_state final, tg_task **refused);
/* How a worker looks for work in tg_pool_find (bits of `how`). */
enum {
    /* Own deque and the injector only (a join nested past its help depth: it must not nest
     * other workers' tasks, but work submitted from outside has no owner to run it, so it
     * takes that). Parks without being counted as idle and wakes now and then to look at the
     * injector again (injections wake only idle workers). */
    TG_LOOK_LOCAL = 0,
    /* Own deque, the injector, then the other workers' deques; parks counted as idle (woken
     * by new work). */
    TG_LOOK_STEAL = 1,
    /* `awaited` may finish without waking this pool (it belongs to another pool or was
     * claimed inline, outside any pool): parked, the worker wakes now and then to look. */
    TG_LOOK_POLL = 2
};
/* How long a parked worker that polls (TG_LOOK_LOCAL, TG_LOOK_POLL) sleeps at most between two
 * looks: it starts at 50 us and doubles up to this. */
#define TG_POLL_MAX_NS 10000000L

/* Worker w's step: returns TG_FIND_JOINED if `awaited` (may be NULL) has finished; else finds
 * a task: own deque first, then (see `how`) the injector, the worker that stole `awaited`,
 * other workers; parks, without using CPU, until work appears, `awaited` finishes or the pool
 * shuts down. */
tg_find tg_pool_find(tg_pool *p, int w, tg_task *awaited, int how, void *idle_ctx, tg_task **out);
/* After shutdown, once every worker has returned for good: takes any task left in a deque or
 * the injector (returns 1; it is handed out with skip = 1 as to worker 0: finish it with
 * tg_pool_finish(p, 0, ...)), or returns 0 when nothing is left. Single-threaded. */
int tg_pool_drain(tg_pool *p, tg_task **out);
/* Copies worker w's counters into out[0..TG_NSTATS-1]. Any thread. */
void tg_pool_stats(tg_pool *p, int w, int64_t *out);
/* A number that moves whenever a task leaves worker w's deque (w takes one: its count of tasks
 * handed to it; another worker steals one: the deque's top) and stands still while w only
 * pushes. A task on w's deque finishes only after leaving it, so while the number stands
 * still none of them can have finished. Worker w's thread only; a hint (relaxed: a steal made
 * a moment ago may show only at the next call). */
uint64_t tg_pool_progress(tg_pool *p, int w);
/* Approximate number of queued tasks (all deques and the injector). */
int64_t tg_pool_queued(tg_pool *p);

#endif
