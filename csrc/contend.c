#define _POSIX_C_SOURCE 200809L
/* The contended read-modify-write measurement. See contend.h. */
#include "contend.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <time.h>

typedef struct {
    alignas(64) _Atomic long counter; /* the shared line: its own cache line */
    alignas(64) long rounds;
} turns;

typedef struct {
    turns *t;
    long parity; /* 0 or 1: this thread increments when counter % 2 == parity */
} player;

static void *play(void *arg) {
    player *p = arg;
    for (long r = 0; r < p->t->rounds; r++) {
        int spins = 0;
        /* Acquire: pairs with the other thread's acq_rel increment (its turn is over). */
        while (atomic_load_explicit(&p->t->counter, memory_order_acquire) % 2 != p->parity)
            if (++spins >= 1000) { /* the other thread is not running: let it */
                sched_yield();
                spins = 0;
            }
        /* acq_rel: the measured operation; pairs with the other thread's acquire load. */
        atomic_fetch_add_explicit(&p->t->counter, 1, memory_order_acq_rel);
    }
    return NULL;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

double tg_contended_rmw_ns(long rounds) {
    if (rounds < 1) return -1.0;
    turns t; /* on this stack: the other thread is joined before it goes */
    atomic_init(&t.counter, 0);
    t.rounds = rounds;
    player other = {&t, 1}, me = {&t, 0};
    pthread_t th;
    double t0 = now_ns();
    if (pthread_create(&th, NULL, play, &other) != 0) return -1.0;
    play(&me); /* this thread is the other player */
    pthread_join(th, NULL);
    double ns = (now_ns() - t0) / (double)(2 * rounds);
    return ns > 0 ? ns : 1e-3;
}
