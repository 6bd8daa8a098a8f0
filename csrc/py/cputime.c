/* A worker's CPU clock, amortized (cputime.h; docs/trace.md, "Waiting"). Reading a thread's
 * CPU clock and its run-queue time (thread_cpu_ns) costs a few us here, the records' clock 8 ns: so it
 * is read when a worker records its first task of a trace, then at a task's end only when a
 * millisecond or more has passed since the last read: at most one read per millisecond per
 * worker, and every task's end comes less than a millisecond after a read. A task of a
 * millisecond or more that joined nothing gets the CPU time since the read before it: its
 * own, plus what the worker used between that read and its start (less than a millisecond;
 * an idle worker uses almost none). So it is within a millisecond of the truth, never below.
 * A shorter task, or one that ran others nested in its joins, is not measured. */
#include "cputime.h"
#include "../schedstat.h"

#include <time.h>

/* Set at a trace's start; until then no task is long enough. Written under the trace lock
 * before any recorder is attached, read by the workers after they see one (its release). */
int64_t tg_cpu_read_ticks = INT64_MAX;

void tg_cpu_reads_decide(void) {
    int64_t t0, n0, t1, n1;
    tg_clock_origin(&t0, &n0);
    tg_clock_pair(&t1, &n1);
    /* The origin pair is taken when the extension loads. Less than 10 ms later, ticks are
     * taken as nanoseconds at up to 4 GHz (a read every 0.25-1 ms). */
    int64_t ticks = n1 - n0 > 10000000 ? (t1 - t0) / ((n1 - n0) / 1000000)
                                       : tg_clock_tsc() ? 4000000 : 1000000;
    tg_cpu_read_ticks = ticks > 0 ? ticks : 1000000;
}

/* The calling thread's time on a CPU or ready to run (waiting for a CPU that other threads of
 * the machine hold), in ns: its CPU clock plus the second field of Linux's
 * /proc/thread-self/schedstat (the time it spent in a run queue; the first field, its CPU
 * time, is only brought up to date at the scheduler's events, so the clock gives that part).
 * A task that is only descheduled on a busy machine computes, it does not wait: with the CPU
 * clock alone, a trace taken on a loaded machine would call its computing tasks waiting. The
 * reader is running, so its run-queue time is complete up to now. Where schedstat is missing,
 * the CPU clock alone. About 3 us a read, at most once a millisecond per worker. */
static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, on_cpu, queued;
    if (tg_schedstat_read("/proc/thread-self/schedstat", &on_cpu, &queued)) ns += queued;
    return ns;
}

void tg_cpu_start(tg_cpu_watch *c, const void *owner, int64_t t0) {
    c->v = thread_cpu_ns();
    c->t = t0;
    c->owner = owner;
}

int64_t tg_cpu_of_read(tg_cpu_watch *c, const void *owner, int joined, int64_t t0, int64_t t1) {
    int64_t now = thread_cpu_ns(), cpu = -1;
    if (owner && c->owner == owner && !joined && t1 - t0 >= tg_cpu_read_ticks && now >= 0 && c->v >= 0)
        cpu = now - c->v;
    tg_cpu_start(c, owner, t1);
    c->v = now;
    return cpu;
}
