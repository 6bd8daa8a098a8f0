/* The Future protocol on Node: done callbacks (add_done_callback, remove_done_callback),
 * cancelled(), running(), `await node` (delegated to taskgraph.executor.aio) and the notebook's
 * _repr_html_ (delegated to taskgraph.trace.notebook).
 *
 * Callbacks live in a list made on the first add_done_callback (n->callbacks, NULL until
 * then). The list is changed only under the node's critical section. When the node finishes,
 * whoever takes the list out (exchanging it for FIRED, under the critical section) runs every
 * callback in it, once; a callback added after that runs at once in the adding thread. A
 * callback added while the node finishes: the adder stores its list, then (seq_cst fence)
 * looks at the state; the finisher stores the state, then (seq_cst fence, tg_callbacks_fire)
 * looks at the list. At least one of them sees the other's store and takes the list out;
 * only one gets it. */
#include "callbacks.h"

/* The list was taken out and run: later callbacks run at once. Never dereferenced. */
static char fired_tag;
#define FIRED ((PyObject *)&fired_tag)

/* Reports the raised exception of callback fn through sys.unraisablehook. */
static void report(NodeObject *n, PyObject *fn) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *exc = PyErr_GetRaisedException();
    PyObject *key = tg_node_key(n);
    PyErr_Clear(); /* the key's error, if any: the callback's own is reported */
    PyErr_SetRaisedException(exc);
    if (key) {
        PyErr_FormatUnraisable("Exception ignored in done callback %R of taskgraph node %U", fn, key);
        Py_DECREF(key);
        return;
    }
#endif
    PyErr_WriteUnraisable(fn);
}

/* Calls fn(n). An Exception goes to sys.unraisablehook: it never reaches the finishing worker
 * nor add_done_callback's caller. Any other BaseException (KeyboardInterrupt, SystemExit) is
 * not swallowed: in the thread that added the callback (`adder`: run at once) it is returned
 * (a new reference) to be raised there once the other callbacks ran, as concurrent.futures
 * lets it through; on the thread that finished the node (a worker, a cancel() or a close()),
 * which must go on, it is reported the same way, and a KeyboardInterrupt also interrupts the
 * main thread as Ctrl-C would (a compute waiting there stops). NULL otherwise. */
static PyObject *call_one(NodeObject *n, PyObject *fn, int adder) {
    PyObject *r = PyObject_CallOneArg(fn, (PyObject *)n);
    if (r) {
        Py_DECREF(r);
        return NULL;
    }
    int base = !PyErr_ExceptionMatches(PyExc_Exception);
    if (base && adder) return PyErr_GetRaisedException();
    int interrupt = base && PyErr_ExceptionMatches(PyExc_KeyboardInterrupt);
    report(n, fn);
    if (interrupt) PyErr_SetInterrupt();
    return NULL;
}

/* Takes the list out (once): the list (new reference), or NULL if it was taken already. */
static PyObject *take_list(NodeObject *n) {
    PyObject *cb;
    Py_BEGIN_CRITICAL_SECTION(n);
    /* Relaxed: under the node's critical section (the fences order the first look). */
    cb = atomic_exchange_explicit(&n->callbacks, FIRED, memory_order_relaxed);
    Py_END_CRITICAL_SECTION();
    return cb == FIRED ? NULL : cb;
}

int tg_callbacks_fire_slow(NodeObject *n, int adder) {
    PyObject *cb = take_list(n);
    if (!cb) return 0;
    PyObject *saved = PyErr_GetRaisedException();
    PyObject *base = NULL; /* the adder's first KeyboardInterrupt / SystemExit: the rest run */
    Py_INCREF(n); /* a callback may drop the last other reference */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cb); i++) {
        PyObject *b = call_one(n, PyList_GET_ITEM(cb, i), adder); /* the list is ours alone */
        if (b && !base) base = b;
        else Py_XDECREF(b);
    }
    Py_DECREF(n);
    Py_DECREF(cb);
    if (base) {
        Py_XDECREF(saved); /* none expected in the adder */
        PyErr_SetRaisedException(base);
        return -1;
    }
    PyErr_SetRaisedException(saved);
    return 0;
}

int tg_callbacks_traverse(NodeObject *n, visitproc visit, void *arg) {
    /* Relaxed: the collector runs with the world stopped. */
    PyObject *cb = atomic_load_explicit(&n->callbacks, memory_order_relaxed);
    if (cb && cb != FIRED) Py_VISIT(cb);
    return 0;
}

void tg_callbacks_clear(NodeObject *n) {
    /* Relaxed, a load and a store (no locked exchange): the node is unreachable (collected or
     * deallocated), so no other thread uses it; cleared before the list is dropped, as
     * Py_CLEAR does. A node freed unfinished never calls its callbacks (like a future that
     * never completes). */
    PyObject *cb = atomic_load_explicit(&n->callbacks, memory_order_relaxed);
    atomic_store_explicit(&n->callbacks, NULL, memory_order_relaxed);
    if (cb && cb != FIRED) Py_DECREF(cb);
}

PyObject *tg_node_add_done_callback(NodeObject *n, PyObject *fn) {
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "add_done_callback needs a callable, got %.100s %R",
                     Py_TYPE(fn)->tp_name, fn);
        return NULL;
    }
    if (tg_task_state(&n->t) >= TG_DONE) {
        PyObject *b = call_one(n, fn, 1);
        if (b) {
            PyErr_SetRaisedException(b);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *fresh = PyList_New(0); /* made outside the critical section (it may collect) */
    if (!fresh) return NULL;
    int now = 0, err = 0;
    Py_BEGIN_CRITICAL_SECTION(n);
    /* Relaxed: the list is changed only under the node's critical section. */
    PyObject *cb = atomic_load_explicit(&n->callbacks, memory_order_relaxed);
    if (cb == FIRED) {
        now = 1;
    } else {
        if (!cb) {
            cb = fresh;
            fresh = NULL;
            atomic_store_explicit(&n->callbacks, cb, memory_order_relaxed); /* see the fence below */
        }
        err = PyList_Append(cb, fn) < 0;
    }
    Py_END_CRITICAL_SECTION();
    Py_XDECREF(fresh);
    if (err) return NULL;
    if (now) {
        PyObject *b = call_one(n, fn, 1);
        if (b) {
            PyErr_SetRaisedException(b);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    /* seq_cst fence: pairs with the fence in tg_callbacks_fire (after the finisher's store of
     * the final state): either it sees our list, or we see its state and run the list. */
    atomic_thread_fence(memory_order_seq_cst);
    if (tg_task_state(&n->t) >= TG_DONE && tg_callbacks_fire_slow(n, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

PyObject *tg_node_remove_done_callback(NodeObject *n, PyObject *fn) {
    /* Which entries equal fn is decided outside the critical section (== can run Python
     * code); the entries found are then removed by identity under it. */
    PyObject *copy = NULL;
    Py_BEGIN_CRITICAL_SECTION(n);
    PyObject *cb = atomic_load_explicit(&n->callbacks, memory_order_relaxed); /* see add */
    if (cb && cb != FIRED) copy = PyList_GetSlice(cb, 0, PY_SSIZE_T_MAX);
    Py_END_CRITICAL_SECTION();
    if (!copy) return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    PyObject *match = PyList_New(0);
    for (Py_ssize_t i = 0; match && i < PyList_GET_SIZE(copy); i++) {
        PyObject *item = PyList_GET_ITEM(copy, i);
        int eq = item == fn ? 1 : PyObject_RichCompareBool(item, fn, Py_EQ);
        if (eq < 0 || (eq && PyList_Append(match, item) < 0)) Py_CLEAR(match);
    }
    Py_ssize_t removed = 0;
    if (match && PyList_GET_SIZE(match)) {
        PyObject *keep = PyList_New(0), *gone = PyList_New(0);
        int err = !keep || !gone;
        Py_BEGIN_CRITICAL_SECTION(n);
        PyObject *cb = atomic_load_explicit(&n->callbacks, memory_order_relaxed); /* see add */
        if (!err && cb && cb != FIRED) {
            for (Py_ssize_t i = 0; !err && i < PyList_GET_SIZE(cb); i++) {
                PyObject *item = PyList_GET_ITEM(cb, i);
                int found = 0;
                for (Py_ssize_t j = 0; !found && j < PyList_GET_SIZE(match); j++)
                    found = PyList_GET_ITEM(match, j) == item;
                err = PyList_Append(found ? gone : keep, item) < 0;
                removed += found;
            }
            /* Items moved, none released here: `gone` releases them outside. */
            if (!err) err = PyList_SetSlice(cb, 0, PY_SSIZE_T_MAX, keep) < 0;
        }
        Py_END_CRITICAL_SECTION();
        Py_XDECREF(keep);
        Py_XDECREF(gone);
        if (err) Py_CLEAR(match);
    }
    Py_DECREF(copy);
    if (!match) return NULL;
    Py_DECREF(match);
    return PyLong_FromSsize_t(removed);
}

PyObject *tg_node_cancelled(NodeObject *n, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(tg_task_state(&n->t) == TG_CANCELLED);
}

PyObject *tg_node_running(NodeObject *n, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(tg_task_state(&n->t) == TG_RUNNING);
}

/* Calls taskgraph.<module>.<name>(n). */
static PyObject *call_helper(const char *module, const char *name, NodeObject *n) {
    PyObject *mod = PyImport_ImportModule(module);
    if (!mod) return NULL;
    PyObject *r = PyObject_CallMethod(mod, name, "O", (PyObject *)n);
    Py_DECREF(mod);
    return r;
}

PyObject *tg_node_await(NodeObject *n) {
    PyObject *coro = call_helper("taskgraph.executor.aio", "wait_node", n);
    if (!coro) return NULL;
    PyObject *it = PyObject_CallMethod(coro, "__await__", NULL);
    Py_DECREF(coro);
    return it;
}

PyAsyncMethods tg_node_as_async = {
    .am_await = (unaryfunc)tg_node_await,
};

PyObject *tg_node_repr_html(NodeObject *n, PyObject *unused) {
    (void)unused;
    return call_helper("taskgraph.trace.notebook", "node_html", n);
}
