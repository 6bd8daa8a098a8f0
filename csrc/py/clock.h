/* The records' clock (csrc/trace.h) for Python: the module's clock_origin() and clock_pair()
 * -> (ticks, ns) (taskgraph/trace reads records' times with them; the dashboard its samples'),
 * clock_tsc() -> bool, and trace_gc_phase(starting) (the gc callback that tells collections
 * from tasks' time). Layer 3 (docs/design/native.md): on the core's clock only. */
#ifndef TG_PY_CLOCK_H
#define TG_PY_CLOCK_H

#include "state.h"

PyObject *tg_py_clock_origin(PyObject *mod, PyObject *unused);
PyObject *tg_py_clock_pair(PyObject *mod, PyObject *unused);
PyObject *tg_py_clock_tsc(PyObject *mod, PyObject *unused);
PyObject *tg_py_trace_gc_phase(PyObject *mod, PyObject *starting);

#endif
