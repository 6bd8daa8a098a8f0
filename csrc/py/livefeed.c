/* The live feed's names and idle records: see livefeed.h. */
#include "livefeed.h"

tg_feednames *tg_feednames_new(void) {
    tg_feednames *t = PyMem_RawCalloc(1, sizeof *t);
    PyObject *other = PyUnicode_FromString("(other names)");
    if (t) {
        t->cap = 64;
        t->kcap = 128;
        t->names = PyMem_RawCalloc((size_t)t->cap, sizeof(PyObject *));
        t->keys = PyMem_RawCalloc((size_t)t->kcap, sizeof(PyObject *));
        t->vals = PyMem_RawCalloc((size_t)t->kcap, sizeof(int32_t));
        t->outside = calloc(TG_FEED_NAMES, sizeof(int64_t)); /* zeroed pages, touched per name */
    }
    if (!t || !other || !t->names || !t->keys || !t->vals || !t->outside) {
        Py_XDECREF(other);
        if (t) {
            PyMem_RawFree(t->names);
            PyMem_RawFree(t->keys);
            PyMem_RawFree(t->vals);
            free((void *)t->outside);
        }
        PyMem_RawFree(t);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    t->names[t->n++] = other; /* index 0; never a key, so no task name maps to it by identity */
    return t;
}

void tg_feednames_free(tg_feednames *t) {
    if (!t) return;
    for (int32_t i = 0; i < t->n; i++) Py_DECREF(t->names[i]);
    PyMem_RawFree(t->names);
    PyMem_RawFree(t->keys);
    PyMem_RawFree(t->vals);
    free((void *)t->outside);
    pthread_mutex_destroy(&t->mu);
    PyMem_RawFree(t);
}

int32_t tg_feednames_count(tg_feednames *t) {
    tg_lock_detached(&t->mu);
    int32_t n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

int32_t tg_feednames_copy(tg_feednames *t, int32_t first, PyObject **out, int32_t max) {
    int32_t k = 0;
    tg_lock_detached(&t->mu);
    for (int32_t i = first; i < t->n && k < max; i++) out[k++] = Py_NewRef(t->names[i]);
    pthread_mutex_unlock(&t->mu);
    return k;
}

/* Every live feed of the process (tg_feed_held sums their done_held). */
static pthread_mutex_t feeds_mu = PTHREAD_MUTEX_INITIALIZER;
static tg_feedw *feeds;

tg_feedw *tg_feedw_new(tg_feednames *names) {
    tg_feedw *f = PyMem_RawCalloc(1, sizeof *f);
    tg_live *L = f ? tg_live_new() : NULL;
    /* calloc: zeroed pages, touched only for the names the worker meets (128 KiB at most) */
    _Atomic int64_t *counts = L ? calloc(TG_FEED_KINDS * (size_t)TG_FEED_NAMES, sizeof(int64_t)) : NULL;
    if (!counts) {
        free(L);
        PyMem_RawFree(f);
        PyErr_NoMemory();
        return NULL;
    }
    f->live = L;
    f->counts = counts;
    f->names = names;
    tg_lock_detached(&feeds_mu);
    f->next = feeds;
    if (feeds) feeds->prev = f;
    feeds = f;
    pthread_mutex_unlock(&feeds_mu);
    return f;
}

void tg_feedw_free(tg_feedw *f) {
    if (!f) return;
    tg_lock_detached(&feeds_mu);
    /* What its worker gained stays counted (those nodes still carry `held`). Relaxed: see
     * livefeed.h (results held); the worker has stopped writing (the observer is freed). */
    atomic_fetch_add_explicit(&tg_feed_held_total, atomic_load_explicit(&f->done_held, memory_order_relaxed),
                              memory_order_relaxed);
    if (f->prev) f->prev->next = f->next;
    else feeds = f->next;
    if (f->next) f->next->prev = f->prev;
    pthread_mutex_unlock(&feeds_mu);
    free(f->live);
    free((void *)f->counts);
    PyMem_RawFree(f);
}

static inline int64_t slot_of(PyObject *key, int64_t cap) {
    uint64_t h = ((uintptr_t)key >> 4) * 0x9e3779b97f4a7c15ULL;
    return (int64_t)(h & (uint64_t)(cap - 1));
}

/* The index of name in t, adding it (a new reference) if there is room; -1 if the table is
 * full or out of memory (the caller counts the task under index 0). t->mu held. */
static int32_t lookup_or_add(tg_feednames *t, PyObject *name) {
    int64_t j = slot_of(name, t->kcap);
    while (t->keys[j] && t->keys[j] != name) j = (j + 1) & (t->kcap - 1);
    if (t->keys[j]) return t->vals[j];
    if (t->n >= TG_FEED_NAMES) return -1;
    if (t->n == t->cap) {
        PyObject **nn = PyMem_RawRealloc(t->names, sizeof(PyObject *) * (size_t)t->cap * 2);
        if (!nn) return -1;
        t->names = nn;
        t->cap *= 2;
    }
    if ((int64_t)(t->n + 1) * 2 > t->kcap) { /* grow the index first: j is recomputed */
        int64_t cap = t->kcap * 2;
        PyObject **nk = PyMem_RawCalloc((size_t)cap, sizeof(PyObject *));
        int32_t *nv = PyMem_RawCalloc((size_t)cap, sizeof(int32_t));
        if (!nk || !nv) {
            PyMem_RawFree(nk);
            PyMem_RawFree(nv);
            return -1;
        }
        for (int64_t i = 0; i < t->kcap; i++) {
            if (!t->keys[i]) continue;
            int64_t k = slot_of(t->keys[i], cap);
            while (nk[k]) k = (k + 1) & (cap - 1);
            nk[k] = t->keys[i];
            nv[k] = t->vals[i];
        }
        PyMem_RawFree(t->keys);
        PyMem_RawFree(t->vals);
        t->keys = nk;
        t->vals = nv;
        t->kcap = cap;
        j = slot_of(name, cap);
        while (t->keys[j]) j = (j + 1) & (cap - 1);
    }
    t->names[t->n] = Py_NewRef(name); /* the table holds it: its address names it for good */
    t->keys[j] = name;
    t->vals[j] = t->n;
    return t->n++;
}

void tg_feed_submitted_outside(tg_feednames *t, NodeObject *n, PyObject **ckey, int32_t *cval) {
    int32_t idx = 0;
    if (n->name && ckey && n->name == *ckey) {
        idx = *cval;
    } else if (n->name) {
        tg_lock_detached(&t->mu);
        idx = lookup_or_add(t, n->name);
        pthread_mutex_unlock(&t->mu);
        if (idx < 0) {
            idx = 0; /* not cached: the object is not held by the table */
        } else if (ckey) {
            *ckey = n->name; /* held by the table: its address names it for good */
            *cval = idx;
        }
    }
    /* Relaxed: see tg_feednames.outside. */
    atomic_fetch_add_explicit(&t->outside[idx], 1, memory_order_relaxed);
}

_Atomic int64_t tg_feed_held_total;

int64_t tg_feed_held(void) {
    tg_lock_detached(&feeds_mu);
    /* Relaxed: see livefeed.h (results held). */
    int64_t held = atomic_load_explicit(&tg_feed_held_total, memory_order_relaxed);
    for (tg_feedw *f = feeds; f; f = f->next) held += atomic_load_explicit(&f->done_held, memory_order_relaxed);
    pthread_mutex_unlock(&feeds_mu);
    return held;
}

int32_t tg_feed_name_slow(tg_feedw *f, PyObject *name, int slot) {
    tg_lock_detached(&f->names->mu);
    int32_t idx = lookup_or_add(f->names, name);
    pthread_mutex_unlock(&f->names->mu);
    if (idx < 0) return 0; /* not cached: the object is not held by the table */
    f->ckey[slot] = name;
    f->cval[slot] = idx;
    return idx;
}

int64_t tg_feed_idle_end(tg_feedw *f) {
    tg_live *L = f->live;
    int64_t now = tg_clock_ticks();
    /* Relaxed: the worker's own values. */
    int64_t t0 = atomic_load_explicit(&L->idle_since, memory_order_relaxed);
    int32_t d = atomic_load_explicit(&L->depth, memory_order_relaxed);
    if (t0 && d > 0) { /* idle inside a task's join: a gap in that task, drawn as one */
        tg_live_rec *r = tg_live_room(L);
        if (r) {
            r->start = t0;
            r->end = now;
            r->name = TG_LIVE_IDLE;
            r->state = 0;
            r->stolen = 0;
            r->depth = (uint16_t)d;
            tg_live_publish(L);
        }
    }
    tg_live_idle_end(L, now);
    return now;
}
