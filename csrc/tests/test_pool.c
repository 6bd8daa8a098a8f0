#define _DEFAULT_SOURCE
/* Stress tests of the scheduler core (csrc/graph.c, csrc/pool.c) with pthreads as workers:
 * random DAGs with failures (every node runs exactly once, after its predecessors; dependents
 * of a failure are skipped), fork-join fib with nested joins, cancellation, idle workers
 * parking, shutdown refusing and draining, and successors released into their own pool
 * (joins and the injector: test_joinwait.c).
 * Run plain and under ThreadSanitizer / AddressSanitizer by the Makefile, under alarm(). */
#include "../graph.h"
#include "../pool.h"
#include "check.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct job job;
typedef int (*job_fn)(tg_pool *p, int w, job *j); /* returns the final state */
struct job {
    tg_task t; /* first member: a job pointer is a task pointer (the Node embeds it likewise) */
    job_fn fn;
    int n;              /* fib argument / DAG node index */
    int64_t result;
    _Atomic int runs;   /* how many times the body ran */
    _Atomic int ran_on; /* 1 + the pool id it ran on (cross-pool test) */
    int npred;
    int *pred;
    int fail;           /* DAG: this node fails */
};

typedef struct {
    tg_pool *p;
    int w;
    int pool_id;
    _Atomic int *ended; /* set when a run ends */
} worker_arg;

static _Thread_local int my_pool_id;

/* Runs (or skips) a task handed out by tg_pool_find and finishes it. */
static void handle(tg_pool *p, int w, tg_find r, tg_task *t, _Atomic int *ended) {
    job *j = (job *)t;
    CHECK((r == TG_FIND_SKIP) == (t->skip != 0), "skip code and flag disagree");
    int final = TG_CANCELLED;
    if (r == TG_FIND_RUN) {
        /* Relaxed: counted, checked after the pool stops. */
        atomic_fetch_add_explicit(&j->runs, 1, memory_order_relaxed);
        atomic_store_explicit(&j->ran_on, my_pool_id + 1, memory_order_relaxed);
        final = j->fn(p, w, j);
    }
    tg_task *refused = NULL;
    if (tg_pool_finish(p, w, t, (tg_state)final, &refused) && ended)
        atomic_store_explicit(ended, 1, memory_order_release); /* main's acquire */
    CHECK(refused == NULL, "a live pool refused a successor");
}

static _Atomic int *fib_ended;

static void join(tg_pool *p, int w, job *awaited) {
    tg_task *t;
    for (;;) {
        tg_find r = tg_pool_find(p, w, &awaited->t, TG_LOOK_STEAL, NULL, &t);
        if (r == TG_FIND_JOINED) return;
        CHECK(r == TG_FIND_RUN || r == TG_FIND_SKIP, "join got %d", r);
        handle(p, w, r, t, fib_ended);
    }
}

static tg_run fib_run;

static int fib_body(tg_pool *p, int w, job *j) {
    if (j->n < 2) { j->result = j->n; return TG_DONE; }
    job a, b;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    a.fn = b.fn = fib_body;
    a.n = j->n - 1; b.n = j->n - 2;
    CHECK(tg_pool_spawn(p, w, &a.t, &fib_run) == TG_PUSH_QUEUED, "spawn a");
    CHECK(tg_pool_spawn(p, w, &b.t, &fib_run) == TG_PUSH_QUEUED, "spawn b");
    CHECK(tg_pool_spawn(p, w, &b.t, &fib_run) == TG_PUSH_TAKEN, "a second spawn of b is refused");
    join(p, w, &b);
    join(p, w, &a);
    CHECK(tg_task_state(&a.t) == TG_DONE && tg_task_state(&b.t) == TG_DONE, "children done");
    j->result = a.result + b.result;
    return TG_DONE;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    my_pool_id = wa->pool_id;
    tg_task *t;
    for (;;) {
        tg_find r = tg_pool_find(wa->p, wa->w, NULL, TG_LOOK_STEAL, NULL, &t);
        if (r == TG_FIND_SHUTDOWN) break;
        CHECK(r == TG_FIND_RUN || r == TG_FIND_SKIP, "find got %d", r);
        handle(wa->p, wa->w, r, t, wa->ended);
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
    run.pool = p;
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
        CHECK(tg_task_claim(&j->t, &run) == 1, "claim");
        CHECK(tg_task_claim(&j->t, &run) == 0, "double claim must fail");
        for (int k = 0; k < j->npred; k++)
            CHECK(tg_task_depend(&j->t, &dag_jobs[j->pred[k]].t) != TG_DEP_NOMEM, "depend");
        CHECK(tg_pool_release_external(p, &j->t) >= 0, "release");
    }
    if (!tg_run_release(&run)) wait_flag(ended);
    /* Expected: a node is cancelled iff some ancestor failed. */
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
            CHECK(tg_task_poisoned(&j->t) == TG_POISON_DEP, "node %d poisoned for %d", i, tg_task_poisoned(&j->t));
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
    CHECK(tg_run_live(&run) == 0, "live %lld", (long long)tg_run_live(&run));
    printf("ok random DAG (%d nodes: %d ran, %d failed, %d cancelled)\n", nodes, ran, failed, cancelled);
    free(bad);
    free(dag_jobs);
}

static void test_fib(tg_pool *p, _Atomic int *ended, int n) {
    memset(&fib_run, 0, sizeof fib_run);
    fib_run.pool = p;
    fib_ended = ended;
    job root;
    memset(&root, 0, sizeof root);
    root.fn = fib_body;
    root.n = n;
    CHECK(tg_task_claim(&root.t, &fib_run) == 1, "claim root");
    CHECK(tg_pool_release_external(p, &root.t) == TG_PUSH_QUEUED, "queue root");
    wait_flag(ended);
    CHECK(tg_task_state(&root.t) == TG_DONE, "root state");
    CHECK(root.result == fib_serial(n), "fib(%d) = %lld", n, (long long)root.result);
    printf("ok fork-join fib(%d) = %lld\n", n, (long long)root.result);
}

/* ---------------------------------------------------------------- flat fan-out, steal-half */
/* A root task spawns FAN children onto its deque, then joins them. Each child waits until
 * `fan_need` children (the number of workers) have started: they can only all start if the
 * other workers take them, and a worker that steals a batch runs its first child (which
 * waits) with the rest on its own deque, so the remaining workers must be woken to steal
 * from it (docs/design/sleep.md, "Batches pushed by a searcher"). A lost wake-up hangs the
 * round, and the watchdog fails the run. */
enum { FAN = 64 };
static _Atomic int fan_arrived;
static int fan_need;

static int fan_child(tg_pool *p, int w, job *j) {
    (void)p; (void)w; (void)j;
    /* seq_cst RMW and load: the barrier's counter, read by the other children's loops. */
    atomic_fetch_add_explicit(&fan_arrived, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&fan_arrived, memory_order_seq_cst) < fan_need) sched_yield();
    return TG_DONE;
}

static int fan_root(tg_pool *p, int w, job *j) {
    (void)j;
    job *kids = calloc(FAN, sizeof(job));
    CHECK(kids, "out of memory");
    for (int i = 0; i < FAN; i++) {
        kids[i].fn = fan_child;
        CHECK(tg_pool_spawn(p, w, &kids[i].t, &fib_run) == TG_PUSH_QUEUED, "spawn child %d", i);
    }
    for (int i = 0; i < FAN; i++) join(p, w, &kids[i]);
    for (int i = 0; i < FAN; i++)
        CHECK(atomic_load(&kids[i].runs) == 1 && tg_task_state(&kids[i].t) == TG_DONE, "child %d", i);
    free(kids);
    return TG_DONE;
}

static void test_fanout_batches(tg_pool *p, _Atomic int *ended, int nw) {
    int rounds = sanitized() ? 20 : 200;
    for (int r = 0; r < rounds; r++) {
        memset(&fib_run, 0, sizeof fib_run);
        fib_run.pool = p;
        fib_ended = ended;
        atomic_store(&fan_arrived, 0);
        fan_need = nw;
        job root;
        memset(&root, 0, sizeof root);
        root.fn = fan_root;
        CHECK(tg_task_claim(&root.t, &fib_run) == 1, "claim root");
        CHECK(tg_pool_release_external(p, &root.t) == TG_PUSH_QUEUED, "queue root");
        wait_flag(ended);
        CHECK(tg_task_state(&root.t) == TG_DONE, "root state");
        CHECK(atomic_load(&fan_arrived) == FAN, "%d children ran", atomic_load(&fan_arrived));
    }
    printf("ok flat fan-out of %d children needing %d at once (%d rounds)\n", FAN, nw, rounds);
}

static void test_cancel_before_start(tg_pool *p, _Atomic int *ended) {
    /* A task cancelled after claiming and before it is handed out never runs, and its
     * dependent is poisoned. */
    tg_run run;
    memset(&run, 0, sizeof run);
    run.pool = p;
    job a, b;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    a.fn = b.fn = dag_body;
    dag_jobs = &a; /* dag_body of b checks its predecessors in dag_jobs */
    tg_run_hold(&run);
    CHECK(tg_task_claim(&a.t, &run) == 1 && tg_task_claim(&b.t, &run) == 1, "claim");
    CHECK(tg_task_depend(&b.t, &a.t) == TG_DEP_WAIT, "depend");
    tg_task_cancel(&a.t, TG_POISON_CANCEL);
    tg_task_cancel(&a.t, TG_POISON_DEP); /* the first reason stays */
    CHECK(tg_task_poisoned(&a.t) == TG_POISON_CANCEL, "first reason kept");
    CHECK(tg_pool_release_external(p, &a.t) == TG_PUSH_QUEUED, "queue a");
    CHECK(tg_pool_release_external(p, &b.t) >= 0, "release b"); /* queued at once if a was already skipped */
    if (!tg_run_release(&run)) wait_flag(ended);
    CHECK(atomic_load(&a.runs) == 0 && tg_task_state(&a.t) == TG_CANCELLED, "cancelled task ran");
    CHECK(atomic_load(&b.runs) == 0 && tg_task_state(&b.t) == TG_CANCELLED, "dependent ran");
    printf("ok cancel before start\n");
}

static void test_run_cancel(tg_pool *p, _Atomic int *ended) {
    /* A cancelled run hands its tasks out with skip set: none of them runs. */
    tg_run run;
    memset(&run, 0, sizeof run);
    run.pool = p;
    enum { N = 200 };
    job *jobs = calloc(N, sizeof(job));
    dag_jobs = jobs;
    tg_run_hold(&run);
    tg_run_cancel(&run);
    for (int i = 0; i < N; i++) {
        jobs[i].fn = dag_body;
        CHECK(tg_task_claim(&jobs[i].t, &run) == 1, "claim");
        CHECK(tg_pool_release_external(p, &jobs[i].t) == TG_PUSH_QUEUED, "queue");
    }
    if (!tg_run_release(&run)) wait_flag(ended);
    for (int i = 0; i < N; i++)
        CHECK(atomic_load(&jobs[i].runs) == 0 && tg_task_state(&jobs[i].t) == TG_CANCELLED, "task %d of a cancelled run", i);
    free(jobs);
    printf("ok cancelled run skips its tasks\n");
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
     * parked (no spinning): the steal attempts stop moving. */
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

/* After shutdown: injections are refused, queued tasks drain with skip set, and a successor
 * whose pool is shut down comes back to the finisher as refused. */
static void test_shutdown_refuses_and_drains(void) {
    tg_pool *p = tg_pool_new(2); /* no worker threads: nothing takes from the queues */
    CHECK(p, "pool");
    tg_run run;
    memset(&run, 0, sizeof run);
    run.pool = p;
    job q[3];
    memset(q, 0, sizeof q);
    for (int i = 0; i < 3; i++) CHECK(tg_task_claim(&q[i].t, &run) == 1, "claim");
    CHECK(tg_pool_release_external(p, &q[0].t) == TG_PUSH_QUEUED, "queue before shutdown");
    CHECK(tg_task_depend(&q[2].t, &q[1].t) == TG_DEP_WAIT, "depend");
    CHECK(tg_pool_release_external(p, &q[2].t) == TG_PUSH_WAITING, "waits for q1");
    tg_pool_shutdown(p);
    CHECK(tg_pool_is_shutdown(p), "is_shutdown");
    CHECK(tg_pool_release_external(p, &q[1].t) == TG_PUSH_REFUSED, "refused after shutdown");
    tg_task *t;
    CHECK(tg_pool_drain(p, &t) == 1 && t == &q[0].t && t->skip, "drains the queued task");
    tg_task *refused = NULL;
    tg_pool_finish(p, 0, t, TG_CANCELLED, &refused);
    CHECK(tg_pool_drain(p, &t) == 0, "nothing else queued");
    /* q1 was refused: the caller finishes it; its successor q2 is refused too. */
    tg_pool_finish(NULL, -1, &q[1].t, TG_CANCELLED, &refused);
    CHECK(refused == &q[2].t && q[2].t.link == NULL, "successor of a shut-down pool comes back");
    CHECK(tg_task_poisoned(&q[2].t) == TG_POISON_DEP, "and is poisoned");
    tg_pool_finish(NULL, -1, &q[2].t, TG_CANCELLED, &refused);
    CHECK(tg_run_live(&run) == 0, "run ended");
    tg_pool_free(p);
    printf("ok shutdown refuses injections, drains queues, returns refused successors\n");
}

/* tg_pool_progress(p, w) stands still while worker w only pushes, and moves when a task leaves
 * w's deque, taken by w or stolen by another worker: csrc/py/noderec.c skips its walk over a
 * task's children while it stands still (none can have finished). No worker threads: this
 * thread plays both workers, so every step is deterministic. */
static void test_progress_moves_when_a_task_leaves_the_deque(void) {
    enum { N = 8 };
    tg_pool *p = tg_pool_new(2);
    CHECK(p, "pool");
    tg_run run;
    memset(&run, 0, sizeof run);
    run.pool = p;
    job q[N];
    memset(q, 0, sizeof q);
    uint64_t before = tg_pool_progress(p, 0);
    for (int i = 0; i < N; i++) {
        CHECK(tg_pool_spawn(p, 0, &q[i].t, &run) == TG_PUSH_QUEUED, "spawn");
        CHECK(tg_pool_progress(p, 0) == before, "progress moved on a push");
    }
    tg_task *t;
    tg_find r = tg_pool_find(p, 1, NULL, TG_LOOK_STEAL, NULL, &t); /* worker 1 steals */
    CHECK(r == TG_FIND_RUN && t->stolen, "worker 1 did not steal (%d)", r);
    uint64_t stolen = tg_pool_progress(p, 0);
    CHECK(stolen != before, "progress stood still through a steal");
    CHECK(tg_pool_progress(p, 0) == stolen, "progress moved by itself");
    tg_task *refused = NULL;
    tg_pool_finish(p, 1, t, TG_DONE, &refused);
    r = tg_pool_find(p, 0, NULL, TG_LOOK_STEAL, NULL, &t); /* worker 0 takes its own */
    CHECK(r == TG_FIND_RUN && !t->stolen, "worker 0 did not pop (%d)", r);
    CHECK(tg_pool_progress(p, 0) != stolen, "progress stood still through a pop");
    tg_pool_finish(p, 0, t, TG_DONE, &refused);
    /* What is left: drained as at the end of an engine's life. */
    tg_pool_shutdown(p);
    while (tg_pool_drain(p, &t)) tg_pool_finish(p, 0, t, TG_CANCELLED, &refused);
    CHECK(refused == NULL, "refused");
    tg_pool_free(p);
    printf("ok progress moves when a task leaves the deque, not on a push\n");
}

/* A successor in another pool is released into that pool (and runs on its workers). */
static void test_cross_pool_release(void) {
    tg_pool *pa = tg_pool_new(1), *pb = tg_pool_new(1);
    _Atomic int ea = 0, eb = 0;
    pthread_t ta, tb;
    worker_arg wa = {pa, 0, 1, &ea}, wb = {pb, 0, 2, &eb};
    pthread_create(&ta, NULL, worker_main, &wa);
    pthread_create(&tb, NULL, worker_main, &wb);
    tg_run ra, rb;
    memset(&ra, 0, sizeof ra); memset(&rb, 0, sizeof rb);
    ra.pool = pa;
    rb.pool = pb;
    job a, b;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    a.fn = b.fn = dag_body;
    dag_jobs = &a;
    CHECK(tg_task_claim(&a.t, &ra) && tg_task_claim(&b.t, &rb), "claim");
    CHECK(tg_task_depend(&b.t, &a.t) == TG_DEP_WAIT, "depend");
    CHECK(tg_pool_release_external(pb, &b.t) == TG_PUSH_WAITING, "b waits");
    CHECK(tg_pool_release_external(pa, &a.t) == TG_PUSH_QUEUED, "a queued");
    wait_flag(&ea);
    wait_flag(&eb);
    CHECK(atomic_load(&a.ran_on) == 2 && atomic_load(&b.ran_on) == 3, "ran on %d and %d",
          atomic_load(&a.ran_on), atomic_load(&b.ran_on));
    tg_pool_shutdown(pa);
    tg_pool_shutdown(pb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    tg_pool_free(pa);
    tg_pool_free(pb);
    printf("ok a successor is released into its own pool\n");
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
            wa[w] = (worker_arg){p, w, 0, &ended};
            pthread_create(&tid[w], NULL, worker_main, &wa[w]);
        }
        printf("-- %d workers\n", nw);
        int reps = sanitized() ? 2 : 5;
        for (int r = 0; r < reps; r++) test_dag(p, &ended, sanitized() ? 2000 : 5000, 17u * (unsigned)(r + 1) + (unsigned)nw);
        test_fib(p, &ended, sanitized() ? 16 : 22);
        test_fanout_batches(p, &ended, nw);
        test_cancel_before_start(p, &ended);
        test_run_cancel(p, &ended);
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
    test_shutdown_refuses_and_drains();
    test_progress_moves_when_a_task_leaves_the_deque();
    test_cross_pool_release();
    printf("pool: 8 passed, 0 failed\n");
    return 0;
}
