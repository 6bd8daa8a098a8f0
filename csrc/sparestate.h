/* The spares' side of the pool (spare.c; pool.h has their public half): what the pool's find
 * loop and its construction call, and the marks that let the manager watch the workers.
 * Internal to the core: pool.c and spare.c include it. docs/design/sleep.md, "Spare workers". */
#ifndef TG_SPARESTATE_H
#define TG_SPARESTATE_H

#include "poolstate.h"

/* How long a spare on duty sleeps, parked with nothing to do, before it looks again whether
 * it is still needed (ns). */
#define SPARE_RECHECK_NS 20000000L

/* spare.c's side of the pool: made and freed with it; woken by its shutdown. */
int tg_spares_init(tg_pool *p, int nspares);
void tg_spares_destroy(tg_pool *p);
void tg_spares_wake_all(tg_pool *p);
/* Spare w at its outermost level with an empty deque: 1 if it leaves duty now (more spares
 * are on duty than tasks wait), counted off under the spares' lock. */
int tg_spare_leave(tg_pool *p, int w);
/* Worker w (not a spare) at its outermost level with an empty deque: whether more spares are
 * on duty than tasks wait, not counting those whose workers yielded already (a lock-free
 * hint). tg_spare_yield then decides under the spares' lock, and if so waits, its core
 * left to a spare, until a spare leaves duty, more tasks wait, shutdown, or a re-check
 * (docs/design/sleep.md, "Yielding a core back"); 1 if it waited. */
int tg_spare_should_yield(tg_pool *p, int w);
int tg_spare_yield(tg_pool *p, int w);
/* Wakes the manager from its sleep without a timeout. */
void tg_spares_kick(tg_pool *p);

/* Worker w enters find_idle: not running a task's code (relaxed: the manager's hint; the
 * manager only parks after its own seq_cst re-check, see note_busy). */
static inline void note_idle(tg_worker *me) {
    atomic_store_explicit(&me->idle_now, 1, memory_order_relaxed);
}

/* Worker w leaves find_idle to run a task's code: if the manager sleeps without a timeout, it
 * wakes to watch. seq_cst store, then seq_cst load of `parked`: pairs with the manager's
 * seq_cst store of `parked` and its seq_cst loads of idle_now (Dekker): either it sees this
 * worker busy and does not sleep, or this load sees it asleep and kicks it. */
static inline void note_busy(tg_pool *p, int w) {
    if (!p->sp.limit) return;
    atomic_store_explicit(&p->w[w].idle_now, 0, memory_order_seq_cst);
    if (atomic_load_explicit(&p->sp.parked, memory_order_seq_cst)) tg_spares_kick(p);
}

#endif
