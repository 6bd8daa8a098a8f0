#define _DEFAULT_SOURCE
/* Stress tests of the scheduler core (csrc/graph.c, csrc/pool.c) with pthreads as workers:
 * random DAGs with failures (every node runs exactly once, after its predecessors; dependents
 * of a failure are skipped), fork-join fib with nested joins, idle workers parking, shutdown.
 * Run plain and under ThreadSanitizer / AddressSanitizer by the Makefile, under alarm(). */
#include "../graph.h"
#include "../pool.h"
#include "check.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>



typedef struct job job;
typedef int (*job_fn)(tg_pool *p, int w, job *j); /* returns the final state */
struct job {
    tg_task t; /* first member: a job pointer is a task pointer */
    job_fn fn;
    int n;              /* fib argument / DAG node index */
    int64_t result;
    _Atomic int runs;   /* how many times the body ran */
    int npred;
    int *pred;
    int fail;           /* DAG: this node fails */
};

typedef struct {
    tg_pool *p;
    int w;
    _Atomic int *ended; /* set when a run ends */
} worker_arg;

/* Runs `out` and every task handed out after it inside a tg_join loop for `awaited`. */
static void run_handed(tg_pool *p, int w, job *j, int *final) {
    if (j->t.skip) { *final = TG_CANCELLED; return; } /* returned as TG_NEXT_SKIP */
    /* Relaxed: counted, checked after the pool stops. */
    atomic_fetch_add_explicit(&j->runs, 1, memory_order_relaxed);
    *final = j->fn(p, w, j);
}

static void join(tg_pool *p, int w, job *awaited) {
    void *out;
    tg_task *done = NULL;
    int final = 0;
    for (;;) {
        int r = tg_join(p, w, &awaited->t, done, final, 1, &out);
        if (r == TG_NEXT_JOINED) return;
        CHECK(r == TG_NEXT_TASK || r == TG_NEXT_SKIP, "join got %d", r);
        CHECK((r == TG_NEXT_SKIP) == (((job *)out)->t.skip != 0), "skip code and flag disagree");
        job *j = out;
        run_handed(p, w, j, &final);
        done = &j->t;
    }
}

static tg_run fib_run;

static int fib_body(tg_pool *p, int w, job *j) {
    if (j->n < 2) { j->result = j->n; return TG_DONE; }
    job a, b;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    a.fn = b.fn = fib_body;
    a.n = j->n - 1; b.n = j->n - 2;
    CHECK(tg_spawn(p, w, &a.t, &a, &fib_run) == 1, "spawn a");
    CHECK(tg_spawn(p, w, &b.t, &b, &fib_run) == 1, "spawn b");
    join(p, w, &b);
    join(p, w, &a);
    CHECK(tg_task_state(&a.t) == TG_DONE && tg_task_state(&b.t) == TG_DONE, "children done");
    j->result = a.result + b.result;
    return TG_DONE;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    void *out;
    tg_task *done = NULL;
    int final = 0;
    for (;;) {
        int r = tg_next(wa->p, wa->w, done, final, &out);
        done = NULL;
        if (r == TG_NEXT_SHUTDOWN) break;
        if (r == TG_NEXT_ENDED) {
            atomic_store_explicit(wa->ended, 1, memory_order_release); /* main's acquire */
            continue;
        }
        CHECK(r == TG_NEXT_TASK || r == TG_NEXT_SKIP, "next got %d", r);
        job *j = out;
        CHECK((r == TG_NEXT_SKIP) == (j->t.skip != 0), "skip code and flag disagree");
        run_handed(wa->p, wa->w, j, &final);
        done = &j->t;
    }
    return NULL;
}

static void wait_flag(_Atomic int *f) {
    /* Acquire: pairs with the worker's release store when the run ended. */
    while (!atomic_load_explicit(f, memory_order_acquire)) usleep(200);
    atomic_store_explicit(f, 0, memory_order_relaxed);
}

static int64_t fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

/* ---------------------------------------------------------------- DAG */
static job *dag_jobs;

static int dag_body(tg_pool *p, int w, job *j) {
    (void)p; (void)w;
    for (int k = 0; k < j->npred; k++)
        CHECK(tg_task_state(&dag_jobs[j->pred[k]].t) == TG_DONE, "node %d ran before pred %d", j->n, j->pred[k]);
    j->result = 1;
    return j->fail ? TG_FAILED : TG_DONE;
}

static void test_dag(tg_pool *p, _Atomic int *ended, int nodes, unsigned seed) {
    srand(seed);
    dag_jobs = calloc((size_t)nodes, sizeof(job));
    tg_run run;
    memset(&run, 0, sizeof run);
    for (int i = 0; i < nodes; i++) {
        job *j = &dag_jobs[i];
        j->fn = dag_body;
        j->n = i;
        j->fail = (rand() % 500) == 0;
        j->npred = i == 0 ? 0 : rand() % 4;
        j->pred = malloc(sizeof(int) * 4);
        for (int k = 0; k < j->npred; k++) j->pred[k] = rand() % i;
    }
    /* Submit in index order (predecessors first), from this non-worker thread, holding the
     * run open meanwhile. */
    tg_run_hold(&run);
    for (int i = 0; i < nodes; i++) {
        job *j = &dag_jobs[i];
        CHECK(tg_task_claim(&j->t, j, &run) == 1, "claim");
        CHECK(tg_task_claim(&j->t, j, &run) == 0, "double claim must fail");
        for (int k = 0; k < j->npred; k++)
            CHECK(tg_task_depend(&j->t, &dag_jobs[j->pred[k]].t) >= 0, "depend");
        CHECK(tg_submit(p, -1, &j->t) >= 0, "submit");
    }
    if (!tg_run_release(&run)) wait_flag(ended);
    /* Expected: a node is cancelled iff some ancestor failed (or it is a failed node itself:
     * it ran and failed). */
    int *bad = calloc((size_t)nodes, sizeof(int));
    int ran = 0, cancelled = 0, failed = 0;
    for (int i = 0; i < nodes; i++) {
        job *j = &dag_jobs[i];
        int poisoned = 0;
        for (int k = 0; k < j->npred; k++) poisoned |= bad[j->pred[k]];
        int st = tg_task_state(&j->t);
        int runs = atomic_load_explicit(&j->runs, memory_order_relaxed);
        if (poisoned) {
            CHECK(st == TG_CANCELLED && runs == 0, "node %d: state %s runs %d, expected cancelled", i, tg_state_name(st), runs);
            cancelled++;
        } else {
            CHECK(runs == 1, "node %d ran %d times", i, runs);
            CHECK(st == (j->fail ? TG_FAILED : TG_DONE), "node %d state %s", i, tg_state_name(st));
            ran++;
            failed += j->fail;
        }
        bad[i] = poisoned || j->fail;
        free(j->pred);
    }
    CHECK(atomic_load(&run.live) == 0, "live %lld", (long long)atomic_load(&run.live));
    printf("ok random DAG (%d nodes: %d ran, %d failed, %d cancelled)\n", nodes, ran, failed, cancelled);
    free(bad);
    free(dag_jobs);
}

static void test_fib(tg_pool *p, _Atomic int *ended, int n) {
    memset(&fib_run, 0, sizeof fib_run);
    job root;
    memset(&root, 0, sizeof root);
    root.fn = fib_body;
    root.n = n;
    CHECK(tg_spawn(p, -1, &root.t, &root, &fib_run) == 1, "spawn root");
    wait_flag(ended);
    CHECK(tg_task_state(&root.t) == TG_DONE, "root state");
    CHECK(root.result == fib_serial(n), "fib(%d) = %lld", n, (long long)root.result);
    printf("ok fork-join fib(%d) = %lld\n", n, (long long)root.result);
}

static void test_cancel_before_start(tg_pool *p, _Atomic int *ended) {
    /* A task cancelled after claiming and before it is handed out never runs, and its
     * dependent is poisoned. */
    tg_run run;
    memset(&run, 0, sizeof run);
    job a, b;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    a.fn = b.fn = dag_body;
    dag_jobs = &a; /* dag_body of b checks its predecessors in dag_jobs */
    b.npred = 0;
    tg_run_hold(&run);
    CHECK(tg_task_claim(&a.t, &a, &run) == 1 && tg_task_claim(&b.t, &b, &run) == 1, "claim");
    CHECK(tg_task_depend(&b.t, &a.t) == TG_DEP_WAIT, "depend");
    tg_task_cancel(&a.t);
    CHECK(tg_submit(p, -1, &a.t) == 1, "submit a");
    CHECK(tg_submit(p, -1, &b.t) >= 0, "submit b"); /* ready at once if a was already skipped */
    if (!tg_run_release(&run)) wait_flag(ended);
    CHECK(atomic_load(&a.runs) == 0 && tg_task_state(&a.t) == TG_CANCELLED, "cancelled task ran");
    CHECK(atomic_load(&b.runs) == 0 && tg_task_state(&b.t) == TG_CANCELLED, "dependent ran");
    printf("ok cancel before start\n");
}

static void stats_total(tg_pool *p, int nw, int64_t *tot) {
    memset(tot, 0, sizeof(int64_t) * TG_NSTATS);
    int64_t s[TG_NSTATS];
    for (int w = 0; w < nw; w++) {
        tg_pool_stats(p, w, s);
        for (int k = 0; k < TG_NSTATS; k++) tot[k] += s[k];
    }
}

static void test_idle_parks(tg_pool *p, int nw) {
    /* All workers are out of work now: within a second every one must be parked, and stay
     * parked (no spinning): the park count stops moving. */
    int64_t a[TG_NSTATS], b[TG_NSTATS];
    usleep(300000);
    stats_total(p, nw, a);
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    usleep(500000);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    stats_total(p, nw, b);
    double cpu = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(b[TG_STAT_STEAL_ATTEMPTS] == a[TG_STAT_STEAL_ATTEMPTS], "idle workers still stealing");
    if (!sanitized()) CHECK(cpu < 0.05, "idle pool used %.3f s CPU in 0.5 s", cpu);
    printf("ok idle workers park (%.4f s CPU over 0.5 s idle)\n", cpu);
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 240);
    int sizes[] = {1, 2, 4, 8};
    for (int si = 0; si < 4; si++) {
        int nw = sizes[si];
        tg_pool *p = tg_pool_new(nw);
        CHECK(p, "tg_pool_new");
        _Atomic int ended = 0;
        pthread_t tid[8];
        worker_arg wa[8];
        for (int w = 0; w < nw; w++) {
            wa[w] = (worker_arg){p, w, &ended};
            pthread_create(&tid[w], NULL, worker_main, &wa[w]);
        }
        printf("-- %d workers\n", nw);
        int reps = sanitized() ? 2 : 5;
        for (int r = 0; r < reps; r++) test_dag(p, &ended, sanitized() ? 2000 : 5000, 17u * (unsigned)(r + 1) + (unsigned)nw);
        test_fib(p, &ended, sanitized() ? 16 : 22);
        test_cancel_before_start(p, &ended);
        int64_t tot[TG_NSTATS];
        stats_total(p, nw, tot);
        printf("   counters: run %lld, spawned %lld, stolen %lld, steal attempts %lld, injected %lld, parks %lld\n",
               (long long)tot[0], (long long)tot[1], (long long)tot[2], (long long)tot[3], (long long)tot[4], (long long)tot[5]);
        /* A C fib(22) lasts about a millisecond, which can be shorter than waking a parked
         * thread on a loaded machine: repeat it until a steal happens (or fail). */
        for (int tries = 0; nw > 1 && tot[TG_STAT_STOLEN] == 0 && tries < 20; tries++) {
            test_fib(p, &ended, 22); /* the full size even under sanitizers: ~30k tasks */
            stats_total(p, nw, tot);
        }
        if (nw > 1) CHECK(tot[TG_STAT_STOLEN] > 0, "no steals with %d workers", nw);
        test_idle_parks(p, nw);
        tg_pool_shutdown(p);
        for (int w = 0; w < nw; w++) pthread_join(tid[w], NULL);
        tg_pool_free(p);
    }
    printf("pool: 5 passed, 0 failed\n");
    return 0;
}
