/* A worker's counters (what Scheduler.stats() reports): their names, and the one way they are
 * counted. Written by the worker they belong to only; read by anyone (tg_pool_stats). */
#ifndef TG_COUNTERS_H
#define TG_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

/* Per-worker counters, indices into the array filled by tg_pool_stats. */
typedef enum {
    TG_STAT_RUN = 0,        /* tasks handed to this worker (run or skipped) */
    TG_STAT_SPAWNED,        /* tasks created from inside this worker's tasks */
    TG_STAT_STOLEN,         /* tasks this worker stole from another worker (one at a time,
                             * or in a batch: counted when a task first changes workers) */
    TG_STAT_STEAL_ATTEMPTS, /* tries to take from another worker's deque (a steal that took
                             * something, found it empty, or lost a race) */
    TG_STAT_INJECTED,       /* tasks this worker took from the injector */
    TG_STAT_PARKS,          /* times this worker slept (naps not counted) */
    TG_STAT_LOOKS,          /* looks at another worker's deque (each reads its top, bottom
                             * and push count): the tries above, and the looks that found it
                             * empty or held work not to be taken yet (pool.c) */
    TG_NSTATS
} tg_stat;

/* Adds one to a worker's counter c. Only from that worker's thread. */
static inline void tg_count(_Atomic int64_t *c) {
    /* Relaxed load + store: single writer (the owner); readers only need a recent value. */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

#endif
