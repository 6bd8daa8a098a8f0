/* Task: a function made into a task. Calling it builds a Node: lazily outside the workers,
 * spawned onto the worker's deque inside a running task, run at once in serial mode. */
#include "task.h"
#include "hints.h"

/* Serial elision: runs the new node now in this thread. */
static int serial_call(NodeObject *n) {
    int pending = 0;
    if (n->deps) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(n->deps); i++)
            pending |= tg_task_state(&((NodeObject *)PyTuple_GET_ITEM(n->deps, i))->t) < TG_DONE;
    }
    if (!pending) return tg_run_inline(n) < 0 ? -1 : 0;
    /* A lazy dependency built outside serial mode: the Python side orders the graph. */
    if (!TG.hook_run_serially) {
        PyErr_SetString(PyExc_RuntimeError, "taskgraph._core is not configured");
        return -1;
    }
    PyObject *list = PyList_New(1);
    if (!list) return -1;
    PyList_SET_ITEM(list, 0, Py_NewRef((PyObject *)n));
    PyObject *r = PyObject_CallOneArg(TG.hook_run_serially, list);
    Py_DECREF(list);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* Drops a lease the worker's cache replaced: its Task may be freed, and with it Python objects
 * whose finalizers run here as no task (docs/design/native.md, "Code that runs as no task"). */
static void drop_as_no_task(PyObject *lease) {
    NodeObject *cur = tg_suspend_task();
    Py_DECREF(lease);
    tg_resume_task(cur);
}

/* Whether the task was initialised (TypeError if not: made with Task.__new__ alone). */
static int task_ready(TaskObject *task) {
    /* Acquire: pairs with the release store at the end of task_init (fn, name, retry). */
    if (atomic_load_explicit(&task->ready, memory_order_acquire) == TG_TASK_READY) return 1;
    PyErr_SetString(PyExc_TypeError, "this taskgraph.Task was never initialised (made with "
                    "Task.__new__ alone?): make tasks with @taskgraph.task or Task(fn)");
    return 0;
}

static PyObject *task_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    TaskObject *task = (TaskObject *)self;
    if (!task_ready(task)) return NULL;
    /* One compare on the way (the cache is the Task's, immutable once ready); keywords or a
     * count out of range take the slow check (hints.c). */
    if ((kwnames || !tg_arity_ok(&task->arity, PyVectorcall_NARGS(nargsf))) &&
        tg_check_call(&task->arity, task->fn, task->name, args, nargsf, kwnames) < 0)
        return NULL;
    tg_tls *tls = &TG_TLS;
    PyObject *lease = NULL; /* a spawn: the node borrows through the worker's lease (lease.h) */
    if (tls->worker && tls->worker->current && !tls->serial &&
        !(lease = tg_lease_of(&tls->worker->leases, self, drop_as_no_task)))
        return NULL;
    NodeObject *n = tg_node_new(task->fn, task->name, task->retry, lease,
                                tls->worker ? &tls->worker->nodes : NULL, args, nargsf, kwnames);
    if (!n) return NULL;
    n->t.id = tg_node_id_at(tls);
    if (tls->serial) {
        if (serial_call(n) < 0) {
            Py_DECREF(n);
            return NULL;
        }
    } else if (tls->worker && tls->worker->current) {
        if (tg_spawn(tls->worker, n) < 0) {
            Py_DECREF(n);
            return NULL;
        }
    } else {
        n->lazy = 1; /* user code (or a backend) sees it before anyone claims it */
        tg_node_unown(n); /* freed by whichever thread drops it last (node.c) */
        if (tls->backend) { /* a task of another backend (dask) runs on this thread */
            PyObject *r = PyObject_CallMethodOneArg(tls->backend, TG.str_spawn, (PyObject *)n);
            if (!r) {
                Py_DECREF(n);
                return NULL;
            }
            Py_DECREF(r);
        }
    }
    return (PyObject *)n;
}

/* The default name: fn.__name__ (a partial's function's name), else its type's; "<lambda>"
 * becomes "lambda". */
static PyObject *name_of(PyObject *fn) {
    PyObject *name = NULL;
    if (PyObject_GetOptionalAttrString(fn, "__name__", &name) < 0) return NULL;
    if (!name) {
        PyObject *func = NULL;
        if (PyObject_GetOptionalAttrString(fn, "func", &func) < 0) return NULL;
        if (func) {
            int r = PyObject_GetOptionalAttrString(func, "__name__", &name);
            Py_DECREF(func);
            if (r < 0) return NULL;
        }
    }
    if (!name || !PyUnicode_Check(name)) {
        Py_XDECREF(name);
        return PyUnicode_FromString(Py_TYPE(fn)->tp_name);
    }
    if (PyUnicode_CompareWithASCIIString(name, "<lambda>") == 0) {
        Py_DECREF(name);
        return PyUnicode_FromString("lambda");
    }
    return name;
}

#define TG_MAX_RETRIES 1000

/* The (retries, retry_on) tuple of a task, or NULL with no error when retries is 0. */
static PyObject *retry_options(PyObject *retries, PyObject *retry_on, PyObject *name) {
    long n = 0;
    if (retries != Py_None) {
        if (!PyLong_Check(retries) || PyBool_Check(retries)) {
            PyErr_Format(PyExc_TypeError, "task %R: retries must be an int, got %.100s %R", name,
                         Py_TYPE(retries)->tp_name, retries);
            return NULL;
        }
        n = PyLong_AsLong(retries);
        if ((n == -1 && PyErr_Occurred()) || n < 0 || n > TG_MAX_RETRIES) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "task %R: retries must be from 0 to %d, got %R", name,
                         TG_MAX_RETRIES, retries);
            return NULL;
        }
    }
    PyObject *classes = retry_on == Py_None ? PyTuple_Pack(1, PyExc_Exception)
                      : PyTuple_Check(retry_on) ? Py_NewRef(retry_on) : PyTuple_Pack(1, retry_on);
    if (!classes) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(classes); i++) {
        PyObject *c = PyTuple_GET_ITEM(classes, i);
        if (!PyType_Check(c) || !PyType_IsSubtype((PyTypeObject *)c, (PyTypeObject *)PyExc_BaseException)) {
            PyErr_Format(PyExc_TypeError, "task %R: retry_on must be an exception class or a tuple "
                         "of them, got %R", name, retry_on);
            Py_DECREF(classes);
            return NULL;
        }
    }
    if (n == 0) {
        Py_DECREF(classes);
        if (retry_on != Py_None) {
            PyErr_Format(PyExc_ValueError, "task %R: retry_on without retries (give retries=N)", name);
            return NULL;
        }
        return NULL;
    }
    return Py_BuildValue("(lN)", n, classes);
}

static int task_init_once(TaskObject *self, PyObject *args, PyObject *kw);

/* The first Task made for a top-level function becomes immortal (CPython 3.13t only), as
 * CPython 3.13t makes that function itself: a function whose code is not nested gets deferred
 * reference counting there, which 3.13t implements by making the function immortal once a
 * second thread has started (gh-117696). Every task body that calls a task reads it as a
 * global, and every node of it holds it: as a mortal object, its reference count was written
 * by every worker at every spawn, one cache line pulled between the cores (fib spawning at
 * every level ran 0.91-0.98x on 2 workers against 1; with the Task immortal, 1.5-1.8x). Only
 * the first Task of each such function, so that what stays alive is bounded by the functions
 * CPython keeps alive anyway (a Task made again and again for one function, with names or
 * options of its own, stays mortal and is freed). Only while nobody else holds the Task (its
 * initialisation, through the constructor), and only a Task of exactly this type. The state
 * written is CPython's own (_Py_SetImmortal: untracked by the collector, the immortal counts),
 * with the fields of object.h. */
static void immortal_if_first(TaskObject *self) {
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000
    PyObject *o = (PyObject *)self;
    if (!Py_IS_TYPE(o, &TG_TaskType) || !PyFunction_Check(self->fn)) return;
    if (((PyCodeObject *)PyFunction_GET_CODE(self->fn))->co_flags & CO_NESTED) return;
    if (!tg_only_reference(o)) return;
    PyObject *first = NULL;
    int had = PyDict_SetDefaultRef(TG.first_tasks, self->fn, o, &first);
    Py_XDECREF(first);
    if (had != 0) { /* another Task was first (1), or no memory for the entry (-1): mortal */
        if (had < 0) PyErr_Clear();
        return;
    }
    /* The dict's reference to us is left as it is: an immortal object's counts are not kept.
     * Relaxed atomic stores: another thread making a Task of the same function at this moment
     * may be taking a reference to us from the dict (its count, then dropped, is lost or
     * ignored either way once we are immortal). */
    PyObject_GC_UnTrack(o);
    _Py_atomic_store_uintptr_relaxed(&o->ob_tid, _Py_UNOWNED_TID);
    _Py_atomic_store_uint32_relaxed(&o->ob_ref_local, _Py_IMMORTAL_REFCNT_LOCAL);
    _Py_atomic_store_ssize_relaxed(&o->ob_ref_shared, 0);
#else
    (void)self;
#endif
}

/* A Task of a top-level function gets deferred reference counting (CPython 3.14t and later),
 * as CPython gives that function itself: every task body that calls it reads it as a global,
 * and the interpreter then takes no counted reference to it (its stack holds deferred ones),
 * so workers calling it do not write its reference count. Such a Task is then freed by the
 * cyclic collector rather than at its last reference, as the function is; Tasks of nested
 * functions keep prompt freeing, as nested functions do. Public (unstable) C API of 3.14. */
static void deferred_if_top_level(TaskObject *self) {
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030E0000
    if (!PyFunction_Check(self->fn)) return;
    int flags = ((PyCodeObject *)PyFunction_GET_CODE(self->fn))->co_flags;
    if ((flags & CO_NESTED) && !(flags & CO_METHOD)) return;
    PyUnstable_Object_EnableDeferredRefcount((PyObject *)self); /* 0: not possible, left as is */
#else
    (void)self;
#endif
}

/* __init__: once. A Task is immutable (its nodes and calls in progress read fn, name and retry
 * without a reference of their own), so a second __init__ raises TypeError, and two threads
 * initialising the same blank Task cannot both do it. */
static int task_init(TaskObject *self, PyObject *args, PyObject *kw) {
    int expect = TG_TASK_BLANK;
    /* acq_rel CAS: one initialiser wins (pairs with other initialisers' CAS). */
    if (!atomic_compare_exchange_strong_explicit(&self->ready, &expect, TG_TASK_INITIALISING,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        PyErr_Format(PyExc_TypeError, "taskgraph.Task %R is already initialised: a Task cannot "
                     "be changed (make a new one with taskgraph.task)", self->name ? self->name : Py_None);
        if (expect == TG_TASK_INITIALISING) /* racing initialiser: its name may not be set */
            PyErr_SetString(PyExc_TypeError, "taskgraph.Task is being initialised by another thread");
        return -1;
    }
    int r = task_init_once(self, args, kw);
    if (r == 0) {
        immortal_if_first(self);
        deferred_if_top_level(self);
    }
    /* Release: pairs with the acquire in task_ready (fn, name, retry are published). A failed
     * initialisation leaves the Task blank (it may be initialised again). */
    atomic_store_explicit(&self->ready, r == 0 ? TG_TASK_READY : TG_TASK_BLANK, memory_order_release);
    return r;
}

static int task_init_once(TaskObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"fn", "name", "retries", "retry_on", NULL};
    PyObject *fn, *name = Py_None, *retries = Py_None, *retry_on = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$OO:Task", names, &fn, &name, &retries, &retry_on))
        return -1;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "taskgraph.task needs a callable, got %.100s %R",
                     Py_TYPE(fn)->tp_name, fn);
        return -1;
    }
    if (Py_IS_TYPE(fn, &TG_TaskType)) {
        if (!task_ready((TaskObject *)fn)) return -1;
        fn = ((TaskObject *)fn)->fn;
    }
    if (tg_refuse_async_fn(fn) < 0) return -1; /* a generator or async function (hints.c) */
    PyObject *nm = name == Py_None ? name_of(fn) : Py_NewRef(name);
    if (!nm) return -1;
    if (!PyUnicode_CheckExact(nm) || PyUnicode_GET_LENGTH(nm) == 0) {
        PyErr_Format(PyExc_TypeError, "task name must be a non-empty str, got %R", nm);
        Py_DECREF(nm);
        return -1;
    }
    /* Not interned: interned strings are immortal on free-threaded builds, so names made
     * anew per call (tg.map's "map[...]", a dask key's prefix, name=f"job-{i}") would be kept
     * for the life of the process. Spawned nodes borrow the name through their worker's lease
     * (lease.h); a function's own __name__ is interned by the compiler already. */
    PyObject *retry = retry_options(retries, retry_on, nm);
    if (!retry && PyErr_Occurred()) {
        Py_DECREF(nm);
        return -1;
    }
    if (tg_arity_of(fn, &self->arity) < 0) {
        Py_DECREF(nm);
        Py_XDECREF(retry);
        return -1;
    }
    self->fn = Py_NewRef(fn); /* blank before: nothing to release */
    self->name = nm;
    self->retry = retry;
    /* functools.update_wrapper(self, fn): __name__, __doc__, __wrapped__, ... Objects without
     * those attributes (partials, builtins) are fine: the same errors are ignored as in
     * Python's own decorators. */
    PyObject *functools = PyImport_ImportModule("functools");
    if (!functools) return -1;
    PyObject *r = PyObject_CallMethod(functools, "update_wrapper", "OO", (PyObject *)self, fn);
    Py_DECREF(functools);
    if (!r) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_TypeError)) {
            Py_CLEAR(self->fn); /* back to blank (task_init) */
            Py_CLEAR(self->name);
            Py_CLEAR(self->retry);
            tg_arity_clear(&self->arity);
            return -1;
        }
        PyErr_Clear();
    }
    Py_XDECREF(r);
    return 0;
}

static PyObject *task_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)args; (void)kw;
    TaskObject *self = (TaskObject *)type->tp_alloc(type, 0);
    if (self) self->vectorcall = task_vectorcall;
    return (PyObject *)self;
}

static int task_traverse(TaskObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->fn);
    Py_VISIT(self->retry);
    Py_VISIT(self->dict);
    return tg_arity_traverse(&self->arity, visit, arg);
}

static int task_clear(TaskObject *self) {
    /* Collected: calls from finalizers now raise instead of reading a cleared fn. Relaxed
     * would do (the collector stops the world); release for symmetry with task_init. */
    atomic_store_explicit(&self->ready, TG_TASK_BLANK, memory_order_release);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->retry);
    Py_CLEAR(self->dict);
    tg_arity_clear(&self->arity);
    return 0;
}

static void task_dealloc(TaskObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist) PyObject_ClearWeakRefs((PyObject *)self);
    task_clear(self);
    Py_CLEAR(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A task used as a method: bound like a function (the instance is the first argument). */
static PyObject *task_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (!obj || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *task_repr(TaskObject *self) {
    /* Acquire: see task_ready. */
    if (atomic_load_explicit(&self->ready, memory_order_acquire) != TG_TASK_READY)
        return PyUnicode_FromString("<taskgraph.Task (not initialised)>");
    return PyUnicode_FromFormat("<taskgraph.Task %U>", self->name);
}

/* Pickling: by reference when the task is what its module holds under its qualified name
 * (a decorated module-level function: the function itself is hidden behind the task; the
 * receiving process imports the module, and tracebacks keep their file and lines), else by
 * value, as Task(fn, name) (lambdas, closures, partials, tasks in __main__: cloudpickle
 * carries their function). */
/* The object reached from module `mod` through the dotted name `qual`, or NULL (no error). */
static PyObject *lookup_qualified(PyObject *mod, PyObject *qual) {
    PyObject *obj = PyImport_GetModule(mod);
    PyObject *parts = obj ? PyUnicode_Split(qual, TG.str_dot, -1) : NULL;
    for (Py_ssize_t i = 0; obj && parts && i < PyList_GET_SIZE(parts); i++) {
        PyObject *next = NULL;
        if (PyObject_GetOptionalAttr(obj, PyList_GET_ITEM(parts, i), &next) < 0) next = NULL;
        Py_SETREF(obj, next);
    }
    Py_XDECREF(parts);
    PyErr_Clear();
    return obj;
}

/* _task_by_name(module, qualname): imports the module and returns the Task at that name (how
 * a Task rebuilt from a node is unpickled: by the name of the task its module defines). */
PyObject *tg_task_by_name(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *mod, *qual;
    if (!PyArg_ParseTuple(args, "UU:_task_by_name", &mod, &qual)) return NULL;
    PyObject *m = PyImport_Import(mod);
    if (!m) return NULL;
    Py_DECREF(m);
    PyObject *obj = lookup_qualified(mod, qual);
    if (obj && Py_IS_TYPE(obj, &TG_TaskType)) return obj;
    Py_XDECREF(obj);
    return PyErr_Format(PyExc_ImportError, "taskgraph: %U.%U is not a task any more", mod, qual);
}

static PyObject *task_reduce(TaskObject *self, PyObject *unused) {
    (void)unused;
    if (!task_ready(self)) return NULL;
    PyObject *mod = NULL, *qual = NULL;
    if (PyObject_GetOptionalAttrString((PyObject *)self, "__module__", &mod) < 0 ||
        PyObject_GetOptionalAttrString((PyObject *)self, "__qualname__", &qual) < 0) {
        Py_XDECREF(mod);
        Py_XDECREF(qual);
        return NULL;
    }
    if (mod && qual && PyUnicode_Check(mod) && PyUnicode_Check(qual) &&
        PyUnicode_CompareWithASCIIString(mod, "__main__") != 0) {
        PyObject *obj = lookup_qualified(mod, qual);
        /* By reference if the module holds this task there, or another Task wrapping the same
         * function (a task rebuilt from a node, when a graph is sent to another process). */
        int same = obj == (PyObject *)self;
        int twin = !same && obj && Py_IS_TYPE(obj, &TG_TaskType) &&
                   ((TaskObject *)obj)->fn == self->fn &&
                   PyObject_RichCompareBool(((TaskObject *)obj)->name, self->name, Py_EQ) == 1 &&
                   (((TaskObject *)obj)->retry == self->retry ||
                    (((TaskObject *)obj)->retry && self->retry &&
                     PyObject_RichCompareBool(((TaskObject *)obj)->retry, self->retry, Py_EQ) == 1));
        PyErr_Clear(); /* a failed name comparison: not a twin */
        Py_XDECREF(obj); /* compared only */
        if (same) {
            Py_DECREF(mod);
            return qual; /* pickle stores the global's name: module and qualified name */
        }
        if (twin) { /* pickle checks a global's identity: load it through _task_by_name */
            PyObject *r = Py_BuildValue("O(NN)", TG.task_by_name, mod, qual);
            return r;
        }
    }
    Py_XDECREF(mod);
    Py_XDECREF(qual);
    if (!self->retry) return Py_BuildValue("O(OO)", (PyObject *)Py_TYPE(self), self->fn, self->name);
    /* With its options: Task(fn, name, retries=..., retry_on=...) through the keyword helper. */
    return Py_BuildValue("O(OOOO)", TG.task_with_options, self->fn, self->name,
                         PyTuple_GET_ITEM(self->retry, 0), PyTuple_GET_ITEM(self->retry, 1));
}

/* _task_with_options(fn, name, retries, retry_on): how a Task with retries unpickles. */
PyObject *tg_task_with_options(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *fn, *name, *retries, *retry_on;
    if (!PyArg_ParseTuple(args, "OOOO:_task_with_options", &fn, &name, &retries, &retry_on)) return NULL;
    PyObject *pos = PyTuple_Pack(2, fn, name);
    PyObject *kw = pos ? Py_BuildValue("{sOsO}", "retries", retries, "retry_on", retry_on) : NULL;
    PyObject *t = kw ? PyObject_Call((PyObject *)&TG_TaskType, pos, kw) : NULL;
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    return t;
}

static PyObject *task_get_retries(TaskObject *self, void *c) {
    (void)c;
    if (!task_ready(self)) return NULL;
    return self->retry ? Py_NewRef(PyTuple_GET_ITEM(self->retry, 0)) : PyLong_FromLong(0);
}

static PyObject *task_get_retry_on(TaskObject *self, void *c) {
    (void)c;
    if (!task_ready(self)) return NULL;
    return self->retry ? Py_NewRef(PyTuple_GET_ITEM(self->retry, 1)) : PyTuple_New(0);
}

static PyMemberDef task_members[] = {
    {"fn", T_OBJECT_EX, offsetof(TaskObject, fn), READONLY, "The undecorated function."},
    {"name", T_OBJECT_EX, offsetof(TaskObject, name), READONLY,
     "The name used in node keys and traces."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef task_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"retries", (getter)task_get_retries, NULL,
     "How many times a failed call is run again (0: never).", NULL},
    {"retry_on", (getter)task_get_retry_on, NULL,
     "The exception classes that are retried (empty without retries).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef task_methods[] = {
    {"__reduce__", (PyCFunction)task_reduce, METH_NOARGS,
     "Pickled by reference when importable under its own name, else as Task(fn, name)."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(task_doc,
"Task(fn, name=None, *, retries=0, retry_on=Exception): a function made into a task (what\n"
"@taskgraph.task returns). With retries=N, a call that raises one of the retry_on classes is\n"
"run again at once on the same worker, up to N more times (each attempt is in the trace).\n\n"
"Calling it returns a Node:\n"
"* outside a worker: a lazy Node; nothing runs until compute/result;\n"
"* inside a running task: the Node is spawned at once onto this worker's deque (idle\n"
"  workers may steal it) and the caller keeps running; join it with result();\n"
"* inside `with taskgraph.serial():`: the function runs at once in the calling thread and\n"
"  the returned Node is already finished (its exception, if any, is raised by result()).\n\n"
"Arguments may contain Nodes anywhere inside lists, tuples, dicts, sets, frozensets,\n"
"namedtuples, slices and dataclass instances; the task then depends on them and receives\n"
"their values. `fn` is the undecorated function; tasks work as methods too.\n\n"
"Errors: a non-callable fn, a bad name or retry_on raises TypeError; retries outside 0..1000\n"
"ValueError. Calling a task raises TypeError when its function (a plain Python function)\n"
"would refuse the arguments (too many, a required one missing, an unknown keyword), when\n"
"its arguments cannot be scanned (a structure nested deeper than 1000 levels: a container\n"
"that contains itself), or MemoryError; the task's own errors are raised by result().");

PyTypeObject TG_TaskType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph.Task",
    .tp_basicsize = sizeof(TaskObject),
    .tp_dealloc = (destructor)task_dealloc,
    .tp_vectorcall_offset = offsetof(TaskObject, vectorcall),
    .tp_repr = (reprfunc)task_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = task_doc,
    .tp_traverse = (traverseproc)task_traverse,
    .tp_clear = (inquiry)task_clear,
    .tp_weaklistoffset = offsetof(TaskObject, weakreflist),
    .tp_methods = task_methods,
    .tp_members = task_members,
    .tp_getset = task_getset,
    .tp_descr_get = task_descr_get,
    .tp_dictoffset = offsetof(TaskObject, dict),
    .tp_init = (initproc)task_init,
    .tp_new = task_new,
};
