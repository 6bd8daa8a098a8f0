/* A Node's outcome (outcome.c): waiting for a node by the means that fit the thread (inside
 * a task: a join; outside: the lazy compute's hook, or a wait without a worker) and reading
 * it: the Node methods result(), exception(), _wait(), _peek_exception(),
 * add_done_callback(), and the compute's loops over a list of nodes. Layer 10
 * (docs/design/native.md): above join, below the Node type (node.c), whose method table
 * names these. */
#ifndef TG_PY_OUTCOME_H
#define TG_PY_OUTCOME_H

#include "join.h"

/* Waits, without a worker, until a node claimed by someone else finishes (timeout < 0: no
 * limit). 0, or -1 with TimeoutError or a signal's exception raised. */
int tg_node_wait_external(NodeObject *n, double timeout);
/* exception() of every Node of `nodes` (a list or a tuple), in order (each outcome marked
 * seen): the first exception that is not None, or None. A new reference, NULL with an error
 * (TypeError for anything but a list or tuple of Nodes). */
PyObject *tg_nodes_first_error(PyObject *nodes);
/* gather() inside a task: the values of the Nodes of the tuple `nodes`, in order, as a new
 * list, after joining each as exception() does (each outcome marked seen); a copy of the
 * first exception in order raised instead if one failed (NULL). NotImplemented (a new
 * reference) if an item is not a Node: the caller takes the general path. */
PyObject *tg_nodes_gather(PyObject *nodes);
/* The Nodes of `nodes` that have not finished, in order: for a list, a new list; for a tuple,
 * a tuple (the same one when none has finished). NULL with an error (as above). */
PyObject *tg_nodes_not_done(PyObject *nodes);

/* The Node methods (node.c's method table; their docstrings are there). */
PyObject *tg_node_result_m(NodeObject *n, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *tg_node_exception_m(NodeObject *n, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *tg_node_wait_unread_m(NodeObject *n, PyObject *unused);
PyObject *tg_node_peek_exception_m(NodeObject *n, PyObject *unused);
PyObject *tg_node_add_done_callback_m(NodeObject *n, PyObject *fn);

#endif
