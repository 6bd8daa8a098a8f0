/* The Node type: one call of a task, as Python sees it (result(), exception(), done(), cancel(),
 * compute(), properties) and building a node; waiting for one and reading its outcome are in
 * outcome.c, its record (key, outcome, inputs, cancel requests, children) in noderec.c. Built by Task (task.c);
 * run by the workers (worker.c) or inline. */
#include "node.h"
#include "callbacks.h"
#include "hints.h"

NodeObject *tg_node_new(PyObject *fn, PyObject *name, PyObject *retry, PyObject *lease,
                        tg_node_cache *cache, PyObject *const *args, size_t nargsf,
                        PyObject *kwnames) {
    if (tg_fault(TG_FAULT_NODE_ALLOC)) {
        Py_XDECREF(lease);
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    Py_ssize_t total = nargs + nkw;
    /* Strong references first: scanning the arguments can run Python code (a metaclass
     * __getattr__), which must not be able to free what we are about to store. A lease holds
     * the Task, which holds fn, name and retry and never changes them. */
    if (!lease) {
        fn = Py_NewRef(fn);
        name = Py_NewRef(name);
        retry = Py_XNewRef(retry);
    }
    PyObject *deps = NULL;
    Py_ssize_t plain = 0; /* leading arguments that are plain scalars: nothing to scan there */
    while (plain < total && tg_plain_scalar(args[plain])) plain++;
    if (plain < total) {
        deps = tg_scan_slow(args + plain, total - plain, name);
        if (!deps && PyErr_Occurred()) goto fail;
    }
    NodeObject *n = tg_node_alloc(cache, total);
    if (!n) {
        Py_XDECREF(deps);
        goto fail;
    }
    memset(&n->t, 0, offsetof(NodeObject, args) - offsetof(NodeObject, t));
    for (Py_ssize_t i = 0; i < total; i++) n->args[i] = Py_NewRef(args[i]);
    n->fn = fn; /* the references taken above */
    n->nargs = nargs;
    n->kwnames = nkw ? Py_NewRef(kwnames) : NULL;
    n->deps = deps;
    n->name = name;
    n->retry = retry;
    n->lease = lease;
    PyObject_GC_Track((PyObject *)n);
    return n;
fail:
    if (lease) {
        Py_DECREF(lease);
    } else {
        Py_DECREF(fn);
        Py_DECREF(name);
        Py_XDECREF(retry);
    }
    return NULL;
}

static PyObject *node_done(NodeObject *n, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(tg_task_state(&n->t) >= TG_DONE);
}

/* ---------------------------------------------------------------- cancelling */

/* The CancelledError of a node cancelled before anyone claimed it. */
static PyObject *cancelled_error(NodeObject *n) {
    PyObject *msg = tg_node_format(n, "task %U was cancelled: node.cancel() was called before "
                                   "it started");
    PyObject *err = msg ? PyObject_CallOneArg(TG.CancelledError, msg) : NULL;
    Py_XDECREF(msg);
    return err;
}

static PyObject *node_cancel(NodeObject *n, PyObject *unused) {
    (void)unused;
    atomic_fetch_or_explicit(&n->cancel, TG_CANCEL_ASKED, memory_order_relaxed); /* see noderec.h */
    int st = tg_task_state(&n->t);
    if (st == TG_NEW) {
        /* Lazy, in no run: claimed here and finished as cancelled (its dependents then are
         * cancelled when they are computed). A concurrent claimer may win: see below. */
        if (tg_task_claim_inline(&n->t)) {
            PyObject *err = cancelled_error(n);
            if (!err) { /* cannot build the error: finish it anyway, with what stopped us */
                err = PyErr_GetRaisedException();
                if (!err) err = tg_memory_error();
            }
            tg_finish_external(n, TG_CANCELLED, err);
            Py_DECREF(err);
            Py_RETURN_TRUE;
        }
        st = tg_task_state(&n->t);
    }
    if (st >= TG_DONE) return PyBool_FromLong(st == TG_CANCELLED);
    PyObject *reason = NULL;
    if (!tg_node_parent(n)) { /* a node of a compute's graph: the compute stops (fail fast) */
        reason = tg_node_format(n, "task %U was cancelled (node.cancel())");
        if (!reason) return NULL;
    }
    /* The node's run is alive while the node is in flight; once it finishes, the compute that
     * waited for the run may drop it at any moment. Under the runs' lock (which a Run's
     * deallocation takes first) a node seen unfinished keeps its run alive until we let go. */
    int never_runs = 0, inline_claim = 0;
    tg_runs_lock();
    st = tg_task_state(&n->t);
    tg_run *r = st < TG_DONE ? tg_task_run(&n->t) : NULL;
    if (r) {
        RunObject *run = RUN_OF(r);
        never_runs = tg_task_cancel(&n->t, TG_POISON_CANCEL) ||
                     tg_task_poisoned(&n->t) != TG_POISON_STARTED;
        if (!never_runs) { /* running: its task may check tg.cancelled(); its children will not start */
            atomic_fetch_or_explicit(&n->cancel, TG_CANCEL_RUNNING, memory_order_relaxed);
            atomic_store_explicit(&run->cancel_running, 1, memory_order_relaxed); /* see run.h */
        }
        if (reason) tg_run_cancel_with(run, reason, NULL); /* no Python call in there */
    } else {
        inline_claim = st < TG_DONE; /* serial mode, another backend: running elsewhere */
    }
    tg_runs_unlock();
    Py_XDECREF(reason);
    if (inline_claim) Py_RETURN_FALSE;
    if (!r) return PyBool_FromLong(tg_task_state(&n->t) == TG_CANCELLED);
    return PyBool_FromLong(never_runs);
}

static PyObject *node_compute(NodeObject *n, PyObject *args, PyObject *kw) {
    if (PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "Node.compute() takes keyword arguments only");
        return NULL;
    }
    if (!TG.hook_compute) {
        PyErr_SetString(PyExc_RuntimeError, "taskgraph._core is not configured");
        return NULL;
    }
    PyObject *a = PyTuple_Pack(1, (PyObject *)n);
    if (!a) return NULL;
    PyObject *r = PyObject_Call(TG.hook_compute, a, kw);
    Py_DECREF(a);
    return r;
}

static PyObject *node_reduce(NodeObject *n, PyObject *unused) {
    (void)unused;
    tg_err_node(PyExc_TypeError, n, "a taskgraph Node (%U) cannot be pickled; pass its value");
    return NULL;
}

static PyObject *node_repr(NodeObject *n) {
    PyObject *key = tg_node_key(n);
    if (!key) return NULL;
    PyObject *r = PyUnicode_FromFormat("<Node %U %U>", key, TG.state_names[tg_task_state(&n->t)]);
    Py_DECREF(key);
    return r;
}

/* ---------------------------------------------------------------- properties */

static PyObject *get_key(NodeObject *n, void *c) { (void)c; return tg_node_key(n); }
static PyObject *get_name(NodeObject *n, void *c) { (void)c; return Py_NewRef(n->name); }
static PyObject *get_state(NodeObject *n, void *c) {
    (void)c;
    return Py_NewRef(TG.state_names[tg_task_state(&n->t)]);
}
static PyObject *get_parent(NodeObject *n, void *c) {
    (void)c;
    NodeObject *p = tg_node_parent(n);
    return Py_NewRef(p ? (PyObject *)p : Py_None);
}
static PyObject *get_dependencies(NodeObject *n, void *c) {
    (void)c;
    PyObject *deps;
    Py_BEGIN_CRITICAL_SECTION(n); /* pairs with tg_node_drop_inputs */
    deps = Py_XNewRef(n->deps);
    Py_END_CRITICAL_SECTION();
    return deps ? deps : PyTuple_New(0);
}

static PyGetSetDef node_getset[] = {
    {"key", (getter)get_key, NULL,
     "Readable, process-unique name: the task's name, the number of the thread that made the "
     "node, and that thread's counter, e.g. 'fib-3.1041'.", NULL},
    {"name", (getter)get_name, NULL, "The task's name.", NULL},
    {"state", (getter)get_state, NULL,
     "One of new, pending, ready, running, done, failed, cancelled.", NULL},
    {"parent", (getter)get_parent, NULL,
     "The node whose task spawned this one (None for nodes built outside a worker).", NULL},
    {"dependencies", (getter)get_dependencies, NULL,
     "The Nodes found in this node's arguments, which it waits for. Empty once the node has "
     "finished: a finished node lets go of its inputs so they can be freed.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(result_doc,
"result(timeout=None): the node's value, computing it first if needed.\n\n"
"* Outside a worker: a lazy node is computed on the current scheduler (like\n"
"  taskgraph.compute(node): the innermost `with` block's, else the default one); a node already running elsewhere is waited for. `timeout`\n"
"  (seconds) raises TimeoutError if it is not done by then; the work goes on and a later\n"
"  call can wait again. Ctrl-C raises KeyboardInterrupt.\n"
"* Inside a task of the scheduler that runs the node (or on a lazy node): joins. The worker\n"
"  runs other tasks (its own children first, then stolen ones) until the node is done; the\n"
"  thread never blocks while there is work. `timeout` is not allowed there\n"
"  (TaskgraphError), nor awaiting the task's own node or one of its ancestors.\n"
"* Inside `with taskgraph.serial():` a lazy node runs at once in this thread.\n"
"* On error: re-raises the task's own exception, with its original traceback and a note\n"
"  naming the task and the worker. A node that never ran raises CancelledError saying why\n"
"  (a dependency failed, its parent failed, a sibling failed, Ctrl-C, the scheduler\n"
"  closed).");

PyDoc_STRVAR(cancel_doc,
"cancel(): asks that the node not run. Returns True if it will never run (it had not\n"
"started, or was cancelled already), False if it is running or finished with a result or\n"
"an exception (like concurrent.futures.Future.cancel). Any thread, inside or outside a task.\n\n"
"* A lazy node (never computed) finishes at once as cancelled; computing a node that depends\n"
"  on it raises CancelledError.\n"
"* A node waiting in a run never starts; its dependents are cancelled. A node of a\n"
"  compute's graph (not spawned inside a task) also stops that compute: everything in it not\n"
"  started yet is cancelled and compute() raises CancelledError (fail fast).\n"
"* A running node keeps running (Python cannot stop a thread): its task can check\n"
"  taskgraph.cancelled() and return early; the tasks it spawned that have not started never\n"
"  start.\n"
"False means the node had been handed to a worker: it runs, unless the task that spawned it\n"
"is cancelled at that same moment, in which case it still finishes cancelled without\n"
"running. True is always exact.\n"
"Never raises (except MemoryError).");

PyDoc_STRVAR(exception_doc,
"exception(timeout=None): the exception the node finished with (None if it succeeded);\n"
"waits like result(). A cancelled node returns its CancelledError.");

PyDoc_STRVAR(add_done_callback_doc,
"add_done_callback(fn): calls fn(node) once when the node finishes (with a result, an\n"
"exception or cancelled), on the thread that finishes it (a worker, or the thread that\n"
"cancelled it), or at once in this thread if it has finished already. Callbacks run in the\n"
"order added. An Exception raised by fn goes to sys.unraisablehook (it never reaches the\n"
"worker); a KeyboardInterrupt or SystemExit propagates from add_done_callback when fn runs at\n"
"once, and is reported (a KeyboardInterrupt also interrupts the main thread) when a finishing\n"
"thread runs it. Adding a callback never submits a lazy node: it runs when the node is\n"
"computed. Keep callbacks short: they run as no task (a task called there builds a lazy\n"
"node), and waiting there for an unfinished node of the worker's own scheduler raises\n"
"TaskgraphError. TypeError if fn is not callable.");

static PyMethodDef node_methods[] = {
    {"result", (PyCFunction)(void (*)(void))tg_node_result_m, METH_FASTCALL | METH_KEYWORDS, result_doc},
    {"exception", (PyCFunction)(void (*)(void))tg_node_exception_m, METH_FASTCALL | METH_KEYWORDS, exception_doc},
    {"cancel", (PyCFunction)node_cancel, METH_NOARGS, cancel_doc},
    {"done", (PyCFunction)node_done, METH_NOARGS,
     "True when the node has finished: with a result, an exception, or cancelled. Never "
     "blocks, never starts a computation."},
    {"compute", (PyCFunction)(void (*)(void))node_compute, METH_VARARGS | METH_KEYWORDS,
     "Same as taskgraph.compute(self, **kwargs)."},
    {"__reduce__", (PyCFunction)node_reduce, METH_NOARGS, "Nodes cannot be pickled."},
    {"add_done_callback", (PyCFunction)tg_node_add_done_callback_m, METH_O, add_done_callback_doc},
    {"remove_done_callback", (PyCFunction)tg_node_remove_done_callback, METH_O,
     "remove_done_callback(fn): removes every fn (==) not yet called from the done callbacks; "
     "returns how many were removed (as asyncio.Future.remove_done_callback)."},
    {"cancelled", (PyCFunction)tg_node_cancelled, METH_NOARGS,
     "True if the node finished cancelled (it never ran and never will). Never blocks."},
    {"running", (PyCFunction)tg_node_running, METH_NOARGS,
     "True while its task runs (or the node is claimed by a serial or dask run). Never blocks."},
    /* The hints of hints.c for what round(), math.floor/ceil/trunc and format() look up. */
    {"__round__", (PyCFunction)(void (*)(void))tg_node_round, METH_FASTCALL, "Raises a hint."},
    {"__floor__", (PyCFunction)tg_node_floor, METH_NOARGS, "Raises a hint."},
    {"__ceil__", (PyCFunction)tg_node_ceil, METH_NOARGS, "Raises a hint."},
    {"__trunc__", (PyCFunction)tg_node_trunc, METH_NOARGS, "Raises a hint."},
    {"__format__", (PyCFunction)tg_node_format_spec, METH_O,
     "format(node, '') is str(node); a format spec raises a hint."},
    {"_wait", (PyCFunction)tg_node_wait_unread_m, METH_NOARGS,
     "Waits like exception() (inside a task: joins), without counting as reading the outcome."},
    {"_peek_exception", (PyCFunction)tg_node_peek_exception_m, METH_NOARGS,
     "The exception of a finished node (failed or cancelled), or None; never waits and does "
     "not count as reading it (displays)."},
    {"_repr_html_", (PyCFunction)tg_node_repr_html, METH_NOARGS,
     "Notebook display: the plan of a graph not yet run (inline SVG), or the state and result "
     "summary of a finished node."},
    {NULL, NULL, 0, NULL},
};

/* ---------------------------------------------------------------- lifetime */

static int node_traverse(NodeObject *n, visitproc visit, void *arg) {
    if (n->lease) {
        Py_VISIT(n->lease); /* fn and retry are borrowed through it */
    } else {
        Py_VISIT(n->fn);
        Py_VISIT(n->retry);
    }
    for (Py_ssize_t i = 0; i < Py_SIZE(n); i++) Py_VISIT(n->args[i]);
    Py_VISIT(n->kwnames);
    Py_VISIT(n->deps);
    Py_VISIT(n->value);
    Py_VISIT((PyObject *)tg_node_parent(n));
    Py_VISIT((PyObject *)n->kids);
    Py_VISIT((PyObject *)n->sibling);
    return tg_callbacks_traverse(n, visit, arg);
}

static void clear_kids(NodeObject *n) {
    NodeObject *k = n->kids;
    n->kids = NULL;
    n->nkids = 0;
    while (k) {
        NodeObject *next = k->sibling;
        k->sibling = NULL;
        Py_DECREF(k);
        k = next;
    }
}

static int node_clear(NodeObject *n) {
    if (n->lease) { /* borrowed; the lease (and the name through it) is kept to the dealloc */
        n->fn = n->retry = NULL;
    } else {
        Py_CLEAR(n->fn);
        Py_CLEAR(n->retry);
    }
    tg_node_clear_args(n);
    Py_CLEAR(n->kwnames);
    Py_CLEAR(n->deps);
    tg_feed_held_drop(n); /* the dashboard's results held */
    Py_CLEAR(n->value);
    /* Relaxed, and a load and a store rather than an exchange (an exchange is a locked
     * instruction on x86, paid per node): the node is unreachable (collected or deallocated),
     * so no other thread reads or writes it. Cleared before the reference is dropped: freeing
     * the parent may free this node's last holder and re-enter here (which then sees NULL). */
    NodeObject *p = atomic_load_explicit(&n->parent, memory_order_relaxed);
    atomic_store_explicit(&n->parent, NULL, memory_order_relaxed);
    Py_XDECREF(p);
    clear_kids(n);
    Py_CLEAR(n->sibling);
    tg_callbacks_clear(n);
    return 0;
}

static void node_dealloc(NodeObject *n) {
    /* Invariant: a covered child's parent holds it until its runner has retired it
     * (noderec.h); freed before, its runner would touch freed memory. */
    if (!tg_kid_retired(n)) Py_FatalError("taskgraph: a spawned node was freed before its worker let go of it");
    PyObject_GC_UnTrack((PyObject *)n);
    /* The trashcan bounds the C stack when a long chain of nodes is freed at once (a lazy
     * chain of 100,000 nodes, each holding the previous one in its arguments). */
    Py_TRASHCAN_BEGIN(n, node_dealloc)
    if (n->weakreflist) PyObject_ClearWeakRefs((PyObject *)n);
    node_clear(n);
    if (n->lease) {
        n->name = NULL; /* borrowed through the lease */
        Py_CLEAR(n->lease);
    } else {
        Py_CLEAR(n->name);
    }
    Runner *W = TG_TLS.worker; /* a worker keeps the memory for its next nodes */
    tg_node_free(W ? &W->nodes : NULL, n);
    Py_TRASHCAN_END
}

PyDoc_STRVAR(node_doc,
"The result of calling a task: a node of the task graph.\n\n"
"Outside a worker, calling a task builds a lazy Node and runs nothing. Inside a running task\n"
"the call spawns the node at once onto the current worker's deque. A Node can be passed as\n"
"an argument (anywhere inside lists, tuples, dicts, sets, namedtuples, dataclasses) to\n"
"other tasks, which then depend on it and receive its value. Nodes compare and hash by\n"
"identity and cannot be pickled.");

PyTypeObject TG_NodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph.Node",
    .tp_basicsize = offsetof(NodeObject, args),
    .tp_itemsize = sizeof(PyObject *),
    .tp_dealloc = (destructor)node_dealloc,
    .tp_repr = (reprfunc)node_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = node_doc,
    .tp_traverse = (traverseproc)node_traverse,
    .tp_clear = (inquiry)node_clear,
    .tp_weaklistoffset = offsetof(NodeObject, weakreflist),
    .tp_methods = node_methods,
    .tp_getset = node_getset,
    .tp_as_async = &tg_node_as_async,
    .tp_as_number = &tg_node_as_number,
    .tp_as_sequence = &tg_node_as_sequence,
    .tp_as_mapping = &tg_node_as_mapping,
    .tp_richcompare = tg_node_richcompare,
    .tp_hash = tg_node_hash,
    .tp_iter = tg_node_iter,
};
