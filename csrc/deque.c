/* Chase-Lev work-stealing deque.
 *
 * Algorithm: D. Chase and Y. Lev, "Dynamic Circular Work-Stealing Deque", SPAA 2005.
 * Memory orderings: N. M. Le, A. Pop, A. Cohen, F. Zappa Nardelli, "Correct and Efficient
 * Work-Stealing for Weak Memory Models", PPoPP 2013 (figure 1), plus the corrections that
 * model checking (CDSChecker, Norris & Demsky, OOPSLA 2013) found in the published code.
 *
 * Departures from the PPoPP'13 code, each marked "DEPARTURE" below:
 *  1. Every slot is _Atomic (relaxed accesses). The paper's plain slot accesses are a data
 *     race between a thief reading a slot and the owner overwriting it after wrap-around;
 *     with atomics that race is benign (the thief's CAS on top then fails) and
 *     ThreadSanitizer sees no race.
 *  2. push publishes with a release store of bottom instead of a release fence followed by
 *     a relaxed store. Same guarantee for the thief's acquire load of bottom, and
 *     ThreadSanitizer models it (it does not model standalone fences).
 *  3. The buffer pointer is stored with release after growing and loaded with acquire by
 *     thieves (the paper used relaxed/consume: a thief could see the new pointer before the
 *     copied slots). push uses the buffer grow() returns (the published code reused the
 *     stale pointer after resizing).
 *  4. Retired buffers are kept on a list and freed only in tg_deque_free, so a thief still
 *     reading an old buffer never touches freed memory (no epoch reclamation needed; the
 *     memory cost is bounded by the final capacity, as the buffers double).
 *  5. steal reports a lost CAS as TG_RETRY instead of returning a special "abort" item.
 *  7. tg_deque_steal_batch (not in the paper; docs/design/deque.md's 6 is the fences) takes
 *     up to half of the deque, but item by item, each with the full single-item protocol
 *     (fence, bottom re-read against the range, CAS of top by one). A single CAS of top over
 *     k items is unsound here: the owner's pop takes the bottom item without any CAS
 *     whenever it sees more than one item, so pops made between a thief's read of bottom and
 *     its batch CAS could take items of the batch (docs/design/deque.md, "Batch steal").
 */
#include "deque.h"

#include <stdlib.h>

struct tg_buffer {
    int64_t mask;            /* capacity - 1; capacity is a power of two */
    tg_buffer *retired_next; /* owner-only list of buffers replaced by a larger one */
    _Atomic uint64_t slots[];
};

struct tg_deque {
    /* top and bottom live on separate cache lines: thieves hammer top, the owner bottom. */
    _Alignas(64) _Atomic int64_t top;
    _Alignas(64) _Atomic int64_t bottom;
    _Atomic int64_t pushes; /* items pushed so far (owner writes, anyone reads: tg_deque_look) */
    _Atomic(tg_buffer *) buf;
    tg_buffer *retired; /* touched by the owner (grow) and by tg_deque_free only */
};

static tg_buffer *buffer_new(int64_t cap) {
    tg_buffer *b = malloc(sizeof(tg_buffer) + (size_t)cap * sizeof(_Atomic uint64_t));
    if (!b) return NULL;
    b->mask = cap - 1;
    b->retired_next = NULL;
    for (int64_t i = 0; i < cap; i++)
        atomic_init(&b->slots[i], 0);
    return b;
}

tg_deque *tg_deque_new(int64_t initial_capacity) {
    int64_t cap = 2;
    while (cap < initial_capacity) cap <<= 1;
    tg_deque *d = aligned_alloc(64, (sizeof(tg_deque) + 63) / 64 * 64);
    if (!d) return NULL;
    tg_buffer *b = buffer_new(cap);
    if (!b) { free(d); return NULL; }
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    atomic_init(&d->pushes, 0);
    atomic_init(&d->buf, b);
    d->retired = NULL;
    return d;
}

void tg_deque_free(tg_deque *d) {
    if (!d) return;
    /* Relaxed: the caller guarantees no other thread uses the deque (joined threads give
     * happens-before). */
    free(atomic_load_explicit(&d->buf, memory_order_relaxed));
    for (tg_buffer *r = d->retired; r;) {
        tg_buffer *n = r->retired_next;
        free(r);
        r = n;
    }
    free(d);
}

/* Owner only: copy the live range [t, b) into a buffer twice as large and publish it. */
static tg_buffer *grow(tg_deque *d, tg_buffer *old, int64_t b, int64_t t) {
    tg_buffer *nb = buffer_new((old->mask + 1) * 2);
    if (!nb) return NULL;
    for (int64_t i = t; i < b; i++) {
        /* Relaxed both ways: only the owner writes slots, and the copy is published to
         * thieves by the release store of buf below. */
        uint64_t v = atomic_load_explicit(&old->slots[i & old->mask], memory_order_relaxed);
        atomic_store_explicit(&nb->slots[i & nb->mask], v, memory_order_relaxed);
    }
    /* DEPARTURE 3: release, pairs with the acquire load of buf in tg_deque_steal, so a thief
     * that sees the new buffer also sees the copied slots. */
    atomic_store_explicit(&d->buf, nb, memory_order_release);
    old->retired_next = d->retired; /* DEPARTURE 4: keep until tg_deque_free */
    d->retired = old;
    return nb;
}

int tg_deque_push(tg_deque *d, uint64_t item) {
    /* Relaxed: only the owner writes bottom. */
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    /* Acquire: pairs with the seq_cst CAS on top in tg_deque_steal/tg_deque_pop, so the slot
     * a thief has taken is not overwritten before the thief has read it. */
    int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
    /* Relaxed: only the owner writes buf. */
    tg_buffer *a = atomic_load_explicit(&d->buf, memory_order_relaxed);
    if (b - t > a->mask) {
        a = grow(d, a, b, t); /* DEPARTURE 3: use the buffer grow returns */
        if (!a) return -1;
    }
    /* Relaxed (DEPARTURE 1): published by the release store of bottom below. */
    atomic_store_explicit(&a->slots[b & a->mask], item, memory_order_relaxed);
    /* Relaxed load and store: only the owner writes it. Published by the release store of
     * bottom below too: tg_deque_look's acquire load of bottom pairs with it, so a look that
     * sees this push's bottom sees its count. On bottom's cache line. */
    atomic_store_explicit(&d->pushes, atomic_load_explicit(&d->pushes, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    /* DEPARTURE 2: release store instead of release fence + relaxed store. Pairs with the
     * acquire load of bottom in tg_deque_steal: a thief that sees b+1 sees the slot. */
    atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
    return 0;
}

tg_status tg_deque_pop(tg_deque *d, uint64_t *out) {
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
    tg_buffer *a = atomic_load_explicit(&d->buf, memory_order_relaxed); /* owner wrote it */
    /* Relaxed store, ordered before the load of top by the seq_cst fence below. */
    atomic_store_explicit(&d->bottom, b, memory_order_relaxed);
    /* seq_cst fence: pairs with the seq_cst fence in tg_deque_steal (between its loads of top
     * and bottom). Either the thief sees the decremented bottom, or this pop sees the thief's
     * incremented top; both cannot miss each other (Le et al., section 3). */
    atomic_thread_fence(memory_order_seq_cst);
    int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
    if (t > b) { /* empty: restore bottom */
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return TG_EMPTY;
    }
    uint64_t x = atomic_load_explicit(&a->slots[b & a->mask], memory_order_relaxed);
    if (t == b) {
        /* Last item: race the thieves for it. seq_cst CAS pairs with the thieves' CAS on top
         * (one total order decides the single winner). */
        int64_t expect = t;
        int won = atomic_compare_exchange_strong_explicit(&d->top, &expect, t + 1,
                                                          memory_order_seq_cst,
                                                          memory_order_relaxed);
        /* Relaxed: the deque is empty either way; the next push orders it by its release. */
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        if (!won) return TG_EMPTY;
    }
    *out = x;
    return TG_OK;
}

tg_status tg_deque_pop_alone(tg_deque *d, uint64_t *out) {
    /* Relaxed throughout: no other thread writes top, bottom or the slots of this deque (the
     * caller's promise); the relaxed accesses only keep the fields atomic for the readers of
     * tg_deque_size / tg_deque_look, which take them as hints. */
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
    if (b <= t) return TG_EMPTY;
    tg_buffer *a = atomic_load_explicit(&d->buf, memory_order_relaxed); /* owner wrote it */
    *out = atomic_load_explicit(&a->slots[(b - 1) & a->mask], memory_order_relaxed);
    atomic_store_explicit(&d->bottom, b - 1, memory_order_relaxed);
    return TG_OK;
}

/* The single-item steal. *avail (if not NULL) receives bottom - top as read by this steal
 * (how many items the deque held, this one included), when TG_OK. */
static tg_status steal_one(tg_deque *d, uint64_t *out, int64_t *avail) {
    /* Acquire: pairs with the seq_cst CAS on top by other thieves / the owner's last pop. */
    int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
    /* seq_cst fence: pairs with the seq_cst fence in tg_deque_pop (see there). */
    atomic_thread_fence(memory_order_seq_cst);
    /* Acquire: pairs with the release store of bottom in tg_deque_push (slot visible). */
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_acquire);
    if (t >= b) return TG_EMPTY;
    /* DEPARTURE 3: acquire, pairs with the release store of buf in grow(). */
    tg_buffer *a = atomic_load_explicit(&d->buf, memory_order_acquire);
    /* Relaxed (DEPARTURE 1): the value is only used if the CAS below wins, and winning proves
     * the owner had not reused this slot (it grows before wrapping onto an unclaimed slot). */
    uint64_t x = atomic_load_explicit(&a->slots[t & a->mask], memory_order_relaxed);
    int64_t expect = t;
    /* seq_cst CAS: pairs with the owner's CAS in tg_deque_pop and the other thieves' CAS;
     * exactly one of them moves top past t. */
    if (!atomic_compare_exchange_strong_explicit(&d->top, &expect, t + 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return TG_RETRY; /* DEPARTURE 5 */
    *out = x;
    if (avail) *avail = b - t;
    return TG_OK;
}

tg_status tg_deque_steal(tg_deque *d, uint64_t *out) { return steal_one(d, out, NULL); }

tg_status tg_deque_steal_batch(tg_deque *d, int64_t max, uint64_t *items, int64_t *n) {
    *n = 0;
    if (max < 1) return TG_EMPTY;
    int64_t avail;
    tg_status s = steal_one(d, &items[0], &avail);
    if (s != TG_OK) return s;
    *n = 1;
    /* Half of what the deque held, rounded up, this first item included. */
    int64_t want = (avail + 1) / 2;
    if (want > max) want = max;
    /* DEPARTURE 7: the full single-item protocol for each further item (its fence and its
     * re-read of bottom check the range, its CAS claims exactly one slot), so the owner's
     * CAS-free pops stay safe. A lost race or an empty deque ends the batch: what is already
     * taken is ours. */
    while (*n < want && steal_one(d, &items[*n], NULL) == TG_OK) (*n)++;
    return TG_OK;
}

int64_t tg_deque_size(tg_deque *d) {
    /* Relaxed both: an estimate for heuristics and parking re-checks (the sleep protocol
     * orders these loads with its own seq_cst fences, docs/design/sleep.md). */
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
    return b > t ? b - t : 0;
}

int64_t tg_deque_look(tg_deque *d, int64_t *top, int64_t *bottom, int64_t *pushes) {
    /* A hint (see deque.h): a stale value only makes the caller's policy wait one more look,
     * or take an item a little early; whatever it then takes, it takes with a steal. Relaxed
     * top; acquire bottom, pairing with push's release store, so that the count read after it
     * is at least that of the push that stored this bottom. */
    int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_acquire);
    *top = t;
    *bottom = b;
    *pushes = atomic_load_explicit(&d->pushes, memory_order_relaxed); /* ordered by the acquire */
    return b > t ? b - t : 0;
}

int64_t tg_deque_capacity(tg_deque *d) {
    /* Acquire: pairs with the release store in grow() (any thread may ask). */
    return atomic_load_explicit(&d->buf, memory_order_acquire)->mask + 1;
}
