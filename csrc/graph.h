/* The task table: one tg_task per node of the graph, with its state, the number of
 * predecessors not finished yet, and the list of successors to release when it finishes.
 *
 * Memory: a tg_task is allocated by its owner (the Python Node allocates it with cffi and frees
 * it when the Node dies); the C core never frees a task. The core only touches a task while it
 * is "in flight" (claimed and not finished), and taskgraph keeps every in-flight Node reachable
 * (docs/design/scheduler.md), so a task is never freed while the core can still reach it.
 * Edges (tg_edge) are allocated and freed by the core. A tg_task must be zero-filled before its
 * first use (that is the NEW state); tasks are never reused. */
#ifndef TG_GRAPH_H
#define TG_GRAPH_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum {
    TG_NEW = 0,       /* built, not submitted to any run */
    TG_PENDING = 1,   /* submitted, waiting for predecessors */
    TG_READY = 2,     /* in a deque or the injector */
    TG_RUNNING = 3,   /* handed to a worker to run */
    TG_DONE = 4,      /* finished with a result */
    TG_FAILED = 5,    /* finished with an exception */
    TG_CANCELLED = 6  /* finished without running */
} tg_state;

/* A run is one compute() call: the tasks it submitted and everything they spawn. */
typedef struct tg_run {
    _Atomic int64_t live;      /* claimed tasks of this run not finished yet */
    _Atomic int32_t cancelled; /* set once: tasks of this run that have not started never run */
    int32_t pad;
} tg_run;

typedef struct tg_edge tg_edge;

typedef struct tg_task {
    _Atomic int32_t state;    /* tg_state */
    _Atomic int32_t deps;     /* unfinished predecessors, +1 "hold" until tg_task_arm */
    _Atomic int32_t poisoned; /* a predecessor failed or was cancelled: do not run */
    _Atomic int32_t final;    /* the final state, stored before the successor list is sealed */
    _Atomic int32_t thief;    /* 1 + index of the worker that stole it, or 0 */
    int32_t worker;           /* index of the worker that ran it (-1 before) */
    int32_t skip;             /* set when handed out: 1 = do not run (poisoned or run cancelled);
                               * written and read by the worker it is handed to only */
    int32_t stolen;           /* set when handed out: 1 = taken from another worker's deque */
    _Atomic(tg_edge *) succ;  /* successors; TG_SEALED once finished */
    tg_run *run;              /* set by tg_task_claim */
    void *handle;             /* the Python Node (a cffi handle), set by tg_task_claim */
    _Atomic uint64_t id;      /* number for the node's key, set once by tg_task_set_id */
} tg_task;

/* Results of tg_task_depend. */
enum { TG_DEP_WAIT = 0, TG_DEP_DONE = 1, TG_DEP_POISON = 2 };

/* Claims a NEW task for run: exactly one caller gets 1 (the task becomes PENDING with the hold
 * set), every other caller gets 0 (it was claimed already). */
int tg_task_claim(tg_task *t, void *handle, tg_run *run);
/* Records that succ (claimed, held) waits for pred (claimed). Returns TG_DEP_WAIT when the edge
 * was added, TG_DEP_DONE when pred had already finished with a result, TG_DEP_POISON when pred
 * had already failed or been cancelled (succ is then poisoned). Safe while pred finishes
 * concurrently: the edge is either seen by pred's finish or not added (no lost, no double
 * release). Returns -1 when out of memory. */
int tg_task_depend(tg_task *succ, tg_task *pred);
/* Drops the hold of a claimed task. Returns 1 when the task became READY (the caller must
 * push it), else 0. */
int tg_task_release_hold(tg_task *t);
/* Marks a finished task and releases its successors. Each successor that becomes ready is
 * passed to ready(ctx, succ). Returns 1 if the finish ended the task's run (live reached 0).
 * The release store of the final state is this function's LAST access to t: a thread that
 * sees the state may free the task at once. */
int tg_task_finish(tg_task *t, tg_state final, void (*ready)(void *ctx, tg_task *), void *ctx);
/* Asks that a claimed task not run: if it has not been handed out yet, it will be with skip=1
 * (its dependents are then cancelled too). No effect on a task already running or finished. */
void tg_task_cancel(tg_task *t);
/* The state, read with acquire (pairs with the release store in tg_task_finish). */
int tg_task_state(const tg_task *t);
/* Gives the task its key number if it has none yet (CAS from 0); returns the number it ends up
 * with, so threads that race to name a node all agree. */
uint64_t tg_task_set_id(tg_task *t, uint64_t id);
/* A submitter holds its run open while it adds tasks, so that the run cannot end (live reach 0)
 * between two submissions. tg_run_release returns 1 if dropping the hold ended the run. */
void tg_run_hold(tg_run *r);
int tg_run_release(tg_run *r);
/* Human-readable name of a state. */
const char *tg_state_name(int state);

#endif
