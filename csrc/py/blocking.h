/* Declared waits (blocking.c): tg.blocking()'s two calls into the pool. Layer 6 beside the
 * worker loop (docs/design/native.md): they read the calling thread's Runner only. */
#ifndef TG_PY_BLOCKING_H
#define TG_PY_BLOCKING_H

#include "worker.h"

/* block_begin() -> whether this thread is a worker (the wait was declared to its pool). */
PyObject *tg_block_begin(PyObject *mod, PyObject *unused);
/* block_end(): ends what block_begin declared (nested pairs count as one). */
PyObject *tg_block_end(PyObject *mod, PyObject *unused);

/* waits() -> the calling worker's count of waits declared or found (tg_pool_waits), or -1
 * outside a worker: tg.map's ranges compare two readings around a block of items. */
PyObject *tg_py_waits(PyObject *mod, PyObject *unused);

/* _pause_note(starting): a garbage collection starts (True) or ends (the gc callback that
 * taskgraph.scheduler installs): the managers of spares judge no wait across it. */
PyObject *tg_py_pause_note(PyObject *mod, PyObject *starting);

#endif
