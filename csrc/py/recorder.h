/* Tracing (recorder.c): the observer the worker loop calls around each task (begin/end and the
 * idle hooks, Taskflow's ObserverInterface idea) while a trace is open, the Recorder type that
 * holds one worker's records, and the module's trace and clock functions. It keeps its own
 * per-worker state (a tg_watch per worker, grouped per engine in a tg_observer) and knows
 * nothing of engines or workers beyond that. Layer 4 (docs/design/native.md). */
#ifndef TG_PY_RECORDER_H
#define TG_PY_RECORDER_H

#include "livefeed.h"
#include "cputime.h"

typedef struct RecorderObject RecorderObject;

struct RecorderObject {
    PyObject_HEAD
    tg_tracebuf *buf;
    PyObject *objects;   /* list: names, and (type name, message) of errors; written by the
                          * worker while the trace is open, read after it closed */
    int sched_no, worker;
    int spare;           /* a spare slot's (worker >= its scheduler's workers) */
    PyObject *last_name; /* cache of the last name's index */
    int32_t last_index;
    PyObject **keys; int32_t *vals; /* open-addressing table: name object -> index */
    int64_t cap, used;
};

extern PyTypeObject TG_RecorderType;

/* Own-time accounting while tracing: one frame per task running (nested) on a worker while
 * something is traced. The time a task spends inside its joins is the duration of the tasks
 * that ran nested in them (each adds its duration to the frame below it when it ends) plus the
 * time the worker was idle inside them (the idle hooks add it): no clock is read per join. */
typedef struct {
    int64_t join;     /* ticks spent inside joins by the task in this frame */
    int64_t join_gc;  /* collection ticks inside those joins */
    int traced;       /* the task is being recorded (its joins are timed) */
    int64_t blocked;  /* ticks inside its declared waits (tg.blocking()) */
} tg_frame;

/* One worker's tracing state. Written by that worker's thread only, except `rec`, which the
 * trace's opener and closer set and clear under the trace lock, `busy`, the hazard flag
 * the worker raises while it writes a record (the closer waits for it to drop), and `feed`
 * and `feed_mem`, which the dashboard's feed sets (tg_observer_feed). */
typedef struct tg_watch {
    _Alignas(64) _Atomic(RecorderObject *) rec; /* the open trace's recorder, or NULL */
    _Atomic int busy;
    _Atomic(tg_feedw *) feed; /* the attached live feed (livefeed.h), or NULL */
    tg_feedw *feed_mem;       /* the worker's feed, attached or not: freed with the observer,
                               * never before (a worker may write into it after a detach) */
    tg_frame *frames;        /* one per task running (nested) on this worker while traced */
    int nframes, capframes;
    int64_t idle_t0, idle_g0; /* start of an idle period inside a traced task's join */
    int64_t block_t0;        /* start of a declared wait of a traced task (0: none timed) */
    /* When the worker's last task ended (a feed-only one) or its idle stretch did, while the
     * dispatch loop has run nothing else since, in ticks; else 0 (cleared when a task begins,
     * when the worker goes idle and when the loop returns to a task's code). The next task
     * that begins starts then: one clock read per task instead of two (tg_rec_begin). */
    int64_t fresh;
    tg_cpu_watch cpu;        /* the thread's CPU clock, read at most once a millisecond */
    int index;               /* the worker's number */
} tg_watch;

/* One engine's watches; on the module's list of live observers (the trace lock). */
typedef struct tg_observer tg_observer;

/* A new observer for an engine (scheduler number sched_no) of nworkers workers and nslots slots
 * in all (the spares follow the workers): registered, and given recorders at once if a trace is
 * open. NULL with an error. */
tg_observer *tg_observer_new(int sched_no, int nworkers, int nslots);
/* Unregisters it (no recorder is attached to it any more); NULL is ignored. */
void tg_observer_detach(tg_observer *o);
/* Detaches (unless forked: in a child process after fork() the lists are gone) and frees it. */
void tg_observer_free(tg_observer *o, int forked);
/* Worker i's watch. */
tg_watch *tg_observer_watch(tg_observer *o, int i);
/* The live feed of worker i (made on first use, with the engine's name table, and kept until
 * the observer is freed), or NULL with an error. Attaching it is the caller's (a release store
 * of tg_watch.feed); one caller at a time (the dashboard's feed holds its own lock). */
tg_feedw *tg_observer_feed(tg_observer *o, int i);

/* What the worker loop keeps of a task while it runs: its start, if timed. */
typedef struct {
    RecorderObject *rec; /* the recorder when the task started, or NULL */
    tg_feedw *feed;      /* the live feed when the task started, or NULL */
    int32_t feed_name;   /* its name's index in the feed */
    int timed;           /* recorded by a trace or a feed, or nested in a traced task: its
                          * clock was read, and tg_rec_end must be called */
    int framed;          /* traced, or nested in a traced task (its time is a join's): a
                          * frame was pushed */
    int64_t t0, g0;      /* its start, and the collection total then */
    int attempt;         /* 0, or which attempt of a retried task (set before tg_rec_end) */
} tg_rec_start;

/* Pushes a frame (the frame is counted but not stored if the stack cannot grow). */
void tg_watch_push(tg_watch *w, int traced);

/* Called when task n starts on w's worker. Pushes nothing and reads no clock unless a trace
 * is open, a live feed attached, or the task runs nested in a traced one. */
static inline __attribute__((always_inline)) void tg_rec_begin(tg_watch *w, tg_rec_start *s, NodeObject *node) {
    /* Acquire: pairs with the release store in recorder.c that attaches a recorder. */
    s->rec = atomic_load_explicit(&w->rec, memory_order_acquire);
    /* Acquire: pairs with the release store that attaches a feed (csrc/py/feed.c). */
    s->feed = atomic_load_explicit(&w->feed, memory_order_acquire);
    int n = w->nframes;
    int64_t fresh = w->fresh;
    if (fresh) w->fresh = 0; /* the next task to begin is nested in this one: after its code */
    s->framed = s->rec || (n > 0 && n <= w->capframes && w->frames[n - 1].traced);
    s->timed = s->framed || s->feed;
    s->attempt = 0;
    if (s->timed) {
        /* Only the dispatch ran since `fresh` (the finish of the task before, finding this
         * one): that is the worker's busy time either way. A trace reads the clock. */
        s->t0 = fresh && !s->framed ? fresh : tg_clock_ticks();
        if (s->framed) {
            tg_watch_push(w, s->rec != NULL);
            s->g0 = tg_trace_gc_ticks();
            if (s->rec && w->cpu.owner != s->rec) tg_cpu_start(&w->cpu, s->rec, s->t0); /* once */
        }
        if (s->feed) s->feed_name = tg_feed_begin(s->feed, node, s->t0);
    }
}
/* Called when a timed task finishes (with state final): pops its frame, adds its duration to
 * the task it ran nested in, and records it if the trace that was open when it started is
 * still open. 0, or -1 if the recorder failed (an injected fault: the caller breaks the
 * engine). Never raises: a record that cannot be written is dropped and counted. */
int tg_rec_end_framed(tg_watch *w, const tg_rec_start *s, NodeObject *n, int final);
static inline int tg_rec_end(tg_watch *w, const tg_rec_start *s, NodeObject *n, int final) {
    if (!s->framed) { /* a live feed's task only: no frame, no trace (inline: the dashboard's path) */
        /* fresh: the next task to begin in this loop starts when this one ended */
        tg_feed_end(s->feed, n, final, s->t0, w->fresh = tg_clock_ticks(), s->feed_name);
        return 0;
    }
    return tg_rec_end_framed(w, s, n, final);
}
/* Called when attempt `attempt` of a timed task with retries failed and it runs again (its
 * frame still pushed): records the attempt as failed, then restarts the clock for the next. */
void tg_rec_attempt(tg_watch *w, tg_rec_start *s, NodeObject *n, int attempt);
/* The worker's idle hooks call these: idle time inside a traced task's join is join time. */
void tg_watch_idle_begin(tg_watch *w);
void tg_watch_idle_end(tg_watch *w);
/* A declared wait (tg.blocking(), the outermost one) of the task running on w's worker
 * begins / ends: a traced task's record gets the ticks in between (TG_REC_WAITS). */
void tg_watch_block_begin(tg_watch *w);
void tg_watch_block_end(tg_watch *w);

/* trace_start() / trace_stop() of the module (see recorder.c). */
PyObject *tg_trace_start(PyObject *mod, PyObject *unused);
PyObject *tg_trace_stop(PyObject *mod, PyObject *unused);
/* _trace_fences() of the module: 1 if the records' hazard protocol uses asymmetric fences
 * (membarrier), 0 if seq_cst on both sides, -1 before the first trace decided it. */
PyObject *tg_py_trace_fences(PyObject *mod, PyObject *unused);
/* In a child process after fork() (single-threaded): resets the trace lock and forgets every
 * observer made before the fork (their engines never run there). */
void tg_trace_after_fork_child(void);

#endif
