/* The live feed's per-task path (livefeed.c): what a worker writes for the dashboard
 * (taskgraph/dashboard/) while a feed is attached to its watch (recorder.h). Each worker has
 * a tg_feedw: its ring (csrc/live.h) and a cache of task names; the names themselves are in
 * one table per engine (tg_feednames), shared by its workers and the reader, under a mutex
 * that a worker takes only the first time it meets a name. A record holds a name's index, so
 * the reader needs no Python object of the worker's. No Python call per task. Layer 3
 * (docs/design/native.md): above noderec only. */
#ifndef TG_PY_LIVEFEED_H
#define TG_PY_LIVEFEED_H

#include "noderec.h"
#include "live.h"
#include "trace.h"

/* Names kept per engine; later new names all count as index 0, "(other names)". */
#define TG_FEED_NAMES 4096
#define TG_FEED_CACHE 16 /* per worker: a direct-mapped cache of name -> index */
/* What is counted per name: [TG_FEED_KINDS * name + kind]. Submitted: the task entered the
 * pool (spawned, claimed by a submission); its other counts say where it is since. */
enum { TG_FEED_DONE, TG_FEED_FAILED, TG_FEED_CANCELLED, TG_FEED_SUBMITTED, TG_FEED_KINDS };

typedef struct tg_feednames {
    /* [name]: tasks submitted from outside the workers (any thread: atomic adds; relaxed, a
     * count that pairs with no other access, read by the feed's reader for a recent value). */
    _Atomic int64_t *outside;
    pthread_mutex_t mu;      /* guards everything below */
    PyObject **names;        /* strong references; a name's index is its position */
    int32_t n, cap;
    PyObject **keys;         /* open addressing: name object -> index (identity) */
    int32_t *vals;
    int64_t kcap;
} tg_feednames;

typedef struct tg_feedw {
    tg_live *live;
    tg_feednames *names;
    /* [TG_FEED_KINDS * name + kind]: the worker's tasks done, failed, cancelled, and those
     * it submitted, by name: written by the worker only, with relaxed atomics, read by the
     * reader at any time. They are counted whether or not the ring has room: the counts are
     * never dropped. */
    _Atomic int64_t *counts;
    /* Tasks that finished done on the worker with this feed attached (each node once: it
     * carries `held` from then on), for the results-held count: written by the worker only
     * (relaxed load and store), read by tg_feed_held (relaxed: a recent value). */
    _Atomic int64_t done_held;
    /* The worker's own cache (its thread only): only names in the table, which holds them,
     * so an address in it always names the same object. */
    PyObject *ckey[TG_FEED_CACHE];
    int32_t cval[TG_FEED_CACHE];
    struct tg_feedw *next, *prev; /* every live feed of the process (tg_feed_held), under its lock */
} tg_feedw;

/* An engine's name table (index 0 is "(other names)"), or NULL with an error. */
tg_feednames *tg_feednames_new(void);
void tg_feednames_free(tg_feednames *t);
/* How many names the table holds (with the thread detached while it waits for the lock). */
int32_t tg_feednames_count(tg_feednames *t);
/* New references to names [first, n) of the table into out (room for max); returns how many
 * (with the thread detached while it waits for the lock). */
int32_t tg_feednames_copy(tg_feednames *t, int32_t first, PyObject **out, int32_t max);
/* A worker's feed over the engine's table, or NULL with an error. */
tg_feedw *tg_feedw_new(tg_feednames *names);
void tg_feedw_free(tg_feedw *f);

/* The index of a task name (worker only). */
int32_t tg_feed_name_slow(tg_feedw *f, PyObject *name, int slot);
static inline int32_t tg_feed_name(tg_feedw *f, PyObject *name) {
    int slot = (int)(((uintptr_t)name >> 4) & (TG_FEED_CACHE - 1));
    return f->ckey[slot] == name ? f->cval[slot] : tg_feed_name_slow(f, name, slot);
}

/* Adds 1 to a count that only this thread writes (relaxed: the reader needs a recent value
 * only; a load and a store, not a locked add, since there is one writer). */
static inline void tg_feed_count(_Atomic int64_t *c) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* Results held: the nodes whose task finished done on a worker with a feed attached (they
 * carry `held`) and that still hold their result (until they are cleared or freed). A
 * process-wide count, the sum of two parts. Gained: each feed's done_held, a count its worker
 * keeps (two plain instructions per task, no shared line), summed by the reader over the
 * process's live feeds (a feed freed adds its count to tg_feed_held_total first). Lost: a
 * result let go is subtracted from tg_feed_held_total, by a worker thread through TG_TLS.held
 * (added to the total every TG_FEED_HELD_BATCH of them, when it goes idle and when its loop
 * ends: while it runs tasks the count may lag by fewer than TG_FEED_HELD_BATCH per worker),
 * by any other thread at once. Relaxed atomic adds: a count that pairs with no other access;
 * the reader wants a recent value. */
#define TG_FEED_HELD_BATCH 64
extern _Atomic int64_t tg_feed_held_total;
static inline void tg_feed_held_flush(void) {
    tg_tls *tls = &TG_TLS;
    if (tls->held) atomic_fetch_add_explicit(&tg_feed_held_total, tls->held, memory_order_relaxed);
    tls->held = 0;
}
/* Node n's result is let go (node.c clears it): counted if n carries `held`. */
static inline void tg_feed_held_drop(NodeObject *n) {
    if (!n->held) return;
    n->held = 0;
    tg_tls *tls = &TG_TLS;
    if (!tls->worker) {
        atomic_fetch_add_explicit(&tg_feed_held_total, -1, memory_order_relaxed);
        return;
    }
    if (--tls->held <= -TG_FEED_HELD_BATCH) tg_feed_held_flush();
}
/* The count now: the shared count (what the threads flushed) plus every live feed's done_held. */
int64_t tg_feed_held(void);

/* Node n, just submitted (spawned or claimed) by f's worker, is counted under its name. */
static inline void tg_feed_submitted(tg_feedw *f, NodeObject *n) {
    tg_feed_count(&f->counts[TG_FEED_KINDS * (n->name ? tg_feed_name(f, n->name) : 0) + TG_FEED_SUBMITTED]);
}
/* The same from outside the workers, on t's outside counts; *ckey / *cval: the caller's cache
 * of one name (NULL / 0 to start), which saves the table's lock for a run of one name; ckey
 * NULL for a single node (no cache). */
void tg_feed_submitted_outside(tg_feednames *t, NodeObject *n, PyObject **ckey, int32_t *cval);

/* A task starts at t0 on f's worker: its name's index (for tg_feed_end). */
static inline int32_t tg_feed_begin(tg_feedw *f, NodeObject *n, int64_t t0) {
    int32_t name = n->name ? tg_feed_name(f, n->name) : 0;
    tg_live_push(f->live, name, t0);
    return name;
}

/* The task that tg_feed_begin saw start ends at t1 with state final: its record. */
static inline __attribute__((always_inline)) void tg_feed_end(tg_feedw *f, NodeObject *n, int final, int64_t t0, int64_t t1, int32_t name) {
    int32_t d = tg_live_pop(f->live);
    tg_feed_count(&f->counts[TG_FEED_KINDS * name + (final == TG_DONE ? TG_FEED_DONE : final == TG_FAILED
                                                     ? TG_FEED_FAILED : TG_FEED_CANCELLED)]);
    if (final == TG_DONE && !n->held) { /* its result is held from now on (node.c lets go) */
        n->held = 1;
        tg_feed_count(&f->done_held); /* one writer: see done_held */
    }
    tg_live_rec *r = tg_live_room(f->live);
    if (!r) return; /* the reader lags: dropped and counted */
    r->start = t0;
    r->end = t1;
    r->name = name;
    r->state = (uint8_t)final;
    r->stolen = n->t.stolen;
    r->depth = (uint16_t)(d > 0 ? d : 0);
    tg_live_publish(f->live);
}

/* The worker's idle hooks: an idle period inside a task's join is also a record. */
static inline void tg_feed_idle_begin(tg_feedw *f) { tg_live_idle_begin(f->live, tg_clock_ticks()); }
int64_t tg_feed_idle_end(tg_feedw *f); /* returns the time it read (ticks) */

#endif
