/* Tracing: the observer the worker loop calls around every task while a trace is open
 * (tg_rec_begin and tg_rec_end in recorder.h, tg_rec_end_framed here) and in its idle
 * hooks. Each worker writes into its own recorder: the numbers into a C buffer (csrc/trace.c;
 * Recorder.records() hands them to taskgraph/trace/record.py as bytes once the trace is
 * closed), the names and error texts into its object table. No Python call per task but for
 * failed tasks and each name's first task.
 *
 * The observer's state is its own: one tg_watch per worker (the attached recorder, the hazard
 * flag, the own-time frames), one tg_observer per engine, on the module's list of live
 * observers. When nothing is traced, a task costs the worker loop one acquire load here.
 *
 * Attaching and detaching: under trace_mu, every live observer gets a recorder per watch
 * (tg_watch.rec, release store). A worker reads its watch's rec when a task starts and, when
 * it ends, raises the watch's busy flag, checks that the same recorder is still attached and
 * only then writes. trace_stop clears tg_watch.rec and then waits for busy to drop: either the
 * writer sees the cleared pointer and writes nothing, or the closer sees the raised flag and
 * waits for the write to end (Dekker's pattern). Its store-then-load needs a full barrier on
 * both sides; the writer's runs once per task and the closer's once per trace, so the barrier
 * is put on the closer's side only where Linux can do that (asymmetric fences, as userspace
 * RCU does): the writer orders its store and load for the compiler only, and the closer's
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) makes every thread of the process execute a
 * full barrier before it reads the flags. A writer whose load comes after its barrier sees
 * the cleared pointer (stored before the membarrier); one whose load came before it had its
 * flag's store made visible by that barrier, and the closer sees the flag. Without
 * membarrier both sides are seq_cst (an xchg per record on x86). So a recorder handed to
 * Python is never written again, and a task that started before the trace opened is never
 * recorded with a bogus start. */
#include "recorder.h"

#include <sched.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
/* membarrier(2)'s commands, Linux's ABI (linux/membarrier.h has them in an enum, out of #if's
 * reach): PRIVATE_EXPEDITED since Linux 4.14. */
#define TG_MB_QUERY 0
#define TG_MB_PRIVATE_EXPEDITED (1 << 3)
#define TG_MB_REGISTER_PRIVATE_EXPEDITED (1 << 4)

/* 1: the closer's membarrier stands in for the writers' barrier (above); 0: seq_cst on both
 * sides. Decided at the first trace_start (under trace_mu, before any recorder is attached, so
 * a writer that sees a recorder sees the decision: the attach's release store), then fixed. */
static _Atomic int asym_fences = -1;

static int membarrier_cmd(int cmd) {
#if defined(__linux__) && defined(__NR_membarrier)
    return (int)syscall(__NR_membarrier, cmd, 0, 0);
#else
    return (void)cmd, -1;
#endif
}

/* The closer's barrier for every thread of the process: 1 if done. */
static int expedited_barrier(void) {
    if (membarrier_cmd(TG_MB_PRIVATE_EXPEDITED) == 0) return 1;
    return membarrier_cmd(TG_MB_REGISTER_PRIVATE_EXPEDITED) == 0 &&
           membarrier_cmd(TG_MB_PRIVATE_EXPEDITED) == 0;
}

/* asym_fences, decided once (trace_mu held). */
static void decide_fences(void) {
    if (atomic_load_explicit(&asym_fences, memory_order_relaxed) >= 0) return;
    int q = membarrier_cmd(TG_MB_QUERY);
    int ok = q > 0 && (q & TG_MB_PRIVATE_EXPEDITED) &&
             membarrier_cmd(TG_MB_REGISTER_PRIVATE_EXPEDITED) == 0;
    /* Relaxed: published to the writers by the attach's release store (above). */
    atomic_store_explicit(&asym_fences, ok, memory_order_relaxed);
}

PyObject *tg_py_trace_fences(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused; /* relaxed: a report of the decision taken once (above) */
    return PyLong_FromLong(atomic_load_explicit(&asym_fences, memory_order_relaxed));
}

static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static PyObject *session;         /* list of the open trace's recorders, or NULL (trace_mu) */
static tg_observer *live_observers; /* of engines whose workers may run (trace_mu) */

struct tg_observer {
    tg_observer *prev, *next; /* live_observers (trace_mu) */
    int live;                 /* on the list (trace_mu) */
    int sched_no, n;
    int nworkers;             /* watches 0..nworkers-1 are workers', the rest spares' */
    tg_watch *w;              /* n watches, one per worker or spare slot */
    tg_feednames *feed_names; /* the live feeds' name table, made with the first feed */
};

static RecorderObject *recorder_new(int sched_no, int worker, int spare) {
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
    r->spare = spare;
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

/* Taking trace_mu where recorders are made under it (trace_start, a new observer while a trace
 * is open): with the cyclic collector off until unlock_attach. On CPython 3.11 an allocation
 * may run a collection, whose finalizers may free a scheduler whose engine then unregisters
 * its observer under trace_mu, on this very thread: a deadlock. Returns what unlock_attach
 * needs (whether the collector was on). */
static int lock_attach(void) {
    int gc_was = PyGC_Disable();
    tg_lock_detached(&trace_mu);
    return gc_was;
}

static void unlock_attach(int gc_was) {
    pthread_mutex_unlock(&trace_mu);
    if (gc_was) PyGC_Enable();
}

/* Attaches a new recorder to every watch of o (trace_mu held, a trace open). */
static int attach(tg_observer *o) {
    for (int i = 0; i < o->n; i++) {
        RecorderObject *r = recorder_new(o->sched_no, i, i >= o->nworkers);
        if (!r) return -1;
        int ok = PyList_Append(session, (PyObject *)r) == 0;
        Py_DECREF(r); /* the session list keeps it */
        if (!ok) return -1;
        /* Release: pairs with the acquire in tg_rec_begin (the recorder is initialised). */
        atomic_store_explicit(&o->w[i].rec, r, memory_order_release);
    }
    return 0;
}

tg_observer *tg_observer_new(int sched_no, int nworkers, int nslots) {
    tg_observer *o = PyMem_RawCalloc(1, sizeof *o);
    size_t bytes = (sizeof(tg_watch) * (size_t)nslots + 63) / 64 * 64;
    tg_watch *w = o ? aligned_alloc(64, bytes) : NULL;
    if (!w) {
        PyMem_RawFree(o);
        PyErr_NoMemory();
        return NULL;
    }
    memset(w, 0, bytes);
    for (int i = 0; i < nslots; i++) {
        atomic_init(&w[i].rec, NULL);
        atomic_init(&w[i].busy, 0);
        atomic_init(&w[i].feed, NULL);
        w[i].index = i;
    }
    o->w = w;
    o->n = nslots;
    o->nworkers = nworkers;
    o->sched_no = sched_no;
    int gc_was = lock_attach();
    o->prev = NULL;
    o->next = live_observers;
    if (live_observers) live_observers->prev = o;
    live_observers = o;
    o->live = 1;
    int r = session ? attach(o) : 0;
    unlock_attach(gc_was);
    if (r < 0) {
        tg_observer_free(o, 0);
        return NULL;
    }
    return o;
}

void tg_observer_detach(tg_observer *o) {
    if (!o) return;
    tg_lock_detached(&trace_mu);
    if (o->live) {
        if (o->prev) o->prev->next = o->next;
        else live_observers = o->next;
        if (o->next) o->next->prev = o->prev;
        o->live = 0;
    }
    pthread_mutex_unlock(&trace_mu);
}

void tg_observer_free(tg_observer *o, int forked) {
    if (!o) return;
    if (!forked) tg_observer_detach(o);
    for (int i = 0; i < o->n; i++) {
        PyMem_RawFree(o->w[i].frames);
        tg_feedw_free(o->w[i].feed_mem);
    }
    tg_feednames_free(o->feed_names);
    free(o->w);
    PyMem_RawFree(o);
}

tg_watch *tg_observer_watch(tg_observer *o, int i) { return &o->w[i]; }

tg_feedw *tg_observer_feed(tg_observer *o, int i) {
    if (!o->feed_names && !(o->feed_names = tg_feednames_new())) return NULL;
    if (!o->w[i].feed_mem) o->w[i].feed_mem = tg_feedw_new(o->feed_names);
    return o->w[i].feed_mem;
}

PyObject *tg_trace_start(PyObject *mod, PyObject *unused) {
    (void)mod; (void)unused;
    int gc_was = lock_attach();
    if (session) {
        unlock_attach(gc_was);
        PyErr_SetString(PyExc_RuntimeError, "taskgraph.trace() blocks cannot be nested or overlap");
        return NULL;
    }
    decide_fences();
    tg_cpu_reads_decide();
    session = PyList_New(0);
    int err = session ? 0 : -1;
    for (tg_observer *o = live_observers; o && !err; o = o->next) err = attach(o);
    unlock_attach(gc_was);
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
    for (tg_observer *o = live_observers; o; o = o->next)
        for (int i = 0; i < o->n; i++)
            /* seq_cst: the closer's store of the hazard protocol (the top of this file), before
             * its barrier: pairs with the writer's load of rec in write_record. */
            atomic_store_explicit(&o->w[i].rec, NULL, memory_order_seq_cst);
    Py_BEGIN_ALLOW_THREADS /* a writer may allocate (and so wait for a collection): never block it */
    /* The writers' half of the barrier, run for them (asymmetric fences, the top of this
     * file): pairs with the compiler barrier between the writer's store of busy and its load
     * of rec. A process that registered does not see it fail (the registration carries over
     * fork() too); if it did (a kernel that drops it), registering again is tried once, and
     * then, since the writers cannot be switched to the seq_cst fallback now, the process
     * stops rather than hand Python a recorder that may still be written. */
    if (atomic_load_explicit(&asym_fences, memory_order_relaxed) == 1 && !expedited_barrier())
        Py_FatalError("taskgraph: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after it was registered");
    for (tg_observer *o = live_observers; o; o = o->next)
        for (int i = 0; i < o->n; i++)
            /* seq_cst: the closer's load of the hazard protocol; it also pairs with the
             * writer's release store of 0 (the record is complete). */
            while (atomic_load_explicit(&o->w[i].busy, memory_order_seq_cst)) sched_yield();
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

/* ---------------------------------------------------------------- frames and hooks */

void tg_watch_push(tg_watch *w, int traced) {
    if (w->nframes == w->capframes) {
        int cap = w->capframes ? w->capframes * 2 : 64;
        tg_frame *nf = PyMem_RawRealloc(w->frames, sizeof(tg_frame) * (size_t)cap);
        if (nf) {
            w->frames = nf;
            w->capframes = cap;
        }
    }
    if (w->nframes < w->capframes) w->frames[w->nframes] = (tg_frame){0, 0, traced};
    w->nframes++;
}

static tg_frame pop_frame(tg_watch *w) {
    w->nframes--;
    return w->nframes < w->capframes ? w->frames[w->nframes] : (tg_frame){0, 0, 0};
}

/* The task running on w's worker (innermost), if it is being traced: its joins are timed. */
static inline tg_frame *traced_frame(tg_watch *w) {
    int top = w->nframes - 1;
    return top >= 0 && top < w->capframes && w->frames[top].traced ? &w->frames[top] : NULL;
}

void tg_watch_idle_begin(tg_watch *w) {
    /* Acquire: pairs with the release store that attaches a feed (csrc/py/feed.c). */
    tg_feedw *f = atomic_load_explicit(&w->feed, memory_order_acquire);
    w->fresh = 0;
    if (f) tg_feed_idle_begin(f);
    if (traced_frame(w)) { /* idle inside a traced task's join: that is join time */
        w->idle_t0 = tg_clock_ticks();
        w->idle_g0 = tg_trace_gc_ticks();
    }
}

void tg_watch_idle_end(tg_watch *w) {
    /* Acquire: as in tg_watch_idle_begin. A feed attached meanwhile finds no idle start. */
    tg_feedw *feed = atomic_load_explicit(&w->feed, memory_order_acquire);
    if (feed) w->fresh = tg_feed_idle_end(feed);
    tg_frame *f = traced_frame(w);
    if (f) {
        f->join += tg_clock_ticks() - w->idle_t0;
        f->join_gc += tg_trace_gc_ticks() - w->idle_g0;
    }
}

void tg_watch_block_begin(tg_watch *w) {
    w->block_t0 = traced_frame(w) ? tg_clock_ticks() : 0;
}

void tg_watch_block_end(tg_watch *w) {
    tg_frame *f = traced_frame(w);
    if (f && w->block_t0) f->blocked += tg_clock_ticks() - w->block_t0;
    w->block_t0 = 0;
}

/* ---------------------------------------------------------------- writing a record */

/* Writes n's record (the trace's recorder rec, still attached to w) from t0 to t1; with its
 * CPU time (ns, -1 if not measured) and its ticks in declared waits when either is known. */
static void write_record(tg_watch *w, RecorderObject *rec, NodeObject *n, int final, int64_t t0,
                         int64_t t1, int64_t own, int attempt, int64_t cpu, int64_t blocked);

void tg_rec_attempt(tg_watch *w, tg_rec_start *s, NodeObject *n, int attempt) {
    int64_t t1 = tg_clock_ticks(), g1 = tg_trace_gc_ticks();
    int top = w->nframes - 1;
    tg_frame *f = s->framed && top >= 0 && top < w->capframes ? &w->frames[top] : NULL;
    if (s->rec) {
        int64_t own = t1 - s->t0 - (f ? f->join + (g1 - s->g0) - f->join_gc : 0);
        write_record(w, s->rec, n, TG_FAILED, s->t0, t1, own > 0 ? own : 0, attempt, -1,
                     f ? f->blocked : 0);
    }
    /* The next attempt is timed from here; the joins so far belonged to this one. The time
     * spent recording is the task's (it runs again right after). */
    if (f) f->join = f->join_gc = f->blocked = 0;
    s->t0 = tg_clock_ticks();
    s->g0 = tg_trace_gc_ticks();
}

int tg_rec_end_framed(tg_watch *w, const tg_rec_start *s, NodeObject *n, int final) {
    tg_frame own_frame = pop_frame(w), *f = &own_frame;
    RecorderObject *rec = s->rec;
    int64_t t1 = tg_clock_ticks(), g1 = tg_trace_gc_ticks();
    int below = w->nframes - 1; /* the task we ran nested in (inside its join), if any */
    if (below >= 0 && below < w->capframes && w->frames[below].traced) {
        w->frames[below].join += t1 - s->t0;
        w->frames[below].join_gc += g1 - s->g0;
    }
    if (s->feed) tg_feed_end(s->feed, n, final, s->t0, t1, s->feed_name);
    if (!rec) return 0;
    /* Own time: minus the joins (and the collections inside them), minus the collections
     * outside joins. */
    int64_t own = t1 - s->t0 - (f->join + (g1 - s->g0) - f->join_gc);
    if (tg_fault(TG_FAULT_RECORD)) return -1; /* as if the observer had failed */
    int64_t cpu = tg_cpu_of(&w->cpu, rec, f->join != 0, s->t0, t1);
    write_record(w, rec, n, final, s->t0, t1, own > 0 ? own : 0, s->attempt, cpu, f->blocked);
    return 0;
}

/* Record r's CPU time and declared waits: two numbers right after its dependencies' key
 * numbers (the same worker appends both, one after the other), and the flag that says so. */
static __attribute__((noinline)) void add_waits(RecorderObject *rec, tg_trace_rec *r, int64_t cpu,
                                                int64_t blocked) {
    uint64_t two[2] = {(uint64_t)cpu, (uint64_t)blocked};
    uint32_t off;
    if (tg_tracebuf_add_ids(rec->buf, two, 2, &off) != 0) return; /* dropped: not measured */
    if (r->ndeps == 0) r->deps_off = off;
    else if (off != r->deps_off + r->ndeps) return;
    r->flags |= TG_REC_WAITS;
}

static void write_record(tg_watch *w, RecorderObject *rec, NodeObject *n, int final, int64_t t0,
                         int64_t t1, int64_t own, int attempt, int64_t cpu, int64_t blocked) {
    PyObject *err = final == TG_DONE ? NULL : error_pair(n->value); /* before the hazard */
    /* The writer's half of the hazard protocol (the top of this file): store busy, barrier, load
     * rec. With asymmetric fences the barrier is the closer's membarrier and here only the
     * compiler's (a relaxed store; relaxed read of the decision, published by the attach);
     * else a seq_cst store (an xchg on x86). Both pair with the closer's store of rec and its
     * load of busy in tg_trace_stop. */
    if (atomic_load_explicit(&asym_fences, memory_order_relaxed) == 1) {
        atomic_store_explicit(&w->busy, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
    } else {
        atomic_store_explicit(&w->busy, 1, memory_order_seq_cst);
    }
    if (atomic_load_explicit(&w->rec, memory_order_seq_cst) == rec) {
        tg_trace_rec *r = tg_tracebuf_append(rec->buf);
        if (r) { /* every field written: the room is not zeroed */
            r->id = n->t.id;
            r->parent = n->parent ? n->parent->t.id : 0;
            r->start = t0;
            r->end = t1;
            r->own = own;
            r->deps_off = 0;
            r->ndeps = 0;
            r->worker = w->index;
            r->flags = n->t.stolen ? TG_REC_STOLEN : 0;
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
            if (cpu >= 0 || blocked > 0) add_waits(rec, r, cpu, blocked);
        }
    }
    /* Release: the closer's seq_cst load that sees 0 also sees the record. */
    atomic_store_explicit(&w->busy, 0, memory_order_release);
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
    {"spare", T_INT, offsetof(RecorderObject, spare), READONLY,
     "1 for a spare slot's recorder (workers + spares: Scheduler.spares), else 0."},
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

/* ---------------------------------------------------------------- fork */

void tg_trace_after_fork_child(void) {
    /* The only thread of the child: the parent's threads are gone, and one of them may have
     * held trace_mu at the fork. Every observer alive now belongs to an engine made before the
     * fork, whose workers never run here. */
    pthread_mutex_init(&trace_mu, NULL);
    for (tg_observer *o = live_observers, *next; o; o = next) {
        next = o->next;
        o->prev = o->next = NULL;
        o->live = 0;
        for (int i = 0; i < o->n; i++) {
            /* Relaxed: one thread; no worker of this engine runs in the child. */
            atomic_store_explicit(&o->w[i].rec, NULL, memory_order_relaxed);
            atomic_store_explicit(&o->w[i].feed, NULL, memory_order_relaxed);
        }
    }
    live_observers = NULL;
}
