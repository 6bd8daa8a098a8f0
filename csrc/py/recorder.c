/* Tracing: the observer the worker loop calls for every task it finishes while a trace is
 * open (tg_rec_begin in tgpy.h, tg_rec_end here). Each worker writes into its own recorder:
 * the numbers into a C buffer (csrc/trace.c; once the trace is closed, Recorder.records()
 * hands them to taskgraph/trace.py as bytes, unpacked with `struct`), the names and error
 * texts into the recorder's object table. No Python call per task, except
 * for tasks that failed (their error text) and the first task of each name.
 *
 * Attaching and detaching: under trace_mu, the module's list of live engines gets a recorder
 * per worker (Worker.rec, release store). A worker reads Worker.rec when a task starts and,
 * when it ends, raises Worker.rec_busy (seq_cst), checks that the same recorder is still
 * attached (seq_cst) and only then writes. trace_stop clears Worker.rec (seq_cst) and then
 * waits for rec_busy to drop: either the writer sees the cleared pointer and writes nothing,
 * or the closer sees the raised flag and waits for the write to end (Dekker's pattern with
 * seq_cst on both sides). So a recorder handed to Python is never written again, and a
 * task that started before the trace opened is never recorded with a bogus start. */
#include "tgpy.h"

#include <sched.h>

static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static PyObject *session;         /* list of the open trace's recorders, or NULL (trace_mu) */
static EngineObject *live_engines; /* engines whose workers may run (trace_mu) */

static RecorderObject *recorder_new(int sched_no, int worker) {
    RecorderObject *r = PyObject_New(RecorderObject, &TG_RecorderType);
    if (!r) return NULL;
    r->buf = tg_tracebuf_new();
    r->objects = PyList_New(0);
    r->keys = NULL;
    r->vals = NULL;
    r->cap = r->used = 0;
    r->last_name = NULL;
    r->last_index = -1;
    r->sched_no = sched_no;
    r->worker = worker;
    if (!r->buf || !r->objects) {
        Py_DECREF(r);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    return r;
}

static void recorder_dealloc(RecorderObject *r) {
    tg_tracebuf_free(r->buf);
    Py_XDECREF(r->objects);
    PyMem_Free(r->keys);
    PyMem_Free(r->vals);
    PyObject_Free(r);
}

/* Attaches a new recorder to every worker of e (trace_mu held, a trace open). */
static int attach(EngineObject *e) {
    for (int i = 0; i < e->nworkers; i++) {
        RecorderObject *r = recorder_new(e->number, i);
        if (!r) return -1;
        int ok = PyList_Append(session, (PyObject *)r) == 0;
        Py_DECREF(r); /* the session list keeps it */
        if (!ok) return -1;
        /* Release: pairs with the acquire in tg_rec_begin (the recorder is initialised). */
        atomic_store_explicit(&e->workers[i].rec, r, memory_order_release);
    }
    return 0;
}

int tg_trace_attach_engine(EngineObject *e) {
    tg_lock_detached(&trace_mu);
    e->live_prev = NULL;
    e->live_next = live_engines;
    if (live_engines) live_engines->live_prev = e;
    live_engines = e;
    e->live = 1;
    int r = session ? attach(e) : 0;
    pthread_mutex_unlock(&trace_mu);
    return r;
}

void tg_trace_engine_gone(EngineObject *e) {
    tg_lock_detached(&trace_mu);
    if (e->live) {
        if (e->live_prev) e->live_prev->live_next = e->live_next;
        else live_engines = e->live_next;
        if (e->live_next) e->live_next->live_prev = e->live_prev;
        e->live = 0;
    }
    pthread_mutex_unlock(&trace_mu);
}

PyObject *tg_trace_start(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    tg_lock_detached(&trace_mu);
    if (session) {
        pthread_mutex_unlock(&trace_mu);
        PyErr_SetString(PyExc_RuntimeError, "taskgraph.trace() blocks cannot be nested or overlap");
        return NULL;
    }
    session = PyList_New(0);
    int err = session ? 0 : -1;
    for (EngineObject *e = live_engines; e && !err; e = e->live_next) err = attach(e);
    pthread_mutex_unlock(&trace_mu);
    if (err) {
        PyObject *done = tg_trace_stop(NULL, NULL);
        Py_XDECREF(done);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *tg_trace_stop(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    tg_lock_detached(&trace_mu);
    PyObject *out = session;
    session = NULL;
    for (EngineObject *e = live_engines; e; e = e->live_next)
        for (int i = 0; i < e->nworkers; i++)
            /* seq_cst: the closer's half of the hazard protocol (see the top of this file). */
            atomic_store_explicit(&e->workers[i].rec, NULL, memory_order_seq_cst);
    Py_BEGIN_ALLOW_THREADS /* a writer may allocate (and so wait for a collection): never block it */
    for (EngineObject *e = live_engines; e; e = e->live_next)
        for (int i = 0; i < e->nworkers; i++)
            while (atomic_load_explicit(&e->workers[i].rec_busy, memory_order_seq_cst)) sched_yield();
    Py_END_ALLOW_THREADS
    pthread_mutex_unlock(&trace_mu);
    if (!out) {
        PyErr_SetString(PyExc_RuntimeError, "no taskgraph trace is open");
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------------------- writing a record */

/* Index of obj in r's object table, appending it the first time (by identity). */
static int32_t index_of_slow(RecorderObject *r, PyObject *obj) {
    if (r->used * 2 >= r->cap) { /* grow the open-addressing table */
        int64_t cap = r->cap ? r->cap * 2 : 64;
        PyObject **nk = PyMem_Calloc((size_t)cap, sizeof(PyObject *));
        int32_t *nv = PyMem_Calloc((size_t)cap, sizeof(int32_t));
        if (!nk || !nv) {
            PyMem_Free(nk);
            PyMem_Free(nv);
            return -1;
        }
        for (int64_t i = 0; i < r->cap; i++) {
            if (!r->keys[i]) continue;
            uint64_t h = ((uintptr_t)r->keys[i] >> 4) * 0x9e3779b97f4a7c15ULL;
            int64_t j = (int64_t)(h & (uint64_t)(cap - 1));
            while (nk[j]) j = (j + 1) & (cap - 1);
            nk[j] = r->keys[i];
            nv[j] = r->vals[i];
        }
        PyMem_Free(r->keys);
        PyMem_Free(r->vals);
        r->keys = nk;
        r->vals = nv;
        r->cap = cap;
    }
    uint64_t h = ((uintptr_t)obj >> 4) * 0x9e3779b97f4a7c15ULL;
    int64_t j = (int64_t)(h & (uint64_t)(r->cap - 1));
    while (r->keys[j] && r->keys[j] != obj) j = (j + 1) & (r->cap - 1);
    if (!r->keys[j]) {
        Py_ssize_t idx = PyList_GET_SIZE(r->objects);
        if (PyList_Append(r->objects, obj) < 0) { /* the list keeps obj alive: keys stay valid */
            PyErr_Clear();
            return -1;
        }
        r->keys[j] = obj;
        r->vals[j] = (int32_t)idx;
        r->used++;
    }
    r->last_name = obj;
    r->last_index = r->vals[j];
    return r->last_index;
}

static inline int32_t index_of(RecorderObject *r, PyObject *obj) {
    return obj == r->last_name ? r->last_index : index_of_slow(r, obj);
}

/* (type name, message) of an exception, or NULL (no error raised). Called with no error
 * set (the runner has taken the task's exception into its node). */
static PyObject *error_pair(PyObject *exc) {
    PyObject *msg = PyObject_Str(exc);
    if (!msg) {
        PyErr_Clear();
        msg = PyUnicode_FromString("<unprintable>");
    }
    PyObject *pair = msg ? Py_BuildValue("(sN)", Py_TYPE(exc)->tp_name, msg) : NULL;
    PyErr_Clear();
    return pair;
}

/* Writes n's record (the trace's recorder rec, still attached to W) from t0 to t1. */
static void write_record(Worker *W, RecorderObject *rec, NodeObject *n, int final, int64_t t0,
                         int64_t t1, int64_t own, int attempt);

void tg_rec_attempt(Worker *W, tg_rec_start *s, NodeObject *n, int attempt) {
    int64_t t1 = tg_clock_ticks(), g1 = tg_trace_gc_ticks();
    int top = W->nframes - 1;
    tg_frame *f = top >= 0 && top < W->capframes ? &W->frames[top] : NULL;
    if (s->rec) {
        int64_t own = t1 - s->t0 - (f ? f->join + (g1 - s->g0) - f->join_gc : 0);
        write_record(W, s->rec, n, TG_FAILED, s->t0, t1, own > 0 ? own : 0, attempt);
    }
    /* The next attempt is timed from here; the joins so far belonged to this one. The time
     * spent recording is the task's (it runs again right after). */
    if (f) f->join = f->join_gc = 0;
    s->t0 = tg_clock_ticks();
    s->g0 = tg_trace_gc_ticks();
}

void tg_rec_end(Worker *W, const tg_rec_start *s, NodeObject *n, int final, const tg_frame *f) {
    RecorderObject *rec = s->rec;
    int64_t t1 = tg_clock_ticks(), g1 = tg_trace_gc_ticks();
    int below = W->nframes - 1; /* the task we ran nested in (inside its join), if any */
    if (below >= 0 && below < W->capframes && W->frames[below].traced) {
        W->frames[below].join += t1 - s->t0;
        W->frames[below].join_gc += g1 - s->g0;
    }
    if (!rec) return;
    /* Own time: minus the joins (and the collections inside them), minus the collections
     * outside joins. */
    int64_t own = t1 - s->t0 - (f->join + (g1 - s->g0) - f->join_gc);
    if (tg_fault(TG_FAULT_RECORD)) { /* as if the observer had failed: an internal failure */
        PyObject *key = tg_node_key(n);
        PyObject *reason = key ? PyUnicode_FromFormat("internal error on worker %d of %U: the "
                                                      "trace recorder failed on task %U", W->index,
                                                      W->engine->label, key) : NULL;
        if (reason) tg_engine_break(W->engine, reason);
        PyErr_Clear();
        Py_XDECREF(key);
        Py_XDECREF(reason);
        return;
    }
    write_record(W, rec, n, final, s->t0, t1, own > 0 ? own : 0, s->attempt);
}

static void write_record(Worker *W, RecorderObject *rec, NodeObject *n, int final, int64_t t0,
                         int64_t t1, int64_t own, int attempt) {
    PyObject *err = final == TG_DONE ? NULL : error_pair(n->value); /* before the hazard */
    /* seq_cst: the writer's half of the hazard protocol (see the top of this file). */
    atomic_store_explicit(&W->rec_busy, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&W->rec, memory_order_seq_cst) == rec) {
        tg_trace_rec *r = tg_tracebuf_append(rec->buf);
        if (r) { /* every field written: the room is not zeroed */
            r->id = n->t.id;
            r->parent = n->parent ? n->parent->t.id : 0;
            r->start = t0;
            r->end = t1;
            r->own = own;
            r->deps_off = 0;
            r->ndeps = 0;
            r->worker = W->index;
            r->stolen = n->t.stolen;
            r->state = (uint8_t)final;
            r->attempt = (uint16_t)(attempt < 0xFFFF ? attempt : 0xFFFF);
            r->name = index_of(rec, n->name);
            r->error = err ? index_of(rec, err) : -1;
            Py_ssize_t nd = n->deps ? PyTuple_GET_SIZE(n->deps) : 0;
            uint64_t small[16], *ids = nd <= 16 ? small : PyMem_Malloc(sizeof(uint64_t) * (size_t)nd);
            if (ids) {
                for (Py_ssize_t i = 0; i < nd; i++)
                    ids[i] = ((NodeObject *)PyTuple_GET_ITEM(n->deps, i))->t.id;
                if (nd && tg_tracebuf_add_ids(rec->buf, ids, (uint32_t)nd, &r->deps_off) == 0)
                    r->ndeps = (uint32_t)nd;
                if (ids != small) PyMem_Free(ids);
            }
        }
    }
    /* Release: the closer's seq_cst load that sees 0 also sees the record. */
    atomic_store_explicit(&W->rec_busy, 0, memory_order_release);
    Py_XDECREF(err);
}

/* ---------------------------------------------------------------- the type */

/* Recorders reach Python only through trace_stop, after they were detached and their
 * writers' hazard flags dropped (the top of this file): nothing writes their buffers any more,
 * so reading them needs no lock. */

/* records(): every record, as bytes (count * TRACE_REC_SIZE, layout TRACE_REC_FORMAT). */
static PyObject *rec_records(RecorderObject *r, PyObject *unused) {
    (void)unused;
    int64_t n = tg_tracebuf_count(r->buf);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * (int64_t)sizeof(tg_trace_rec)));
    if (!out) return NULL;
    int64_t got = tg_tracebuf_copy(r->buf, 0, n, PyBytes_AS_STRING(out));
    if (got != n) { /* cannot happen: nothing appends any more */
        Py_DECREF(out);
        PyErr_Format(PyExc_RuntimeError, "trace buffer changed while read (%lld of %lld records)",
                     (long long)got, (long long)n);
        return NULL;
    }
    return out;
}

/* ids(): the dependencies' key numbers (a record's are ids[deps_off:deps_off + ndeps]). */
static PyObject *rec_ids(RecorderObject *r, PyObject *unused) {
    (void)unused;
    int64_t n = tg_tracebuf_nids(r->buf);
    uint64_t *ids = PyMem_Malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
    if (!ids) return PyErr_NoMemory();
    tg_tracebuf_copy_ids(r->buf, ids);
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; out && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(ids[i]);
        if (!v) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, v);
    }
    PyMem_Free(ids);
    return out;
}

static PyObject *rec_get_dropped(RecorderObject *r, void *c) {
    (void)c;
    return PyLong_FromLongLong(tg_tracebuf_dropped(r->buf));
}
static PyObject *rec_get_objects(RecorderObject *r, void *c) {
    (void)c;
    return PyList_GetSlice(r->objects, 0, PY_SSIZE_T_MAX);
}

static PyMethodDef rec_methods[] = {
    {"records", (PyCFunction)rec_records, METH_NOARGS,
     "records() -> bytes: every record, TRACE_REC_SIZE bytes each, in the layout "
     "TRACE_REC_FORMAT (a struct format) with the fields TRACE_REC_FIELDS."},
    {"ids", (PyCFunction)rec_ids, METH_NOARGS,
     "ids() -> list of int: the dependencies' key numbers; a record's are "
     "ids[deps_off:deps_off + ndeps]."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rec_getset[] = {
    {"dropped", (getter)rec_get_dropped, NULL,
     "Records lost because memory ran out while tracing.", NULL},
    {"objects", (getter)rec_get_objects, NULL,
     "The object table: names, and (type name, message) pairs of errors.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef rec_members[] = {
    {"scheduler", T_INT, offsetof(RecorderObject, sched_no), READONLY, "Scheduler.number."},
    {"worker", T_INT, offsetof(RecorderObject, worker), READONLY, "Worker index."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject TG_RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph._core.Recorder",
    .tp_basicsize = sizeof(RecorderObject),
    .tp_dealloc = (destructor)recorder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One worker's records for one trace (private; read by taskgraph.trace).",
    .tp_methods = rec_methods,
    .tp_getset = rec_getset,
    .tp_members = rec_members,
};

/* ---------------------------------------------------------------- the records' clock */

static PyObject *pair(void (*fn)(int64_t *, int64_t *)) {
    int64_t ticks, ns;
    fn(&ticks, &ns);
    return Py_BuildValue("(LL)", (long long)ticks, (long long)ns);
}

PyObject *tg_py_clock_origin(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    return pair(tg_clock_origin);
}

PyObject *tg_py_clock_pair(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    return pair(tg_clock_pair);
}

PyObject *tg_py_clock_tsc(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    return PyBool_FromLong(tg_clock_tsc());
}

PyObject *tg_py_trace_gc_phase(PyObject *mod, PyObject *starting) {
    (void)mod;
    int on = PyObject_IsTrue(starting);
    if (on < 0) return NULL;
    tg_trace_gc_phase(on);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- fork */

void tg_trace_after_fork_child(void) {
    /* The only thread of the child: the parent's threads are gone, and one of them may have
     * held trace_mu at the fork. Every engine alive now was made before the fork. */
    pthread_mutex_init(&trace_mu, NULL);
    for (EngineObject *e = live_engines, *next; e; e = next) {
        next = e->live_next;
        e->live_prev = e->live_next = NULL;
        e->live = 0;
        for (int i = 0; i < e->nworkers; i++)
            /* Relaxed: one thread; no worker of this engine runs in the child. */
            atomic_store_explicit(&e->workers[i].rec, NULL, memory_order_relaxed);
        tg_engine_mark_forked(e);
    }
    live_engines = NULL;
}
