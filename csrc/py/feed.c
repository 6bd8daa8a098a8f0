/* LiveFeed: see feed.h. The records come out of each worker's ring (csrc/live.h) in chunks
 * and are summed up here, so that the dashboard's Python code handles a bounded amount per
 * drain however many tasks ran: a task at least one time bucket long is listed on its own
 * (it is at least a pixel wide on the page); shorter ones are summed per worker and bucket
 * (how many, busy time, the most frequent name, stolen and failed ones). */
#include "feed.h"

#include <stdlib.h>
#include <string.h>

#define BUCKETS 256    /* per worker: buckets open in one drain (direct-mapped) */
#define READ_CHUNK 4096
#define TG_FEED_DROPPED (-2) /* an item's name: records dropped there (the ring was full) */

typedef struct {
    int64_t b, count, busy, stolen, failed, votes; /* busy: in ticks (in us once emitted) */
    int32_t cand; /* the most frequent name so far (Boyer-Moore majority vote) */
} bucket;

typedef struct {
    PyObject_HEAD
    EngineObject *engine; /* strong: its observer, and so the workers' feeds, outlive us */
    pthread_mutex_t mu;   /* one reader at a time (drain, sample, names) */
    int n, attached;      /* n: slots, the workers' and then the spares' (engine.h) */
    int nworkers;         /* the first nworkers slots are the workers' */
    tg_feedw **f;         /* the slots' feeds (owned by the engine's observer) */
    int64_t *dropped0;    /* per worker: its ring's drop count when attached */
    int64_t *dropped_seen; /* per worker: its drop count at the last drain */
    int64_t *last_end;    /* per worker: the end (us) of the last record drained */
    int64_t *counts0;     /* [TG_FEED_KINDS * name + k]: the counts summed when attached */
    tg_live_rec *buf;
    bucket *bk;           /* n * BUCKETS */
} LiveFeedObject;

/* Attaching and detaching, process-wide: at most one feed per engine. */
static pthread_mutex_t attach_mu = PTHREAD_MUTEX_INITIALIZER;

static void detach(LiveFeedObject *self) {
    tg_lock_detached(&attach_mu);
    if (self->attached) {
        for (int i = 0; i < self->n; i++)
            /* Relaxed: a worker that still sees the feed writes into memory that lives on
             * (tg_observer_feed); one that sees NULL writes nothing. */
            atomic_store_explicit(&tg_observer_watch(self->engine->obs, i)->feed, NULL, memory_order_relaxed);
        self->attached = 0;
    }
    pthread_mutex_unlock(&attach_mu);
}

static PyObject *feed_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    EngineObject *e;
    static char *names[] = {"engine", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!:LiveFeed", names, &TG_EngineType, &e)) return NULL;
    LiveFeedObject *self = (LiveFeedObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    pthread_mutex_init(&self->mu, NULL);
    self->engine = (EngineObject *)Py_NewRef(e);
    /* Every slot: a spare (Scheduler(spares=)) runs tasks too. A spare slot's ring is
     * memory the kernel maps only once it is written. */
    self->n = e->nslots;
    self->nworkers = e->nworkers;
    self->f = PyMem_RawCalloc((size_t)self->n, sizeof(tg_feedw *));
    self->buf = PyMem_RawMalloc(sizeof(tg_live_rec) * READ_CHUNK);
    self->bk = PyMem_RawCalloc((size_t)self->n * BUCKETS, sizeof(bucket));
    self->dropped0 = PyMem_RawCalloc((size_t)self->n, sizeof(int64_t));
    self->dropped_seen = PyMem_RawCalloc((size_t)self->n, sizeof(int64_t));
    self->last_end = PyMem_RawCalloc((size_t)self->n, sizeof(int64_t));
    self->counts0 = PyMem_RawCalloc(TG_FEED_KINDS * (size_t)TG_FEED_NAMES, sizeof(int64_t));
    if (!self->f || !self->buf || !self->bk || !self->dropped0 || !self->counts0 ||
        !self->dropped_seen || !self->last_end) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    tg_lock_detached(&attach_mu);
    int taken = 0;
    for (int i = 0; i < self->n && !taken; i++)
        /* Relaxed: written under attach_mu only. */
        taken = atomic_load_explicit(&tg_observer_watch(e->obs, i)->feed, memory_order_relaxed) != NULL;
    int err = taken;
    for (int i = 0; i < self->n && !err; i++) {
        self->f[i] = tg_observer_feed(e->obs, i);
        err = self->f[i] == NULL;
    }
    if (!err) {
        for (int i = 0; i < self->n; i++) {
            tg_live_skip(self->f[i]->live); /* what an earlier feed left is not ours */
            self->dropped0[i] = self->dropped_seen[i] = tg_live_dropped(self->f[i]->live);
            for (int k = 0; k < TG_FEED_KINDS * TG_FEED_NAMES; k++)
                /* Relaxed: a count (livefeed.h); one that moves meanwhile is counted after. */
                self->counts0[k] += atomic_load_explicit(&self->f[i]->counts[k], memory_order_relaxed);
            /* Release: pairs with the workers' acquire loads (tg_rec_begin, the idle hooks):
             * the feed's memory is initialised before they see it. */
            atomic_store_explicit(&tg_observer_watch(e->obs, i)->feed, self->f[i], memory_order_release);
        }
        for (int k = 0; k < TG_FEED_NAMES; k++) /* Relaxed: as above. */
            self->counts0[TG_FEED_KINDS * k + TG_FEED_SUBMITTED] +=
                atomic_load_explicit(&self->f[0]->names->outside[k], memory_order_relaxed);
        self->attached = 1;
    }
    pthread_mutex_unlock(&attach_mu);
    if (err) {
        if (taken)
            PyErr_Format(PyExc_RuntimeError, "%U has a live feed already (one dashboard per "
                         "scheduler at a time)", e->label);
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void feed_dealloc(LiveFeedObject *self) {
    if (self->engine) detach(self);
    Py_XDECREF(self->engine);
    PyMem_RawFree(self->f);
    PyMem_RawFree(self->buf);
    PyMem_RawFree(self->bk);
    PyMem_RawFree(self->counts0);
    PyMem_RawFree(self->dropped0);
    PyMem_RawFree(self->dropped_seen);
    PyMem_RawFree(self->last_end);
    pthread_mutex_destroy(&self->mu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *feed_close(LiveFeedObject *self, PyObject *unused) {
    (void)unused;
    detach(self);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- drain */

typedef struct {
    int64_t tick0;
    double us_per_tick;
    int64_t bucket_us, max_items, nitems;
    /* The same scale in ticks, so that a short record (nearly all of them) is summed with no
     * conversion: a record own_ticks long or more fills a bucket (listed on its own); a
     * record starting t ticks after tick0 is in bucket floor(t * buckets_per_tick). */
    int64_t own_ticks;
    double buckets_per_tick;
    PyObject *items, *buckets;
} drain_ctx;

static inline int64_t to_us(const drain_ctx *c, int64_t ticks) {
    return (int64_t)((double)(ticks - c->tick0) * c->us_per_tick);
}

static int emit_bucket(drain_ctx *c, int w, bucket *b) {
    if (!b->count) return 0;
    PyObject *t = Py_BuildValue("(iLLLiLL)", w, (long long)b->b, (long long)b->count,
                                (long long)((double)b->busy * c->us_per_tick), (int)b->cand, (long long)b->stolen,
                                (long long)b->failed);
    int r = t ? PyList_Append(c->buckets, t) : -1;
    Py_XDECREF(t);
    memset(b, 0, sizeof *b);
    return r;
}

static int take_record(LiveFeedObject *self, drain_ctx *c, int w, const tg_live_rec *r) {
    int64_t d = r->end > r->start ? r->end - r->start : 0; /* ticks */
    if (d >= c->own_ticks && c->nitems < c->max_items) { /* at least a bucket: on its own */
        int64_t s = to_us(c, r->start), e = to_us(c, r->end);
        PyObject *t = Py_BuildValue("(iLLiiii)", w, (long long)s, (long long)(e < s ? s : e), (int)r->name,
                                    (int)r->state, (int)r->stolen, (int)r->depth);
        int err = t ? PyList_Append(c->items, t) : -1;
        Py_XDECREF(t);
        c->nitems++;
        return err;
    }
    if (r->name == TG_LIVE_IDLE) return 0; /* a short idle stretch: not drawn */
    double x = (double)(r->start - c->tick0) * c->buckets_per_tick;
    int64_t bi = (int64_t)x;
    bi -= (double)bi > x; /* floor, for a record started before tick0 */
    bucket *b = &self->bk[(size_t)w * BUCKETS + (size_t)(bi & (BUCKETS - 1))];
    if (b->count && b->b != bi && emit_bucket(c, w, b) < 0) return -1;
    b->b = bi;
    b->count++;
    b->busy += d;
    b->stolen += r->stolen;
    b->failed += r->state == TG_FAILED;
    if (b->votes == 0) {
        b->cand = r->name;
        b->votes = 1;
    } else {
        b->votes += b->cand == r->name ? 1 : -1;
    }
    return 0;
}

/* drain(tick0, us_per_tick, bucket_us, max_items) -> (items, buckets, counts, taken) */
static PyObject *feed_drain(LiveFeedObject *self, PyObject *args) {
    drain_ctx c = {0};
    if (!PyArg_ParseTuple(args, "LdLL:drain", &c.tick0, &c.us_per_tick, &c.bucket_us, &c.max_items)) return NULL;
    if (c.bucket_us < 1 || c.us_per_tick <= 0) {
        PyErr_SetString(PyExc_ValueError, "drain: bucket_us and us_per_tick must be > 0");
        return NULL;
    }
    double own = (double)c.bucket_us / c.us_per_tick;
    c.own_ticks = own >= 9.0e18 ? INT64_MAX : (int64_t)own + ((double)(int64_t)own < own);
    c.buckets_per_tick = c.us_per_tick / (double)c.bucket_us;
    c.items = PyList_New(0);
    c.buckets = PyList_New(0);
    PyObject *counts = NULL, *out = NULL;
    int64_t taken = 0;
    int err = !c.items || !c.buckets;
    tg_lock_detached(&self->mu);
    for (int w = 0; w < self->n && !err; w++) {
        int64_t got, first = 1;
        /* Read before the records: drops counted now happened before the records read next.
         * A full ring drops the newest records, so the records a ring dropped lie between the
         * last one drained before and the first one drained now: that stretch is listed as
         * one item named TG_FEED_DROPPED (busy, its tasks unknown), not left blank as idle. */
        int64_t dropped = tg_live_dropped(self->f[w]->live);
        do {
            got = tg_live_read(self->f[w]->live, self->buf, READ_CHUNK);
            taken += got;
            if (got && first && dropped > self->dropped_seen[w]) {
                int64_t s0 = self->last_end[w], s1 = to_us(&c, self->buf[0].start);
                PyObject *t = s1 > s0 ? Py_BuildValue("(iLLiiii)", w, (long long)s0, (long long)s1,
                                                      TG_FEED_DROPPED, 0, 0, 0) : NULL;
                if (t && PyList_Append(c.items, t) < 0) err = 1;
                Py_XDECREF(t);
                self->dropped_seen[w] = dropped;
            }
            first = first && !got;
            for (int64_t k = 0; k < got && !err; k++) err = take_record(self, &c, w, &self->buf[k]) < 0;
            if (got) self->last_end[w] = to_us(&c, self->buf[got - 1].end);
        } while (got == READ_CHUNK && !err);
        for (int j = 0; j < BUCKETS && !err; j++) err = emit_bucket(&c, w, &self->bk[(size_t)w * BUCKETS + j]) < 0;
    }
    if (!err) { /* per name: what the workers counted since we attached */
        int32_t names = tg_feednames_count(self->f[0]->names);
        counts = PyList_New(names);
        for (int32_t i = 0; counts && i < names; i++) {
            long long c[TG_FEED_KINDS] = {0};
            /* Relaxed: counts (livefeed.h). Submitted is read last: a task read as finished
             * was submitted before, so it is in the submitted read after (waiting, their
             * difference, is at worst too large for a moment, never below its value). */
            for (int k = 0; k < TG_FEED_KINDS; k++) {
                for (int w = 0; w < self->n; w++)
                    c[k] += atomic_load_explicit(&self->f[w]->counts[TG_FEED_KINDS * (size_t)i + k],
                                                 memory_order_relaxed);
                if (k == TG_FEED_SUBMITTED)
                    c[k] += atomic_load_explicit(&self->f[0]->names->outside[i], memory_order_relaxed);
                c[k] -= self->counts0[TG_FEED_KINDS * (size_t)i + k];
            }
            PyObject *t = Py_BuildValue("(LLLL)", c[0], c[1], c[2], c[3]);
            if (!t) Py_CLEAR(counts);
            else PyList_SET_ITEM(counts, i, t);
        }
    }
    pthread_mutex_unlock(&self->mu);
    if (!err && counts) out = Py_BuildValue("(OOOL)", c.items, c.buckets, counts, (long long)taken);
    Py_XDECREF(c.items);
    Py_XDECREF(c.buckets);
    Py_XDECREF(counts);
    return out;
}

/* sample(tick0, us_per_tick) -> [(idle_us, idle_now, queued, dropped, [(name, start_us)...])]
 * per worker, and the time now in the same µs. */
static PyObject *feed_sample(LiveFeedObject *self, PyObject *args) {
    int64_t tick0;
    double us_per_tick;
    if (!PyArg_ParseTuple(args, "Ld:sample", &tick0, &us_per_tick)) return NULL;
    int64_t now = tg_clock_ticks();
    PyObject *out = PyList_New(self->n);
    for (int w = 0; out && w < self->n; w++) {
        tg_live *L = self->f[w]->live;
        int32_t names[TG_LIVE_STACK];
        int64_t t0s[TG_LIVE_STACK];
        int idle = 0, d = tg_live_running(L, names, t0s, TG_LIVE_STACK);
        int64_t idle_ticks = tg_live_idle(L, now, &idle);
        PyObject *run = PyList_New(d);
        for (int i = 0; run && i < d; i++) {
            PyObject *t = Py_BuildValue("(iL)", (int)names[i],
                                        (long long)((double)(t0s[i] - tick0) * us_per_tick));
            if (!t) Py_CLEAR(run);
            else PyList_SET_ITEM(run, i, t);
        }
        PyObject *row = run ? Py_BuildValue("(LiLLN)", (long long)((double)idle_ticks * us_per_tick), idle,
                                            (long long)tg_pool_deque_size(self->engine->pool, w),
                                            (long long)(tg_live_dropped(L) - self->dropped0[w]), run) : NULL;
        if (!row) Py_CLEAR(out);
        else PyList_SET_ITEM(out, w, row);
    }
    if (!out) return NULL;
    return Py_BuildValue("(NL)", out, (long long)((double)(now - tick0) * us_per_tick));
}

/* names(first) -> the task names from index first on. */
static PyObject *feed_names(LiveFeedObject *self, PyObject *arg) {
    long first = PyLong_AsLong(arg);
    if (first == -1 && PyErr_Occurred()) return NULL;
    if (first < 0) first = 0;
    PyObject *got[256];
    PyObject *out = PyList_New(0);
    tg_feednames *t = self->f[0]->names;
    for (int32_t k = 256; out && k == 256; first += k) {
        k = tg_feednames_copy(t, (int32_t)first, got, 256);
        for (int32_t i = 0; i < k; i++) {
            if (out && PyList_Append(out, got[i]) < 0) Py_CLEAR(out);
            Py_DECREF(got[i]);
        }
    }
    return out;
}

static PyObject *feed_get_attached(LiveFeedObject *self, void *c) {
    (void)c;
    tg_lock_detached(&attach_mu);
    int a = self->attached;
    pthread_mutex_unlock(&attach_mu);
    return PyBool_FromLong(a);
}

static PyMethodDef feed_methods[] = {
    {"drain", (PyCFunction)feed_drain, METH_VARARGS,
     "drain(tick0, us_per_tick, bucket_us, max_items) -> (items, buckets, counts, taken): "
     "takes every record published since the last drain. items: (worker, start_us, end_us, "
     "name, state, stolen, depth) of the tasks (name -1: idle inside a join; -2: records "
     "dropped there by a full ring) at least "
     "bucket_us long, at most max_items; buckets: (worker, bucket, count, busy_us, name, "
     "stolen, failed) summing the others per bucket_us; counts: (done, failed, cancelled, "
     "submitted) per name index since attached (never dropped); taken: records read. "
     "Times in µs since tick0."},
    {"sample", (PyCFunction)feed_sample, METH_VARARGS,
     "sample(tick0, us_per_tick) -> (workers, now_us): per worker (idle_us, idle_now, queued, "
     "dropped since attached, running), running being (name, start_us) of its open tasks, outermost first."},
    {"names", (PyCFunction)feed_names, METH_O, "names(first) -> the task names from index first on."},
    {"close", (PyCFunction)feed_close, METH_NOARGS, "Detaches the feed (idempotent)."},
    {NULL, NULL, 0, NULL},
};

static PyObject *feed_get_held(LiveFeedObject *self, void *c) {
    (void)self;
    (void)c;
    return PyLong_FromLongLong(tg_feed_held());
}

static PyGetSetDef feed_getset[] = {
    {"attached", (getter)feed_get_attached, NULL, "Whether the workers write to it.", NULL},
    {"held", (getter)feed_get_held, NULL,
     "Results held, process-wide: nodes whose task finished done on a worker with a feed "
     "attached and that still hold their result (livefeed.h).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef feed_members[] = {
    {"workers", T_INT, offsetof(LiveFeedObject, nworkers), READONLY, "Number of workers."},
    {"slots", T_INT, offsetof(LiveFeedObject, n), READONLY,
     "Number of slots: the workers', then the spares' (drain and sample cover them all)."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject TG_LiveFeedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "taskgraph._core.LiveFeed",
    .tp_basicsize = sizeof(LiveFeedObject),
    .tp_dealloc = (destructor)feed_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "LiveFeed(engine): the live records of an engine's workers (private; read by "
              "taskgraph.dashboard).",
    .tp_new = feed_new,
    .tp_methods = feed_methods,
    .tp_getset = feed_getset,
    .tp_members = feed_members,
};
