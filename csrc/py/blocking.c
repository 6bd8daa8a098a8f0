/* Declared waits: `with tg.blocking():` inside a task tells the pool that this worker is
 * about to wait (I/O, a lock, a sleep, an outside future), so that a spare worker runs the
 * queued work meanwhile (pool.h, "Waiting tasks and spare workers"; docs/design/sleep.md,
 * "Spare workers"). Nested sections count as one. Outside a worker (the main thread, serial
 * mode, another library's thread) there is no core to hand over: nothing happens. Not on the
 * per-task path: only a task that declares a wait comes here. */
#include "blocking.h"

PyObject *tg_block_begin(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    Runner *W = TG_TLS.worker;
    if (!W) Py_RETURN_FALSE;
    if (W->blocking++ == 0) {
        tg_watch_block_begin(W->watch); /* a traced task's record gets the wait's ticks */
        tg_pool_block_begin(W->pool, W->index);
    }
    Py_RETURN_TRUE;
}

PyObject *tg_block_end(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    Runner *W = TG_TLS.worker;
    if (W && W->blocking > 0 && --W->blocking == 0) {
        tg_pool_block_end(W->pool, W->index);
        tg_watch_block_end(W->watch);
    }
    Py_RETURN_NONE;
}

PyObject *tg_py_waits(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    Runner *W = TG_TLS.worker;
    return PyLong_FromLong(W ? (long)tg_pool_waits(W->pool, W->index) : -1L);
}

PyObject *tg_py_pause_note(PyObject *mod, PyObject *starting) {
    (void)mod;
    tg_pool_pause_note(PyObject_IsTrue(starting) == 1);
    Py_RETURN_NONE;
}
