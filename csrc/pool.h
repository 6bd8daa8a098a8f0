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
    TG_FIND_SHUTDOWN = 3, /* the pool is shutting down */
    TG_FIND_LEAVE = 4     /* a spare at its outermost level only: the pool no longer needs it
                           * on duty; its own deque is empty (tg_pool_spare_wait) */
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

/* The most spare workers a pool has (docs/design/sleep.md, "Spare workers"). */
#define TG_MAX_SPARES 1024

/* A pool for nworkers workers (1..TG_MAX_WORKERS) and no spares. NULL when out of memory or
 * nworkers is invalid. */
tg_pool *tg_pool_new(int nworkers);
/* The same with nspares (0..TG_MAX_SPARES) spare slots: workers put on duty while tasks wait
 * (declared with tg_pool_block_begin, which wakes an idle spare itself, or found waiting by
 * the manager's scan) and work is queued; the manager starts their threads. Slots
 * nworkers..nworkers+nspares-1. */
tg_pool *tg_pool_new_spares(int nworkers, int nspares);
/* Workers and spare slots. */
int tg_pool_slots(const tg_pool *p);
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
/* Tests only, before the workers start: how long a join whose awaited task runs elsewhere
 * leaves the injector (and, while tasks wait, the deques of workers other than its task's
 * thief) alone; pool.c's JOIN_DEFER_NS by default. */
void tg_pool_set_join_defer(tg_pool *p, int64_t ns);

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
/* Tasks on worker w's own deque (approximate, as tg_pool_queued: relaxed loads). */
int64_t tg_pool_deque_size(tg_pool *p, int w);

/* ---- Waiting tasks and spare workers (spare.c; docs/design/sleep.md, "Spare workers") ----
 *
 * Slot w's thread (a worker, or a spare's thread once it is on duty): registers / forgets its
 * CPU clock, which the manager reads to tell a task that waits from one that computes. */
void tg_pool_attach(tg_pool *p, int w);
void tg_pool_detach(tg_pool *p, int w);
/* A task on slot w is about to wait (a declared wait) / has stopped waiting. While it waits a
 * spare may be put on duty: begin wakes an idle spare thread at once (or a worker that
 * yielded its core), and asks the manager to start a thread if none is idle. Only from slot
 * w's thread; nested calls are the caller's to count (one begin, one end). */
void tg_pool_block_begin(tg_pool *p, int w);
void tg_pool_block_end(tg_pool *p, int w);
/* How many waits of slot w's tasks were declared (tg_pool_block_begin, outermost) or found by
 * the manager (a slot judged stalled) so far: a task compares two readings to learn whether
 * what ran between them waited (tg.map's ranges do, to hand their items out at once). Any
 * thread; a recent value (the count moves at the wait's start, or a few milliseconds into
 * an undeclared one). */
int32_t tg_pool_waits(tg_pool *p, int w);
/* The manager's step, on a thread of its own: puts idle spares back on duty, scans the
 * workers for undeclared waits (tasks that keep a slot without progress and use less than half
 * of a core), and sleeps (without a timeout while every slot is idle). Returns a spare slot
 * whose thread must be started now (it counts as on duty: the thread calls tg_pool_spare_begin,
 * or the caller tg_pool_spare_failed), or -1 once the pool shuts down. */
int tg_pool_manage(tg_pool *p);
/* Whether the manager looks for waits nobody declared (default 1). With a lock that every
 * thread of the process takes in turn (CPython's GIL), a thread waiting for it looks like a
 * task that waits: the caller turns the looking off; declared waits still get spares. */
void tg_pool_set_detection(tg_pool *p, int on);
/* The OS refused the thread of spare slot w: the slot is free again, no new spare thread is
 * tried for a second, and the failure is counted (tg_pool_spare_stats). */
void tg_pool_spare_failed(tg_pool *p, int w);
/* Spare slot w's new thread, before its first tg_pool_find (and after tg_pool_attach). */
void tg_pool_spare_begin(tg_pool *p, int w);
/* Spare slot w's thread after tg_pool_find returned TG_FIND_LEAVE or TG_FIND_SHUTDOWN at its
 * outermost level: waits off duty. 1: back on duty (call tg_pool_find again); 0: its thread
 * must end (idle for idle_ns, or shutdown; the slot is free and counted so). */
int tg_pool_spare_wait(tg_pool *p, int w, int64_t idle_ns);
/* Every thread of the process stops (a garbage collection) / goes on: process-wide, for every
 * pool's manager, which judges no wait over an interval with such a stop in it (every thread
 * waits then, and a spare would too). */
void tg_pool_pause_note(int starting);
/* The spares' counters. */
typedef struct {
    int64_t limit;       /* spare slots */
    int64_t threads;     /* spare threads alive now (on duty or idle) */
    int64_t peak;        /* the most spare threads alive at once */
    int64_t on_duty;     /* spares on duty now */
    int64_t blocked;     /* tasks inside a declared wait now */
    int64_t stalled;     /* workers the manager found waiting undeclared at its last scan */
    int64_t started;     /* spare threads started */
    int64_t retired;     /* spare threads that ended after their idle time */
    int64_t failed;      /* spare threads the OS refused */
    int64_t stalls;      /* scans that found undeclared waits */
    int64_t activations; /* times a spare was put on duty */
    int64_t yields;      /* times a worker gave its core to a spare on duty (tg_spare_yield) */
} tg_spare_stats;
void tg_pool_spare_stats(tg_pool *p, tg_spare_stats *out);

#endif
