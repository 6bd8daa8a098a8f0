/* Stress tests of the Chase-Lev deque (csrc/deque.c). Run plain, under ThreadSanitizer and under
 * AddressSanitizer+UBSan by `make test-c` / `make sanitize`. Every test runs under alarm():
 * a hang fails the run instead of blocking it.
 *
 * Items are encoded as (value + 1) so a zeroed slot can never pass for an item. */
#include "../deque.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>



static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ULL;
}

/* ---------------------------------------------------------------- shared thief machinery */
typedef struct {
    tg_deque *d;
    _Atomic int *stop;    /* owner sets when done pushing and the deque is drained */
    uint64_t *got;        /* items this thief took, in order */
    int64_t ngot, capgot;
    int64_t retries;
    int64_t batch;        /* 0: tg_deque_steal; else tg_deque_steal_batch with this max */
    int64_t batches;      /* batch steals that took more than one item */
} thief_t;

static void record(uint64_t **buf, int64_t *n, int64_t *cap, uint64_t v) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        *buf = realloc(*buf, (size_t)*cap * sizeof(uint64_t));
        CHECK(*buf, "out of memory");
    }
    (*buf)[(*n)++] = v;
}

static void *thief_main(void *arg) {
    thief_t *th = arg;
    for (;;) {
        uint64_t v[64];
        int64_t n = 1;
        tg_status s = th->batch ? tg_deque_steal_batch(th->d, th->batch, v, &n)
                                : tg_deque_steal(th->d, &v[0]);
        if (s == TG_OK) {
            CHECK(n >= 1 && n <= (th->batch ? th->batch : 1), "batch of %lld", (long long)n);
            for (int64_t i = 0; i < n; i++) record(&th->got, &th->ngot, &th->capgot, v[i]);
            th->batches += n > 1;
        } else if (s == TG_RETRY) {
            CHECK(n == 0 || !th->batch, "a lost race reported %lld items", (long long)n);
            th->retries++;
        }
        /* Acquire: pairs with the owner's release store of stop after its last pop. */
        else if (atomic_load_explicit(th->stop, memory_order_acquire)) break;
    }
    return NULL;
}

/* ---------------------------------------------------------------- 1. conservation + order */
/* The owner pushes 1..n in increasing order, popping at random in between; thieves steal.
 * Checks: every item taken exactly once (no loss, no duplicate), owner pops come out in
 * decreasing order between pushes... precisely: each pop returns the largest item not yet
 * taken, so it is larger than every item popped later unless pushed after it; each thief's
 * steals are strictly increasing; the deque is empty at the end. With leave_rest, the owner
 * only pushes, then waits until the thieves have taken everything. */
static void conservation(int64_t n, int nthieves, uint64_t seed, int64_t batch, int64_t *batches,
                         int leave_rest) {
    tg_deque *d = tg_deque_new(2);
    CHECK(d, "tg_deque_new");
    _Atomic int stop = 0;
    thief_t th[4];
    pthread_t tid[4];
    memset(th, 0, sizeof th);
    for (int i = 0; i < nthieves; i++) {
        th[i].d = d; th[i].stop = &stop;
        /* With batch: thieves 0, 2 steal-half (at most `batch`), 1, 3 steal one by one. */
        th[i].batch = i % 2 == 0 ? batch : 0;
        CHECK(pthread_create(&tid[i], NULL, thief_main, &th[i]) == 0, "pthread_create");
    }
    uint64_t *popped = NULL; int64_t npop = 0, cappop = 0;
    uint64_t s = seed;
    uint64_t next = 1; /* next value to push */
    uint64_t last_pushed_before_pop = 0;
    while ((int64_t)next <= n) {
        int64_t burst = 1 + (int64_t)(rng_next(&s) % 8);
        for (int64_t k = 0; k < burst && (int64_t)next <= n; k++) {
            CHECK(tg_deque_push(d, next) == 0, "push failed");
            next++;
        }
        int64_t pops = leave_rest ? 0 : (int64_t)(rng_next(&s) % 6);
        for (int64_t k = 0; k < pops; k++) {
            uint64_t v;
            if (tg_deque_pop(d, &v) == TG_OK) {
                /* LIFO: the item popped is the newest one still present, so it can only be
                 * the one pushed last if nothing newer was pushed since the previous pop. */
                CHECK(v < next, "popped %llu never pushed", (unsigned long long)v);
                if (npop > 0 && last_pushed_before_pop == next - 1)
                    CHECK(v < popped[npop - 1], "owner pops not decreasing: %llu after %llu",
                          (unsigned long long)v, (unsigned long long)popped[npop - 1]);
                record(&popped, &npop, &cappop, v);
                last_pushed_before_pop = next - 1;
            }
        }
    }
    while (leave_rest && tg_deque_size(d) > 0) sched_yield();
    for (;;) { /* drain */
        uint64_t v;
        if (tg_deque_pop(d, &v) != TG_OK) break;
        record(&popped, &npop, &cappop, v);
    }
    /* Release: pairs with the thieves' acquire load of stop. */
    atomic_store_explicit(&stop, 1, memory_order_release);
    for (int i = 0; i < nthieves; i++) pthread_join(tid[i], NULL);

    unsigned char *seen = calloc((size_t)n + 1, 1);
    CHECK(seen, "oom");
    int64_t total = npop;
    for (int64_t i = 0; i < npop; i++) {
        CHECK(popped[i] >= 1 && (int64_t)popped[i] <= n, "bad item %llu", (unsigned long long)popped[i]);
        CHECK(!seen[popped[i]], "item %llu taken twice (owner)", (unsigned long long)popped[i]);
        seen[popped[i]] = 1;
    }
    for (int i = 0; i < nthieves; i++) {
        for (int64_t j = 0; j < th[i].ngot; j++) {
            uint64_t v = th[i].got[j];
            CHECK(v >= 1 && (int64_t)v <= n, "bad stolen item %llu", (unsigned long long)v);
            CHECK(!seen[v], "item %llu taken twice (thief %d)", (unsigned long long)v, i);
            seen[v] = 1;
            if (j > 0) CHECK(v > th[i].got[j - 1], "thief %d steals not increasing", i);
        }
        total += th[i].ngot;
        *batches += th[i].batches;
        free(th[i].got);
    }
    CHECK(total == n, "n=%lld thieves=%d: %lld items taken", (long long)n, nthieves, (long long)total);
    CHECK(tg_deque_size(d) == 0, "deque not empty at the end");
    uint64_t v;
    CHECK(tg_deque_pop(d, &v) == TG_EMPTY && tg_deque_steal(d, &v) == TG_EMPTY, "not empty");
    free(seen); free(popped);
    tg_deque_free(d);
}

static void test_conservation_sweep(void) {
    int64_t limit = sanitized() ? 30000 : 90000;
    int cases = 0;
    int64_t batches = 0;
    for (int64_t n = 1; n <= limit; n = n * 3 + 1) { /* 1, 4, 13, 40, ..., 88573 */
        for (int k = 1; k <= 4; k++) {
            conservation(n, k, 0x9e3779b97f4a7c15ULL ^ (uint64_t)(n * 31 + k), 0, &batches, 0);
            cases++;
        }
    }
    printf("ok conservation sweep (%d cases, n up to %lld, 1-4 thieves)\n", cases, (long long)limit);
}

/* The same under steal-half: thieves 0 and 2 take batches (at most 2, 7 or 64 items) while
 * thieves 1 and 3 steal single items and the owner pushes and pops at random (its CAS-free
 * pops race the batches). Every item is taken exactly once, each thief's items (batches
 * included) come out strictly increasing, and batches of more than one item did happen. */
static void test_conservation_batch(void) {
    int64_t limit = sanitized() ? 30000 : 90000;
    static const int64_t maxes[] = {2, 7, 64};
    int cases = 0;
    int64_t batches = 0;
    for (int64_t n = 1; n <= limit; n = n * 3 + 1)
        for (int k = 1; k <= 4; k++)
            for (int m = 0; m < 3; m++) {
                conservation(n, k, 0x5851f42d4c957f2dULL ^ (uint64_t)(n * 131 + k * 7 + m), maxes[m],
                             &batches, 0);
                cases++;
            }
    /* The sweep's thieves may find no item to share on a loaded machine (the owner takes them
     * all while they wait for a core): in this case one thief takes everything the owner
     * pushed, at most half of what it finds at a time, so it takes batches. */
    conservation(4000, 1, 0x2545f4914f6cdd1dULL, 64, &batches, 1);
    cases++;
    CHECK(batches > 0, "no batch of more than one item in %d cases", cases);
    printf("ok conservation under batch steals (%d cases, n up to %lld, %lld multi-item batches)\n",
           cases, (long long)limit, (long long)batches);
}

/* ---------------------------------------------------------------- 2. last-element race */
typedef struct {
    tg_deque *d;
    _Atomic int64_t *round;  /* round number published by the owner */
    _Atomic int64_t *wins;   /* total items won by thieves */
    _Atomic unsigned char *taken; /* per item: how many threads took it (must end at 1) */
    int64_t rounds;
} racer_t;

static void *racer_main(void *arg) {
    racer_t *r = arg;
    int64_t seen = 0;
    while (seen < r->rounds) {
        /* Acquire: pairs with the owner's release store of round after its push. */
        int64_t cur = atomic_load_explicit(r->round, memory_order_acquire);
        if (cur == seen) continue;
        seen = cur;
        uint64_t v;
        tg_status s;
        while ((s = tg_deque_steal(r->d, &v)) == TG_RETRY) {}
        if (s == TG_OK) {
            /* A thief that lost round cur may win a later round's item: never an older one. */
            CHECK((int64_t)v >= cur && (int64_t)v <= r->rounds, "stole item %llu in round %lld",
                  (unsigned long long)v, (long long)cur);
            /* Relaxed: counters read after join. */
            atomic_fetch_add_explicit(&r->taken[v], 1, memory_order_relaxed);
            atomic_fetch_add_explicit(r->wins, 1, memory_order_relaxed);
        }
    }
    return NULL;
}

static void test_last_element_race(void) {
    int64_t rounds = sanitized() ? 100000 : 1000000;
    for (int nthieves = 1; nthieves <= 3; nthieves++) {
        tg_deque *d = tg_deque_new(2);
        _Atomic int64_t round = 0, wins = 0;
        _Atomic unsigned char *taken = calloc((size_t)rounds + 1, 1);
        racer_t r = {d, &round, &wins, taken, rounds};
        pthread_t tid[3];
        for (int i = 0; i < nthieves; i++) pthread_create(&tid[i], NULL, racer_main, &r);
        int64_t owner_wins = 0;
        uint64_t seed = 0x1234567u + (uint64_t)nthieves;
        for (int64_t k = 1; k <= rounds; k++) {
            CHECK(tg_deque_push(d, (uint64_t)k) == 0, "push");
            /* Release: pairs with the racers' acquire load of round. */
            atomic_store_explicit(&round, k, memory_order_release);
            /* A short random pause gives the thieves a real chance at the item. */
            for (volatile int spin = (int)(rng_next(&seed) % 128); spin > 0; spin--) {}
            uint64_t v;
            if (tg_deque_pop(d, &v) == TG_OK) {
                CHECK((int64_t)v == k, "owner popped %llu in round %lld", (unsigned long long)v, (long long)k);
                atomic_fetch_add_explicit(&taken[v], 1, memory_order_relaxed); /* read after join */
                owner_wins++;
            }
            /* Wait until this round's item is gone (owner or a thief) before the next push,
             * so that every round races for exactly one item. */
            while (tg_deque_size(d) != 0) {}
            /* Relaxed: progress counter; the exact check is after join. */
            while (owner_wins + atomic_load_explicit(&wins, memory_order_relaxed) < k) {}
        }
        for (int i = 0; i < nthieves; i++) pthread_join(tid[i], NULL);
        int64_t w = atomic_load_explicit(&wins, memory_order_relaxed);
        CHECK(owner_wins + w == rounds, "%lld winners for %lld items", (long long)(owner_wins + w), (long long)rounds);
        for (int64_t k = 1; k <= rounds; k++)
            CHECK(atomic_load_explicit(&taken[k], memory_order_relaxed) == 1, "item %lld taken %d times",
                  (long long)k, (int)atomic_load_explicit(&taken[k], memory_order_relaxed));
        free((void *)taken);
        printf("ok last-element race (%lld rounds, %d thieves: owner won %lld, thieves %lld)\n",
               (long long)rounds, nthieves, (long long)owner_wins, (long long)w);
        tg_deque_free(d);
    }
}

/* ---------------------------------------------------------------- 3. growth during steals */
/* The owner pushes big bursts without popping, forcing many doublings while thieves steal
 * continuously; then checks conservation and that the buffer really grew: a first burst of
 * 1000 items is pushed before any thief starts, so the ring must reach 1024 slots, and it
 * must never be smaller than the largest size the owner saw. */
static void test_growth_while_stealing(void) {
    int64_t n = sanitized() ? 200000 : 2000000;
    const int64_t first = 1000;
    tg_deque *d = tg_deque_new(2);
    CHECK(tg_deque_capacity(d) == 2, "initial capacity %lld", (long long)tg_deque_capacity(d));
    _Atomic int stop = 0;
    thief_t th[3];
    pthread_t tid[3];
    memset(th, 0, sizeof th);
    int64_t max_size = first;
    for (int64_t k = 1; k <= first; k++) CHECK(tg_deque_push(d, (uint64_t)k) == 0, "push");
    CHECK(tg_deque_capacity(d) >= 1024, "capacity %lld after %lld pushes without a thief",
          (long long)tg_deque_capacity(d), (long long)first);
    for (int i = 0; i < 3; i++) {
        th[i].d = d; th[i].stop = &stop;
        th[i].batch = i == 0 ? 32 : 0; /* one steal-half thief reads across buffer swaps */
        pthread_create(&tid[i], NULL, thief_main, &th[i]);
    }
    for (int64_t k = first + 1; k <= n; k++) {
        CHECK(tg_deque_push(d, (uint64_t)k) == 0, "push");
        int64_t sz = tg_deque_size(d); /* exact upper bound for the owner: thieves only shrink it */
        if (sz > max_size) max_size = sz;
    }
    int64_t cap = tg_deque_capacity(d);
    uint64_t *popped = NULL; int64_t npop = 0, cappop = 0;
    uint64_t v;
    while (tg_deque_pop(d, &v) == TG_OK) record(&popped, &npop, &cappop, v);
    atomic_store_explicit(&stop, 1, memory_order_release); /* pairs with thieves' acquire */
    for (int i = 0; i < 3; i++) pthread_join(tid[i], NULL);
    unsigned char *seen = calloc((size_t)n + 1, 1);
    int64_t total = npop, stolen = 0;
    for (int64_t i = 0; i < npop; i++) { CHECK(!seen[popped[i]], "dup"); seen[popped[i]] = 1; }
    for (int i = 0; i < 3; i++) {
        for (int64_t j = 0; j < th[i].ngot; j++) {
            CHECK(!seen[th[i].got[j]], "dup stolen %llu", (unsigned long long)th[i].got[j]);
            seen[th[i].got[j]] = 1;
        }
        total += th[i].ngot; stolen += th[i].ngot;
        free(th[i].got);
    }
    CHECK(total == n, "%lld of %lld items taken", (long long)total, (long long)n);
    CHECK(cap >= 1024 && (cap & (cap - 1)) == 0, "capacity %lld", (long long)cap);
    CHECK(cap >= max_size, "capacity %lld below the size %lld seen", (long long)cap, (long long)max_size);
    printf("ok growth while stealing (%lld items, capacity reached %lld, largest size %lld, %lld stolen mid-growth)\n",
           (long long)n, (long long)cap, (long long)max_size, (long long)stolen);
    free(seen); free(popped);
    tg_deque_free(d);
}

/* ---------------------------------------------------------------- 4. single-thread basics */
static void test_sequential(void) {
    tg_deque *d = tg_deque_new(1);
    uint64_t v;
    CHECK(tg_deque_pop(d, &v) == TG_EMPTY, "new deque not empty");
    CHECK(tg_deque_steal(d, &v) == TG_EMPTY, "new deque not empty (steal)");
    for (uint64_t i = 1; i <= 100; i++) tg_deque_push(d, i);
    CHECK(tg_deque_size(d) == 100, "size %lld", (long long)tg_deque_size(d));
    CHECK(tg_deque_capacity(d) >= 100, "capacity did not grow");
    CHECK(tg_deque_steal(d, &v) == TG_OK && v == 1, "steal takes the oldest");
    CHECK(tg_deque_pop(d, &v) == TG_OK && v == 100, "pop takes the newest");
    for (uint64_t i = 99; i >= 2; i--) CHECK(tg_deque_pop(d, &v) == TG_OK && v == i, "LIFO");
    CHECK(tg_deque_pop(d, &v) == TG_EMPTY, "empty after draining");
    tg_deque_free(d);
    printf("ok sequential semantics\n");
}

/* Steal-half, single thread: how many items a batch takes, in which order, and its limits. */
static void test_batch_sequential(void) {
    tg_deque *d = tg_deque_new(2);
    uint64_t v[64];
    int64_t n = -1;
    CHECK(tg_deque_steal_batch(d, 32, v, &n) == TG_EMPTY && n == 0, "empty deque: batch");
    for (uint64_t i = 1; i <= 10; i++) tg_deque_push(d, i);
    CHECK(tg_deque_steal_batch(d, 0, v, &n) == TG_EMPTY && n == 0, "max 0 takes nothing");
    CHECK(tg_deque_steal_batch(d, 32, v, &n) == TG_OK && n == 5, "half of 10: took %lld", (long long)n);
    for (int64_t i = 0; i < n; i++) CHECK(v[i] == (uint64_t)i + 1, "batch order: %llu at %lld",
                                          (unsigned long long)v[i], (long long)i);
    CHECK(tg_deque_steal_batch(d, 2, v, &n) == TG_OK && n == 2 && v[0] == 6 && v[1] == 7,
          "max 2: took %lld", (long long)n);
    CHECK(tg_deque_steal_batch(d, 32, v, &n) == TG_OK && n == 2 && v[0] == 8 && v[1] == 9,
          "half of 3 rounds up: took %lld", (long long)n);
    CHECK(tg_deque_pop(d, &v[0]) == TG_OK && v[0] == 10, "owner keeps the newest");
    CHECK(tg_deque_steal_batch(d, 32, v, &n) == TG_EMPTY && n == 0, "drained deque: batch");
    tg_deque_push(d, 11);
    CHECK(tg_deque_steal_batch(d, 32, v, &n) == TG_OK && n == 1 && v[0] == 11, "half of 1 is 1");
    CHECK(tg_deque_size(d) == 0, "size after batches");
    tg_deque_free(d);
    printf("ok batch steal semantics\n");
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 240);
    test_sequential();
    test_batch_sequential();
    test_conservation_sweep();
    test_conservation_batch();
    test_last_element_race();
    test_growth_while_stealing();
    printf("deque: 6 passed, 0 failed\n");
    return 0;
}
