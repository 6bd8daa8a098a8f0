/* The concurrent.futures.Future that a taskgraph.Executor call completes
 * (taskgraph/executor/future.py), made and completed in C on the common paths (execfuture.c):
 * its slots, filled at creation; PENDING -> RUNNING -> FINISHED under its lock; result().
 * Layer 3 (docs/design/native.md): above state.h only (plain C-API calls on the future). */
#ifndef TG_PY_EXECFUTURE_H
#define TG_PY_EXECFUTURE_H

#include "state.h"

/* The future's attributes: slots of its class, in that class's __slots__ order. */
enum { TG_F_CONDITION, TG_F_NODE, TG_F_STATE, TG_F_RESULT, TG_F_EXCEPTION, TG_F_CV,
       TG_F_ANY_WAITERS, TG_F_DONE_CALLBACKS, TG_F_NATTRS };
/* Their offsets in the object (set once by tg_future_configure). */
extern Py_ssize_t tg_future_offset[TG_F_NATTRS];
/* Slot i of future f, as an lvalue: a plain read or store, for a future nobody else sees yet,
 * or of a slot set once before anyone could (its _condition, its _node). */
#define TG_FUTURE_SLOT(f, i) (*(PyObject **)((char *)(f) + tg_future_offset[i]))

/* Makes the interned names this file uses; -1 with an error. */
int tg_future_init(void);
/* _exec_configure's part (executor.c): the Future class ft (its slots' offsets, read with
 * slot_of), its lock type lt and the lock's methods, the states PENDING, RUNNING and
 * FINISHED; installs Future.result. slot_of(type, name, who) is the offset of a slot holding
 * an object, -1 with an error. Once, at import. 0, or -1 with an error. */
int tg_future_configure(PyObject *ft, PyObject *lt, PyObject *pending, PyObject *running,
                        PyObject *finished,
                        Py_ssize_t (*slot_of)(PyObject *, PyObject *, const char *));
/* A new future, as Future() makes it (_node None), without running Python. Nobody else can
 * see it yet. NULL with an error. */
PyObject *tg_future_new(void);
/* PENDING -> RUNNING under the future's lock `lock` (its _condition): 1 if the call is to
 * run, 0 if not (cancelled: Future._tg_start told its waiters), -1 with an error. */
int tg_future_start(PyObject *f, PyObject *lock);
/* RUNNING -> FINISHED with result r, then the callbacks. 0, or -1 with an error. */
int tg_future_finish(PyObject *f, PyObject *lock, PyObject *r);

#endif
