/* taskgraph._core: the top layer: the module's functions, their method table, the types' and
 * constants' registration. */
#include "task.h" /* the layer below the module; with it every header of csrc/py/ */
#include "rules.h" /* the one task runner's functions for other backends */
#include "mapblock.h"
#include "executor.h" /* taskgraph.Executor's work item and submission */
#include "feed.h"     /* the dashboard's live feed */
#include "blocking.h" /* tg.blocking()'s declared waits */
#include "clock.h"    /* the records' clock */
#include "../contend.h"

#include <sched.h>

/* ---------------------------------------------------------------- functions */

static PyObject *configure(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    enum { NCLASSES = 4, N = 7 };
    static char *names[] = {"CancelledError", "SchedulerClosedError", "TaskgraphError",
                            "BrokenSchedulerError", "compute", "compute_lazy", "run_serially", NULL};
    PyObject *v[N] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOOOOO", names, &v[0], &v[1], &v[2], &v[3],
                                     &v[4], &v[5], &v[6]))
        return NULL;
    PyObject **slots[N] = {&TG.CancelledError, &TG.SchedulerClosedError, &TG.TaskgraphError,
                           &TG.BrokenSchedulerError, &TG.hook_compute, &TG.hook_compute_lazy,
                           &TG.hook_run_serially};
    for (int i = 0; i < N; i++) {
        if (!v[i]) continue;
        if (i < NCLASSES && !(PyType_Check(v[i]) && PyType_IsSubtype((PyTypeObject *)v[i], (PyTypeObject *)PyExc_BaseException))) {
            PyErr_Format(PyExc_TypeError, "%s must be an exception class", names[i]);
            return NULL;
        }
        if (i >= NCLASSES && !PyCallable_Check(v[i])) {
            PyErr_Format(PyExc_TypeError, "%s must be callable", names[i]);
            return NULL;
        }
        Py_XSETREF(*slots[i], Py_NewRef(v[i]));
    }
    Py_RETURN_NONE;
}

/* The Nodes in obj (any structure the argument scan understands), unique, as a tuple. */
static PyObject *scan(PyObject *mod, PyObject *obj) {
    (void)mod;
    PyObject *who = PyUnicode_FromString("compute()");
    if (!who) return NULL;
    PyObject *deps = tg_scan(&obj, 1, who);
    Py_DECREF(who);
    if (!deps) return PyErr_Occurred() ? NULL : PyTuple_New(0);
    return deps;
}

/* The first item of the tuple args that compute() refuses as an argument (a Task, a Python
 * function, a bound method or a builtin function: something that was meant to be called), or
 * None: one C pass instead of a Python loop over every argument of compute(*nodes). */
static PyObject *first_function(PyObject *mod, PyObject *args) {
    (void)mod;
    if (!PyTuple_Check(args)) {
        PyErr_Format(PyExc_TypeError, "first_function() takes a tuple, got %.100s", Py_TYPE(args)->tp_name);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i); /* held by the tuple */
        if (Node_Check(a)) continue;
        if (PyObject_TypeCheck(a, &TG_TaskType) || PyFunction_Check(a) || PyMethod_Check(a) ||
            PyCFunction_Check(a))
            return Py_NewRef(a);
    }
    Py_RETURN_NONE;
}

static PyObject *first_error(PyObject *mod, PyObject *nodes) {
    (void)mod;
    return tg_nodes_first_error(nodes);
}

static PyObject *gather_joined(PyObject *mod, PyObject *nodes) {
    (void)mod;
    return tg_nodes_gather(nodes);
}

static PyObject *not_done(PyObject *mod, PyObject *nodes) {
    (void)mod;
    return tg_nodes_not_done(nodes);
}

static PyObject *substitute(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *obj, *who = NULL;
    if (!PyArg_ParseTuple(args, "O|U:substitute", &obj, &who)) return NULL;
    if (who) return tg_substitute(obj, who);
    who = PyUnicode_FromString("compute()");
    if (!who) return NULL;
    PyObject *r = tg_substitute(obj, who);
    Py_DECREF(who);
    return r;
}

static PyObject *serial_enter(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    TG_TLS.serial++;
    Py_RETURN_NONE;
}

static PyObject *serial_exit(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    if (TG_TLS.serial <= 0) {
        PyErr_SetString(PyExc_RuntimeError, "taskgraph.serial() exited more often than entered");
        return NULL;
    }
    TG_TLS.serial--;
    Py_RETURN_NONE;
}

static PyObject *in_serial(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    return PyBool_FromLong(TG_TLS.serial > 0);
}

/* The engine whose task runs on this thread, or None. */
static PyObject *current_engine(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    Runner *W = TG_TLS.worker;
    if (!W || !W->current) Py_RETURN_NONE;
    return Py_NewRef((PyObject *)W->engine);
}

/* The engine this thread is a worker of (running a task or not: a done callback, a finalizer
 * run by its worker), or None. */
static PyObject *worker_engine(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    Runner *W = TG_TLS.worker;
    return Py_NewRef(W ? W->engine : Py_None);
}

/* The node whose task runs on this thread, or None. */
static PyObject *current_node(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    Runner *W = TG_TLS.worker;
    if (!W || !W->current) Py_RETURN_NONE;
    return Py_NewRef((PyObject *)W->current);
}

/* cancelled(): whether the task running on this thread should stop early. node.cancel() asks
 * the task (its flag) before it sets the run's hint that makes a task check its ancestors
 * before it starts (node.c, worker.c's execute): a task that sees the request first sets the
 * hint itself, so that no child it spawns from then on starts (relaxed: the child's start
 * follows its spawn, through the deque's release and acquire or on this same thread). */
static PyObject *cancelled(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    Runner *W = TG_TLS.worker;
    if (!W || !W->current || !tg_node_cancel_requested(W->current)) Py_RETURN_FALSE;
    tg_run *run = tg_task_run(&W->current->t);
    if (run && tg_node_cancel_asked(W->current))
        atomic_store_explicit(&RUN_OF(run)->cancel_running, 1, memory_order_relaxed);
    Py_RETURN_TRUE;
}

static PyObject *run_inline(PyObject *mod, PyObject *node) {
    (void)mod;
    if (!Node_Check(node)) {
        PyErr_Format(PyExc_TypeError, "run_inline needs a Node, got %.100s", Py_TYPE(node)->tp_name);
        return NULL;
    }
    int r = tg_run_inline((NodeObject *)node);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}


static PyObject *to_refs(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *obj, *index_of, *who;
    if (!PyArg_ParseTuple(args, "OO!U:to_refs", &obj, &PyDict_Type, &index_of, &who)) return NULL;
    return tg_to_refs(obj, index_of, who);
}

static PyObject *from_refs(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *obj, *values, *who;
    if (!PyArg_ParseTuple(args, "OOU:from_refs", &obj, &values, &who)) return NULL;
    return tg_from_refs(obj, values, who);
}

/* set_backend(obj or None) -> the previous one (None if none): see tg_tls.backend. */
static PyObject *set_backend(PyObject *mod, PyObject *obj) {
    (void)mod;
    /* The strong reference lives in the thread state's dict (cleared, and the backend
     * released, when the thread ends); TG_TLS keeps a borrowed pointer for the fast check. */
    PyObject *d = PyThreadState_GetDict();
    if (!d) {
        PyErr_SetString(PyExc_RuntimeError, "set_backend: no thread state dict");
        return NULL;
    }
    PyObject *prev = NULL;
    if (PyDict_GetItemRef(d, TG.str_backend_key, &prev) < 0) return NULL;
    if (obj == Py_None ? prev && PyDict_DelItem(d, TG.str_backend_key) < 0
                       : PyDict_SetItem(d, TG.str_backend_key, obj) < 0) {
        Py_XDECREF(prev);
        return NULL;
    }
    TG_TLS.backend = obj == Py_None ? NULL : obj; /* the dict holds it */
    return prev ? prev : Py_NewRef(Py_None);
}

static PyObject *claim(PyObject *mod, PyObject *node) {
    (void)mod;
    if (!Node_Check(node)) {
        PyErr_SetString(PyExc_TypeError, "_claim needs a Node");
        return NULL;
    }
    return PyBool_FromLong(tg_task_claim_inline(&((NodeObject *)node)->t));
}

static PyObject *settle(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *node, *value;
    int state;
    if (!PyArg_ParseTuple(args, "O!iO:_settle", &TG_NodeType, &node, &state, &value)) return NULL;
    NodeObject *n = (NodeObject *)node;
    if (tg_task_state(&n->t) != TG_RUNNING || n->t.run != NULL) {
        PyErr_SetString(PyExc_ValueError, "_settle: the node was not claimed with _claim");
        return NULL;
    }
    if (state < TG_DONE || state > TG_CANCELLED || (state != TG_DONE && !PyExceptionInstance_Check(value))) {
        PyErr_SetString(PyExc_ValueError, "_settle: a final state, with an exception unless done");
        return NULL;
    }
    tg_finish_external(n, state, value);
    Py_RETURN_NONE;
}

static PyObject *inputs(PyObject *mod, PyObject *node) {
    (void)mod;
    if (!Node_Check(node)) {
        PyErr_SetString(PyExc_TypeError, "_inputs needs a Node");
        return NULL;
    }
    return tg_node_inputs((NodeObject *)node);
}

static PyObject *seen(PyObject *mod, PyObject *node) {
    (void)mod;
    if (!Node_Check(node)) {
        PyErr_SetString(PyExc_TypeError, "_seen needs a Node");
        return NULL;
    }
    /* Relaxed: see tg_node_outcome. */
    return PyBool_FromLong(atomic_load_explicit(&((NodeObject *)node)->seen, memory_order_relaxed));
}

static PyObject *exception_copy(PyObject *mod, PyObject *exc) {
    (void)mod;
    if (!PyExceptionInstance_Check(exc)) {
        PyErr_Format(PyExc_TypeError, "exception_copy needs an exception, got %.100s", Py_TYPE(exc)->tp_name);
        return NULL;
    }
    return tg_exception_copy(exc);
}

/* _run_task(task, call, backend, key, where): a task's body run by another backend (dask's
 * worker side) with the one runner's rules (rules.h). */
static PyObject *run_task_py(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *task, *call, *backend, *key, *where;
    if (!PyArg_ParseTuple(args, "O!OOUU:_run_task", &TG_TaskType, &task, &call, &backend, &key, &where))
        return NULL;
    TaskObject *t = (TaskObject *)task;
    /* Acquire: see task_ready in task.c (a blank Task has no retries). */
    int ready = atomic_load_explicit(&t->ready, memory_order_acquire) == TG_TASK_READY;
    return tg_run_python_body(call, backend, key, where, ready ? t->retry : NULL);
}

/* call_in_copy(context, fn, *args, **kwargs): fn(*args, **kwargs) run in a fresh copy of
 * context (a contextvars.Context), as dask's threaded scheduler runs each task: it sees the
 * caller's context variables, and what it sets stays its own (taskgraph/dask/graph.py's
 * Nodes call their functions through it, from C). */
static PyObject *call_in_copy(PyObject *mod, PyObject *const *args, Py_ssize_t nargsf,
                              PyObject *kwnames) {
    (void)mod;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2 || !PyContext_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "call_in_copy(context, fn, *args, **kwargs) needs a "
                        "contextvars.Context and a callable");
        return NULL;
    }
    PyObject *ctx = PyContext_Copy(args[0]);
    if (!ctx) return NULL;
    if (PyContext_Enter(ctx) < 0) {
        Py_DECREF(ctx);
        return NULL;
    }
    PyObject *r = PyObject_Vectorcall(args[1], args + 2, (size_t)(nargs - 2), kwnames);
    PyObject *exc = r ? NULL : PyErr_GetRaisedException();
    if (PyContext_Exit(ctx) < 0) { /* entered just above, on this thread: cannot happen */
        Py_CLEAR(r);
        Py_XDECREF(exc);
        exc = PyErr_GetRaisedException();
    }
    Py_DECREF(ctx);
    if (exc) PyErr_SetRaisedException(exc);
    return r;
}

/* _in_task(): whether this thread runs a task (a local worker's, or a backend's). */
static PyObject *in_task_py(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    tg_tls *tls = &TG_TLS;
    return PyBool_FromLong((tls->worker && tls->worker->current) || tls->backend);
}

static PyObject *live_runs(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    return PyLong_FromLongLong(tg_live_runs());
}

/* contended_rmw_ns(rounds): tg_contended_rmw_ns (csrc/contend.h), detached meanwhile. */
static PyObject *contended_rmw_ns(PyObject *mod, PyObject *arg) {
    (void)mod;
    long rounds = PyLong_AsLong(arg);
    if (rounds == -1 && PyErr_Occurred()) return NULL;
    if (rounds < 1 || rounds > 100000000L) {
        PyErr_Format(PyExc_ValueError, "contended_rmw_ns: rounds must be from 1 to 10**8, got %ld", rounds);
        return NULL;
    }
    double ns;
    Py_BEGIN_ALLOW_THREADS
    ns = tg_contended_rmw_ns(rounds);
    Py_END_ALLOW_THREADS
    if (ns < 0) return PyErr_Format(PyExc_RuntimeError, "contended_rmw_ns: could not start a thread");
    return PyFloat_FromDouble(ns);
}

static PyObject *check_owner(PyObject *mod, PyObject *node) {
    (void)mod;
    if (!Node_Check(node)) {
        PyErr_SetString(PyExc_TypeError, "_check_owner needs a Node");
        return NULL;
    }
    if (tg_engine_check_owner((NodeObject *)node) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *after_fork_child(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    tg_trace_after_fork_child();
    tg_engines_after_fork_child();
    tg_runs_forked();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"clock_origin", tg_py_clock_origin, METH_NOARGS,
     "clock_origin() -> (ticks, ns): the pair taken when the module was loaded (trace.h)."},
    {"clock_pair", tg_py_clock_pair, METH_NOARGS,
     "clock_pair() -> (ticks, ns): a fresh pair; with clock_origin() it maps the records' "
     "ticks to the ns of time.perf_counter_ns()."},
    {"clock_tsc", tg_py_clock_tsc, METH_NOARGS,
     "clock_tsc() -> whether the records' ticks are the TSC (else they are ns already)."},
    {"_trace_fences", tg_py_trace_fences, METH_NOARGS,
     "_trace_fences() -> 1: the trace's writers use asymmetric fences (membarrier at the "
     "closer); 0: seq_cst on both sides; -1: no trace opened yet."},
    {"trace_gc_phase", tg_py_trace_gc_phase, METH_O,
     "trace_gc_phase(starting): a collection starts (True) or ends (False); the recorders "
     "subtract collections from the tasks' own time."},
    {"_check_owner", check_owner, METH_O,
     "_check_owner(node): SchedulerClosedError if node is unfinished and belongs to a compute "
     "of a scheduler made before fork() (it can never finish in this child process)."},
    {"_after_fork_child", after_fork_child, METH_NOARGS,
     "In a child process after fork() (taskgraph.scheduler's hook): every engine made before "
     "the fork is closed for good there (Engine.forked) and the trace lock is reset."},
    {"_configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Registers the exception classes and the Python functions the C code calls back."},
    {"scan", scan, METH_O, "scan(obj) -> tuple of the Nodes inside obj (nested structures), unique, in order."},
    {"not_done", not_done, METH_O,
     "not_done(nodes) -> the nodes (a list or tuple) that have not finished, as the same kind: "
     "[n for n in nodes if not n.done()] without a Python call per node."},
    {"gather_joined", gather_joined, METH_O,
     "gather_joined(nodes) -> inside a task: joins each Node of the tuple in order and returns "
     "the list of their values, or raises a copy of the first exception in order; "
     "NotImplemented if an item is not a Node."},
    {"first_function", first_function, METH_O,
     "first_function(args) -> the first item of the tuple args that is a Task, a function, a "
     "method or a builtin function (what compute() refuses), or None."},
    {"first_error", first_error, METH_O,
     "first_error(nodes) -> the first exception of the nodes (a list or tuple), in order, or None: "
     "[n.exception() for n in nodes] without a Python call per node."},
    {"map_into", (PyCFunction)(void (*)(void))tg_map_into, METH_FASTCALL,
     "map_into(fn, src, src_start, out, out_start, count, star, owner) -> (done, error): "
     "tg.map's per-item loop (csrc/py/mapblock.h)."},
    {"map_owner", tg_map_owner, METH_NOARGS,
     "map_owner() -> this thread's id, as map_into's owner (csrc/py/mapblock.h)."},
    {"_owned_here", tg_owned_here, METH_O,
     "_owned_here(obj) -> whether this thread owns obj (free-threaded builds; None with a "
     "GIL). Tests only."},
    {"substitute", substitute, METH_VARARGS,
     "substitute(obj, who='compute') -> obj with its Nodes replaced by their values."},
    {"serial_enter", serial_enter, METH_NOARGS, "Enters serial mode on this thread."},
    {"serial_exit", serial_exit, METH_NOARGS, "Leaves serial mode on this thread."},
    {"in_serial", in_serial, METH_NOARGS, "Whether this thread is in serial mode."},
    {"current_engine", current_engine, METH_NOARGS,
     "The engine whose task runs on this thread, or None."},
    {"_worker_engine", worker_engine, METH_NOARGS,
     "The engine this thread is a worker of (inside a task or not), or None."},
    {"_in_task", in_task_py, METH_NOARGS, "Whether this thread runs a task (a local worker's, or a backend's)."},
    {"current_node", current_node, METH_NOARGS,
     "The node whose task runs on this thread, or None."},
    {"block_begin", tg_block_begin, METH_NOARGS,
     "block_begin() -> whether this thread is a worker: declares that its task is about to "
     "wait (a spare may run the queued work meanwhile). Pairs with block_end()."},
    {"block_end", tg_block_end, METH_NOARGS, "block_end(): the declared wait is over."},
    {"waits", tg_py_waits, METH_NOARGS,
     "waits() -> on a worker: how many waits its tasks declared or were found in so far (compare "
     "two readings); -1 elsewhere."},
    {"_pause_note", tg_py_pause_note, METH_O,
     "_pause_note(starting): a garbage collection starts or ends (the spares' managers judge "
     "no wait across it)."},
    {"cancelled", cancelled, METH_NOARGS,
     "cancelled() -> whether the task running on this thread was asked to stop."},
    {"run_inline", run_inline, METH_O,
     "run_inline(node) -> True if it ran the NEW node in this thread, False if claimed."},
    {"trace_start", tg_trace_start, METH_NOARGS,
     "Attaches a recorder to every worker of every live engine (and of engines made later)."},
    {"trace_stop", tg_trace_stop, METH_NOARGS,
     "Detaches the recorders (waiting for any record being written) and returns them."},
    {"_live_runs", live_runs, METH_NOARGS, "Run objects alive (tests only)."},
    {"contended_rmw_ns", contended_rmw_ns, METH_O,
     "contended_rmw_ns(rounds) -> nanoseconds per atomic increment of a counter that two "
     "threads take turns incrementing, `rounds` times each (the cost of a read-modify-write on "
     "a cache line another core writes: Trace.predict's simulator charges it)."},
    {"call_in_copy", (PyCFunction)(void (*)(void))call_in_copy, METH_FASTCALL | METH_KEYWORDS,
     "call_in_copy(context, fn, *args, **kwargs) -> fn(*args, **kwargs) run in a fresh copy "
     "of the contextvars.Context context."},
    {"_run_task", run_task_py, METH_VARARGS,
     "_run_task(task, call, backend, key, where) -> call()'s value, run as every backend runs "
     "a task: retried per task's policy, each call followed by backend.sync(failing) (which "
     "returns the task's children), backend.retrying(exc, attempt) before a retry; the "
     "exception raised is noted with key and where (and the number of attempts)."},
    {"exception_copy", exception_copy, METH_O,
     "exception_copy(exc) -> what a waiter raises for a stored exception: a copy with its own "
     "traceback (the original's frames, then the waiter's)."},
    {"to_refs", to_refs, METH_VARARGS,
     "to_refs(obj, index_of, who) -> obj with each Node n replaced by Ref(index_of[n])."},
    {"from_refs", from_refs, METH_VARARGS,
     "from_refs(obj, values, who) -> obj with each Ref(i) replaced by values[i]."},
    {"set_backend", set_backend, METH_O,
     "set_backend(obj or None) -> previous: this thread's task calls and waits go to obj."},
    {"_inputs", inputs, METH_O,
     "_inputs(node) -> (fn, args, nargs, kwnames, retries, retry_on) of a lazy node, or None "
     "once it ran."},
    {"_seen", seen, METH_O, "_seen(node) -> whether result()/exception() was called on it."},
    {"_claim", claim, METH_O,
     "_claim(node) -> True if this caller claimed the NEW node, to run it elsewhere."},
    {"_settle", settle, METH_VARARGS,
     "_settle(node, state, value): finishes a node claimed with _claim."},
    {"_task_with_options", tg_task_with_options, METH_VARARGS,
     "_task_with_options(fn, name, retries, retry_on) -> Task (how Tasks with retries unpickle)."},
    {"_task_by_name", tg_task_by_name, METH_VARARGS,
     "_task_by_name(module, qualname) -> the Task defined there (how rebuilt Tasks unpickle)."},
#ifdef TG_FAULTS
    {"_arm_fault", tg_py_arm_fault, METH_VARARGS,
     "_arm_fault(site, n): the n-th occurrence of a fault site fails (test builds only)."},
#endif
    {NULL, NULL, 0, NULL},
};

/* ---------------------------------------------------------------- module */

static int add_int(PyObject *m, const char *name, long v) {
    return PyModule_AddIntConstant(m, name, v);
}

/* PyModule_Add (3.13) for older versions too: steals obj. */
static int add_steal(PyObject *m, const char *name, PyObject *obj) {
    if (!obj) return -1; /* the call that made it failed (error set) */
    int r = PyModule_AddObjectRef(m, name, obj);
    Py_DECREF(obj);
    return r;
}

static int exec_module(PyObject *m) {
    if (PyModule_AddFunctions(m, tg_rules_methods) < 0) return -1;
    if (PyModule_AddFunctions(m, tg_executor_methods) < 0 || tg_executor_init() < 0) return -1;
    tg_clock_init();
    PyTypeObject *types[] = {&TG_TaskType, &TG_NodeType, &TG_RunType, &TG_EngineType,
                             &TG_RecorderType, &TG_RefType, &TG_ExecItemType, &TG_LeaseType,
                             &TG_LiveFeedType};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (PyType_Ready(types[i]) < 0) return -1;
        const char *dot = strrchr(types[i]->tp_name, '.');
        if (PyModule_AddObjectRef(m, dot ? dot + 1 : types[i]->tp_name, (PyObject *)types[i]) < 0)
            return -1;
    }
    PyObject *names = PyTuple_New(TG_NSTATES);
    if (!names) return -1;
    for (int s = 0; s < TG_NSTATES; s++) {
        PyObject *str = PyUnicode_InternFromString(tg_state_name(s));
        if (!str) { Py_DECREF(names); return -1; }
        TG.state_names[s] = Py_NewRef(str);
        PyTuple_SET_ITEM(names, s, str);
    }
    if (add_steal(m, "STATE_NAMES", names) < 0) return -1;
    static const char *stat_names[TG_NSTATS] = {"tasks_run", "spawned", "stolen",
                                                "steal_attempts", "injected", "parks", "looks"};
    PyObject *sn = PyTuple_New(TG_NSTATS);
    if (!sn) return -1;
    for (int k = 0; k < TG_NSTATS; k++) {
        PyObject *str = PyUnicode_InternFromString(stat_names[k]);
        if (!str) { Py_DECREF(sn); return -1; }
        PyTuple_SET_ITEM(sn, k, str);
    }
    if (add_steal(m, "STAT_NAMES", sn) < 0) return -1;
    struct { const char *name; long v; } ints[] = {
        {"NEW", TG_NEW}, {"PENDING", TG_PENDING}, {"READY", TG_READY}, {"RUNNING", TG_RUNNING},
        {"DONE", TG_DONE}, {"FAILED", TG_FAILED}, {"CANCELLED", TG_CANCELLED},
        {"NSTATES", TG_NSTATES}, {"NSTATS", TG_NSTATS},
        {"STEAL_OK", TG_OK}, {"STEAL_EMPTY", TG_EMPTY}, {"STEAL_RETRY", TG_RETRY},
        {"MAX_WORKERS", TG_MAX_WORKERS},
        {"MAX_SPARES", TG_MAX_SPARES},
        {"MAX_HELP_DEPTH", INT_MAX}, /* Engine keeps max_help_depth in a C int */
#ifdef TG_FAULTS /* a test build: the fault sites and their numbers for _arm_fault */
        {"FAULTS", 1},
        {"FAULT_NODE_ALLOC", TG_FAULT_NODE_ALLOC}, {"FAULT_CLAIM", TG_FAULT_CLAIM},
        {"FAULT_EDGE", TG_FAULT_EDGE}, {"FAULT_SPAWN", TG_FAULT_SPAWN},
        {"FAULT_RESULT", TG_FAULT_RESULT}, {"FAULT_RECORD", TG_FAULT_RECORD},
        {"FAULT_WORKER", TG_FAULT_WORKER},
#else
        {"FAULTS", 0},
#endif
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (add_int(m, ints[i].name, ints[i].v) < 0) return -1;
    /* The trace record's layout (trace.h), for taskgraph/trace/record.py's struct. */
    if (add_steal(m, "TRACE_REC_FORMAT", PyUnicode_FromString(tg_trace_rec_format())) < 0) return -1;
    if (add_int(m, "TRACE_REC_SIZE", tg_trace_rec_size()) < 0) return -1;
    PyObject *fields = PyUnicode_FromString(tg_trace_rec_fields());
    PyObject *split = fields ? PyUnicode_Split(fields, NULL, -1) : NULL;
    Py_XDECREF(fields);
    PyObject *ftuple = split ? PyList_AsTuple(split) : NULL;
    Py_XDECREF(split);
    if (add_steal(m, "TRACE_REC_FIELDS", ftuple) < 0) return -1;
#ifdef Py_GIL_DISABLED
    if (PyModule_AddIntConstant(m, "FREE_THREADED", 1) < 0) return -1;
#else
    if (PyModule_AddIntConstant(m, "FREE_THREADED", 0) < 0) return -1;
#endif
    struct { PyObject **slot; const char *s; } strs[] = {
        {&TG.str_taskgraph_task, "__taskgraph_task__"}, {&TG.str_add_note, "add_note"},
        {&TG.str_fields, "_fields"}, {&TG.str_dataclass_fields, "__dataclass_fields__"},
        {&TG.str_field_type, "_field_type"}, {&TG.str_name, "name"}, {&TG.str_dot, "."},
        {&TG.str_call_parens, "()"},
        {&TG.str_spawn, "spawn"}, {&TG.str_wait, "wait"}, {&TG.str_notes, "__notes__"},
        {&TG.str_backend_key, "taskgraph._core.backend"},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (!(*strs[i].slot = PyUnicode_InternFromString(strs[i].s))) return -1;
    if (!TG.memory_error && !(TG.memory_error = PyObject_CallNoArgs(PyExc_MemoryError))) return -1;
    if (!TG.first_tasks && !(TG.first_tasks = PyDict_New())) return -1;
    if (!TG.task_by_name && !(TG.task_by_name = PyObject_GetAttrString(m, "_task_by_name")))
        return -1;
    if (!TG.task_with_options &&
        !(TG.task_with_options = PyObject_GetAttrString(m, "_task_with_options")))
        return -1;
    return 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "taskgraph._core",
    .m_doc = "taskgraph's per-task path (Task, Node, workers, joins, submission, tracing) "
             "written against the CPython C API, embedding the C scheduler core. Private: use "
             "the taskgraph package.",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModuleDef_Init(&module_def); }
