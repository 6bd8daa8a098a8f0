/* The pool's state (pool.h's tg_pool: its workers, injector and sleepers) and the small steps
 * on it that the pool (pool.c: queues, finding work, parking) and the thief (thief.c: whom to
 * steal from, what to take) share. Internal to the core: only those two include it. */
#ifndef TG_POOLSTATE_H
#define TG_POOLSTATE_H

#include <stdlib.h>

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
    /* This worker as a victim: behind a gate while its push count is below gate_pushes
     * (gate_k: the gate's length in pushes, 0 for none), because the last batch taken from
     * it was too fine to pay for its move, and only while its dry count is gate_dries (the
     * count that batch was taken at). Written and read by thieves only (relaxed: a hint,
     * synchronising with nothing), on a cache line of their own, away from the owner's. */
    _Alignas(64) _Atomic int64_t gate_pushes;
    _Atomic int64_t gate_k;
    _Atomic int64_t gate_dries;
} tg_worker;

struct tg_pool {
    int n;
    tg_worker *w;
    _Atomic int32_t shutdown;
    tg_injector inj; /* work submitted from outside the workers (injector.h) */
    tg_sleep sl;     /* who searches, who sleeps (sleep.h) */
    void (*idle_begin)(void *ctx), (*idle_end)(void *ctx); /* tg_idle_fn: set before the workers start */
};

static inline void stat_inc(tg_worker *me, tg_stat k) { tg_count(&me->stats[k]); }

/* The owner found its own deque empty: every gate learnt on its work so far is void. */
static inline void note_dry(tg_worker *me) { tg_count(&me->dries); }

/* Worker v's dry count (relaxed: a hint for the thieves, paired with nothing). */
static inline int64_t dries_of(tg_worker *v) {
    return atomic_load_explicit(&v->dries, memory_order_relaxed);
}

/* After a worker pushed onto its own deque: tells the sleepers (sleep.md, rule 1). A pool of
 * one worker has nobody to tell: its only worker is the pusher, awake. */
static inline void notify_pushed(tg_pool *p) {
    if (p->n > 1) tg_sleep_notify(&p->sl);
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
