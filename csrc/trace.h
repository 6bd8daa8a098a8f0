/* Execution-trace buffers: one per worker per trace, appended to by that worker only (the
 * observer in csrc/py/recorder.c), read after the trace has closed (Recorder.records(),
 * taskgraph/trace/record.py). Plain numbers only: the Python face keeps the names and error texts
 * in a table of its own and stores their indices here.
 *
 * The layout of a record is described once, here: tg_trace_rec_format() gives it as a Python
 * struct format and tg_trace_rec_fields() names the fields, so the reader never repeats it. */
#ifndef TG_TRACE_H
#define TG_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include "graph.h"

typedef struct tg_trace_rec {
    uint64_t id;       /* the task's key number (tg_task.id) */
    uint64_t parent;   /* the key number of the task that spawned it, 0 if none */
    int64_t start;     /* ticks (tg_clock_ticks) */
    int64_t end;
    int64_t own;       /* ticks of its own work: end - start minus joins and collections */
    uint32_t deps_off; /* its dependencies' key numbers: ids[deps_off .. deps_off + ndeps),
                        * then, with flags & TG_REC_WAITS, its CPU time (ns, or -1 if not
                        * measured) and its ticks inside declared waits: two more ids */
    uint32_t ndeps;
    int32_t name;      /* index of the task name in the recorder's object table */
    int32_t error;     /* index of (type name, message) in that table, or -1 */
    int32_t worker;    /* index of the worker that ran (or skipped) it */
    uint8_t flags;     /* TG_REC_STOLEN: the worker took it from another worker's deque;
                        * TG_REC_WAITS: its CPU time and declared waits follow its deps */
    uint8_t state;     /* tg_state: done, failed or cancelled */
    uint16_t attempt;  /* 0, or for a task with retries the attempt (each has its record; all
                        * but the last failed and were retried) */
} tg_trace_rec;

/* tg_trace_rec.flags */
enum { TG_REC_STOLEN = 1, TG_REC_WAITS = 2 };

typedef struct tg_tracebuf tg_tracebuf;

/* The part of a buffer the appending worker touches per record (the rest is in trace.c). */
typedef struct {
    tg_trace_rec *next, *end; /* free room in the current chunk */
} tg_tracebuf_head;

tg_tracebuf *tg_tracebuf_new(void);
void tg_tracebuf_free(tg_tracebuf *b);
/* Room for a new record at the end (its fields are the caller's to fill, all of them), or
 * NULL when out of memory (the record is then dropped and counted in tg_tracebuf_dropped).
 * Owner thread only. */
tg_trace_rec *tg_tracebuf_append_slow(tg_tracebuf *b);
static inline tg_trace_rec *tg_tracebuf_append(tg_tracebuf *b) {
    tg_tracebuf_head *h = (tg_tracebuf_head *)b; /* the head is the buffer's first member */
    return h->next < h->end ? h->next++ : tg_tracebuf_append_slow(b);
}
/* Appends n key numbers to the id array and gives their offset: 0, or -1 when out of memory.
 * Owner thread only. */
int tg_tracebuf_add_ids(tg_tracebuf *b, const uint64_t *ids, uint32_t n, uint32_t *off);
int64_t tg_tracebuf_count(const tg_tracebuf *b);
int64_t tg_tracebuf_dropped(const tg_tracebuf *b);
/* Copies records [first, first + n) into dst (n * sizeof(tg_trace_rec) bytes); returns how
 * many were copied. */
int64_t tg_tracebuf_copy(const tg_tracebuf *b, int64_t first, int64_t n, void *dst);
int64_t tg_tracebuf_nids(const tg_tracebuf *b);
/* Copies the whole id array into dst (tg_tracebuf_nids(b) * 8 bytes). */
void tg_tracebuf_copy_ids(const tg_tracebuf *b, uint64_t *dst);

/* The record layout as a Python struct format ("<..."), its size, and the field names. */
const char *tg_trace_rec_format(void);
int tg_trace_rec_size(void);
const char *tg_trace_rec_fields(void);

/* The clock of the records, in ticks: rdtsc on x86-64 when the kernel itself keeps time with
 * an invariant TSC (about 8 ns to read), else CLOCK_MONOTONIC in ns (about 23 ns through the
 * vDSO). Ticks become ns when a trace is read: tg_clock_origin gives the (ticks, ns) pair
 * taken when the extension was loaded and tg_clock_pair a fresh one; between the two,
 * ns = ns0 + (ticks - ticks0) * (ns1 - ns0) / (ticks1 - ticks0). The ns are those of
 * time.monotonic_ns() and time.perf_counter_ns() on Linux. */
extern int tg_clock_uses_tsc; /* set once by tg_clock_init, before any worker starts */
int64_t tg_clock_mono_ns(void);
static inline int64_t tg_clock_ticks(void) {
#if defined(__x86_64__)
    if (tg_clock_uses_tsc) return (int64_t)__builtin_ia32_rdtsc();
#endif
    return tg_clock_mono_ns();
}
/* Decides the tick source and takes the origin pair (the extension calls it once, at load). */
void tg_clock_init(void);
int tg_clock_tsc(void);
void tg_clock_origin(int64_t *ticks, int64_t *ns);
void tg_clock_pair(int64_t *ticks, int64_t *ns);

/* Garbage collections while traces are open, in ticks: taskgraph/trace/record.py's gc callback
 * calls tg_trace_gc_phase(1) when a collection starts and (0) when it ends; the recorders
 * read the running total around each task. Collections stop every thread (and take the GIL
 * on GIL builds), so no task starts or ends during one. */
void tg_trace_gc_phase(int starting);
extern _Atomic int64_t tg_gc_ticks_total;
static inline int64_t tg_trace_gc_ticks(void) {
    /* Relaxed: a running total; a collection stops every thread, so the recorders read it
     * before or after a collection, never during one. */
    return atomic_load_explicit(&tg_gc_ticks_total, memory_order_relaxed);
}

#endif
