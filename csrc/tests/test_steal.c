#define _DEFAULT_SOURCE
/* The thief's policy (csrc/thief.c; docs/design/scheduler.md, "Stealing what pays"), with
 * pthreads as workers: work a thief declines for a while (behind a victim's gate, or a lone
 * task its owner will probably pop next) is never stranded; a producer of fine tasks is stolen
 * from a logarithmic number of times, not once per task; a task spawned and joined at once is
 * left to its owner. Run plain and under ThreadSanitizer / AddressSanitizer by the Makefile,
 * under a watchdog (a stranded task hangs its test). */
#include "../graph.h"
#include "../pool.h"
#include "../thief.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job job;
struct job {
    tg_task t; /* first member: a job pointer is a task pointer */
    int (*fn)(tg_pool *p, int w, job *j);
    int n;
    _Atomic int runs;
    _Atomic int ran_on; /* 1 + the worker that ran it */
};

static tg_run run;
static _Atomic int ended;
static _Atomic int children_ran;

static void handle(tg_pool *p, int w, tg_find r, tg_task *t) {
    job *j = (job *)t;
    int final = TG_CANCELLED;
    if (r == TG_FIND_RUN) {
        /* Relaxed: counted, read after the run ended (its release / acquire). */
        atomic_fetch_add_explicit(&j->runs, 1, memory_order_relaxed);
        atomic_store_explicit(&j->ran_on, w + 1, memory_order_relaxed);
        final = j->fn(p, w, j);
    }
    tg_task *refused = NULL;
    if (tg_pool_finish(p, w, t, (tg_state)final, &refused))
        atomic_store_explicit(&ended, 1, memory_order_release); /* main's acquire */
    CHECK(refused == NULL, "a live pool refused a successor");
}

static void join(tg_pool *p, int w, job *awaited) {
    tg_task *t;
    for (;;) {
        tg_find r = tg_pool_find(p, w, &awaited->t, TG_LOOK_STEAL, NULL, &t);
        if (r == TG_FIND_JOINED) return;
        CHECK(r == TG_FIND_RUN || r == TG_FIND_SKIP, "join got %d", r);
        handle(p, w, r, t);
    }
}

typedef struct {
    tg_pool *p;
    int w;
} worker_arg;

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    tg_task *t;
    for (;;) {
        tg_find r = tg_pool_find(wa->p, wa->w, NULL, TG_LOOK_STEAL, NULL, &t);
        if (r == TG_FIND_SHUTDOWN) break;
        CHECK(r == TG_FIND_RUN || r == TG_FIND_SKIP, "find got %d", r);
        handle(wa->p, wa->w, r, t);
    }
    return NULL;
}

/* ------------------------------------------------------------------------- bodies */

static int fine_child(tg_pool *p, int w, job *j) {
    (void)p; (void)w; (void)j;
    /* seq_cst: the counter the parents below wait on. */
    atomic_fetch_add_explicit(&children_ran, 1, memory_order_seq_cst);
    return TG_DONE;
}

/* Pushes j->n fine children and never pops them: it waits until other workers have run them
 * all. The thieves judge them too fine to move (a gate on this worker) and must still take
 * them, because this deque stands still. */
static int stubborn_root(tg_pool *p, int w, job *j) {
    job *kids = calloc((size_t)j->n, sizeof(job));
    CHECK(kids, "out of memory");
    for (int i = 0; i < j->n; i++) {
        kids[i].fn = fine_child;
        CHECK(tg_pool_spawn(p, w, &kids[i].t, &run) == TG_PUSH_QUEUED, "spawn");
    }
    while (atomic_load_explicit(&children_ran, memory_order_seq_cst) < j->n) sched_yield();
    for (int i = 0; i < j->n; i++) join(p, w, &kids[i]); /* all done: returns at once */
    for (int i = 0; i < j->n; i++)
        CHECK(atomic_load(&kids[i].runs) == 1 && atomic_load(&kids[i].ran_on) != w + 1,
              "child %d ran %d times, on worker %d", i, atomic_load(&kids[i].runs), atomic_load(&kids[i].ran_on) - 1);
    free(kids);
    return TG_DONE;
}

/* Spawns j->n fine children, then joins them in order (a flat fan-out). */
static int fan_root(tg_pool *p, int w, job *j) {
    job *kids = calloc((size_t)j->n, sizeof(job));
    CHECK(kids, "out of memory");
    for (int i = 0; i < j->n; i++) {
        kids[i].fn = fine_child;
        CHECK(tg_pool_spawn(p, w, &kids[i].t, &run) == TG_PUSH_QUEUED, "spawn");
    }
    for (int i = 0; i < j->n; i++) join(p, w, &kids[i]);
    free(kids);
    return TG_DONE;
}

/* Spawns one fine child and joins it at once, j->n times. */
static int spawn_join_root(tg_pool *p, int w, job *j) {
    for (int i = 0; i < j->n; i++) {
        job kid;
        memset(&kid, 0, sizeof kid);
        kid.fn = fine_child;
        CHECK(tg_pool_spawn(p, w, &kid.t, &run) == TG_PUSH_QUEUED, "spawn");
        join(p, w, &kid);
    }
    return TG_DONE;
}

/* Three bodies for "every held deque gets its turn": one worker spawns and joins lone fine
 * children until told to stop (its deque always holds a fresh lone task), another pushes one
 * child and waits for someone else to run it (a lone task that stands still). */
static _Atomic int stop_churn;

static int churner(tg_pool *p, int w, job *j) {
    (void)j;
    /* seq_cst: stop_churn is set by the child of the waiter, on another worker. */
    while (!atomic_load_explicit(&stop_churn, memory_order_seq_cst)) {
        job kid;
        memset(&kid, 0, sizeof kid);
        kid.fn = fine_child;
        CHECK(tg_pool_spawn(p, w, &kid.t, &run) == TG_PUSH_QUEUED, "spawn");
        join(p, w, &kid);
    }
    return TG_DONE;
}

static int stopper(tg_pool *p, int w, job *j) {
    (void)p; (void)w; (void)j;
    atomic_store_explicit(&stop_churn, 1, memory_order_seq_cst);
    return TG_DONE;
}

static int waiter(tg_pool *p, int w, job *j) {
    (void)j;
    job kid;
    memset(&kid, 0, sizeof kid);
    kid.fn = stopper;
    CHECK(tg_pool_spawn(p, w, &kid.t, &run) == TG_PUSH_QUEUED, "spawn");
    while (!atomic_load_explicit(&stop_churn, memory_order_seq_cst)) sched_yield();
    join(p, w, &kid);
    return TG_DONE;
}

static int churn_root(tg_pool *p, int w, job *j) {
    (void)j;
    job c, wt;
    memset(&c, 0, sizeof c);
    memset(&wt, 0, sizeof wt);
    c.fn = churner;
    wt.fn = waiter;
    CHECK(tg_pool_spawn(p, w, &c.t, &run) == TG_PUSH_QUEUED, "spawn churner");
    CHECK(tg_pool_spawn(p, w, &wt.t, &run) == TG_PUSH_QUEUED, "spawn waiter");
    join(p, w, &c); /* the thief hint points this join at the churner's deque first */
    join(p, w, &wt);
    return TG_DONE;
}

/* ------------------------------------------------------------------------- driver */

static void stats_total(tg_pool *p, int nw, int64_t *tot) {
    memset(tot, 0, sizeof(int64_t) * TG_NSTATS);
    int64_t s[TG_NSTATS];
    for (int w = 0; w < nw; w++) {
        tg_pool_stats(p, w, s);
        for (int k = 0; k < TG_NSTATS; k++) tot[k] += s[k];
    }
}

/* Runs root (body fn, argument n) on a pool of nw workers; the counters of the run in *d. */
static void run_root(int nw, int (*fn)(tg_pool *, int, job *), int n, int64_t *d) {
    tg_pool *p = tg_pool_new(nw);
    CHECK(p, "tg_pool_new");
    memset(&run, 0, sizeof run);
    run.pool = p;
    atomic_store(&ended, 0);
    atomic_store(&children_ran, 0);
    pthread_t tid[8];
    worker_arg wa[8];
    for (int w = 0; w < nw; w++) {
        wa[w] = (worker_arg){p, w};
        pthread_create(&tid[w], NULL, worker_main, &wa[w]);
    }
    job root;
    memset(&root, 0, sizeof root);
    root.fn = fn;
    root.n = n;
    CHECK(tg_task_claim(&root.t, &run) == 1, "claim root");
    CHECK(tg_pool_release_external(p, &root.t) == TG_PUSH_QUEUED, "queue root");
    /* Acquire: pairs with the release store of the worker that ended the run. */
    while (!atomic_load_explicit(&ended, memory_order_acquire)) usleep(200);
    CHECK(tg_task_state(&root.t) == TG_DONE, "root state");
    stats_total(p, nw, d);
    tg_pool_shutdown(p);
    for (int w = 0; w < nw; w++) pthread_join(tid[w], NULL);
    tg_pool_free(p);
}

static void test_held_work_is_never_stranded(void) {
    int rounds = sanitized() ? 3 : 10, n = sanitized() ? 2000 : 20000;
    for (int nw = 2; nw <= 4; nw += 2)
        for (int r = 0; r < rounds; r++) {
            int64_t d[TG_NSTATS];
            run_root(nw, stubborn_root, n, d);
            CHECK(atomic_load(&children_ran) == n, "%d of %d children ran", atomic_load(&children_ran), n);
        }
    printf("ok fine children of a worker that never pops them are all run by thieves "
           "(%d rounds of %d children, 2 and 4 workers)\n", rounds, n);
    /* The lone case: one child, its owner busy: taken after the owner's deque stood still. */
    for (int r = 0; r < rounds * 10; r++) {
        int64_t d[TG_NSTATS];
        run_root(2, stubborn_root, 1, d);
    }
    printf("ok a lone child of a busy worker is taken (%d rounds)\n", rounds * 10);
}

static void test_every_held_deque_gets_its_turn(void) {
    /* The churner stops only once the waiter's lone child has run on another worker, while
     * its own deque keeps moving: a thief must not stay on the moving deque (the watch goes
     * to whichever held deque stands still). A liveness check: a watch that never moved on
     * would hang it (the watchdog fails the run). */
    int rounds = sanitized() ? 5 : 30;
    for (int r = 0; r < rounds; r++) {
        int64_t d[TG_NSTATS];
        atomic_store(&stop_churn, 0);
        run_root(3, churn_root, 0, d);
    }
    printf("ok a lone task that stands still is taken beside a deque that never does "
           "(%d rounds, 3 workers)\n", rounds);
}

static void test_flat_fan_out_is_stolen_from_rarely(void) {
    int n = sanitized() ? 20000 : 200000;
    int log2n = 0;
    while ((1 << log2n) < n) log2n++;
    int64_t bound = 16 * 2 * log2n;
    int64_t worst = 0;
    for (int r = 0; r < 5; r++) {
        int64_t d[TG_NSTATS];
        run_root(2, fan_root, n, d);
        CHECK(atomic_load(&children_ran) == n, "children ran");
        if (d[TG_STAT_STEAL_ATTEMPTS] > worst) worst = d[TG_STAT_STEAL_ATTEMPTS];
    }
    /* Not under the sanitizers: they slow every task tenfold, and the policy judges work by
     * the time it takes (FINE_NS), so there the children are not fine. */
    CHECK(sanitized() || worst <= bound, "a flat fan-out of %d fine children made %lld steal "
          "attempts (bound 16 P log2 n = %lld)", n, (long long)worst, (long long)bound);
    printf("ok a flat fan-out of %d fine children: at most %lld steal attempts per run "
           "(bound %lld)\n", n, (long long)worst, (long long)bound);
}

static void test_spawn_join_is_left_to_its_owner(void) {
    int n = sanitized() ? 20000 : 200000;
    int64_t d[TG_NSTATS];
    run_root(2, spawn_join_root, n, d);
    CHECK(atomic_load(&children_ran) == n, "children ran");
    CHECK(sanitized() || d[TG_STAT_STOLEN] <= n / 100, "%lld of %d children spawned and joined "
          "at once were stolen", (long long)d[TG_STAT_STOLEN], n);
    printf("ok %d children spawned and joined at once: %lld stolen\n", n, (long long)d[TG_STAT_STOLEN]);
}

/* ------------------------------------------------------------------------- gates, step by step */

/* Worker 0 of pool p (played by this thread) pushes n fine children from kids. */
static void push_fine(tg_pool *p, job *kids, int n) {
    for (int i = 0; i < n; i++) {
        memset(&kids[i], 0, sizeof kids[i]);
        kids[i].fn = fine_child;
        CHECK(tg_pool_spawn(p, 0, &kids[i].t, &run) == TG_PUSH_QUEUED, "spawn");
    }
}

/* Worker 0 pops its own deque until it finds it empty (it "runs dry"). The pool is shut down
 * first, so that its find returns then instead of searching and parking (pool.h). */
static void run_dry(tg_pool *p) {
    tg_pool_shutdown(p);
    tg_task *t;
    tg_find r;
    while ((r = tg_pool_find(p, 0, NULL, TG_LOOK_STEAL, NULL, &t)) != TG_FIND_SHUTDOWN)
        CHECK(r == TG_FIND_RUN, "find got %d", r);
}

/* A gate lasts as long as the work it was learnt on: once its victim has run dry, the next
 * work pushed there (a new compute after a fan-out of fine tasks) is stolen at once. Before,
 * a fork-join computed right after such a fan-out ran on one worker until its owner had pushed
 * up to 4096 more tasks (fib(28) with a cutoff at 16 pushes about 4,000 in all). No worker
 * threads: this thread plays worker 0 (the victim) and worker 1 (the thief), so every step is
 * deterministic. */
static void test_a_gate_lapses_when_its_victim_runs_dry(void) {
    enum { N = 64, NEXT = 8 };
    static job kids[N], next[NEXT];
    uint64_t item;
    for (int learn_late = 0; learn_late <= 1; learn_late++) {
        tg_pool *p = tg_pool_new(2);
        CHECK(p, "tg_pool_new");
        memset(&run, 0, sizeof run);
        run.pool = p;
        int64_t now = tg_now_ns();
        push_fine(p, kids, N);
        CHECK(tg_thief_pass(p, 1, 0, 1, now, &item) == LOOK_STOLEN, "first steal");
        if (!learn_late) {
            /* The thief ran dry 100 ns after taking a batch of 32: too fine, a gate. */
            tg_thief_learn(p, 1, now + 100);
            CHECK(tg_thief_pass(p, 1, 0, 1, now + 200, &item) == LOOK_HELD,
                  "the victim's remaining fine work is not behind a gate");
            run_dry(p);
        } else {
            /* The victim runs dry before the thief judges its batch: no verdict on work that
             * is gone. */
            run_dry(p);
            tg_thief_learn(p, 1, now + 100);
        }
        push_fine(p, next, NEXT); /* the victim's next work */
        CHECK(tg_thief_pass(p, 1, 0, 1, now + 300, &item) == LOOK_STOLEN,
              "the victim's next work is held behind a gate learnt on work it finished (%s)",
              learn_late ? "judged after it ran dry" : "judged before");
        tg_pool_free(p);
    }
    printf("ok a gate lapses when its victim runs dry (judged before and after)\n");
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 240);
    test_held_work_is_never_stranded();
    test_every_held_deque_gets_its_turn();
    test_flat_fan_out_is_stolen_from_rarely();
    test_spawn_join_is_left_to_its_owner();
    test_a_gate_lapses_when_its_victim_runs_dry();
    printf("steal: 5 passed, 0 failed\n");
    return 0;
}
