/* Chase-Lev work-stealing deque of uint64_t items (task ids).
 *
 * One owner thread calls tg_deque_push / tg_deque_pop at the bottom; any thread calls
 * tg_deque_steal at the top. Orderings follow Le, Pop, Cohen, Zappa Nardelli, "Correct and
 * Efficient Work-Stealing for Weak Memory Models" (PPoPP'13), with the corrections found
 * later by model checking; docs/design/deque.md explains each one. */
#ifndef TG_DEQUE_H
#define TG_DEQUE_H

#include <stdatomic.h>
#include <stdint.h>

/* Result of tg_deque_pop / tg_deque_steal: never an overloaded sentinel item. */
typedef enum {
    TG_OK = 0,    /* an item was taken and written to *out */
    TG_EMPTY = 1, /* the deque was empty */
    TG_RETRY = 2  /* steal only: lost a race with the owner or another thief; try again */
} tg_status;

typedef struct tg_buffer tg_buffer;
typedef struct tg_deque tg_deque;

/* A new deque whose ring buffer starts with initial_capacity slots (rounded up to a power of
 * two, at least 2). Returns NULL when out of memory. */
tg_deque *tg_deque_new(int64_t initial_capacity);
/* Frees the deque and every buffer it ever used. No other thread may be using it. */
void tg_deque_free(tg_deque *d);
/* Owner only. Returns 0, or -1 when the buffer could not grow (out of memory; item not added). */
int tg_deque_push(tg_deque *d, uint64_t item);
/* Owner only: takes the most recently pushed item (LIFO). TG_OK or TG_EMPTY. */
tg_status tg_deque_pop(tg_deque *d, uint64_t *out);
/* Owner only, of a deque nobody steals from (the pool of one worker): pop without the fence
 * and the CAS that only thieves need. TG_OK or TG_EMPTY. */
tg_status tg_deque_pop_alone(tg_deque *d, uint64_t *out);
/* Any thread: takes the oldest item (FIFO). TG_OK, TG_EMPTY or TG_RETRY. */
tg_status tg_deque_steal(tg_deque *d, uint64_t *out);
/* Any thread: steal-half. Takes the oldest item and, behind it, up to half of what the deque
 * held (rounded up), at most max items in all, into items[0..*n-1] (oldest first). Each item
 * is taken by the single-item steal protocol (docs/design/deque.md, "Batch steal"). TG_OK
 * (*n >= 1), or TG_EMPTY / TG_RETRY as tg_deque_steal for the first item (*n = 0). */
tg_status tg_deque_steal_batch(tg_deque *d, int64_t max, uint64_t *items, int64_t *n);
/* Approximate number of items (exact when no other thread is acting). */
int64_t tg_deque_size(tg_deque *d);
/* Any thread: a look that takes nothing. Returns the approximate number of items, and in
 * *top, *bottom and *pushes the deque's indices and how many items its owner has pushed so
 * far. A deque seen twice with the same three was not touched in between: top moves with
 * every steal, bottom with every pop and push, and pushes tells a pop and a push that put
 * bottom back where it was from no change. Relaxed loads: a hint for the thief's policy
 * (pool.c); taking an item is a steal. */
int64_t tg_deque_look(tg_deque *d, int64_t *top, int64_t *bottom, int64_t *pushes);
/* Current ring-buffer capacity (for tests of growth). */
int64_t tg_deque_capacity(tg_deque *d);

#endif
