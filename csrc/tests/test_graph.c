#define _DEFAULT_SOURCE
/* Tests of the task table alone (csrc/graph.c), no pool: claims, edges racing with a finish,
 * poison reasons, key numbers, inline claims, run counting. Threads race where the protocol
 * says they may; run plain and under ThreadSanitizer / AddressSanitizer. */
#include "../graph.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 4

typedef struct {
    tg_task *t;
    tg_run *run;
    pthread_barrier_t *go;
    int won;
} racer;

static void *claim_racer(void *arg) {
    racer *r = arg;
    pthread_barrier_wait(r->go);
    r->won = tg_task_claim(r->t, r->run);
    return NULL;
}

/* Exactly one of several racing claimers wins. */
static void test_claim_race(void) {
    int rounds = sanitized() ? 200 : 2000;
    for (int k = 0; k < rounds; k++) {
        tg_task t;
        memset(&t, 0, sizeof t);
        tg_run run;
        memset(&run, 0, sizeof run);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, THREADS);
        racer r[THREADS];
        pthread_t tid[THREADS];
        for (int i = 0; i < THREADS; i++) {
            r[i] = (racer){&t, &run, &go, 0};
            pthread_create(&tid[i], NULL, claim_racer, &r[i]);
        }
        int won = 0;
        for (int i = 0; i < THREADS; i++) {
            pthread_join(tid[i], NULL);
            won += r[i].won;
        }
        CHECK(won == 1, "%d claimers won", won);
        CHECK(tg_task_state(&t) == TG_PENDING && tg_run_live(&run) == 1, "claimed once");
        pthread_barrier_destroy(&go);
    }
    printf("ok claim races (%d rounds, %d threads)\n", rounds, THREADS);
}

/* Edges added while the predecessor finishes: every successor is released exactly once,
 * either by the finish (edge seen) or by its own hold (edge refused, TG_DEP_DONE). */
enum { SUCCS = 64 };
static tg_task pred;
static tg_task succ[SUCCS];
static _Atomic int released[SUCCS];
static pthread_barrier_t edge_go;

static void count_ready(void *ctx, tg_task *s) {
    (void)ctx;
    atomic_fetch_add_explicit(&released[s - succ], 1, memory_order_relaxed); /* checked after join */
}

static void *adder(void *arg) {
    int first = (int)(intptr_t)arg;
    pthread_barrier_wait(&edge_go);
    for (int i = first; i < SUCCS; i += THREADS - 1) {
        tg_dep_result r = tg_task_depend(&succ[i], &pred);
        CHECK(r == TG_DEP_WAIT || r == TG_DEP_DONE, "depend %d", r);
        /* A predecessor reported finished is finished for everyone who looks at it (the
         * dependent, released now, may run at once and read its state). */
        if (r == TG_DEP_DONE)
            CHECK(tg_task_state(&pred) == TG_DONE, "DEP_DONE while pred is %s", tg_state_name(tg_task_state(&pred)));
        if (tg_task_release_hold(&succ[i])) count_ready(NULL, &succ[i]);
    }
    return NULL;
}

static void *finisher(void *arg) {
    tg_run *run = arg;
    pthread_barrier_wait(&edge_go);
    CHECK(tg_task_finish(&pred, TG_DONE, count_ready, NULL) == 0, "run ended too early");
    (void)run;
    return NULL;
}

/* Widens the finisher's window between sealing and storing the state, where a depender
 * sees the sealed list: a dependent reported ready must still see its predecessor finished. */
static void slow_seal(tg_task *t) {
    (void)t;
    usleep(20);
}

static void test_edges_race_finish(void) {
    int rounds = sanitized() ? 300 : 3000;
    tg_test_after_seal = slow_seal;
    for (int k = 0; k < rounds; k++) {
        tg_run run;
        memset(&run, 0, sizeof run);
        memset(&pred, 0, sizeof pred);
        memset(succ, 0, sizeof succ);
        tg_run_hold(&run);
        CHECK(tg_task_claim(&pred, &run), "claim pred");
        for (int i = 0; i < SUCCS; i++) {
            CHECK(tg_task_claim(&succ[i], &run), "claim succ");
            atomic_store(&released[i], 0);
        }
        pthread_barrier_init(&edge_go, NULL, THREADS);
        pthread_t tid[THREADS];
        for (int i = 0; i < THREADS - 1; i++) pthread_create(&tid[i], NULL, adder, (void *)(intptr_t)i);
        pthread_create(&tid[THREADS - 1], NULL, finisher, &run);
        for (int i = 0; i < THREADS; i++) pthread_join(tid[i], NULL);
        pthread_barrier_destroy(&edge_go);
        for (int i = 0; i < SUCCS; i++) {
            CHECK(atomic_load(&released[i]) == 1, "successor %d released %d times", i, atomic_load(&released[i]));
            CHECK(tg_task_state(&succ[i]) == TG_READY, "successor %d state %s", i, tg_state_name(tg_task_state(&succ[i])));
            CHECK(tg_task_poisoned(&succ[i]) == TG_POISON_NONE, "successor %d poisoned", i);
        }
        CHECK(tg_run_live(&run) == SUCCS + 1, "live");
    }
    tg_test_after_seal = NULL;
    printf("ok edges racing with a finish: each successor released once (%d rounds)\n", rounds);
}

static void count_only(void *ctx, tg_task *s) { (void)s; ++*(int *)ctx; }

/* A failed predecessor poisons its successors, whether the edge was added before or after;
 * the run ends on its last finish. */
static void test_poison_and_run_end(void) {
    tg_run run;
    memset(&run, 0, sizeof run);
    tg_task a, before, after;
    memset(&a, 0, sizeof a); memset(&before, 0, sizeof before); memset(&after, 0, sizeof after);
    tg_run_hold(&run);
    CHECK(tg_task_claim(&a, &run) && tg_task_claim(&before, &run) && tg_task_claim(&after, &run), "claim");
    CHECK(tg_task_claim(&a, &run) == 0, "second claim refused");
    CHECK(tg_task_depend(&before, &a) == TG_DEP_WAIT, "edge before");
    CHECK(tg_task_release_hold(&before) == 0, "before waits");
    CHECK(tg_task_release_hold(&a) == 1, "a ready");
    int n = 0;
    CHECK(tg_task_finish(&a, TG_FAILED, count_only, &n) == 0, "run still live");
    CHECK(n == 1 && tg_task_state(&before) == TG_READY, "before released");
    CHECK(tg_task_poisoned(&before) == TG_POISON_DEP, "before poisoned");
    CHECK(tg_task_depend(&after, &a) == TG_DEP_POISON, "edge after a failure");
    CHECK(tg_task_poisoned(&after) == TG_POISON_DEP, "after poisoned");
    CHECK(tg_task_release_hold(&after) == 1, "after ready at once");
    CHECK(tg_task_finish(&before, TG_CANCELLED, count_only, &n) == 0, "live");
    CHECK(tg_task_finish(&after, TG_CANCELLED, count_only, &n) == 0, "held");
    CHECK(tg_run_release(&run) == 1, "the hold was the last: the run ends");
    /* A done predecessor found sealed: nothing to wait for. */
    tg_task d, s;
    memset(&d, 0, sizeof d); memset(&s, 0, sizeof s);
    tg_run r2;
    memset(&r2, 0, sizeof r2);
    CHECK(tg_task_claim(&d, &r2) && tg_task_claim(&s, &r2), "claim");
    tg_task_release_hold(&d);
    CHECK(tg_task_finish(&d, TG_DONE, count_only, &n) == 0, "one left");
    CHECK(tg_task_depend(&s, &d) == TG_DEP_DONE, "done pred");
    CHECK(tg_task_poisoned(&s) == TG_POISON_NONE, "not poisoned");
    CHECK(tg_task_release_hold(&s) == 1, "ready");
    CHECK(tg_task_finish(&s, TG_DONE, count_only, &n) == 1, "the last finish ends the run");
    printf("ok poison before and after a failure, run ends on the last finish\n");
}

typedef struct {
    tg_task *t;
    pthread_barrier_t *go;
    int won;
    int *written;  /* what the canceller wrote before cancelling (the runner must see it) */
    int seen;      /* the starter's read of *written after losing */
} cancel_racer;

static void *canceller(void *arg) {
    cancel_racer *r = arg;
    pthread_barrier_wait(r->go);
    *r->written = 42; /* published by the cancel's release CAS */
    r->won = tg_task_cancel(r->t, TG_POISON_CANCEL);
    return NULL;
}

static void *starter(void *arg) {
    cancel_racer *r = arg;
    pthread_barrier_wait(r->go);
    r->won = tg_task_start(r->t);
    if (!r->won) r->seen = *r->written; /* ordered by the failed CAS's acquire */
    return NULL;
}

/* node.cancel() against the hand-out: exactly one wins; a task marked started cannot be
 * cancelled, and a runner that loses sees what the canceller wrote. */
static void test_cancel_races_start(void) {
    int rounds = sanitized() ? 300 : 3000, cancelled = 0;
    for (int k = 0; k < rounds; k++) {
        tg_task t;
        memset(&t, 0, sizeof t);
        int written = 0;
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        cancel_racer c = {&t, &go, 0, &written, 0}, s = {&t, &go, 0, &written, 0};
        pthread_t a, b;
        pthread_create(&a, NULL, canceller, &c);
        pthread_create(&b, NULL, starter, &s);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        pthread_barrier_destroy(&go);
        CHECK(c.won + s.won == 1, "round %d: cancel %d, start %d", k, c.won, s.won);
        if (c.won) {
            cancelled++;
            CHECK(tg_task_poisoned(&t) == TG_POISON_CANCEL, "cancelled: reason kept");
            CHECK(s.seen == 42, "the losing starter sees the canceller's writes");
        } else {
            CHECK(tg_task_poisoned(&t) == TG_POISON_STARTED, "started: mark kept");
        }
        CHECK(tg_task_cancel(&t, TG_POISON_DEP) == 0, "a second cancel never wins");
        CHECK(tg_task_start(&t) == 0, "a second start never wins");
    }
    printf("ok cancel racing the start: exactly one wins (%d rounds, %d cancelled)\n", rounds,
           cancelled);
}

/* An inline claim (serial elision) has no run: a finish never touches one. */
static void test_inline(void) {
    tg_task t, succ1;
    memset(&t, 0, sizeof t);
    memset(&succ1, 0, sizeof succ1);
    tg_run run;
    memset(&run, 0, sizeof run);
    CHECK(tg_task_claim_inline(&t) == 1 && tg_task_state(&t) == TG_RUNNING, "inline claim");
    CHECK(tg_task_claim_inline(&t) == 0 && tg_task_claim(&t, &run) == 0, "claimed once");
    CHECK(tg_task_claim(&succ1, &run), "claim succ");
    CHECK(tg_task_depend(&succ1, &t) == TG_DEP_WAIT, "a parallel consumer waits for it");
    int n = 0;
    CHECK(tg_task_finish(&t, TG_DONE, count_only, &n) == 0 && n == 0, "held consumer");
    CHECK(tg_task_release_hold(&succ1) == 1, "consumer ready");
    CHECK(tg_task_state(&t) == TG_DONE && tg_run_live(&run) == 1, "state");
    CHECK(strcmp(tg_state_name(TG_CANCELLED), "cancelled") == 0 && strcmp(tg_state_name(99), "invalid") == 0, "names");
    printf("ok inline claims\n");
}

/* A covered child (tg_task_claim_child) never touches its run's live count: the run ends
 * with its parent's finish, and a child finishing after the state store reads nothing of the
 * task (a joiner may reuse its memory at once). */
static void test_covered_child(void) {
    tg_task parent, kid, succ;
    memset(&parent, 0, sizeof parent);
    memset(&kid, 0, sizeof kid);
    memset(&succ, 0, sizeof succ);
    tg_run run;
    memset(&run, 0, sizeof run);
    CHECK(tg_task_claim(&parent, &run) == 1 && tg_run_live(&run) == 1, "parent counted");
    CHECK(tg_task_claim_child(&kid, &run) == 1 && tg_run_live(&run) == 1, "child not counted");
    CHECK(tg_task_claim_child(&kid, &run) == 0 && tg_task_claim(&kid, &run) == 0, "claimed once");
    CHECK(tg_task_run(&kid) == &run && tg_task_state(&kid) == TG_PENDING, "child of the run");
    CHECK(tg_task_claim(&succ, &run) == 1 && tg_run_live(&run) == 2, "a consumer is counted");
    CHECK(tg_task_depend(&succ, &kid) == TG_DEP_WAIT, "the consumer waits for the child");
    CHECK(tg_task_release_hold(&kid) == 1 && tg_task_start(&kid) == 1, "child runs");
    int n = 0;
    CHECK(tg_task_finish(&kid, TG_DONE, count_only, &n) == 0 && n == 0, "child finish: no run end");
    CHECK(tg_run_live(&run) == 2, "live untouched by the child");
    tg_task_release_hold(&parent);
    tg_task_start(&parent);
    CHECK(tg_task_finish(&parent, TG_DONE, count_only, &n) == 0, "the consumer is still live");
    CHECK(tg_task_release_hold(&succ) == 1 && tg_task_start(&succ) == 1, "the consumer is ready");
    CHECK(tg_task_finish(&succ, TG_DONE, count_only, &n) == 1 && tg_run_live(&run) == 0, "run ended");
    printf("ok covered children\n");
}

/* Prepaid claims (tg_task_claim_prepaid): a submitter adds to live once for a batch, each
 * claim uses one without touching the count, a lost claim uses none, and giving back what is
 * left ends the run exactly when nothing else is live. */
static void test_prepaid_claims(void) {
    tg_task a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    tg_run run;
    memset(&run, 0, sizeof run);
    tg_run_hold_n(&run, 4); /* the submitter's own hold and 3 prepaid claims */
    CHECK(tg_task_claim_prepaid(&a, &run) == 1 && tg_run_live(&run) == 4, "a claim adds nothing");
    CHECK(tg_task_claim_prepaid(&a, &run) == 0 && tg_task_claim(&a, &run) == 0, "claimed once");
    CHECK(tg_task_claim_prepaid(&b, &run) == 1 && tg_run_live(&run) == 4, "b too");
    CHECK(tg_task_run(&b) == &run && tg_task_state(&b) == TG_PENDING, "b is the run's");
    int n = 0;
    CHECK(tg_task_release_hold(&a) == 1 && tg_task_start(&a) == 1, "a runs");
    CHECK(tg_task_finish(&a, TG_DONE, count_only, &n) == 0 && tg_run_live(&run) == 3, "a counted");
    CHECK(tg_run_release_n(&run, 2) == 0 && tg_run_live(&run) == 1, "the hold and the unused claim back: b is live");
    CHECK(tg_task_release_hold(&b) == 1 && tg_task_start(&b) == 1, "b runs");
    CHECK(tg_task_finish(&b, TG_DONE, count_only, &n) == 1 && tg_run_live(&run) == 0, "run ended by b");
    tg_run r2;
    memset(&r2, 0, sizeof r2);
    tg_run_hold_n(&r2, 5);
    CHECK(tg_run_release_n(&r2, 5) == 1, "giving back everything ends an empty run");
    printf("ok prepaid claims\n");
}

int main(void) {
    tg_test_watchdog(sanitized() ? 600 : 240);
    test_covered_child();
    test_prepaid_claims();
    test_claim_race();
    test_edges_race_finish();
    test_poison_and_run_end();
    test_inline();
    test_cancel_races_start();
    printf("graph: 7 passed, 0 failed\n");
    return 0;
}
