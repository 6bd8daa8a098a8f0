/* The sleep protocol (sleep.h): counters, waking, two-phase parking. docs/design/sleep.md
 * argues why no wake-up is lost; each atomic below names the rule it serves. */
#define _GNU_SOURCE
#include "sleep.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLEEPER_ONE ((uint64_t)1)
#define SEARCH_ONE ((uint64_t)1 << 32)
#define SLEEPERS(v) ((uint32_t)((v) & 0xffffffffu))
#define SEARCHERS(v) ((uint32_t)((v) >> 32))

/* Values of tg_sleeper.sleeping. */
enum {
    AWAKE = 0,
    PARKED_IDLE = 1, /* a sleeper: wakeable by new work */
    PARKED_JOIN = 2, /* only by the task it waits for (or shutdown) */
    NAPPING = 3      /* a searcher asleep for a set time: only by its task (or shutdown) */
};

int64_t tg_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int tg_sleep_init(tg_sleep *sl, int n) {
    memset(sl, 0, sizeof *sl);
    sl->s = aligned_alloc(64, sizeof(tg_sleeper) * (size_t)n);
    if (!sl->s) return -1;
    memset(sl->s, 0, sizeof(tg_sleeper) * (size_t)n);
    sl->n = n;
    for (int i = 0; i < n; i++) {
        tg_sleeper *s = &sl->s[i];
        pthread_mutex_init(&s->mu, NULL);
        /* CLOCK_MONOTONIC: timed sleeps (polling joins, naps) must not jump with the wall
         * clock. */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cv, &ca);
        pthread_condattr_destroy(&ca);
        atomic_init(&s->sleeping, AWAKE);
        atomic_init(&s->waiting_for, NULL);
    }
    atomic_init(&sl->idle, 0);
    atomic_init(&sl->joiners, 0);
    atomic_init(&sl->last_sleeper, 0);
    atomic_init(&sl->span, n);
    return 0;
}

void tg_sleep_destroy(tg_sleep *sl) {
    for (int i = 0; sl->s && i < sl->n; i++) {
        pthread_mutex_destroy(&sl->s[i].mu);
        pthread_cond_destroy(&sl->s[i].cv);
    }
    free(sl->s);
    sl->s = NULL;
}

/* ------------------------------------------------------------------------- waking */

/* Wakes worker i if it sleeps (any mode, or only as a sleeper). 1 if this call woke it. */
static int wake_worker(tg_sleep *sl, int i, int only_idle) {
    tg_sleeper *s = &sl->s[i];
    int32_t cur = atomic_load_explicit(&s->sleeping, memory_order_seq_cst);
    if (cur == AWAKE || (only_idle && cur != PARKED_IDLE)) return 0;
    /* seq_cst CAS: pairs with the sleeper's seq_cst store of `sleeping` in prepare; exactly
     * one waker moves it to AWAKE. The sleeper re-checks `sleeping` under mu, and we signal
     * under mu, so the signal cannot fall between its check and its wait (rule 0). */
    if (!atomic_compare_exchange_strong_explicit(&s->sleeping, &cur, AWAKE, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* Wakes one sleeper (PARKED_IDLE), if any: the one that became a sleeper last, else the next
 * below it (sleep.md, "Who is woken"). */
static void wake_one(tg_sleep *sl) {
    /* Relaxed: a hint that only picks whom to try first (every candidate is tried). */
    int start = atomic_load_explicit(&sl->last_sleeper, memory_order_relaxed);
    for (int k = 0; k < sl->n; k++)
        if (wake_worker(sl, (start - k + sl->n) % sl->n, 1)) return;
}

void tg_sleep_notify(tg_sleep *sl) {
    /* seq_cst fence (F_p): pairs with the fence of prepare after a sleeper registers in
     * `idle`. Either we see the sleeper's registration here, or its re-check sees our push
     * (store-buffering with a fence on both sides; rule 1). */
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t v = atomic_load_explicit(&sl->idle, memory_order_relaxed);
    /* Nobody to wake, or a searching worker will find the work (or re-check before parking). */
    if (SLEEPERS(v) > 0 && SEARCHERS(v) == 0) wake_one(sl);
}

void tg_sleep_wake_joiners(tg_sleep *sl, const void *t) {
    /* seq_cst fence (F_f): pairs with the fence of prepare after a joiner registered in
     * waiting_for / joiners. Either we see the registration, or its re-check sees the final
     * state (rule 2). */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&sl->joiners, memory_order_relaxed) > 0)
        for (int i = 0, span = tg_sleep_span(sl); i < span; i++)
            /* Relaxed: ordered by the fences; a pointer comparison only. */
            if (atomic_load_explicit(&sl->s[i].waiting_for, memory_order_relaxed) == t)
                wake_worker(sl, i, 0);
}

void tg_sleep_wake_all(tg_sleep *sl) {
    for (int i = 0; i < sl->n; i++) {
        tg_sleeper *s = &sl->s[i];
        /* seq_cst: pairs with the sleeper's load of `sleeping` under mu. */
        atomic_store_explicit(&s->sleeping, AWAKE, memory_order_seq_cst);
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
}

/* ------------------------------------------------------------------------- searching */

void tg_sleep_search_begin(tg_sleep *sl) {
    /* seq_cst RMW: announces a searcher (read by tg_sleep_notify, rule 1). */
    atomic_fetch_add_explicit(&sl->idle, SEARCH_ONE, memory_order_seq_cst);
}

void tg_sleep_search_end(tg_sleep *sl) {
    /* seq_cst RMW on the idle word: pairs with notify's fence and prepare's RMW (rule 3). */
    uint64_t old = atomic_fetch_sub_explicit(&sl->idle, SEARCH_ONE, memory_order_seq_cst);
    if (SEARCHERS(old) == 1 && SLEEPERS(old) > 0) wake_one(sl);
}

uint32_t tg_sleep_searchers(tg_sleep *sl) {
    /* Relaxed: a hint for the searcher's own choice between napping and parking (either is
     * safe: sleep.md, "Held work"). */
    return SEARCHERS(atomic_load_explicit(&sl->idle, memory_order_relaxed));
}

int tg_sleep_someone_idle(tg_sleep *sl) {
    /* Relaxed: a hint, paired with nothing (a stale answer only makes a split a little early
     * or late). */
    uint64_t v = atomic_load_explicit(&sl->idle, memory_order_relaxed);
    return SLEEPERS(v) > 0 || SEARCHERS(v) > 0;
}

int tg_sleep_sleeping(tg_sleep *sl) {
    int n = 0;
    for (int i = 0; i < sl->n; i++)
        /* Relaxed: a snapshot of each worker's state, synchronising with nothing. */
        n += atomic_load_explicit(&sl->s[i].sleeping, memory_order_relaxed) == PARKED_IDLE;
    return n;
}

int tg_sleep_span(tg_sleep *sl) {
    /* Relaxed: read after a seq_cst fence (F_p, F_s or F_f); a spare's slot is covered by its
     * thread's seq_cst RMW in tg_sleep_enter_slot, sequenced before that thread's own fences
     * (sleep.md, "Spare workers"). */
    return atomic_load_explicit(&sl->span, memory_order_relaxed);
}

void tg_sleep_widen(tg_sleep *sl, int span) {
    int32_t cur = atomic_load_explicit(&sl->span, memory_order_relaxed);
    /* seq_cst CAS: pairs with the spare's RMW in tg_sleep_enter_slot (which reads this value
     * or a later one: the spare learns of its duty through the spares' mutex, after this). */
    while (cur < span && !atomic_compare_exchange_weak_explicit(&sl->span, &cur, span, memory_order_seq_cst,
                                                                memory_order_relaxed)) {}
}

void tg_sleep_enter_slot(tg_sleep *sl) {
    /* seq_cst RMW of the span (writes back what it reads): pairs with the fences F_p, F_s and
     * F_f of other workers, which read the span after them; this write is sequenced before the
     * spare's own fences, so whoever's fence follows them sees the spare's slot (sleep.md). */
    atomic_fetch_add_explicit(&sl->span, 0, memory_order_seq_cst);
}

/* ------------------------------------------------------------------------- parking */

int tg_sleep_prepare(tg_sleep *sl, int w, const void *awaited, tg_sleep_mode mode) {
    tg_sleeper *me = &sl->s[w];
    int32_t st = mode == TG_SLEEP_COUNTED ? PARKED_IDLE : mode == TG_SLEEP_JOIN ? PARKED_JOIN : NAPPING;
    /* seq_cst: pairs with the CAS in wake_worker. */
    atomic_store_explicit(&me->sleeping, st, memory_order_seq_cst);
    if (awaited) { /* seq_cst: pairs with wake_joiners' loads of joiners/waiting_for (after its
                    * fence). waiting_for is stored before joiners is raised. */
        atomic_store_explicit(&me->waiting_for, awaited, memory_order_seq_cst);
        atomic_fetch_add_explicit(&sl->joiners, 1, memory_order_seq_cst);
    }
    int last = 0;
    if (mode == TG_SLEEP_COUNTED) { /* seq_cst RMW: searching -> sleeping in one step; read by
                                     * notify. Whether we were the last searcher decides whether
                                     * our re-check must cover the queues (rule 1). */
        uint64_t old = atomic_fetch_add_explicit(&sl->idle, SLEEPER_ONE - SEARCH_ONE, memory_order_seq_cst);
        last = SEARCHERS(old) == 1;
        /* Relaxed: the hint read by wake_one, synchronising with nothing. */
        atomic_store_explicit(&sl->last_sleeper, w, memory_order_relaxed);
    }
    /* seq_cst fence (F_s): pairs with the fences in notify and wake_joiners (rules 1-2). */
    atomic_thread_fence(memory_order_seq_cst);
    if (sl->probe) sl->probe(sl->probe_ctx, w); /* tests: hold the window open */
    return last;
}

int tg_sleep_commit(tg_sleep *sl, int w, const void *awaited, tg_sleep_mode mode, long timeout_ns,
                    int cancel) {
    tg_sleeper *me = &sl->s[w];
    int slept = 0;
    if (!cancel) {
        struct timespec until;
        if (timeout_ns > 0) {
            clock_gettime(CLOCK_MONOTONIC, &until); /* the clock of me->cv (tg_sleep_init) */
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
        if (timed_out) /* nobody woke us: leave the sleeping state ourselves (a waker racing with
                        * us finds AWAKE, or wakes us for nothing) */
            atomic_store_explicit(&me->sleeping, AWAKE, memory_order_seq_cst); /* see wake_worker */
        slept = 1;
    } else {
        atomic_store_explicit(&me->sleeping, AWAKE, memory_order_seq_cst); /* see wake_worker */
    }
    if (awaited) { /* seq_cst: a finisher that still sees us only makes a spurious wake-up */
        atomic_store_explicit(&me->waiting_for, NULL, memory_order_seq_cst);
        atomic_fetch_sub_explicit(&sl->joiners, 1, memory_order_seq_cst);
    }
    if (mode == TG_SLEEP_COUNTED) /* seq_cst RMW: no longer a sleeper (the caller searches
                                   * again, announcing itself, before it parks again). */
        atomic_fetch_sub_explicit(&sl->idle, SLEEPER_ONE, memory_order_seq_cst);
    return slept;
}
