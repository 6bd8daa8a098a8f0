/* Clear errors for the common mistakes with Nodes: using a Node as its value (arithmetic,
 * ordering, len(), iteration, int(), float(), round(), a subscript, a format spec: a forgotten
 * .result()), decorating a generator or async function with @task, and calling a task with
 * arguments its function refuses (found when the node is built). Each Node slot here only
 * raises; == and hash stay identity (Nodes are dict keys) and bool() stays True (`if node:`
 * means "if there is a node"). */
#include "hints.h"

/* Raises TypeError: "<what>: <Node key state> is a taskgraph Node, not its value: ...". */
static PyObject *hint(PyObject *node, const char *fmt, ...) {
    va_list va;
    va_start(va, fmt);
    PyObject *what = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    PyObject *r = what ? PyObject_Repr(node) : NULL;
    if (r)
        PyErr_Format(PyExc_TypeError,
                     "%U: %U is a taskgraph Node, not its value: call .result() to get the value "
                     "(or pass the Node to a task, which receives the value)", what, r);
    Py_XDECREF(what);
    Py_XDECREF(r);
    return NULL;
}

/* A binary operator with a Node: the other operand's slot gets its turn first (as CPython
 * would give it when the Node is on the left), so types that combine with Nodes keep working;
 * otherwise the hint. */
static PyObject *binary(PyObject *v, PyObject *w, size_t slot, const char *op) {
    if (Node_Check(v) && !Node_Check(w) && Py_TYPE(w)->tp_as_number) {
        binaryfunc f = *(binaryfunc *)((char *)Py_TYPE(w)->tp_as_number + slot);
        if (f) {
            PyObject *r = f(v, w);
            if (r != Py_NotImplemented) return r;
            Py_DECREF(r);
        }
    }
    return hint(Node_Check(v) ? v : w, "unsupported operand type(s) for %s: '%.100s' and '%.100s'",
                op, Py_TYPE(v)->tp_name, Py_TYPE(w)->tp_name);
}

#define BINARY(fn, slot, op) \
    static PyObject *fn(PyObject *v, PyObject *w) { \
        return binary(v, w, offsetof(PyNumberMethods, slot), op); \
    }
BINARY(nb_add, nb_add, "+")
BINARY(nb_sub, nb_subtract, "-")
BINARY(nb_mul, nb_multiply, "*")
BINARY(nb_mod, nb_remainder, "%")
BINARY(nb_divmod, nb_divmod, "divmod()")
BINARY(nb_lshift, nb_lshift, "<<")
BINARY(nb_rshift, nb_rshift, ">>")
BINARY(nb_and, nb_and, "&")
BINARY(nb_xor, nb_xor, "^")
BINARY(nb_or, nb_or, "|")
BINARY(nb_floordiv, nb_floor_divide, "//")
BINARY(nb_truediv, nb_true_divide, "/")
BINARY(nb_matmul, nb_matrix_multiply, "@")

static PyObject *nb_pow(PyObject *v, PyObject *w, PyObject *z) {
    if (Node_Check(v) && !Node_Check(w) && Py_TYPE(w)->tp_as_number && Py_TYPE(w)->tp_as_number->nb_power) {
        PyObject *r = Py_TYPE(w)->tp_as_number->nb_power(v, w, z); /* w's turn, as in binary() */
        if (r != Py_NotImplemented) return r;
        Py_DECREF(r);
    }
    return hint(Node_Check(v) ? v : Node_Check(w) ? w : z,
                "unsupported operand type(s) for ** or pow(): '%.100s' and '%.100s'",
                Py_TYPE(v)->tp_name, Py_TYPE(w)->tp_name);
}

#define UNARY(fn, op) \
    static PyObject *fn(PyObject *v) { return hint(v, "bad operand type for unary %s: '%.100s'", op, Py_TYPE(v)->tp_name); }
UNARY(nb_neg, "-")
UNARY(nb_pos, "+")
UNARY(nb_abs, "abs()")
UNARY(nb_inv, "~")

static PyObject *nb_int(PyObject *v) {
    return hint(v, "int() argument must be a real number, not '%.100s'", Py_TYPE(v)->tp_name);
}

static PyObject *nb_float(PyObject *v) { /* float(), and every C function that wants a double */
    return hint(v, "must be a real number, not '%.100s'", Py_TYPE(v)->tp_name);
}

static int nb_bool(PyObject *v) {
    (void)v;
    return 1; /* a Node is true, as any object without a length: `if node:` keeps working */
}

PyNumberMethods tg_node_as_number = {
    .nb_add = nb_add, .nb_subtract = nb_sub, .nb_multiply = nb_mul, .nb_remainder = nb_mod,
    .nb_divmod = nb_divmod, .nb_power = nb_pow, .nb_negative = nb_neg, .nb_positive = nb_pos,
    .nb_absolute = nb_abs, .nb_bool = nb_bool, .nb_invert = nb_inv, .nb_lshift = nb_lshift,
    .nb_rshift = nb_rshift, .nb_and = nb_and, .nb_xor = nb_xor, .nb_or = nb_or,
    .nb_floor_divide = nb_floordiv, .nb_true_divide = nb_truediv,
    .nb_matrix_multiply = nb_matmul, .nb_int = nb_int, .nb_float = nb_float,
    /* No nb_index: a Node must not pass PyIndex_Check (code that takes an index or a slice
     * would take it for one). nb_int and nb_float make PyNumber_Check true: whoever converts
     * it then gets the hint. */
};

static Py_ssize_t sq_len(PyObject *v) {
    hint(v, "object of type '%.100s' has no len()", Py_TYPE(v)->tp_name);
    return -1;
}

PySequenceMethods tg_node_as_sequence = {
    .sq_length = sq_len, /* no sq_item: a Node must not pass PySequence_Check */
};

static PyObject *mp_subscript(PyObject *v, PyObject *key) {
    return hint(v, "'%.100s' object is not subscriptable (node[%R])", Py_TYPE(v)->tp_name, key);
}

PyMappingMethods tg_node_as_mapping = {.mp_subscript = mp_subscript}; /* no mp_length: sq_len */

PyObject *tg_node_round(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)args; (void)nargs;
    return hint(self, "round() needs a number, not '%.100s'", Py_TYPE(self)->tp_name);
}

PyObject *tg_node_floor(PyObject *self, PyObject *unused) {
    (void)unused;
    return hint(self, "math.floor() needs a number, not '%.100s'", Py_TYPE(self)->tp_name);
}

PyObject *tg_node_ceil(PyObject *self, PyObject *unused) {
    (void)unused;
    return hint(self, "math.ceil() needs a number, not '%.100s'", Py_TYPE(self)->tp_name);
}

PyObject *tg_node_trunc(PyObject *self, PyObject *unused) {
    (void)unused;
    return hint(self, "math.trunc() needs a number, not '%.100s'", Py_TYPE(self)->tp_name);
}

PyObject *tg_node_format_spec(PyObject *self, PyObject *spec) {
    if (!PyUnicode_Check(spec))
        return PyErr_Format(PyExc_TypeError, "__format__() argument must be str, not %.100s",
                            Py_TYPE(spec)->tp_name);
    if (PyUnicode_GET_LENGTH(spec) == 0) return PyObject_Str(self); /* f"{node}", as object's */
    return hint(self, "unsupported format string %R passed to %.100s.__format__", spec,
                Py_TYPE(self)->tp_name);
}

PyObject *tg_node_iter(PyObject *o) {
    return hint(o, "'%.100s' object is not iterable", Py_TYPE(o)->tp_name);
}

PyObject *tg_node_richcompare(PyObject *a, PyObject *b, int op) {
    if (op == Py_EQ || op == Py_NE) /* identity, as object's: nodes are dict keys */
        return Py_NewRef(a != b ? Py_NotImplemented : op == Py_EQ ? Py_True : Py_False);
    static const char *ops[] = {"<", "<=", "==", "!=", ">", ">="};
    /* a is the Node (CPython calls the reflected operation with the operands swapped). b's
     * own turn, as CPython would give it after ours (when b came first, it said
     * NotImplemented already, and says it again). */
    if (!Node_Check(b) && Py_TYPE(b)->tp_richcompare) {
        static const int swapped[] = {Py_GT, Py_GE, Py_EQ, Py_NE, Py_LT, Py_LE};
        PyObject *r = Py_TYPE(b)->tp_richcompare(b, a, swapped[op]);
        if (r != Py_NotImplemented) return r;
        Py_DECREF(r);
    }
    return hint(a, "'%s' not supported between instances of '%.100s' and '%.100s'", ops[op],
                Py_TYPE(a)->tp_name, Py_TYPE(b)->tp_name);
}

Py_hash_t tg_node_hash(PyObject *o) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_HashPointer(o);
#else
    return _Py_HashPointer(o);
#endif
}

int tg_refuse_async_fn(PyObject *fn) {
    static const char *checks[][2] = {
        {"isgeneratorfunction", "a generator function"},
        {"iscoroutinefunction", "an async (coroutine) function"},
        {"isasyncgenfunction", "an async generator function"},
    };
    PyObject *inspect = PyImport_ImportModule("inspect");
    if (!inspect) return -1;
    int r = 0;
    for (size_t i = 0; !r && i < sizeof checks / sizeof checks[0]; i++) {
        PyObject *yes = PyObject_CallMethod(inspect, checks[i][0], "O", fn);
        int t = yes ? PyObject_IsTrue(yes) : -1;
        Py_XDECREF(yes);
        if (t > 0)
            PyErr_Format(PyExc_TypeError,
                         "taskgraph.task cannot make a task of %R, %s: calling it only makes a "
                         "%s object, which the worker would return without running its body. "
                         "Decorate a plain function (collect a generator's items into a list "
                         "inside it; run a coroutine with asyncio.run(...) inside it, or await "
                         "the Node from asyncio instead)", fn, checks[i][1],
                         i == 0 ? "generator" : i == 1 ? "coroutine" : "async generator");
        r = t ? -1 : 0;
    }
    Py_DECREF(inspect);
    return r;
}

/* ---------------------------------------------------------------- a call its function refuses */

int tg_arity_of(PyObject *fn, tg_arity *a) {
    *a = (tg_arity){.min_pos = 0, .span = (size_t)PY_SSIZE_T_MAX, .max_pos = PY_SSIZE_T_MAX};
    if (!PyFunction_Check(fn)) return 0; /* a partial, a builtin, a callable object: not checked */
    PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(fn);
    PyObject *defaults = PyFunction_GET_DEFAULTS(fn), *kwdefaults = PyFunction_GET_KW_DEFAULTS(fn);
    Py_ssize_t argc = co->co_argcount, n = argc + co->co_kwonlyargcount;
    if (n > 64) return 0;
    PyObject *names = PyCode_GetVarnames(co);
    PyObject *params = names ? PyTuple_GetSlice(names, 0, n) : NULL;
    Py_XDECREF(names);
    if (!params) return -1;
    uint64_t required = 0;
    for (Py_ssize_t i = argc; i < n; i++) {
        int has = kwdefaults ? PyDict_Contains(kwdefaults, PyTuple_GET_ITEM(params, i)) : 0;
        if (has < 0) {
            Py_DECREF(params);
            return -1;
        }
        if (!has) required |= (uint64_t)1 << i;
    }
    a->argc = argc;
    a->posonly = co->co_posonlyargcount;
    a->need_pos = argc - (defaults ? PyTuple_GET_SIZE(defaults) : 0);
    a->max_pos = co->co_flags & CO_VARARGS ? PY_SSIZE_T_MAX : argc;
    a->min_pos = a->need_pos;
    a->span = (size_t)(a->max_pos - a->need_pos);
    if (required) { /* a required keyword-only parameter: every call without keywords checks */
        a->min_pos = PY_SSIZE_T_MAX;
        a->span = 0;
    }
    a->varkw = (co->co_flags & CO_VARKEYWORDS) != 0;
    a->kw_required = required;
    a->params = params;
    return 0;
}

void tg_arity_clear(tg_arity *a) { Py_CLEAR(a->params); }

int tg_arity_traverse(tg_arity *a, visitproc visit, void *arg) {
    Py_VISIT(a->params);
    return 0;
}

/* The index of `name` among the parameters, or -1 (identity first: both are interned names,
 * as a rule; then equality, which cannot fail for two str). */
static Py_ssize_t param_index(PyObject *params, PyObject *name) {
    Py_ssize_t n = PyTuple_GET_SIZE(params);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyTuple_GET_ITEM(params, i) == name) return i;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_Check(name) && PyUnicode_Compare(PyTuple_GET_ITEM(params, i), name) == 0) return i;
    PyErr_Clear();
    return -1;
}

/* Whether the function's parameters, as cached, refuse the call (Python's binding rules). */
static int refused(const tg_arity *a, Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs > a->max_pos) return 1;
    uint64_t given = 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        Py_ssize_t j = param_index(a->params, PyTuple_GET_ITEM(kwnames, k));
        if (j < a->posonly) { /* unknown, or positional-only: only **kwargs takes it */
            if (!a->varkw) return 1;
            continue;
        }
        if (j < a->argc && j < nargs) return 1; /* given twice */
        given |= (uint64_t)1 << j;
    }
    for (Py_ssize_t j = nargs; j < a->need_pos; j++)
        if (!(given >> j & 1)) return 1; /* a required positional parameter missing */
    return (a->kw_required & ~given) != 0;
}

/* The call was refused by the cache: ask inspect.signature(fn).bind(*args, **kwargs), and
 * raise with its words only if it refuses too. */
static int confirm_refused(PyObject *fn, PyObject *name, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames) {
    PyObject *inspect = PyImport_ImportModule("inspect");
    PyObject *sig = inspect ? PyObject_CallMethod(inspect, "signature", "O", fn) : NULL;
    Py_XDECREF(inspect);
    if (!sig) { /* no signature to ask (it raised): let the call go on, as before */
        if (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *pos = PyTuple_New(nargs), *kw = nkw ? PyDict_New() : NULL, *bind = NULL, *r = NULL;
    if (!pos || (nkw && !kw)) goto done;
    for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(pos, i, Py_NewRef(args[i]));
    for (Py_ssize_t k = 0; k < nkw; k++)
        if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, k), args[nargs + k]) < 0) goto done;
    bind = PyObject_GetAttrString(sig, "bind");
    r = bind ? PyObject_Call(bind, pos, kw) : NULL;
    if (!r && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyObject *why = PyErr_GetRaisedException();
        PyErr_Format(PyExc_TypeError, "task %U: %S (its signature: %U%S): a call its function "
                     "refuses is refused when the node is built, before anything runs", name, why,
                     name, sig);
        Py_DECREF(why);
    }
done:
    Py_DECREF(sig);
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    Py_XDECREF(bind);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

int tg_check_call(const tg_arity *a, PyObject *fn, PyObject *name, PyObject *const *args,
                  size_t nargsf, PyObject *kwnames) {
    if (!a->params) return 0;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!refused(a, nargs, kwnames)) return 0;
    /* Strong references across the Python code inspect runs, as the call holds its own. */
    fn = Py_NewRef(fn);
    name = Py_NewRef(name);
    int r = confirm_refused(fn, name, args, nargs, kwnames);
    Py_DECREF(fn);
    Py_DECREF(name);
    return r;
}
