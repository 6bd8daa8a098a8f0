/* The native half of taskgraph.Executor (taskgraph/executor/executor.py): a work item, and the
 * way one submit() goes onto the pool.
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
 * Calling the item runs the call and stores its outcome in the future (run_call: the common
 * cases here, the others in the Future's own methods); an error escaping that (a bug, or a
 * user who completed the future by hand) goes to sys.unraisablehook. A call that leaves
 * children behind (tasks it called, lazy graphs it computed: not its nested submits, whose
 * outcome is their own futures') is completed only once its node's sync has waited for them:
 * the item then returns the call's result or raises its exception as the node's outcome, to
 * which the sync adds a failure of a child nobody read, as for any task, and the future gets
 * that outcome from a done callback of the node (Future._tg_settle). The executor's run is not
 * fail-fast (RunObject.exec, worker.c): one failed call never cancels the others, as it would
 * in a compute. The future's own callbacks run as no task (a task they call builds a lazy
 * node), as a node's do. An item dropped without having been called
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
/* Other names this file uses (see run_call). */
static PyObject *str_condition, *str_failed, *str_submit, *str_shutdown, *str_run, *str_refusal,
    *str_settle, *str_start;
#define TG_T_OBJECT_EX 16 /* structmember.h's T_OBJECT_EX (Py_T_OBJECT_EX from 3.12) */

int tg_executor_init(void) {
    struct { PyObject **slot; const char *s; } names[] = {
        {&str_never_ran, "_tg_never_ran"}, {&str_name, "__name__"},
        {&str_condition, "_condition"}, {&str_failed, "_tg_failed"}, {&str_submit, "submit"},
        {&str_shutdown, "_shutdown"}, {&str_run, "_run"}, {&str_refusal, "_refusal"},
        {&str_settle, "_tg_settle"}, {&str_start, "_start"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!*names[i].slot && !(*names[i].slot = PyUnicode_InternFromString(names[i].s))) return -1;
    return tg_future_init();
}

static void item_clear(ItemObject *it) {
    Py_CLEAR(it->future);
    Py_CLEAR(it->fn);
    Py_CLEAR(it->kwnames);
    for (Py_ssize_t i = 0; i < Py_SIZE(it); i++) Py_CLEAR(it->args[i]);
}

/* Dropped without having been called: its future is cancelled, or fails with BrokenThreadPool
 * when the executor broke (Future._tg_never_ran). Why is the CancelledError its node was
 * skipped with, stored by the thread dropping us just before (its cause: the run's error),
 * or None; the future holds the node. */
static void item_finalize(ItemObject *it) {
    PyObject *f = it->future;
    if (!f) return;
    it->future = NULL;
    PyObject *exc = PyErr_GetRaisedException(); /* kept for whoever dropped us */
    PyObject *node = TG_FUTURE_SLOT(f, TG_F_NODE);
    PyObject *why = node && Node_Check(node) && ((NodeObject *)node)->value
                        ? ((NodeObject *)node)->value : Py_None;
    Py_INCREF(why);
    PyObject *r = PyObject_CallMethodOneArg(f, str_never_ran, why);
    Py_DECREF(why);
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

/* The node running the item `it` (the task current on this worker, whose function it is),
 * or NULL (the item called some other way). */
static NodeObject *own_node(ItemObject *it) {
    Runner *W = TG_TLS.worker;
    NodeObject *me = W ? W->current : NULL;
    return me && me->fn == (PyObject *)it ? me : NULL;
}

/* Whether the call's node has children whose end its sync must wait for before the outcome is
 * known: one not finished, or failed or cancelled, that nobody read (`seen`: a nested submit's
 * node is marked seen when spawned, its outcome being its future's). The list is the running
 * task's own (this thread's). */
static int kids_unsettled(NodeObject *me) {
    for (NodeObject *k = me->kids; k; k = k->sibling)
        /* Relaxed `seen`: set by this thread, or by a reader whose read of k's outcome was
         * ordered after k's finish; a stale 0 only takes the slow path. */
        if (!atomic_load_explicit(&k->seen, memory_order_relaxed) && tg_task_state(&k->t) != TG_DONE)
            return 1;
    return 0;
}

/* The call: what Future.set_running_or_notify_cancel, the call and Future.set_result (or
 * set_exception, through Future._tg_failed) do, with the common cases here and every other
 * case in the Future's own methods (taskgraph/executor/future.py). The future is completed as
 * no task. 0, or -1 with an error. A call whose node `me` has unsettled children
 * (kids_unsettled) leaves the future running and returns 1: its outcome goes into *out (its
 * result, or NULL with the exception raised), the node's outcome, and the node's done
 * callback Future._tg_settle completes the future. */
static int run_call(PyObject *f, ItemObject *it, NodeObject *me, PyObject **out) {
    PyObject *lock = PyObject_GetAttr(f, str_condition);
    if (!lock) return -1;
    int go = tg_future_start(f, lock);
    int err = go < 0;
    if (go > 0) {
        PyObject *r = PyObject_Vectorcall(it->fn, it->args, (size_t)it->nargs, it->kwnames);
        PyObject *exc = r ? NULL : PyErr_GetRaisedException();
        PyObject *settle = me && kids_unsettled(me) ? PyObject_GetAttr(f, str_settle) : NULL;
        PyObject *added = settle ? tg_node_add_done_callback_m(me, settle) : NULL;
        Py_XDECREF(settle);
        if (added) { /* the node's sync first: its outcome, with its children's, is the future's */
            Py_DECREF(added);
            Py_DECREF(lock);
            *out = r;
            if (!r) PyErr_SetRaisedException(exc);
            return 1;
        }
        PyErr_Clear(); /* no callback (out of memory): completed now, as a call without children */
        NodeObject *cur = tg_suspend_task(); /* the future's callbacks: as no task */
        if (r) {
            err = tg_future_finish(f, lock, r) < 0;
            Py_DECREF(r);
        } else { /* fn raised: Future._tg_failed notes (naming the node) and stores it */
            PyObject *x = PyObject_CallMethodObjArgs(f, str_failed, exc,
                                                     me ? (PyObject *)me : Py_None, NULL);
            Py_DECREF(exc);
            err = !x;
            Py_XDECREF(x);
        }
        tg_resume_task(cur);
    }
    Py_DECREF(lock);
    return err ? -1 : 0;
}

/* The node's function: runs the call and completes the future (run_call), once. Returns None,
 * or, for a call that left children behind, the call's own outcome (see the top of the
 * file). */
static PyObject *item_call(ItemObject *it, PyObject *args, PyObject *kw) {
    if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "an executor work item takes no arguments");
        return NULL;
    }
    /* Only the node's runner calls it, once: the future is taken out first (a second call
     * finds none), the user's objects are let go right after the call. */
    PyObject *f = it->future;
    it->future = NULL;
    PyObject *out = NULL;
    int how = f ? run_call(f, it, own_node(it), &out) : 0;
    if (how < 0) { /* an internal error (or the future completed by hand): into the future if
                    * it can still take it */
        PyObject *err = PyErr_GetRaisedException();
        PyObject *x = PyObject_CallMethodOneArg(f, str_failed, err);
        if (x) Py_DECREF(x);
        else PyErr_Clear();
        PyErr_SetRaisedException(err);
        PyErr_WriteUnraisable(f); /* an internal error never fails the node (top of the file) */
    }
    PyObject *exc = how > 0 && !out ? PyErr_GetRaisedException() : NULL; /* deferred failure */
    Py_XDECREF(f);
    item_clear(it); /* may run Python code (the user's objects let go) */
    if (how <= 0) Py_RETURN_NONE;
    if (exc) PyErr_SetRaisedException(exc);
    return out;
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
 * function's), else fn.__name__ when it is a str, else its type's name. New reference. Not
 * interned (a function's name is, by the compiler): an interned string is immortal on
 * free-threaded builds, and a callable's __name__ may be new per object. NULL with an
 * error. */
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
    return name;
}

/* Whether the run takes no more calls (shutdown() began: _exec_release). seq_cst, after the
 * caller's hold on the run (when injecting): pairs with the seq_cst fence in exec_release
 * between its store of TG_EXEC_REFUSING and its release of the executor's hold. Either this
 * load sees the store (the call is refused), or the release comes after this hold in the
 * count's order, so the run cannot end, nor its pool close, before the call is queued: no
 * future returned by submit is ever cancelled by a shutdown that did not ask for it. */
static int refusing(RunObject *run) {
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&run->exec, memory_order_relaxed) == TG_EXEC_REFUSING;
}

/* The call fn(*args[:nargs], **dict(zip(kwnames, args[nargs:]))) as a node of the executor's
 * run, completing a new future (whose _node is that node), which it returns. Spawned onto
 * this worker's deque inside one of the run's engine's tasks, else claimed and injected.
 * TypeError if fn is not callable; SchedulerClosedError / BrokenSchedulerError if the engine
 * takes no more work; NULL with no error if the run takes no more calls (refusing). */
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
    PyObject *f = tg_future_new();
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
    NodeObject *n = tg_node_new((PyObject *)it, name, NULL, NULL, NULL, NULL, 0, NULL);
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
    Py_SETREF(TG_FUTURE_SLOT(f, TG_F_NODE), Py_NewRef((PyObject *)n)); /* nobody else sees f yet */
    /* Its outcome is its future's: its parent's sync never takes its end for the parent's. */
    atomic_store_explicit(&n->seen, 1, memory_order_relaxed);
    if (!spawn) tg_run_hold(&run->r); /* for its claim (tg_submit_one): see refusing() */
    int err = 0;
    if (refusing(run)) {
        Py_CLEAR(it->future); /* nobody will see this future: no cancel to report */
        if (!spawn && tg_run_release(&run->r)) tg_run_ended(run);
        err = -1;
    } else {
        err = spawn ? tg_spawn(W, n) /* a child of the running task: a join of it helps */
                    : tg_submit_one(run, n); /* the run is registered: _exec_hold */
        /* Refused before its claim (closed): its inputs are still there, and the cycle
         * future -> node -> item -> future with them, which the collector cannot see (the
         * item is not tracked). Nobody will see this future. */
        if (err < 0 && n->fn && Py_IS_TYPE(n->fn, &TG_ExecItemType))
            Py_CLEAR(((ItemObject *)n->fn)->future);
    }
    Py_DECREF(n); /* the future holds it */
    if (err < 0) { /* never queued: its item cancels the future; the caller raises */
        Py_DECREF(f);
        return NULL;
    }
    return f;
}

/* Set by _exec_exiting() at interpreter exit (taskgraph/executor/executor.py's _python_exit).
 * Relaxed: a flag read once per submit; a submit racing with the exit hook may still get in,
 * as it may with ThreadPoolExecutor. */
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
 * submit_call on the executor's run (self._run; self._start() makes it at the first use). */
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
    if (run == Py_None) { /* the first use: self._start() starts the pool (None: shut down) */
        Py_SETREF(run, PyObject_CallMethodNoArgs(self, str_start));
        if (run == Py_None) {
            Py_DECREF(run);
            return refuse(self, NULL);
        }
    }
    if (!run) return NULL;
    if (!PyObject_TypeCheck(run, &TG_RunType)) {
        Py_DECREF(run);
        return PyErr_Format(PyExc_TypeError, "%R has no run of its own", self);
    }
    PyObject *f = submit_call((RunObject *)run, args[0], args + 1, nargs - 1, kwnames);
    Py_DECREF(run);
    if (!f && !PyErr_Occurred()) return refuse(self, NULL); /* shut down under us */
    if (!f && PyErr_ExceptionMatches(TG.SchedulerClosedError)) /* closed under us */
        return refuse(self, PyErr_GetRaisedException());
    return f;
}

static PyMethodDef executor_submit_def = {
    "submit", (PyCFunction)(void (*)(void))executor_submit, METH_FASTCALL | METH_KEYWORDS,
    "submit($self, fn, /, *args, **kwargs)\n--\n\n"
    "Schedules fn(*args, **kwargs) and returns its concurrent.futures.Future (see "
    "taskgraph.Executor and docs/api/executor.md): queued for the pool from outside a worker, pushed "
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

/* The offset of a slot holding an object, named `name` in type t; -1 with a TypeError naming
 * who wants it. */
static Py_ssize_t object_slot(PyObject *t, PyObject *name, const char *who) {
    PyObject *d = PyObject_GetAttr(t, name);
    if (!d) return -1;
    int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
             ((PyMemberDescrObject *)d)->d_member->type == TG_T_OBJECT_EX;
    Py_ssize_t off = ok ? ((PyMemberDescrObject *)d)->d_member->offset : -1;
    Py_DECREF(d);
    if (!ok) PyErr_Format(PyExc_TypeError, "%s: %R.%U is not a slot", who, t, name);
    return off;
}

/* _exec_configure(Future, lock_type, PENDING, RUNNING, FINISHED, Executor): the future class
 * submit makes and how it is completed (execfuture.c, which installs Future.result), the
 * states (concurrent.futures._base's) a call moves it through; installs Executor.submit (a
 * method descriptor of this file). Once, at import. */
static PyObject *exec_configure(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *ft, *lt, *p, *r, *f, *et;
    if (!PyArg_ParseTuple(args, "O!OUUUO!:_exec_configure", &PyType_Type, &ft, &lt, &p, &r, &f,
                          &PyType_Type, &et))
        return NULL;
    Py_ssize_t sd_off = object_slot(et, str_shutdown, "_exec_configure");
    if (sd_off < 0 || tg_future_configure(ft, lt, p, r, f, object_slot) < 0) return NULL;
    shutdown_offset = sd_off;
    PyObject *descr = PyDescr_NewMethod((PyTypeObject *)et, &executor_submit_def);
    int bad = !descr || PyObject_SetAttr(et, str_submit, descr) < 0;
    Py_XDECREF(descr);
    if (bad) return NULL;
    Py_RETURN_NONE;
}

/* The run argument of `fn`(run), or NULL with a TypeError naming the call. */
static RunObject *run_arg(PyObject *arg, const char *fn) {
    if (PyObject_TypeCheck(arg, &TG_RunType)) return (RunObject *)arg;
    PyErr_Format(PyExc_TypeError, "%s(run): expected a Run, got %.200s", fn, Py_TYPE(arg)->tp_name);
    return NULL;
}

/* _exec_hold(run): registers the run with its engine and holds it open (it does not end when
 * its queue runs empty) until _exec_release; the run is an Executor's from now on (no
 * fail-fast: RunObject.exec). SchedulerClosedError if the engine is closed. */
static PyObject *exec_hold(PyObject *mod, PyObject *arg) {
    (void)mod;
    RunObject *run = run_arg(arg, "_exec_hold");
    if (!run) return NULL;
    atomic_store_explicit(&run->exec, TG_EXEC_OPEN, memory_order_relaxed); /* before any call */
    if (tg_runs_add(run->engine, run) < 0) return NULL;
    tg_run_hold(&run->r);
    Py_RETURN_NONE;
}

/* _exec_release(run): the run takes no more calls (submit refuses, see refusing()), then lets
 * go of _exec_hold's hold; the run ends once its calls have finished (Run.wait() then returns
 * True). Once per hold. */
static PyObject *exec_release(PyObject *mod, PyObject *arg) {
    (void)mod;
    RunObject *run = run_arg(arg, "_exec_release");
    if (!run) return NULL;
    atomic_store_explicit(&run->exec, TG_EXEC_REFUSING, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst); /* see refusing() */
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
