/* tg.map's per-item loop (mapblock.h). One C loop per block instead of builtins.map feeding a
 * list that is then copied into the output: no per-item list append or copy, no islice, and
 * fn's own StopIteration is fn's error. */
#include "mapblock.h"

/* A range whose items are machine integers: item i is start + i * step, for i < len. */
typedef struct {
    int ok;
    Py_ssize_t start, step, len;
} small_range;

static small_range range_of(PyObject *r) {
    small_range sr = {0, 0, 0, 0};
    PyObject *a = PyObject_GetAttrString(r, "start"), *b = a ? PyObject_GetAttrString(r, "step") : NULL;
    Py_ssize_t len = PyObject_Length(r);
    if (a && b && len >= 0) {
        int oa, ob;
        long long start = PyLong_AsLongLongAndOverflow(a, &oa), step = PyLong_AsLongLongAndOverflow(b, &ob);
        long long last;
        /* Every item start + i * step (i < len) must fit: the last one does. */
        if (!oa && !ob && !PyErr_Occurred() && start >= PY_SSIZE_T_MIN && start <= PY_SSIZE_T_MAX &&
            (len == 0 || !__builtin_mul_overflow((long long)(len - 1), step, &last)) &&
            !__builtin_add_overflow(start, len ? last : 0, &last) && last >= PY_SSIZE_T_MIN &&
            last <= PY_SSIZE_T_MAX)
            sr = (small_range){1, (Py_ssize_t)start, (Py_ssize_t)step, len};
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    PyErr_Clear(); /* not a small range: items are taken the general way */
    return sr;
}

/* The next item of src (a new reference), or NULL: at the end (no error set) or on error. */
static PyObject *next_item(PyObject *src, Py_ssize_t i, const small_range *sr) {
    if (sr->ok) return i < sr->len ? PyLong_FromSsize_t(sr->start + i * sr->step) : NULL;
    if (PyTuple_CheckExact(src))
        return i < PyTuple_GET_SIZE(src) ? Py_NewRef(PyTuple_GET_ITEM(src, i)) : NULL;
    if (PyRange_Check(src)) {
        PyObject *x = PySequence_GetItem(src, i);
        if (!x && PyErr_ExceptionMatches(PyExc_IndexError)) PyErr_Clear();
        return x;
    }
    return PyIter_Next(src);
}

/* Makes the reference to r that the output list holds count the way another thread's
 * Py_INCREF would count it. On the free-threaded build an object made by this worker is owned
 * by it (biased reference counting): its references from this thread are counted in a local
 * field, and a decrement from another thread that would take the other, shared field below
 * zero queues the object to its owner (a lock and a wake-up per object: the caller freeing a
 * million results paid ~20 ns each). So the reference is added to the shared field, as a
 * non-owner's Py_INCREF does, and ours dropped: if it was the last local one, CPython merges
 * the two fields and gives up ownership (_Py_MergeZeroLocalRefcount), and whoever drops the
 * last reference later frees the object at once. The total count never changes. */
static inline void count_as_shared(PyObject *r) {
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030D0000
    _Py_atomic_add_ssize(&r->ob_ref_shared, (Py_ssize_t)1 << _Py_REF_SHARED_SHIFT);
    Py_DECREF(r);
#else
    (void)r;
#endif
}

/* Gives result r (our reference, about to be stored in the output list) to the thread `to`
 * that called the map and will read and free it (free-threaded builds; elsewhere nothing).
 * - Made by `to` itself (the caller's own share of the map): nothing to do.
 * - Made here, ours the only reference, of a type the cyclic GC never visits (int, float,
 *   str, bytes...): r becomes owned by `to`, its one reference counted as `to`'s local one.
 *   Nobody else can reach r, and we never touch it again (the list is handed to the caller
 *   through the task's finish and join), so no two threads ever count it locally at once.
 *   The caller then reads and frees it as an object it made itself: no atomic operation on
 *   either side (count_as_shared costs an atomic add and a merge here, and an atomic
 *   decrement there: a million trivial results took 30 ms to make on 2 workers and 14 ms to
 *   free, against 23 and 11 ms handed over). Not for GC-visited types: a collection resets
 *   their owner to the thread whose memory holds them (gc_free_threading.c), and the caller's
 *   last decrement would then queue them to that thread rather than free them at once.
 * - Anything else made here (a container, or an object referenced elsewhere too):
 *   count_as_shared. An object made by a third thread is left as it is. */
static inline void hand_over(PyObject *r, uintptr_t to) {
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030D0000
    if (_Py_IsImmortal(r) || !_Py_IsOwnedByCurrentThread(r) || to == _Py_ThreadId()) return;
    if (to != 0 && !PyType_IS_GC(Py_TYPE(r)) && tg_only_reference(r)) {
        /* Relaxed store: published to the caller with the list (the finish's release, the
         * join's acquire), as the result itself is. */
        _Py_atomic_store_uintptr_relaxed(&r->ob_tid, to);
        return;
    }
    count_as_shared(r);
#else
    (void)r;
    (void)to;
#endif
}

/* fn(item), or fn(*item) with star. */
static PyObject *call_one(PyObject *fn, PyObject *item, int star) {
    if (!star) return PyObject_Vectorcall(fn, &item, 1, NULL);
    if (PyTuple_CheckExact(item))
        return PyObject_Vectorcall(fn, &PyTuple_GET_ITEM(item, 0), (size_t)PyTuple_GET_SIZE(item), NULL);
    PyObject *t = PySequence_Tuple(item);
    PyObject *r = t ? PyObject_Call(fn, t, NULL) : NULL;
    Py_XDECREF(t);
    return r;
}

/* Stores result r (a new reference) in out[j]: the caller's private list, never resized, a
 * plain store into a slot nobody else writes or reads while the map runs (mapblock.h); r
 * handed over to the thread `to` first. */
static inline void store(PyObject *out, Py_ssize_t j, PyObject *r, uintptr_t to) {
    hand_over(r, to);
    PyObject *old = PyList_GET_ITEM(out, j);
    PyList_SET_ITEM(out, j, r);
    Py_XDECREF(old);
}

/* A list's items, read a few hundred at a time under its critical section with one plain
 * reference each (PyList_GetItemRef per item re-checks the slot with two more atomics), then
 * called outside it. Returns how many items were done (fewer: an error, or the list shrank). */
#define LIST_RUN 256
static Py_ssize_t map_list(PyObject *fn, PyObject *src, Py_ssize_t src_start, PyObject *out,
                           Py_ssize_t out_start, Py_ssize_t count, int star, uintptr_t to) {
    PyObject *buf[LIST_RUN];
    Py_ssize_t done = 0;
    while (done < count) {
        Py_ssize_t want = count - done < LIST_RUN ? count - done : LIST_RUN, got = 0;
        Py_BEGIN_CRITICAL_SECTION(src);
        Py_ssize_t len = PyList_GET_SIZE(src);
        for (; got < want && src_start + done + got < len; got++)
            buf[got] = Py_NewRef(PyList_GET_ITEM(src, src_start + done + got));
        Py_END_CRITICAL_SECTION();
        for (Py_ssize_t j = 0; j < got; j++) {
            PyObject *r = call_one(fn, buf[j], star);
            Py_DECREF(buf[j]);
            if (!r) {
                for (Py_ssize_t k = j + 1; k < got; k++) Py_DECREF(buf[k]);
                return done;
            }
            store(out, out_start + done++, r, to);
        }
        if (got < want) break; /* the list shrank */
    }
    return done;
}

PyObject *tg_map_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "map_into(fn, src, src_start, out, out_start, count, star, owner)");
        return NULL;
    }
    PyObject *fn = args[0], *src = args[1], *out = args[3];
    Py_ssize_t src_start = PyLong_AsSsize_t(args[2]), out_start = PyLong_AsSsize_t(args[4]);
    Py_ssize_t count = PyLong_AsSsize_t(args[5]);
    int star = PyObject_IsTrue(args[6]);
    uintptr_t to = (uintptr_t)PyLong_AsUnsignedLongLong(args[7]);
    if (to == (uintptr_t)-1 && PyErr_Occurred()) return NULL;
    if ((src_start < 0 || out_start < 0 || count < 0 || star < 0) && PyErr_Occurred()) return NULL;
    if (!PyList_CheckExact(out) || src_start < 0 || out_start < 0 || count < 0 ||
        out_start + count > PyList_GET_SIZE(out)) {
        PyErr_SetString(PyExc_ValueError, "map_into: out must be a list with room for the block");
        return NULL;
    }
    Py_ssize_t done = 0;
    PyObject *err = NULL;
    small_range sr = {0, 0, 0, 0};
    if (PyRange_Check(src)) sr = range_of(src);
    if (PyList_CheckExact(src)) {
        done = map_list(fn, src, src_start, out, out_start, count, star, to);
    } else {
        for (; done < count; done++) {
            PyObject *item = next_item(src, src_start + done, &sr);
            if (!item) break;
            PyObject *r = call_one(fn, item, star);
            Py_DECREF(item);
            if (!r) break;
            store(out, out_start + done, r, to);
        }
    }
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL; /* KeyboardInterrupt... */
        err = PyErr_GetRaisedException();
    }
    PyObject *res = Py_BuildValue("(nO)", done, err ? err : Py_None);
    Py_XDECREF(err);
    return res;
}

PyObject *tg_map_owner(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromUnsignedLongLong((unsigned long long)_Py_ThreadId());
#else
    return PyLong_FromLong(0);
#endif
}

PyObject *tg_owned_here(PyObject *self, PyObject *obj) {
    (void)self;
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030D0000
    return PyBool_FromLong(!_Py_IsImmortal(obj) && _Py_IsOwnedByCurrentThread(obj));
#else
    (void)obj;
    Py_RETURN_NONE;
#endif
}
