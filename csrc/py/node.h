/* Node (node.c): the Python type of one call of a task: result(), exception(), done(),
 * cancel(), compute(), its properties; building a node (waiting and reading its outcome:
 * outcome.h). Layer 11 (docs/design/native.md), above outcome. */
#ifndef TG_PY_NODE_H
#define TG_PY_NODE_H

#include "outcome.h"

/* A new NEW node for fn(*args, **kw) given in vectorcall form; scans the arguments. The
 * caller gives it its key number (t.id: tg_node_id_at). */
NodeObject *tg_node_new(PyObject *fn, PyObject *name, PyObject *retry, PyObject *const *args,
                        size_t nargsf, PyObject *kwnames);

#endif
