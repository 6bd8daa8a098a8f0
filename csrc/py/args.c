/* Finding the Nodes inside a task's arguments (when it is called), and replacing them by their
 * values (when it runs). The same walk, aimed at another target, turns a graph's arguments into
 * plain data for another process (Nodes to Ref placeholders, Refs back to values: the dask
 * backend and tg.save/tg.load). Understood, nested to any mix: lists, tuples, dicts (values), sets,
 * frozensets, namedtuples, slices, dataclass instances, and subclasses of list and dict.
 * Everything else is a leaf, passed as is (strings and bytes are not containers).
 *
 * Thread safety: tuples are immutable; a list is read under its critical section, which is
 * never nested and in which no Python code runs: every item that is not a plain leaf (exact
 * int, str, ...) is collected there with a strong reference, and classified (which can run a
 * metaclass's __getattr__ or a property, and so drop items from the list) and visited only
 * after leaving it. Dicts and sets are read through a snapshot. Nothing borrowed is held
 * across a call that can run Python code. */
#include "args.h"

#define MAX_DEPTH 1000 /* deeper means a container that contains itself, or close to it */

typedef enum {
    K_ERROR = -1, /* classifying it raised (KeyboardInterrupt, MemoryError, ...) */
    K_LEAF, K_TARGET, K_LIST, K_TUPLE, K_DICT, K_SET, K_NAMEDTUPLE, K_SLICE, K_DATACLASS,
    K_LIST_SUB, K_DICT_SUB, K_SET_SUB
} kind;

/* 1 if the type has the attribute, 0 if not, -1 with an error. The lookup can run Python
 * code (a metaclass __getattr__, a property): an ordinary exception from it means "no"; a
 * KeyboardInterrupt, SystemExit or MemoryError propagates. */
static int has_type_attr(PyTypeObject *tp, PyObject *name) {
    PyObject *v = NULL;
    int r = PyObject_GetOptionalAttr((PyObject *)tp, name, &v);
    Py_XDECREF(v);
    if (r < 0) {
        if (!PyErr_ExceptionMatches(PyExc_Exception) || PyErr_ExceptionMatches(PyExc_MemoryError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    return r > 0;
}

/* Whether x is a leaf without looking further than its exact type (no Python code runs):
 * what the list scan may decide under the list's critical section. */
static inline int plain_leaf(PyObject *x, PyTypeObject *target) {
    PyTypeObject *tp = Py_TYPE(x);
    return tp != target && (tp == &TG_NodeType || tp == &TG_RefType || tp == &PyLong_Type ||
                            tp == &PyFloat_Type || tp == &PyUnicode_Type || x == Py_None ||
                            tp == &PyBool_Type || tp == &PyBytes_Type || tp == &PyComplex_Type);
}

/* What x is for a walk looking for objects of type `target` (Node or Ref); Nodes and Refs that
 * are not the target are leaves. */
static kind kind_of(PyObject *x, PyTypeObject *target) {
    PyTypeObject *tp = Py_TYPE(x);
    if (tp == target) return K_TARGET;
    if (tp == &TG_NodeType || tp == &TG_RefType) return K_LEAF;
    if (tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyUnicode_Type || x == Py_None ||
        tp == &PyBool_Type || tp == &PyBytes_Type || tp == &PyComplex_Type)
        return K_LEAF;
    if (tp == &PyList_Type) return K_LIST;
    if (tp == &PyTuple_Type) return K_TUPLE;
    if (tp == &PyDict_Type) return K_DICT;
    if (tp == &PySet_Type || tp == &PyFrozenSet_Type) return K_SET;
    if (tp == &PySlice_Type) return K_SLICE;
    if (PyType_Check(x) || PyCallable_Check(x)) return K_LEAF; /* classes, functions */
    if (PyTuple_Check(x)) {
        int r = has_type_attr(tp, TG.str_fields);
        return r < 0 ? K_ERROR : r ? K_NAMEDTUPLE : K_LEAF;
    }
    if (PyList_Check(x)) return K_LIST_SUB;
    if (PyDict_Check(x)) return K_DICT_SUB;
    if (PyAnySet_Check(x)) return K_SET_SUB;
    int r = has_type_attr(tp, TG.str_dataclass_fields);
    return r < 0 ? K_ERROR : r ? K_DATACLASS : K_LEAF;
}

/* ---------------------------------------------------------------- the walk */

/* A growable array of strong references. */
typedef struct {
    PyObject **items;
    Py_ssize_t n, cap;
    PyObject *inline_items[8];
} objvec;

static void vec_init(objvec *v) {
    v->items = v->inline_items;
    v->n = 0;
    v->cap = 8;
}

static int vec_push(objvec *v, PyObject *o) { /* takes a new reference to o */
    if (v->n == v->cap) {
        Py_ssize_t cap = v->cap * 2;
        PyObject **ni = v->items == v->inline_items ? PyMem_Malloc(sizeof(PyObject *) * (size_t)cap)
                                                    : PyMem_Realloc(v->items, sizeof(PyObject *) * (size_t)cap);
        if (!ni) {
            PyErr_NoMemory();
            return -1;
        }
        if (v->items == v->inline_items) memcpy(ni, v->inline_items, sizeof v->inline_items);
        v->items = ni;
        v->cap = cap;
    }
    v->items[v->n++] = Py_NewRef(o);
    return 0;
}

static void vec_free(objvec *v) {
    for (Py_ssize_t i = 0; i < v->n; i++) Py_DECREF(v->items[i]);
    if (v->items != v->inline_items) PyMem_Free(v->items);
}

typedef struct {
    objvec found;        /* targets, in order of first appearance (with duplicates) */
    int stop_at_first;   /* only asks whether there is any */
    PyTypeObject *type;  /* the target: Node or Ref */
    PyObject *who;       /* for messages */
} walk;

static int visit(walk *w, PyObject *x, int depth);

/* Who a message is about: "task NAME", or a function of the API given as "compute()". */
static const char *who_kind(PyObject *who) {
    return PyUnicode_Tailmatch(who, TG.str_call_parens, 0, PY_SSIZE_T_MAX, 1) == 1 ? "" : "task ";
}

static int too_deep(walk *w) {
    PyErr_Format(PyExc_RecursionError,
                 "the arguments of %s%U nest containers deeper than %d levels (a container "
                 "that contains itself?); pass such a structure inside an object taskgraph does "
                 "not look into", who_kind(w->who), w->who, MAX_DEPTH);
    return -1;
}

/* Visits the items of a sequence of strong references we hold. */
static int visit_items(walk *w, PyObject *const *items, Py_ssize_t n, int depth) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (visit(w, items[i], depth) < 0) return -1;
        if (w->stop_at_first && w->found.n) return 0;
    }
    return 0;
}

/* A target met before anything that waits in `later` goes straight to w->found (the order of
 * first appearance holds: all of `later` comes after it in the list); a list of Nodes is thus
 * read once, with one reference taken per Node, and a walk that stops at the first target
 * stops there. */
static int visit_list(walk *w, PyObject *list, int depth) {
    objvec later;
    vec_init(&later);
    int err = 0;
    Py_BEGIN_CRITICAL_SECTION(list);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *x = PyList_GET_ITEM(list, i); /* borrowed only until vec_push's new reference */
        if (plain_leaf(x, w->type)) continue;
        if (later.n == 0 && Py_IS_TYPE(x, w->type)) {
            if (vec_push(&w->found, x) < 0) {
                err = -1;
                break;
            }
            if (w->stop_at_first) break;
            continue;
        }
        if (vec_push(&later, x) < 0) {
            err = -1;
            break;
        }
    }
    Py_END_CRITICAL_SECTION();
    if (!err) err = visit_items(w, later.items, later.n, depth);
    vec_free(&later);
    return err;
}

static int visit_snapshot(walk *w, PyObject *seq /* new reference or NULL */, int depth) {
    if (!seq) return -1;
    int err = PyList_GET_SIZE(seq) ? visit_items(w, &PyList_GET_ITEM(seq, 0), PyList_GET_SIZE(seq), depth) : 0;
    Py_DECREF(seq);
    return err;
}

/* The dataclass fields of x (dataclasses.fields(x)), a new tuple. */
static PyObject *dataclass_fields(PyObject *x) {
    PyObject *dc = PyImport_ImportModule("dataclasses");
    if (!dc) return NULL;
    PyObject *f = PyObject_CallMethod(dc, "fields", "O", x);
    Py_DECREF(dc);
    return f;
}

static int visit_dataclass(walk *w, PyObject *x, int depth) {
    PyObject *fields = dataclass_fields(x);
    if (!fields) return -1;
    int err = 0;
    for (Py_ssize_t i = 0; !err && i < PyTuple_GET_SIZE(fields); i++) {
        PyObject *name = PyObject_GetAttr(PyTuple_GET_ITEM(fields, i), TG.str_name);
        PyObject *v = NULL;
        if (!name) { err = -1; break; }
        if (PyObject_GetOptionalAttr(x, name, &v) < 0) err = -1;
        Py_DECREF(name);
        if (v) {
            err = visit(w, v, depth);
            Py_DECREF(v);
        }
        if (w->stop_at_first && w->found.n) break;
    }
    Py_DECREF(fields);
    return err;
}

static int visit(walk *w, PyObject *x, int depth) {
    kind k = kind_of(x, w->type);
    if (k == K_ERROR) return -1;
    if (k == K_LEAF) return 0;
    if (k == K_TARGET) return vec_push(&w->found, x);
    if (depth >= MAX_DEPTH) return too_deep(w);
    switch (k) {
    case K_TUPLE:
    case K_NAMEDTUPLE:
        return visit_items(w, &PyTuple_GET_ITEM(x, 0), PyTuple_GET_SIZE(x), depth + 1);
    case K_LIST:
    case K_LIST_SUB:
        return visit_list(w, x, depth + 1);
    case K_DICT:
    case K_DICT_SUB:
        return visit_snapshot(w, PyDict_Values(x), depth + 1);
    case K_SET:
    case K_SET_SUB:
        return visit_snapshot(w, PySequence_List(x), depth + 1);
    case K_SLICE: {
        PySliceObject *s = (PySliceObject *)x;
        PyObject *parts[3] = {s->start, s->stop, s->step};
        return visit_items(w, parts, 3, depth + 1);
    }
    case K_DATACLASS:
        return visit_dataclass(w, x, depth + 1);
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------- scanning */

PyObject *tg_scan_slow(PyObject *const *args, Py_ssize_t n, PyObject *who) {
    /* Fast path: no argument is anything but a leaf (the fork-join case; plain scalars were
     * passed over by tg_scan already). */
    Py_ssize_t i = 0;
    kind k = K_LEAF;
    while (i < n && (tg_plain_scalar(args[i]) || (k = kind_of(args[i], &TG_NodeType)) == K_LEAF)) i++;
    if (i == n || k == K_ERROR) return NULL;
    walk w = {.stop_at_first = 0, .type = &TG_NodeType, .who = who};
    vec_init(&w.found);
    if (visit_items(&w, args + i, n - i, 0) < 0) {
        vec_free(&w.found);
        return NULL;
    }
    PyObject *out = NULL;
    if (w.found.n == 0) goto done;
    /* Unique, in order of first appearance. */
    Py_ssize_t m = 0;
    if (w.found.n <= 16) {
        for (Py_ssize_t a = 0; a < w.found.n; a++) {
            int dup = 0;
            for (Py_ssize_t b = 0; b < m && !dup; b++) dup = w.found.items[b] == w.found.items[a];
            if (dup) Py_DECREF(w.found.items[a]);
            else w.found.items[m++] = w.found.items[a];
        }
    } else { /* an open-addressing set of the pointers (Nodes hash by identity) */
        size_t cap = 64;
        while (cap < (size_t)w.found.n * 2) cap <<= 1;
        PyObject **slot = PyMem_Calloc(cap, sizeof(PyObject *));
        if (!slot) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t a = 0; a < w.found.n; a++) {
            PyObject *x = w.found.items[a];
            size_t h = ((uintptr_t)x >> 4) * 0x9e3779b97f4a7c15ULL;
            size_t i = (h >> 20) & (cap - 1);
            while (slot[i] && slot[i] != x) i = (i + 1) & (cap - 1);
            if (slot[i]) {
                Py_DECREF(x); /* seen before */
            } else {
                slot[i] = x;
                w.found.items[m++] = x;
            }
        }
        PyMem_Free(slot);
    }
    w.found.n = m;
    out = PyTuple_New(m);
    if (!out) goto done;
    for (Py_ssize_t a = 0; a < m; a++) PyTuple_SET_ITEM(out, a, w.found.items[a]);
    w.found.n = 0; /* the tuple took the references */
done:
    vec_free(&w.found);
    return out;
}

/* ---------------------------------------------------------------- replacing */

/* What a replacement walk looks for, and what it puts in its place. */
typedef struct target target;
struct target {
    PyTypeObject *type;                              /* Node or Ref */
    PyObject *(*replace)(const target *t, PyObject *x); /* new reference, or NULL (error) */
    PyObject *arg;                                   /* for replace */
    PyObject *who;                                   /* for messages */
};

/* 1 if x holds a target somewhere, 0 if not, -1 on error. */
static int holds(PyObject *x, const target *t, int depth) {
    walk w = {.stop_at_first = 1, .type = t->type, .who = t->who};
    vec_init(&w.found);
    int r = visit(&w, x, depth);
    int found = w.found.n > 0;
    vec_free(&w.found);
    return r < 0 ? -1 : found;
}

/* A Node's value (substitution when a task runs). */
static PyObject *value_of(const target *t, PyObject *x) {
    NodeObject *n = (NodeObject *)x;
    int st = tg_task_state(&n->t);
    if (st == TG_DONE) return Py_NewRef(n->value);
    if (st > TG_DONE) {
        PyErr_SetRaisedException(tg_exception_copy(n->value));
        return NULL;
    }
    PyObject *key = tg_node_key(n);
    if (key) {
        PyErr_Format(TG.TaskgraphError,
                     "%s%U received node %U, which was not among its dependencies when it "
                     "was submitted (was a list or dict changed after the call?) and is not "
                     "finished", who_kind(t->who), t->who, key);
        Py_DECREF(key);
    }
    return NULL;
}

static PyObject *subst(PyObject *x, const target *t, int depth);

/* Replaces the targets in every item of a new list we own, in place. */
static int subst_list_items(PyObject *list, const target *t, int depth) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *y = subst(PyList_GET_ITEM(list, i), t, depth);
        if (!y) return -1;
        Py_SETREF(PyList_GET_ITEM(list, i), y);
    }
    return 0;
}

static PyObject *subst_dataclass(PyObject *x, const target *t, int depth) {
    PyObject *fields = dataclass_fields(x);
    if (!fields) return NULL;
    PyObject *init_changes = PyDict_New(), *other = PyDict_New(), *out = NULL;
    if (!init_changes || !other) goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++) {
        PyObject *f = PyTuple_GET_ITEM(fields, i);
        PyObject *name = PyObject_GetAttr(f, TG.str_name), *v = NULL, *init = NULL;
        if (!name) goto done;
        if (PyObject_GetOptionalAttr(x, name, &v) < 0 || !v) {
            Py_DECREF(name);
            if (PyErr_Occurred()) goto done;
            continue;
        }
        int h = holds(v, t, depth);
        PyObject *nv = h > 0 ? subst(v, t, depth) : NULL;
        int bad = h < 0 || (h > 0 && !nv);
        if (!bad && nv) {
            init = PyObject_GetAttrString(f, "init");
            bad = !init || PyDict_SetItem(PyObject_IsTrue(init) ? init_changes : other, name, nv) < 0;
        }
        Py_XDECREF(init);
        Py_XDECREF(nv);
        Py_DECREF(v);
        Py_DECREF(name);
        if (bad) goto done;
    }
    PyObject *dc = PyImport_ImportModule("dataclasses");
    if (!dc) goto done;
    PyObject *replace = PyObject_GetAttrString(dc, "replace");
    Py_DECREF(dc);
    if (!replace) goto done;
    PyObject *a = PyTuple_Pack(1, x);
    out = a ? PyObject_Call(replace, a, init_changes) : NULL;
    Py_XDECREF(a);
    Py_DECREF(replace);
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (out && PyDict_Next(other, &pos, &k, &v)) /* fields that __init__ does not take */
        if (PyObject_GenericSetAttr(out, k, v) < 0) Py_CLEAR(out);
done:
    Py_XDECREF(init_changes);
    Py_XDECREF(other);
    Py_DECREF(fields);
    return out;
}

/* A copy of x made by copy.copy (keeps a subclass and its attributes). */
static PyObject *shallow_copy(PyObject *x) {
    PyObject *copy = PyImport_ImportModule("copy");
    PyObject *out = copy ? PyObject_CallMethod(copy, "copy", "O", x) : NULL;
    Py_XDECREF(copy);
    return out;
}

static PyObject *subst(PyObject *x, const target *t, int depth) {
    kind k = kind_of(x, t->type);
    if (k == K_ERROR) return NULL;
    if (k == K_LEAF) return Py_NewRef(x);
    if (k == K_TARGET) return t->replace(t, x);
    if (depth >= MAX_DEPTH) {
        walk w = {.who = t->who};
        too_deep(&w);
        return NULL;
    }
    int h = holds(x, t, depth);
    if (h <= 0) return h < 0 ? NULL : Py_NewRef(x); /* nothing to replace: the same object */
    depth++;
    switch (k) {
    case K_TUPLE:
    case K_NAMEDTUPLE: {
        Py_ssize_t n = PyTuple_GET_SIZE(x);
        PyObject *out = PyTuple_New(n);
        if (!out) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *y = subst(PyTuple_GET_ITEM(x, i), t, depth);
            if (!y) {
                Py_DECREF(out);
                return NULL;
            }
            PyTuple_SET_ITEM(out, i, y);
        }
        if (k == K_TUPLE) return out;
        PyObject *r = PyObject_Call((PyObject *)Py_TYPE(x), out, NULL); /* namedtuple(*values) */
        Py_DECREF(out);
        return r;
    }
    case K_LIST: {
        PyObject *out = PyList_GetSlice(x, 0, PY_SSIZE_T_MAX); /* a snapshot we own */
        if (out && subst_list_items(out, t, depth) < 0) Py_CLEAR(out);
        return out;
    }
    case K_LIST_SUB: { /* copy.copy keeps the subclass and its attributes; then the items */
        PyObject *out = shallow_copy(x);
        PyObject *items = out ? PyList_GetSlice(x, 0, PY_SSIZE_T_MAX) : NULL;
        if (items && subst_list_items(items, t, depth) == 0 &&
            PyList_SetSlice(out, 0, PY_SSIZE_T_MAX, items) == 0) {
            Py_DECREF(items);
            return out;
        }
        Py_XDECREF(items);
        Py_XDECREF(out);
        return NULL;
    }
    case K_DICT:
    case K_DICT_SUB: {
        PyObject *out = k == K_DICT ? PyDict_New() : shallow_copy(x);
        PyObject *items = out ? PyDict_Items(x) : NULL; /* a snapshot */
        if (!items) {
            Py_XDECREF(out);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
            PyObject *kv = PyList_GET_ITEM(items, i);
            PyObject *v = subst(PyTuple_GET_ITEM(kv, 1), t, depth);
            if (!v || PyObject_SetItem(out, PyTuple_GET_ITEM(kv, 0), v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(items);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(v);
        }
        Py_DECREF(items);
        return out;
    }
    case K_SET:
    case K_SET_SUB: {
        PyObject *items = PySequence_List(x);
        if (!items || subst_list_items(items, t, depth) < 0) {
            Py_XDECREF(items);
            return NULL;
        }
        PyObject *out = Py_IS_TYPE(x, &PySet_Type) ? PySet_New(items)
                        : Py_IS_TYPE(x, &PyFrozenSet_Type) ? PyFrozenSet_New(items)
                        : PyObject_CallOneArg((PyObject *)Py_TYPE(x), items);
        Py_DECREF(items);
        return out;
    }
    case K_SLICE: {
        PySliceObject *s = (PySliceObject *)x;
        PyObject *a = subst(s->start, t, depth), *b = a ? subst(s->stop, t, depth) : NULL,
                 *c = b ? subst(s->step, t, depth) : NULL;
        PyObject *out = c ? PySlice_New(a, b, c) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        return out;
    }
    case K_DATACLASS:
        return subst_dataclass(x, t, depth);
    default:
        return Py_NewRef(x);
    }
}

PyObject *tg_substitute(PyObject *x, PyObject *who) {
    target t = {&TG_NodeType, value_of, NULL, who};
    return subst(x, &t, 0);
}

/* ---------------------------------------------------------------- Ref: a dependency, as data */

typedef struct {
    PyObject_HEAD
    Py_ssize_t index;
} RefObject;

static PyObject *ref_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    Py_ssize_t i;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Ref() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "n:Ref", &i)) return NULL;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "Ref index must be >= 0");
        return NULL;
    }
    RefObject *r = (RefObject *)type->tp_alloc(type, 0);
    if (r) r->index = i;
    return (PyObject *)r;
}

static PyObject *ref_reduce(RefObject *r, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("O(n)", (PyObject *)Py_TYPE(r), r->index);
}

static PyObject *ref_repr(RefObject *r) { return PyUnicode_FromFormat("Ref(%zd)", r->index); }

static PyMemberDef ref_members[] = {
    {"index", T_PYSSIZET, offsetof(RefObject, index), READONLY, "Which dependency."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef ref_methods[] = {
    {"__reduce__", (PyCFunction)ref_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject TG_RefType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph._core.Ref",
    .tp_basicsize = sizeof(RefObject),
    .tp_repr = (reprfunc)ref_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Ref(i): stands for the i-th dependency inside a task's arguments, when a graph "
              "is turned into plain data (to_refs / from_refs).",
    .tp_methods = ref_methods,
    .tp_members = ref_members,
    .tp_new = ref_new,
};

/* A Node's placeholder: Ref(index_of[node]); a node that is not in index_of and has finished
 * with a result is replaced by its value. */
static PyObject *ref_for(const target *t, PyObject *x) {
    PyObject *idx = NULL;
    if (PyDict_GetItemRef(t->arg, x, &idx) < 0) return NULL;
    if (!idx) {
        if (tg_task_state(&((NodeObject *)x)->t) == TG_DONE) return Py_NewRef(((NodeObject *)x)->value);
        tg_err_node(PyExc_KeyError, (NodeObject *)x, "node %U is not part of the graph being "
                    "exported (and has not finished with a result)");
        return NULL;
    }
    PyObject *r = PyObject_CallOneArg((PyObject *)&TG_RefType, idx);
    Py_DECREF(idx);
    return r;
}

/* A Ref's value: values[ref.index]. */
static PyObject *value_for(const target *t, PyObject *x) {
    return PySequence_GetItem(t->arg, ((RefObject *)x)->index);
}

PyObject *tg_to_refs(PyObject *x, PyObject *index_of, PyObject *who) {
    target t = {&TG_NodeType, ref_for, index_of, who};
    return subst(x, &t, 0);
}

PyObject *tg_from_refs(PyObject *x, PyObject *values, PyObject *who) {
    target t = {&TG_RefType, value_for, values, who};
    return subst(x, &t, 0);
}
