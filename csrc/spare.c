/* Spare workers and their manager (pool.h, "Waiting tasks and spare workers";
 * docs/design/sleep.md, "Spare workers"). A pool has n workers, one per core, and `limit`
 * spare slots. While tasks wait (a declared wait, or one the manager's scan finds: a task that
 * keeps its slot without progress and uses less than half a core), spares go on duty, up to
 * one per waiting task and at most `limit`: each is a full worker (its own deque and sleeper)
 * that runs the queued work meanwhile. A spare leaves duty at its outermost level once more
 * spares are on duty than tasks wait, and its thread ends after idle_ns off duty.
 *
 * One mutex (sp->mu) guards the slots' states, the statistics and the sleeps of the manager
 * and of the spares off duty; none of that is on a task's path. The counters read lock-free
 * (blocked, stalled, on, parked) say beside each access what they pair with. */
#define _GNU_SOURCE
#include "sparestate.h"
#include "pool.h"
#include "schedstat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A spare slot's state (sp->state, under sp->mu). */
enum {
    SPARE_FREE = 0, /* no thread */
    SPARE_IDLE = 1, /* a thread waits off duty (tg_pool_spare_wait) */
    SPARE_DUTY = 2  /* its thread runs the slot's dispatch loop, or is being started */
};

/* How the manager scans (ns): every SCAN_MIN_NS while something changes (a new candidate, a
 * change in the stalled count), backing off by doubling to SCAN_MAX_NS while nothing does;
 * with every slot idle and nothing blocked it sleeps until a worker leaves find_idle. */
#define SCAN_MIN_NS 2000000L
#define SCAN_MAX_NS 32000000L
/* After the OS refused a thread: no new spare thread for this long. */
#define REFUSED_BACKOFF_NS 1000000000L
/* A yielded worker looks again on its own after this long (tg_spare_yield): a bound on what a
 * missed release could cost, not the way it is released. */
#define YIELD_RECHECK_NS 10000000L

static void timespec_at(struct timespec *ts, int64_t ns) {
    ts->tv_sec = (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
}

int tg_spares_init(tg_pool *p, int nspares) {
    tg_spares *sp = &p->sp;
    memset(sp, 0, sizeof *sp);
    sp->limit = nspares;
    sp->detect = 1;
    atomic_init(&sp->blocked, 0);
    atomic_init(&sp->stalled, 0);
    atomic_init(&sp->surge, 0);
    atomic_init(&sp->on, 0);
    atomic_init(&sp->parked, 0);
    atomic_init(&sp->yielded, 0);
    pthread_mutex_init(&sp->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* tg_now_ns's clock: timed waits */
    pthread_cond_init(&sp->cv, &ca);
    pthread_cond_init(&sp->ycv, &ca);
    if (nspares > 0) {
        sp->swake = calloc((size_t)nspares, sizeof *sp->swake);
        sp->state = calloc((size_t)nspares, sizeof *sp->state);
        sp->last_run = calloc((size_t)p->nslots, sizeof *sp->last_run);
        sp->last_cpu = calloc((size_t)p->nslots, sizeof *sp->last_cpu);
        sp->streak = calloc((size_t)p->nslots, sizeof *sp->streak);
        if (!sp->swake || !sp->state || !sp->last_run || !sp->last_cpu || !sp->streak) {
            pthread_condattr_destroy(&ca);
            free(sp->swake); /* nothing initialised in it yet */
            sp->swake = NULL;
            sp->inited = 1; /* tg_spares_destroy frees the rest */
            return -1;
        }
        for (int i = 0; i < nspares; i++) sem_init(&sp->swake[i], 0, 0);
        for (int i = 0; i < p->nslots; i++) sp->last_cpu[i] = -1;
    }
    pthread_condattr_destroy(&ca);
    sp->inited = 1;
    return 0;
}

void tg_spares_destroy(tg_pool *p) {
    tg_spares *sp = &p->sp;
    if (!sp->inited) return; /* the pool's construction failed before tg_spares_init */
    for (int i = 0; sp->swake && i < sp->limit; i++) sem_destroy(&sp->swake[i]);
    free(sp->swake);
    free(sp->state);
    free(sp->last_run);
    free(sp->last_cpu);
    free(sp->streak);
    pthread_cond_destroy(&sp->cv);
    pthread_cond_destroy(&sp->ycv);
    pthread_mutex_destroy(&sp->mu);
    sp->swake = NULL;
    sp->state = NULL;
    sp->last_run = sp->last_cpu = NULL;
    sp->streak = NULL;
}

#define NEEDS_THREAD (-2) /* activate: a spare slot needs a thread the caller may not start */

static int is_shutdown(tg_pool *p) {
    /* seq_cst: pairs with the store in tg_pool_shutdown (which then takes sp->mu to wake us). */
    return atomic_load_explicit(&p->shutdown, memory_order_seq_cst);
}

/* Under mu: the manager looks now (woken from any sleep). */
static void kick_locked(tg_spares *sp) {
    sp->kicked = 1;
    /* Relaxed under mu: the manager re-reads it under mu before it waits (tg_pool_manage). */
    atomic_store_explicit(&sp->parked, 0, memory_order_relaxed);
    pthread_cond_signal(&sp->cv);
}

void tg_spares_wake_all(tg_pool *p) {
    tg_spares *sp = &p->sp;
    pthread_mutex_lock(&sp->mu);
    kick_locked(sp);
    pthread_cond_broadcast(&sp->ycv); /* yielded workers */
    for (int i = 0; i < sp->limit; i++) sem_post(&sp->swake[i]);
    pthread_mutex_unlock(&sp->mu);
}

void tg_spares_kick(tg_pool *p) {
    pthread_mutex_lock(&p->sp.mu);
    kick_locked(&p->sp);
    pthread_mutex_unlock(&p->sp.mu);
}

/* How many spares the pool wants on duty with `blocked` tasks in a declared wait: one per
 * waiting task, declared or found, and the surge while every thread in service waits (see
 * scan). */
static int wanted_with(tg_spares *sp, int blocked) {
    /* Relaxed: hints written by the manager; the decisions they feed are re-taken under mu or
     * at the next scan. */
    int s = atomic_load_explicit(&sp->stalled, memory_order_relaxed);
    int want = blocked + s + atomic_load_explicit(&sp->surge, memory_order_relaxed);
    return want > sp->limit ? sp->limit : want < 0 ? 0 : want;
}

static int wanted(tg_spares *sp) {
    /* Relaxed: a hint, as in wanted_with. */
    return wanted_with(sp, atomic_load_explicit(&sp->blocked, memory_order_relaxed));
}

/* Spares on duty beyond the workers that yielded their core to them (tg_spare_yield): what
 * serves the waiting tasks. Relaxed loads: under mu (their writers hold it), or a hint. */
static int serving(tg_spares *sp) {
    return atomic_load_explicit(&sp->on, memory_order_relaxed) -
           atomic_load_explicit(&sp->yielded, memory_order_relaxed);
}

/* ------------------------------------------------------------------------- declared waits */

static void serve(tg_pool *p);

void tg_pool_block_begin(tg_pool *p, int w) {
    tg_spares *sp = &p->sp;
    /* Relaxed: the owner's flag, read by the manager's scan (a hint: a declared wait is not
     * counted as an undeclared one). */
    atomic_store_explicit(&p->w[w].blocking, 1, memory_order_relaxed);
    /* Relaxed RMW: a count read by the slot's own tasks (tg_pool_waits), pairing with nothing;
     * the manager adds to it too. */
    atomic_fetch_add_explicit(&p->w[w].waits, 1, memory_order_relaxed);
    /* seq_cst RMW: read by wanted() (relaxed hints) and by the manager's re-check before it
     * sleeps without a timeout (seq_cst load in park_manager): either it sees this wait, or
     * the kick below finds it asleep. */
    int b = atomic_fetch_add_explicit(&sp->blocked, 1, memory_order_seq_cst) + 1;
    if (!sp->limit) return;
    /* seq_cst load of `yielded` after the RMW above: pairs with tg_spare_yield's seq_cst store
     * of `yielded` then load of `blocked` (Dekker): either that worker's re-check sees this
     * wait and does not yield, or this load sees it yielded and serve releases it. Relaxed
     * `on`: a hint; serving once too often costs a turn of the spares' lock. */
    int y = atomic_load_explicit(&sp->yielded, memory_order_seq_cst);
    if (atomic_load_explicit(&sp->on, memory_order_relaxed) - y < wanted_with(sp, b)) serve(p);
}

void tg_pool_block_end(tg_pool *p, int w) {
    /* seq_cst RMW: see block_begin; the spares see the lower count at their next idle point. */
    atomic_fetch_sub_explicit(&p->sp.blocked, 1, memory_order_seq_cst);
    atomic_store_explicit(&p->w[w].blocking, 0, memory_order_relaxed); /* see block_begin */
}

int32_t tg_pool_waits(tg_pool *p, int w) {
    /* Relaxed: see tg_pool_block_begin. */
    return atomic_load_explicit(&p->w[w].waits, memory_order_relaxed);
}

/* ------------------------------------------------------------------------- yielding workers */

/* Under mu: releases yielded workers while fewer spares serve than tasks wait (a spare left,
 * failed, or more tasks wait): the core a released worker takes back is one no spare uses.
 * Each release is a ticket (`released`) the next yielded worker to wake takes. */
static void release_yielded_locked(tg_spares *sp) {
    for (;;) {
        int y = atomic_load_explicit(&sp->yielded, memory_order_relaxed); /* under mu */
        if (y == 0 || serving(sp) >= wanted(sp)) return;
        /* seq_cst: see tg_spare_yield (a lower count only makes block_begin kick less often). */
        atomic_store_explicit(&sp->yielded, y - 1, memory_order_seq_cst);
        sp->released++;
        pthread_cond_signal(&sp->ycv);
    }
}

/* Whether spares on duty outnumber the waits they serve, all of them declared: an undeclared
 * wait is counted (stalled) only scans after it began, so while the manager finds any, a
 * spare that looks free may be waiting unseen, and a worker yielding to it would leave queued
 * work to nobody until the next scans. Relaxed `stalled`: a hint written by the manager. */
static int in_excess(tg_spares *sp, int want) {
    return atomic_load_explicit(&sp->stalled, memory_order_relaxed) == 0 && serving(sp) > want;
}

int tg_spare_should_yield(tg_pool *p, int w) {
    tg_spares *sp = &p->sp;
    /* Relaxed: the lock-free pre-check, a hint; tg_spare_yield decides under mu. */
    return w < p->n && sp->limit && atomic_load_explicit(&sp->on, memory_order_relaxed) > 0 &&
           in_excess(sp, wanted(sp));
}

int tg_spare_yield(tg_pool *p, int w) {
    tg_spares *sp = &p->sp;
    pthread_mutex_lock(&sp->mu);
    int y = atomic_load_explicit(&sp->yielded, memory_order_relaxed); /* under mu */
    if (is_shutdown(p) || !in_excess(sp, wanted(sp))) {
        pthread_mutex_unlock(&sp->mu);
        return 0;
    }
    /* seq_cst store, then the seq_cst load of `blocked` in the re-check: pairs with
     * tg_pool_block_begin's RMW of `blocked` then load of `yielded` (Dekker): either the
     * re-check sees a wait begun meanwhile (and the worker does not yield), or block_begin
     * sees this worker yielded and releases it (serve, under mu). */
    atomic_store_explicit(&sp->yielded, y + 1, memory_order_seq_cst);
    if (serving(sp) < wanted_with(sp, atomic_load_explicit(&sp->blocked, memory_order_seq_cst))) {
        atomic_store_explicit(&sp->yielded, y, memory_order_seq_cst); /* under mu: undone */
        pthread_mutex_unlock(&sp->mu);
        return 0;
    }
    sp->yields++;
    p->w[w].yielded_now = 1; /* under mu: the manager's scan passes it by (it has no core) */
    struct timespec until;
    timespec_at(&until, tg_now_ns() + YIELD_RECHECK_NS);
    int timed_out = 0;
    while (!sp->released && !is_shutdown(p) && !timed_out)
        timed_out = pthread_cond_timedwait(&sp->ycv, &sp->mu, &until) == ETIMEDOUT;
    if (sp->released) { /* a release's ticket: its giver took this worker off the count */
        sp->released--;
    } else { /* shutdown, or its own look after YIELD_RECHECK_NS: it takes itself off */
        int now_y = atomic_load_explicit(&sp->yielded, memory_order_relaxed); /* under mu */
        atomic_store_explicit(&sp->yielded, now_y - 1, memory_order_seq_cst); /* as above */
    }
    p->w[w].yielded_now = 0;
    pthread_mutex_unlock(&sp->mu);
    return 1;
}

/* ------------------------------------------------------------------------- the spares */

int tg_spare_leave(tg_pool *p, int w) {
    tg_spares *sp = &p->sp;
    /* Relaxed: the lock-free pre-check; the decision is re-taken under mu. */
    if (atomic_load_explicit(&sp->on, memory_order_relaxed) <= wanted(sp)) return 0;
    int left = 0;
    pthread_mutex_lock(&sp->mu);
    int on = atomic_load_explicit(&sp->on, memory_order_relaxed); /* under mu: its writers hold it */
    if (on > wanted(sp)) {
        atomic_store_explicit(&sp->on, on - 1, memory_order_relaxed); /* under mu */
        sp->state[w - p->n] = SPARE_IDLE;
        left = 1;
        release_yielded_locked(sp); /* its core goes back to a worker that yielded it */
    }
    pthread_mutex_unlock(&sp->mu);
    return left;
}

void tg_pool_spare_begin(tg_pool *p, int w) {
    (void)w;
    tg_sleep_enter_slot(&p->sl);
}

int tg_pool_spare_wait(tg_pool *p, int w, int64_t idle_ns) {
    tg_spares *sp = &p->sp;
    int k = w - p->n;
    pthread_mutex_lock(&sp->mu);
    if (sp->state[k] == SPARE_DUTY) { /* came from TG_FIND_SHUTDOWN: off duty first */
        int on = atomic_load_explicit(&sp->on, memory_order_relaxed); /* under mu */
        atomic_store_explicit(&sp->on, on - 1, memory_order_relaxed);
        sp->state[k] = SPARE_IDLE;
    }
    struct timespec until;
    timespec_at(&until, tg_now_ns() + idle_ns);
    int timed_out = 0;
    /* The state changes under mu; the wait is on the slot's semaphore, outside mu: a post
     * (activate, after or under mu; shutdown) made before the wait begins is counted, and a
     * stale one makes a turn of this loop. A condition variable handed mu back marked
     * contended: one more system call per wake-up (design/sleep.md, "On duty"). */
    while (sp->state[k] == SPARE_IDLE && !timed_out && !is_shutdown(p)) {
        pthread_mutex_unlock(&sp->mu);
        int r = sem_clockwait(&sp->swake[k], CLOCK_MONOTONIC, &until);
        timed_out = r != 0 && errno == ETIMEDOUT;
        pthread_mutex_lock(&sp->mu);
    }
    if (sp->state[k] == SPARE_DUTY) { /* the manager put it back on duty (never after shutdown) */
        pthread_mutex_unlock(&sp->mu);
        tg_sleep_enter_slot(&p->sl);
        return 1;
    }
    sp->state[k] = SPARE_FREE;
    sp->threads--;
    if (!is_shutdown(p)) sp->retired++;
    pthread_mutex_unlock(&sp->mu);
    return 0;
}

void tg_pool_set_detection(tg_pool *p, int on) { p->sp.detect = on; }

void tg_pool_spare_failed(tg_pool *p, int w) {
    tg_spares *sp = &p->sp;
    pthread_mutex_lock(&sp->mu);
    sp->state[w - p->n] = SPARE_FREE;
    int on = atomic_load_explicit(&sp->on, memory_order_relaxed); /* under mu */
    atomic_store_explicit(&sp->on, on - 1, memory_order_relaxed);
    sp->threads--;
    sp->failed++;
    sp->backoff_until = tg_now_ns() + REFUSED_BACKOFF_NS;
    release_yielded_locked(sp);
    pthread_mutex_unlock(&sp->mu);
}

void tg_pool_spare_stats(tg_pool *p, tg_spare_stats *out) {
    tg_spares *sp = &p->sp;
    pthread_mutex_lock(&sp->mu);
    out->limit = sp->limit;
    out->threads = sp->threads;
    out->peak = sp->peak;
    /* Relaxed (on: under mu; the others: snapshots). */
    out->on_duty = atomic_load_explicit(&sp->on, memory_order_relaxed);
    out->blocked = atomic_load_explicit(&sp->blocked, memory_order_relaxed);
    out->stalled = atomic_load_explicit(&sp->stalled, memory_order_relaxed);
    out->started = sp->started;
    out->retired = sp->retired;
    out->failed = sp->failed;
    out->stalls = sp->stalls;
    out->activations = sp->activations;
    out->yields = sp->yields;
    pthread_mutex_unlock(&sp->mu);
}

/* ------------------------------------------------------------------------- CPU clocks */

void tg_pool_attach(tg_pool *p, int w) {
    tg_worker *me = &p->w[w];
#ifdef SYS_gettid
    me->tid = (int64_t)syscall(SYS_gettid);
#endif
    if (pthread_getcpuclockid(pthread_self(), &me->cpu_clock) != 0) return;
    /* Release: pairs with the manager's acquire load (cpu_clock is written before). */
    atomic_store_explicit(&me->has_clock, 1, memory_order_release);
}

void tg_pool_detach(tg_pool *p, int w) {
    /* Release: see attach. A scan that read 1 just before may read the clock of a thread that
     * is ending: clock_gettime then fails (or, if the id was reused, reads another thread's:
     * one wrong sample for a heuristic). */
    atomic_store_explicit(&p->w[w].has_clock, 0, memory_order_release);
}

/* The time slot i's thread spent on a CPU or ready to run (waiting for a CPU the machine's other
 * threads hold), in ns; -1 if it has no clock registered. Linux's schedstat gives both (the
 * first two fields of /proc/self/task/TID/schedstat): a thread that waits for a CPU is not
 * waiting in a task, and on a loaded machine its CPU time alone would make it look so. Where
 * schedstat is missing, the thread's CPU clock alone. */
static int64_t busy_ns(tg_worker *wk) {
    /* Acquire: pairs with the release store in tg_pool_attach (tid, cpu_clock). */
    if (!atomic_load_explicit(&wk->has_clock, memory_order_acquire)) return -1;
    if (wk->tid > 0) {
        char path[64];
        int64_t on_cpu, queued;
        snprintf(path, sizeof path, "/proc/self/task/%lld/schedstat", (long long)wk->tid);
        if (tg_schedstat_read(path, &on_cpu, &queued)) return on_cpu + queued;
    }
    struct timespec ts;
    if (clock_gettime(wk->cpu_clock, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------------------- the manager */

/* Whether slot i has a thread that runs its dispatch loop (a worker, or a spare on duty). */
static int in_service(tg_pool *p, int i) {
    return i < p->n || p->sp.state[i - p->n] == SPARE_DUTY;
}

/* Stops of every thread (garbage collections: tg_pool_pause_note): odd while one runs. */
static _Atomic int64_t pause_epoch;

void tg_pool_pause_note(int starting) {
    (void)starting;
    /* Relaxed RMW: a count the managers compare between two of their scans (a hint). */
    atomic_fetch_add_explicit(&pause_epoch, 1, memory_order_relaxed);
}

/* One scan, under mu: which slots keep a task without progress (the same count of tasks
 * handed to them as at the previous scan, not idle, not in a declared wait), and of those,
 * which spent less than half of the wall time since the previous scan on a CPU or ready for
 * one (busy_ns, read for each slot in service neither idle nor in a declared wait: a slot is
 * judged at the first scan after it took its task): they wait. Found waiting at two scans in
 * a row, it is stalled (a short wait, a lock held for a moment, is not worth a thread); an
 * interval with a stop of every thread (a garbage collection: every thread waits, and a
 * spare would too) judges nothing. Publishes how many are stalled (sp->stalled). Returns 1
 * if something changed (a candidate, a streak, the count), so the next scan comes soon.
 *
 * One spare per stalled slot keeps as many threads computing as there are workers; but when
 * the spares' own tasks wait too (an Executor's I/O calls), each wave of found waits adds
 * only as many threads as were computing, and a wave takes about three scans: 200 calls
 * waiting 50 ms took 0.46 s on 2 workers that way. So while fewer threads compute than there
 * are workers and none is idle (a core is free and tasks are queued, or a worker would be
 * idle), the manager wants as many again (sp->surge): the waves double. A thread computes
 * unless found off the CPU for most of the interval (a waiting candidate, or one that ended a
 * wait and took the next task); one not judged (no reading yet, a GC) counts as computing.
 * Once as many compute as there are workers, the surge ends; spares beyond want leave. */
static int scan(tg_pool *p, int64_t now) {
    tg_spares *sp = &p->sp;
    int span = tg_sleep_span(&p->sl), stalled = 0, fresh = 0, idle = 0, busy = 0;
    int64_t dt = now - sp->last_scan;
    int64_t epoch = atomic_load_explicit(&pause_epoch, memory_order_relaxed); /* a hint */
    int paused = epoch != sp->last_epoch || (epoch & 1);
    sp->last_epoch = epoch;
    for (int i = 0; i < span; i++) {
        tg_worker *wk = &p->w[i];
        /* Relaxed: the owner's counter and flags, hints (see tg_worker.idle_now). */
        int64_t run = atomic_load_explicit(&wk->stats[TG_STAT_RUN], memory_order_relaxed);
        int64_t prev = sp->last_run[i];
        sp->last_run[i] = run;
        if (wk->yielded_now) { /* its core is a spare's: neither computing, idle nor waiting */
            sp->last_cpu[i] = -1;
            sp->streak[i] = 0;
            continue;
        }
        int serving = in_service(p, i);
        int idle_now = serving && atomic_load_explicit(&wk->idle_now, memory_order_relaxed);
        if (!serving || idle_now || atomic_load_explicit(&wk->blocking, memory_order_relaxed)) {
            idle |= idle_now; /* no task queued that it could take: no surge */
            sp->last_cpu[i] = -1;
            sp->streak[i] = 0;
            continue;
        }
        /* Its time on a CPU or ready for one since the last scan, where both readings exist:
         * less than half of the interval means it waited meanwhile. */
        int64_t cpu = busy_ns(wk), last = sp->last_cpu[i];
        sp->last_cpu[i] = cpu;
        int judged = last >= 0 && cpu >= 0 && dt > 0 && !paused;
        int waited = judged && (cpu - last) * 2 < dt;
        if (run != prev) {
            /* It took a task since the last scan: no candidate; computing, unless it waited
             * over the interval (a thread that ended one wait and began the next). */
            busy += !waited;
            sp->streak[i] = 0;
            continue;
        }
        if (!judged) {
            /* Judged next scan; until then it counts as before (a GC pause judges nothing) */
            int still = paused && sp->streak[i] >= 2;
            fresh |= last < 0 || cpu < 0;
            stalled += still;
            busy += !still;
        } else if (waited) {
            if (++sp->streak[i] <= 2) fresh = 1; /* a new candidate, or newly stalled */
            if (sp->streak[i] == 2) {
                /* Relaxed RMW: see tg_pool_block_begin. */
                atomic_fetch_add_explicit(&wk->waits, 1, memory_order_relaxed);
            }
            stalled += sp->streak[i] >= 2;
        } else {
            fresh |= sp->streak[i] != 0;
            sp->streak[i] = 0;
            busy++;
        }
    }
    sp->last_scan = now;
    int before = atomic_load_explicit(&sp->stalled, memory_order_relaxed); /* our own store */
    /* Relaxed: hints for wanted() (see there). */
    atomic_store_explicit(&sp->stalled, stalled, memory_order_relaxed);
    atomic_store_explicit(&sp->surge, idle || busy >= p->n ? 0 : stalled, memory_order_relaxed);
    if (stalled) sp->stalls++;
    return fresh || stalled != before;
}

/* Under mu: puts spares on duty while fewer are on duty than wanted. An idle spare thread is
 * woken (where `wake` is given, the first one is left in *wake for the caller to post after
 * mu); a free slot is returned for the caller to start its thread (counted on duty already),
 * or, where the caller may not start one (!may_start), NEEDS_THREAD is returned and the slot
 * left free; -1 when nothing (more) is to do. */
static int activate(tg_pool *p, int64_t now, int may_start, int *wake) {
    tg_spares *sp = &p->sp;
    release_yielded_locked(sp); /* a worker that yielded its core serves before a new spare */
    for (;;) {
        int on = atomic_load_explicit(&sp->on, memory_order_relaxed); /* under mu */
        int want = wanted(sp);
        /* Not only when work is queued: a waiting task may hold work that it hands out only
         * to an idle worker (tg.map's ranges split when one is idle). No worker is yielded
         * while fewer than `want` spares are on duty (release_yielded_locked). */
        if (on >= want || is_shutdown(p)) return -1;
        int idle = -1, free_slot = -1;
        for (int k = 0; k < sp->limit && idle < 0; k++) {
            if (sp->state[k] == SPARE_IDLE) idle = k;
            else if (sp->state[k] == SPARE_FREE && free_slot < 0) free_slot = k;
        }
        int k = idle >= 0 ? idle : free_slot;
        if (k < 0) return -1; /* every spare slot has a thread on duty */
        if (idle < 0 && !may_start) return NEEDS_THREAD;
        if (idle < 0 && now < sp->backoff_until) return -1; /* the OS refused one a moment ago */
        /* The slot is in the span before its thread is told (tg_sleep_enter_slot). */
        tg_sleep_widen(&p->sl, p->n + k + 1);
        sp->state[k] = SPARE_DUTY;
        atomic_store_explicit(&sp->on, on + 1, memory_order_relaxed); /* under mu */
        sp->activations++;
        if (idle >= 0) {
            if (wake && *wake < 0) *wake = k;
            else sem_post(&sp->swake[k]);
            continue;
        }
        sp->threads++;
        sp->started++;
        if (sp->threads > sp->peak) sp->peak = sp->threads;
        return p->n + k;
    }
}

/* A task declared its wait and fewer spares serve than tasks wait: the waiting thread puts
 * an idle spare thread on duty itself (one wake-up, where asking the manager took two), and
 * asks the manager only for a thread to start (the manager starts threads: engine.c). */
static void serve(tg_pool *p) {
    int wake = -1;
    pthread_mutex_lock(&p->sp.mu);
    if (activate(p, tg_now_ns(), 0, &wake) == NEEDS_THREAD) kick_locked(&p->sp);
    pthread_mutex_unlock(&p->sp.mu);
    /* After mu: the woken spare takes mu first thing (tg_pool_spare_wait); its slot is DUTY
     * already, so its thread cannot leave meanwhile. */
    if (wake >= 0) sem_post(&p->sp.swake[wake]);
}

/* Under mu: whether every slot in service is idle and no task declared a wait, after
 * announcing the manager's sleep: seq_cst store of `parked`, then seq_cst loads of each
 * idle_now and of `blocked`: pairs with note_busy's store then load (Dekker: either we see
 * the worker busy, or it sees us parked and kicks). A task declaring a wait is such a busy
 * worker; its RMW of `blocked` keeps the manager up while it waits, and serve kicks the
 * manager, under mu, for a thread to start. */
static int may_park(tg_pool *p) {
    tg_spares *sp = &p->sp;
    atomic_store_explicit(&sp->parked, 1, memory_order_seq_cst);
    int quiet = atomic_load_explicit(&sp->blocked, memory_order_seq_cst) == 0;
    for (int i = 0, span = tg_sleep_span(&p->sl); quiet && i < span; i++)
        if (in_service(p, i) && !atomic_load_explicit(&p->w[i].idle_now, memory_order_seq_cst)) quiet = 0;
    if (!quiet) atomic_store_explicit(&sp->parked, 0, memory_order_relaxed); /* under mu */
    return quiet;
}

int tg_pool_manage(tg_pool *p) {
    tg_spares *sp = &p->sp;
    int64_t period = SCAN_MIN_NS;
    pthread_mutex_lock(&sp->mu);
    for (;;) {
        if (is_shutdown(p)) break;
        int64_t now = tg_now_ns();
        int slot = activate(p, now, 1, NULL);
        if (slot >= 0) {
            pthread_mutex_unlock(&sp->mu);
            return slot;
        }
        sp->kicked = 0;
        if (may_park(p)) {
            /* Relaxed under mu: kick and wake_all clear it under mu, then signal. */
            while (atomic_load_explicit(&sp->parked, memory_order_relaxed) && !sp->kicked && !is_shutdown(p))
                pthread_cond_wait(&sp->cv, &sp->mu);
            atomic_store_explicit(&sp->parked, 0, memory_order_relaxed);
            period = SCAN_MIN_NS;
            sp->last_scan = tg_now_ns(); /* the first scan after a sleep judges nothing */
            for (int i = 0; i < p->nslots; i++) {
                sp->last_cpu[i] = -1;
                sp->streak[i] = 0;
            }
            continue;
        }
        struct timespec until;
        timespec_at(&until, sp->last_scan + period);
        while (!sp->kicked && !is_shutdown(p) && tg_now_ns() < sp->last_scan + period)
            pthread_cond_timedwait(&sp->cv, &sp->mu, &until);
        now = tg_now_ns();
        if (now >= sp->last_scan + period) {
            int changed = sp->detect ? scan(p, now) : 0;
            sp->last_scan = now;
            period = changed ? SCAN_MIN_NS : period * 2 > SCAN_MAX_NS ? SCAN_MAX_NS : period * 2;
        }
    }
    pthread_mutex_unlock(&sp->mu);
    return -1;
}
