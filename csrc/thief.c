/* The thief's policy: see thief.h, docs/design/scheduler.md ("Stealing what pays") and
 * docs/design/sleep.md ("Held work"). */
#include "thief.h"

#define STEAL_BATCH_MAX 32   /* most tasks a worker steals from another worker at once */

/* The policy's figures. Times in nanoseconds. */
#define STILL_NS 4000        /* held work is taken once its deque has stood still this long
                              * (times gate_k / GATE_MIN behind a gate, up to WATCH_MAX_NS) */
#define FINE_NS 500          /* a batch that kept its thief busy less than this per task did
                              * not pay for its move: its victim gets a gate */
#define GATE_MIN 64          /* the first gate, in pushes of the victim; doubling to 4096 */
#define GATE_MAX 4096

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
 * its gate (tg_thief_learn), or holding one task, is held: taken only once it has stood still
 * (stood_still). */
/* Worker w looks at v's deque once: steals (a batch if `batch`) unless the deque is empty or
 * its work is held (behind a gate, or a lone task that has not stood still long enough). */
static look_result look_at(tg_pool *p, int w, int v, int batch, int64_t now, uint64_t *out) {
    tg_worker *me = &p->w[w];
    tg_worker *vw = &p->w[v];
    stat_inc(me, TG_STAT_LOOKS);
    int64_t top, bottom, pushes, size = tg_deque_look(vw->dq, &top, &bottom, &pushes);
    if (size <= 0) return LOOK_NOTHING;
    /* Relaxed: hints written by other thieves (tg_worker.gate_pushes). Behind a gate, the
     * deque must stand still longer the finer its work has proved (so that a producer
     * descheduled for a while loses a batch per wait, not its whole deque at once). */
    int64_t gate = atomic_load_explicit(&vw->gate_pushes, memory_order_relaxed);
    int64_t gk = atomic_load_explicit(&vw->gate_k, memory_order_relaxed);
    /* A gate lapses when its victim runs dry: the work it was learnt on is gone (a new
     * compute, or the next phase of this one, is judged afresh). */
    if (gk && atomic_load_explicit(&vw->gate_dries, memory_order_relaxed) != dries_of(vw))
        gate = gk = 0;
    int64_t still = gk ? STILL_NS * (gk / GATE_MIN) : STILL_NS;
    if (still > WATCH_MAX_NS) still = WATCH_MAX_NS;
    if ((pushes < gate || size == 1) && !stood_still(me, v, top, bottom, pushes, now, still))
        return LOOK_HELD;
    for (int tries = 0; tries < 4; tries++) { /* retry a lost race a few times */
        int64_t got = 0;
        stat_inc(me, TG_STAT_STEAL_ATTEMPTS);
        tg_status s = steal_from(p, w, v, batch, out, &got);
        if (s == TG_OK) {
            if (batch) { /* judged by tg_thief_learn when this worker runs dry again */
                me->stole_from = v;
                me->stole_at = now;
                me->stole_n = got;
                me->stole_dries = dries_of(vw);
            }
            return LOOK_STOLEN;
        }
        if (s == TG_EMPTY) break;
        /* TG_RETRY: lost a race with the owner or another thief; try this victim again */
    }
    return LOOK_NOTHING;
}

look_result tg_thief_pass(tg_pool *p, int w, int first, int batch, int64_t now, uint64_t *out) {
    tg_worker *me = &p->w[w];
    /* The workers and the spare slots ever on duty (relaxed: a stale span only skips a new
     * spare's deque for one pass; the last searcher's re-check is what no work escapes). */
    int n = span_of(p);
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
        look_result got = look_at(p, w, v, batch, now, out);
        if (got == LOOK_STOLEN) return got;
        if (got == LOOK_HELD) r = LOOK_HELD;
    }
    return r;
}

look_result tg_thief_from(tg_pool *p, int w, int v, int64_t now, uint64_t *out) {
    return v == w ? LOOK_NOTHING : look_at(p, w, v, 0, now, out);
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
void tg_thief_learn(tg_pool *p, int w, int64_t now) {
    tg_worker *me = &p->w[w], *vw = &p->w[me->stole_from];
    me->stole_from = -1;
    /* The victim ran dry since the batch was taken: the work it came from is gone, and a
     * verdict on it would gate the victim's next work (a new compute) for nothing. */
    if (dries_of(vw) != me->stole_dries) return;
    /* Relaxed loads and stores: a hint shared by the thieves (tg_worker.gate_pushes); two
     * thieves judging at once may each store their own verdict. */
    int64_t k = atomic_load_explicit(&vw->gate_k, memory_order_relaxed);
    if (atomic_load_explicit(&vw->gate_dries, memory_order_relaxed) != me->stole_dries)
        k = 0; /* a lapsed gate (see tg_thief_pass): the verdict starts afresh */
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
    atomic_store_explicit(&vw->gate_dries, me->stole_dries, memory_order_relaxed);
}
