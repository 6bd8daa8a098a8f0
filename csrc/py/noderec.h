/* The node record: NodeObject's layout and what the layers above node.c's Python methods use
 * of a node (noderec.c): its key and messages naming it, its outcome, its inputs, its cancel
 * requests, its children. Layer 2 (docs/design/native.md): above state.h only. */
#ifndef TG_PY_NODEREC_H
#define TG_PY_NODEREC_H

#include "state.h"

typedef struct NodeObject NodeObject;

struct NodeObject {
    PyObject_VAR_HEAD    /* ob_size: the number of argument slots (args[] below) */
    tg_task t;           /* the core's record, embedded: NODE_OF(task) finds the Node */
    /* Inputs. Written when the node is built; read and dropped by whoever runs it (the thread
     * that claimed it inline, or the worker it was handed to), never by anyone else, except
     * deps, which the `dependencies` property reads under the node's critical section. fn:
     * see `lease` below for who holds it. */
    PyObject *fn;
    Py_ssize_t nargs;    /* how many of args[] are positional; the rest are keyword values */
    PyObject *kwnames;   /* tuple of keyword names, or NULL */
    PyObject *deps;      /* tuple of the Nodes found in args (unique, in order), or NULL */
    /* Output: written once by the runner before tg_task_finish publishes the final state
     * (release); read by anyone after seeing that state (acquire). */
    PyObject *value;     /* the result (done) or the exception (failed, cancelled) */
    PyObject *name;      /* the task's name (see `lease` for who holds it) */
    /* The node whose task spawned it (or submitted it from inside a task), or NULL: strong,
     * stored once by the claimer (release), read with tg_node_parent (acquire) by any thread
     * (`parent` property, joins checking ancestry); cleared only when the node dies. */
    _Atomic(NodeObject *) parent;
    /* Children spawned by its task and not synced yet: a list owned by the thread running
     * the task (strong references through `sibling`). */
    NodeObject *kids;
    NodeObject *sibling;
    /* The engine that claimed it: compared, never dereferenced. Relaxed atomic: a reader that
     * sees NULL for a node claimed a moment ago only waits the slower way (polling). */
    _Atomic(const void *) owner;
    uint32_t nkids;          /* children added since the last sync (tg_add_kid's pruning) */
    uint8_t lazy;            /* built lazily (visible to user code before anyone claimed it):
                              * its inputs are dropped under its critical section, so that
                              * _inputs() may read them from another thread (export, save) */
    _Atomic uint8_t seen;    /* result()/exception() was called: its error has been observed */
    _Atomic uint8_t failing; /* its task failed and `value` holds the exception (release) */
    /* node.cancel() was called (TG_CANCEL_ASKED), and found the task running
     * (TG_CANCEL_RUNNING: its task may stop early; its children not started never run).
     * Relaxed: a request; the skip that acts on it is ordered by tg_task_cancel. */
    _Atomic uint8_t cancel;
    /* A covered child (spawned without dependencies: t.covered) carries no reference of its
     * own for the core: its parent's `kids` list holds it in flight. Its runner stores 1 here
     * (release) after its last touch of the node, past the finish; the parent drops its
     * reference only after seeing it (acquire, tg_kid_retired). */
    _Atomic uint8_t retired;
    /* For the children's pruning (tg_prune_kids), read and written by the thread running the
     * node's task only: kids_anywhere, 1 once a child was linked that may finish where this
     * worker cannot see (submitted with tg_submit: one with dependencies, or a lazy node); and
     * kids_progress, tg_pool_progress of this worker at the last walk (its low 32 bits). */
    uint8_t kids_anywhere;
    /* Counted in the dashboard's results held (livefeed.h): set by the worker that finished
     * the task done with a feed attached, before the finish publishes the state; cleared by
     * whoever clears the node (unreachable then: no other thread reads it). */
    uint8_t held;
    uint32_t kids_progress;
    PyObject *retry;         /* the task's (retries, retry_on) tuple, or NULL: no retries.
                              * Fixed from creation. */
    /* A spawned node's lease of its Task (lease.h: made and owned by the spawning worker), or
     * NULL. With a lease, fn, name and retry are borrowed through it (the Task holds them and
     * never changes them), and it is dropped last, when the node dies; without, they are
     * strong references of the node's own. */
    PyObject *lease;
    /* Done callbacks: NULL (none added), a list (strong; changed under the node's critical
     * section) or a marker once they ran. See callbacks.c for the hand-off with the finisher. */
    _Atomic(PyObject *) callbacks;
    PyObject *weakreflist;
    /* The arguments, inline (one object per node, not two: fewer allocations and fewer
     * objects for the cyclic collector to walk); called with vectorcall straight from here.
     * Set to NULL once the node has run. */
    PyObject *args[1];
};

#define NODE_OF(task) ((NodeObject *)((char *)(task) - offsetof(NodeObject, t)))

static inline NodeObject *tg_node_parent(const NodeObject *n) {
    /* Acquire: pairs with the release store of the claimer (tg_node_set_parent). */
    return atomic_load_explicit(&((NodeObject *)n)->parent, memory_order_acquire);
}
/* Makes p (a strong reference is taken) the parent of n, which the caller just claimed. */
static inline void tg_node_set_parent(NodeObject *n, NodeObject *p) {
    Py_INCREF(p);
    /* Release: pairs with the acquire in tg_node_parent. */
    atomic_store_explicit(&n->parent, p, memory_order_release);
}


enum { TG_CANCEL_ASKED = 1, TG_CANCEL_RUNNING = 2 };

/* The Node type object is defined with its methods at the top (node.c); the layers below
 * only compare a type with its address. */
extern PyTypeObject TG_NodeType;
#define Node_Check(o) Py_IS_TYPE((o), &TG_NodeType)

/* A worker's cache of node memory (noderec.c): the blocks of nodes it freed, to build its next
 * nodes in, instead of the allocator and the collector's bookkeeping (CPython's own free
 * lists do the same for its types). Only nodes of TG_NODE_CACHED_SLOTS argument slots: every
 * node with 1 or 2 arguments is allocated with 2, one size class (256 bytes) for all. A cached
 * block is untracked by the collector (which then never visits it) and holds no reference;
 * it is linked through `sibling`. Owned by its worker's thread; released at its exit. */
#define TG_NODE_CACHED_SLOTS 2
#define TG_NODE_CACHE_MAX 128
typedef struct {
    NodeObject *head;
    int count;
} tg_node_cache;
/* A NEW node's memory of `slots` argument slots (its header initialised as a new object's,
 * its fields not), from c when it has one; NULL with MemoryError. */
NodeObject *tg_node_alloc(tg_node_cache *c, Py_ssize_t slots);
/* Frees a node's memory (untracked, fields cleared): into c when there is room and the block
 * is one c can reuse and this thread owns, else to the allocator. c may be NULL. */
void tg_node_free(tg_node_cache *c, NodeObject *n);
/* Frees every block of c (a worker's exit). */
void tg_node_cache_release(tg_node_cache *c);

/* A lazy node, just made, gives up its owner thread (free-threaded builds): whichever
 * thread drops its last reference frees it at once (see noderec.c). */
void tg_node_unown(NodeObject *n);
/* The same for any object op that only the caller has seen (count 1, made by this thread):
 * whichever thread drops its last reference frees it at once (and runs its finalizer there),
 * instead of queueing it to this thread. A fatal error if op is already shared. */
void tg_unown(PyObject *op);
/* The Nodes of `nodes`, a list or a tuple, to read in place (PySequence_Fast_ITEMS): the tuple
 * itself (immutable; its items stay alive while it does), or a copy of the list (a list's items
 * can change under us: no borrowed reads of it). A new reference, or NULL with TypeError naming
 * `who` (anything but an exact list or tuple, or an item that is not a Node). */
PyObject *tg_nodes_in_place(PyObject *nodes, const char *who);
/* node.cancel() was called on n or on a task that spawned it (the flags only). */
int tg_node_cancel_asked(NodeObject *n);
/* The same, or n's run was cancelled: what taskgraph.cancelled() answers. */
int tg_node_cancel_requested(NodeObject *n);
/* Its key, e.g. "fib-3.1041": the task's name, the number of the thread that made the node
 * and that thread's counter (given when the node is made). */
PyObject *tg_node_key(NodeObject *n);
/* A message about n: fmt's first conversion must be %U, and n's key goes there (no argument
 * for it); the other conversions take the arguments, as in PyUnicode_FromFormat. New
 * reference, or NULL with an error. */
PyObject *tg_node_format(NodeObject *n, const char *fmt, ...);
/* Raises exc_type with tg_node_format's message (or the error that building it raised).
 * Returns -1. */
int tg_err_node(PyObject *exc_type, NodeObject *n, const char *fmt, ...);
/* The exception a waiter raises for exc: a copy with its own traceback (see noderec.c). New
 * reference; never fails (at worst exc itself). */
PyObject *tg_exception_copy(PyObject *exc);
/* The value (new reference) or NULL with (a copy of) the node's exception raised; marks it
 * seen. The node must have finished. */
PyObject *tg_node_outcome(NodeObject *n);
/* Drops the inputs of a node that has run (or will never run). */
void tg_node_drop_inputs(NodeObject *n);
/* (fn, args tuple, number of positional args, kwnames or None, retries, retry_on or None) of a
 * lazy node whose inputs are still there, None if they were dropped (it ran); read under the
 * node's critical section. */
PyObject *tg_node_inputs(NodeObject *n);
/* Clears the argument slots (tp_clear, and after the node ran). */
void tg_node_clear_args(NodeObject *n);
/* Whether dropping one reference to o, held by this thread, surely leaves o alive, so that
 * no Python code (a finalizer) can run in that Py_DECREF: another reference is held by this
 * thread (free-threaded CPython: o is ours and its local count, which only its owner thread
 * changes, is above 1; with the GIL, held, its count is). */
static inline int tg_surely_not_last(PyObject *o) {
#ifdef Py_GIL_DISABLED
    return _Py_IsOwnedByCurrentThread(o) && o->ob_ref_local > 1;
#else
    return Py_REFCNT(o) > 1;
#endif
}
/* Takes the children no sync needs any more off parent's list and returns them (a chain
 * through `sibling`, strong references), or NULL (see tg_add_kid). parent's task runs on
 * worker w of pool; `first`: the first walk since parent's last sync. */
NodeObject *tg_prune_kids(NodeObject *parent, int first, tg_pool *pool, int w);
/* Adds n (just claimed by parent's thread) to parent's children (a strong reference). At
 * powers of two from 64 children, the finished ones are taken off the list (tg_prune_kids)
 * and returned, or NULL: the caller drops them after it is done with the list (tg_drop_kids,
 * worker.h), since dropping them can run Python code. parent's task runs on worker w of
 * pool, and n was pushed onto that worker's deque; pool is NULL for a child that may finish
 * anywhere (tg_submit's). */
static inline NodeObject *tg_add_kid(NodeObject *parent, NodeObject *n, tg_pool *pool, int w) {
    n->sibling = parent->kids;
    parent->kids = (NodeObject *)Py_NewRef((PyObject *)n);
    if (!pool) parent->kids_anywhere = 1;
    /* Pruned when the count of children added since the last sync reaches a power of two
     * from 64: never decremented by removals, so a scan of at most c nodes comes after c/2
     * additions whatever it removed (amortised O(1) per spawn; counting the list's length
     * instead rescanned a long list after every few removals). */
    uint32_t c = ++parent->nkids;
    return c < 64 || (c & (c - 1)) ? NULL : tg_prune_kids(parent, c == 64, pool, w);
}
/* The runner of n is done with it (see `retired`): called last, after its finish, for a
 * covered child; no-op for others. `covered` is n->t.covered read before the finish. */
static inline void tg_node_retire(NodeObject *n, int covered) {
    /* Release: pairs with the acquire load in tg_kid_retired; every access of the runner to
     * n happens before the parent lets go of it. */
    if (covered) atomic_store_explicit(&n->retired, 1, memory_order_release);
}
/* Whether the parent may drop its reference to child k: k is not a covered child, or its
 * runner has retired it. Only for a finished k (or one never handed out). */
static inline int tg_kid_retired(NodeObject *k) {
    /* Acquire: pairs with tg_node_retire. */
    return !k->t.covered || atomic_load_explicit(&k->retired, memory_order_acquire);
}

#endif
