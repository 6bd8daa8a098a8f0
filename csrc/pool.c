/* Worker pool: deques, the injector (injector.c), find-work, parking, counters. See pool.h and
 * docs/design/sleep.md (the sleep protocol and why no wake-up is lost). */
#define _GNU_SOURCE
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deque.h"
#include "injector.h"

/* The idle word packs two counts: workers parked and counted as sleepers (low 32 bits) and
 * workers searching for work (high 32 bits). One word, so a worker moves from searching to
 * sleeping in a single atomic step. */
#define SLEEPER_ONE ((uint64_t)1)
#define SEARCH_ONE ((uint64_t)1 << 32)
#define SLEEPERS(v) ((uint32_t)((v) & 0xffffffffu))
#define SEARCHERS(v) ((uint32_t)((v) >> 32))

/* Values of tg_worker.sleeping. */
typedef enum {
    AWAKE = 0,
    PARKED_IDLE = 1, /* wakeable by new work */
    PARKED_JOIN = 2  /* only by the task it waits for (or shutdown) */
} sleep_state;

#define SEARCH_ROUNDS 48     /* spin/yield rounds of stealing before parking */
#define INJECT_BATCH_MAX 32  /* most tasks a worker takes from the injector at once */
#define STEAL_BATCH_MAX 32   /* most tasks a worker steals from another worker at once */

typedef struct {
    _Alignas(64) tg_deque *dq;
    pthread_mutex_t mu;       /* guards nothing but the wait on cv (see sleep.md) */
    pthread_cond_t cv;
    _Atomic int32_t sleeping; /* sleep_state; a waker CASes it to AWAKE */
    _Atomic(tg_task *) waiting_for; /* the task this worker is parked in a join for, or NULL;
                                     * compared by finishers, never dereferenced by them */
    uint64_t rng;             /* owner only */
    _Atomic int64_t stats[TG_NSTATS]; /* written by the owner only, read by anyone */
} tg_worker;

struct tg_pool {
    int n;
    tg_worker *w;
    _Atomic int32_t shutdown;
    tg_injector inj; /* work submitted from outside the workers (injector.h) */
    _Alignas(64) _Atomic uint64_t idle;
    _Atomic int32_t joiners; /* workers registered in waiting_for (parked or about to park) */
    _Atomic uint32_t wake_rr; /* where wake_one starts looking (spreads wake-ups) */
    tg_idle_fn idle_begin, idle_end; /* set before the workers start */
    void (*park_probe)(void *ctx, int w); /* tests only */
    void *probe_ctx;
};

static inline void stat_inc(tg_worker *me, tg_stat k) {
    /* Relaxed load + store: single writer (the owner); readers only need a recent value. */
    atomic_store_explicit(&me->stats[k], atomic_load_explicit(&me->stats[k], memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void no_hook(void *ctx) { (void)ctx; }

tg_pool *tg_pool_new(int nworkers) {
    if (nworkers < 1 || nworkers > TG_MAX_WORKERS) return NULL;
    tg_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = nworkers;
    p->w = aligned_alloc(64, sizeof(tg_worker) * (size_t)nworkers);
    /* Zero-filled at once: a worker whose deque was not allocated yet has dq == NULL, which
     * is where the failure path stops freeing. */
    if (p->w) memset(p->w, 0, sizeof(tg_worker) * (size_t)nworkers);
    if (!p->w || tg_injector_init(&p->inj, 64) != 0) goto fail;
    for (int i = 0; i < nworkers; i++) {
        tg_worker *w = &p->w[i];
        w->dq = tg_deque_new(64);
        if (!w->dq) goto fail;
        pthread_mutex_init(&w->mu, NULL);
        /* CLOCK_MONOTONIC: the timed parks of polling joins (park()) must not jump with the
         * wall clock. */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&w->cv, &ca);
        pthread_condattr_destroy(&ca);
        atomic_init(&w->sleeping, AWAKE);
        atomic_init(&w->waiting_for, NULL);
        w->rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
        for (int k = 0; k < TG_NSTATS; k++) atomic_init(&w->stats[k], 0);
    }
    atomic_init(&p->idle, 0);
    atomic_init(&p->joiners, 0);
    atomic_init(&p->shutdown, 0);
    atomic_init(&p->wake_rr, 0);
    p->idle_begin = p->idle_end = no_hook;
    return p;
fail: /* free what was made: the workers up to the first without a deque, the injector if made */
    for (p->n = 0; p->w && p->n < nworkers && p->w[p->n].dq; p->n++) {}
    tg_pool_free(p);
    return NULL;
}

void tg_pool_free(tg_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        tg_deque_free(p->w[i].dq);
        pthread_mutex_destroy(&p->w[i].mu);
        pthread_cond_destroy(&p->w[i].cv);
    }
    if (p->inj.buf) tg_injector_destroy(&p->inj);
    free(p->w);
    free(p);
}

int tg_pool_workers(const tg_pool *p) { return p->n; }

void tg_pool_set_idle_hooks(tg_pool *p, tg_idle_fn begin, tg_idle_fn end) {
    p->idle_begin = begin ? begin : no_hook;
    p->idle_end = end ? end : no_hook;
}

void tg_pool_set_park_probe(tg_pool *p, void (*probe)(void *ctx, int w), void *ctx) {
    p->probe_ctx = ctx;
    p->park_probe = probe;
}

void tg_pool_stats(tg_pool *p, int w, int64_t *out) {
    for (int k = 0; k < TG_NSTATS; k++)
        out[k] = atomic_load_explicit(&p->w[w].stats[k], memory_order_relaxed); /* see stat_inc */
}

int tg_pool_sleeping(tg_pool *p) {
    int n = 0;
    for (int i = 0; i < p->n; i++)
        /* Relaxed: a snapshot of each worker's state, synchronising with nothing. */
        n += atomic_load_explicit(&p->w[i].sleeping, memory_order_relaxed) == PARKED_IDLE;
    return n;
}

int tg_pool_is_shutdown(const tg_pool *p) {
    /* seq_cst: pairs with the store in tg_pool_shutdown. */
    return atomic_load_explicit(&((tg_pool *)p)->shutdown, memory_order_seq_cst);
}

/* ------------------------------------------------------------------------- waking */

/* Wakes worker i if it is parked in any mode (a finisher waking a joiner, shutdown). */
static int wake_worker(tg_pool *p, int i, int only_idle) {
    tg_worker *w = &p->w[i];
    int cur = atomic_load_explicit(&w->sleeping, memory_order_seq_cst);
    if (cur == AWAKE || (only_idle && cur != PARKED_IDLE)) return 0;
    /* seq_cst CAS: pairs with the sleeper's seq_cst store of `sleeping` in park(); exactly one
     * waker moves it to AWAKE. The sleeper re-checks `sleeping` under mu, and we signal under
     * mu, so the signal cannot fall between its check and its wait. */
    if (!atomic_compare_exchange_strong_explicit(&w->sleeping, &cur, AWAKE, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&w->mu);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 1;
}

/* Wakes one worker parked for new work (PARKED_IDLE), if any. */
static void wake_one(tg_pool *p) {
    /* Relaxed: only spreads wake-ups over the workers. */
    uint32_t start = atomic_fetch_add_explicit(&p->wake_rr, 1, memory_order_relaxed);
    for (int k = 0; k < p->n; k++)
        if (wake_worker(p, (int)((start + (uint32_t)k) % (uint32_t)p->n), 1)) return;
}

/* Called after making work visible (a push or an injection). */
static void notify_new_work(tg_pool *p) {
    /* seq_cst fence: pairs with the seq_cst fence in park() after the sleeper registers in
     * `idle`. Either we see the sleeper's registration here, or its re-check sees our push
     * (store-buffering with a fence on both sides; docs/design/sleep.md, rule 1). */
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t v = atomic_load_explicit(&p->idle, memory_order_relaxed);
    /* Nobody to wake, or a searching worker will find the work (or re-check before parking). */
    if (SLEEPERS(v) > 0 && SEARCHERS(v) == 0) wake_one(p);
}

void tg_pool_shutdown(tg_pool *p) {
    /* Closed first: an injection either came before (and is drained) or is refused. seq_cst:
     * pairs with the seq_cst fence in park() (the sleeper's re-check sees it), and the loads
     * of shutdown in the find loop. */
    tg_injector_close(&p->inj);
    atomic_store_explicit(&p->shutdown, 1, memory_order_seq_cst);
    for (int i = 0; i < p->n; i++) {
        tg_worker *w = &p->w[i];
        /* seq_cst: pairs with the sleeper's load of `sleeping` under mu. */
        atomic_store_explicit(&w->sleeping, AWAKE, memory_order_seq_cst);
        pthread_mutex_lock(&w->mu);
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

/* ------------------------------------------------------------------------- queues */

tg_push tg_pool_inject(tg_pool *p, tg_task *const *tasks, int64_t n) {
    if (n <= 0) return TG_PUSH_QUEUED;
    tg_inj_result r = tg_injector_push(&p->inj, tasks, n);
    if (r == TG_INJ_CLOSED) return TG_PUSH_REFUSED;
    if (r == TG_INJ_NOMEM) return TG_PUSH_NOMEM;
    notify_new_work(p);
    return TG_PUSH_QUEUED;
}

/* How many tasks worker w may take in a batch (1..most): what fits in its ring without growing
 * (keep_rest cannot fail; nobody else holds those tasks). Only w pushes there: it only grows. */
static int64_t room(tg_pool *p, int w, int64_t most) {
    int64_t r = tg_deque_capacity(p->w[w].dq) - tg_deque_size(p->w[w].dq);
    return r > most ? most : r < 1 ? 1 : r;
}

/* The rest of a batch (items[1..n), within room(): no growth, so no failure) onto w's own deque,
 * where others may steal it; the sleepers are told as after any push (sleep.md, rule 1). */
static void keep_rest(tg_pool *p, int w, const uint64_t *items, int64_t n) {
    for (int64_t i = 1; i < n; i++)
        if (tg_deque_push(p->w[w].dq, items[i]) != 0) abort();
    if (n > 1) notify_new_work(p);
}

/* Takes up to a batch from the injector for worker w (a share of what is queued, at most
 * INJECT_BATCH_MAX and what fits in w's ring without growing): the first into *out, the rest
 * onto w's own deque (where other workers may steal them). 1 if something was taken. */
static int take_injected(tg_pool *p, int w, uint64_t *out) {
    uint64_t items[INJECT_BATCH_MAX];
    int64_t took = tg_injector_take(&p->inj, p->n, room(p, w, INJECT_BATCH_MAX), items);
    if (took == 0) return 0;
    keep_rest(p, w, items, took);
    for (int64_t i = 0; i < took; i++) stat_inc(&p->w[w], TG_STAT_INJECTED);
    *out = items[0];
    return 1;
}

int64_t tg_pool_queued(tg_pool *p) {
    int64_t n = tg_injector_count(&p->inj); /* an estimate */
    for (int i = 0; i < p->n; i++) n += tg_deque_size(p->w[i].dq);
    return n;
}

int tg_pool_wants_work(tg_pool *p, int w) {
    if (p->n == 1 || tg_deque_size(p->w[w].dq) > 0) return 0;
    /* Relaxed: a hint, paired with nothing (the seq_cst RMWs of search(), park() and
     * stop_searching() write it; a stale answer only makes a split a little early or late).
     * tg_deque_size's loads are relaxed for the same reason. */
    uint64_t v = atomic_load_explicit(&p->idle, memory_order_relaxed);
    return SLEEPERS(v) > 0 || SEARCHERS(v) > 0;
}

/* Is there work that worker w could take (another deque, or the injector)? */
static int work_visible(tg_pool *p, int w) {
    /* Relaxed loads: ordered after the registration in `idle` by park()'s seq_cst fence. */
    if (tg_injector_count(&p->inj) > 0) return 1;
    for (int i = 0; i < p->n; i++)
        if (i != w && tg_deque_size(p->w[i].dq) > 0) return 1;
    return 0;
}

/* Pushes a ready task onto worker w's own deque and tells the sleepers. */
static tg_push push_local(tg_pool *p, int w, tg_task *t) {
    if (tg_deque_push(p->w[w].dq, (uint64_t)(uintptr_t)t) != 0) return TG_PUSH_NOMEM;
    notify_new_work(p);
    return TG_PUSH_QUEUED;
}

tg_push tg_pool_spawn(tg_pool *p, int w, tg_task *t, tg_run *run) {
    if (!tg_task_claim_child(t, run)) return TG_PUSH_TAKEN;
    stat_inc(&p->w[w], TG_STAT_SPAWNED);
    tg_task_release_hold(t); /* no dependencies: always ready */
    return push_local(p, w, t);
}

tg_push tg_pool_release(tg_pool *p, int w, tg_task *t) {
    stat_inc(&p->w[w], TG_STAT_SPAWNED);
    if (!tg_task_release_hold(t)) return TG_PUSH_WAITING;
    return push_local(p, w, t);
}

tg_push tg_pool_release_external(tg_pool *p, tg_task *t) {
    if (!tg_task_release_hold(t)) return TG_PUSH_WAITING;
    return tg_pool_inject(p, &t, 1);
}

/* ------------------------------------------------------------------------- finishing */

typedef struct {
    tg_pool *p;      /* the finisher's pool (may be NULL) */
    int w;           /* the finisher's index in p, or -1 */
    int pushed;      /* something went onto p's worker w's deque */
    tg_task *refused;
} ready_ctx;

static void on_ready(void *vctx, tg_task *s) {
    ready_ctx *c = vctx;
    tg_run *srun = tg_task_run(s);
    tg_pool *sp = srun ? srun->pool : NULL;
    if (sp && sp == c->p && c->w >= 0) {
        /* A released successor goes onto the finishing worker's own deque. Out of memory here
         * cannot be reported to anyone (the task is ready and nobody else holds it): fail
         * loudly rather than lose it. */
        if (tg_deque_push(c->p->w[c->w].dq, (uint64_t)(uintptr_t)s) != 0) abort();
        c->pushed = 1;
        return;
    }
    tg_push r = sp ? tg_pool_inject(sp, &s, 1) : TG_PUSH_REFUSED;
    if (r == TG_PUSH_NOMEM) abort(); /* as above */
    if (r == TG_PUSH_REFUSED) { /* the caller finishes it as cancelled */
        s->link = c->refused;
        c->refused = s;
    }
}

int tg_pool_finish(tg_pool *p, int w, tg_task *t, tg_state final, tg_task **refused) {
    ready_ctx c = {p, w, 0, NULL};
    tg_run *trun = tg_task_run(t);
    tg_pool *tp = trun ? trun->pool : NULL; /* read before the finish publishes t */
    int ended = tg_task_finish(t, final, on_ready, &c);
    if (c.pushed) notify_new_work(p);
    if (c.refused) { /* append to the caller's list (never NULL: see pool.h) */
        tg_task **tail = refused;
        while (*tail) tail = &(*tail)->link;
        *tail = c.refused;
    }
    if (!tp) return ended;
    /* seq_cst fence: pairs with the seq_cst fence in park() after a joiner registered in
     * waiting_for / joiners. Either we see the registration, or its re-check sees the final
     * state (docs/design/sleep.md, rule 2). */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&tp->joiners, memory_order_relaxed) > 0)
        for (int i = 0; i < tp->n; i++)
            /* Relaxed: ordered by the fences; a pointer comparison only. */
            if (atomic_load_explicit(&tp->w[i].waiting_for, memory_order_relaxed) == t)
                wake_worker(tp, i, 0);
    return ended;
}

/* ------------------------------------------------------------------------- finding work */

static tg_find hand_out(tg_pool *p, int w, uint64_t item, int stolen, tg_task **out) {
    tg_task *t = (tg_task *)(uintptr_t)item;
    t->worker = w;
    /* steal_from marked every task it took (a batch's too: whoever takes it from the
     * thief's deque, it changed workers); stolen is 1 for those. */
    t->stolen = (uint8_t)(stolen | t->stolen);
    /* A task of a cancelled run gets that reason stored (so node.cancel() racing with us
     * reports that it never runs), unless another run wants it (tg_task_want: a concurrent
     * compute that shares it must not see it cancelled by this run's cancel); any other is
     * marked started unless a reason not to run was stored first (tg_task_start's acq_rel
     * CAS pairs with the canceller's release). The run's flag may be seen late (see
     * tg_run_cancel): the task then runs. */
    if (tg_run_is_cancelled(tg_task_run(t)) && tg_task_run_skips(t)) {
        tg_task_cancel(t, TG_POISON_CANCEL); /* fails only if a reason was stored first */
        t->skip = 1;
    } else {
        t->skip = !tg_task_start(t);
    }
    /* Relaxed: informational; the final state is what other threads synchronise on. */
    atomic_store_explicit(&t->state, TG_RUNNING, memory_order_relaxed);
    stat_inc(&p->w[w], TG_STAT_RUN);
    *out = t;
    return t->skip ? TG_FIND_SKIP : TG_FIND_RUN;
}

static inline int finished(tg_task *t) { return tg_task_state(t) >= TG_DONE; }

static inline int is_shutdown(tg_pool *p) {
    /* seq_cst: pairs with the store in tg_pool_shutdown. */
    return atomic_load_explicit(&p->shutdown, memory_order_seq_cst);
}

/* Steals from victim v: one task, or with `batch` up to half of v's deque (steal-half: the
 * first into *out, the rest onto w's own deque, where others can steal them in turn). */
static tg_status steal_from(tg_pool *p, int w, int v, int batch, uint64_t *out) {
    tg_worker *me = &p->w[w];
    uint64_t items[STEAL_BATCH_MAX];
    int64_t n = 0, max = batch ? room(p, w, STEAL_BATCH_MAX) : 1;
    tg_status s = tg_deque_steal_batch(p->w[v].dq, max, items, &n);
    if (s != TG_OK) return s;
    for (int64_t i = 0; i < n; i++) {
        tg_task *t = (tg_task *)(uintptr_t)items[i];
        /* Counted once per task, when it first changes workers (a task of a batch may be
         * stolen again from our deque), so the counter equals the trace's stolen flags. Plain
         * accesses: the task is ours alone until the push below publishes it (the release
         * store of bottom; the next reader takes it with the pop's or a steal's acquire). */
        if (!t->stolen) {
            stat_inc(me, TG_STAT_STOLEN);
            t->stolen = 1;
        }
        /* Relaxed: a hint for joiners (leapfrogging), read relaxed in search(); not a
         * synchronisation point. Stored before the task is pushed again: once on our deque
         * another worker may run and finish it. */
        atomic_store_explicit(&t->thief, w + 1, memory_order_relaxed);
    }
    keep_rest(p, w, items, n);
    *out = items[0];
    return TG_OK;
}

/* One pass over the other workers' deques, starting at `first` (or at random). With `batch`,
 * a successful steal takes up to half of the victim's deque (see steal_from). */
static int steal_pass(tg_pool *p, int w, int first, int batch, uint64_t *out) {
    tg_worker *me = &p->w[w];
    int n = p->n;
    if (n == 1) return 0;
    int start = first;
    if (start < 0 || start == w) {
        uint64_t x = me->rng; /* xorshift64 */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        me->rng = x;
        start = (int)(x % (uint64_t)n);
    }
    for (int k = 0; k < n; k++) {
        int v = (start + k) % n;
        if (v == w) continue;
        for (int tries = 0; tries < 4; tries++) { /* retry a lost race a few times */
            stat_inc(me, TG_STAT_STEAL_ATTEMPTS);
            tg_status s = steal_from(p, w, v, batch, out);
            if (s == TG_OK) return 1;
            if (s == TG_EMPTY) break;
            /* TG_RETRY: lost a race with the owner or another thief; try this victim again */
        }
    }
    return 0;
}

/* Leaving the searching state because we found something to do. If we were the last
 * searcher and workers sleep, wake one so that someone keeps looking (docs/design/sleep.md,
 * rule 3). */
static void stop_searching(tg_pool *p) {
    /* seq_cst RMW on the idle word: pairs with notify_new_work's fence and park()'s RMW. */
    uint64_t old = atomic_fetch_sub_explicit(&p->idle, SEARCH_ONE, memory_order_seq_cst);
    if (SEARCHERS(old) == 1 && SLEEPERS(old) > 0) wake_one(p);
}

/* Parks worker w until woken: by new work (counted = 1, the caller is counted as searching)
 * or by `awaited` finishing (counted = 0: a join that may not take other work). With
 * timeout_ns > 0 it also wakes by itself after that long (a polling join: see TG_LOOK_POLL). */
static void park(tg_pool *p, int w, tg_task *awaited, int counted, long timeout_ns) {
    tg_worker *me = &p->w[w];
    /* seq_cst: pairs with the CAS in wake_worker. */
    atomic_store_explicit(&me->sleeping, counted ? PARKED_IDLE : PARKED_JOIN, memory_order_seq_cst);
    if (awaited) { /* seq_cst: pairs with tg_pool_finish's loads of joiners/waiting_for (after
                    * its fence). waiting_for is stored before joiners is raised. */
        atomic_store_explicit(&me->waiting_for, awaited, memory_order_seq_cst);
        atomic_fetch_add_explicit(&p->joiners, 1, memory_order_seq_cst);
    }
    if (counted) /* seq_cst RMW: searching -> sleeping in one step; read by notify_new_work. */
        atomic_fetch_add_explicit(&p->idle, SLEEPER_ONE - SEARCH_ONE, memory_order_seq_cst);
    /* seq_cst fence: pairs with the fences in notify_new_work and tg_pool_finish (rules 1-2). */
    atomic_thread_fence(memory_order_seq_cst);
    if (p->park_probe) p->park_probe(p->probe_ctx, w); /* tests: hold the window open */
    int abort_sleep = is_shutdown(p) || (awaited && finished(awaited)) ||
                      (counted && work_visible(p, w));
    if (!abort_sleep) {
        struct timespec until;
        if (timeout_ns > 0) {
            clock_gettime(CLOCK_MONOTONIC, &until); /* the clock of me->cv (tg_pool_new) */
            until.tv_nsec += timeout_ns;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
        }
        int timed_out = 0;
        pthread_mutex_lock(&me->mu);
        /* seq_cst load under mu: pairs with the waker's CAS (made before it takes mu). */
        while (!timed_out && atomic_load_explicit(&me->sleeping, memory_order_seq_cst) != AWAKE) {
            if (timeout_ns > 0)
                timed_out = pthread_cond_timedwait(&me->cv, &me->mu, &until) == ETIMEDOUT;
            else
                pthread_cond_wait(&me->cv, &me->mu);
        }
        pthread_mutex_unlock(&me->mu);
        if (timed_out) /* nobody woke us: leave the parked state ourselves (a waker racing with
                        * us finds AWAKE, or wakes us for nothing) */
            atomic_store_explicit(&me->sleeping, AWAKE, memory_order_seq_cst); /* see wake_worker */
        stat_inc(me, TG_STAT_PARKS);
    } else {
        atomic_store_explicit(&me->sleeping, AWAKE, memory_order_seq_cst); /* see wake_worker */
    }
    if (awaited) { /* seq_cst: a finisher that still sees us only makes a spurious wake-up */
        atomic_store_explicit(&me->waiting_for, NULL, memory_order_seq_cst);
        atomic_fetch_sub_explicit(&p->joiners, 1, memory_order_seq_cst);
    }
    if (counted) /* seq_cst RMW: no longer a sleeper (we search again from the caller). */
        atomic_fetch_sub_explicit(&p->idle, SLEEPER_ONE, memory_order_seq_cst);
}

/* What a search found. */
typedef enum {
    SEARCH_NOTHING = 0,  /* still counted as searching: the caller parks */
    SEARCH_INJECTED = 1, /* *out taken from the injector (no longer searching) */
    SEARCH_STOLEN = 2,   /* *out stolen from another worker (no longer searching) */
    SEARCH_STOP = 3      /* `awaited` finished or the pool shuts down (no longer searching) */
} search_result;

/* Searches the injector and other deques for a while. */
static search_result search(tg_pool *p, int w, tg_task *awaited, uint64_t *out) {
    /* seq_cst RMW: announces a searcher (see notify_new_work). */
    atomic_fetch_add_explicit(&p->idle, SEARCH_ONE, memory_order_seq_cst);
    for (int round = 0; round < SEARCH_ROUNDS; round++) {
        if ((awaited && finished(awaited)) || is_shutdown(p)) {
            stop_searching(p);
            return SEARCH_STOP;
        }
        if (take_injected(p, w, out)) {
            stop_searching(p);
            return SEARCH_INJECTED;
        }
        /* Relaxed: the thief hint (see steal_pass). */
        int first = awaited ? atomic_load_explicit(&awaited->thief, memory_order_relaxed) - 1 : -1;
        /* Steal-half only outside a join: a joiner takes one task at a time, so that what
         * it nests under its join stays one stolen task (and its descendants), as before. */
        if (steal_pass(p, w, first, awaited == NULL, out)) {
            stop_searching(p);
            return SEARCH_STOLEN;
        }
        if (round < 16)
            for (int i = 0; i < (4 << (round / 4)); i++) cpu_relax();
        else
            sched_yield();
    }
    return SEARCH_NOTHING;
}

/* The next, longer sleep of a polling park (50 us doubling up to TG_POLL_MAX_NS). */
static long next_poll(long ns) { return ns * 2 < TG_POLL_MAX_NS ? ns * 2 : TG_POLL_MAX_NS; }

/* The idle part of tg_pool_find: worker w's own deque is empty and stays so (only w pushes
 * onto it, and w is here), so only the other queues and the awaited task can change. */
static tg_find find_idle(tg_pool *p, int w, tg_task *awaited, int how, tg_task **out) {
    uint64_t item;
    long poll_ns = 50000;
    for (;;) {
        if (awaited && finished(awaited)) return TG_FIND_JOINED;
        if (is_shutdown(p)) return TG_FIND_SHUTDOWN;
        if (!(how & TG_LOOK_STEAL)) {
            /* Work from outside has no owner that would run it: take it, even this deep (a
             * no-steal join whose awaited task sits in the injector would otherwise wait
             * forever when every other worker is busy or absent). Injections wake only idle
             * workers, so this park polls. */
            if (take_injected(p, w, &item)) return hand_out(p, w, item, 0, out);
            park(p, w, awaited, 0, poll_ns);
            poll_ns = next_poll(poll_ns);
            continue;
        }
        switch (search(p, w, awaited, &item)) {
        case SEARCH_INJECTED: return hand_out(p, w, item, 0, out);
        case SEARCH_STOLEN: return hand_out(p, w, item, 1, out);
        case SEARCH_STOP: continue; /* re-evaluated at the top of the loop */
        case SEARCH_NOTHING:
            park(p, w, awaited, 1, how & TG_LOOK_POLL ? poll_ns : 0);
            poll_ns = next_poll(poll_ns);
            continue;
        }
    }
}

tg_find tg_pool_find(tg_pool *p, int w, tg_task *awaited, int how, void *idle_ctx, tg_task **out) {
    uint64_t item;
    if (awaited && finished(awaited)) return TG_FIND_JOINED;
    if (tg_deque_pop(p->w[w].dq, &item) == TG_OK) return hand_out(p, w, item, 0, out);
    if (is_shutdown(p)) return TG_FIND_SHUTDOWN;
    p->idle_begin(idle_ctx);
    tg_find r = find_idle(p, w, awaited, how, out);
    p->idle_end(idle_ctx);
    return r;
}

int tg_pool_drain(tg_pool *p, tg_task **out) {
    uint64_t item;
    for (int i = 0; i < p->n; i++) {
        if (tg_deque_pop(p->w[i].dq, &item) == TG_OK) { /* single-threaded: pop any deque */
            hand_out(p, 0, item, 0, out);
            (*out)->skip = 1;
            return 1;
        }
    }
    if (tg_injector_take(&p->inj, 1, 1, &item) == 0) return 0;
    hand_out(p, 0, item, 0, out);
    (*out)->skip = 1;
    return 1;
}
