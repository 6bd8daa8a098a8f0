/* Task table: states, dependency counts, successor lists. See graph.h and
 * docs/design/scheduler.md for the protocol. */
#include "graph.h"

#include <sched.h>
#include <stdlib.h>

struct tg_edge {
    tg_task *to;
    tg_edge *next;
};

#ifdef TG_TEST_HOOKS
void (*tg_test_after_seal)(tg_task *t);
#endif

/* Marks a successor list that its task has finished: nobody may add edges any more. */
#define TG_SEALED ((tg_edge *)(uintptr_t)1)

/* How a claim counts the task in its run's live count. */
typedef enum {
    COUNT = 0,   /* counted: adds 1 to live */
    COVERED = 1, /* not counted: its parent covers it (tg_task_claim_child) */
    PREPAID = 2  /* counted, already added by the caller (tg_task_claim_prepaid) */
} claim_count;

static int claim(tg_task *t, tg_run *run, claim_count how) {
    int expect = TG_NEW;
    /* acq_rel CAS: exactly one claimer wins; pairs with other claimers' CAS. */
    if (!atomic_compare_exchange_strong_explicit(&t->state, &expect, TG_PENDING,
                                                 memory_order_acq_rel, memory_order_acquire))
        return 0;
    /* Relaxed: see tg_task_run. */
    atomic_store_explicit(&t->run, run, memory_order_relaxed);
    t->worker = -1;
    t->covered = how == COVERED; /* plain: published with the task, like the stores below */
    /* Relaxed: nothing is published yet; the push that publishes the task (release store of
     * the deque's bottom, or the injector's lock) orders these stores for the runner. The other
     * fields (succ, poisoned, final, thief) are zero from allocation and must not be reset
     * here: a thread that lost the claim may already be adding an edge to succ. */
    atomic_store_explicit(&t->deps, 1, memory_order_relaxed);
    /* Relaxed: the decrement in tg_task_finish is acq_rel and comes later in modification
     * order (the task cannot finish before it is published). A prepaid claim's increment was
     * made by the same thread before the claim (tg_run_hold_n), so the same holds. */
    if (how == COUNT) atomic_fetch_add_explicit(&run->live, 1, memory_order_relaxed);
    return 1;
}

int tg_task_claim(tg_task *t, tg_run *run) { return claim(t, run, COUNT); }

int tg_task_claim_child(tg_task *t, tg_run *run) { return claim(t, run, COVERED); }

int tg_task_claim_prepaid(tg_task *t, tg_run *run) { return claim(t, run, PREPAID); }

void tg_task_claim_fresh_child(tg_task *t, tg_run *run) {
    /* Relaxed stores: nobody else can see the task (the caller's promise) until the push that
     * publishes it (release store of the deque's bottom) orders them for the runner. deps is
     * 0: claimed and released at once, with no dependency. */
    atomic_store_explicit(&t->run, run, memory_order_relaxed);
    t->worker = -1;
    t->covered = 1;
    atomic_store_explicit(&t->deps, 0, memory_order_relaxed);
    atomic_store_explicit(&t->state, TG_READY, memory_order_relaxed);
}

int tg_task_claim_inline(tg_task *t) {
    int expect = TG_NEW;
    /* acq_rel CAS: as in tg_task_claim, one claimer wins. */
    if (!atomic_compare_exchange_strong_explicit(&t->state, &expect, TG_RUNNING,
                                                 memory_order_acq_rel, memory_order_acquire))
        return 0;
    atomic_store_explicit(&t->run, NULL, memory_order_relaxed); /* see tg_task_run */
    t->worker = -1;
    return 1;
}

/* The finisher seals the successor list before it stores the final state (the state is its
 * last write to the task: a joiner that sees it may free the task). A dependent told "already
 * finished" may run at once and look at its predecessor, so the depender waits for that store
 * here. The finisher is between two adjacent stores and waits for nothing; the wait is a few
 * instructions unless it was preempted just there (hence the yield). */
static void wait_state_stored(tg_task *pred) {
    /* Acquire: pairs with the release store of the state in tg_task_finish. */
    for (int spins = 0; atomic_load_explicit(&pred->state, memory_order_acquire) < TG_DONE; spins++)
        if (spins >= 64) sched_yield();
}

tg_dep_result tg_task_depend(tg_task *succ, tg_task *pred) {
    /* Relaxed: succ still holds its +1, so deps cannot reach 0 meanwhile; the decrement that
     * later releases succ is acq_rel. */
    atomic_fetch_add_explicit(&succ->deps, 1, memory_order_relaxed);
    tg_edge *e = malloc(sizeof *e);
    if (!e) {
        atomic_fetch_sub_explicit(&succ->deps, 1, memory_order_relaxed); /* as above */
        return TG_DEP_NOMEM;
    }
    e->to = succ;
    /* Acquire: pairs with the acq_rel exchange that seals the list in tg_task_finish, so if we
     * see TG_SEALED we also see pred's final state. */
    tg_edge *head = atomic_load_explicit(&pred->succ, memory_order_acquire);
    for (;;) {
        if (head == TG_SEALED) {
            free(e);
            wait_state_stored(pred);
            /* Relaxed: the hold keeps deps above 0 (see above). */
            atomic_fetch_sub_explicit(&succ->deps, 1, memory_order_relaxed);
            /* Acquire: `final` is stored before the list is sealed, and the acquire load that saw
             * TG_SEALED synchronised with the sealing exchange. */
            int st = atomic_load_explicit(&pred->final, memory_order_acquire);
            if (st == TG_DONE) return TG_DEP_DONE;
            tg_task_cancel(succ, TG_POISON_DEP);
            return TG_DEP_POISON;
        }
        e->next = head;
        /* Release on success: pairs with the acq_rel exchange in tg_task_finish, which then
         * sees e->to and e->next. Acquire on failure: pairs with the same exchange (or another
         * adder's release CAS) so a re-read TG_SEALED orders the final state. */
        if (atomic_compare_exchange_weak_explicit(&pred->succ, &head, e, memory_order_release,
                                                  memory_order_acquire))
            return TG_DEP_WAIT;
    }
}

int tg_task_release_hold(tg_task *t) {
    /* acq_rel: pairs with the decrements by finishing predecessors (tg_task_finish); whoever
     * takes deps to 0 sees every predecessor's writes, including a poisoned flag. */
    if (atomic_fetch_sub_explicit(&t->deps, 1, memory_order_acq_rel) == 1) {
        /* Relaxed: only the thread that took deps to 0 writes READY here. */
        atomic_store_explicit(&t->state, TG_READY, memory_order_relaxed);
        return 1;
    }
    return 0;
}

int tg_task_finish(tg_task *t, tg_state final, void (*ready)(void *ctx, tg_task *), void *ctx) {
    /* Both read before the state store below: a joiner that sees it may free the task. A
     * covered child leaves its run alone: its parent (or a hold) keeps the run from ending. */
    tg_run *run = t->covered ? NULL : tg_task_run(t);
    /* Relaxed: published by the release half of the exchange below. */
    atomic_store_explicit(&t->final, final, memory_order_relaxed);
    /* acq_rel exchange: acquire pairs with the release CAS of every tg_task_depend that added
     * an edge (we see each edge's fields); release pairs with a later adder's acquire load of
     * TG_SEALED (it sees `final`). The detached list now belongs to this thread. */
    tg_edge *e = atomic_exchange_explicit(&t->succ, TG_SEALED, memory_order_acq_rel);
#ifdef TG_TEST_HOOKS
    if (tg_test_after_seal) tg_test_after_seal(t); /* C tests: hold the window open */
#endif
    /* Release: pairs with the acquire loads in tg_task_state; a thread that sees the final
     * state sees the result stored before this call. Successors are released below, so a
     * successor always sees its predecessors finished; a depender that saw the sealed list
     * waits for this store (wait_state_stored). */
    atomic_store_explicit(&t->state, final, memory_order_release);
    while (e) {
        tg_edge *next = e->next;
        tg_task *s = e->to; /* a pending successor: kept alive by its owner until it has run */
        free(e);
        if (final != TG_DONE)
            /* Ordered before the releasing decrement below (acq_rel). */
            tg_task_cancel(s, TG_POISON_DEP);
        /* acq_rel: pairs with tg_task_release_hold and other predecessors' decrements. */
        if (atomic_fetch_sub_explicit(&s->deps, 1, memory_order_acq_rel) == 1) {
            atomic_store_explicit(&s->state, TG_READY, memory_order_relaxed); /* sole writer */
            ready(ctx, s);
        }
        e = next;
    }
    if (!run) return 0; /* claimed inline (no run), or a covered child */
    /* acq_rel: the thread that takes live to 0 sees every other finish of the run. */
    return atomic_fetch_sub_explicit(&run->live, 1, memory_order_acq_rel) == 1;
}

int tg_task_cancel(tg_task *t, tg_poison why) {
    int expect = TG_POISON_NONE;
    /* Release CAS (the first value wins): pairs with the acq_rel CAS in tg_task_start, so the
     * runner that skips the task sees what the canceller wrote before (the exception of a
     * failing parent). Relaxed on failure: a reason, or the start mark, is already there. */
    return atomic_compare_exchange_strong_explicit(&t->poisoned, &expect, (int32_t)why,
                                                   memory_order_release, memory_order_relaxed);
}

int tg_task_start(tg_task *t) {
    int expect = TG_POISON_NONE;
    /* acq_rel CAS against tg_task_cancel's release CAS: one of the two stores first. On
     * failure, acquire: we see the canceller's writes before its reason. */
    return atomic_compare_exchange_strong_explicit(&t->poisoned, &expect, TG_POISON_STARTED,
                                                   memory_order_acq_rel, memory_order_acquire);
}

tg_run *tg_task_run(const tg_task *t) {
    /* Relaxed: pairs with the relaxed store in the claim (ordered for whoever the task is
     * handed to by the push that published it). */
    return atomic_load_explicit(&((tg_task *)t)->run, memory_order_relaxed);
}

void tg_task_want(tg_task *t) {
    /* acq_rel RMW on `interest`: one total order with the hand-out's RMW in
     * tg_task_run_skips; whichever comes first decides. */
    atomic_fetch_or_explicit(&t->interest, TG_WANTED, memory_order_acq_rel);
}

int tg_task_run_skips(tg_task *t) {
    /* acq_rel RMW: pairs with tg_task_want's (see there). */
    return !(atomic_fetch_or_explicit(&t->interest, TG_DECIDED, memory_order_acq_rel) & TG_WANTED);
}

int tg_task_has_successors(const tg_task *t) {
    /* Acquire: pairs with the release CAS that adds an edge in tg_task_depend. */
    tg_edge *e = atomic_load_explicit(&((tg_task *)t)->succ, memory_order_acquire);
    return e != NULL && e != TG_SEALED;
}

int tg_task_wanted(const tg_task *t) {
    /* Acquire: pairs with tg_task_want's RMW. */
    return (atomic_load_explicit(&((tg_task *)t)->interest, memory_order_acquire) & TG_WANTED) != 0;
}

int tg_task_poisoned(const tg_task *t) {
    /* Acquire: pairs with the release CAS in tg_task_cancel. */
    return atomic_load_explicit(&((tg_task *)t)->poisoned, memory_order_acquire);
}

void tg_run_hold_n(tg_run *r, int64_t n) {
    /* Relaxed: like the claim's increment, ordered before the matching decrement. */
    atomic_fetch_add_explicit(&r->live, n, memory_order_relaxed);
}

int tg_run_release_n(tg_run *r, int64_t n) {
    /* acq_rel: pairs with the decrements in tg_task_finish (see there). */
    return atomic_fetch_sub_explicit(&r->live, n, memory_order_acq_rel) == n;
}

void tg_run_hold(tg_run *r) { tg_run_hold_n(r, 1); }

int tg_run_release(tg_run *r) { return tg_run_release_n(r, 1); }

void tg_run_cancel(tg_run *r) {
    /* Relaxed: a flag read at hand-out time; being seen a little late only lets a task that
     * was about to start, start. */
    atomic_store_explicit(&r->cancelled, 1, memory_order_relaxed);
}

int tg_run_is_cancelled(const tg_run *r) {
    return atomic_load_explicit(&((tg_run *)r)->cancelled, memory_order_relaxed); /* see above */
}

int64_t tg_run_live(const tg_run *r) {
    return atomic_load_explicit(&((tg_run *)r)->live, memory_order_relaxed); /* an estimate */
}

int tg_task_state(const tg_task *t) {
    /* Acquire: pairs with the release store of the final state in tg_task_finish. */
    return atomic_load_explicit(&((tg_task *)t)->state, memory_order_acquire);
}

const char *tg_state_name(int state) {
    static const char *names[TG_NSTATES] = {"new", "pending", "ready", "running", "done",
                                            "failed", "cancelled"};
    return state >= 0 && state < TG_NSTATES ? names[state] : "invalid";
}
