#define _DEFAULT_SOURCE
/* Tests of the injector alone (csrc/injector.c): FIFO order across growth, the share and the
 * most a take returns, refusal once closed, and conservation with pushers and takers racing
 * (every item taken exactly once). Run plain and under ThreadSanitizer / AddressSanitizer. */
#include "../injector.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITEM(i) ((struct tg_task *)(uintptr_t)((i) + 1)) /* never dereferenced */

static void test_fifo_share_close(void) {
    tg_injector q;
    CHECK(tg_injector_init(&q, 2) == 0, "init");
    for (int i = 0; i < 100; i++) { /* grows from 2 while wrapped around */
        struct tg_task *t = ITEM(i);
        CHECK(tg_injector_push(&q, &t, 1) == TG_INJ_QUEUED, "push %d", i);
        if (i % 3 == 2) { /* take one now and then, so the ring's head moves */
            uint64_t one;
            CHECK(tg_injector_take(&q, 1, 1, &one) == 1, "take");
        }
    }
    CHECK(tg_injector_count(&q) == 100 - 33, "count %lld", (long long)tg_injector_count(&q));
    uint64_t out[64];
    /* A share of 4: a quarter of the 67 queued (16); at most 64. */
    CHECK(tg_injector_take(&q, 4, 64, out) == 16, "share");
    CHECK(out[0] == (uint64_t)(uintptr_t)ITEM(33) && out[15] == (uint64_t)(uintptr_t)ITEM(48), "in order");
    CHECK(tg_injector_take(&q, 1, 5, out) == 5 && out[0] == (uint64_t)(uintptr_t)ITEM(49), "at most max");
    CHECK(tg_injector_take(&q, 1000, 64, out) == 1, "a share below one is one");
    tg_injector_close(&q);
    struct tg_task *t = ITEM(0);
    CHECK(tg_injector_push(&q, &t, 1) == TG_INJ_CLOSED, "a closed injector refuses");
    int64_t left = 0, got;
    while ((got = tg_injector_take(&q, 1, 64, out)) > 0) left += got;
    CHECK(left == 67 - 16 - 5 - 1 && tg_injector_count(&q) == 0, "what was queued before closing drains");
    CHECK(tg_injector_take(&q, 1, 64, out) == 0, "empty");
    tg_injector_destroy(&q);
    printf("ok FIFO across growth, share and most, closed refuses, queued drains\n");
}

enum { PUSHERS = 2, TAKERS = 2, PER_PUSHER = 50000 };
static tg_injector race_q;
static _Atomic int race_seen[PUSHERS * PER_PUSHER];
static _Atomic int pushers_done;

static void *pusher(void *arg) {
    int base = (int)(intptr_t)arg * PER_PUSHER;
    for (int i = 0; i < PER_PUSHER;) {
        struct tg_task *batch[3];
        int n = 0;
        while (n < 3 && i < PER_PUSHER) batch[n++] = ITEM(base + i++);
        CHECK(tg_injector_push(&race_q, batch, n) == TG_INJ_QUEUED, "push");
    }
    atomic_fetch_add_explicit(&pushers_done, 1, memory_order_release); /* takers' acquire */
    return NULL;
}

static void *taker(void *arg) {
    (void)arg;
    uint64_t out[8];
    for (;;) {
        /* Acquire: pairs with the pushers' release (all their pushes happened before). */
        int done = atomic_load_explicit(&pushers_done, memory_order_acquire) == PUSHERS;
        int64_t n = tg_injector_take(&race_q, 2, 8, out);
        for (int64_t i = 0; i < n; i++)
            /* Relaxed: counted, checked after the threads are joined. */
            atomic_fetch_add_explicit(&race_seen[out[i] - 1], 1, memory_order_relaxed);
        if (n == 0 && done) return NULL;
    }
}

static void test_conservation(void) {
    CHECK(tg_injector_init(&race_q, 4) == 0, "init");
    pthread_t tid[PUSHERS + TAKERS];
    for (int i = 0; i < PUSHERS; i++) pthread_create(&tid[i], NULL, pusher, (void *)(intptr_t)i);
    for (int i = 0; i < TAKERS; i++) pthread_create(&tid[PUSHERS + i], NULL, taker, NULL);
    for (int i = 0; i < PUSHERS + TAKERS; i++) pthread_join(tid[i], NULL);
    for (int i = 0; i < PUSHERS * PER_PUSHER; i++)
        CHECK(atomic_load(&race_seen[i]) == 1, "item %d taken %d times", i, atomic_load(&race_seen[i]));
    tg_injector_destroy(&race_q);
    printf("ok %d items pushed by %d threads, each taken once by %d racing takers\n", PUSHERS * PER_PUSHER, PUSHERS, TAKERS);
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 120);
    test_fifo_share_close();
    test_conservation();
    printf("injector: 2 passed, 0 failed\n");
    return 0;
}
