/* The records' clock (csrc/trace.h) as the module's functions (clock.h). */
#include "clock.h"

#include "../trace.h"

static PyObject *pair(void (*fn)(int64_t *, int64_t *)) {
    int64_t ticks, ns;
    fn(&ticks, &ns);
    return Py_BuildValue("(LL)", (long long)ticks, (long long)ns);
}

PyObject *tg_py_clock_origin(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    return pair(tg_clock_origin);
}

PyObject *tg_py_clock_pair(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    return pair(tg_clock_pair);
}

PyObject *tg_py_clock_tsc(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    return PyBool_FromLong(tg_clock_tsc());
}

PyObject *tg_py_trace_gc_phase(PyObject *mod, PyObject *starting) {
    (void)mod;
    int on = PyObject_IsTrue(starting);
    if (on < 0) return NULL;
    tg_trace_gc_phase(on);
    Py_RETURN_NONE;
}
