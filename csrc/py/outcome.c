/* A Node's outcome: waiting for it by the means that fit the calling thread, and reading it
 * (result(), exception() and the rest of outcome.h). The Node type itself is node.c. */
#include "outcome.h"
#include "callbacks.h"

#include <time.h>

static void sleep_detached(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    Py_BEGIN_ALLOW_THREADS
    nanosleep(&ts, NULL);
    Py_END_ALLOW_THREADS
}

int tg_node_wait_external(NodeObject *n, double timeout) {
    double delay = 0.0002, waited = 0.0;
    if (tg_engine_check_owner(n) < 0) return -1; /* a node of a run made before fork() */
    while (tg_task_state(&n->t) < TG_DONE) {
        if (PyErr_CheckSignals() < 0) return -1;
        if (timeout >= 0 && waited >= timeout) {
            PyObject *t = PyFloat_FromDouble(timeout);
            if (t) tg_err_node(PyExc_TimeoutError, n, "node %U not done after %R s", t);
            Py_XDECREF(t);
            return -1;
        }
        double step = delay;
        if (timeout >= 0 && waited + step > timeout) step = timeout - waited;
        sleep_detached(step);
        waited += step;
        delay = delay * 2 < 0.02 ? delay * 2 : 0.02;
    }
    return 0;
}

/* ---------------------------------------------------------------- waiting */

static PyObject *call_hook(PyObject *hook, NodeObject *n, double timeout) {
    if (!hook) {
        PyErr_SetString(PyExc_RuntimeError, "taskgraph._core is not configured");
        return NULL;
    }
    PyObject *list = PyList_New(1);
    if (!list) return NULL;
    PyList_SET_ITEM(list, 0, Py_NewRef((PyObject *)n));
    PyObject *r;
    if (hook == TG.hook_compute_lazy) {
        PyObject *t = timeout >= 0 ? PyFloat_FromDouble(timeout) : Py_NewRef(Py_None);
        r = t ? PyObject_CallFunctionObjArgs(hook, list, t, NULL) : NULL;
        Py_XDECREF(t);
    } else {
        r = PyObject_CallOneArg(hook, list);
    }
    Py_DECREF(list);
    return r;
}

/* A wait on a worker thread outside any task (a done callback, a finalizer, a note the engine
 * writes on an exception: code that runs as no task) for a node of that worker's own
 * scheduler: the worker would block instead of running tasks, and the node may need exactly
 * this one (a task suspended below this code on the same thread, as a parent is below a
 * child run inside its join, or the only worker), so it could wait forever. Refused. */
static int refuse_wait_as_no_task(Runner *W, NodeObject *n) {
    return tg_err_node(TG.TaskgraphError, n,
                       "waiting for node %U on worker %d of %U outside any task (in a done "
                       "callback, a finalizer or an exception's note): that worker would block "
                       "on its own scheduler's node, which may need it, and could wait forever; "
                       "add a done callback to the node instead of waiting", W->index, W->runs->label);
}

/* Waits until n has finished, by the means that fit this thread (see result()). */
static int node_wait(NodeObject *n, double timeout, int has_timeout) {
    tg_tls *tls = &TG_TLS;
    Runner *W = tls->worker;
    int st = tg_task_state(&n->t);
    int in_task = W && W->current;
    /* Relaxed owner (see noderec.h): NULL for a node claimed a moment ago means "not ours". */
    int ours = in_task && atomic_load_explicit(&n->owner, memory_order_relaxed) == (void *)W->engine;
    if (has_timeout && in_task && ((st == TG_NEW && !tls->serial) || ours)) {
        PyObject *cur = tg_node_key(W->current);
        if (cur)
            tg_err_node(TG.TaskgraphError, n,
                        "result(timeout=...) of %U inside task %U: a join inside a worker runs "
                        "other work until the node is done and cannot time out", cur);
        Py_XDECREF(cur);
        return -1;
    }
    if (st >= TG_DONE) return 0;
    /* Relaxed owner, as above. A lazy node is refused by the compute (scheduler.py). */
    if (W && !in_task && st != TG_NEW && atomic_load_explicit(&n->owner, memory_order_relaxed) == (void *)W->engine)
        return refuse_wait_as_no_task(W, n);
    /* Inside a task, a node that is running or queued anywhere (this scheduler, another one,
     * claimed inline by another thread) is joined: the worker runs other work meanwhile, so
     * nothing it holds in its own deque waits for it. Serial mode changes only how a NEW node
     * runs (here, at once). */
    if (in_task && !has_timeout && (st != TG_NEW || !tls->serial)) return tg_join(W, n);
    if (tls->backend && !tls->serial) { /* a task of another backend (dask) waits */
        PyObject *t = has_timeout ? PyFloat_FromDouble(timeout) : Py_NewRef(Py_None);
        PyObject *r = t ? PyObject_CallMethodObjArgs(tls->backend, TG.str_wait, (PyObject *)n, t, NULL) : NULL;
        Py_XDECREF(t);
        if (!r) return -1;
        Py_DECREF(r);
        return tg_task_state(&n->t) >= TG_DONE ? 0 : tg_node_wait_external(n, has_timeout ? timeout : -1.0);
    }
    if (st == TG_NEW) {
        PyObject *r = call_hook(tls->serial ? TG.hook_run_serially : TG.hook_compute_lazy, n, timeout);
        if (!r) return -1;
        Py_DECREF(r);
    } else {
        tg_task_want(&n->t); /* claimed by a compute: its cancel must not skip it under us */
    }
    return tg_node_wait_external(n, has_timeout ? timeout : -1.0);
}

static int parse_timeout(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                         double *timeout, int *has) {
    PyObject *t = nargs > 0 ? args[0] : NULL;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "takes at most one argument (timeout)");
        return -1;
    }
    for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
        if (t || PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "timeout") != 0) {
            PyErr_Format(PyExc_TypeError, "unexpected keyword argument %R", PyTuple_GET_ITEM(kwnames, i));
            return -1;
        }
        t = args[nargs + i];
    }
    *has = t && t != Py_None;
    *timeout = -1.0;
    if (*has) {
        if (!PyNumber_Check(t) || PyBool_Check(t)) {
            PyErr_Format(PyExc_TypeError, "timeout must be a number >= 0 or None, got %.100s %R",
                         Py_TYPE(t)->tp_name, t);
            return -1;
        }
        *timeout = PyFloat_AsDouble(t);
        if (*timeout == -1.0 && PyErr_Occurred()) return -1;
        if (*timeout < 0 || *timeout != *timeout) {
            PyErr_Format(PyExc_ValueError, "timeout must be a number >= 0 or None, got %R", t);
            return -1;
        }
    }
    return 0;
}

/* n's outcome was just read. If that happened in the task that spawned n, on its thread (the
 * only one that touches its list of children), the first few entries of the list are looked
 * at: n and those that finished with a result (no sync needs them) are forgotten, once their
 * runner has retired them (tg_kid_retired): a loop that spawns, joins and drops one child at a time (with or without Node
 * arguments) keeps about one alive, not the up to 64 that tg_add_kid's pruning (worker.c)
 * would. n itself lives on while the caller holds it. */
static void forget_read_kid(NodeObject *n) {
    NodeObject *p = tg_node_parent(n);
    if (!p) return;
    Runner *W = TG_TLS.worker;
    /* p->kids is read only on the thread running p (checked first: no race on it). */
    if (!W || W->current != p) return;
    NodeObject **link = &p->kids, *gone = NULL;
    for (int i = 0; i < 4 && *link; i++) {
        NodeObject *k = *link;
        /* A covered child still held by its runner (not retired yet) stays on the list. */
        if ((k != n && tg_task_state(&k->t) != TG_DONE) || !tg_kid_retired(k)) {
            link = &k->sibling;
            continue;
        }
        *link = k->sibling;
        if (k == n || tg_surely_not_last((PyObject *)k)) { /* the caller holds n */
            k->sibling = NULL;
            Py_DECREF(k); /* the list's reference: not the last one, no Python code runs */
        } else {
            k->sibling = gone;
            gone = k;
        }
    }
    /* The others' references, dropped once the walk is over (a finalizer may spawn, or
     * prune) and as no task. */
    if (gone) tg_drop_kids(W, gone);
}

PyObject *tg_node_result_m(NodeObject *n, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs || kwnames) {
        double timeout;
        int has;
        if (parse_timeout(args, nargs, kwnames, &timeout, &has) < 0) return NULL;
        if (node_wait(n, timeout, has) < 0) return NULL;
    } else if (tg_task_state(&n->t) < TG_DONE && node_wait(n, -1.0, 0) < 0) { /* a join, mostly */
        return NULL;
    }
    PyObject *r = tg_node_outcome(n);
    forget_read_kid(n);
    return r;
}

PyObject *tg_node_exception_m(NodeObject *n, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    double timeout;
    int has;
    if (parse_timeout(args, nargs, kwnames, &timeout, &has) < 0) return NULL;
    if (node_wait(n, timeout, has) < 0) return NULL;
    atomic_store_explicit(&n->seen, 1, memory_order_relaxed); /* see tg_node_outcome */
    forget_read_kid(n);
    if (tg_task_state(&n->t) == TG_DONE) Py_RETURN_NONE;
    return Py_NewRef(n->value);
}

/* _wait(): waits like exception() (inside a task: joins) without reading the outcome, so a
 * failure stays unobserved: its parent's sync still reports it (tg.wait, tg.as_completed). */
PyObject *tg_node_wait_unread_m(NodeObject *n, PyObject *unused) {
    (void)unused;
    if (node_wait(n, -1.0, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

/* _peek_exception(): the exception of a finished node (failed or cancelled), or None; never
 * waits, and does not mark the failure observed (a display: taskgraph/trace/notebook.py). */
PyObject *tg_node_peek_exception_m(NodeObject *n, PyObject *unused) {
    (void)unused;
    return Py_NewRef(tg_task_state(&n->t) > TG_DONE ? n->value : Py_None);
}

/* add_done_callback(fn): a callback run at once here runs as no task, as it does on the
 * finishing thread (a task called in it builds a lazy node). */
PyObject *tg_node_add_done_callback_m(NodeObject *n, PyObject *fn) {
    NodeObject *cur = tg_suspend_task();
    PyObject *r = tg_node_add_done_callback(n, fn);
    tg_resume_task(cur);
    return r;
}

PyObject *tg_nodes_first_error(PyObject *nodes) {
    PyObject *seq = tg_nodes_in_place(nodes, "first_error()");
    if (!seq) return NULL;
    PyObject *first = NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        NodeObject *n = (NodeObject *)PySequence_Fast_GET_ITEM(seq, i); /* held by seq */
        PyObject *exc;
        if (tg_task_state(&n->t) < TG_DONE) { /* not finished: exception()'s own wait */
            exc = tg_node_exception_m(n, NULL, 0, NULL);
        } else { /* node_exception without the call: seen, forgotten, its exception */
            atomic_store_explicit(&n->seen, 1, memory_order_relaxed); /* see tg_node_outcome */
            forget_read_kid(n);
            exc = tg_task_state(&n->t) == TG_DONE ? Py_NewRef(Py_None) : Py_NewRef(n->value);
        }
        if (!exc) {
            Py_XDECREF(first);
            Py_DECREF(seq);
            return NULL;
        }
        if (exc != Py_None && !first) first = exc;
        else Py_DECREF(exc);
    }
    Py_DECREF(seq);
    return first ? first : Py_NewRef(Py_None);
}

PyObject *tg_nodes_gather(PyObject *nodes) {
    if (!PyTuple_CheckExact(nodes)) {
        PyErr_Format(PyExc_TypeError, "gather needs a tuple, got %.100s", Py_TYPE(nodes)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(nodes);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!Node_Check(PyTuple_GET_ITEM(nodes, i))) return Py_NewRef(Py_NotImplemented);
    PyObject *first = tg_nodes_first_error(nodes); /* joins each, in order */
    if (!first) return NULL;
    if (first != Py_None) {
        PyErr_SetRaisedException(tg_exception_copy(first));
        Py_DECREF(first);
        return NULL;
    }
    Py_DECREF(first);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) /* every one is done: its value is fixed */
        PyList_SET_ITEM(out, i, Py_NewRef(((NodeObject *)PyTuple_GET_ITEM(nodes, i))->value));
    return out;
}

PyObject *tg_nodes_not_done(PyObject *nodes) {
    PyObject *seq = tg_nodes_in_place(nodes, "not_done()");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), left = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) left += tg_task_state(&((NodeObject *)items[i])->t) < TG_DONE;
    if (left == n && seq == nodes) return seq; /* a tuple, none finished (a finished one stays so) */
    PyObject *out = PyTuple_CheckExact(nodes) ? PyTuple_New(left) : PyList_New(left);
    /* Fewer now (finished meanwhile) leaves the tail unfilled: cut below. */
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; out && i < n && k < left; i++)
        if (tg_task_state(&((NodeObject *)items[i])->t) < TG_DONE) {
            if (PyTuple_CheckExact(out)) PyTuple_SET_ITEM(out, k, Py_NewRef(items[i]));
            else PyList_SET_ITEM(out, k, Py_NewRef(items[i]));
            k++;
        }
    Py_DECREF(seq);
    if (out && k < left) Py_SETREF(out, PyTuple_CheckExact(out) ? PyTuple_GetSlice(out, 0, k)
                                                                : PyList_GetSlice(out, 0, k));
    return out;
}
