/* Task (task.c): the decorated function; calling it builds a Node, and spawns it inside a
 * task or runs it at once in serial mode. Layer 12 (docs/design/native.md). */
#ifndef TG_PY_TASK_H
#define TG_PY_TASK_H

#include "hints.h"
#include "join.h"
#include "node.h"

/* A Task is immutable once initialised: __init__ runs once (a second call raises TypeError),
 * and fn, name and retry never change after `ready` is published. */
enum { TG_TASK_BLANK = 0, TG_TASK_INITIALISING = 1, TG_TASK_READY = 2 };

typedef struct {
    PyObject_HEAD
    _Atomic int ready;   /* TG_TASK_*: a CAS claims the one initialisation; release when ready */
    PyObject *fn;
    PyObject *name;      /* interned str */
    PyObject *retry;     /* (retries, retry_on) or NULL: given to each of its nodes */
    tg_arity arity;      /* what fn takes: a call it refuses fails when the node is built */
    PyObject *dict;      /* functools.update_wrapper writes __name__, __doc__, ... here */
    PyObject *weakreflist;
    vectorcallfunc vectorcall;
} TaskObject;

extern PyTypeObject TG_TaskType;

/* _task_by_name(module, qualname) -> the Task defined there (unpickling a rebuilt Task). */
PyObject *tg_task_by_name(PyObject *unused, PyObject *args);
/* _task_with_options(fn, name, retries, retry_on) -> Task (unpickling a Task with retries). */
PyObject *tg_task_with_options(PyObject *unused, PyObject *args);

#endif
