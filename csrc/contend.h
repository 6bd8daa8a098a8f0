/* The cost of sharing a cache line: how long one atomic read-modify-write takes on a line
 * that another thread writes too, so that the line moves between two cores on every
 * operation. The speed-up simulator (taskgraph/trace/simulate.py) charges it for each RMW the
 * scheduler makes on a line shared between workers (docs/design/scheduler.md, "Shared atomics
 * per spawned task"): measured on the machine that predicts, not a constant. Plain C11 and
 * POSIX threads; no Python.h. */
#ifndef TG_CONTEND_H
#define TG_CONTEND_H

/* Two threads take turns incrementing one counter, `rounds` times each: a thread waits until
 * the counter shows the other's increment before it adds its own, so every increment moves
 * the line. Returns the mean nanoseconds per increment (> 0), or -1.0 if rounds < 1 or a
 * thread could not be started. Blocks the caller for about 2 * rounds transfers. */
double tg_contended_rmw_ns(long rounds);

#endif
