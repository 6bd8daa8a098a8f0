/* The native half of taskgraph.Executor (taskgraph/executor.py): a work item, and the way one
 * submit() goes onto the pool.
 *
 * A submit() is one Node whose function is an ExecItem: the item holds the user's call (fn
 * and the arguments, as submit got them) and the concurrent.futures.Future it completes;
 * submit itself is written here (executor_submit, a method of taskgraph.Executor), and so
 * are the common paths of the future (new_future, run_call, future_result). Inside one of the
 * executor's own tasks the node is spawned onto the worker's deque, as a task's child is
 * (join.c), so a task that waits for a future it submitted joins it (the worker runs other
 * work meanwhile: nested submits never deadlock); anywhere else (the user's threads, a task
 * of another scheduler) it is claimed for the executor's run and injected (submit.c).
 *
 * The item never fails its node: calling it runs the call and stores its outcome in the
 * future (run_call: the common cases here, the others in the Future's own methods); an error
 * escaping that (a bug, or a user who completed the future by hand) goes to
 * sys.unraisablehook. So one failing call never cancels the others, as it would in a compute
 * (fail fast). An item dropped without having been called
 * (its node was skipped: shutdown(cancel_futures=True), the scheduler closed, the queues
 * drained) cancels its future from its finalizer (Future._tg_never_ran), so no future is left
 * pending for ever, whatever path its node took.
 *
 * Ownership: the item is made by the submitting thread and handed to the node (its fn); the
 * node's runner is the only one to call it, and the call takes the item's references out
 * (the user's objects are let go right after the call, on the worker, as ThreadPoolExecutor's
 * work item does). The finalizer runs on whichever thread drops the item last; it reads the
 * future only if no call took it.
 *
 * The item is not tracked by the cyclic collector (one object less per submit for it to
 * walk: the collector's passes were half of a submit's cost with 50,000 futures pending).
 * It cannot hold a cycle for ever: every node runs or is skipped (a closing scheduler drains
 * its queues), and either way the item lets go of what it holds; while it holds them, the
 * collector sees its references as coming from outside, so it frees none of them early. */
#include "executor.h"

typedef struct {
    PyObject_VAR_HEAD     /* ob_size: the argument slots below */
    PyObject *future;     /* the Future to complete, or NULL once called (or cancelled) */
    PyObject *fn;
    PyObject *kwnames;    /* the keyword names (tuple), or NULL */
    Py_ssize_t nargs;     /* how many of args[] are positional; the rest keyword values */
    PyObject *args[1];    /* the arguments as submit() got them (vectorcall: no tuple) */
} ItemObject;

static PyObject *str_never_ran, *str_name;
/* The future's attributes: slots of its class (taskgraph/_executor_future.py), in that
 * class's __slots__ order. new_future fills them straight after allocation, at the offsets
 * their member descriptors give (read once, by _exec_configure); afterwards they are read
 * and written through the descriptors (thread-safe on free-threaded builds). */
enum { F_CONDITION, F_NODE, F_STATE, F_RESULT, F_EXCEPTION, F_CV, F_ANY_WAITERS,
       F_DONE_CALLBACKS, F_NATTRS };
static PyObject *str_attr[F_NATTRS];
static Py_ssize_t slot_offset[F_NATTRS];
#define SLOT(f, i) (*(PyObject **)((char *)(f) + slot_offset[i]))
#define TG_T_OBJECT_EX 16 /* structmember.h's T_OBJECT_EX (Py_T_OBJECT_EX from 3.12) */
/* Other names the call's fast path uses (see run_call). */
static PyObject *str_acquire, *str_release, *str_start, *str_failed, *str_set_result,
    *str_invoke_callbacks, *str_result, *str_result_slow, *str_submit, *str_shutdown, *str_run,
    *str_refusal;
/* Set once by _exec_configure (taskgraph/executor.py, at import; strong, process-wide like
 * the module's other hooks): the Future class, the lock type its _condition is, and the
 * PENDING state. */
static PyObject *future_type, *lock_type, *pending, *running, *finished, *no_callbacks;

int tg_executor_init(void) {
    static const char *attrs[F_NATTRS] = {"_condition", "_node", "_state", "_result",
                                          "_exception", "_cv", "_any_waiters",
                                          "_done_callbacks"};
    if (!str_never_ran && !(str_never_ran = PyUnicode_InternFromString("_tg_never_ran"))) return -1;
    if (!str_name && !(str_name = PyUnicode_InternFromString("__name__"))) return -1;
    for (int i = 0; i < F_NATTRS; i++)
        if (!str_attr[i] && !(str_attr[i] = PyUnicode_InternFromString(attrs[i]))) return -1;
    struct { PyObject **slot; const char *s; } more[] = {
        {&str_acquire, "acquire"}, {&str_release, "release"}, {&str_start, "_tg_start"},
        {&str_failed, "_tg_failed"}, {&str_set_result, "set_result"},
        {&str_invoke_callbacks, "_invoke_callbacks"}, {&str_result, "result"},
        {&str_result_slow, "_result_slow"}, {&str_submit, "submit"},
        {&str_shutdown, "_shutdown"}, {&str_run, "_run"}, {&str_refusal, "_refusal"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        if (!*more[i].slot && !(*more[i].slot = PyUnicode_InternFromString(more[i].s))) return -1;
    return 0;
}

/* A new future, as Future() makes it: its slots filled as its __init__ does (_node None),
 * without running Python. Nobody else can see it yet. NULL with an error. */
static PyObject *new_future(void) {
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
    PyObject *vals[F_NATTRS] = {lock, Py_None, pending, Py_None, Py_None, Py_None, Py_False,
                                no_callbacks};
    for (int i = 0; i < F_NATTRS; i++) SLOT(f, i) = i ? Py_NewRef(vals[i]) : lock; /* slots were NULL */
    return f;
}

static void item_clear(ItemObject *it) {
    Py_CLEAR(it->future);
    Py_CLEAR(it->fn);
    Py_CLEAR(it->kwnames);
    for (Py_ssize_t i = 0; i < Py_SIZE(it); i++) Py_CLEAR(it->args[i]);
}

/* Dropped without having been called: its future is cancelled (Future._tg_never_ran). */
static void item_finalize(ItemObject *it) {
    PyObject *f = it->future;
    if (!f) return;
    it->future = NULL;
    PyObject *exc = PyErr_GetRaisedException(); /* kept for whoever dropped us */
    PyObject *r = PyObject_CallMethodNoArgs(f, str_never_ran);
    if (r) Py_DECREF(r);
    else PyErr_WriteUnraisable(f);
    Py_DECREF(f);
    PyErr_SetRaisedException(exc);
}

static void item_dealloc(ItemObject *it) {
    if (PyObject_CallFinalizerFromDealloc((PyObject *)it) < 0) return; /* resurrected */
    item_clear(it);
    Py_TYPE(it)->tp_free((PyObject *)it);
}

/* lock.acquire() / lock.release() of the future's _condition (an RLock), through the lock
 * type's own method descriptors (looked up once by _exec_configure: a method lookup by name
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
    PyObject *st = PyObject_GetAttr(f, str_attr[F_STATE]);
    if (!st) return -1;
    int is = st == want;
    Py_DECREF(st);
    return is;
}

/* PENDING -> RUNNING under the future's lock (set_running_or_notify_cancel's common case).
 * 1 if the call is to run; 0 if not (cancelled: Future._tg_start told its waiters); -1. */
static int start_call(PyObject *f, PyObject *lock) {
    if (lock_call(lock, lock_acquire) < 0) return -1;
    int pend = state_is(f, pending);
    if (pend > 0 && PyObject_SetAttr(f, str_attr[F_STATE], running) < 0) pend = -1;
    PyObject *exc = PyErr_GetRaisedException();
    int rel = lock_call(lock, lock_release);
    if (exc) {
        Py_XDECREF(PyErr_GetRaisedException());
        PyErr_SetRaisedException(exc);
        return -1;
    }
    if (rel < 0) return -1;
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
static int finish_call(PyObject *f, PyObject *lock, PyObject *r) {
    if (lock_call(lock, lock_acquire) < 0) return -1;
    int fast = state_is(f, running);
    PyObject *w = fast > 0 ? PyObject_GetAttr(f, str_attr[F_ANY_WAITERS]) : NULL;
    PyObject *cv = w ? PyObject_GetAttr(f, str_attr[F_CV]) : NULL;
    if (fast > 0) fast = !cv ? -1 : w == Py_False && cv == Py_None;
    Py_XDECREF(w);
    Py_XDECREF(cv);
    if (fast > 0 && (PyObject_SetAttr(f, str_attr[F_RESULT], r) < 0 ||
                     PyObject_SetAttr(f, str_attr[F_STATE], finished) < 0))
        fast = -1;
    PyObject *exc = PyErr_GetRaisedException();
    int rel = lock_call(lock, lock_release);
    if (exc) {
        Py_XDECREF(PyErr_GetRaisedException());
        PyErr_SetRaisedException(exc);
        return -1;
    }
    if (rel < 0) return -1;
    if (!fast) { /* waiters, a Condition to notify, or completed by hand: the full method */
        PyObject *x = PyObject_CallMethodOneArg(f, str_set_result, r);
        Py_XDECREF(x);
        return x ? 0 : -1;
    }
    PyObject *cbs = PyObject_GetAttr(f, str_attr[F_DONE_CALLBACKS]); /* () until one is added */
    int any = cbs ? PyObject_IsTrue(cbs) : -1;
    Py_XDECREF(cbs);
    if (any <= 0) return any;
    PyObject *x = PyObject_CallMethodNoArgs(f, str_invoke_callbacks);
    Py_XDECREF(x);
    return x ? 0 : -1;
}

/* The call: what Future.set_running_or_notify_cancel, the call and Future.set_result (or
 * set_exception, through Future._tg_failed) do, with the common cases here and every other
 * case in the Future's own methods (taskgraph/_executor_future.py). */
static int run_call(PyObject *f, ItemObject *it) {
    PyObject *lock = PyObject_GetAttr(f, str_attr[F_CONDITION]);
    if (!lock) return -1;
    int go = start_call(f, lock);
    int err = go < 0;
    if (go > 0) {
        PyObject *r = PyObject_Vectorcall(it->fn, it->args, (size_t)it->nargs, it->kwnames);
        if (r) {
            err = finish_call(f, lock, r) < 0;
            Py_DECREF(r);
        } else { /* fn raised: Future._tg_failed notes and stores it */
            PyObject *exc = PyErr_GetRaisedException();
            PyObject *x = PyObject_CallMethodOneArg(f, str_failed, exc);
            Py_DECREF(exc);
            err = !x;
            Py_XDECREF(x);
        }
    }
    Py_DECREF(lock);
    return err ? -1 : 0;
}

/* The node's function: runs the call and completes the future (run_call), once. Returns None
 * whatever happens (see the top of the file). */
static PyObject *item_call(ItemObject *it, PyObject *args, PyObject *kw) {
    if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "an executor work item takes no arguments");
        return NULL;
    }
    /* Only the node's runner calls it, once: the future is taken out first (a second call
     * finds none), the user's objects are let go right after the call. */
    PyObject *f = it->future;
    it->future = NULL;
    if (f && run_call(f, it) < 0) { /* an internal error (or the future completed by hand):
                                     * into the future if it can still take it */
        PyObject *err = PyErr_GetRaisedException();
        PyObject *x = PyObject_CallMethodOneArg(f, str_failed, err);
        if (x) Py_DECREF(x);
        else PyErr_Clear();
        PyErr_SetRaisedException(err);
        PyErr_WriteUnraisable(f); /* never fails the node: see the top of the file */
    }
    Py_XDECREF(f);
    item_clear(it);
    Py_RETURN_NONE;
}

PyTypeObject TG_ExecItemType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph._core.ExecItem",
    .tp_basicsize = offsetof(ItemObject, args),
    .tp_itemsize = sizeof(PyObject *),
    .tp_dealloc = (destructor)item_dealloc,
    .tp_call = (ternaryfunc)item_call,
    .tp_flags = Py_TPFLAGS_DEFAULT, /* not tracked by the collector: see the top of the file */
    .tp_doc = "One taskgraph.Executor.submit() call (private; made by submit).",
    .tp_finalize = (destructor)item_finalize,
};

/* The node's name (trace records, keys): a Python function's own name (a bound method's
 * function's), else fn.__name__ when it is a str, else its type's name. New reference,
 * interned (a function's name is already: no lookup then). NULL with an error. */
static PyObject *name_of(PyObject *fn) {
    PyObject *f = PyMethod_Check(fn) ? PyMethod_GET_FUNCTION(fn) : fn;
    PyObject *name = NULL;
    if (PyFunction_Check(f)) {
        /* The common case, without a lookup: read as CPython's own __name__ getter reads it
         * (3.13: no lock; names are interned, so immortal on free-threaded builds). */
        name = Py_NewRef(((PyFunctionObject *)f)->func_name);
    } else {
        if (PyObject_GetOptionalAttr(fn, str_name, &name) < 0) return NULL;
        if (!name || !PyUnicode_CheckExact(name)) {
            Py_XDECREF(name);
            name = PyUnicode_FromString(Py_TYPE(fn)->tp_name);
            if (!name) return NULL;
        }
    }
    if (!PyUnicode_CheckExact(name)) { /* a function's __name__ of a str subclass */
        Py_SETREF(name, PyUnicode_FromString(Py_TYPE(fn)->tp_name));
        if (!name) return NULL;
    }
    if (!PyUnicode_CHECK_INTERNED(name)) PyUnicode_InternInPlace(&name);
    return name;
}

/* The call fn(*args[:nargs], **dict(zip(kwnames, args[nargs:]))) as a node of the executor's
 * run, completing a new future (whose _node is that node), which it returns. Spawned onto
 * this worker's deque inside one of the run's engine's tasks, else claimed and injected.
 * TypeError if fn is not callable; SchedulerClosedError / BrokenSchedulerError if the engine
 * takes no more work. */
static PyObject *submit_call(RunObject *run, PyObject *fn, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames) {
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "taskgraph.Executor.submit: fn must be callable, got "
                     "%.100s %.200R", Py_TYPE(fn)->tp_name, fn);
        return NULL;
    }
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *name = name_of(fn);
    if (!name) return NULL;
    PyObject *f = new_future();
    ItemObject *it = f ? PyObject_NewVar(ItemObject, &TG_ExecItemType, total) : NULL;
    if (!it) {
        Py_XDECREF(f);
        Py_DECREF(name);
        return NULL;
    }
    it->future = Py_NewRef(f);
    it->fn = Py_NewRef(fn);
    it->kwnames = total > nargs ? Py_NewRef(kwnames) : NULL;
    it->nargs = nargs;
    for (Py_ssize_t i = 0; i < total; i++) it->args[i] = Py_NewRef(args[i]);
    NodeObject *n = tg_node_new((PyObject *)it, name, NULL, NULL, 0, NULL);
    Py_DECREF(name);
    if (!n) {
        Py_CLEAR(it->future); /* nobody will see this future: no cancel to report */
        Py_DECREF(it);
        Py_DECREF(f);
        return NULL;
    }
    Py_DECREF(it); /* the node holds it (until it ran, or was dropped: see the top) */
    /* The worker that runs or skips the call drops the item: freed there, its finalizer (the
     * future's cancel) runs there at once, not when this thread next runs Python (a caller
     * blocked in concurrent.futures.wait would not be told until its timeout). */
    tg_unown((PyObject *)it);
    Runner *W = TG_TLS.worker;
    int spawn = W && W->current && W->engine == run->owner;
    /* Injected: dropped by the worker that runs it, or by the user (see node.c); given up
     * while nobody else holds it yet. */
    if (!spawn) tg_node_unown(n);
    Py_SETREF(SLOT(f, F_NODE), Py_NewRef((PyObject *)n)); /* nobody else sees f yet */
    int err = spawn ? tg_spawn(W, n) /* a child of the running task: a join of it helps */
                    : tg_submit_one(run, n); /* the run is registered and held: _exec_hold */
    Py_DECREF(n); /* the future holds it */
    if (err < 0) { /* never queued: its item cancels the future; the caller raises */
        Py_DECREF(f);
        return NULL;
    }
    return f;
}

/* Set by _exec_exiting() at interpreter exit (taskgraph/executor.py's _python_exit). Relaxed:
 * a flag read once per submit; a submit racing with the exit hook may still get in, as it
 * may with ThreadPoolExecutor. */
static _Atomic int exiting;
/* The offset of Executor's _shutdown slot (read by _exec_configure). */
static Py_ssize_t shutdown_offset;

/* Raises what self._refusal(cause) returns (the executor's RuntimeError or BrokenThreadPool),
 * chained to cause (stolen, may be NULL). NULL. */
static PyObject *refuse(PyObject *self, PyObject *cause) {
    PyObject *exc = PyObject_CallMethodOneArg(self, str_refusal, cause ? cause : Py_None);
    if (exc) {
        if (cause) PyException_SetCause(exc, Py_NewRef(cause));
        PyErr_SetRaisedException(exc);
    }
    Py_XDECREF(cause);
    return NULL;
}

/* Executor.submit(fn, /, *args, **kwargs), installed on the class by _exec_configure: refused
 * after shutdown() or at interpreter exit (self._refusal() says with what), else
 * submit_call on the executor's run (self._run). */
static PyObject *executor_submit(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "submit() missing 1 required positional argument: 'fn'");
        return NULL;
    }
    /* self._shutdown, a slot: False until shutdown() stores True (or None before __init__).
     * Relaxed: a hint, as ThreadPoolExecutor's flag read is; the pointer is only compared. */
    PyObject *shut = atomic_load_explicit((_Atomic(PyObject *) *)((char *)self + shutdown_offset),
                                          memory_order_relaxed);
    if (shut != Py_False || atomic_load_explicit(&exiting, memory_order_relaxed))
        return refuse(self, NULL);
    PyObject *run = PyObject_GetAttr(self, str_run);
    if (!run) return NULL;
    if (!PyObject_TypeCheck(run, &TG_RunType)) {
        Py_DECREF(run);
        return PyErr_Format(PyExc_TypeError, "%R has no run of its own", self);
    }
    PyObject *f = submit_call((RunObject *)run, args[0], args + 1, nargs - 1, kwnames);
    Py_DECREF(run);
    if (!f && PyErr_ExceptionMatches(TG.SchedulerClosedError)) /* closed under us */
        return refuse(self, PyErr_GetRaisedException());
    return f;
}

static PyMethodDef executor_submit_def = {
    "submit", (PyCFunction)(void (*)(void))executor_submit, METH_FASTCALL | METH_KEYWORDS,
    "submit($self, fn, /, *args, **kwargs)\n--\n\n"
    "Schedules fn(*args, **kwargs) and returns its concurrent.futures.Future (see "
    "taskgraph.Executor and docs/api.md): queued for the pool from outside a worker, pushed "
    "onto the worker's deque inside one of the executor's calls (result() there joins). "
    "TypeError if fn is not callable; RuntimeError after shutdown() or at interpreter exit; "
    "BrokenThreadPool after a failed initializer."};

/* _exec_exiting(): the interpreter is exiting: every submit is refused from now on. */
static PyObject *exec_exiting(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    atomic_store_explicit(&exiting, 1, memory_order_relaxed); /* see `exiting` */
    Py_RETURN_NONE;
}

/* Future.result(timeout=None), installed on the class by _exec_configure: the common case
 * (finished with a value: one lock, two reads) here, everything else in Python
 * (Future._result_slow, taskgraph/_executor_future.py), with the same arguments. */
static PyObject *future_result(PyObject *self, PyObject *const *args, Py_ssize_t nargsf,
                               PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int plain = !kwnames && (nargs == 0 || (nargs == 1 && args[0] == Py_None));
    PyObject *lock = plain ? SLOT(self, F_CONDITION) : NULL; /* set once, before anyone saw self */
    if (lock) {
        if (lock_call(lock, lock_acquire) < 0) return NULL;
        /* Under the lock the completer holds for its stores: plain reads are ordered. */
        PyObject *r = SLOT(self, F_STATE) == finished && SLOT(self, F_EXCEPTION) == Py_None
                          ? Py_XNewRef(SLOT(self, F_RESULT)) : NULL;
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

/* _exec_configure(Future, lock_type, PENDING, RUNNING, FINISHED, Executor): the future class
 * submit makes (its slots' offsets, read here), its lock type and the lock's methods, the
 * states (concurrent.futures._base's) a call moves it through; installs Future.result and
 * Executor.submit (method descriptors of this file). Once, at import. */
static PyObject *exec_configure(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *ft, *lt, *p, *r, *f, *et;
    if (!PyArg_ParseTuple(args, "O!OUUUO!:_exec_configure", &PyType_Type, &ft, &lt, &p, &r, &f,
                          &PyType_Type, &et))
        return NULL;
    Py_ssize_t offs[F_NATTRS];
    for (int i = 0; i < F_NATTRS; i++) { /* each a slot holding an object */
        PyObject *d = PyObject_GetAttr(ft, str_attr[i]);
        if (!d) return NULL;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == TG_T_OBJECT_EX;
        offs[i] = ok ? ((PyMemberDescrObject *)d)->d_member->offset : 0;
        Py_DECREF(d);
        if (!ok)
            return PyErr_Format(PyExc_TypeError, "_exec_configure: %R.%U is not a slot", ft, str_attr[i]);
    }
    PyObject *sd = PyObject_GetAttr(et, str_shutdown);
    if (!sd) return NULL;
    int sd_ok = Py_IS_TYPE(sd, &PyMemberDescr_Type) &&
                ((PyMemberDescrObject *)sd)->d_member->type == TG_T_OBJECT_EX;
    Py_ssize_t sd_off = sd_ok ? ((PyMemberDescrObject *)sd)->d_member->offset : 0;
    Py_DECREF(sd);
    if (!sd_ok) return PyErr_Format(PyExc_TypeError, "_exec_configure: %R._shutdown is not a slot", et);
    PyObject *acq = PyObject_GetAttr(lt, str_acquire);
    PyObject *rel = acq ? PyObject_GetAttr(lt, str_release) : NULL;
    PyObject *empty = rel ? PyTuple_New(0) : NULL;
    if (!empty) {
        Py_XDECREF(acq);
        Py_XDECREF(rel);
        return NULL;
    }
    Py_XSETREF(lock_acquire, acq);
    Py_XSETREF(lock_release, rel);
    memcpy(slot_offset, offs, sizeof offs);
    shutdown_offset = sd_off;
    PyObject *descr = PyDescr_NewMethod((PyTypeObject *)ft, &future_result_def);
    int bad = !descr || PyObject_SetAttr(ft, str_result, descr) < 0;
    Py_XDECREF(descr);
    descr = bad ? NULL : PyDescr_NewMethod((PyTypeObject *)et, &executor_submit_def);
    bad = !descr || PyObject_SetAttr(et, str_submit, descr) < 0;
    Py_XDECREF(descr);
    if (bad) {
        Py_DECREF(empty);
        return NULL;
    }
    Py_XSETREF(no_callbacks, empty);
    Py_XSETREF(future_type, Py_NewRef(ft));
    Py_XSETREF(lock_type, Py_NewRef(lt));
    Py_XSETREF(pending, Py_NewRef(p));
    Py_XSETREF(running, Py_NewRef(r));
    Py_XSETREF(finished, Py_NewRef(f));
    Py_RETURN_NONE;
}

/* The run argument of `fn`(run), or NULL with a TypeError naming the call. */
static RunObject *run_arg(PyObject *arg, const char *fn) {
    if (PyObject_TypeCheck(arg, &TG_RunType)) return (RunObject *)arg;
    PyErr_Format(PyExc_TypeError, "%s(run): expected a Run, got %.200s", fn, Py_TYPE(arg)->tp_name);
    return NULL;
}

/* _exec_hold(run): registers the run with its engine and holds it open (it does not end when
 * its queue runs empty) until _exec_release. SchedulerClosedError if the engine is closed. */
static PyObject *exec_hold(PyObject *mod, PyObject *arg) {
    (void)mod;
    RunObject *run = run_arg(arg, "_exec_hold");
    if (!run || tg_runs_add(run->engine, run) < 0) return NULL;
    tg_run_hold(&run->r);
    Py_RETURN_NONE;
}

/* _exec_release(run): lets go of _exec_hold's hold; the run ends once its tasks have finished
 * (Run.wait() then returns True). Once per hold. */
static PyObject *exec_release(PyObject *mod, PyObject *arg) {
    (void)mod;
    RunObject *run = run_arg(arg, "_exec_release");
    if (!run) return NULL;
    if (tg_run_release(&run->r)) tg_run_ended(run);
    Py_RETURN_NONE;
}

PyMethodDef tg_executor_methods[] = {
    {"_exec_configure", exec_configure, METH_VARARGS,
     "_exec_configure(Future, lock_type, PENDING, RUNNING, FINISHED, Executor): the future "
     "class submit makes and the states its calls move it through; installs Future.result "
     "and Executor.submit."},
    {"_exec_exiting", exec_exiting, METH_NOARGS, "_exec_exiting(): refuse every submit from now on."},
    {"_exec_hold", exec_hold, METH_O, "_exec_hold(run): hold the executor's run open."},
    {"_exec_release", exec_release, METH_O, "_exec_release(run): let go of _exec_hold's hold."},
    {NULL, NULL, 0, NULL},
};
