/* The live feed of one worker (the dashboard's data, taskgraph/dashboard/): a bounded ring of
 * small task records that the worker appends to while a reader on another thread takes them
 * out, plus what the reader samples without taking: the tasks running on the worker and its
 * idle time. Plain C11, no Python: the Python face (csrc/py/livefeed.h) fills the records and
 * names the tasks.
 *
 * The ring is single-producer single-consumer and never blocks the producer: the worker
 * writes record `head` into slot head % TG_LIVE_RING only while head - tail < TG_LIVE_RING,
 * then publishes head + 1 (release); the reader copies [tail, head) (head read with acquire)
 * and then publishes its new tail (release), which the worker reads (acquire) only when its
 * cached copy says the ring is full. A full ring drops the record (counted): a reader that
 * stalls costs the worker a compare per task, never a wait. Memory is fixed: TG_LIVE_RING
 * records per worker, however long the feed runs. */
#ifndef TG_LIVE_H
#define TG_LIVE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_live_rec {
    int64_t start, end; /* ticks (tg_clock_ticks, trace.h) */
    int32_t name;       /* index in the feed's name table, or TG_LIVE_IDLE */
    uint8_t state;      /* tg_state of the task: done, failed or cancelled (0 for idle) */
    uint8_t stolen;     /* the worker took it from another worker's deque */
    uint16_t depth;     /* feed tasks open below it on this worker (0: outermost) */
} tg_live_rec;

#define TG_LIVE_IDLE (-1)      /* a record's name for a worker idle inside a task's join */
#define TG_LIVE_RING (1 << 17) /* records per worker (3 MiB): a power of two */
#define TG_LIVE_STACK 64       /* running tasks per worker the reader can see */

/* One running task, as the reader sees it (relaxed atomics: the reader's snapshot may mix
 * two moments, never torn values). */
typedef struct {
    _Atomic int32_t name;
    _Atomic int64_t t0;
} tg_live_slot;

typedef struct tg_live {
    /* The worker's line: written by the worker only. */
    _Alignas(64) _Atomic int64_t head; /* records published */
    int64_t tail_seen;                 /* the worker's copy of tail */
    _Atomic int64_t dropped;           /* records lost to a full ring */
    _Atomic int32_t depth;             /* feed tasks open on the worker (the stack's height) */
    _Atomic int64_t idle_since;        /* ticks when its current idle period began, or 0 */
    _Atomic int64_t idle_total;        /* ticks idle in finished idle periods */
    /* The reader's line. */
    _Alignas(64) _Atomic int64_t tail; /* records taken */
    _Alignas(64) tg_live_slot stack[TG_LIVE_STACK];
    tg_live_rec ring[TG_LIVE_RING];
} tg_live;

/* A zeroed feed (NULL when out of memory); freed with free(). */
tg_live *tg_live_new(void);

/* Room for the next record, or NULL when the ring is full (the record is dropped and
 * counted). Worker only; tg_live_publish makes it visible. */
static inline tg_live_rec *tg_live_room(tg_live *L) {
    /* Relaxed: the worker's own value. */
    int64_t h = atomic_load_explicit(&L->head, memory_order_relaxed);
    if (h - L->tail_seen >= TG_LIVE_RING) {
        /* Acquire: pairs with the reader's release store of tail in tg_live_read, so the
         * reader has finished copying the slots this write reuses. */
        L->tail_seen = atomic_load_explicit(&L->tail, memory_order_acquire);
        if (h - L->tail_seen >= TG_LIVE_RING) {
            /* Relaxed: a count, written by the worker only. */
            atomic_store_explicit(&L->dropped, atomic_load_explicit(&L->dropped, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
            return NULL;
        }
    }
    return &L->ring[h & (TG_LIVE_RING - 1)];
}

/* Publishes the record tg_live_room gave. Worker only. */
static inline void tg_live_publish(tg_live *L) {
    int64_t h = atomic_load_explicit(&L->head, memory_order_relaxed); /* own value */
    /* Release: pairs with the reader's acquire load of head in tg_live_read: the record's
     * fields are visible before the count that covers it. */
    atomic_store_explicit(&L->head, h + 1, memory_order_release);
}

/* A task starts on the worker: pushes it on the running stack (name, t0). Worker only. */
static inline void tg_live_push(tg_live *L, int32_t name, int64_t t0) {
    int32_t d = atomic_load_explicit(&L->depth, memory_order_relaxed); /* own value */
    if (d < TG_LIVE_STACK) {
        /* Relaxed: a snapshot for the reader (tg_live_running). */
        atomic_store_explicit(&L->stack[d].name, name, memory_order_relaxed);
        atomic_store_explicit(&L->stack[d].t0, t0, memory_order_relaxed);
    }
    /* Release: pairs with the acquire load in tg_live_running: the slot's values are seen
     * with the height that covers them. */
    atomic_store_explicit(&L->depth, d + 1, memory_order_release);
}

/* The task on top of the stack ends; returns its depth (0: outermost). Worker only. */
static inline int32_t tg_live_pop(tg_live *L) {
    int32_t d = atomic_load_explicit(&L->depth, memory_order_relaxed) - 1; /* own value */
    /* Relaxed: a lower height only hides a slot from the reader. */
    atomic_store_explicit(&L->depth, d, memory_order_relaxed);
    return d;
}

/* The worker's idle periods (between tasks, and inside joins). Worker only. */
static inline void tg_live_idle_begin(tg_live *L, int64_t now) {
    /* Relaxed: sampled by the reader (tg_live_idle), which needs no order with anything else. */
    atomic_store_explicit(&L->idle_since, now, memory_order_relaxed);
}
static inline void tg_live_idle_end(tg_live *L, int64_t now) {
    int64_t t0 = atomic_load_explicit(&L->idle_since, memory_order_relaxed); /* own value */
    if (!t0) return;
    /* Relaxed: sampled by the reader (tg_live_idle). */
    atomic_store_explicit(&L->idle_total, atomic_load_explicit(&L->idle_total, memory_order_relaxed) + (now - t0),
                          memory_order_relaxed);
    atomic_store_explicit(&L->idle_since, 0, memory_order_relaxed);
}

/* ---------------------------------------------------------------- the reader's side
 * One reader at a time per feed (the caller serialises them). */

/* Copies up to max of the records published and not yet taken into dst, takes them, and
 * returns how many. */
int64_t tg_live_read(tg_live *L, tg_live_rec *dst, int64_t max);
/* Takes everything published so far without reading it (a new reader starts from now). */
void tg_live_skip(tg_live *L);
/* The running stack: up to max (name, t0) pairs, outermost first; returns how many. */
int tg_live_running(tg_live *L, int32_t *names, int64_t *t0s, int max);
/* Idle ticks so far (finished periods, plus the current one up to now) and whether the
 * worker is idle now. */
int64_t tg_live_idle(tg_live *L, int64_t now, int *idle_now);
int64_t tg_live_dropped(tg_live *L);

#endif
