/* The injector: the pool's FIFO queue for work submitted from outside its workers (a compute()
 * from the main thread, a successor released into another pool). A ring guarded by a mutex (a
 * documented lock: the workers' own deques are lock-free; only work from outside comes through
 * here), with a count that anyone may read without the lock. Closing it (the pool's shutdown)
 * makes later pushes fail, so everything pushed is either drained or refused. Items are task
 * pointers stored as integers, as in the deque. No allocation after a push that succeeded. */
#ifndef TG_INJECTOR_H
#define TG_INJECTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct tg_task;

typedef struct tg_injector {
    pthread_mutex_t mu;
    uint64_t *buf;                  /* the ring, under mu */
    int64_t head, len, cap;         /* under mu */
    int closed;                     /* under mu: pushes are refused */
    _Alignas(64) _Atomic int64_t count; /* len, readable without mu (see tg_injector_count) */
} tg_injector;

/* Results of tg_injector_push. */
typedef enum {
    TG_INJ_QUEUED = 0,
    TG_INJ_CLOSED = 1, /* refused: the injector was closed */
    TG_INJ_NOMEM = -1  /* refused: out of memory */
} tg_inj_result;

/* 0, or -1 when out of memory. */
int tg_injector_init(tg_injector *q, int64_t initial_capacity);
void tg_injector_destroy(tg_injector *q);
/* Appends n tasks (all or none). The count's seq_cst increment is the "push" of the sleep
 * protocol (docs/design/sleep.md, rule 1): the caller then notifies sleepers. */
tg_inj_result tg_injector_push(tg_injector *q, struct tg_task *const *tasks, int64_t n);
/* Takes from the front: at most `max`, and of what is queued at most 1/`share` (at least one),
 * into out[]. Returns how many (0: empty). */
int64_t tg_injector_take(tg_injector *q, int64_t share, int64_t max, uint64_t *out);
/* Refuses every later push. */
void tg_injector_close(tg_injector *q);
/* How many are queued, read relaxed: an estimate, or ordered by the caller's own fences (the
 * sleep protocol's re-check in park()). */
int64_t tg_injector_count(tg_injector *q);

#endif
