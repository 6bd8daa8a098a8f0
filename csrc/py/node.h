/* Node (node.c): the Python type of one call of a task: result(), exception(), done(),
 * cancel(), compute(), its properties; building a node (waiting and reading its outcome:
 * outcome.h). Layer 11 (docs/design/native.md), above outcome. */
#ifndef TG_PY_NODE_H
#define TG_PY_NODE_H

#include "outcome.h"

/* A new NEW node for fn(*args, **kw) given in vectorcall form; scans the arguments. The
 * caller gives it its key number (t.id: tg_node_id_at). `lease`: a reference the node takes
 * over (even on failure), through which fn, name and retry are borrowed (lease.h); or NULL:
 * the node takes references to them. `cache`: the calling worker's node cache (noderec.h),
 * or NULL. */
NodeObject *tg_node_new(PyObject *fn, PyObject *name, PyObject *retry, PyObject *lease,
                        tg_node_cache *cache, PyObject *const *args, size_t nargsf,
                        PyObject *kwnames);

#endif
