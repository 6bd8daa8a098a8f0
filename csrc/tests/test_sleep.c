#define _DEFAULT_SOURCE
/* The sleep protocol (docs/design/sleep.md) with the window held open: the pool's park probe
 * stops a worker after it has registered as a sleeper (or as a joiner) and before it
 * re-checks, while this thread makes the wake-up happen exactly then (the shape of
 * Taskflow's notifier test). A lost wake-up leaves the worker asleep with work to do: the
 * watchdog turns that hang into a failure. Run plain and under ThreadSanitizer /
 * AddressSanitizer. */
#include "../graph.h"
#include "../pool.h"
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

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 240);
    int rounds = sanitized() ? 200 : 1000;
    test_work_vs_going_to_sleep(rounds);
    test_finish_vs_joiner(rounds / 4);
    test_shutdown_vs_going_to_sleep(rounds / 4);
    printf("sleep: 3 passed, 0 failed\n");
    return 0;
}
