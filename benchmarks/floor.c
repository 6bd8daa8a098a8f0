/* The bare floor of the fork-join path, for benchmarks/per_task.py's c1 (not taskgraph code).
 *
 * The least a spawn/join API for Python functions can do, after ../shared/notes/native-path.md:
 * `spawn(fn, *args)` builds a node (a static C type, not tracked by the cyclic GC) and pushes
 * it on a per-thread stack; `node.result()` pops and runs nodes with PyObject_Vectorcall until
 * its own has a value. No deque a thief could reach, no task states, no argument scan, no
 * cancelling, no tracing, no error handling beyond propagating the exception (the nodes still
 * on the stack are then left there). Run on one thread, with the same task bodies as
 * taskgraph's, it says how much of c1 any implementation of this API pays in CPython alone: the
 * Python calls, the node objects and the result() method calls.
 *
 * Built by benchmarks/_floor.py with the running interpreter's headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_ARGS 4

typedef struct FloorNode {
    PyObject_HEAD
    PyObject *fn;
    PyObject *args[MAX_ARGS];
    Py_ssize_t nargs;
    PyObject *value;          /* the result once run, else NULL */
    struct FloorNode *below;  /* the next node down the stack (the stack's reference) */
} FloorNode;

static _Thread_local FloorNode *top; /* this thread's stack of nodes not run yet */

static PyObject *node_result(FloorNode *n, PyObject *unused) {
    (void)unused;
    while (!n->value) {
        FloorNode *t = top;
        if (!t) {
            PyErr_SetString(PyExc_RuntimeError, "floor: result() of a node this thread did not spawn");
            return NULL;
        }
        top = t->below;
        t->below = NULL;
        t->value = PyObject_Vectorcall(t->fn, t->args, (size_t)t->nargs, NULL);
        int failed = t->value == NULL;
        Py_DECREF(t); /* the stack's reference */
        if (failed) return NULL;
    }
    return Py_NewRef(n->value);
}

static void node_dealloc(FloorNode *n) {
    Py_XDECREF(n->fn);
    for (Py_ssize_t i = 0; i < n->nargs; i++) Py_DECREF(n->args[i]);
    Py_XDECREF(n->value);
    PyObject_Free(n);
}

static PyMethodDef node_methods[] = {
    {"result", (PyCFunction)node_result, METH_NOARGS, "Runs nodes off this thread's stack until this one has a value."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject FloorNodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "floor.Node",
    .tp_basicsize = sizeof(FloorNode),
    .tp_dealloc = (destructor)node_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = node_methods,
};

static PyObject *spawn(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 1 || nargs > MAX_ARGS + 1) {
        PyErr_SetString(PyExc_TypeError, "floor.spawn(fn, *args): 0 to 4 arguments after fn");
        return NULL;
    }
    FloorNode *n = PyObject_New(FloorNode, &FloorNodeType);
    if (!n) return NULL;
    n->fn = Py_NewRef(args[0]);
    n->nargs = nargs - 1;
    for (Py_ssize_t i = 0; i < n->nargs; i++) n->args[i] = Py_NewRef(args[i + 1]);
    n->value = NULL;
    n->below = top;
    top = (FloorNode *)Py_NewRef(n);
    return (PyObject *)n;
}

static PyMethodDef module_methods[] = {
    {"spawn", (PyCFunction)(void (*)(void))spawn, METH_FASTCALL, "spawn(fn, *args) -> Node"},
    {NULL, NULL, 0, NULL}};

static int exec_module(PyObject *m) { return PyModule_AddType(m, &FloorNodeType); }

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_NOT_USED}, /* loading it must not turn the GIL back on */
#endif
    {0, NULL}};

static struct PyModuleDef floor_module = {
    PyModuleDef_HEAD_INIT, .m_name = "floor", .m_size = 0, .m_methods = module_methods, .m_slots = slots};

PyMODINIT_FUNC PyInit_floor(void) { return PyModuleDef_Init(&floor_module); }
