/* Run: one compute() call. It embeds the core's tg_run, which every task of the run points to
 * (RUN_OF finds the object back), and records why it was cancelled and its first error. The
 * engine's registry of active runs (tg_runs, embedded in the engine) is kept here too: a run
 * joins it at its first submission and leaves it when it ends. */
#include "run.h"

#include <errno.h>
#include <time.h>

static _Atomic int64_t live_runs; /* for the leak test: Run objects alive */

/* The runs' lock: node.cancel() reaches a run through one of its nodes, which holds no
 * reference to it (see docs/design/native.md); a Run's deallocation takes this lock first, so
 * a run reached through a node seen unfinished under it stays alive until it is released. */
static pthread_mutex_t runs_mu = PTHREAD_MUTEX_INITIALIZER;

void tg_runs_lock(void) { tg_lock_detached(&runs_mu); }
void tg_runs_unlock(void) { pthread_mutex_unlock(&runs_mu); }

/* Set in a child process after fork() (tg_runs_forked): the runs of engines made before the
 * fork can never end there. Relaxed: written by the child's only thread in the fork hook,
 * before it starts any other. */
static _Atomic int after_fork;

int tg_runs_after_fork(void) { return atomic_load_explicit(&after_fork, memory_order_relaxed); }

void tg_runs_forked(void) {
    /* A thread of the parent may have held the lock at the fork: it does not exist here. */
    pthread_mutex_init(&runs_mu, NULL);
    atomic_store_explicit(&after_fork, 1, memory_order_relaxed); /* see after_fork */
}

int64_t tg_live_runs(void) { return atomic_load_explicit(&live_runs, memory_order_relaxed); }

RunObject *tg_run_new(PyObject *owner, tg_pool *pool, tg_runs *reg) {
    RunObject *run = (RunObject *)TG_RunType.tp_alloc(&TG_RunType, 0);
    if (!run) return NULL;
    run->owner = Py_NewRef(owner);
    run->engine = reg;
    run->r.pool = pool;
    pthread_mutex_init(&run->mu, NULL);
    pthread_cond_init(&run->cv, NULL);
    atomic_fetch_add_explicit(&live_runs, 1, memory_order_relaxed); /* a count, read by tests */
    return run;
}

/* GC support: a run holds its first error, whose traceback may hold the run (the frame of
 * the compute that raised it): a cycle only the collector can break. */
static int run_traverse(RunObject *run, visitproc visit, void *arg) {
    Py_VISIT(run->error);
    Py_VISIT(run->reason);
    return 0;
}

static int run_clear(RunObject *run) {
    PyObject *error, *reason;
    pthread_mutex_lock(&run->mu);
    error = run->error;
    reason = run->reason;
    run->error = run->reason = NULL;
    pthread_mutex_unlock(&run->mu);
    Py_XDECREF(error);
    Py_XDECREF(reason);
    return 0;
}

static void run_dealloc(RunObject *run) {
    PyObject_GC_UnTrack((PyObject *)run);
    /* Waits for a node.cancel() that reached this run while one of its nodes was unfinished
     * (tg_runs_lock); any later one sees the node finished and leaves the run alone. */
    tg_runs_lock();
    tg_runs_unlock();
    run_clear(run);
    Py_CLEAR(run->owner);
    pthread_mutex_destroy(&run->mu);
    pthread_cond_destroy(&run->cv);
    atomic_fetch_sub_explicit(&live_runs, 1, memory_order_relaxed); /* see run_new */
    Py_TYPE(run)->tp_free((PyObject *)run);
}

int tg_runs_add(tg_runs *e, RunObject *run) {
    pthread_mutex_lock(&e->mu);
    int closed = atomic_load_explicit(&e->closed, memory_order_relaxed); /* under mu */
    PyObject *broken = Py_XNewRef(e->broken);
    if (!closed && !broken && !run->registered) {
        run->prev = NULL;
        run->next = e->runs;
        if (e->runs) e->runs->prev = run;
        e->runs = (RunObject *)Py_NewRef((PyObject *)run);
        run->registered = 1;
    }
    pthread_mutex_unlock(&e->mu);
    if (broken) {
        PyErr_Format(TG.BrokenSchedulerError, "%U is broken: %U", e->label, broken);
        Py_DECREF(broken);
        return -1;
    }
    if (closed) {
        PyErr_Format(TG.SchedulerClosedError, "%U is closed", e->label);
        return -1;
    }
    return 0;
}

RunObject **tg_runs_active(tg_runs *e, int *n) {
    pthread_mutex_lock(&e->mu);
    int k = 0;
    for (RunObject *r = e->runs; r; r = r->next) k++;
    RunObject **runs = malloc(sizeof(RunObject *) * (size_t)(k ? k : 1));
    int i = 0;
    for (RunObject *r = e->runs; runs && r; r = r->next) runs[i++] = (RunObject *)Py_NewRef((PyObject *)r);
    pthread_mutex_unlock(&e->mu);
    *n = runs ? k : -1;
    return runs;
}

void tg_runs_break(tg_runs *e, PyObject *reason) {
    PyObject *exc = PyErr_GetRaisedException(); /* kept for the caller */
    pthread_mutex_lock(&e->mu);
    int first = e->broken == NULL;
    if (first) e->broken = Py_NewRef(reason);
    pthread_mutex_unlock(&e->mu);
    if (first) {
        PyObject *err = PyObject_CallOneArg(TG.BrokenSchedulerError, reason);
        int n;
        RunObject **runs = tg_runs_active(e, &n);
        for (int i = 0; i < n; i++) {
            tg_run_cancel_with(runs[i], reason, err);
            Py_DECREF(runs[i]);
        }
        free(runs);
        Py_XDECREF(err);
        PyErr_Clear(); /* never raises: the runs are cancelled even without the error object */
    }
    PyErr_SetRaisedException(exc);
}

void tg_run_hold_until_drain(RunObject *run, NodeObject *kids) {
    tg_run_hold(&run->r); /* the run is live: a task of it is running here */
    NodeObject *tail = kids;
    while (tail && tail->sibling) tail = tail->sibling;
    pthread_mutex_lock(&run->engine->mu);
    run->drain_holds++;
    if (tail) {
        tail->sibling = run->drain_kids;
        run->drain_kids = kids;
    }
    pthread_mutex_unlock(&run->engine->mu);
}

void tg_runs_release_drain_holds(tg_runs *e) {
    int n;
    RunObject **runs = tg_runs_active(e, &n);
    if (!runs) Py_FatalError("taskgraph: out of memory releasing the runs held for the drain");
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&e->mu);
        int holds = runs[i]->drain_holds;
        NodeObject *kids = runs[i]->drain_kids;
        runs[i]->drain_holds = 0;
        runs[i]->drain_kids = NULL;
        pthread_mutex_unlock(&e->mu);
        while (kids) { /* every runner has returned: nobody touches them any more */
            NodeObject *next = kids->sibling;
            kids->sibling = NULL;
            Py_DECREF(kids);
            kids = next;
        }
        for (int k = 0; k < holds; k++)
            if (tg_run_release(&runs[i]->r)) tg_run_ended(runs[i]);
        Py_DECREF(runs[i]);
    }
    free(runs);
}

/* Removes run from the registry (its end). */
static void forget_run(tg_runs *e, RunObject *run) {
    pthread_mutex_lock(&e->mu);
    int was = run->registered;
    if (was) {
        if (run->prev) run->prev->next = run->next;
        else e->runs = run->next;
        if (run->next) run->next->prev = run->prev;
        run->prev = run->next = NULL;
        run->registered = 0;
    }
    pthread_mutex_unlock(&e->mu);
    if (was) Py_DECREF(run); /* the list's reference, released outside the lock */
}

void tg_run_ended(RunObject *run) {
    /* The engine's list holds a reference until tg_engine_forget_run: run stays alive here. */
    pthread_mutex_lock(&run->mu);
    run->ended = 1;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
    forget_run(run->engine, run);
}

void tg_run_cancel_with(RunObject *run, PyObject *reason, PyObject *error) {
    PyObject *old_reason = NULL, *old_error = NULL;
    Py_XINCREF(reason);
    Py_XINCREF(error);
    pthread_mutex_lock(&run->mu);
    if (reason && !run->reason) {
        run->reason = reason;
        reason = NULL;
    }
    if (error && !run->error) {
        run->error = error;
        error = NULL;
    }
    pthread_mutex_unlock(&run->mu);
    old_reason = reason; /* not taken: released outside the lock */
    old_error = error;
    tg_run_cancel(&run->r);
    Py_XDECREF(old_reason);
    Py_XDECREF(old_error);
}

/* wait(timeout): waits (detached) until the run ended or timeout seconds passed; True if it
 * ended. */
static PyObject *run_wait(RunObject *run, PyObject *arg) {
    double timeout = PyFloat_AsDouble(arg);
    if (timeout == -1.0 && PyErr_Occurred()) return NULL;
    int ended;
    Py_BEGIN_ALLOW_THREADS
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double secs = timeout > 0 ? timeout : 0;
    ts.tv_sec += (time_t)secs;
    ts.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&run->mu);
    while (!run->ended && pthread_cond_timedwait(&run->cv, &run->mu, &ts) != ETIMEDOUT) {
    }
    ended = run->ended;
    pthread_mutex_unlock(&run->mu);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(ended);
}

static PyObject *run_cancel(RunObject *run, PyObject *args) {
    PyObject *reason, *error = Py_None;
    if (!PyArg_ParseTuple(args, "U|O:Run.cancel", &reason, &error)) return NULL;
    if (error != Py_None && !PyExceptionInstance_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "Run.cancel(reason, error): error must be an exception or None");
        return NULL;
    }
    tg_run_cancel_with(run, reason, error == Py_None ? NULL : error);
    Py_RETURN_NONE;
}

static PyObject *get_locked(RunObject *run, PyObject **slot) {
    pthread_mutex_lock(&run->mu);
    PyObject *v = Py_XNewRef(*slot);
    pthread_mutex_unlock(&run->mu);
    return v ? v : Py_NewRef(Py_None);
}

static PyObject *run_get_error(RunObject *run, void *c) { (void)c; return get_locked(run, &run->error); }

static PyGetSetDef run_getset[] = {
    {"error", (getter)run_get_error, NULL, "The first failure of a top-level task, or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef run_methods[] = {
    {"wait", (PyCFunction)run_wait, METH_O,
     "wait(timeout) -> True once the run has ended; waits at most timeout seconds."},
    {"cancel", (PyCFunction)run_cancel, METH_VARARGS,
     "cancel(reason, error=None): tasks of the run that have not started never run; their "
     "CancelledError says reason, caused by error (the run's error, if it had none yet)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject TG_RunType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph._core.Run",
    .tp_basicsize = sizeof(RunObject),
    .tp_dealloc = (destructor)run_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One compute() call on an engine (private; made by Engine.new_run()).",
    .tp_traverse = (traverseproc)run_traverse,
    .tp_clear = (inquiry)run_clear,
    .tp_methods = run_methods,
    .tp_getset = run_getset,
};
