/* Clear errors for the common mistakes with Nodes: using a Node as its value (arithmetic,
 * ordering, len(), iteration: a forgotten .result()), and decorating a generator or async
 * function with @task. Each Node slot here only raises; == and hash stay identity (Nodes
 * are dict keys) and bool() stays True (`if node:` means "if there is a node"). */
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
    .nb_matrix_multiply = nb_matmul,
    /* No nb_int, nb_float, nb_index: they would make a Node pass PyNumber_Check/PyIndex_Check. */
};

static Py_ssize_t sq_len(PyObject *v) {
    hint(v, "object of type '%.100s' has no len()", Py_TYPE(v)->tp_name);
    return -1;
}

PySequenceMethods tg_node_as_sequence = {
    .sq_length = sq_len, /* no sq_item: a Node must not pass PySequence_Check */
};

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
