/* The live feed of one worker: the reader's side (see live.h). */
#include "live.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(tg_live_rec) == 24, "tg_live_rec is 24 bytes");
_Static_assert((TG_LIVE_RING & (TG_LIVE_RING - 1)) == 0, "TG_LIVE_RING must be a power of two");

tg_live *tg_live_new(void) {
    /* calloc: the ring's pages are mapped zeroed and touched only as the worker reaches them. */
    tg_live *L = calloc(1, sizeof *L);
    if (!L) return NULL;
    atomic_init(&L->head, 0);
    atomic_init(&L->tail, 0);
    atomic_init(&L->dropped, 0);
    atomic_init(&L->depth, 0);
    atomic_init(&L->idle_since, 0);
    atomic_init(&L->idle_total, 0);
    return L;
}

int64_t tg_live_read(tg_live *L, tg_live_rec *dst, int64_t max) {
    /* Relaxed: the reader's own value. */
    int64_t t = atomic_load_explicit(&L->tail, memory_order_relaxed);
    /* Acquire: pairs with the worker's release store in tg_live_publish. */
    int64_t h = atomic_load_explicit(&L->head, memory_order_acquire);
    int64_t n = h - t < max ? h - t : max;
    for (int64_t k = 0; k < n;) { /* at most two pieces: up to the ring's end, then from 0 */
        int64_t i = (t + k) & (TG_LIVE_RING - 1), take = TG_LIVE_RING - i;
        if (take > n - k) take = n - k;
        memcpy(dst + k, &L->ring[i], sizeof(tg_live_rec) * (size_t)take);
        k += take;
    }
    /* Release: pairs with the worker's acquire load in tg_live_room: the copies above are
     * done before the worker may write over those slots. */
    atomic_store_explicit(&L->tail, t + n, memory_order_release);
    return n;
}

void tg_live_skip(tg_live *L) {
    /* Acquire / release: as in tg_live_read, with nothing copied. */
    int64_t h = atomic_load_explicit(&L->head, memory_order_acquire);
    atomic_store_explicit(&L->tail, h, memory_order_release);
}

int tg_live_running(tg_live *L, int32_t *names, int64_t *t0s, int max) {
    /* Acquire: pairs with the release store in tg_live_push. */
    int32_t d = atomic_load_explicit(&L->depth, memory_order_acquire);
    if (d > TG_LIVE_STACK) d = TG_LIVE_STACK;
    if (d > max) d = max;
    for (int i = 0; i < d; i++) {
        /* Relaxed: a snapshot (live.h). */
        names[i] = atomic_load_explicit(&L->stack[i].name, memory_order_relaxed);
        t0s[i] = atomic_load_explicit(&L->stack[i].t0, memory_order_relaxed);
    }
    return d < 0 ? 0 : d;
}

int64_t tg_live_idle(tg_live *L, int64_t now, int *idle_now) {
    /* Relaxed: samples. A period that ends while they are read may be counted twice in this
     * one sample (its start seen, then the total that includes it): callers clamp shares. */
    int64_t since = atomic_load_explicit(&L->idle_since, memory_order_relaxed);
    int64_t total = atomic_load_explicit(&L->idle_total, memory_order_relaxed);
    *idle_now = since != 0;
    return total + (since && now > since ? now - since : 0);
}

int64_t tg_live_dropped(tg_live *L) {
    /* Relaxed: a count. */
    return atomic_load_explicit(&L->dropped, memory_order_relaxed);
}
