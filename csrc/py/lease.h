/* Leases (lease.c): a worker thread's own reference to a Task, which the nodes that worker
 * spawns hold instead of references to the Task's function, name and retry options. Layer 3
 * (docs/design/native.md): above state.h only.
 *
 * Why: every node of a task needs the task's function until it runs, and its name and retry
 * options for as long as it lives. Taken per node, those references are reference-count
 * changes on objects that every worker shares (the function is made by the importing thread),
 * so each spawn wrote one cache line that every core writes: an atomic add and a later atomic
 * subtract on each, and every read of the function's header a miss. A lease is made by, and
 * owned by, the worker: the nodes it spawns take a reference to the lease, which CPython counts
 * without an atomic operation on the owner's thread (biased reference counting), and borrow
 * the function, name and options through it (a Task never changes them once initialised).
 *
 * Each worker keeps a few leases in its Runner (tg_leases, direct-mapped by the Task's
 * address), made on a miss and replaced on a conflict; all of them are let go when the worker
 * has nothing to run at its outermost level, so a Task nobody else holds is freed once its
 * computes are over. A lease's only reference is to its Task: it never changes, it is freed
 * by whichever thread drops its last reference, and it is visited by the cyclic collector (a
 * Task's function can reach the nodes that hold the lease). */
#ifndef TG_PY_LEASE_H
#define TG_PY_LEASE_H

#include "state.h"

#define TG_LEASE_SLOTS 8 /* a power of two */

typedef struct {
    PyObject *task[TG_LEASE_SLOTS];  /* borrowed: compared only (the lease holds it) */
    PyObject *lease[TG_LEASE_SLOTS]; /* strong, or NULL */
} tg_leases;

/* The lease type (static, GC-tracked, no tp_clear: a cycle through a lease is broken at the
 * Task, whose tp_clear drops its function). */
extern PyTypeObject TG_LeaseType;

/* A new lease of task (a new reference), or NULL with an error. */
PyObject *tg_lease_new(PyObject *task);

/* This thread's lease of task from c (a new reference), made if c has none; NULL with an
 * error (memory). A lease c replaces is dropped with the caller's current task set aside by
 * the caller's `drop` (its Task may be freed, and with it Python objects). */
static inline PyObject *tg_lease_of(tg_leases *c, PyObject *task, void (*drop)(PyObject *)) {
    unsigned i = (unsigned)(((uintptr_t)task >> 6) & (TG_LEASE_SLOTS - 1));
    if (c->task[i] == task) return Py_NewRef(c->lease[i]);
    PyObject *l = tg_lease_new(task);
    if (!l) return NULL;
    PyObject *old = c->lease[i];
    c->task[i] = task;
    c->lease[i] = Py_NewRef(l);
    if (old) drop(old);
    return l;
}

/* Lets go of every lease in c (a Task may be freed). */
void tg_leases_release(tg_leases *c);

#endif
