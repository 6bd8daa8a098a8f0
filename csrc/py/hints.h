/* Clear errors for the common mistakes with Nodes (see hints.c). */
#ifndef TG_PY_HINTS_H
#define TG_PY_HINTS_H

#include "noderec.h"

/* Node's slots: arithmetic, ordering, len(), iter() raise TypeError saying to call .result();
 * == and hash stay identity (nodes are dict keys); bool() stays True. */
extern PyNumberMethods tg_node_as_number;
extern PySequenceMethods tg_node_as_sequence;
PyObject *tg_node_richcompare(PyObject *a, PyObject *b, int op);
Py_hash_t tg_node_hash(PyObject *o);
PyObject *tg_node_iter(PyObject *o);

/* 0, or -1 with TypeError if fn is a generator, coroutine or async generator function
 * (@task would return an object that never runs). Called by Task's __init__. */
int tg_refuse_async_fn(PyObject *fn);

#endif
