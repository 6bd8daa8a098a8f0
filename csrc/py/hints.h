/* Clear errors for the common mistakes with Nodes (see hints.c). */
#ifndef TG_PY_HINTS_H
#define TG_PY_HINTS_H

#include "noderec.h"

/* Node's slots: arithmetic, ordering, len(), iter() raise TypeError saying to call .result();
 * == and hash stay identity (nodes are dict keys); bool() stays True. */
extern PyNumberMethods tg_node_as_number;
extern PySequenceMethods tg_node_as_sequence;
PyObject *tg_node_richcompare(PyObject *a, PyObject *b, int op);
Py_hash_t tg_node_hash(PyObject *o);
PyObject *tg_node_iter(PyObject *o);

/* 0, or -1 with TypeError if fn is a generator, coroutine or async generator function
 * (@task would return an object that never runs). Called by Task's __init__. */
int tg_refuse_async_fn(PyObject *fn);

/* The other hints for a Node used as its value: int(), float() (the number slots), subscripts
 * (the mapping slot), and the methods round(), math.floor/ceil/trunc and format() look up.
 * format(node, "") stays str(node), as object's. */
extern PyMappingMethods tg_node_as_mapping;
PyObject *tg_node_round(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *tg_node_floor(PyObject *self, PyObject *unused);
PyObject *tg_node_ceil(PyObject *self, PyObject *unused);
PyObject *tg_node_trunc(PyObject *self, PyObject *unused);
PyObject *tg_node_format_spec(PyObject *self, PyObject *spec);

/* What a task's function says about the arguments it takes, read once when the Task is made
 * (tg_arity_of), so that a call its function would refuse fails when the node is built, not
 * when it runs. Calling a task compares the number of positional arguments with its range
 * (tg_arity_ok: one compare); a call outside it, or with keywords, goes to tg_check_call. Only a
 * plain Python function is checked (`params` NULL: never refused): the cache can be stale
 * after fn.__code__ or __defaults__ change, so tg_check_call refuses a call only after
 * inspect.signature(fn).bind() refused it too (and then with its words). */
typedef struct {
    Py_ssize_t min_pos;          /* a call without keywords may give min_pos .. min_pos + span */
    size_t span;                 /* positional arguments: tg_arity_ok's one compare */
    Py_ssize_t max_pos;          /* positional arguments taken (PY_SSIZE_T_MAX: *args) */
    Py_ssize_t argc, posonly;    /* positional parameters; the first `posonly` are not keywords */
    Py_ssize_t need_pos;         /* the positional parameters without a default */
    PyObject *params;            /* tuple of the named parameters (positional, then keyword-only),
                                    at most 64; NULL: calls are never refused */
    uint64_t kw_required;        /* bit i: params[i] is keyword-only without a default */
    int varkw;                   /* **kwargs: any keyword is taken */
} tg_arity;

/* Whether a call with nargs positional arguments and no keywords needs no check (the fast
 * path: nargs - min_pos as an unsigned number, one compare). */
static inline int tg_arity_ok(const tg_arity *a, Py_ssize_t nargs) {
    return (size_t)(nargs - a->min_pos) <= a->span;
}

/* Fills *a for fn (a plain function: its code and defaults; anything else: never refused).
 * 0, or -1 with an exception (memory). Clear it with tg_arity_clear. */
int tg_arity_of(PyObject *fn, tg_arity *a);
void tg_arity_clear(tg_arity *a);
int tg_arity_traverse(tg_arity *a, visitproc visit, void *arg);
/* The slow path of a task's call (see tg_arity): 0 if the call may go on, -1 with TypeError
 * naming the task `name` and what its function refuses. */
int tg_check_call(const tg_arity *a, PyObject *fn, PyObject *name, PyObject *const *args,
                  size_t nargsf, PyObject *kwnames);

#endif
