/* The rules of running a task, in one place for every backend (rules.c): the one task runner
 * (call the function, retry per the task's policy, end-of-task sync of its children through
 * the backend, notes naming the task and where it ran, notes about unread child failures),
 * and the words of a node that never ran because of its dependency. The native worker loop
 * (worker.c) calls tg_run_body directly; the dask backend reaches it as core._run_task.
 *
 * A low layer: it uses only the module state (TG) and the node record (noderec.h), never the
 * worker loop or the engine. */
#ifndef TG_RULES_H
#define TG_RULES_H

#include "noderec.h"

typedef struct tg_body tg_body;

/* What a backend does for the runner. Only `call` is required. */
typedef struct tg_body_ops {
    /* Calls the task's function once: a new reference, or NULL with an exception set. */
    PyObject *(*call)(tg_body *b);
    /* The end-of-task sync: waits for every unfinished child of the task (cancelling first
     * those not started, if it is failing: tg_body_failing), then hands each finished child to
     * tg_body_child, in spawn order. It may fail the task itself (tg_body_fail). Called after
     * every call; NULL: the task has no children (serial mode). */
    void (*sync)(tg_body *b);
    /* A failed attempt (0 for the first) will run again: its record (a trace), or NULL. */
    void (*retrying)(tg_body *b, int attempt);
    /* Whether the task was asked to stop (no more retries), or NULL: never. */
    int (*stop_asked)(tg_body *b);
    /* Where the task runs, for the note on its exception ("on worker 0 of <...>"): a new
     * reference, or NULL (no note). */
    PyObject *(*where)(tg_body *b);
} tg_body_ops;

/* One run of a task's body (on the caller's stack: no allocation). */
struct tg_body {
    const tg_body_ops *ops;
    void *ctx;             /* the backend's own */
    NodeObject *node;      /* the node whose task it is (its key, when `key` is NULL), or NULL */
    PyObject *key;         /* the task's key (borrowed), or NULL: the node's */
    PyObject *retry;       /* the task's (retries, retry_on), or NULL: no retries (borrowed) */
    /* Where the failure is stored while the task fails (the node's value and `failing` flag
     * natively: its children read them, see cancel_error in worker.c). */
    PyObject **value;
    _Atomic uint8_t *failing;
    PyObject *result;      /* the current call's value (cleared when the task fails) */
    int attempts;          /* out: how many calls were made */
};

/* Runs the body the way every backend must: calls it, again while a failure is to be retried
 * (tg_retry_wanted, and nobody asked it to stop), each call followed by the end-of-task sync.
 * Returns the result (new reference), or NULL with the task failing (*b->value holds the
 * exception, noted with the task's key and where it ran, and with the number of attempts if
 * there were several). Never raises. */
PyObject *tg_run_body(tg_body *b);
/* The task fails with exc (stolen; replaces an earlier failure). */
void tg_body_fail(tg_body *b, PyObject *exc);
/* Whether the task is failing. */
int tg_body_failing(tg_body *b);
/* Notes on the task's exception where it was raised (tg_note_origin): what tg_run_body does
 * at the end; for a failure set after it returned (an internal failure storing the result). */
void tg_body_note(tg_body *b);
/* A finished child k, at the task's end-of-task sync: a failure nobody read fails the task
 * (the first one, if the task is not failing already; it counts as read), or becomes a note
 * on the task's exception (the others that failed; not the cancelled ones). */
void tg_body_child(tg_body *b, NodeObject *k);

/* The rules of a failed call (none raises; notes are a courtesy: an exception object that
 * refuses attributes keeps its own error). */
/* Adds one note naming the task `key` and where it ran (`where`) to exc, unless exc has one
 * already (it is not noted again at each parent it propagates through). */
void tg_note_origin(PyObject *exc, PyObject *key, PyObject *where);
/* Adds a note saying the task failed `attempts` times with `retries` retries. */
void tg_note_attempts(PyObject *exc, PyObject *key, int attempts, PyObject *retries);
/* Adds to exc a note about another child (kkey, failed with kexc) of the task pkey whose
 * failure nobody observed. */
void tg_note_sibling(PyObject *exc, PyObject *pkey, PyObject *kkey, PyObject *kexc);
/* Whether failed attempt `attempt` (0 for the first) with exception exc is run again, for a
 * task with these retry options ((retries, retry_on) or NULL): retries left, and exc is one of
 * the retry_on classes (a cancellation or a closed scheduler never is: running again cannot
 * help). The caller also checks that nobody asked the task to stop. */
int tg_retry_wanted(PyObject *retry, PyObject *exc, int attempt);

/* Why a node never ran because of its dependency `dep_key` in final state `state`:
 * "its dependency <key> failed" (TG_FAILED), "... was cancelled" (TG_CANCELLED), "... had
 * not run" (any other). New reference, or NULL with an exception. */
PyObject *tg_dependency_reason(PyObject *dep_key, int state);
/* The CancelledError of the task `key` that never ran: "task <key> was cancelled: <reason>",
 * followed by the failure behind it, named (its task, type and message, however many
 * cancelled dependencies down it is), and its cause `cause` (or none if NULL). Runs the
 * failure's __str__. New reference, or NULL with an exception. */
PyObject *tg_cancelled_error(PyObject *key, PyObject *reason, PyObject *cause);

/* tg_run_body with a Python object as the backend (the dask worker side, through module.c's
 * _run_task): call() makes one call; backend.sync(failing) returns the task's children;
 * backend.retrying(exc, attempt) is told of a retry. retry: the task's (retries, retry_on) or
 * NULL. The result (new reference), or NULL with the task's exception raised. */
PyObject *tg_run_python_body(PyObject *call, PyObject *backend, PyObject *key, PyObject *where,
                             PyObject *retry);
/* The module's functions for other backends: _cancelled_error, _dependency_reason (module.c
 * adds them, and _run_task, which needs the Task type of a layer above). */
extern PyMethodDef tg_rules_methods[];

#endif
