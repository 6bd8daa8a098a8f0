/* The injector (injector.h): a mutex-guarded FIFO ring with a lock-free count. */
#include "injector.h"

#include <stdlib.h>

int tg_injector_init(tg_injector *q, int64_t initial_capacity) {
    q->cap = initial_capacity > 0 ? initial_capacity : 64;
    q->buf = malloc(sizeof(uint64_t) * (size_t)q->cap);
    if (!q->buf) return -1;
    q->head = q->len = 0;
    q->closed = 0;
    pthread_mutex_init(&q->mu, NULL);
    atomic_init(&q->count, 0);
    return 0;
}

void tg_injector_destroy(tg_injector *q) {
    pthread_mutex_destroy(&q->mu);
    free(q->buf);
    q->buf = NULL;
}

/* Makes room for n more (mu held). 0, or -1 when out of memory. */
static int reserve_locked(tg_injector *q, int64_t n) {
    if (q->len + n <= q->cap) return 0;
    int64_t cap = q->cap;
    while (cap < q->len + n) cap *= 2;
    uint64_t *nb = malloc(sizeof(uint64_t) * (size_t)cap);
    if (!nb) return -1;
    for (int64_t i = 0; i < q->len; i++) nb[i] = q->buf[(q->head + i) % q->cap];
    free(q->buf);
    q->buf = nb;
    q->head = 0;
    q->cap = cap;
    return 0;
}

tg_inj_result tg_injector_push(tg_injector *q, struct tg_task *const *tasks, int64_t n) {
    pthread_mutex_lock(&q->mu);
    tg_inj_result r = TG_INJ_QUEUED;
    if (q->closed) {
        r = TG_INJ_CLOSED;
    } else if (reserve_locked(q, n) != 0) {
        r = TG_INJ_NOMEM;
    } else {
        for (int64_t i = 0; i < n; i++)
            q->buf[(q->head + q->len + i) % q->cap] = (uint64_t)(uintptr_t)tasks[i];
        q->len += n;
        /* seq_cst: the sleep protocol's "push" for the injector (rule 1); pairs with the
         * seq_cst fence in park() before its re-check reads the count, and with the acquire
         * load of a taker's cheap check (it then sees the slots written above). */
        atomic_fetch_add_explicit(&q->count, n, memory_order_seq_cst);
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

int64_t tg_injector_take(tg_injector *q, int64_t share, int64_t max, uint64_t *out) {
    /* Acquire: pairs with the increment in tg_injector_push; a cheap check before the lock. */
    if (max < 1 || atomic_load_explicit(&q->count, memory_order_acquire) == 0) return 0;
    pthread_mutex_lock(&q->mu);
    int64_t want = share > 1 ? q->len / share : q->len;
    if (want < 1) want = 1;
    if (want > max) want = max;
    if (want > q->len) want = q->len;
    for (int64_t i = 0; i < want; i++) out[i] = q->buf[(q->head + i) % q->cap];
    if (want > 0) {
        q->head = (q->head + want) % q->cap;
        q->len -= want;
        atomic_fetch_sub_explicit(&q->count, want, memory_order_relaxed); /* under mu */
    }
    pthread_mutex_unlock(&q->mu);
    return want;
}

void tg_injector_close(tg_injector *q) {
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_mutex_unlock(&q->mu);
}

int64_t tg_injector_count(tg_injector *q) {
    /* Relaxed: see injector.h (park() orders it with its seq_cst fence, which pairs with the
     * seq_cst increment in tg_injector_push). */
    return atomic_load_explicit(&q->count, memory_order_relaxed);
}
