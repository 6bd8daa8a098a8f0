/* Worker pool: deques, the injector (injector.c), find-work and the thief's policy, counters.
 * Parking and waking are the sleep protocol's (sleep.c). See pool.h, docs/design/sleep.md and
 * docs/design/scheduler.md ("Stealing what pays"). */
#define _GNU_SOURCE
#include "pool.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "deque.h"
#include "injector.h"
#include "sleep.h"

#define INJECT_BATCH_MAX 32  /* most tasks a worker takes from the injector at once */
#define STEAL_BATCH_MAX 32   /* most tasks a worker steals from another worker at once */

/* The thief's policy (docs/design/scheduler.md, "Stealing what pays"; sleep.md, "Held work").
 * Times in nanoseconds. */
#define DRY_LOOKS 12         /* looks that find no work anywhere before a searcher parks */
#define DRY_WAIT_NS 250      /* the wait after the first such look; it doubles */
#define DRY_WAIT_MAX_NS 16000 /* up to this (about 110 us in all before parking) */
#define STILL_NS 4000        /* held work is taken once its deque has stood still this long
                              * (times gate_k / GATE_MIN behind a gate, up to WATCH_MAX_NS) */
#define FINE_NS 500          /* a batch that kept its thief busy less than this per task did
                              * not pay for its move: its victim gets a gate */
#define GATE_MIN 64          /* the first gate, in pushes of the victim; doubling to 4096 */
#define GATE_MAX 4096
#define WATCH_MIN_NS 4000    /* a watcher of held work naps this long (~50 us: timer slack) */
#define WATCH_MAX_NS 256000  /* ... doubling up to this */

typedef struct {
    _Alignas(64) tg_deque *dq;
    uint64_t rng;             /* owner only */
    _Atomic int64_t stats[TG_NSTATS]; /* written by the owner only, read by anyone */
    /* Owner only, as a thief: the last batch it stole outside a join (victim, or -1; when;
     * how many tasks), judged when it next runs out of work (learn()); and the deque it
     * watches (a victim holding work it does not take yet, or -1): that deque's top, bottom
     * and push count as last seen, and since when they have stood still. */
    int stole_from, seen_v;
    int64_t stole_at, stole_n, seen_top, seen_bottom, seen_pushes, seen_at;
    /* This worker as a victim: behind a gate while its push count is below gate_pushes
     * (gate_k: the gate's length in pushes, 0 for none), because the last batch taken from
     * it was too fine to pay for its move. Written and read by thieves only (relaxed: a hint,
     * synchronising with nothing), on a cache line of their own, away from the owner's. */
    _Alignas(64) _Atomic int64_t gate_pushes;
    _Atomic int64_t gate_k;
} tg_worker;

struct tg_pool {
    int n;
    tg_worker *w;
    _Atomic int32_t shutdown;
    tg_injector inj; /* work submitted from outside the workers (injector.h) */
    tg_sleep sl;     /* who searches, who sleeps (sleep.h) */
    tg_idle_fn idle_begin, idle_end; /* set before the workers start */
};

static inline void stat_inc(tg_worker *me, tg_stat k) {
    /* Relaxed load + store: single writer (the owner); readers only need a recent value. */
    atomic_store_explicit(&me->stats[k], atomic_load_explicit(&me->stats[k], memory_order_relaxed) + 1,
                          memory_order_relaxed);
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
    if (tg_sleep_init(&p->sl, nworkers) != 0) goto fail;
    for (int i = 0; i < nworkers; i++) {
        tg_worker *w = &p->w[i];
        w->dq = tg_deque_new(64);
        if (!w->dq) goto fail;
        w->rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
        for (int k = 0; k < TG_NSTATS; k++) atomic_init(&w->stats[k], 0);
        w->stole_from = w->seen_v = -1;
        atomic_init(&w->gate_pushes, 0);
        atomic_init(&w->gate_k, 0);
    }
    atomic_init(&p->shutdown, 0);
    p->idle_begin = p->idle_end = no_hook;
    return p;
fail: /* free what was made: the workers up to the first without a deque, the injector and
       * the sleepers if made */
    for (p->n = 0; p->w && p->n < nworkers && p->w[p->n].dq; p->n++) {}
    tg_pool_free(p);
    return NULL;
}

void tg_pool_free(tg_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) tg_deque_free(p->w[i].dq);
    if (p->inj.buf) tg_injector_destroy(&p->inj);
    tg_sleep_destroy(&p->sl);
    free(p->w);
    free(p);
}

int tg_pool_workers(const tg_pool *p) { return p->n; }

void tg_pool_set_idle_hooks(tg_pool *p, tg_idle_fn begin, tg_idle_fn end) {
    p->idle_begin = begin ? begin : no_hook;
    p->idle_end = end ? end : no_hook;
}

void tg_pool_set_park_probe(tg_pool *p, void (*probe)(void *ctx, int w), void *ctx) {
    p->sl.probe_ctx = ctx;
    p->sl.probe = probe;
}

void tg_pool_stats(tg_pool *p, int w, int64_t *out) {
    for (int k = 0; k < TG_NSTATS; k++)
        out[k] = atomic_load_explicit(&p->w[w].stats[k], memory_order_relaxed); /* see stat_inc */
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

/* After a worker pushed onto its own deque: tells the sleepers (sleep.md, rule 1). A pool of
 * one worker has nobody to tell: its only worker is the pusher, awake. */
static inline void notify_pushed(tg_pool *p) {
    if (p->n > 1) tg_sleep_notify(&p->sl);
}

/* How many tasks worker w may take in a batch (1..most): what fits in its ring without growing
 * (keep_rest cannot fail; nobody else holds those tasks). Only w pushes there: it only grows. */
static int64_t room(tg_pool *p, int w, int64_t most) {
    int64_t r = tg_deque_capacity(p->w[w].dq) - tg_deque_size(p->w[w].dq);
    return r > most ? most : r < 1 ? 1 : r;
}

/* items[1..n) of a batch (fits: room()) onto w's deque for thieves, sleepers told (sleep.md rule
 * 1); an injected one (`fifo`) newest first, so w runs it oldest first (Executor(1) is FIFO). */
static void keep_rest(tg_pool *p, int w, const uint64_t *items, int64_t n, int fifo) {
    for (int64_t i = 1; i < n; i++)
        if (tg_deque_push(p->w[w].dq, items[fifo ? n - i : i]) != 0) abort();
    if (n > 1) notify_pushed(p);
}

/* Takes up to a batch from the injector for worker w (a share of what is queued, at most
 * INJECT_BATCH_MAX and what fits in w's ring without growing): the first into *out, the rest
 * onto w's own deque (where other workers may steal them). 1 if something was taken. */
static int take_injected(tg_pool *p, int w, uint64_t *out) {
    uint64_t items[INJECT_BATCH_MAX];
    int64_t took = tg_injector_take(&p->inj, p->n, room(p, w, INJECT_BATCH_MAX), items);
    if (took == 0) return 0;
    keep_rest(p, w, items, took, 1);
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
    /* tg_deque_size's loads are relaxed: a hint, as tg_sleep_someone_idle's. */
    return p->n > 1 && tg_deque_size(p->w[w].dq) == 0 && tg_sleep_someone_idle(&p->sl);
}

/* Is there work that worker w could take (another deque, or the injector)? */
static int work_visible(tg_pool *p, int w) {
    /* Relaxed loads: ordered after the registration in `idle` by tg_sleep_prepare's seq_cst fence. */
    if (tg_injector_count(&p->inj) > 0) return 1;
    for (int i = 0; i < p->n; i++)
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
    if (tp && !(tp == p && w >= 0 && p->n == 1)) tg_sleep_wake_joiners(&tp->sl, t);
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
 * first into *out, the rest onto w's own deque, where others can steal them in turn); *got:
 * how many. */
static tg_status steal_from(tg_pool *p, int w, int v, int batch, uint64_t *out, int64_t *got) {
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
    keep_rest(p, w, items, n, 0);
    *out = items[0];
    *got = n;
    return TG_OK;
}

/* What one pass over the other workers' deques found. */
typedef enum {
    LOOK_NOTHING = 0, /* every other deque was empty */
    LOOK_HELD = 1,    /* work is there, but not to be taken yet (behind a gate, or alone) */
    LOOK_STOLEN = 2   /* *out: a stolen task */
} look_result;

/* Whether victim v's deque, holding work this worker does not take at once (behind a gate, or
 * a lone task: probably what its owner pops next), has stood still for `still` ns: the same
 * top, bottom and push count since this worker's first look at it. A deque that stands still
 * is not being worked on by its owner (busy elsewhere, or descheduled): its work would wait.
 * One deque is watched at a time: a watched deque that moved frees the watch, and a watch
 * older than 4 * WATCH_MAX_NS is given up, so that every held deque gets its turn (the pass
 * starts at a random victim). */
static int stood_still(tg_worker *me, int v, int64_t top, int64_t bottom, int64_t pushes, int64_t now,
                       int64_t still) {
    if (me->seen_v == v) {
        if (me->seen_top == top && me->seen_bottom == bottom && me->seen_pushes == pushes) {
            if (now - me->seen_at < still) return 0;
            me->seen_v = -1;
            return 1;
        }
        me->seen_v = -1; /* it moved: the watch is free for another held deque */
        return 0;
    }
    if (me->seen_v >= 0 && now - me->seen_at < 4 * WATCH_MAX_NS) return 0; /* watching another */
    me->seen_v = v;
    me->seen_top = top;
    me->seen_bottom = bottom;
    me->seen_pushes = pushes;
    me->seen_at = now;
    return 0;
}

/* One pass over the other workers' deques, starting at `first` (or at random). With `batch`,
 * a successful steal takes up to half of the victim's deque (see steal_from). A deque behind
 * its gate (learn()), or holding one task, is held: taken only once it has stood still
 * (stood_still). */
static look_result steal_pass(tg_pool *p, int w, int first, int batch, int64_t now, uint64_t *out) {
    tg_worker *me = &p->w[w];
    int n = p->n;
    if (n == 1) return LOOK_NOTHING;
    int start = first;
    if (start < 0 || start == w) {
        uint64_t x = me->rng; /* xorshift64 */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        me->rng = x;
        start = (int)(x % (uint64_t)n);
    }
    look_result r = LOOK_NOTHING;
    for (int k = 0; k < n; k++) {
        int v = (start + k) % n;
        if (v == w) continue;
        tg_worker *vw = &p->w[v];
        stat_inc(me, TG_STAT_LOOKS);
        int64_t top, bottom, pushes, size = tg_deque_look(vw->dq, &top, &bottom, &pushes);
        if (size <= 0) continue;
        /* Relaxed: hints written by other thieves (tg_worker.gate_pushes). Behind a gate, the
         * deque must stand still longer the finer its work has proved (so that a producer
         * descheduled for a while loses a batch per wait, not its whole deque at once). */
        int64_t gate = atomic_load_explicit(&vw->gate_pushes, memory_order_relaxed);
        int64_t gk = atomic_load_explicit(&vw->gate_k, memory_order_relaxed);
        int64_t still = gk ? STILL_NS * (gk / GATE_MIN) : STILL_NS;
        if (still > WATCH_MAX_NS) still = WATCH_MAX_NS;
        if ((pushes < gate || size == 1) && !stood_still(me, v, top, bottom, pushes, now, still)) {
            r = LOOK_HELD;
            continue;
        }
        for (int tries = 0; tries < 4; tries++) { /* retry a lost race a few times */
            int64_t got = 0;
            stat_inc(me, TG_STAT_STEAL_ATTEMPTS);
            tg_status s = steal_from(p, w, v, batch, out, &got);
            if (s == TG_OK) {
                if (batch) { /* judged by learn() when this worker runs dry again */
                    me->stole_from = v;
                    me->stole_at = now;
                    me->stole_n = got;
                }
                return LOOK_STOLEN;
            }
            if (s == TG_EMPTY) break;
            /* TG_RETRY: lost a race with the owner or another thief; try this victim again */
        }
    }
    return r;
}

/* Worker w ran dry after a batch it stole outside a join: whether that batch paid for its move.
 * A batch that kept w busy (its tasks and everything they spawned and joined) for less than
 * FINE_NS per task did not: moving a task between workers costs its victim and its thief more
 * than that (cache misses on the task and its objects, atomic reference counts in CPython).
 * The victim then gets a gate: no steal from it until it has pushed gate_k more tasks (64,
 * doubling while its work stays that fine, up to 4096), unless its deque stands still (4 us,
 * doubling with gate_k up to 256 us: its owner is not working on it). So a producer of fine
 * tasks is stolen from O(log n) times (plus n / 4096), not once per task. A batch that paid
 * opens the gate at once. */
static void learn(tg_pool *p, int w, int64_t now) {
    tg_worker *me = &p->w[w], *vw = &p->w[me->stole_from];
    me->stole_from = -1;
    /* Relaxed loads and stores: a hint shared by the thieves (tg_worker.gate_pushes); two
     * thieves judging at once may each store their own verdict. */
    int64_t k = atomic_load_explicit(&vw->gate_k, memory_order_relaxed);
    if (now - me->stole_at >= FINE_NS * me->stole_n) {
        if (k) {
            atomic_store_explicit(&vw->gate_k, 0, memory_order_relaxed);
            atomic_store_explicit(&vw->gate_pushes, 0, memory_order_relaxed);
        }
        return;
    }
    k = k * 2 < GATE_MIN ? GATE_MIN : k * 2 > GATE_MAX ? GATE_MAX : k * 2;
    int64_t top, bottom, pushes;
    tg_deque_look(vw->dq, &top, &bottom, &pushes);
    atomic_store_explicit(&vw->gate_k, k, memory_order_relaxed);
    atomic_store_explicit(&vw->gate_pushes, pushes + k, memory_order_relaxed);
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
    SEARCH_STOP = 3      /* `awaited` finished or the pool shuts down (no longer searching) */
} search_result;

/* Searches the injector and the other deques. Looks that find nothing anywhere come at
 * doubling intervals, DRY_LOOKS of them before the caller parks. Work that is there but held
 * (behind a gate, or a lone task) is watched at doubling intervals up to WATCH_MAX_NS, by one
 * searcher: a searcher that is not the only one leaves it to the others and parks. */
static search_result search(tg_pool *p, int w, tg_task *awaited, uint64_t *out) {
    tg_sleep_search_begin(&p->sl);
    int dry = 0;
    int64_t dry_wait = DRY_WAIT_NS, watch = WATCH_MIN_NS;
    for (;;) {
        if ((awaited && finished(awaited)) || is_shutdown(p)) {
            tg_sleep_search_end(&p->sl);
            return SEARCH_STOP;
        }
        if (take_injected(p, w, out)) {
            tg_sleep_search_end(&p->sl);
            return SEARCH_INJECTED;
        }
        /* Relaxed: the thief hint (see steal_from). */
        int first = awaited ? atomic_load_explicit(&awaited->thief, memory_order_relaxed) - 1 : -1;
        int64_t now = tg_now_ns();
        /* Steal-half only outside a join: a joiner takes one task at a time, so that what
         * it nests under its join stays one stolen task (and its descendants), as before. */
        look_result r = steal_pass(p, w, first, awaited == NULL, now, out);
        if (r == LOOK_STOLEN) {
            tg_sleep_search_end(&p->sl);
            return SEARCH_STOLEN;
        }
        if (r == LOOK_NOTHING) {
            if (++dry >= DRY_LOOKS) return SEARCH_NOTHING;
            spin_until(p, awaited, now, now + dry_wait);
            dry_wait = dry_wait * 2 > DRY_WAIT_MAX_NS ? DRY_WAIT_MAX_NS : dry_wait * 2;
            continue;
        }
        dry = 0;
        if (tg_sleep_searchers(&p->sl) > 1) return SEARCH_NOTHING; /* another one watches */
        /* Look again at doubling intervals (the first, STILL_NS, is when a deque unchanged
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
    for (;;) {
        if (awaited && finished(awaited)) return TG_FIND_JOINED;
        if (is_shutdown(p)) return TG_FIND_SHUTDOWN;
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
        switch (search(p, w, awaited, &item)) {
        case SEARCH_INJECTED: return hand_out(p, w, item, 0, out);
        case SEARCH_STOLEN: return hand_out(p, w, item, 1, out);
        case SEARCH_STOP: continue; /* re-evaluated at the top of the loop */
        case SEARCH_NOTHING:
            park(p, w, awaited, TG_SLEEP_COUNTED, how & TG_LOOK_POLL ? poll_ns : 0);
            poll_ns = next_poll(poll_ns);
            continue;
        }
    }
}

tg_find tg_pool_find(tg_pool *p, int w, tg_task *awaited, int how, void *idle_ctx, tg_task **out) {
    uint64_t item;
    if (awaited && finished(awaited)) return TG_FIND_JOINED;
    /* A pool of one worker has no thief: its pop needs neither fence nor CAS. */
    if ((p->n == 1 ? tg_deque_pop_alone(p->w[w].dq, &item) : tg_deque_pop(p->w[w].dq, &item)) == TG_OK)
        return hand_out(p, w, item, 0, out);
    if (is_shutdown(p)) return TG_FIND_SHUTDOWN;
    if (!awaited && p->w[w].stole_from >= 0) learn(p, w, tg_now_ns());
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
