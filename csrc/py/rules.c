/* The rules of running a task, for every backend (see rules.h): the one task runner, the
 * notes on a failed task's exception, the retry rule, and the words of a node that never ran
 * because of its dependency. The native worker loop calls tg_run_body; the dask backend calls
 * core._run_task (below), which runs the same code with a Python object as its backend. */
#include "rules.h"

/* ---------------------------------------------------------------- notes and retries */

void tg_note_origin(PyObject *exc, PyObject *key, PyObject *where) {
    PyObject *mark = NULL, *note = NULL, *r = NULL;
    if (PyObject_GetOptionalAttr(exc, TG.str_taskgraph_task, &mark) < 0) goto done;
    if (mark && mark != Py_None) goto done;
    if (PyObject_SetAttr(exc, TG.str_taskgraph_task, key) < 0) goto done;
    note = PyUnicode_FromFormat("taskgraph: raised by task %U %U", key, where);
    if (note) r = PyObject_CallMethodOneArg(exc, TG.str_add_note, note);
done:
    PyErr_Clear();
    Py_XDECREF(mark);
    Py_XDECREF(note);
    Py_XDECREF(r);
}

void tg_note_attempts(PyObject *exc, PyObject *key, int attempts, PyObject *retries) {
    PyObject *note = PyUnicode_FromFormat("taskgraph: task %U failed %d times (retries=%S)", key,
                                          attempts, retries);
    PyObject *r = note ? PyObject_CallMethodOneArg(exc, TG.str_add_note, note) : NULL;
    PyErr_Clear();
    Py_XDECREF(note);
    Py_XDECREF(r);
}

void tg_note_sibling(PyObject *exc, PyObject *pkey, PyObject *kkey, PyObject *kexc) {
    if (kexc == exc) return;
    PyObject *note = PyUnicode_FromFormat("taskgraph: task %U also had child task %U fail, "
                                          "unobserved: %s: %S", pkey, kkey, Py_TYPE(kexc)->tp_name, kexc);
    PyObject *r = note ? PyObject_CallMethodOneArg(exc, TG.str_add_note, note) : NULL;
    PyErr_Clear();
    Py_XDECREF(note);
    Py_XDECREF(r);
}

int tg_retry_wanted(PyObject *retry, PyObject *exc, int attempt) {
    if (!retry || attempt >= PyLong_AsLong(PyTuple_GET_ITEM(retry, 0))) return 0;
    return PyErr_GivenExceptionMatches(exc, PyTuple_GET_ITEM(retry, 1)) &&
           !PyErr_GivenExceptionMatches(exc, TG.CancelledError) &&
           !PyErr_GivenExceptionMatches(exc, TG.SchedulerClosedError);
}

/* ---------------------------------------------------------------- nodes that never ran */

PyObject *tg_dependency_reason(PyObject *dep_key, int state) {
    return PyUnicode_FromFormat("its dependency %U %s", dep_key,
                                state == TG_FAILED ? "failed"
                                : state == TG_CANCELLED ? "was cancelled" : "had not run");
}

/* What the message of a node that never ran adds about the failure behind it (a new string,
 * or NULL with no error when there is nothing to add). A dependent of a dependent of a failed
 * task is cancelled because its dependency was cancelled: the failure is some __cause__ levels
 * down (each cancelled node's CancelledError has the previous one as its cause; on a cluster
 * the failure itself), so it is named here: the first exception down the chain from `cause`
 * that is not a CancelledError and was raised by a task (tg_note_origin marked it with the
 * task's key): " (TypeName: message)" when `reason` names that task already, else "; the first
 * failure: task <key> raised TypeName: message". */
static PyObject *failure_words(PyObject *reason, PyObject *cause) {
    PyObject *e = Py_XNewRef(cause), *key = NULL, *out = NULL;
    int depth = 0;
    while (e && PyErr_GivenExceptionMatches(e, TG.CancelledError) && depth++ < 10000)
        Py_SETREF(e, PyException_GetCause(e));
    if (!e || PyErr_GivenExceptionMatches(e, TG.CancelledError)) goto done;
    if (PyObject_GetOptionalAttr(e, TG.str_taskgraph_task, &key) < 0) goto done;
    if (!key || !PyUnicode_Check(key)) goto done; /* not raised by a task (Ctrl-C, a deadline) */
    Py_ssize_t named = PyUnicode_Find(reason, key, 0, PyUnicode_GET_LENGTH(reason), 1);
    if (named == -2) goto done;
    out = named >= 0 ? PyUnicode_FromFormat(" (%s: %.300S)", Py_TYPE(e)->tp_name, e)
                     : PyUnicode_FromFormat("; the first failure: task %U raised %s: %.300S", key,
                                            Py_TYPE(e)->tp_name, e);
done:
    PyErr_Clear(); /* a failing __str__: the message goes without these words */
    Py_XDECREF(e);
    Py_XDECREF(key);
    return out;
}

PyObject *tg_cancelled_error(PyObject *key, PyObject *reason, PyObject *cause) {
    PyObject *more = failure_words(reason, cause);
    PyObject *msg = PyUnicode_FromFormat("task %U was cancelled: %U", key, reason);
    if (msg && more) Py_SETREF(msg, PyUnicode_Concat(msg, more));
    Py_XDECREF(more);
    PyObject *err = msg ? PyObject_CallOneArg(TG.CancelledError, msg) : NULL;
    Py_XDECREF(msg);
    if (err && cause) PyException_SetCause(err, Py_NewRef(cause));
    return err;
}

/* ---------------------------------------------------------------- the task runner */

/* The task's key: new reference, or NULL with an exception. */
static PyObject *body_key(tg_body *b) {
    return b->key ? Py_NewRef(b->key) : tg_node_key(b->node);
}

void tg_body_fail(tg_body *b, PyObject *exc) {
    Py_CLEAR(b->result);
    Py_XSETREF(*b->value, exc);
    /* Release: pairs with the acquire of whoever reads the failing task's value after seeing
     * the flag (cancel_error in worker.c: a child skipped because of it). */
    atomic_store_explicit(b->failing, 1, memory_order_release);
}

int tg_body_failing(tg_body *b) {
    /* Relaxed: the runner's own flag. */
    return atomic_load_explicit(b->failing, memory_order_relaxed);
}

void tg_body_note(tg_body *b) {
    PyObject *key = body_key(b), *where = key && b->ops->where ? b->ops->where(b) : NULL;
    if (where) tg_note_origin(*b->value, key, where);
    PyErr_Clear();
    Py_XDECREF(key);
    Py_XDECREF(where);
}

/* Whether k was cancelled on request within the task's subtree: node.cancel() on k, or on a
 * task between k and the syncing task (`top`, included; NULL: any ancestor). Such a cancel
 * affects only that subtree (docs/api/tasks.md), never the task that spawned it. */
static int cancel_asked_below(NodeObject *k, NodeObject *top) {
    for (NodeObject *p = k; p; p = p == top ? NULL : tg_node_parent(p))
        /* Relaxed: requests (noderec.h); set before the skip that finished k, which the
         * sync saw through k's final state (acquire). */
        if (atomic_load_explicit(&p->cancel, memory_order_relaxed)) return 1;
    return 0;
}

void tg_body_child(tg_body *b, NodeObject *k) {
    int st = tg_task_state(&k->t);
    /* Relaxed `seen`: set by whoever read the outcome (see tg_add_kid). */
    if (st <= TG_DONE || atomic_load_explicit(&k->seen, memory_order_relaxed)) return;
    /* A child cancelled on request is not a failure of the task (a failed dependency, a
     * closed scheduler or a cancelled compute still are). */
    if (st == TG_CANCELLED && cancel_asked_below(k, b->node)) return;
    if (!tg_body_failing(b)) { /* the first failure nobody read: the task's own */
        atomic_store_explicit(&k->seen, 1, memory_order_relaxed);
        tg_body_fail(b, Py_NewRef(k->value));
    } else if (st == TG_FAILED) { /* not the siblings cancelled because of it */
        PyObject *pkey = body_key(b), *kkey = pkey ? tg_node_key(k) : NULL;
        if (kkey) tg_note_sibling(*b->value, pkey, kkey, k->value);
        PyErr_Clear();
        Py_XDECREF(pkey);
        Py_XDECREF(kkey);
    }
}

/* Whether the failed attempt `attempt` is run again: the retry rule, and nobody asked the
 * task to stop. */
static int body_retried(tg_body *b, int attempt) {
    return b->retry && !(b->ops->stop_asked && b->ops->stop_asked(b)) &&
           tg_retry_wanted(b->retry, *b->value, attempt);
}

PyObject *tg_run_body(tg_body *b) {
    for (int attempt = 0;; attempt++) {
        b->result = b->ops->call(b);
        if (!b->result) {
            PyObject *exc = PyErr_GetRaisedException();
            tg_body_fail(b, exc ? exc : tg_memory_error());
        }
        if (b->ops->sync) b->ops->sync(b);
        if (b->result || !body_retried(b, attempt)) {
            b->attempts = attempt + 1;
            break;
        }
        if (b->ops->retrying) b->ops->retrying(b, attempt);
        Py_CLEAR(*b->value);
        /* Relaxed: our own flag; the children that read it were synced above. */
        atomic_store_explicit(b->failing, 0, memory_order_relaxed);
    }
    if (!b->result) {
        tg_body_note(b);
        PyObject *key = b->attempts > 1 ? body_key(b) : NULL;
        if (key) tg_note_attempts(*b->value, key, b->attempts, PyTuple_GET_ITEM(b->retry, 0));
        PyErr_Clear();
        Py_XDECREF(key);
    }
    PyObject *r = b->result;
    b->result = NULL;
    return r;
}

/* ---------------------------------------------------------------- a Python backend (dask) */

/* core._run_task's backend: an object with sync(failing) -> the task's children (Nodes, in
 * spawn order), and retrying(exc, attempt). */
typedef struct {
    PyObject *call, *backend, *where;
    PyObject *value;         /* the failure while the task fails */
    _Atomic uint8_t failing;
    PyObject *tls_backend;   /* this thread's backend (TG_TLS.backend) for the task's calls */
} py_backend;

/* As the native worker does with its current task (worker.c, native_call), the thread's
 * backend is the task's only while its own code runs: from the call to the sync. The notes
 * and the rules applied after it run as no task, so a task called there (an exception's
 * add_note, __str__) builds a lazy node instead of a child nobody would sync. */
static PyObject *py_call(tg_body *b) {
    py_backend *p = b->ctx;
    TG_TLS.backend = p->tls_backend;
    return PyObject_CallNoArgs(p->call);
}

static void py_sync(tg_body *b) {
    py_backend *p = b->ctx;
    PyObject *kids = PyObject_CallMethod(p->backend, "sync", "O",
                                         tg_body_failing(b) ? p->value : Py_None);
    TG_TLS.backend = NULL; /* the task's code is over (see py_call) */
    /* A private copy: the notes below may run Python code, which must not change it. */
    PyObject *seq = kids && PySequence_Check(kids) ? PySequence_List(kids) : NULL;
    if (kids && !seq && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "sync() must return a sequence of Nodes");
    Py_XDECREF(kids);
    if (!seq) { /* the sync itself failed: the task fails with that, unless failing already */
        PyObject *exc = PyErr_GetRaisedException();
        if (!tg_body_failing(b)) tg_body_fail(b, exc ? exc : tg_memory_error());
        else Py_XDECREF(exc);
        return;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(seq); i++) {
        PyObject *k = PyList_GET_ITEM(seq, i); /* held by seq, our own list */
        if (Node_Check(k)) tg_body_child(b, (NodeObject *)k);
    }
    Py_DECREF(seq);
}

static void py_retrying(tg_body *b, int attempt) {
    py_backend *p = b->ctx;
    PyObject *r = PyObject_CallMethod(p->backend, "retrying", "Oi", p->value, attempt);
    if (!r) PyErr_WriteUnraisable(p->backend); /* a lost trace record: never the task's error */
    Py_XDECREF(r);
}

static PyObject *py_where(tg_body *b) { return Py_NewRef(((py_backend *)b->ctx)->where); }

static const tg_body_ops py_ops = {py_call, py_sync, py_retrying, NULL, py_where};

PyObject *tg_run_python_body(PyObject *call, PyObject *backend, PyObject *key, PyObject *where,
                             PyObject *retry) {
    /* Borrowed: the thread state's dict holds it (set_backend, module.c). */
    py_backend p = {call, backend, where, NULL, 0, TG_TLS.backend};
    tg_body b = {.ops = &py_ops, .ctx = &p, .key = key, .retry = retry, .value = &p.value,
                 .failing = &p.failing};
    PyObject *r = tg_run_body(&b);
    TG_TLS.backend = p.tls_backend;
    if (!r) PyErr_SetRaisedException(p.value); /* steals it */
    else Py_XDECREF(p.value);
    return r;
}

static PyObject *cancelled_error_py(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *key, *reason, *cause = Py_None;
    if (!PyArg_ParseTuple(args, "UU|O:_cancelled_error", &key, &reason, &cause)) return NULL;
    if (cause != Py_None && !PyExceptionInstance_Check(cause)) {
        PyErr_SetString(PyExc_TypeError, "_cancelled_error: the cause must be an exception or None");
        return NULL;
    }
    return tg_cancelled_error(key, reason, cause == Py_None ? NULL : cause);
}

static PyObject *dependency_reason_py(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *key;
    int state;
    if (!PyArg_ParseTuple(args, "Ui:_dependency_reason", &key, &state)) return NULL;
    return tg_dependency_reason(key, state);
}

PyMethodDef tg_rules_methods[] = {
    {"_cancelled_error", cancelled_error_py, METH_VARARGS,
     "_cancelled_error(key, reason, cause=None) -> the CancelledError of a task that never ran."},
    {"_dependency_reason", dependency_reason_py, METH_VARARGS,
     "_dependency_reason(key, state) -> 'its dependency <key> failed' (or 'was cancelled')."},
    {NULL, NULL, 0, NULL},
};
