/* Node (node.c): the Python type of one call of a task: result(), exception(), done(),
 * cancel(), compute(), its properties; building a node, waiting for one outside the workers.
 * Layer 10 (docs/design/native.md). */
#ifndef TG_PY_NODE_H
#define TG_PY_NODE_H

#include "join.h"

/* A new NEW node for fn(*args, **kw) given in vectorcall form; scans the arguments. The
 * caller gives it its key number (t.id: tg_node_id_at). */
NodeObject *tg_node_new(PyObject *fn, PyObject *name, PyObject *retry, PyObject *const *args,
                        size_t nargsf, PyObject *kwnames);
/* Waits, without a worker, until a node claimed by someone else finishes (timeout < 0: no
 * limit). 0, or -1 with TimeoutError or a signal's exception raised. */
int tg_node_wait_external(NodeObject *n, double timeout);
/* exception() of every Node of the list `nodes`, in order (each outcome marked seen): the first
 * exception that is not None, or None. A new reference, NULL with an error. */
PyObject *tg_nodes_first_error(PyObject *nodes);
/* The Nodes of the list `nodes` that have not finished, in order: a new list, NULL with an
 * error. */
PyObject *tg_nodes_not_done(PyObject *nodes);

#endif
