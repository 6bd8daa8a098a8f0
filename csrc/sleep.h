/* The sleep protocol of the worker pool (docs/design/sleep.md): who is searching for work, who
 * sleeps, how a worker parks without losing a wake-up, and who wakes whom. The pool (pool.c)
 * owns one tg_sleep and tells it what happens: work made visible (tg_sleep_notify), a search
 * begun or ended, a task finished (tg_sleep_wake_joiners); parking is two-phase, as in
 * Taskflow's notifier: tg_sleep_prepare registers the worker and fences, the pool re-checks
 * its queues, tg_sleep_commit sleeps or cancels. Plain C11 and POSIX threads; no Python.h. */
#ifndef TG_SLEEP_H
#define TG_SLEEP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* One worker's side: the state a waker changes, and what it sleeps on. */
typedef struct {
    _Alignas(64) pthread_mutex_t mu; /* guards nothing but the wait on cv (see sleep.md) */
    pthread_cond_t cv;
    _Atomic int32_t sleeping;        /* tg_sleep_state; a waker CASes it to AWAKE */
    _Atomic(const void *) waiting_for; /* the task this worker sleeps in a join for, or NULL;
                                        * compared by finishers, never dereferenced */
} tg_sleeper;

typedef struct {
    int n;
    tg_sleeper *s;                   /* n of them */
    /* Two counts in one word: workers parked as sleepers (low 32 bits) and workers searching
     * (high 32 bits), so that "stop searching and become a sleeper" is one atomic step. */
    _Alignas(64) _Atomic uint64_t idle;
    _Atomic int32_t joiners;         /* workers registered in waiting_for */
    _Atomic int32_t last_sleeper;    /* the worker that last became a sleeper: woken first */
    /* The slots that may be in use (0..span-1): the workers, and every spare slot that was
     * ever on duty (sleep.md, "Spare workers"); only grows. Finishers look for joiners there;
     * wake_one looks at all n. */
    _Atomic int32_t span;
    void (*probe)(void *ctx, int w); /* tests only: see tg_pool_set_park_probe */
    void *probe_ctx;
} tg_sleep;

/* How a worker sleeps. */
typedef enum {
    TG_SLEEP_COUNTED = 0, /* a searcher becomes a sleeper: woken by new work (or its task) */
    TG_SLEEP_JOIN = 1,    /* not counted: woken only by the task it awaits, shutdown, timeout */
    TG_SLEEP_NAP = 2      /* a searcher that stays one, for a set time (held work, sleep.md) */
} tg_sleep_mode;

/* 0, or -1 when out of memory. */
int tg_sleep_init(tg_sleep *sl, int n);
void tg_sleep_destroy(tg_sleep *sl);

/* After work was made visible (a push, a batch of pushes, an injection): wakes a sleeper if
 * there are sleepers and nobody searches (rule 1). A fence and a load when someone searches. */
void tg_sleep_notify(tg_sleep *sl);
/* A task finished: wakes the workers registered as waiting for it (rule 2). `t` is compared,
 * never dereferenced. Call after the task's final state is stored. */
void tg_sleep_wake_joiners(tg_sleep *sl, const void *t);
/* Worker w wakes from any sleep, and every later prepare/commit of the pool returns at once;
 * for shutdown, after the pool's shutdown flag is stored (seq_cst). */
void tg_sleep_wake_all(tg_sleep *sl);

/* The calling worker starts searching / stops searching because it found work (rule 3: the
 * last searcher leaving while sleepers exist wakes one). */
void tg_sleep_search_begin(tg_sleep *sl);
void tg_sleep_search_end(tg_sleep *sl);
/* How many workers search (relaxed: a hint). */
uint32_t tg_sleep_searchers(tg_sleep *sl);
/* Whether some worker is parked or searching (relaxed: a hint for adaptive splitting). */
int tg_sleep_someone_idle(tg_sleep *sl);
/* How many workers sleep as sleepers (PARKED_IDLE) right now (a snapshot). */
int tg_sleep_sleeping(tg_sleep *sl);
/* The slots in use (relaxed: ordered by the caller's fences, see sleep.md "Spare workers"). */
int tg_sleep_span(tg_sleep *sl);
/* Raises the span to at least `span` (before a spare slot's thread goes on duty). */
void tg_sleep_widen(tg_sleep *sl, int span);
/* A spare slot's thread, going on duty (after the widen that covers it): a seq_cst RMW of the
 * span, sequenced before everything it then does in the protocol (sleep.md). */
void tg_sleep_enter_slot(tg_sleep *sl);

/* Parking, phase 1: worker w registers (as a sleeper for TG_SLEEP_COUNTED, leaving the
 * searchers; as waiting for `awaited` if not NULL), then a seq_cst fence (F_s in sleep.md).
 * Returns 1 if w was the last searcher (TG_SLEEP_COUNTED only; else 0): only then must the
 * caller's re-check include the queues. */
int tg_sleep_prepare(tg_sleep *sl, int w, const void *awaited, tg_sleep_mode mode);
/* Phase 2: unless `cancel`, sleeps until woken (or timeout_ns passes, if > 0); then undoes
 * the registration of prepare (a sleeper is counted as neither sleeping nor searching: the
 * caller searches again, tg_sleep_search_begin, before it can park again). Returns 1 if it
 * slept. */
int tg_sleep_commit(tg_sleep *sl, int w, const void *awaited, tg_sleep_mode mode, long timeout_ns,
                    int cancel);

/* Monotonic nanoseconds (the clock of the timed sleeps). */
int64_t tg_now_ns(void);

/* A spin-wait step: tells the core this thread is spinning. */
static inline void tg_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
