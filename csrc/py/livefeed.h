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

typedef struct tg_feednames {
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
    /* [3 * name + k]: the worker's tasks done (k 0), failed (1), cancelled (2), by name:
     * written by the worker only, with relaxed atomics, read by the reader at any time. They
     * are counted whether or not the ring has room: the counts are never dropped. */
    _Atomic int64_t *counts;
    /* The worker's own cache (its thread only): only names in the table, which holds them,
     * so an address in it always names the same object. */
    PyObject *ckey[TG_FEED_CACHE];
    int32_t cval[TG_FEED_CACHE];
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

/* A task starts at t0 on f's worker: its name's index (for tg_feed_end). */
static inline int32_t tg_feed_begin(tg_feedw *f, NodeObject *n, int64_t t0) {
    int32_t name = n->name ? tg_feed_name(f, n->name) : 0;
    tg_live_push(f->live, name, t0);
    return name;
}

/* The task that tg_feed_begin saw start ends at t1 with state final: its record. */
static inline void tg_feed_end(tg_feedw *f, NodeObject *n, int final, int64_t t0, int64_t t1, int32_t name) {
    int32_t d = tg_live_pop(f->live);
    _Atomic int64_t *c = &f->counts[3 * name + (final == TG_DONE ? 0 : final == TG_FAILED ? 1 : 2)];
    /* Relaxed: a count with one writer (this worker); the reader needs a recent value only. */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
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
void tg_feed_idle_end(tg_feedw *f);

#endif
