/* Done callbacks of Nodes (the Future protocol's add_done_callback), see callbacks.c. */
#ifndef TG_PY_CALLBACKS_H
#define TG_PY_CALLBACKS_H

#include "noderec.h"

/* Runs n's done callbacks, if any were added, once n's final state is published: called by
 * every path that finishes a node (worker.c), after tg_pool_finish, with n still alive and
 * the thread attached, when tg_callbacks_pending(n) says so (adder 0), and by
 * add_done_callback when it finds the node finished (adder 1). The fast path (no callback ever added) is one seq_cst fence and one
 * relaxed load (benchmarks/: see docs/api/futures.md). A
 * callback's Exception goes to sys.unraisablehook; a KeyboardInterrupt or SystemExit is
 * raised in the adder (-1 returned, after every callback ran) and reported in a finisher
 * (see call_one in callbacks.c); a pending exception of the caller is kept (0). */
int tg_callbacks_fire_slow(NodeObject *n, int adder);
/* Whether n may have callbacks to run (the fast path of the finisher: then it calls
 * tg_callbacks_fire_slow, see worker.c's fire_callbacks, which runs them as no task's code). */
static inline int tg_callbacks_pending(NodeObject *n) {
    /* seq_cst fence: pairs with the seq_cst fence in add_done_callback (callbacks.c), between
     * its store of the list and its load of the state: either we see its list here, or it
     * sees the final state we published before this fence and runs the callback itself. */
    atomic_thread_fence(memory_order_seq_cst);
    /* Relaxed: ordered by the fence above (a NULL read means no callback was added). */
    return atomic_load_explicit(&n->callbacks, memory_order_relaxed) != NULL;
}

/* GC support for the callback list (node.c's traverse and clear). */
int tg_callbacks_traverse(NodeObject *n, visitproc visit, void *arg);
void tg_callbacks_clear(NodeObject *n);

/* Node methods: add_done_callback, remove_done_callback, cancelled, running, __await__,
 * _repr_html_; listed in node.c's method table. */
PyObject *tg_node_add_done_callback(NodeObject *n, PyObject *fn);
PyObject *tg_node_remove_done_callback(NodeObject *n, PyObject *fn);
PyObject *tg_node_cancelled(NodeObject *n, PyObject *unused);
PyObject *tg_node_running(NodeObject *n, PyObject *unused);
PyObject *tg_node_await(NodeObject *n);
PyObject *tg_node_repr_html(NodeObject *n, PyObject *unused);

extern PyAsyncMethods tg_node_as_async;

#endif
