/* Worker pool: deques, the injector (injector.c), finding work, counters. Whom a searcher steals
 * from and what it takes is the thief's policy (thief.c); parking and waking are the sleep
 * protocol's (sleep.c). See pool.h, docs/design/sleep.md and docs/design/scheduler.md. */
#define _GNU_SOURCE
#include "pool.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "poolstate.h"
#include "sparestate.h"
#include "thief.h"

#define INJECT_BATCH_MAX 32  /* most tasks a worker takes from the injector at once */
/* How long a join whose awaited task runs on another thread leaves work from outside to the
 * others (join_defers, below). */
#define JOIN_DEFER_NS 50000000L

/* How a searcher that finds no work anywhere waits (docs/design/sleep.md). Times in ns. */
#define DRY_LOOKS 12         /* looks that find no work anywhere before a searcher parks */
#define DRY_WAIT_NS 250      /* the wait after the first such look; it doubles */
#define DRY_WAIT_MAX_NS 16000 /* up to this (about 110 us in all before parking) */

static void no_hook(void *ctx) { (void)ctx; }

tg_pool *tg_pool_new(int nworkers) { return tg_pool_new_spares(nworkers, 0); }

tg_pool *tg_pool_new_spares(int nworkers, int nspares) {
    if (nworkers < 1 || nworkers > TG_MAX_WORKERS || nspares < 0 || nspares > TG_MAX_SPARES) return NULL;
    tg_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    int slots = nworkers + nspares;
    p->n = nworkers;
    p->nslots = slots;
    p->w = aligned_alloc(64, sizeof(tg_worker) * (size_t)slots);
    /* Zero-filled at once: a worker whose deque was not allocated yet has dq == NULL, which
     * is where the failure path stops freeing. */
    if (p->w) memset(p->w, 0, sizeof(tg_worker) * (size_t)slots);
    if (!p->w || tg_injector_init(&p->inj, 64) != 0) goto fail;
    if (tg_sleep_init(&p->sl, slots) != 0) goto fail;
    /* Only the workers are in use until a spare goes on duty (spare.c). Single-threaded here. */
    atomic_store_explicit(&p->sl.span, nworkers, memory_order_relaxed);
    for (int i = 0; i < slots; i++) {
        tg_worker *w = &p->w[i];
        w->dq = tg_deque_new(64);
        if (!w->dq) goto fail;
        w->rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
        for (int k = 0; k < TG_NSTATS; k++) atomic_init(&w->stats[k], 0);
        w->stole_from = w->seen_v = -1;
        atomic_init(&w->gate_pushes, 0);
        atomic_init(&w->gate_k, 0);
        atomic_init(&w->gate_dries, 0);
        atomic_init(&w->dries, 0);
        atomic_init(&w->idle_now, 1);
        atomic_init(&w->blocking, 0);
        atomic_init(&w->has_clock, 0);
        atomic_init(&w->waits, 0);
    }
    if (tg_spares_init(p, nspares) != 0) goto fail;
    atomic_init(&p->shutdown, 0);
    p->idle_begin = p->idle_end = no_hook;
    p->join_defer_ns = JOIN_DEFER_NS;
    return p;
fail: /* free what was made: the workers up to the first without a deque, the injector and
       * the sleepers if made */
    for (p->nslots = 0; p->w && p->nslots < slots && p->w[p->nslots].dq; p->nslots++) {}
    tg_pool_free(p);
    return NULL;
}

void tg_pool_free(tg_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->nslots; i++) tg_deque_free(p->w[i].dq);
    tg_spares_destroy(p);
    if (p->inj.buf) tg_injector_destroy(&p->inj);
    tg_sleep_destroy(&p->sl);
    free(p->w);
    free(p);
}

int tg_pool_workers(const tg_pool *p) { return p->n; }

int tg_pool_slots(const tg_pool *p) { return p->nslots; }

void tg_pool_set_idle_hooks(tg_pool *p, tg_idle_fn begin, tg_idle_fn end) {
    p->idle_begin = begin ? begin : no_hook;
    p->idle_end = end ? end : no_hook;
}

void tg_pool_set_join_defer(tg_pool *p, int64_t ns) { p->join_defer_ns = ns; }

void tg_pool_set_park_probe(tg_pool *p, void (*probe)(void *ctx, int w), void *ctx) {
    p->sl.probe_ctx = ctx;
    p->sl.probe = probe;
}

void tg_pool_stats(tg_pool *p, int w, int64_t *out) {
    for (int k = 0; k < TG_NSTATS; k++)
        out[k] = atomic_load_explicit(&p->w[w].stats[k], memory_order_relaxed); /* see stat_inc */
}

uint64_t tg_pool_progress(tg_pool *p, int w) {
    int64_t top, bottom, pushes;
    tg_deque_look(p->w[w].dq, &top, &bottom, &pushes);
    /* Relaxed: w's own counter (see stat_inc); top as tg_deque_look reads it, a hint. */
    return (uint64_t)atomic_load_explicit(&p->w[w].stats[TG_STAT_RUN], memory_order_relaxed) + (uint64_t)top;
}

int tg_pool_sleeping(tg_pool *p) { return tg_sleep_sleeping(&p->sl); }

int tg_pool_is_shutdown(const tg_pool *p) {
    /* seq_cst: pairs with the store in tg_pool_shutdown. */
    return atomic_load_explicit(&((tg_pool *)p)->shutdown, memory_order_seq_cst);
}

void tg_pool_shutdown(tg_pool *p) {
    /* Closed first: an injection either came before (and is drained) or is refused. seq_cst:
     * pairs with the seq_cst fence of tg_sleep_prepare (the sleeper's re-check sees it), and
     * the loads of shutdown in the find loop. */
    tg_injector_close(&p->inj);
    atomic_store_explicit(&p->shutdown, 1, memory_order_seq_cst);
    tg_sleep_wake_all(&p->sl);
    tg_spares_wake_all(p); /* the manager and the spares off duty */
}

/* ------------------------------------------------------------------------- queues */

tg_push tg_pool_inject(tg_pool *p, tg_task *const *tasks, int64_t n) {
    if (n <= 0) return TG_PUSH_QUEUED;
    tg_inj_result r = tg_injector_push(&p->inj, tasks, n);
    if (r == TG_INJ_CLOSED) return TG_PUSH_REFUSED;
    if (r == TG_INJ_NOMEM) return TG_PUSH_NOMEM;
    tg_sleep_notify(&p->sl);
    return TG_PUSH_QUEUED;
}

/* Takes up to a batch from the injector for worker w (a share of what is queued, at most
 * INJECT_BATCH_MAX and what fits in w's ring without growing): the first into *out, the rest
 * onto w's own deque (where other workers may steal them). 1 if something was taken. */
static int take_injected(tg_pool *p, int w, uint64_t *out) {
    uint64_t items[INJECT_BATCH_MAX];
    int64_t took = tg_injector_take(&p->inj, span_of(p), room(p, w, INJECT_BATCH_MAX), items);
    if (took == 0) return 0;
    keep_rest(p, w, items, took, 1);
    for (int64_t i = 0; i < took; i++) stat_inc(&p->w[w], TG_STAT_INJECTED);
    *out = items[0];
    return 1;
}

int64_t tg_pool_queued(tg_pool *p) {
    int64_t n = tg_injector_count(&p->inj); /* an estimate */
    for (int i = 0, span = span_of(p); i < span; i++) n += tg_deque_size(p->w[i].dq);
    return n;
}

int64_t tg_pool_deque_size(tg_pool *p, int w) { return tg_deque_size(p->w[w].dq); }

int tg_pool_wants_work(tg_pool *p, int w) {
    /* tg_deque_size's loads are relaxed: a hint, as tg_sleep_someone_idle's. */
    return p->nslots > 1 && tg_deque_size(p->w[w].dq) == 0 && tg_sleep_someone_idle(&p->sl);
}

/* Is there work that worker w could take (another deque, or the injector)? */
static int work_visible(tg_pool *p, int w) {
    /* Relaxed loads: ordered after the registration in `idle` by tg_sleep_prepare's seq_cst fence. */
    if (tg_injector_count(&p->inj) > 0) return 1;
    /* The span after the same fence: covers every spare slot whose thread pushed before its
     * own F_p (sleep.md, "Spare workers"). */
    for (int i = 0, span = span_of(p); i < span; i++)
        if (i != w && tg_deque_size(p->w[i].dq) > 0) return 1;
    return 0;
}

/* Pushes a ready task onto worker w's own deque and tells the sleepers. */
static tg_push push_local(tg_pool *p, int w, tg_task *t) {
    if (tg_deque_push(p->w[w].dq, (uint64_t)(uintptr_t)t) != 0) return TG_PUSH_NOMEM;
    notify_pushed(p);
    return TG_PUSH_QUEUED;
}

tg_push tg_pool_spawn(tg_pool *p, int w, tg_task *t, tg_run *run) {
    if (!tg_task_claim_child(t, run)) return TG_PUSH_TAKEN;
    stat_inc(&p->w[w], TG_STAT_SPAWNED);
    tg_task_release_hold(t); /* no dependencies: always ready */
    return push_local(p, w, t);
}

tg_push tg_pool_spawn_fresh(tg_pool *p, int w, tg_task *t, tg_run *run) {
    tg_task_claim_fresh_child(t, run);
    stat_inc(&p->w[w], TG_STAT_SPAWNED);
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
    if (c.pushed) notify_pushed(p);
    if (c.refused) { /* append to the caller's list (never NULL: see pool.h) */
        tg_task **tail = refused;
        while (*tail) tail = &(*tail)->link;
        *tail = c.refused;
    }
    /* Rule 2 (sleep.md): t's final state is stored; wake whoever sleeps in a join for it.
     * Only a pool's workers register as joiners: in a pool of one worker finishing its own
     * task, that worker is awake. */
    if (tp && !(tp == p && w >= 0 && p->nslots == 1)) tg_sleep_wake_joiners(&tp->sl, t);
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

/* Parks worker w (two-phase: sleep.h) until woken: by new work (TG_SLEEP_COUNTED: the caller
 * is counted as searching and becomes a sleeper), by `awaited` finishing, or shutdown; with
 * timeout_ns > 0 also by itself after that long. A nap (TG_SLEEP_NAP) is a timed sleep of a
 * worker that stays a searcher. The re-check between the phases: shutdown, the awaited task,
 * and, for the last searcher becoming a sleeper, any work it could take (rule 1). */
static void park(tg_pool *p, int w, tg_task *awaited, tg_sleep_mode mode, long timeout_ns) {
    int last = tg_sleep_prepare(&p->sl, w, awaited, mode);
    int cancel = is_shutdown(p) || (awaited && finished(awaited)) || (last && work_visible(p, w));
    if (tg_sleep_commit(&p->sl, w, awaited, mode, timeout_ns, cancel) && mode != TG_SLEEP_NAP)
        stat_inc(&p->w[w], TG_STAT_PARKS);
}

/* A searcher spins until `until` (tg_now_ns), or until `awaited` finishes or the pool shuts
 * down, yielding the core every few microseconds. */
static void spin_until(tg_pool *p, tg_task *awaited, int64_t now, int64_t until) {
    for (int64_t yield_at = now + 4000; now < until; now = tg_now_ns()) {
        for (int i = 0; i < 16; i++) tg_cpu_relax();
        if ((awaited && finished(awaited)) || is_shutdown(p)) return;
        if (now >= yield_at) { /* a longer spin gives the core away now and then */
            sched_yield();
            yield_at = now + 4000;
        }
    }
}

/* What a search found. */
typedef enum {
    SEARCH_NOTHING = 0,  /* still counted as searching: the caller parks */
    SEARCH_INJECTED = 1, /* *out taken from the injector (no longer searching) */
    SEARCH_STOLEN = 2,   /* *out stolen from another worker (no longer searching) */
    SEARCH_STOP = 3,     /* `awaited` finished or the pool shuts down (no longer searching) */
    SEARCH_DEFER = 4     /* a join left injected work to the others (no longer searching) */
} search_result;

/* Whether a join for `awaited` leaves work from outside (the injector) to the others now: the
 * awaited task runs on another thread, or is a child spawned by a task (`covered`) still
 * queued on another deque (its thief took it in a batch, or its owner is busy: the joiner
 * steals it), and the join has waited less than p->join_defer_ns (JOIN_DEFER_NS) since
 * `since`. (Any other task not started yet may be in the injector itself.) Work
 * from outside may wait (I/O, a sleep: Executor calls, computes from other threads): a join
 * that ran it would wait as long, and its own task with it, while the awaited task is usually
 * done far sooner. The bound keeps liveness where nobody else takes that work (every other
 * worker busy, and no spare: the awaited task may itself wait for it). */
static int join_defers(tg_pool *p, tg_task *awaited, int64_t since) {
    if (!awaited || tg_now_ns() - since >= p->join_defer_ns) return 0;
    int st = tg_task_state(awaited);
    /* covered: a plain field written before the task was published (graph.c). */
    return st == TG_RUNNING || (st == TG_READY && awaited->covered);
}

/* Whether tasks wait now (declared, or found by the manager): the deques may then hold tasks
 * that wait too (a spare takes a batch from the injector), so a deferring join steals only
 * from its task's thief, whose deque holds that task's own children. Relaxed: a hint. */
static int tasks_wait(tg_pool *p) {
    return p->sp.limit && (atomic_load_explicit(&p->sp.blocked, memory_order_relaxed) > 0 ||
                           atomic_load_explicit(&p->sp.stalled, memory_order_relaxed) > 0);
}

/* Searches the injector and the other deques. Looks that find nothing anywhere come at
 * doubling intervals, DRY_LOOKS of them before the caller parks. Work that is there but held
 * (behind a gate, or a lone task) is watched at doubling intervals up to WATCH_MAX_NS, by one
 * searcher: a searcher that is not the only one leaves it to the others and parks. */
static search_result search(tg_pool *p, int w, tg_task *awaited, int64_t since, uint64_t *out) {
    tg_sleep_search_begin(&p->sl);
    int dry = 0;
    int64_t dry_wait = DRY_WAIT_NS, watch = WATCH_MIN_NS;
    for (;;) {
        if ((awaited && finished(awaited)) || is_shutdown(p)) {
            tg_sleep_search_end(&p->sl);
            return SEARCH_STOP;
        }
        int defer = join_defers(p, awaited, since);
        if (!defer && take_injected(p, w, out)) {
            tg_sleep_search_end(&p->sl);
            return SEARCH_INJECTED;
        }
        /* Relaxed: the thief hint (see steal_from). */
        int first = awaited ? atomic_load_explicit(&awaited->thief, memory_order_relaxed) - 1 : -1;
        int64_t now = tg_now_ns();
        /* Steal-half only outside a join: a joiner takes one task at a time, so that what
         * it nests under its join stays one stolen task (and its descendants), as before. */
        int narrow = defer && first >= 0 && tasks_wait(p);
        look_result r = narrow ? tg_thief_from(p, w, first, now, out)
                               : tg_thief_pass(p, w, first, awaited == NULL, now, out);
        if (r == LOOK_STOLEN) {
            tg_sleep_search_end(&p->sl);
            return SEARCH_STOLEN;
        }
        if (r == LOOK_NOTHING) {
            if (defer && (narrow || tg_injector_count(&p->inj) > 0)) {
                /* Work it leaves to the others: it stops searching, so the last searcher to
                 * stop wakes a sleeper for that work (rule 3), and parks as a joiner. */
                tg_sleep_search_end(&p->sl);
                return SEARCH_DEFER;
            }
            if (++dry >= DRY_LOOKS) return SEARCH_NOTHING;
            spin_until(p, awaited, now, now + dry_wait);
            dry_wait = dry_wait * 2 > DRY_WAIT_MAX_NS ? DRY_WAIT_MAX_NS : dry_wait * 2;
            continue;
        }
        dry = 0;
        if (tg_sleep_searchers(&p->sl) > 1) return SEARCH_NOTHING; /* another one watches */
        /* Look again at doubling intervals (the first, thief.c's STILL_NS, is when a deque unchanged
         * since this look may be taken): a deque that keeps moving is looked at less and
         * less often. Napping, not spinning: the watched owner is busy, and a spinning
         * neighbour slows it (the two vCPUs may share a core). */
        park(p, w, awaited, TG_SLEEP_NAP, (long)watch);
        watch = watch * 2 > WATCH_MAX_NS ? WATCH_MAX_NS : watch * 2;
    }
}

/* The next, longer sleep of a polling park (50 us doubling up to TG_POLL_MAX_NS). */
static long next_poll(long ns) { return ns * 2 < TG_POLL_MAX_NS ? ns * 2 : TG_POLL_MAX_NS; }

/* The idle part of tg_pool_find: worker w's own deque is empty and stays so (only w pushes
 * onto it, and w is here), so only the other queues and the awaited task can change. */
static tg_find find_idle(tg_pool *p, int w, tg_task *awaited, int how, tg_task **out) {
    uint64_t item;
    long poll_ns = 50000;
    int spare = w >= p->n && !awaited; /* a spare at its outermost level: it may leave duty */
    int64_t since = awaited ? tg_now_ns() : 0;
    for (;;) {
        if (awaited && finished(awaited)) return TG_FIND_JOINED;
        if (is_shutdown(p)) return TG_FIND_SHUTDOWN;
        if (spare && tg_spare_leave(p, w)) {
            /* It may have been woken for new work (a sleeper like any other) and leaves without
             * taking it: it passes the wake-up on (sleep.md, "Spare workers"). It saw that work
             * through the wake (rule 0); it is no searcher or sleeper any more. */
            if (work_visible(p, w)) tg_sleep_notify(&p->sl);
            return TG_FIND_LEAVE;
        }
        if (!awaited && tg_spare_should_yield(p, w)) {
            /* Too many threads compute: its core is a spare's until one leaves. Like a leaving
             * spare, it passes on a wake-up it may have had for new work. */
            if (work_visible(p, w)) tg_sleep_notify(&p->sl);
            if (tg_spare_yield(p, w)) continue;
        }
        if (!(how & TG_LOOK_STEAL)) {
            /* Work from outside has no owner that would run it: take it, even this deep (a
             * no-steal join whose awaited task sits in the injector would otherwise wait
             * forever when every other worker is busy or absent). Injections wake only idle
             * workers, so this park polls. */
            if (take_injected(p, w, &item)) return hand_out(p, w, item, 0, out);
            park(p, w, awaited, TG_SLEEP_JOIN, poll_ns);
            poll_ns = next_poll(poll_ns);
            continue;
        }
        switch (search(p, w, awaited, since, &item)) {
        case SEARCH_DEFER:
            /* Woken by its task's end; or it looks again within a poll, the injected work
             * possibly still there and the bound on deferring nearer. */
            park(p, w, awaited, TG_SLEEP_JOIN, poll_ns);
            poll_ns = next_poll(poll_ns);
            continue;
        case SEARCH_INJECTED: return hand_out(p, w, item, 0, out);
        case SEARCH_STOLEN: return hand_out(p, w, item, 1, out);
        case SEARCH_STOP: continue; /* re-evaluated at the top of the loop */
        case SEARCH_NOTHING:
            /* A spare on duty wakes now and then to see whether it is still needed. */
            park(p, w, awaited, TG_SLEEP_COUNTED, how & TG_LOOK_POLL ? poll_ns : spare ? SPARE_RECHECK_NS : 0);
            poll_ns = next_poll(poll_ns);
            continue;
        }
    }
}

tg_find tg_pool_find(tg_pool *p, int w, tg_task *awaited, int how, void *idle_ctx, tg_task **out) {
    uint64_t item;
    if (awaited && finished(awaited)) return TG_FIND_JOINED;
    /* A pool of one worker has no thief: its pop needs neither fence nor CAS. */
    if ((p->nslots == 1 ? tg_deque_pop_alone(p->w[w].dq, &item) : tg_deque_pop(p->w[w].dq, &item)) == TG_OK)
        return hand_out(p, w, item, 0, out);
    if (p->nslots > 1) note_dry(&p->w[w]); /* the gates on this deque's work lapse (thief.c) */
    if (is_shutdown(p)) return TG_FIND_SHUTDOWN;
    if (!awaited && p->w[w].stole_from >= 0) tg_thief_learn(p, w, tg_now_ns());
    note_idle(&p->w[w]);
    p->idle_begin(idle_ctx);
    tg_find r = find_idle(p, w, awaited, how, out);
    p->idle_end(idle_ctx);
    if (r <= TG_FIND_JOINED) note_busy(p, w); /* back to a task's code: the manager may watch */
    return r;
}

int tg_pool_drain(tg_pool *p, tg_task **out) {
    uint64_t item;
    for (int i = 0; i < p->nslots; i++) {
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
