/* The task table: one tg_task per node of the graph, with its state, the number of
 * predecessors not finished yet, and the list of successors to release when it finishes.
 *
 * Memory: a tg_task is embedded in its owner's object (the C Node of csrc/py/node.c, the job
 * struct of the C tests); the core never allocates or frees one. The owner keeps the task
 * alive while it is in flight (claimed and not finished): the Python face holds one strong
 * reference to the Node for the core from the claim until the runner has finished it
 * (docs/design/native.md). Edges (tg_edge) are allocated and freed by the core. A tg_task must
 * be zero-filled before its first use (that is the NEW state); tasks are never reused.
 *
 * Shared constants (states, poison reasons, tg_task_depend results) are defined here once;
 * the Python face exports them (taskgraph._core) and nothing repeats them as numbers. */
#ifndef TG_GRAPH_H
#define TG_GRAPH_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum {
    TG_NEW = 0,       /* built, not submitted to any run */
    TG_PENDING = 1,   /* submitted, waiting for predecessors */
    TG_READY = 2,     /* in a deque or the injector */
    TG_RUNNING = 3,   /* handed to a worker (or run inline) */
    TG_DONE = 4,      /* finished with a result */
    TG_FAILED = 5,    /* finished with an exception */
    TG_CANCELLED = 6, /* finished without running */
    TG_NSTATES = 7
} tg_state;

/* Why a task must not run (tg_task.poisoned), or that it started. The first value stored
 * wins: a reason stored before the hand-out means the task never runs; TG_POISON_STARTED,
 * stored by the hand-out, means it is too late to cancel it. */
typedef enum {
    TG_POISON_NONE = 0,
    TG_POISON_DEP = 1,    /* a predecessor failed or was cancelled */
    TG_POISON_CANCEL = 2, /* cancelled on request (its parent failed, node.cancel(), ...) */
    TG_POISON_STARTED = 3 /* not a reason: handed out to run (tg_task_start) */
} tg_poison;

struct tg_pool;

/* A run is one compute() call: the tasks it submitted and everything they spawn. */
typedef struct tg_run {
    _Atomic int64_t live;      /* claimed tasks of this run not finished yet, except children
                                * covered by their parent (tg_task_claim_child), + holds */
    _Atomic int32_t cancelled; /* set once: tasks of this run that have not started never run */
    int32_t pad;
    struct tg_pool *pool;      /* the pool its tasks are released into (NULL: inline only) */
} tg_run;

typedef struct tg_edge tg_edge;

typedef struct tg_task {
    _Atomic int32_t state;    /* tg_state */
    _Atomic int32_t deps;     /* unfinished predecessors, +1 "hold" until released */
    _Atomic int32_t poisoned; /* tg_poison */
    _Atomic int32_t final;    /* the final state, stored before the successor list is sealed */
    _Atomic int32_t thief;    /* 1 + index of the worker that stole it, or 0 */
    int32_t worker;           /* index of the worker it was handed to (-1 before) */
    uint8_t skip;             /* set at hand-out: 1 = do not run (poisoned or run cancelled);
                               * written and read by the worker it is handed to only */
    uint8_t stolen;           /* 1 = taken from another worker's deque (set at hand-out,
                               * or by the thief of a batch; 0 at creation) */
    _Atomic uint8_t interest; /* TG_WANTED / TG_DECIDED bits (tg_task_want, tg_task_run_skips) */
    uint8_t covered;          /* 1 = not counted in its run's live (tg_task_claim_child): set by
                               * the claim before the task is published, read by its finisher */
    _Atomic(tg_edge *) succ;  /* successors; TG_SEALED once finished */
    _Atomic(tg_run *) run;    /* set by the claim (relaxed: see tg_task_run) */
    struct tg_task *link;     /* for a list owned by whoever holds the task (pool.c's refused
                               * successors); never shared */
    uint64_t id;              /* number for the node's key: given by its owner when it is
                               * made, before anyone else can see it; never changed */
} tg_task;

/* Bits of tg_task.interest. */
enum {
    TG_WANTED = 1, /* a run other than the task's own needs its outcome (tg_task_want) */
    TG_DECIDED = 2 /* the hand-out of a task whose run was cancelled decided (tg_task_run_skips) */
};

/* Results of tg_task_depend. */
typedef enum {
    TG_DEP_NOMEM = -1,  /* out of memory: no edge */
    TG_DEP_WAIT = 0,    /* the edge was added: pred's finish will release succ */
    TG_DEP_DONE = 1,    /* pred had already finished with a result: nothing to wait for */
    TG_DEP_POISON = 2   /* pred had already failed or been cancelled: succ is poisoned */
} tg_dep_result;

/* Claims a NEW task for run: exactly one caller gets 1 (the task becomes PENDING with the hold
 * set and counts as live in run), every other caller gets 0 (it was claimed already). */
int tg_task_claim(tg_task *t, tg_run *run);
/* Claims a NEW task for run as a child covered by its parent: like tg_task_claim, but the task
 * is not counted in run->live, so its claim and finish touch no line shared with other workers
 * (Cilk's and rayon's fork-join). The caller promises that a task of the same run, counted or
 * covered in turn, stays unfinished until this one has finished (its parent, which syncs its
 * children before it finishes), or else holds the run (tg_run_hold) until then. */
int tg_task_claim_child(tg_task *t, tg_run *run);
/* Claims a NEW task for run, counted in run->live like tg_task_claim, but without adding to
 * live: the caller has added it beforehand for this task (tg_run_hold_n), so that a submitter
 * of many tasks touches the counter once per batch, not once per task (the workers finishing
 * the first tasks decrement the same line meanwhile). A lost claim uses nothing: the caller
 * keeps what it added for the next one, and gives back what is left (tg_run_release_n). */
int tg_task_claim_prepaid(tg_task *t, tg_run *run);
/* tg_task_claim_child and tg_task_release_hold in one, for a NEW task the caller has just made
 * and no other thread can reach yet: plain stores, no read-modify-write (the push that
 * publishes the task orders them for its runner). The task is READY. */
void tg_task_claim_fresh_child(tg_task *t, tg_run *run);
/* Claims a NEW task to be run at once by the caller, outside any pool (serial elision): 1 if
 * claimed (the task is RUNNING), 0 if someone else claimed it. Finish it with
 * tg_task_finish; its run is NULL, so no run's live count is involved. */
int tg_task_claim_inline(tg_task *t);
/* Records that succ (claimed, held) waits for pred (claimed). Safe while pred finishes
 * concurrently: the edge is either seen by pred's finish or not added (no lost, no double
 * release). TG_DEP_DONE / TG_DEP_POISON are returned only once pred's final state is visible
 * (tg_task_state), so succ released at once sees its predecessor finished. */
tg_dep_result tg_task_depend(tg_task *succ, tg_task *pred);
/* Drops the hold of a claimed task. Returns 1 when the task became READY (the caller must
 * queue it), else 0. */
int tg_task_release_hold(tg_task *t);
/* Marks a finished task and releases its successors. Each successor that becomes ready is
 * passed to ready(ctx, succ). Returns 1 if the finish ended the task's run (live reached 0).
 * The release store of the final state publishes everything the finisher wrote before the
 * call (a result, an exception). */
int tg_task_finish(tg_task *t, tg_state final, void (*ready)(void *ctx, tg_task *), void *ctx);
/* Asks that a claimed task not run. Returns 1 if this call stored the reason: the task has
 * not been handed out and never runs (it is handed out with skip=1, and its dependents are
 * cancelled too). Returns 0 if a reason was stored before or the task has started
 * (tg_task_start won): no effect. Exactly one of a cancel and the start wins. Release: a
 * hand-out that sees the reason sees what the canceller wrote before. */
int tg_task_cancel(tg_task *t, tg_poison why);
/* The hand-out's half of the race with tg_task_cancel: 1 if the task may run (it is marked
 * started: later cancels fail), 0 if a reason not to run was stored first. */
int tg_task_start(tg_task *t);
/* The poison reason (or TG_POISON_STARTED), read with acquire (pairs with the release in
 * tg_task_cancel). */
int tg_task_poisoned(const tg_task *t);
/* The run a claimed task belongs to (NULL: claimed inline, or not claimed yet). Relaxed: the
 * claim stores it after winning the state CAS; a thread that is not ordered after the claim
 * (it saw the state change, nothing more) may still read NULL and must treat that as "not
 * mine". Whoever is handed the task, or holds the run, reads the right value. */
tg_run *tg_task_run(const tg_task *t);
/* Someone outside the task's own run needs its outcome (a concurrent compute that found it
 * claimed, a join from another run, a waiter outside the workers): if its own run is
 * cancelled before the task is handed out, it runs anyway. A task whose own run's cancel
 * was decided first (tg_task_run_skips) stays skipped: one of the two comes first. */
void tg_task_want(tg_task *t);
/* At hand-out of a task whose run was cancelled: 1 if it must be skipped (nobody else wants
 * it), 0 if it runs for another run that wants it. */
int tg_task_run_skips(tg_task *t);
/* Whether a consumer waits for t (an edge was added and t has not finished): cheap, for the
 * "awaits its own consumer" check of a join. */
int tg_task_has_successors(const tg_task *t);
/* Whether another run wants the task (tg_task_want was called). */
int tg_task_wanted(const tg_task *t);
/* The state, read with acquire (pairs with the release store in tg_task_finish). */
int tg_task_state(const tg_task *t);
/* A submitter holds its run open while it adds tasks, so that the run cannot end (live reach 0)
 * between two submissions. tg_run_release returns 1 if dropping the hold ended the run. */
void tg_run_hold(tg_run *r);
int tg_run_release(tg_run *r);
/* The same for n holds at once (n >= 1): tg_task_claim_prepaid uses them up one per task. */
void tg_run_hold_n(tg_run *r, int64_t n);
int tg_run_release_n(tg_run *r, int64_t n);
/* Sets the run's cancelled flag: its tasks that have not started are handed out with skip=1. */
void tg_run_cancel(tg_run *r);
int tg_run_is_cancelled(const tg_run *r);
/* Claimed tasks of the run not finished yet (an estimate while the run is live). */
int64_t tg_run_live(const tg_run *r);
#ifdef TG_TEST_HOOKS
/* C tests only (built with -DTG_TEST_HOOKS; never in the extension): called by tg_task_finish
 * between sealing the successor list and storing the final state. */
extern void (*tg_test_after_seal)(tg_task *t);
#endif
/* Human-readable name of a state ("invalid" outside the enum). */
const char *tg_state_name(int state);

#endif
