/* Submitting a lazy graph in one call (submit.c): claim, edges, release. Layer 7
 * (docs/design/native.md): above the worker loop, whose cancellation of refused nodes it
 * uses. */
#ifndef TG_PY_SUBMIT_H
#define TG_PY_SUBMIT_H

#include "worker.h"

/* Claims, wires and releases the lazy graph under nodes[0..n) as part of run (on its engine's
 * pool). From worker W (not NULL: ready nodes go onto its deque, and each claimed node becomes
 * a child of W->current) or from outside (W NULL: the injector). Returns how many nodes it
 * claimed, or -1 with an error (what it claimed then drains as cancelled: the run is
 * cancelled). *others (if not NULL) is set to how many unfinished nodes under the targets
 * another run had claimed (0: once this run ends, every one of them has finished). */
Py_ssize_t tg_submit(RunObject *run, PyObject *const *nodes, Py_ssize_t n, Runner *W,
                     Py_ssize_t *others);
/* Queues one fresh node without Node arguments (never claimed, no deps) from outside the
 * workers, for a run its caller registered and holds open (taskgraph.Executor's submit: no
 * registration, no hold and no batch here, so no lock but the injector's). The caller has
 * added one to the run's live count for this node (tg_run_hold), which its claim uses. 0, or
 * -1 with SchedulerClosedError (or MemoryError) when the engine takes no more work: the node
 * then finishes cancelled, its inputs dropped; the caller's hold is used up either way. */
int tg_submit_one(RunObject *run, NodeObject *n);

#endif
