#define _DEFAULT_SOURCE
/* Spare workers and their manager (csrc/spare.c; docs/design/sleep.md, "Spare workers"), with
 * pthreads as workers, spares and manager:
 * - every worker waits, undeclared, on something only a queued task can release: the manager
 *   finds the waits and a spare runs that task (no deadlock);
 * - declared waits: many tasks wait at once, spares run them; the spare threads never exceed
 *   the bound, and retire once idle;
 * - at the bound, tasks queue (they all finish);
 * - a spare thread the "OS refuses" (tg_pool_spare_failed) leaves the work queued, counted;
 * - shutdown ends the manager and every spare thread, idle or on duty;
 * - workers back from waits yield their cores to spares on duty (never more jobs compute at
 *   once than there are workers), and bursts of waits and computing jobs all finish;
 * - the scheduler statistics the manager reads (schedstat.h): a thread that spins has CPU
 *   time; a missing file reads as not there.
 * Run plain and under ThreadSanitizer / AddressSanitizer by the Makefile, under alarm(). */
#include "../graph.h"
#include "../pool.h"
#include "../schedstat.h"
#include "../sleep.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct job job;
typedef void (*job_fn)(tg_pool *p, int w, job *j);
struct job {
    tg_task t; /* first member: a job pointer is a task pointer */
    job_fn fn;
    int ms;    /* how long a waiting job waits */
};

static _Atomic int gate;        /* the undeclared waits wait for this */
static _Atomic int done_jobs;
static _Atomic int refuse_next; /* the manager's thread "fails to start" the next spare */
static int64_t idle_ns = 50000000; /* spares retire after 50 ms off duty */

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (undeclared: the manager must find it) until the gate opens. */
static void wait_gate(tg_pool *p, int w, job *j) {
    (void)p; (void)w; (void)j;
    /* Acquire: pairs with open_gate's release. */
    while (!atomic_load_explicit(&gate, memory_order_acquire)) sleep_ms(1);
}
static void open_gate(tg_pool *p, int w, job *j) {
    (void)p; (void)w; (void)j;
    atomic_store_explicit(&gate, 1, memory_order_release); /* see wait_gate */
}
/* A declared wait of j->ms milliseconds. */
static void declared_wait(tg_pool *p, int w, job *j) {
    tg_pool_block_begin(p, w);
    sleep_ms(j->ms);
    tg_pool_block_end(p, w);
}

static void run_job(tg_pool *p, int w, tg_find r, tg_task *t) {
    job *j = (job *)t;
    if (r == TG_FIND_RUN) j->fn(p, w, j);
    tg_task *refused = NULL;
    tg_pool_finish(p, w, t, r == TG_FIND_RUN ? TG_DONE : TG_CANCELLED, &refused);
    CHECK(refused == NULL, "a live pool refused a successor");
    /* Release: pairs with wait_done's acquire (the job's memory may be freed after it). */
    atomic_fetch_add_explicit(&done_jobs, 1, memory_order_release);
}

typedef struct {
    tg_pool *p;
    int w;
} slot_arg;

static void *worker_main(void *arg) {
    slot_arg *a = arg;
    tg_pool_attach(a->p, a->w);
    tg_task *t;
    for (;;) {
        tg_find r = tg_pool_find(a->p, a->w, NULL, TG_LOOK_STEAL, NULL, &t);
        if (r == TG_FIND_SHUTDOWN) break;
        CHECK(r == TG_FIND_RUN || r == TG_FIND_SKIP, "worker find got %d", r);
        run_job(a->p, a->w, r, t);
    }
    tg_pool_detach(a->p, a->w);
    return NULL;
}

static _Atomic int spare_threads_alive;

static void *spare_main(void *arg) {
    slot_arg *a = arg;
    tg_pool_attach(a->p, a->w);
    tg_pool_spare_begin(a->p, a->w);
    tg_task *t;
    for (;;) {
        tg_find r = tg_pool_find(a->p, a->w, NULL, TG_LOOK_STEAL, NULL, &t);
        if (r == TG_FIND_RUN || r == TG_FIND_SKIP) {
            run_job(a->p, a->w, r, t);
            continue;
        }
        CHECK(r == TG_FIND_LEAVE || r == TG_FIND_SHUTDOWN, "spare find got %d", r);
        if (!tg_pool_spare_wait(a->p, a->w, idle_ns)) break;
    }
    tg_pool_detach(a->p, a->w);
    atomic_fetch_sub(&spare_threads_alive, 1);
    free(a);
    return NULL;
}

/* The manager's thread: starts the spare threads it is asked for (detached). */
static void *manager_main(void *arg) {
    tg_pool *p = arg;
    for (int slot; (slot = tg_pool_manage(p)) >= 0;) {
        if (atomic_exchange(&refuse_next, 0)) { /* as if pthread_create had failed */
            tg_pool_spare_failed(p, slot);
            continue;
        }
        slot_arg *a = malloc(sizeof *a);
        CHECK(a, "malloc");
        *a = (slot_arg){p, slot};
        atomic_fetch_add(&spare_threads_alive, 1);
        pthread_t tid;
        CHECK(pthread_create(&tid, NULL, spare_main, a) == 0, "pthread_create");
        pthread_detach(tid);
    }
    return NULL;
}

typedef struct {
    tg_pool *p;
    int nw;
    pthread_t wt[8], mt;
    slot_arg wa[8];
    tg_run run;
} setup;

static int detection = 1; /* the manager looks for undeclared waits (tg_pool_set_detection) */

static void start(setup *s, int nw, int spares) {
    memset(s, 0, sizeof *s);
    s->p = tg_pool_new_spares(nw, spares);
    CHECK(s->p, "tg_pool_new_spares");
    tg_pool_set_detection(s->p, detection);
    s->nw = nw;
    for (int w = 0; w < nw; w++) {
        s->wa[w] = (slot_arg){s->p, w};
        pthread_create(&s->wt[w], NULL, worker_main, &s->wa[w]);
    }
    pthread_create(&s->mt, NULL, manager_main, s->p);
    s->run.pool = s->p;
    atomic_store(&done_jobs, 0);
}

static void stop(setup *s) {
    tg_pool_shutdown(s->p);
    for (int w = 0; w < s->nw; w++) pthread_join(s->wt[w], NULL);
    pthread_join(s->mt, NULL);
    for (int i = 0; i < 5000 && atomic_load(&spare_threads_alive) > 0; i++) sleep_ms(1);
    CHECK(atomic_load(&spare_threads_alive) == 0, "%d spare threads still alive after shutdown",
          atomic_load(&spare_threads_alive));
    tg_spare_stats st;
    tg_pool_spare_stats(s->p, &st);
    CHECK(st.threads == 0 && st.on_duty == 0, "after shutdown: %lld threads, %lld on duty",
          (long long)st.threads, (long long)st.on_duty);
    tg_task *t;
    CHECK(!tg_pool_drain(s->p, &t), "work left after shutdown");
    tg_pool_free(s->p);
}

static job *make_jobs(setup *s, int n, job_fn fn, int ms) {
    job *jobs = calloc((size_t)n, sizeof(job));
    CHECK(jobs, "calloc");
    for (int i = 0; i < n; i++) {
        jobs[i].fn = fn;
        jobs[i].ms = ms;
        CHECK(tg_task_claim(&jobs[i].t, &s->run) == 1, "claim");
    }
    return jobs;
}

static void inject(setup *s, job *jobs, int from, int to) {
    for (int i = from; i < to; i++)
        CHECK(tg_pool_release_external(s->p, &jobs[i].t) == TG_PUSH_QUEUED, "queue");
}

static void wait_done(int n, int seconds) {
    for (int i = 0; i < seconds * 1000 && atomic_load_explicit(&done_jobs, memory_order_acquire) < n; i++)
        sleep_ms(1);
    CHECK(atomic_load(&done_jobs) == n, "%d of %d jobs done", atomic_load(&done_jobs), n);
}

static void test_undeclared_waits_do_not_deadlock(void) {
    /* Both workers take a job that waits for the gate; only the third, queued behind them,
     * opens it. Without the manager this never finishes. */
    setup s;
    start(&s, 2, 4);
    atomic_store(&gate, 0);
    job *jobs = make_jobs(&s, 3, wait_gate, 0);
    jobs[2].fn = open_gate;
    inject(&s, jobs, 0, 2);
    for (int i = 0; i < 5000 && tg_pool_queued(s.p) > 0; i++) sleep_ms(1); /* both taken */
    sleep_ms(5);
    inject(&s, jobs, 2, 3);
    wait_done(3, 60);
    tg_spare_stats st;
    tg_pool_spare_stats(s.p, &st);
    CHECK(st.stalls > 0 && st.started >= 1, "found %lld stalls, started %lld spares",
          (long long)st.stalls, (long long)st.started);
    /* The waits found were counted on the waiting slots (what tg.map's ranges read): at
     * least one (one stalled slot is enough for the spare that opens the gate). */
    CHECK(tg_pool_waits(s.p, 0) + tg_pool_waits(s.p, 1) >= 1, "waits counted %d and %d",
          (int)tg_pool_waits(s.p, 0), (int)tg_pool_waits(s.p, 1));
    stop(&s);
    free(jobs);
    printf("ok undeclared waits: the manager's spare ran the releasing task (%lld spares started)\n",
           (long long)st.started);
}

static void test_declared_waits_bounded_and_retire(void) {
    /* 64 declared waits of 20 ms on 2 workers with 8 spares: run 8+2 at a time; never more
     * than 8 spare threads; they retire once idle. */
    enum { N = 64, LIMIT = 8 };
    setup s;
    start(&s, 2, LIMIT);
    job *jobs = make_jobs(&s, N, declared_wait, 20);
    inject(&s, jobs, 0, N);
    int64_t peak_alive = 0;
    for (int i = 0; i < 60000 && atomic_load(&done_jobs) < N; i++) {
        int alive = atomic_load(&spare_threads_alive);
        if (alive > peak_alive) peak_alive = alive;
        sleep_ms(1);
    }
    wait_done(N, 60);
    tg_spare_stats st;
    tg_pool_spare_stats(s.p, &st);
    CHECK(st.peak <= LIMIT && peak_alive <= LIMIT, "peak %lld spare threads (seen %lld), bound %d",
          (long long)st.peak, (long long)peak_alive, LIMIT);
    CHECK(st.started >= 1 && st.activations >= st.started, "started %lld, activations %lld",
          (long long)st.started, (long long)st.activations);
    int64_t counted = 0; /* every declared wait is counted on its slot */
    for (int w = 0; w < tg_pool_slots(s.p); w++) counted += tg_pool_waits(s.p, w);
    CHECK(counted >= N, "%lld waits counted for %d declared", (long long)counted, N);
    /* Retirement: off duty (after SPARE_RECHECK_NS at most) and idle for idle_ns. */
    for (int i = 0; i < 10000 && atomic_load(&spare_threads_alive) > 0; i++) sleep_ms(1);
    tg_pool_spare_stats(s.p, &st);
    CHECK(atomic_load(&spare_threads_alive) == 0 && st.threads == 0 && st.retired == st.started,
          "%d spare threads alive, %lld counted, %lld retired of %lld", atomic_load(&spare_threads_alive),
          (long long)st.threads, (long long)st.retired, (long long)st.started);
    /* Again: spares come back (new threads) and leave again. */
    atomic_store(&done_jobs, 0);
    job *more = make_jobs(&s, 16, declared_wait, 10);
    inject(&s, more, 0, 16);
    wait_done(16, 60);
    stop(&s);
    free(jobs);
    free(more);
    printf("ok declared waits: %d jobs, peak %lld spare threads of %d, all retired\n", N,
           (long long)st.peak, LIMIT);
}

static void test_refused_thread_degrades_to_queueing(void) {
    /* The first spare's thread is refused: the work waits for a worker (or a later spare),
     * nothing is lost, the failure is counted. */
    setup s;
    atomic_store(&refuse_next, 1);
    start(&s, 2, 2);
    job *jobs = make_jobs(&s, 8, declared_wait, 5);
    inject(&s, jobs, 0, 8);
    wait_done(8, 60);
    tg_spare_stats st;
    tg_pool_spare_stats(s.p, &st);
    CHECK(st.failed == 1, "failed %lld", (long long)st.failed);
    stop(&s);
    free(jobs);
    printf("ok a refused spare thread: the work queued and finished, failure counted\n");
}

static void test_shutdown_with_spares_on_duty(void) {
    /* Shutdown while spares are on duty and waiting: every thread ends. */
    setup s;
    start(&s, 2, 4);
    job *jobs = make_jobs(&s, 12, declared_wait, 30);
    inject(&s, jobs, 0, 12);
    sleep_ms(40);
    tg_pool_shutdown(s.p);
    for (int w = 0; w < s.nw; w++) pthread_join(s.wt[w], NULL);
    pthread_join(s.mt, NULL);
    for (int i = 0; i < 5000 && atomic_load(&spare_threads_alive) > 0; i++) sleep_ms(1);
    CHECK(atomic_load(&spare_threads_alive) == 0, "spares alive after shutdown");
    tg_task *t;
    while (tg_pool_drain(s.p, &t)) run_job(s.p, 0, TG_FIND_SKIP, t);
    CHECK(atomic_load(&done_jobs) == 12, "%d of 12 finished or drained", atomic_load(&done_jobs));
    tg_pool_free(s.p);
    free(jobs);
    printf("ok shutdown ends the manager and the spares\n");
}

static void noop(tg_pool *p, int w, job *j) {
    (void)p; (void)w; (void)j;
}

static void test_a_woken_spare_that_leaves_passes_the_wakeup_on(void) {
    /* Spares on duty park as sleepers; once the waits are over they leave duty at their next
     * look. A task injected then may wake a parked spare, which must not leave with the
     * wake-up: both workers sleep meanwhile, and nobody else would take the task. */
    setup s;
    start(&s, 2, 4);
    int rounds = sanitized() ? 30 : 150;
    unsigned seed = 12345;
    for (int r = 0; r < rounds; r++) {
        atomic_store(&done_jobs, 0);
        job *waits = make_jobs(&s, 6, declared_wait, 1);
        inject(&s, waits, 0, 6);
        wait_done(6, 60);
        seed = seed * 1103515245u + 12345u;
        struct timespec ts = {0, (long)(seed >> 8) % 25000000L}; /* 0-25 ms: before or after
                                                                  * the spares' re-check */
        nanosleep(&ts, NULL);
        job *one = make_jobs(&s, 1, noop, 0);
        inject(&s, one, 0, 1);
        wait_done(7, 30); /* a lost wake-up leaves it queued for ever: the alarm fails the run */
        free(waits);
        free(one);
    }
    stop(&s);
    printf("ok a spare woken for new work that leaves duty passes the wake-up on (%d rounds)\n", rounds);
}

static void test_idle_manager_sleeps(void) {
    /* With nothing running the manager sleeps without a timeout: no scans while idle. */
    setup s;
    start(&s, 2, 2);
    sleep_ms(100);
    tg_spare_stats a, b;
    tg_pool_spare_stats(s.p, &a);
    sleep_ms(200);
    tg_pool_spare_stats(s.p, &b);
    CHECK(b.stalls == a.stalls && b.started == 0, "idle pool: the manager acted");
    /* It wakes for work: an undeclared wait is found. */
    atomic_store(&gate, 0);
    job *jobs = make_jobs(&s, 3, wait_gate, 0);
    jobs[2].fn = open_gate;
    inject(&s, jobs, 0, 2);
    for (int i = 0; i < 5000 && tg_pool_queued(s.p) > 0; i++) sleep_ms(1);
    sleep_ms(5);
    inject(&s, jobs, 2, 3);
    wait_done(3, 60);
    stop(&s);
    free(jobs);
    printf("ok the idle manager sleeps, and wakes for work\n");
}

static _Atomic int gate2;   /* the gated declared waits wait for this */
static _Atomic int spinning, most_spinning, spins_started;

/* A declared wait until gate2 opens. */
static void gated_wait(tg_pool *p, int w, job *j) {
    (void)j;
    tg_pool_block_begin(p, w);
    /* Acquire: pairs with the test's release store. */
    while (!atomic_load_explicit(&gate2, memory_order_acquire)) sleep_ms(1);
    tg_pool_block_end(p, w);
}

/* Computes (spins on the clock) j->ms milliseconds, counting how many spin at once. */
static void spin_job(tg_pool *p, int w, job *j) {
    (void)p; (void)w;
    atomic_fetch_add(&spins_started, 1);
    int now = atomic_fetch_add(&spinning, 1) + 1;
    for (int m = atomic_load(&most_spinning); now > m && !atomic_compare_exchange_weak(&most_spinning, &m, now);) {}
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < (long)j->ms * 1000000L);
    atomic_fetch_sub(&spinning, 1);
}

static void test_workers_back_from_waits_yield_to_spares(int nw) {
    /* Every worker waits (declared) and spares on duty compute queued work. When the waits end,
     * more threads could compute than there are workers (the spares finish what they hold):
     * the workers give their cores to the spares instead and take them back as the spares
     * leave duty. At no point do more jobs compute at once than there are workers, and all of
     * them finish, with one worker too (nothing else would run the work while it yields). */
    enum { SPINS = 120 };
    setup s;
    /* Declared waits only: the manager's look for undeclared ones is a judgement of CPU time
     * that a loaded machine can fool, and while it finds any the workers do not yield (by
     * design: tg_spare_should_yield). Under ThreadSanitizer beside three CI runs it counted
     * stalls where no job waited undeclared, and the bound failed (1 run in 12). */
    detection = 0;
    start(&s, nw, 4);
    detection = 1;
    atomic_store(&gate2, 0);
    atomic_store(&spinning, 0);
    atomic_store(&most_spinning, 0);
    atomic_store(&spins_started, 0);
    job *waits = make_jobs(&s, nw, gated_wait, 0);
    job *spins = make_jobs(&s, SPINS, spin_job, 2);
    tg_spare_stats st;
    for (int i = 0; i < nw; i++) { /* one at a time: a worker takes each (spares come for waits) */
        inject(&s, waits, i, i + 1);
        for (int k = 0; k < 10000; k++) {
            tg_pool_spare_stats(s.p, &st);
            if (st.blocked == i + 1) break;
            sleep_ms(1);
        }
    }
    inject(&s, spins, 0, SPINS);
    for (int k = 0; k < 10000; k++) {
        tg_pool_spare_stats(s.p, &st);
        if (st.on_duty == nw && atomic_load(&spins_started) >= nw) break;
        sleep_ms(1);
    }
    atomic_store_explicit(&gate2, 1, memory_order_release); /* see gated_wait */
    wait_done(nw + SPINS, 120);
    tg_pool_spare_stats(s.p, &st);
    CHECK(atomic_load(&most_spinning) <= nw, "%d jobs computed at once on %d workers",
          atomic_load(&most_spinning), nw);
    int waited_on_workers = 0;
    for (int w = 0; w < nw; w++) waited_on_workers += tg_pool_waits(s.p, w) > 0;
    /* A worker that waited came back to spares on duty: it yielded (a spare takes a wait only
     * once its worker's wait began, so at least the first worker's wait was a worker's). */
    CHECK(waited_on_workers == 0 || st.yields >= 1, "%d workers waited, %lld yields",
          waited_on_workers, (long long)st.yields);
    stop(&s);
    free(waits);
    free(spins);
    printf("ok %d worker(s) back from waits yield to the spares on duty (at most %d computing, %lld yields)\n",
           nw, atomic_load(&most_spinning), (long long)st.yields);
}

/* A declared wait of j->ms ms (0: a moment), or a spin of 1 ms for j->ms < 0. */
static void wait_or_spin(tg_pool *p, int w, job *j) {
    if (j->ms >= 0) {
        tg_pool_block_begin(p, w);
        if (j->ms) sleep_ms(j->ms);
        tg_pool_block_end(p, w);
    } else {
        job spin = {.ms = 1};
        spin_job(p, w, &spin);
    }
}

static void test_waits_and_computing_in_bursts(int nw) {
    /* Bursts of declared waits (0-3 ms) and computing jobs, injected from outside: spares go
     * on duty and leave, workers yield and are released, in every order the timing gives.
     * Every job finishes: a lost release or wake-up leaves a job queued with its thread
     * asleep, and the wait_done bound or the alarm fails the run. */
    int rounds = sanitized() ? 40 : 200;
    setup s;
    start(&s, nw, 6);
    unsigned seed = 777u + (unsigned)nw;
    int total = 0;
    for (int r = 0; r < rounds; r++) {
        seed = seed * 1103515245u + 12345u;
        int n = 4 + (int)((seed >> 8) % 12);
        job *jobs = make_jobs(&s, n, wait_or_spin, 0);
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            jobs[i].ms = (seed >> 9) % 3 == 0 ? -1 : (int)((seed >> 12) % 4);
        }
        inject(&s, jobs, 0, n);
        total += n;
        wait_done(total, 60);
        free(jobs);
    }
    tg_spare_stats st;
    tg_pool_spare_stats(s.p, &st);
    stop(&s);
    printf("ok %d worker(s): %d rounds of waits and computing in bursts finish (%lld yields, %lld activations)\n",
           nw, rounds, (long long)st.yields, (long long)st.activations);
}

static void test_schedstat_reads_a_threads_times(void) {
    int64_t on_cpu = -1, queued = -1;
    if (!tg_schedstat_read("/proc/thread-self/schedstat", &on_cpu, &queued)) {
        printf("  schedstat: not available on this kernel (the manager uses the CPU clock)\n");
    } else {
        volatile uint64_t x = 0; /* spin a few ms: the CPU time grows */
        int64_t c0 = on_cpu, c1 = on_cpu, q1;
        for (int round = 0; round < 200 && c1 == c0; round++) {
            for (int i = 0; i < 1000000; i++) x += (uint64_t)i;
            CHECK(tg_schedstat_read("/proc/thread-self/schedstat", &c1, &q1), "read again");
        }
        CHECK(on_cpu >= 0 && queued >= 0 && c1 > c0, "cpu %lld -> %lld", (long long)c0, (long long)c1);
    }
    int64_t a = 7, b = 7;
    CHECK(!tg_schedstat_read("/proc/self/task/0/schedstat", &a, &b) && a == 7 && b == 7, "no file");
    printf("ok schedstat reads a thread's CPU and run-queue times, and a missing file as none\n");
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 240);
    test_undeclared_waits_do_not_deadlock();
    test_declared_waits_bounded_and_retire();
    test_refused_thread_degrades_to_queueing();
    test_shutdown_with_spares_on_duty();
    test_idle_manager_sleeps();
    test_schedstat_reads_a_threads_times();
    test_a_woken_spare_that_leaves_passes_the_wakeup_on();
    test_workers_back_from_waits_yield_to_spares(2);
    test_workers_back_from_waits_yield_to_spares(1);
    test_waits_and_computing_in_bursts(2);
    test_waits_and_computing_in_bursts(1);
    printf("spare: 10 passed, 0 failed\n");
    return 0;
}
