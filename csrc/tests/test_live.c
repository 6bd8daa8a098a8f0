/* The live feed's ring (csrc/live.c): a worker appends while a reader takes records out; every
 * record is read once, in order, whole, or counted as dropped; a full ring drops and never
 * blocks; the running stack and the idle time read back what the worker published. */
#include "../live.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static tg_live *L;
static int64_t total;
static _Atomic int writer_done;

static void *writer(void *arg) {
    (void)arg;
    for (int64_t i = 1; i <= total; i++) {
        tg_live_push(L, (int32_t)(i & 0x7fff), i);
        tg_live_rec *r = tg_live_room(L);
        int32_t d = tg_live_pop(L);
        if (!r) continue;
        r->start = i;
        r->end = i * 3;
        r->name = (int32_t)(i & 0x7fff);
        r->state = (uint8_t)(i % 3);
        r->stolen = (uint8_t)(i & 1);
        r->depth = (uint16_t)d;
        tg_live_publish(L);
    }
    atomic_store_explicit(&writer_done, 1, memory_order_release);
    return NULL;
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 120);
    total = sanitized() ? 400000 : 5000000;
    L = tg_live_new();
    CHECK(L, "allocation");

    /* 1. A full ring drops and never blocks: with no reader, exactly TG_LIVE_RING fit. */
    for (int i = 0; i < TG_LIVE_RING + 10; i++) {
        tg_live_rec *r = tg_live_room(L);
        if (r) { r->start = i; tg_live_publish(L); }
    }
    CHECK(tg_live_dropped(L) == 10, "dropped %lld", (long long)tg_live_dropped(L));
    tg_live_skip(L);
    CHECK(tg_live_room(L) != NULL, "room again after the reader took everything");

    /* 2. Concurrent: every record read once, in order, whole; the rest counted as dropped. */
    tg_live_rec *buf = malloc(sizeof(tg_live_rec) * 4096);
    CHECK(buf, "allocation");
    int64_t dropped0 = tg_live_dropped(L), got = 0, last = 0;
    pthread_t th;
    pthread_create(&th, NULL, writer, NULL);
    for (;;) {
        int done = atomic_load_explicit(&writer_done, memory_order_acquire);
        int64_t n = tg_live_read(L, buf, 4096);
        for (int64_t k = 0; k < n; k++) {
            tg_live_rec *r = &buf[k];
            CHECK(r->start > last, "order: %lld after %lld", (long long)r->start, (long long)last);
            CHECK(r->end == r->start * 3 && r->name == (int32_t)(r->start & 0x7fff) &&
                  r->state == r->start % 3 && r->stolen == (r->start & 1) && r->depth == 0,
                  "record %lld whole", (long long)r->start);
            last = r->start;
        }
        got += n;
        int32_t names[4];
        int64_t t0s[4];
        int d = tg_live_running(L, names, t0s, 4);
        CHECK(d == 0 || d == 1, "stack height %d", d);
        if (done && n == 0) break;
    }
    pthread_join(th, NULL);
    int64_t dropped = tg_live_dropped(L) - dropped0;
    CHECK(got + dropped == total, "read %lld + dropped %lld != %lld", (long long)got,
          (long long)dropped, (long long)total);

    /* 3. The running stack and idle time. */
    tg_live_push(L, 7, 100);
    tg_live_push(L, 8, 150);
    int32_t names[4];
    int64_t t0s[4];
    CHECK(tg_live_running(L, names, t0s, 4) == 2 && names[0] == 7 && t0s[1] == 150, "stack");
    CHECK(tg_live_pop(L) == 1 && tg_live_pop(L) == 0, "pops give the depths");
    int idle = -1;
    tg_live_idle_begin(L, 1000);
    CHECK(tg_live_idle(L, 1500, &idle) == 500 && idle == 1, "idle now");
    tg_live_idle_end(L, 2000);
    CHECK(tg_live_idle(L, 9000, &idle) == 1000 && idle == 0, "idle period counted");
    printf("ok live ring: %lld records read, %lld dropped while the reader lagged\n", (long long)got,
           (long long)dropped);
    printf("live: 3 passed, 0 failed\n");
    free(buf);
    free(L);
    return 0;
}
