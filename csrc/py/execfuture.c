/* The concurrent.futures.Future of a taskgraph.Executor call (execfuture.h): made with its
 * slots filled straight after allocation, at the offsets their member descriptors give (read
 * once, by tg_future_configure); afterwards read and written through the descriptors
 * (thread-safe on free-threaded builds), except for the slots set once before anyone saw
 * the future. The common paths here (a call starting, finishing with a value, result() of a
 * finished call), every other case in the Future's own methods
 * (taskgraph/executor/future.py). */
#include "execfuture.h"

Py_ssize_t tg_future_offset[TG_F_NATTRS];
static PyObject *str_attr[TG_F_NATTRS];
static PyObject *str_acquire, *str_release, *str_start, *str_set_result, *str_invoke_callbacks,
    *str_result, *str_result_slow;
/* Set once by tg_future_configure (at import; strong, process-wide like the module's other
 * hooks): the Future class, the lock type its _condition is, the states, an empty tuple (no
 * callbacks yet). */
static PyObject *future_type, *lock_type, *pending, *running, *finished, *no_callbacks;

int tg_future_init(void) {
    static const char *attrs[TG_F_NATTRS] = {"_condition", "_node", "_state", "_result",
                                             "_exception", "_cv", "_any_waiters",
                                             "_done_callbacks"};
    for (int i = 0; i < TG_F_NATTRS; i++)
        if (!str_attr[i] && !(str_attr[i] = PyUnicode_InternFromString(attrs[i]))) return -1;
    struct { PyObject **slot; const char *s; } more[] = {
        {&str_acquire, "acquire"}, {&str_release, "release"}, {&str_start, "_tg_start"},
        {&str_set_result, "set_result"}, {&str_invoke_callbacks, "_invoke_callbacks"},
        {&str_result, "result"}, {&str_result_slow, "_result_slow"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        if (!*more[i].slot && !(*more[i].slot = PyUnicode_InternFromString(more[i].s))) return -1;
    return 0;
}

/* A new future, as Future() makes it: its slots filled as its __init__ does (_node None),
 * without running Python. Nobody else can see it yet. NULL with an error. */
PyObject *tg_future_new(void) {
    PyTypeObject *tp = (PyTypeObject *)future_type;
    PyObject *noargs = PyTuple_New(0); /* the empty tuple is a singleton: no allocation */
    PyObject *f = noargs ? tp->tp_new(tp, noargs, NULL) : NULL;
    PyTypeObject *lt = (PyTypeObject *)lock_type; /* a C type whose tp_new does it all */
    PyObject *lock = f ? lt->tp_new(lt, noargs, NULL) : NULL;
    Py_XDECREF(noargs);
    if (!lock) {
        Py_XDECREF(f);
        return NULL;
    }
    PyObject *vals[TG_F_NATTRS] = {lock, Py_None, pending, Py_None, Py_None, Py_None, Py_False,
                                no_callbacks};
    for (int i = 0; i < TG_F_NATTRS; i++) TG_FUTURE_SLOT(f, i) = i ? Py_NewRef(vals[i]) : lock; /* slots were NULL */
    return f;
}


/* lock.acquire() / lock.release() of the future's _condition (an RLock), through the lock
 * type's own method descriptors (looked up once by tg_future_configure: a method lookup by name
 * costs about 1,000 instructions on 3.13t). -1 with an error. */
static PyObject *lock_acquire, *lock_release;

static int lock_call(PyObject *lock, PyObject *how) {
    PyObject *r = PyObject_Vectorcall(how, &lock, 1, NULL);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* f._state is `want` (a borrowed str: the states are compared by identity, as the module's
 * constants, as Future._tg_start's `is` does). 1, 0, or -1 with an error. */
static int state_is(PyObject *f, PyObject *want) {
    PyObject *st = PyObject_GetAttr(f, str_attr[TG_F_STATE]);
    if (!st) return -1;
    int is = st == want;
    Py_DECREF(st);
    return is;
}

/* Releases the lock after a step under it: -1 if the step raised (its error kept, not the
 * release's) or the release failed, else 0. */
static int unlock_after(PyObject *lock) {
    PyObject *exc = PyErr_GetRaisedException();
    int rel = lock_call(lock, lock_release);
    if (exc) {
        Py_XDECREF(PyErr_GetRaisedException());
        PyErr_SetRaisedException(exc);
        return -1;
    }
    return rel < 0 ? -1 : 0;
}

/* PENDING -> RUNNING under the future's lock (set_running_or_notify_cancel's common case).
 * 1 if the call is to run; 0 if not (cancelled: Future._tg_start told its waiters); -1. */
int tg_future_start(PyObject *f, PyObject *lock) {
    if (lock_call(lock, lock_acquire) < 0) return -1;
    int pend = state_is(f, pending);
    if (pend > 0 && PyObject_SetAttr(f, str_attr[TG_F_STATE], running) < 0) pend = -1;
    if (unlock_after(lock) < 0) return -1;
    if (pend) return pend;
    PyObject *r = PyObject_CallMethodNoArgs(f, str_start); /* the rest, in Python */
    if (!r) return -1;
    int go = r == Py_True;
    Py_DECREF(r);
    return go;
}

/* RUNNING -> FINISHED with result r under the future's lock (set_result's common case: no
 * waiter of concurrent.futures.wait, no blocking result() to wake), then the callbacks, if
 * any. Otherwise Future.set_result does it all. 0, or -1 with an error. */
int tg_future_finish(PyObject *f, PyObject *lock, PyObject *r) {
    if (lock_call(lock, lock_acquire) < 0) return -1;
    int fast = state_is(f, running);
    PyObject *w = fast > 0 ? PyObject_GetAttr(f, str_attr[TG_F_ANY_WAITERS]) : NULL;
    PyObject *cv = w ? PyObject_GetAttr(f, str_attr[TG_F_CV]) : NULL;
    if (fast > 0) fast = !cv ? -1 : w == Py_False && cv == Py_None;
    Py_XDECREF(w);
    Py_XDECREF(cv);
    if (fast > 0 && (PyObject_SetAttr(f, str_attr[TG_F_RESULT], r) < 0 ||
                     PyObject_SetAttr(f, str_attr[TG_F_STATE], finished) < 0))
        fast = -1;
    if (unlock_after(lock) < 0) return -1;
    if (!fast) { /* waiters, a Condition to notify, or completed by hand: the full method */
        PyObject *x = PyObject_CallMethodOneArg(f, str_set_result, r);
        Py_XDECREF(x);
        return x ? 0 : -1;
    }
    PyObject *cbs = PyObject_GetAttr(f, str_attr[TG_F_DONE_CALLBACKS]); /* () until one is added */
    int any = cbs ? PyObject_IsTrue(cbs) : -1;
    Py_XDECREF(cbs);
    if (any <= 0) return any;
    PyObject *x = PyObject_CallMethodNoArgs(f, str_invoke_callbacks);
    Py_XDECREF(x);
    return x ? 0 : -1;
}


/* Future.result(timeout=None), installed on the class by tg_future_configure: the common case
 * (finished with a value: one lock, two reads) here, everything else in Python
 * (Future._result_slow, taskgraph/executor/future.py), with the same arguments. */
static PyObject *future_result(PyObject *self, PyObject *const *args, Py_ssize_t nargsf,
                               PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int plain = !kwnames && (nargs == 0 || (nargs == 1 && args[0] == Py_None));
    PyObject *lock = plain ? TG_FUTURE_SLOT(self, TG_F_CONDITION) : NULL; /* set once, before anyone saw self */
    if (lock) {
        if (lock_call(lock, lock_acquire) < 0) return NULL;
        /* Under the lock the completer holds for its stores: plain reads are ordered. */
        PyObject *r = TG_FUTURE_SLOT(self, TG_F_STATE) == finished && TG_FUTURE_SLOT(self, TG_F_EXCEPTION) == Py_None
                          ? Py_XNewRef(TG_FUTURE_SLOT(self, TG_F_RESULT)) : NULL;
        if (lock_call(lock, lock_release) < 0) {
            Py_XDECREF(r);
            return NULL;
        }
        if (r) return r;
    }
    PyObject *argv[3] = {NULL, self, NULL};
    if (nargs > 1 || kwnames) { /* Python's own message for bad arguments */
        PyObject *m = PyObject_GetAttr(self, str_result_slow);
        PyObject *out = m ? PyObject_Vectorcall(m, args, nargs, kwnames) : NULL;
        Py_XDECREF(m);
        return out;
    }
    argv[2] = nargs ? args[0] : Py_None;
    return PyObject_VectorcallMethod(str_result_slow, argv + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyMethodDef future_result_def = {
    "result", (PyCFunction)(void (*)(void))future_result, METH_FASTCALL | METH_KEYWORDS,
    "result(timeout=None): as concurrent.futures.Future.result; inside a task, without a "
    "timeout, it joins the call's node (the worker runs other work meanwhile)."};

int tg_future_configure(PyObject *ft, PyObject *lt, PyObject *p, PyObject *r, PyObject *f,
                        Py_ssize_t (*slot_of)(PyObject *, PyObject *, const char *)) {
    Py_ssize_t offs[TG_F_NATTRS];
    for (int i = 0; i < TG_F_NATTRS; i++) /* each a slot holding an object */
        if ((offs[i] = slot_of(ft, str_attr[i], "_exec_configure")) < 0) return -1;
    PyObject *acq = PyObject_GetAttr(lt, str_acquire);
    PyObject *rel = acq ? PyObject_GetAttr(lt, str_release) : NULL;
    PyObject *empty = rel ? PyTuple_New(0) : NULL;
    if (!empty) {
        Py_XDECREF(acq);
        Py_XDECREF(rel);
        return -1;
    }
    Py_XSETREF(lock_acquire, acq);
    Py_XSETREF(lock_release, rel);
    memcpy(tg_future_offset, offs, sizeof offs);
    PyObject *descr = PyDescr_NewMethod((PyTypeObject *)ft, &future_result_def);
    int bad = !descr || PyObject_SetAttr(ft, str_result, descr) < 0;
    Py_XDECREF(descr);
    if (bad) {
        Py_DECREF(empty);
        return -1;
    }
    Py_XSETREF(no_callbacks, empty);
    Py_XSETREF(future_type, Py_NewRef(ft));
    Py_XSETREF(lock_type, Py_NewRef(lt));
    Py_XSETREF(pending, Py_NewRef(p));
    Py_XSETREF(running, Py_NewRef(r));
    Py_XSETREF(finished, Py_NewRef(f));
    return 0;
}
