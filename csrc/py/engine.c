/* Engine: the native half of a taskgraph.Scheduler. The engine owns its pool: it creates it
 * (tg_pool_new) when it is made and frees it in its dealloc, so the pool lives as long as
 * anything can reach the engine (the Scheduler, each worker thread, each Run): a stats() or a
 * compute() racing with close() never touches freed memory; it sees a shut-down pool instead.
 * The engine also owns the per-worker runners, its run registry (run.c), its workers' tracing
 * state (an observer, recorder.c), and the closing and draining. No address crosses into
 * Python. */
#include "engine.h"

#include <stdlib.h>
#include <unistd.h>

/* The live engines, for the after-fork hook (tg_engines_after_fork_child). */
static pthread_mutex_t engines_mu = PTHREAD_MUTEX_INITIALIZER;
static EngineObject *live_engines; /* engines_mu */

static void add_live(EngineObject *e) {
    tg_lock_detached(&engines_mu);
    e->live_prev = NULL;
    e->live_next = live_engines;
    if (live_engines) live_engines->live_prev = e;
    live_engines = e;
    e->live = 1;
    pthread_mutex_unlock(&engines_mu);
}

static void remove_live(EngineObject *e) {
    tg_lock_detached(&engines_mu);
    if (e->live) {
        if (e->live_prev) e->live_prev->live_next = e->live_next;
        else live_engines = e->live_next;
        if (e->live_next) e->live_next->live_prev = e->live_prev;
        e->live = 0;
    }
    pthread_mutex_unlock(&engines_mu);
}

void tg_engines_after_fork_child(void) {
    /* The only thread of the child: one of the parent's may have held engines_mu. Every engine
     * alive now was made before the fork. */
    pthread_mutex_init(&engines_mu, NULL);
    for (EngineObject *e = live_engines, *next; e; e = next) {
        next = e->live_next;
        e->live_prev = e->live_next = NULL;
        e->live = 0;
        tg_engine_mark_forked(e);
    }
    live_engines = NULL;
}

static PyObject *engine_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"workers", "number", "max_help_depth", "label", "spares", "spare_idle",
                            "detect", NULL};
    PyObject *label;
    int nworkers, number, depth, spares = 0, detect = 1;
    double spare_idle = 0.5;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iiiU|idp:Engine", names, &nworkers, &number, &depth,
                                     &label, &spares, &spare_idle, &detect))
        return NULL;
    if (nworkers < 1 || nworkers > TG_MAX_WORKERS || depth < 0 || spares < 0 ||
        spares > TG_MAX_SPARES || !(spare_idle >= 0 && spare_idle <= 3600)) {
        PyErr_Format(PyExc_ValueError, "Engine: workers must be 1..%d, max_help_depth >= 0, "
                     "spares 0..%d and spare_idle 0..3600 s, got workers=%d, max_help_depth=%d, "
                     "spares=%d", TG_MAX_WORKERS, TG_MAX_SPARES, nworkers, depth, spares);
        return NULL;
    }
    EngineObject *e = (EngineObject *)type->tp_alloc(type, 0);
    if (!e) return NULL;
    /* The pool first: dealloc frees whatever was made (e->pool, e->workers may be NULL). */
    e->pool = tg_pool_new_spares(nworkers, spares);
    if (!e->pool) {
        Py_DECREF(e);
        return PyErr_Format(PyExc_MemoryError, "taskgraph: could not create a pool of %d workers",
                            nworkers);
    }
    tg_pool_set_detection(e->pool, detect);
    int nslots = nworkers + spares;
    size_t bytes = (sizeof(Runner) * (size_t)nslots + 63) / 64 * 64;
    e->workers = aligned_alloc(64, bytes);
    if (!e->workers) {
        Py_DECREF(e);
        return PyErr_NoMemory();
    }
    memset(e->workers, 0, bytes);
    e->nworkers = nworkers;
    e->nslots = nslots;
    e->spare_idle_ns = (int64_t)(spare_idle * 1e9);
    e->number = number;
    e->max_help_depth = depth;
    e->nthreads = nworkers;
    e->label = Py_NewRef(label);
    e->reg.label = e->label;
    pthread_mutex_init(&e->reg.mu, NULL);
    atomic_init(&e->reg.closed, 0);
    atomic_init(&e->forked, 0);
    e->obs = tg_observer_new(number, nworkers, nslots); /* given recorders if a trace is open */
    if (!e->obs) {
        Py_DECREF(e);
        return NULL;
    }
    for (int i = 0; i < nslots; i++) {
        Runner *W = &e->workers[i];
        W->engine = (PyObject *)e;
        W->pool = e->pool;
        W->runs = &e->reg;
        W->watch = tg_observer_watch(e->obs, i);
        W->index = i;
        W->max_help_depth = depth;
    }
    e->reg.watch0 = e->workers[0].watch;
    tg_pool_set_idle_hooks(e->pool, tg_idle_begin, tg_idle_end);
    add_live(e);
    return (PyObject *)e;
}

/* Runs when the last of the Scheduler, the worker threads and the Runs lets go: every worker
 * thread has returned from work() (each holds the engine while it runs), so no thread is
 * inside the pool any more. An engine made before fork() keeps its pool in the child: the
 * parent's threads may have held its locks at the fork, and its queues may be half-written
 * (docs/design/native.md, "fork"); the child's copy is leaked, deliberately. */
static void engine_dealloc(EngineObject *e) {
    /* Relaxed: set once in the child by tg_engine_mark_forked, before any other thread ran. */
    int forked = atomic_load_explicit(&e->forked, memory_order_relaxed);
    if (!forked) remove_live(e);
    tg_observer_free(e->obs, forked);
    e->obs = NULL;
    if (e->workers) {
        free(e->workers);
        if (!forked) pthread_mutex_destroy(&e->reg.mu);
    }
    if (e->pool && !forked) tg_pool_free(e->pool);
    e->pool = NULL;
    Py_CLEAR(e->label);
    Py_CLEAR(e->reg.broken);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* work(i): the life of worker thread i: runs tasks until the pool shuts down. */
static PyObject *engine_work(EngineObject *e, PyObject *arg) {
    int i = tg_long_as_int(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= e->nworkers) {
        PyErr_Format(PyExc_ValueError, "no worker %d", i);
        return NULL;
    }
    if (TG_TLS.worker) {
        PyErr_SetString(PyExc_RuntimeError, "this thread is already a taskgraph worker");
        return NULL;
    }
    Runner *W = &e->workers[i];
    W->stack_low = tg_c_stack_limit();
    TG_TLS.worker = W;
    tg_pool_attach(e->pool, i);
    tg_wait_until(W, NULL);
    tg_pool_detach(e->pool, i);
    tg_leases_release(&W->leases); /* the Tasks its nodes borrowed from (lease.h) */
    tg_node_cache_release(&W->nodes);
    TG_TLS.worker = NULL;
    if (W->died) {
        PyErr_Format(PyExc_RuntimeError, "worker %d stopped (injected fault)", i);
        return NULL;
    }
    Py_RETURN_NONE;
}

static int is_forked(EngineObject *e);

/* work_spare(slot): the life of a spare's thread (pool.h, "Waiting tasks and spare workers"):
 * runs the slot's dispatch loop while on duty, waits off duty (detached), and returns once it
 * was idle for spare_idle or the pool shut down. The manager (manage()) picked the slot. */
static PyObject *engine_work_spare(EngineObject *e, PyObject *arg) {
    int i = tg_long_as_int(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < e->nworkers || i >= e->nslots)
        return PyErr_Format(PyExc_ValueError, "no spare slot %d", i);
    if (TG_TLS.worker)
        return PyErr_Format(PyExc_RuntimeError, "this thread is already a taskgraph worker");
    Runner *W = &e->workers[i];
    W->stack_low = tg_c_stack_limit();
    TG_TLS.worker = W;
    tg_pool_attach(e->pool, i);
    tg_pool_spare_begin(e->pool, i);
    for (;;) {
        tg_wait_until(W, NULL); /* TG_FIND_LEAVE or TG_FIND_SHUTDOWN */
        tg_leases_release(&W->leases);
        int again;
        Py_BEGIN_ALLOW_THREADS
        again = tg_pool_spare_wait(e->pool, i, e->spare_idle_ns);
        Py_END_ALLOW_THREADS
        if (!again) break;
    }
    tg_pool_detach(e->pool, i);
    TG_TLS.worker = NULL;
    Py_RETURN_NONE;
}

/* manage(): the manager's step (tg_pool_manage, detached): the spare slot whose thread the
 * caller must start now (counted as a thread of the engine: its exit calls _worker_exited),
 * or -1 once the pool shut down. */
static PyObject *engine_manage(EngineObject *e, PyObject *unused) {
    (void)unused;
    if (is_forked(e)) return PyLong_FromLong(-1);
    int slot;
    Py_BEGIN_ALLOW_THREADS
    slot = tg_pool_manage(e->pool);
    Py_END_ALLOW_THREADS
    if (slot >= 0) {
        pthread_mutex_lock(&e->reg.mu);
        e->nthreads++;
        pthread_mutex_unlock(&e->reg.mu);
    }
    return PyLong_FromLong(slot);
}

static PyObject *engine_worker_exited(EngineObject *e, PyObject *unused);

/* _spare_failed(slot): the thread for a spare slot could not be started: the slot is free
 * again and the engine expects one thread fewer. */
static PyObject *engine_spare_failed(EngineObject *e, PyObject *arg) {
    int i = tg_long_as_int(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < e->nworkers || i >= e->nslots)
        return PyErr_Format(PyExc_ValueError, "no spare slot %d", i);
    tg_pool_spare_failed(e->pool, i);
    return engine_worker_exited(e, NULL); /* as if it had started and left */
}

/* spare_stats(): the spares' counters as a dict. */
static PyObject *engine_spare_stats(EngineObject *e, PyObject *unused) {
    (void)unused;
    tg_spare_stats st = {0};
    st.limit = e->nslots - e->nworkers;
    if (!is_forked(e)) tg_pool_spare_stats(e->pool, &st); /* its lock may be a lost thread's */
    return Py_BuildValue("{sLsLsLsLsLsLsLsLsLsLsLsL}", "limit", st.limit, "threads", st.threads,
                         "peak_threads", st.peak, "on_duty", st.on_duty, "blocked", st.blocked,
                         "stalled", st.stalled, "started", st.started, "retired", st.retired, "failed",
                         st.failed, "stalls", st.stalls, "activations", st.activations, "yields", st.yields);
}

/* submit(run, nodes): submits the lazy graph under the Nodes in the list `nodes` as part of
 * run, from outside the workers. Returns how many nodes it claimed. */
static PyObject *engine_submit(EngineObject *e, PyObject *args) {
    RunObject *run;
    PyObject *nodes;
    if (!PyArg_ParseTuple(args, "O!O:submit", &TG_RunType, &run, &nodes)) return NULL;
    if (run->engine != &e->reg) {
        PyErr_SetString(PyExc_ValueError, "submit: the run belongs to another engine");
        return NULL;
    }
    PyObject *snap = tg_nodes_in_place(nodes, "submit()");
    if (!snap) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(snap), others = 0;
    Py_ssize_t claimed = tg_submit(run, n ? PySequence_Fast_ITEMS(snap) : NULL, n, NULL, &others);
    Py_DECREF(snap);
    return claimed < 0 ? NULL : Py_BuildValue("nn", claimed, others);
}

/* Raises SchedulerClosedError for an engine made before fork(), used in the child; NULL. */
static PyObject *forked_error(EngineObject *e) {
    return PyErr_Format(TG.SchedulerClosedError,
                        "%U was made before fork(): its worker threads do not exist in this "
                        "child process (pid %ld), so it cannot run anything here; make a new "
                        "Scheduler in the child (the default scheduler is made anew on its own)",
                        e->label, (long)getpid());
}

static int is_forked(EngineObject *e) {
    /* Relaxed: set once in the child by tg_engine_mark_forked, before any other thread ran. */
    return atomic_load_explicit(&e->forked, memory_order_relaxed);
}

/* drain(): after the pool shut down and every worker thread returned: finishes every task
 * left in a queue as cancelled (and, through them, what was waiting for them). Only the first
 * call drains (close(), the last worker of a dropped scheduler, a stopped worker: whoever
 * comes first); the others return at once. */
static PyObject *engine_drain(EngineObject *e, PyObject *unused) {
    (void)unused;
    if (is_forked(e)) return forked_error(e); /* half-written queues of threads that are gone */
    pthread_mutex_lock(&e->reg.mu);
    int first = !e->drained;
    e->drained = 1;
    pthread_mutex_unlock(&e->reg.mu);
    if (!first) Py_RETURN_NONE;
    tg_task *t;
    while (tg_pool_drain(e->pool, &t)) tg_drain_one(&e->workers[0], t);
    tg_runs_release_drain_holds(&e->reg); /* children of syncs cut short are finished now */
    tg_observer_detach(e->obs); /* its workers are gone: trace_start/stop skip them */
    Py_RETURN_NONE;
}

static PyObject *engine_begin_close(EngineObject *e, PyObject *reason);

/* _dropped(ref): the weakref callback of a Scheduler garbage collected without close(), as
 * ThreadPoolExecutor's: cancels the runs, shuts the pool down (the workers leave once their
 * running tasks end) and marks the engine orphaned, so that the last worker to leave drains
 * the queues (this call does, if none is left). All in C, so no Python code runs at the
 * collection (a pending KeyboardInterrupt is not swallowed there); it never joins, since it
 * may run on one of the engine's own workers. A no-op for an engine made before fork(). */
static PyObject *engine_dropped(EngineObject *e, PyObject *ref) {
    (void)ref;
    if (is_forked(e)) Py_RETURN_NONE;
    PyObject *reason = PyUnicode_FromFormat("%U was dropped without close()", e->label);
    PyObject *r = reason ? engine_begin_close(e, reason) : NULL;
    Py_XDECREF(reason);
    if (!r) return NULL;
    Py_DECREF(r);
    Py_BEGIN_ALLOW_THREADS /* takes the pool's locks: never block a collection meanwhile */
    tg_pool_shutdown(e->pool);
    Py_END_ALLOW_THREADS
    pthread_mutex_lock(&e->reg.mu);
    e->orphaned = 1;
    int gone = e->exited >= e->nthreads;
    pthread_mutex_unlock(&e->reg.mu);
    if (gone) return engine_drain(e, NULL);
    Py_RETURN_NONE;
}

/* _worker_exited(): a worker thread has returned from work() for good; the last one drains
 * the queues if the Scheduler was dropped. */
static PyObject *engine_worker_exited(EngineObject *e, PyObject *unused) {
    (void)unused;
    pthread_mutex_lock(&e->reg.mu);
    e->exited++;
    int last = e->orphaned && e->exited >= e->nthreads;
    pthread_mutex_unlock(&e->reg.mu);
    if (last) return engine_drain(e, NULL);
    Py_RETURN_NONE;
}

/* _set_threads(k): only k worker threads were started (the others failed to start). */
static PyObject *engine_set_threads(EngineObject *e, PyObject *arg) {
    int k = tg_long_as_int(arg);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (k < 0 || k > e->nworkers) {
        PyErr_Format(PyExc_ValueError, "_set_threads(%d): %U has %d workers", k, e->label,
                     e->nworkers);
        return NULL;
    }
    pthread_mutex_lock(&e->reg.mu);
    e->nthreads = k;
    pthread_mutex_unlock(&e->reg.mu);
    Py_RETURN_NONE;
}

/* begin_close(reason): marks the engine closed and cancels its active runs with reason.
 * False if it was closed already. */
static PyObject *engine_begin_close(EngineObject *e, PyObject *reason) {
    if (!PyUnicode_Check(reason)) {
        PyErr_SetString(PyExc_TypeError, "begin_close(reason) needs a str");
        return NULL;
    }
    if (is_forked(e)) Py_RETURN_FALSE; /* closed already (tg_engine_mark_forked); never locked */
    pthread_mutex_lock(&e->reg.mu);
    int was = atomic_load_explicit(&e->reg.closed, memory_order_relaxed); /* under mu */
    /* Release: pairs with the acquire in cancel_error (worker.c). */
    atomic_store_explicit(&e->reg.closed, 1, memory_order_release);
    pthread_mutex_unlock(&e->reg.mu);
    int k;
    RunObject **runs = tg_runs_active(&e->reg, &k);
    if (!runs) return PyErr_NoMemory();
    for (int i = 0; i < k; i++) {
        tg_run_cancel_with(runs[i], reason, NULL);
        Py_DECREF(runs[i]);
    }
    free(runs);
    return PyBool_FromLong(!was);
}

/* shutdown(): the pool refuses new work and every worker returns from work() once its own
 * deque is empty (tg_pool_shutdown). Idempotent. */
static PyObject *engine_shutdown(EngineObject *e, PyObject *unused) {
    (void)unused;
    if (is_forked(e)) return forked_error(e); /* its locks may be held by a thread that is gone */
    Py_BEGIN_ALLOW_THREADS /* takes the pool's locks: never block a collection meanwhile */
    tg_pool_shutdown(e->pool);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *stats_tuple(EngineObject *e, int w) {
    int64_t buf[TG_NSTATS];
    tg_pool_stats(e->pool, w, buf);
    PyObject *t = PyTuple_New(TG_NSTATS);
    if (!t) return NULL;
    for (int k = 0; k < TG_NSTATS; k++) {
        PyObject *v = PyLong_FromLongLong(buf[k]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, v);
    }
    return t;
}

/* stats([i]): worker i's counters as a tuple (in the order of core.STAT_NAMES), or, with no
 * argument, a list of every worker's. Any thread; after shutdown too (the last values). */
static PyObject *engine_stats(EngineObject *e, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "stats() takes at most one argument (a worker index)");
        return NULL;
    }
    if (nargs == 1) {
        int i = tg_long_as_int(args[0]);
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (i < 0 || i >= e->nworkers) {
            PyErr_Format(PyExc_IndexError, "stats(%d): %U has workers 0..%d", i, e->label,
                         e->nworkers - 1);
            return NULL;
        }
        return stats_tuple(e, i);
    }
    PyObject *out = PyList_New(e->nworkers);
    if (!out) return NULL;
    for (int i = 0; i < e->nworkers; i++) {
        PyObject *t = stats_tuple(e, i);
        if (!t) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* queued(): approximate number of queued tasks (every deque and the injector). Any thread. */
static PyObject *engine_queued(EngineObject *e, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(tg_pool_queued(e->pool));
}

/* sleeping(): how many workers are parked waiting for work right now (a snapshot). */
static PyObject *engine_sleeping(EngineObject *e, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(tg_pool_sleeping(e->pool));
}

static PyObject *engine_get_is_shutdown(EngineObject *e, void *c) {
    (void)c;
    return PyBool_FromLong(tg_pool_is_shutdown(e->pool));
}

static PyObject *engine_get_forked(EngineObject *e, void *c) {
    (void)c;
    return PyBool_FromLong(is_forked(e));
}

int tg_engine_check_owner(NodeObject *n) {
    if (!tg_runs_after_fork()) return 0; /* no fork() in this process's past: nothing to check */
    /* Relaxed owner: written once by the claim, before the node could be waited for
     * (noderec.h). The owner is alive while the node is unfinished: its run is live, so the
     * engine's list of active runs holds the run, which holds the engine; under the runs'
     * lock a node seen unfinished keeps its run from being freed (run.c), so the engine is
     * not freed while we look at it either. */
    tg_runs_lock();
    EngineObject *e = (EngineObject *)atomic_load_explicit(&n->owner, memory_order_relaxed);
    int stale = e && tg_task_state(&n->t) < TG_DONE && is_forked(e);
    tg_runs_unlock();
    if (!stale) return 0;
    return tg_err_node(TG.SchedulerClosedError, n,
                       "node %U belongs to a compute of %U, made before fork(): it cannot run or "
                       "finish in this child process (pid %ld); build the graph again here",
                       e->label, (long)getpid());
}

void tg_engine_mark_forked(EngineObject *e) {
    /* Relaxed: the child has one thread until the after-fork hooks return. */
    atomic_store_explicit(&e->forked, 1, memory_order_relaxed);
    /* Release: pairs with the acquire loads of closed (the `closed` property, cancel_error). */
    atomic_store_explicit(&e->reg.closed, 1, memory_order_release);
}

/* _mark_forked(): in a child process after fork(), from taskgraph.scheduler's hook. */
static PyObject *engine_mark_forked(EngineObject *e, PyObject *unused) {
    (void)unused;
    tg_engine_mark_forked(e);
    Py_RETURN_NONE;
}

static PyObject *engine_get_closed(EngineObject *e, void *c) {
    (void)c;
    return PyBool_FromLong(atomic_load_explicit(&e->reg.closed, memory_order_acquire)); /* see close */
}

/* break_(reason): marks the engine broken (tg_runs_break). */
static PyObject *engine_break(EngineObject *e, PyObject *reason) {
    if (!PyUnicode_Check(reason)) {
        PyErr_SetString(PyExc_TypeError, "break_(reason) needs a str");
        return NULL;
    }
    tg_runs_break(&e->reg, reason);
    Py_RETURN_NONE;
}

static PyObject *engine_get_broken(EngineObject *e, void *c) {
    (void)c;
    if (is_forked(e)) /* its lock may be held by a thread that is gone; nothing writes it now */
        return Py_NewRef(e->reg.broken ? e->reg.broken : Py_None);
    pthread_mutex_lock(&e->reg.mu);
    PyObject *b = Py_XNewRef(e->reg.broken);
    pthread_mutex_unlock(&e->reg.mu);
    return b ? b : Py_NewRef(Py_None);
}

/* new_run(): a new Run (one compute()) on this engine. */
static PyObject *engine_new_run(EngineObject *e, PyObject *unused) {
    (void)unused;
    return (PyObject *)tg_run_new((PyObject *)e, e->pool, &e->reg);
}

/* wants_work(): inside one of this engine's tasks, whether some worker is idle while this
 * worker's own deque is empty (tg_pool_wants_work): the signal tg.map splits on. False
 * elsewhere. */
static PyObject *engine_wants_work(EngineObject *e, PyObject *unused) {
    (void)unused;
    Runner *W = TG_TLS.worker;
    return PyBool_FromLong(W && W->engine == (PyObject *)e && tg_pool_wants_work(e->pool, W->index));
}

static PyMethodDef engine_methods[] = {
    {"wants_work", (PyCFunction)engine_wants_work, METH_NOARGS,
     "wants_work() -> inside one of its tasks: whether a worker is idle while this worker's "
     "own deque is empty (tg.map splits then); else False."},
    {"new_run", (PyCFunction)engine_new_run, METH_NOARGS,
     "new_run() -> a new Run: one compute() on this engine."},
    {"work", (PyCFunction)engine_work, METH_O, "work(i): worker thread i's life."},
    {"work_spare", (PyCFunction)engine_work_spare, METH_O,
     "work_spare(slot): a spare thread's life: on duty while needed, ends after spare_idle."},
    {"manage", (PyCFunction)engine_manage, METH_NOARGS,
     "manage() -> the spare slot whose thread to start now, or -1 once shut down (blocks)."},
    {"_spare_failed", (PyCFunction)engine_spare_failed, METH_O,
     "_spare_failed(slot): the thread for that spare slot could not be started."},
    {"spare_stats", (PyCFunction)engine_spare_stats, METH_NOARGS,
     "spare_stats() -> dict: the spare workers' counters."},
    {"submit", (PyCFunction)engine_submit, METH_VARARGS,
     "submit(run, nodes) -> (claimed, others): the lazy graph under nodes joins run; how many "
     "nodes it claimed, and how many unfinished ones another run had claimed."},
    {"begin_close", (PyCFunction)engine_begin_close, METH_O,
     "begin_close(reason) -> False if already closed; else marks it closed and cancels its runs."},
    {"break_", (PyCFunction)engine_break, METH_O,
     "break_(reason): marks the engine broken: its runs are cancelled, new ones refused."},
    {"drain", (PyCFunction)engine_drain, METH_NOARGS,
     "drain(): finishes what is left in the queues as cancelled (after the workers stopped); "
     "only the first call drains."},
    {"_dropped", (PyCFunction)engine_dropped, METH_O,
     "_dropped(ref): weakref callback of a Scheduler dropped without close(): cancels its "
     "runs and shuts its pool down; the last worker to leave drains the queues. Never joins."},
    {"_worker_exited", (PyCFunction)engine_worker_exited, METH_NOARGS,
     "_worker_exited(): a worker thread left work() for good (drains if it is the last one "
     "of a dropped scheduler)."},
    {"_set_threads", (PyCFunction)engine_set_threads, METH_O,
     "_set_threads(k): only k worker threads were started."},
    {"shutdown", (PyCFunction)engine_shutdown, METH_NOARGS,
     "shutdown(): the pool refuses new work; each worker's work() returns once its own queue "
     "is empty; parked workers wake. Idempotent. SchedulerClosedError in a child process for "
     "an engine made before fork()."},
    {"stats", (PyCFunction)(void (*)(void))engine_stats, METH_FASTCALL,
     "stats(i) -> worker i's counters (tuple, in the order of STAT_NAMES; IndexError for no "
     "such worker); stats() -> a list of every worker's. Any thread, after shutdown too."},
    {"_mark_forked", (PyCFunction)engine_mark_forked, METH_NOARGS,
     "_mark_forked(): in a child process after fork() only: this engine, made before the "
     "fork, is closed for good (its threads are gone; nothing of it is touched again)."},
    {"queued", (PyCFunction)engine_queued, METH_NOARGS,
     "queued() -> approximate number of queued tasks (all deques and the injector)."},
    {"sleeping", (PyCFunction)engine_sleeping, METH_NOARGS,
     "sleeping() -> how many workers are parked waiting for work right now (a snapshot)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef engine_getset[] = {
    {"closed", (getter)engine_get_closed, NULL, "Whether close began.", NULL},
    {"broken", (getter)engine_get_broken, NULL, "Why it is broken (str), or None.", NULL},
    {"is_shutdown", (getter)engine_get_is_shutdown, NULL, "Whether shutdown() was called.", NULL},
    {"forked", (getter)engine_get_forked, NULL,
     "True in a child process for an engine made before fork() (closed there).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef engine_members[] = {
    {"workers", T_INT, offsetof(EngineObject, nworkers), READONLY, "Number of workers."},
    {"slots", T_INT, offsetof(EngineObject, nslots), READONLY, "Workers and spare slots."},
    {"number", T_INT, offsetof(EngineObject, number), READONLY, "Scheduler.number."},
    {"label", T_OBJECT_EX, offsetof(EngineObject, label), READONLY, "For messages."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject TG_EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph._core.Engine",
    .tp_basicsize = sizeof(EngineObject),
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Engine(workers, number, max_help_depth, label): the native half of a Scheduler "
              "(private). Creates its pool of `workers` worker slots (MemoryError if it cannot) "
              "and frees it when the engine goes.",
    .tp_methods = engine_methods,
    .tp_members = engine_members,
    .tp_getset = engine_getset,
    .tp_new = engine_new,
};
