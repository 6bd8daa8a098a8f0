/* Leases: a worker's own reference to a Task (lease.h says why and how they are kept). */
#include "lease.h"

typedef struct {
    PyObject_HEAD
    PyObject *task; /* strong; never changes */
} LeaseObject;

PyObject *tg_lease_new(PyObject *task) {
    LeaseObject *l = PyObject_GC_New(LeaseObject, &TG_LeaseType);
    if (!l) return NULL;
    l->task = Py_NewRef(task);
    PyObject_GC_Track((PyObject *)l);
    return (PyObject *)l;
}

void tg_leases_release(tg_leases *c) {
    for (int i = 0; i < TG_LEASE_SLOTS; i++) {
        PyObject *l = c->lease[i];
        c->lease[i] = NULL;
        c->task[i] = NULL;
        Py_XDECREF(l);
    }
}

static int lease_traverse(LeaseObject *l, visitproc visit, void *arg) {
    Py_VISIT(l->task);
    return 0;
}

static void lease_dealloc(LeaseObject *l) {
    PyObject_GC_UnTrack((PyObject *)l);
    Py_CLEAR(l->task);
    PyObject_GC_Del(l);
}

static PyObject *lease_repr(LeaseObject *l) {
    return PyUnicode_FromFormat("<taskgraph lease of %R>", l->task);
}

PyTypeObject TG_LeaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph._core.Lease",
    .tp_basicsize = sizeof(LeaseObject),
    .tp_dealloc = (destructor)lease_dealloc,
    .tp_repr = (reprfunc)lease_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A worker's reference to a Task, held by the nodes it spawns (csrc/py/lease.h).",
    .tp_traverse = (traverseproc)lease_traverse,
};
