/* The thief's policy (docs/design/scheduler.md, "Stealing what pays"; sleep.md, "Held work"):
 * one pass over the other workers' deques, what a steal takes (one task, or steal-half), which
 * work is held back (behind a gate, or a lone task) until its deque stands still, and the gates
 * learnt from batches that did not pay for their move. Called by the pool's search (pool.c). */
#ifndef TG_THIEF_H
#define TG_THIEF_H

#include "poolstate.h"

/* How a searcher watches held work: it naps this long (ns; ~50 us with timer slack) between
 * two looks, doubling up to WATCH_MAX_NS. */
#define WATCH_MIN_NS 4000
#define WATCH_MAX_NS 256000

/* What one pass over the other workers' deques found. */
typedef enum {
    LOOK_NOTHING = 0, /* every other deque was empty */
    LOOK_HELD = 1,    /* work is there, but not to be taken yet (behind a gate, or alone) */
    LOOK_STOLEN = 2   /* *out: a stolen task */
} look_result;

/* Worker w's pass over the other workers' deques, starting at `first` (or, if first < 0 or is
 * w, at random); `now` from tg_now_ns. With `batch` (outside a join), a steal takes up to half
 * of the victim's deque: the first into *out, the rest onto w's own deque, and the batch is
 * judged by tg_thief_learn when w next runs dry. Only from worker w's thread. */
look_result tg_thief_pass(tg_pool *p, int w, int first, int batch, int64_t now, uint64_t *out);
/* Worker w looks at worker v's deque only (one task, as a join steals): a join that leaves
 * other work alone while tasks wait (pool.c, join_defers) steals from its task's thief. */
look_result tg_thief_from(tg_pool *p, int w, int v, int64_t now, uint64_t *out);
/* Worker w ran dry after a batch it stole outside a join (p->w[w].stole_from >= 0): judges
 * whether the batch paid for its move and opens or lengthens its victim's gate. Only from
 * worker w's thread. */
void tg_thief_learn(tg_pool *p, int w, int64_t now);

#endif
