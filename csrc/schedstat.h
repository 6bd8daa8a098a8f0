/* Linux's scheduler statistics of one thread (schedstat.c): the time it spent on a CPU and
 * the time it spent ready to run, waiting in a run queue for a CPU that other threads held.
 * The spares' manager (spare.c) and a trace's CPU time (py/cputime.c) both count the second
 * as busy: a thread only descheduled on a loaded machine computes, it does not wait. Plain
 * C, no Python.h. */
#ifndef TG_SCHEDSTAT_H
#define TG_SCHEDSTAT_H

#include <stdint.h>

/* Reads the first two fields of a schedstat file (/proc/thread-self/schedstat for the calling
 * thread, /proc/self/task/TID/schedstat for another) into *on_cpu and *queued (ns). Returns 1,
 * or 0 if the file is missing (a kernel without schedstats) or unreadable; then nothing is
 * written. */
int tg_schedstat_read(const char *path, int64_t *on_cpu, int64_t *queued);

#endif
