/* Arguments (args.c): finding the Nodes inside a call's arguments, replacing them by their
 * values, and the Ref form of a graph's arguments. Layer 3 (docs/design/native.md). */
#ifndef TG_PY_ARGS_H
#define TG_PY_ARGS_H

#include "noderec.h"

/* The Nodes inside args[0..n) (and, recursively, inside lists, tuples, dicts, sets,
 * frozensets, namedtuples, slices and dataclass instances): a new tuple of unique Nodes in
 * order of first appearance, NULL with no error when there are none, NULL with an error
 * (naming `who`) when a structure nests too deeply. */
PyObject *tg_scan_slow(PyObject *const *args, Py_ssize_t n, PyObject *who);
/* Whether x is an exact int, float, str, bool or None: a leaf, told from its type alone (the
 * commonest arguments of a fork-join task). */
static inline int tg_plain_scalar(PyObject *x) {
    PyTypeObject *tp = Py_TYPE(x);
    return tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyUnicode_Type || x == Py_None ||
           tp == &PyBool_Type;
}
/* tg_scan_slow's answer, without a call when every argument is a plain scalar. */
static inline PyObject *tg_scan(PyObject *const *args, Py_ssize_t n, PyObject *who) {
    Py_ssize_t i = 0;
    while (i < n && tg_plain_scalar(args[i])) i++;
    return i == n ? NULL : tg_scan_slow(args + i, n - i, who);
}
/* x with every Node inside replaced by its value (containers holding a Node are rebuilt, the
 * rest passed through as the same object). A Node that is not finished raises
 * TaskgraphError naming `who`; one that failed raises its exception. New reference. */
PyObject *tg_substitute(PyObject *x, PyObject *who);
/* A graph's arguments as plain data: x with every Node replaced by Ref(index_of[node]), and
 * back: x with every Ref(i) replaced by values[i]. Same container rules. */
extern PyTypeObject TG_RefType;
PyObject *tg_to_refs(PyObject *x, PyObject *index_of, PyObject *who);
PyObject *tg_from_refs(PyObject *x, PyObject *values, PyObject *who);

#endif
