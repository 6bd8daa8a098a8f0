#define _DEFAULT_SOURCE
/* Joins and work from outside (csrc/pool.c, tg_pool_find with an awaited task): what a join
 * takes from the injector and when (a no-steal join takes its awaited task from there; a join
 * whose awaited task runs elsewhere, or waits queued on another deque, leaves injected work to
 * the others for a bounded time), and a polling join that sees a task finished outside its
 * pool. The joiner is a pthread acting as worker 0; this thread plays the rest. Run plain and
 * under ThreadSanitizer / AddressSanitizer by the Makefile, under alarm(). */
#include "../graph.h"
#include "../pool.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A join nested past its help depth (TG_LOOK_LOCAL: no stealing) whose awaited task is
 * injected while the joiner is parked: the joiner takes it from the injector itself (nobody
 * else would: the pool's only worker is the joiner). */
typedef struct {
    tg_pool *p;
    tg_task *awaited;
    int how;
    _Atomic int result; /* 1 + tg_find, 0 while waiting */
    _Atomic int ran;
} joiner_arg;

static void *joiner_main(void *arg) {
    joiner_arg *ja = arg;
    tg_task *t;
    for (;;) {
        tg_find r = tg_pool_find(ja->p, 0, ja->awaited, ja->how, NULL, &t);
        if (r == TG_FIND_RUN || r == TG_FIND_SKIP) {
            tg_task *refused = NULL;
            atomic_fetch_add(&ja->ran, 1);
            tg_pool_finish(ja->p, 0, t, r == TG_FIND_RUN ? TG_DONE : TG_CANCELLED, &refused);
            continue;
        }
        atomic_store_explicit(&ja->result, 1 + (int)r, memory_order_release); /* main's acquire */
        return NULL;
    }
}

static void wait_result(joiner_arg *ja, int want) {
    for (int i = 0; atomic_load_explicit(&ja->result, memory_order_acquire) == 0; i++) {
        CHECK(i < 20000, "the join never returned (10 s)");
        usleep(500);
    }
    CHECK(atomic_load(&ja->result) == 1 + want, "join returned %d, want %d", atomic_load(&ja->result) - 1, want);
}

static void test_local_join_takes_injected(void) {
    tg_pool *p = tg_pool_new(1);
    tg_run run;
    memset(&run, 0, sizeof run);
    run.pool = p;
    tg_task x;
    memset(&x, 0, sizeof x);
    CHECK(tg_task_claim(&x, &run) == 1, "claim");
    joiner_arg ja = {p, &x, TG_LOOK_LOCAL, 0, 0};
    pthread_t tid;
    pthread_create(&tid, NULL, joiner_main, &ja);
    usleep(20000); /* let it park (it polls the injector) */
    CHECK(tg_pool_release_external(p, &x) == TG_PUSH_QUEUED, "inject");
    wait_result(&ja, TG_FIND_JOINED);
    pthread_join(tid, NULL);
    CHECK(atomic_load(&ja.ran) == 1 && tg_run_live(&run) == 0, "the joiner ran the injected task");
    tg_pool_shutdown(p);
    tg_pool_free(p);
    printf("ok a no-steal join takes its awaited task from the injector\n");
}

/* A pool of n workers whose joins defer for `defer` ns, a run on it, and two zeroed tasks. */
static tg_pool *defer_pool(int n, int64_t defer, tg_run *run, tg_task *x, tg_task *y) {
    tg_pool *p = tg_pool_new(n);
    CHECK(p, "tg_pool_new");
    tg_pool_set_join_defer(p, defer);
    memset(run, 0, sizeof *run);
    run->pool = p;
    memset(x, 0, sizeof *x);
    memset(y, 0, sizeof *y);
    return p;
}

/* Shuts p down and frees it, checking that the only task left queued is `left` (or none). */
static void end_pool(tg_pool *p, tg_task *left) {
    tg_pool_shutdown(p);
    tg_task *got, *refused = NULL;
    if (left) {
        CHECK(tg_pool_drain(p, &got) == 1 && got == left, "the injected task left queued");
        tg_pool_finish(p, 0, got, TG_CANCELLED, &refused);
    }
    CHECK(tg_pool_drain(p, &got) == 0, "nothing else queued");
    tg_pool_free(p);
}

/* A join whose awaited task runs on another thread leaves work from outside to the others
 * (it may wait: an Executor call, a compute from another thread): with a long window, the
 * parked joiner does not take an injected task while its awaited task runs, then returns
 * when that task finishes; with a short window, a joiner whose awaited task runs on takes the
 * injected task after the window (liveness: nobody else may be there to run it). */
static void test_join_leaves_injected_work(void) {
    for (int part = 0; part < 2; part++) {
        tg_run run;
        tg_task x, y;
        tg_pool *p = defer_pool(1, part == 0 ? 600000000000L : 1000000L, &run, &x, &y);
        CHECK(tg_task_claim_inline(&x) == 1, "claim inline: x runs elsewhere");
        CHECK(tg_task_claim(&y, &run) == 1, "claim y");
        joiner_arg ja = {p, &x, TG_LOOK_STEAL | TG_LOOK_POLL, 0, 0};
        pthread_t tid;
        pthread_create(&tid, NULL, joiner_main, &ja);
        usleep(5000); /* let it park */
        CHECK(tg_pool_release_external(p, &y) == TG_PUSH_QUEUED, "inject y");
        if (part == 0) {
            usleep(50000);
            CHECK(atomic_load(&ja.ran) == 0, "the joiner ran outside work while its task ran");
        } else {
            for (int i = 0; atomic_load(&ja.ran) == 0; i++) {
                CHECK(i < 20000, "the joiner never took the injected task (10 s)");
                usleep(500);
            }
        }
        tg_task *refused = NULL;
        tg_pool_finish(NULL, -1, &x, TG_DONE, &refused); /* x ends (outside the pool) */
        wait_result(&ja, TG_FIND_JOINED);
        pthread_join(tid, NULL);
        CHECK(atomic_load(&ja.ran) == part, "ran %d injected tasks", atomic_load(&ja.ran));
        end_pool(p, part == 0 ? &y : NULL); /* part 0: y is still queued */
    }
    printf("ok a join leaves outside work to the others while its task runs, for a bounded time\n");
}

/* The same while the awaited task, a child spawned by a task, is still queued on another
 * worker's deque (a thief took it in a batch, or its owner is busy): the joiner steals it and
 * leaves the injected task to the others, as it does while the child runs. Taking the
 * injected task first would put outside work, which may wait 50 ms, under the join. */
static void test_join_leaves_injected_work_for_a_queued_child(void) {
    tg_run run;
    tg_task x, y;
    tg_pool *p = defer_pool(2, 600000000000L, &run, &x, &y);
    /* This thread acts as worker 1 (no thread runs it): x waits on its deque. */
    CHECK(tg_pool_spawn_fresh(p, 1, &x, &run) == TG_PUSH_QUEUED, "spawn x on worker 1");
    CHECK(tg_task_claim(&y, &run) == 1, "claim y");
    CHECK(tg_pool_release_external(p, &y) == TG_PUSH_QUEUED, "inject y");
    joiner_arg ja = {p, &x, TG_LOOK_STEAL | TG_LOOK_POLL, 0, 0};
    pthread_t tid;
    pthread_create(&tid, NULL, joiner_main, &ja);
    wait_result(&ja, TG_FIND_JOINED);
    pthread_join(tid, NULL);
    CHECK(atomic_load(&ja.ran) == 1, "the joiner ran %d tasks: x only, not the injected y",
          atomic_load(&ja.ran));
    end_pool(p, &y);
    printf("ok a join leaves outside work to the others while its child waits on another deque\n");
}

/* A join on a task that finishes outside this pool (claimed inline, or in another pool),
 * so no finisher wakes this pool's joiner: with TG_LOOK_POLL the parked joiner sees the
 * finish by itself. */
static void test_poll_join_sees_foreign_finish(void) {
    tg_pool *p = tg_pool_new(1);
    tg_task x;
    memset(&x, 0, sizeof x);
    CHECK(tg_task_claim_inline(&x) == 1, "claim inline");
    joiner_arg ja = {p, &x, TG_LOOK_STEAL | TG_LOOK_POLL, 0, 0};
    pthread_t tid;
    pthread_create(&tid, NULL, joiner_main, &ja);
    usleep(20000); /* let it park */
    tg_task *refused = NULL;
    tg_pool_finish(NULL, -1, &x, TG_DONE, &refused); /* wakes nobody: x has no pool */
    wait_result(&ja, TG_FIND_JOINED);
    pthread_join(tid, NULL);
    tg_pool_shutdown(p);
    tg_pool_free(p);
    printf("ok a polling join sees a task finished outside its pool\n");
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 240);
    test_local_join_takes_injected();
    test_join_leaves_injected_work();
    test_join_leaves_injected_work_for_a_queued_child();
    test_poll_join_sees_foreign_finish();
    printf("joinwait: 4 passed, 0 failed\n");
    return 0;
}
