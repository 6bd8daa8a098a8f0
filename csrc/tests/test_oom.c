#define _DEFAULT_SOURCE
/* Out of memory in the core: every allocation the core makes is failed in turn (the test binary
 * is linked with --wrap for malloc, calloc, realloc and aligned_alloc), and each failure must be
 * reported, not crash, and leave nothing behind (the AddressSanitizer build checks for leaks and
 * bad frees). Covers tg_pool_new_spares's failure paths (a deque that was never allocated is not
 * freed; the spares' arrays), the injector growing, tg_task_depend, and the trace buffer. */
#include "../deque.h"
#include "../graph.h"
#include "../pool.h"
#include "../trace.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int countdown; /* fail the allocation that takes it to 0; 0 = never */

static int should_fail(void) { return countdown > 0 && --countdown == 0; }

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return should_fail() ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { return should_fail() ? NULL : __real_aligned_alloc(a, n); }

static void test_pool_new(void) {
    int failures = 0;
    for (int k = 1; k < 100; k++) {
        countdown = k;
        tg_pool *p = tg_pool_new_spares(4, 3); /* the spares' allocations too */
        int failed = countdown == 0; /* the k-th allocation was reached and failed */
        countdown = 0;
        if (failed) {
            CHECK(p == NULL, "tg_pool_new succeeded although allocation %d failed", k);
            failures++;
        } else {
            CHECK(p != NULL, "tg_pool_new failed with no allocation failing");
            tg_pool_free(p);
            break; /* every allocation of tg_pool_new has been failed once */
        }
    }
    CHECK(failures >= 6, "only %d allocations seen in tg_pool_new", failures);
    printf("ok tg_pool_new fails cleanly at each of its %d allocations\n", failures);
}

static void test_inject_and_depend(void) {
    tg_pool *p = tg_pool_new(1);
    CHECK(p, "pool");
    tg_run run;
    memset(&run, 0, sizeof run);
    run.pool = p;
    enum { N = 100 };
    tg_task t[N];
    memset(t, 0, sizeof t);
    tg_task *ready[N];
    for (int i = 0; i < N; i++) {
        CHECK(tg_task_claim(&t[i], &run), "claim");
        ready[i] = &t[i];
    }
    /* the injector must grow to take 100 (it starts with 64 slots): fail that growth */
    for (int i = 0; i < N; i++) tg_task_release_hold(&t[i]);
    countdown = 1;
    CHECK(tg_pool_inject(p, ready, N) == TG_PUSH_NOMEM, "a failed growth is reported");
    countdown = 0;
    CHECK(tg_pool_queued(p) == 0, "nothing half-queued");
    CHECK(tg_pool_inject(p, ready, N) == TG_PUSH_QUEUED, "and works afterwards");
    tg_task a, b;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    CHECK(tg_task_claim(&a, &run) && tg_task_claim(&b, &run), "claim");
    countdown = 1;
    CHECK(tg_task_depend(&b, &a) == TG_DEP_NOMEM, "a failed edge is reported");
    countdown = 0;
    CHECK(tg_task_depend(&b, &a) == TG_DEP_WAIT, "and works afterwards");
    tg_pool_shutdown(p);
    tg_task *x;
    int drained = 0;
    while (tg_pool_drain(p, &x)) {
        tg_task *refused = NULL;
        tg_pool_finish(p, 0, x, TG_CANCELLED, &refused);
        drained++;
    }
    CHECK(drained == N, "drained %d", drained);
    tg_task *refused = NULL;
    CHECK(tg_task_release_hold(&b) == 0, "b waits for a");
    tg_task_release_hold(&a);
    tg_pool_finish(NULL, -1, &a, TG_CANCELLED, &refused); /* b is refused: the pool is shut down */
    CHECK(refused == &b, "b comes back");
    tg_pool_finish(NULL, -1, &b, TG_CANCELLED, &refused);
    tg_pool_free(p);
    printf("ok the injector and edges report out of memory and recover\n");
}

static void test_tracebuf(void) {
    tg_tracebuf *b = tg_tracebuf_new();
    CHECK(b, "buffer");
    countdown = 1;
    CHECK(tg_tracebuf_append(b) == NULL, "a record that cannot be stored is dropped");
    countdown = 0;
    CHECK(tg_tracebuf_dropped(b) == 1 && tg_tracebuf_count(b) == 0, "and counted");
    for (int i = 0; i < 5000; i++) CHECK(tg_tracebuf_append(b) != NULL, "append");
    CHECK(tg_tracebuf_count(b) == 5000, "count %lld", (long long)tg_tracebuf_count(b));
    uint64_t ids[3] = {1, 2, 3};
    uint32_t off;
    countdown = 1;
    CHECK(tg_tracebuf_add_ids(b, ids, 3, &off) == -1, "ids that cannot be stored");
    countdown = 0;
    CHECK(tg_tracebuf_add_ids(b, ids, 3, &off) == 0 && off == 0 && tg_tracebuf_nids(b) == 3, "ids");
    tg_tracebuf_free(b);
    printf("ok the trace buffer drops what it cannot store, and counts it\n");
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 120);
    test_pool_new();
    test_inject_and_depend();
    test_tracebuf();
    printf("oom: 3 passed, 0 failed\n");
    return 0;
}
