/* The pool's state (pool.h's tg_pool: its workers, injector and sleepers) and the small steps
 * on it that the pool (pool.c: queues, finding work, parking) and the thief (thief.c: whom to
 * steal from, what to take) share. Internal to the core: only those two include it. */
#ifndef TG_POOLSTATE_H
#define TG_POOLSTATE_H

#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <time.h>

#include "counters.h"
#include "deque.h"
#include "graph.h"
#include "injector.h"
#include "sleep.h"

typedef struct tg_pool tg_pool; /* as pool.h declares it (pool.c includes both) */

typedef struct {
    _Alignas(64) tg_deque *dq;
    uint64_t rng;             /* owner only */
    _Atomic int64_t stats[TG_NSTATS]; /* written by the owner only, read by anyone */
    /* How many times this worker found its own deque empty (owner writes, thieves read:
     * relaxed, a hint). A gate holds only while this count is the one it was learnt at: the
     * work it judged is gone once the deque ran dry (thief.c). */
    _Atomic int64_t dries;
    /* Owner only, as a thief: the last batch it stole outside a join (victim, or -1; when;
     * how many tasks), judged when it next runs out of work (tg_thief_learn); and the deque it
     * watches (a victim holding work it does not take yet, or -1): that deque's top, bottom
     * and push count as last seen, and since when they have stood still. stole_dries: the
     * victim's dry count when the batch was taken. */
    int stole_from, seen_v;
    int64_t stole_at, stole_n, stole_dries, seen_top, seen_bottom, seen_pushes, seen_at;
    /* For the manager of spares (spare.c; docs/design/sleep.md, "Spare workers"), in the
     * owner's lines' padding (the record stays 256 bytes, so indexing p->w costs one shift):
     * written by the owner on its slow paths only (entering and leaving find_idle, a declared
     * wait), read by the manager every few milliseconds. idle_now: 1 while the worker is in
     * find_idle (searching or parked: not running a task's code), 0 while it runs one.
     * blocking: 1 while a task of this worker is inside a declared wait (tg_pool_block_begin).
     * waits: how many waits of this slot's tasks were declared or found (tg_pool_waits).
     * The CPU clock and thread id of the slot's thread (tg_pool_attach), read by the manager
     * only while has_clock is 1. */
    _Atomic int32_t idle_now;
    _Atomic int32_t blocking;
    _Atomic int32_t has_clock;
    _Atomic int32_t waits;
    clockid_t cpu_clock;
    int64_t tid;              /* the slot's thread's id (Linux), or 0: its schedstat */
    int32_t yielded_now;      /* 1 while the worker yields its core (spare.c; under sp.mu) */
    /* This worker as a victim: behind a gate while its push count is below gate_pushes
     * (gate_k: the gate's length in pushes, 0 for none), because the last batch taken from
     * it was too fine to pay for its move, and only while its dry count is gate_dries (the
     * count that batch was taken at). Written and read by thieves only (relaxed: a hint,
     * synchronising with nothing), on a cache line of their own, away from the owner's. */
    _Alignas(64) _Atomic int64_t gate_pushes;
    _Atomic int64_t gate_k;
    _Atomic int64_t gate_dries;
} tg_worker;
_Static_assert(sizeof(tg_worker) <= 256, "tg_worker: keep the manager's fields in the padding");

/* The spare workers of a pool and their manager (spare.c; docs/design/sleep.md, "Spare
 * workers"). Slots p->n .. p->n + limit - 1 are spares: full workers (a deque, a sleeper),
 * each run by a thread only while the pool wants it. */
typedef struct {
    int limit;               /* how many spare slots (0: none, and no manager) */
    int inited;              /* tg_spares_init ran (its mutex, conditions, semaphores exist) */
    int detect;              /* the manager looks for undeclared waits (set before any thread) */
    /* Tasks inside a declared wait (tg_pool_block_begin/end): seq_cst RMWs, read by the
     * manager and by the spares deciding to leave duty. */
    _Atomic int32_t blocked;
    /* Workers the manager found waiting without having declared it (written by the manager
     * only; read relaxed by the spares: a hint for leaving duty). */
    _Atomic int32_t stalled;
    /* Spares wanted beyond one per waiting task (written by the manager only, read relaxed
     * with stalled): while every thread in service waits and none is idle, the cores are
     * idle and queued tasks may wait too, so the manager doubles each wave (spare.c). */
    _Atomic int32_t surge;
    /* Spares on duty (a thread running its slot's dispatch loop), changed under mu; read
     * relaxed by the spares' lock-free check before they take mu. */
    _Atomic int32_t on;
    /* 1 while the manager sleeps with no timeout (every worker idle, nothing blocked): a worker
     * that leaves find_idle with a task wakes it (seq_cst store/load pairs: see note_busy). */
    _Atomic int32_t parked;
    /* Workers (slots below n) that gave their core to a spare on duty (tg_spare_yield) and are
     * not released yet: changed under mu with seq_cst stores, read lock-free (seq_cst) by
     * tg_pool_block_begin (see there). */
    _Atomic int32_t yielded;
    pthread_mutex_t mu;      /* guards what follows, and the manager's and idle spares' waits */
    pthread_cond_t cv;       /* the manager waits here */
    pthread_cond_t ycv;      /* yielded workers wait here */
    int released;            /* releases of yielded workers not taken yet (tg_spare_yield) */
    sem_t *swake;            /* per spare slot: its thread waits on it while off duty; posted
                              * when the slot goes on duty (spare.c, tg_pool_spare_wait) */
    int32_t *state;          /* per spare slot: SPARE_FREE, SPARE_IDLE, SPARE_DUTY (spare.c) */
    int kicked;              /* the manager was asked to look now */
    int64_t backoff_until;   /* after the OS refused a thread: no new start before this */
    int64_t threads, peak, started, retired, failed, stalls, activations, yields; /* statistics */
    /* The manager's own (no lock needed: only its thread touches them): per slot, the tasks
     * handed to it and its thread's busy time at the previous scan, and how many scans in a
     * row found it waiting; the scan's time and the pause count then (spare.c). */
    int64_t *last_run, *last_cpu;
    int32_t *streak;
    int64_t last_scan, last_epoch;
} tg_spares;

struct tg_pool {
    int n;
    tg_worker *w;
    _Atomic int32_t shutdown;
    tg_injector inj; /* work submitted from outside the workers (injector.h) */
    tg_sleep sl;     /* who searches, who sleeps (sleep.h) */
    int nslots;      /* n workers and sp.limit spares */
    tg_spares sp;    /* the spares and their manager (spare.c) */
    void (*idle_begin)(void *ctx), (*idle_end)(void *ctx); /* tg_idle_fn: set before the workers start */
    int64_t join_defer_ns; /* pool.c's JOIN_DEFER_NS; tests may change it before the workers start */
};

static inline void stat_inc(tg_worker *me, tg_stat k) { tg_count(&me->stats[k]); }

/* How many slots may hold work: the workers and every spare slot that was ever on duty
 * (tg_sleep_span). */
static inline int span_of(tg_pool *p) { return tg_sleep_span(&p->sl); }

/* The owner found its own deque empty: every gate learnt on its work so far is void. */
static inline void note_dry(tg_worker *me) { tg_count(&me->dries); }

/* Worker v's dry count (relaxed: a hint for the thieves, paired with nothing). */
static inline int64_t dries_of(tg_worker *v) {
    return atomic_load_explicit(&v->dries, memory_order_relaxed);
}

/* After a worker pushed onto its own deque: tells the sleepers (sleep.md, rule 1). A pool of
 * one worker has nobody to tell: its only worker is the pusher, awake. */
static inline void notify_pushed(tg_pool *p) {
    if (p->nslots > 1) tg_sleep_notify(&p->sl);
}

/* How many tasks worker w may take in a batch (1..most): what fits in its ring without growing
 * (keep_rest cannot fail; nobody else holds those tasks). Only w pushes there: it only grows. */
static inline int64_t room(tg_pool *p, int w, int64_t most) {
    int64_t r = tg_deque_capacity(p->w[w].dq) - tg_deque_size(p->w[w].dq);
    return r > most ? most : r < 1 ? 1 : r;
}

/* items[1..n) of a batch (fits: room()) onto w's deque for thieves, sleepers told (sleep.md rule
 * 1); an injected one (`fifo`) newest first, so w runs it oldest first (Executor(1) is FIFO). */
static inline void keep_rest(tg_pool *p, int w, const uint64_t *items, int64_t n, int fifo) {
    for (int64_t i = 1; i < n; i++)
        if (tg_deque_push(p->w[w].dq, items[fifo ? n - i : i]) != 0) abort();
    if (n > 1) notify_pushed(p);
}

#endif
