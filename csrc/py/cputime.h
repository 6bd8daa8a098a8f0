/* A worker's CPU clock, read at most once a millisecond (cputime.c): the CPU time of a traced
 * task, so that a trace tells waiting from computing (docs/trace.md, "Waiting"). Layer 3
 * (docs/design/native.md): the recorder (layer 4) keeps one per watch. Plain C on the core's
 * clock (csrc/trace.h); no Python object. */
#ifndef TG_PY_CPUTIME_H
#define TG_PY_CPUTIME_H

#include <stdint.h>

#include "../trace.h"

/* One worker's: its thread's CPU clock as last read (ns) and when (ticks), and for which trace
 * (`owner`, compared only: a read made for another trace is no start for this one). Written
 * by that worker's thread only. */
typedef struct {
    int64_t v, t;
    const void *owner;
} tg_cpu_watch;

/* At a trace's start: how many ticks make the millisecond between two reads. */
void tg_cpu_reads_decide(void);
/* The first task recorded for `owner` starts at t0: the first read. */
void tg_cpu_start(tg_cpu_watch *c, const void *owner, int64_t t0);
/* Ticks in a millisecond, the least time between two reads (tg_cpu_reads_decide). */
extern int64_t tg_cpu_read_ticks;
/* tg_cpu_of's read, when a millisecond or more passed since the last. */
int64_t tg_cpu_of_read(tg_cpu_watch *c, const void *owner, int joined, int64_t t0, int64_t t1);
/* The CPU time (ns) of the task of `owner` that ran from t0 to t1 (`joined`: tasks ran nested
 * in it), or -1 if not measured: read only when a millisecond or more passed since the last
 * read; measured only for a task of a millisecond or more that joined nothing, within a
 * millisecond and never below the truth (cputime.c). A compare when nothing is read. */
static inline int64_t tg_cpu_of(tg_cpu_watch *c, const void *owner, int joined, int64_t t0,
                                int64_t t1) {
    return t1 - c->t < tg_cpu_read_ticks ? -1 : tg_cpu_of_read(c, owner, joined, t0, t1);
}

#endif
