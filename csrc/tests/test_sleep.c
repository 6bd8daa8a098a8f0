#define _DEFAULT_SOURCE
/* The sleep protocol (docs/design/sleep.md) with the window held open: the pool's park probe
 * stops a worker after it has registered as a sleeper (or as a joiner) and before it
 * re-checks, while this thread makes the wake-up happen exactly then (the shape of
 * Taskflow's notifier test). A lost wake-up leaves the worker asleep with work to do: the
 * watchdog turns that hang into a failure. Run plain and under ThreadSanitizer /
 * AddressSanitizer. */
#include "../graph.h"
#include "../pool.h"
#include "../sleep.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The probe: when armed, the parking worker announces itself and waits to be let go. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int armed, inside, let_go;

static void probe(void *ctx, int w) {
    (void)ctx; (void)w;
    pthread_mutex_lock(&mu);
    if (armed) {
        armed = 0;
        inside = 1;
        pthread_cond_broadcast(&cv);
        while (!let_go) pthread_cond_wait(&cv, &mu);
        let_go = 0;
        inside = 0;
    }
    pthread_mutex_unlock(&mu);
}

static void arm(void) {
    pthread_mutex_lock(&mu);
    armed = 1;
    let_go = 0;
    pthread_mutex_unlock(&mu);
}

static void wait_inside(void) {
    pthread_mutex_lock(&mu);
    while (!inside) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void release_probe(void) {
    pthread_mutex_lock(&mu);
    let_go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

typedef struct {
    tg_pool *p;
    tg_task *awaited; /* a join, or NULL: the worker loop */
    _Atomic int handled;
    _Atomic int joined;
} worker_arg;

static void *worker(void *arg) {
    worker_arg *wa = arg;
    tg_task *t;
    for (;;) {
        tg_find r = tg_pool_find(wa->p, 0, wa->awaited, TG_LOOK_STEAL, NULL, &t);
        if (r == TG_FIND_SHUTDOWN) break;
        if (r == TG_FIND_JOINED) {
            atomic_store_explicit(&wa->joined, 1, memory_order_release); /* main's acquire */
            wa->awaited = NULL; /* then live as a plain worker until shutdown */
            continue;
        }
        tg_task *refused = NULL;
        tg_pool_finish(wa->p, 0, t, TG_DONE, &refused);
        atomic_fetch_add_explicit(&wa->handled, 1, memory_order_release); /* main's acquire */
    }
    return NULL;
}

static void wait_count(_Atomic int *c, int want, const char *what) {
    for (int i = 0; atomic_load_explicit(c, memory_order_acquire) < want; i++) {
        CHECK(i < 20000, "%s: lost wake-up (still %d of %d after 10 s)", what, atomic_load(c), want);
        usleep(500);
    }
}

/* Rule 1: new work pushed while the only worker sits between registering as a sleeper and
 * re-checking the queues. It must not sleep through it (either its re-check sees the task, or
 * the pusher sees it registered and wakes it). */
static void test_work_vs_going_to_sleep(int rounds) {
    tg_pool *p = tg_pool_new(1);
    tg_pool_set_park_probe(p, probe, NULL);
    worker_arg wa = {p, NULL, 0, 0};
    tg_run run;
    memset(&run, 0, sizeof run);
    run.pool = p;
    tg_task *tasks = calloc((size_t)rounds, sizeof(tg_task));
    pthread_t tid;
    arm();
    pthread_create(&tid, NULL, worker, &wa);
    for (int i = 0; i < rounds; i++) {
        wait_inside(); /* the worker is registered as a sleeper and has not re-checked yet */
        CHECK(tg_task_claim(&tasks[i], &run) == 1, "claim");
        if (i % 2) { /* half the rounds: push before letting it re-check */
            CHECK(tg_pool_release_external(p, &tasks[i]) == TG_PUSH_QUEUED, "queue");
            arm();
            release_probe();
        } else { /* the others: let it re-check first, then push (it may be asleep by then) */
            arm();
            release_probe();
            usleep(i % 4 == 0 ? 0 : 200);
            CHECK(tg_pool_release_external(p, &tasks[i]) == TG_PUSH_QUEUED, "queue");
        }
        wait_count(&wa.handled, i + 1, "new work");
    }
    wait_inside(); /* leave it parked, then shut down */
    pthread_mutex_lock(&mu);
    armed = 0;
    pthread_mutex_unlock(&mu);
    release_probe();
    tg_pool_shutdown(p);
    pthread_join(tid, NULL);
    CHECK(tg_run_live(&run) == 0, "every task finished");
    tg_pool_free(p);
    free(tasks);
    printf("ok no lost wake-up for new work (%d rounds in the registration window)\n", rounds);
}

/* Rule 2: the awaited task finishes while the joiner sits between registering in
 * waiting_for and re-checking the task's state. */
static void test_finish_vs_joiner(int rounds) {
    for (int i = 0; i < rounds; i++) {
        tg_pool *p = tg_pool_new(1);
        tg_pool_set_park_probe(p, probe, NULL);
        tg_run run;
        memset(&run, 0, sizeof run);
        run.pool = p;
        tg_task x;
        memset(&x, 0, sizeof x);
        CHECK(tg_task_claim(&x, &run) == 1, "claim");
        tg_task_release_hold(&x); /* "running elsewhere": never queued */
        worker_arg wa = {p, &x, 0, 0};
        pthread_t tid;
        arm();
        pthread_create(&tid, NULL, worker, &wa);
        wait_inside(); /* the joiner registered for x and has not re-checked */
        tg_task *refused = NULL;
        if (i % 2) {
            tg_pool_finish(NULL, -1, &x, TG_DONE, &refused);
            release_probe();
        } else {
            release_probe();
            usleep(i % 4 == 0 ? 0 : 200);
            tg_pool_finish(NULL, -1, &x, TG_DONE, &refused);
        }
        wait_count(&wa.joined, 1, "join");
        tg_pool_shutdown(p);
        pthread_join(tid, NULL);
        tg_pool_free(p);
    }
    printf("ok no lost wake-up for a joiner (%d rounds in the registration window)\n", rounds);
}

/* Shutdown while a worker sits in the window: it must not sleep forever. */
static void test_shutdown_vs_going_to_sleep(int rounds) {
    for (int i = 0; i < rounds; i++) {
        tg_pool *p = tg_pool_new(2);
        tg_pool_set_park_probe(p, probe, NULL);
        worker_arg wa = {p, NULL, 0, 0};
        pthread_t tid;
        arm();
        pthread_create(&tid, NULL, worker, &wa);
        wait_inside();
        if (i % 2) {
            tg_pool_shutdown(p);
            release_probe();
        } else {
            release_probe();
            tg_pool_shutdown(p);
        }
        pthread_join(tid, NULL); /* hangs (watchdog) if the shutdown wake-up was lost */
        tg_pool_free(p);
    }
    printf("ok shutdown wakes a worker in the registration window (%d rounds)\n", rounds);
}

/* Who is woken: of two sleepers, new work wakes the one that became a sleeper last (its
 * caches are the warmer: the worker that just finished a compute's last task takes the next
 * compute's root, docs/design/sleep.md). Driven on tg_sleep alone: two threads park as
 * sleepers in a set order, and each notify must wake the later one first. */
typedef struct {
    tg_sleep *sl;
    int w;
    _Atomic int woken;
} sleeper_arg;

static void *sleeper(void *arg) {
    sleeper_arg *a = arg;
    tg_sleep_search_begin(a->sl);
    tg_sleep_prepare(a->sl, a->w, NULL, TG_SLEEP_COUNTED);
    tg_sleep_commit(a->sl, a->w, NULL, TG_SLEEP_COUNTED, 0, 0);
    atomic_store_explicit(&a->woken, 1, memory_order_release); /* main's acquire */
    return NULL;
}

static void wait_sleeping(tg_sleep *sl, int want) {
    for (int i = 0; tg_sleep_sleeping(sl) != want; i++) {
        CHECK(i < 20000, "%d sleepers after 10 s, want %d", tg_sleep_sleeping(sl), want);
        usleep(500);
    }
}

static void test_last_sleeper_woken_first(int rounds) {
    for (int i = 0; i < rounds; i++) {
        tg_sleep sl;
        CHECK(tg_sleep_init(&sl, 2) == 0, "init");
        sleeper_arg a[2] = {{&sl, 0, 0}, {&sl, 1, 0}};
        int first = i % 2, last = 1 - first; /* the order they park in */
        pthread_t tid[2];
        pthread_create(&tid[first], NULL, sleeper, &a[first]);
        wait_sleeping(&sl, 1);
        pthread_create(&tid[last], NULL, sleeper, &a[last]);
        wait_sleeping(&sl, 2);
        tg_sleep_notify(&sl);
        for (int k = 0; !atomic_load_explicit(&a[0].woken, memory_order_acquire) &&
                        !atomic_load_explicit(&a[1].woken, memory_order_acquire); k++) {
            CHECK(k < 20000, "round %d: notify woke nobody in 10 s", i);
            usleep(500);
        }
        CHECK(atomic_load_explicit(&a[last].woken, memory_order_acquire) == 1 &&
              atomic_load_explicit(&a[first].woken, memory_order_acquire) == 0,
              "round %d: notify woke worker %d, which parked first, not worker %d", i, first, last);
        pthread_join(tid[last], NULL);
        CHECK(tg_sleep_sleeping(&sl) == 1, "round %d: one sleeper left", i);
        tg_sleep_notify(&sl); /* then the other */
        wait_count(&a[first].woken, 1, "the first sleeper");
        pthread_join(tid[first], NULL);
        tg_sleep_destroy(&sl);
    }
    printf("ok new work wakes the sleeper that parked last (%d rounds)\n", rounds);
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 240);
    int rounds = sanitized() ? 200 : 1000;
    test_work_vs_going_to_sleep(rounds);
    test_finish_vs_joiner(rounds / 4);
    test_shutdown_vs_going_to_sleep(rounds / 4);
    test_last_sleeper_woken_first(rounds / 20);
    printf("sleep: 4 passed, 0 failed\n");
    return 0;
}
