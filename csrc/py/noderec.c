/* The node record (noderec.h): what every layer above reads and writes of a node, apart from
 * the Node type's Python methods (node.c): its key and messages about it, its outcome, its
 * inputs, its cancel requests, its children. */
#include "noderec.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* ---------------------------------------------------------------- the node cache */

/* The memory of a cached block, for the sanitizer: all of it but the link. Under the
 * AddressSanitizer build a touch of a cached node (a use after free) is reported; CPython's
 * own code (the collector's walk over the heap, which reads the header of every block to see
 * that it is not tracked) is not instrumented. */
#define CACHED_BYTES ((size_t)_PyObject_VAR_SIZE(&TG_NodeType, TG_NODE_CACHED_SLOTS))

NodeObject *tg_node_alloc(tg_node_cache *c, Py_ssize_t slots) {
    NodeObject *n = c ? c->head : NULL;
    if (n && slots >= 1 && slots <= TG_NODE_CACHED_SLOTS) {
        UNPOISON(n, CACHED_BYTES);
        c->head = n->sibling;
        c->count--;
        /* A new object's header, as PyObject_GC_NewVar writes it: its counts (one reference,
         * this thread's), its flags and lock cleared, untracked (the caller tracks it once its
         * fields are set), the reference tracer told (_Py_NewReference); its type stays. */
        _Py_NewReference((PyObject *)n);
        Py_SET_SIZE(n, slots);
        return n;
    }
    Py_ssize_t cap = slots >= 1 && slots <= TG_NODE_CACHED_SLOTS ? TG_NODE_CACHED_SLOTS : slots;
    n = PyObject_GC_NewVar(NodeObject, &TG_NodeType, cap);
    if (n) Py_SET_SIZE(n, slots);
    return n;
}

void tg_node_free(tg_node_cache *c, NodeObject *n) {
    Py_ssize_t slots = Py_SIZE(n);
    /* Ours to reuse: a block of the cached size, owned by this thread (biased reference
     * counting: a node another thread made, or one given up to whichever thread drops it last,
     * goes back to the allocator, which returns the memory to the thread that holds it). */
    if (c && c->count < TG_NODE_CACHE_MAX && slots >= 1 && slots <= TG_NODE_CACHED_SLOTS
#ifdef Py_GIL_DISABLED
        && _Py_IsOwnedByCurrentThread((PyObject *)n)
#endif
    ) {
        n->sibling = c->head;
        c->head = n;
        c->count++;
        POISON(n, CACHED_BYTES);
        UNPOISON(&n->sibling, sizeof n->sibling);
        return;
    }
    PyObject_GC_Del(n);
}

void tg_node_cache_release(tg_node_cache *c) {
    while (c->head) {
        NodeObject *n = c->head;
        UNPOISON(n, CACHED_BYTES);
        c->head = n->sibling;
        PyObject_GC_Del(n);
    }
    c->count = 0;
}

void tg_unown(PyObject *op) {
#ifdef Py_GIL_DISABLED
    if (!_Py_IsOwnedByCurrentThread(op) || Py_REFCNT(op) != 1)
        Py_FatalError("taskgraph: tg_unown() of an object already shared");
    op->ob_tid = _Py_UNOWNED_TID;
    op->ob_ref_local = 0;
    op->ob_ref_shared = _Py_REF_SHARED(1, _Py_REF_MERGED);
#else
    (void)op;
#endif
}

void tg_node_unown(NodeObject *n) {
#ifdef Py_GIL_DISABLED
    /* Free-threaded CPython frees an object on the thread that owns it: a last reference
     * dropped by another thread queues the object to its owner, freed when the owner next
     * runs Python code. A lazy node is made by the user's thread and dropped by the worker
     * that ran its last consumer (its dependency tuple too), so it, and the result it holds,
     * would wait for the user's thread to wake up. Here both give up their owner, as CPython
     * itself does when an owner drops its last local reference while others hold shared ones
     * (Py_SET_REFCNT from a non-owner thread writes the same state): whichever thread drops
     * the last reference frees them at once. Only for objects nobody else has seen yet. */
    tg_unown((PyObject *)n);
    if (n->deps) tg_unown(n->deps);
#else
    (void)n;
#endif
}

PyObject *tg_node_key(NodeObject *n) {
    uint64_t id = n->t.id;
    return PyUnicode_FromFormat("%U-%llu.%llu", n->name, (unsigned long long)(id >> 40),
                                (unsigned long long)(id & 0xFFFFFFFFFFULL));
}

/* fmt's text up to its first %U (no conversion before it), n's key, then the rest of fmt
 * formatted with args (PyUnicode_FromFormatV). */
static PyObject *format_key(NodeObject *n, const char *fmt, va_list args) {
    const char *at = strstr(fmt, "%U");
    PyObject *key = tg_node_key(n);
    PyObject *head = key ? PyUnicode_FromStringAndSize(fmt, at ? at - fmt : 0) : NULL;
    PyObject *tail = head ? PyUnicode_FromFormatV(at ? at + 2 : fmt, args) : NULL;
    PyObject *msg = tail ? PyUnicode_FromFormat("%U%U%U", head, key, tail) : NULL;
    Py_XDECREF(key);
    Py_XDECREF(head);
    Py_XDECREF(tail);
    return msg;
}

PyObject *tg_node_format(NodeObject *n, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    PyObject *msg = format_key(n, fmt, args);
    va_end(args);
    return msg;
}

int tg_err_node(PyObject *exc_type, NodeObject *n, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    PyObject *msg = format_key(n, fmt, args);
    va_end(args);
    if (msg) PyErr_SetObject(exc_type, msg);
    Py_XDECREF(msg);
    return -1;
}

/* The exception to raise for a waiter: a copy of exc, so that each waiter's traceback is its
 * own (raising one shared object from several threads, or again and again, makes its
 * __traceback__ grow and lets threads race on it). The copy has exc's type, args and
 * attributes (copy.copy, as pickling rebuilds an exception), a copy of its notes, its cause,
 * context and original traceback (the task's frames); the waiter's frames are added to the
 * copy only. An exception that cannot be copied that way is rebuilt from its type and args
 * without calling __init__; failing that, exc itself is raised. */
PyObject *tg_exception_copy(PyObject *exc) {
    PyTypeObject *tp = Py_TYPE(exc);
    PyObject *saved = PyErr_GetRaisedException(); /* none expected; kept if there is one */
    PyObject *copy_mod = PyImport_ImportModule("copy");
    PyObject *c = copy_mod ? PyObject_CallMethod(copy_mod, "copy", "O", exc) : NULL;
    Py_XDECREF(copy_mod);
    if (!c || Py_TYPE(c) != tp) {
        Py_XDECREF(c);
        PyErr_Clear();
        PyObject *args = PyObject_GetAttrString(exc, "args");
        c = args && PyTuple_Check(args) ? tp->tp_new(tp, args, NULL) : NULL;
        Py_XDECREF(args);
        PyObject *d = c ? PyObject_GenericGetDict(exc, NULL) : NULL;
        if (!c || Py_TYPE(c) != tp || !d || (PyDict_GET_SIZE(d) && PyObject_SetAttrString(c, "__dict__", d) < 0)) {
            Py_XDECREF(d);
            Py_XDECREF(c);
            PyErr_Clear();
            PyErr_SetRaisedException(saved);
            return Py_NewRef(exc);
        }
        Py_DECREF(d);
    }
    PyObject *notes = NULL;
    if (PyObject_GetOptionalAttr(c, TG.str_notes, &notes) > 0 && PyList_Check(notes)) {
        PyObject *mine = PyList_GetSlice(notes, 0, PY_SSIZE_T_MAX);
        if (!mine || PyObject_SetAttr(c, TG.str_notes, mine) < 0) PyErr_Clear();
        Py_XDECREF(mine);
    }
    Py_XDECREF(notes);
    PyErr_Clear();
    PyObject *tb = PyException_GetTraceback(exc);
    PyException_SetTraceback(c, tb ? tb : Py_None);
    Py_XDECREF(tb);
    PyObject *cause = PyException_GetCause(exc);
    char suppress = ((PyBaseExceptionObject *)exc)->suppress_context;
    PyException_SetCause(c, cause); /* steals cause; sets suppress_context */
    ((PyBaseExceptionObject *)c)->suppress_context = suppress;
    PyException_SetContext(c, PyException_GetContext(exc)); /* steals */
    PyErr_SetRaisedException(saved);
    return c;
}

PyObject *tg_node_outcome(NodeObject *n) {
    /* Relaxed: a flag for the parent's sync on this or a joined thread (see noderec.h). */
    atomic_store_explicit(&n->seen, 1, memory_order_relaxed);
    if (tg_task_state(&n->t) == TG_DONE) return Py_NewRef(n->value);
    PyErr_SetRaisedException(tg_exception_copy(n->value));
    return NULL;
}

void tg_node_clear_args(NodeObject *n) {
    for (Py_ssize_t i = 0; i < Py_SIZE(n); i++) Py_CLEAR(n->args[i]);
}

void tg_node_drop_inputs(NodeObject *n) {
    if (n->lease) n->fn = NULL; /* borrowed through the lease (lease.h) */
    if (!n->lazy && !n->deps) { /* a spawned node: nobody else can read its inputs */
        tg_node_clear_args(n);
        Py_CLEAR(n->kwnames);
        Py_CLEAR(n->fn);
        return;
    }
    /* `dependencies` and _inputs() read these from other threads: swap them out under the
     * node's critical section, release them outside it. */
    PyObject *small[8], **old = Py_SIZE(n) + 3 <= 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)(Py_SIZE(n) + 3));
    if (!old) { /* out of memory: release them inside (their destructors then run under it) */
        Py_BEGIN_CRITICAL_SECTION(n);
        tg_node_clear_args(n);
        Py_CLEAR(n->kwnames);
        Py_CLEAR(n->fn);
        Py_CLEAR(n->deps);
        Py_END_CRITICAL_SECTION();
        return;
    }
    Py_ssize_t k = 0;
    Py_BEGIN_CRITICAL_SECTION(n);
    for (Py_ssize_t i = 0; i < Py_SIZE(n); i++) {
        old[k++] = n->args[i];
        n->args[i] = NULL;
    }
    old[k++] = n->kwnames;
    old[k++] = n->fn;
    old[k++] = n->deps;
    n->kwnames = n->fn = n->deps = NULL;
    Py_END_CRITICAL_SECTION();
    for (Py_ssize_t i = 0; i < k; i++) Py_XDECREF(old[i]);
    if (old != small) PyMem_Free(old);
}

PyObject *tg_node_inputs(NodeObject *n) {
    if (!n->lazy) {
        PyErr_SetString(PyExc_ValueError, "only a node built outside the workers can be exported");
        return NULL;
    }
    PyObject *out = NULL, *args = NULL;
    Py_BEGIN_CRITICAL_SECTION(n);
    if (n->fn) {
        args = PyTuple_New(Py_SIZE(n));
        if (args) {
            for (Py_ssize_t i = 0; i < Py_SIZE(n); i++) PyTuple_SET_ITEM(args, i, Py_NewRef(n->args[i]));
            PyObject *retries = n->retry ? PyTuple_GET_ITEM(n->retry, 0) : NULL;
            PyObject *retry_on = n->retry ? PyTuple_GET_ITEM(n->retry, 1) : Py_None;
            out = retries ? Py_BuildValue("(OOnOOO)", n->fn, args, n->nargs,
                                          n->kwnames ? n->kwnames : Py_None, retries, retry_on)
                          : Py_BuildValue("(OOnOiO)", n->fn, args, n->nargs,
                                          n->kwnames ? n->kwnames : Py_None, 0, Py_None);
        }
    } else {
        out = Py_NewRef(Py_None);
    }
    Py_END_CRITICAL_SECTION();
    Py_XDECREF(args);
    return out;
}

/* ---------------------------------------------------------------- cancel requests */

int tg_node_cancel_asked(NodeObject *n) {
    /* Relaxed: requests (see noderec.h); a late sight only lets the task run a little longer. */
    for (NodeObject *p = n; p; p = tg_node_parent(p))
        if (atomic_load_explicit(&p->cancel, memory_order_relaxed)) return 1;
    return 0;
}

int tg_node_cancel_requested(NodeObject *n) {
    /* Called for a node in flight on this thread: its run is alive. A task that runs although
     * its run was cancelled, because another run wants it (tg_task_want), is not asked to
     * stop by that cancel. */
    tg_run *run = tg_task_run(&n->t);
    return tg_node_cancel_asked(n) || (run && tg_run_is_cancelled(run) && !tg_task_wanted(&n->t));
}

/* ---------------------------------------------------------------- children */

/* Called by tg_add_kid at powers of two from 64 children, unless none of them can have
 * finished since the last call (below): children that no sync needs any more are taken off
 * the list: finished with a result, or finished and their outcome read,
 * and retired by their runner (tg_kid_retired). So a task that spawns and joins many children
 * in a loop, with or without Node arguments (tg_submit links those here too), keeps a bounded
 * number alive. They are returned (linked through `sibling`, each with the list's reference),
 * not dropped here: dropping one can run Python code (a finalizer), which must not run while
 * this walk holds a pointer into the list, nor as the parent's task (the caller drops them
 * with tg_drop_kids, worker.h). */
NodeObject *tg_prune_kids(NodeObject *parent, int first, tg_pool *pool, int w) {
    /* A child on this worker's deque finishes only after leaving it: while the worker's
     * progress stands still, none has finished since the last walk, and the walk (a cache
     * miss per child of a big fan-out, none of them finished) is skipped. A skipped walk only
     * keeps finished children a little longer (a hint read relaxed: tg_pool_progress). */
    if (!parent->kids_anywhere) {
        uint32_t now = (uint32_t)tg_pool_progress(pool, w);
        if (!first && now == parent->kids_progress) return NULL;
        parent->kids_progress = now;
    }
    NodeObject **link = &parent->kids, *pruned = NULL;
    while (*link) {
        NodeObject *k = *link;
        int st = tg_task_state(&k->t);
        /* Relaxed `seen`: set by whoever read the outcome, usually this thread. */
        if ((st == TG_DONE || (st > TG_DONE && atomic_load_explicit(&k->seen, memory_order_relaxed))) &&
            tg_kid_retired(k)) {
            *link = k->sibling;
            k->sibling = pruned;
            pruned = k;
        } else {
            link = &k->sibling;
        }
    }
    return pruned;
}

PyObject *tg_nodes_in_place(PyObject *nodes, const char *who) {
    PyObject *seq = PyTuple_CheckExact(nodes) ? Py_NewRef(nodes)
                    : PyList_CheckExact(nodes) ? PyList_GetSlice(nodes, 0, PY_SSIZE_T_MAX) : NULL;
    if (!seq && !PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s takes a list or tuple of Nodes", who);
    for (Py_ssize_t i = 0; seq && i < PySequence_Fast_GET_SIZE(seq); i++)
        if (Py_TYPE(PySequence_Fast_GET_ITEM(seq, i)) != &TG_NodeType) {
            PyErr_Format(PyExc_TypeError, "%s takes a list or tuple of Nodes, found %.100s", who,
                         Py_TYPE(PySequence_Fast_GET_ITEM(seq, i))->tp_name);
            Py_CLEAR(seq);
        }
    return seq;
}
