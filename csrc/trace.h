/* Execution-trace buffers: one per worker per trace, appended to by that worker only (the
 * observer in csrc/py/recorder.c), read through cffi after the trace has closed
 * (taskgraph/trace.py). Plain numbers only: the Python face keeps the names and error texts
 * in a table of its own and stores their indices here.
 *
 * The layout of a record is described once, here: tg_trace_rec_format() gives it as a Python
 * struct format and tg_trace_rec_fields() names the fields, so the reader never repeats it. */
#ifndef TG_TRACE_H
#define TG_TRACE_H

#include <stdint.h>

#include "graph.h"

typedef struct tg_trace_rec {
    uint64_t id;       /* the task's key number (tg_task.id) */
    uint64_t parent;   /* the key number of the task that spawned it, 0 if none */
    int64_t start;     /* ns (tg_clock_ns) */
    int64_t end;
    int64_t own;       /* ns of its own work: end - start minus joins and collections */
    uint32_t deps_off; /* its dependencies' key numbers: ids[deps_off .. deps_off + ndeps) */
    uint32_t ndeps;
    int32_t name;      /* index of the task name in the recorder's object table */
    int32_t error;     /* index of (type name, message) in that table, or -1 */
    int32_t worker;    /* index of the worker that ran (or skipped) it */
    uint8_t stolen;    /* 1 if the worker took it from another worker's deque */
    uint8_t state;     /* tg_state: done, failed or cancelled */
    uint16_t pad;
} tg_trace_rec;

typedef struct tg_tracebuf tg_tracebuf;

TG_API tg_tracebuf *tg_tracebuf_new(void);
TG_API void tg_tracebuf_free(tg_tracebuf *b);
/* A new zeroed record at the end, or NULL when out of memory (the record is then dropped
 * and counted in tg_tracebuf_dropped). Owner thread only. */
tg_trace_rec *tg_tracebuf_append(tg_tracebuf *b);
/* Appends n key numbers to the id array and gives their offset: 0, or -1 when out of memory.
 * Owner thread only. */
int tg_tracebuf_add_ids(tg_tracebuf *b, const uint64_t *ids, uint32_t n, uint32_t *off);
TG_API int64_t tg_tracebuf_count(const tg_tracebuf *b);
TG_API int64_t tg_tracebuf_dropped(const tg_tracebuf *b);
/* Copies records [first, first + n) into dst (n * sizeof(tg_trace_rec) bytes); returns how
 * many were copied. */
TG_API int64_t tg_tracebuf_copy(const tg_tracebuf *b, int64_t first, int64_t n, void *dst);
TG_API int64_t tg_tracebuf_nids(const tg_tracebuf *b);
/* Copies the whole id array into dst (tg_tracebuf_nids(b) * 8 bytes). */
TG_API void tg_tracebuf_copy_ids(const tg_tracebuf *b, uint64_t *dst);

/* The record layout as a Python struct format ("<..."), its size, and the field names. */
TG_API const char *tg_trace_rec_format(void);
TG_API int tg_trace_rec_size(void);
TG_API const char *tg_trace_rec_fields(void);

/* The clock of the records: CLOCK_MONOTONIC in ns, the clock of time.perf_counter_ns() and
 * time.monotonic_ns() on Linux. */
TG_API int64_t tg_clock_ns(void);
/* Total ns spent in garbage collections while traces were open: added by the collecting
 * thread (taskgraph/trace.py's gc callback, through cffi), read by the recorders around each
 * task. Collections stop every thread, so no task starts or ends during one. */
TG_API void tg_trace_gc_add(int64_t ns);
TG_API int64_t tg_trace_gc_ns(void);

#endif
