/* The few C-API calls taskgraph uses that older CPythons lack (3.11 and 3.12 with the GIL).
 * On those builds the GIL makes the borrowed-reference forms safe. */
#ifndef TG_PY_COMPAT_H
#define TG_PY_COMPAT_H

#include <Python.h>

#ifdef Py_GIL_DISABLED
/* Whether the caller's reference to ob is its only one (owned by this thread, local count 1,
 * nothing in the shared count, its flags included), so that no other thread can reach ob or
 * start to. 3.14 has it as public unstable API; on 3.13t it is CPython's internal
 * _PyObject_IsUniquelyReferenced, with the fields of object.h (docs/design/native.md, "What
 * is taken from CPython's internals"). Relaxed loads: the local count is the caller's alone
 * to change; any other thread's reference shows in the shared count. */
static inline int tg_only_reference(PyObject *ob) {
#if PY_VERSION_HEX >= 0x030E0000
    return PyUnstable_Object_IsUniquelyReferenced(ob);
#else
    return _Py_IsOwnedByCurrentThread(ob) && _Py_atomic_load_uint32_relaxed(&ob->ob_ref_local) == 1 &&
           _Py_atomic_load_ssize_relaxed(&ob->ob_ref_shared) == 0;
#endif
}
#endif

#if PY_VERSION_HEX < 0x030C0000
static inline PyObject *PyErr_GetRaisedException(void) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (!t) return NULL;
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb) PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
}
static inline void PyErr_SetRaisedException(PyObject *exc) { /* steals exc */
    if (!exc) {
        PyErr_Clear();
        return;
    }
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
}
#endif

#if PY_VERSION_HEX < 0x030D0000
static inline int PyObject_GetOptionalAttr(PyObject *o, PyObject *name, PyObject **res) {
    return _PyObject_LookupAttr(o, name, res);
}
static inline int PyObject_GetOptionalAttrString(PyObject *o, const char *name, PyObject **res) {
    PyObject *n = PyUnicode_FromString(name);
    if (!n) {
        *res = NULL;
        return -1;
    }
    int r = _PyObject_LookupAttr(o, n, res);
    Py_DECREF(n);
    return r;
}
static inline int PyDict_GetItemRef(PyObject *d, PyObject *k, PyObject **res) {
    PyObject *v = PyDict_GetItemWithError(d, k);
    *res = Py_XNewRef(v);
    return v ? 1 : (PyErr_Occurred() ? -1 : 0);
}
static inline PyObject *PyList_GetItemRef(PyObject *l, Py_ssize_t i) {
    PyObject *x = PyList_GetItem(l, i);
    Py_XINCREF(x);
    return x;
}
#ifndef Py_BEGIN_CRITICAL_SECTION
#define Py_BEGIN_CRITICAL_SECTION(op) {
#define Py_END_CRITICAL_SECTION() }
#endif
static inline int tg_long_as_int(PyObject *o) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v > INT32_MAX || v < INT32_MIN) {
        PyErr_SetString(PyExc_OverflowError, "value out of range");
        return -1;
    }
    return (int)v;
}
#else
#define tg_long_as_int PyLong_AsInt
#endif

#endif
