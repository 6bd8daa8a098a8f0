/* Submitting a lazy graph in one call: every NEW node under the targets is claimed for the
 * run (exactly one claimer wins, so a node shared by several consumers or by concurrent
 * computes runs once), its edges are wired once its dependencies are claimed, and it is
 * released (queued when nothing holds it back). Iterative: chains of any length. */
#include "submit.h"

#define READY_BATCH 4096 /* ready nodes injected at once from outside the workers */
#define LIVE_BATCH 1024  /* from outside the workers, claims prepaid on the run's live count at
                          * a time: the workers finishing the first nodes decrement that count
                          * meanwhile, and one atomic add per node on the shared line cost a
                          * lazy compute of 100,000 trivial nodes about 14% of the main
                          * thread's time (perf) */

typedef struct {
    NodeObject *n; /* borrowed: reachable from the targets through dependency tuples */
    int wire;      /* 0: claim it; 1: claimed and held: wire its edges, release it */
    int target;    /* one of the nodes given (not a dependency found below them) */
} entry;

typedef struct {
    entry *e;
    Py_ssize_t n, cap;
} stack;

static int push(stack *s, NodeObject *n, int wire, int target) {
    if (s->n == s->cap) {
        Py_ssize_t cap = s->cap ? s->cap * 2 : 256;
        entry *ne = PyMem_Realloc(s->e, sizeof(entry) * (size_t)cap);
        if (!ne) {
            PyErr_NoMemory();
            return -1;
        }
        s->e = ne;
        s->cap = cap;
    }
    s->e[s->n++] = (entry){n, wire, target};
    return 0;
}

typedef struct {
    RunObject *run;
    Runner *W;          /* NULL: from outside the workers */
    tg_task *ready[READY_BATCH];
    int nready;
    tg_task *refused;   /* ready nodes that could not be queued: cancelled at the end */
    tg_feedw *feed;     /* W's live feed if attached (W set) */
    tg_feednames *outside; /* the engine's feed names if a feed is attached (W NULL) */
    PyObject *ckey;     /* tg_feed_submitted_outside's cache */
    int32_t cval;
} submitter;

/* Where the dashboard counts this submission's nodes (livefeed.h), if a feed is attached. */
static void find_feed(submitter *s) {
    /* Acquire: pairs with the release store that attaches a feed (csrc/py/feed.c). */
    tg_feedw *f = atomic_load_explicit(s->W ? &s->W->watch->feed : &s->run->engine->watch0->feed,
                                       memory_order_acquire);
    s->feed = s->W ? f : NULL;
    s->outside = !s->W && f ? f->names : NULL;
    s->ckey = NULL;
    s->cval = 0;
}

static void count_submitted(submitter *s, NodeObject *n) {
    if (s->feed) tg_feed_submitted(s->feed, n);
    else if (s->outside) tg_feed_submitted_outside(s->outside, n, &s->ckey, &s->cval);
}

/* Queues the ready batch (outside the workers). */
static void flush(submitter *s) {
    if (!s->nready) return;
    tg_push r = tg_pool_inject(s->run->r.pool, s->ready, s->nready);
    if (r != TG_PUSH_QUEUED) { /* shut down (closed meanwhile) or out of memory */
        PyObject *why = PyUnicode_FromFormat(r == TG_PUSH_REFUSED ? "%U was closed before it ran"
                                             : "out of memory while queueing it", s->run->engine->label);
        PyErr_Clear();
        tg_run_cancel_with(s->run, why, NULL);
        Py_XDECREF(why);
        for (int i = 0; i < s->nready; i++) {
            s->ready[i]->link = s->refused;
            s->refused = s->ready[i];
        }
    }
    s->nready = 0;
}

/* Drops the hold of a claimed node: queues it if nothing else holds it back. */
static void release(submitter *s, NodeObject *n) {
    if (s->W) {
        tg_push r = tg_pool_release(s->run->r.pool, s->W->index, &n->t);
        if (r == TG_PUSH_NOMEM) {
            PyObject *why = PyUnicode_FromString("out of memory while queueing it");
            PyErr_Clear();
            tg_run_cancel_with(s->run, why, NULL);
            Py_XDECREF(why);
            n->t.link = s->refused;
            s->refused = &n->t;
        }
        return;
    }
    if (!tg_task_release_hold(&n->t)) return;
    s->ready[s->nready++] = &n->t;
    if (s->nready == READY_BATCH) flush(s);
}

/* Adds the edges from n's dependencies (all claimed by now, by us or by someone else). */
static int wire(NodeObject *n) {
    for (Py_ssize_t i = 0; n->deps && i < PyTuple_GET_SIZE(n->deps); i++) {
        NodeObject *d = (NodeObject *)PyTuple_GET_ITEM(n->deps, i);
        if (tg_fault(TG_FAULT_EDGE) || tg_task_depend(&n->t, &d->t) == TG_DEP_NOMEM) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

/* n was claimed by someone else (or is finished): if it is still to run in another run, that
 * run's cancel must not skip it while this one needs it (tg_task_want). Returns 1 then. */
static int want_if_foreign(NodeObject *n, RunObject *run) {
    if (tg_task_state(&n->t) >= TG_DONE || tg_task_run(&n->t) == &run->r) return 0;
    tg_task_want(&n->t);
    return 1;
}

Py_ssize_t tg_submit(RunObject *run, PyObject *const *nodes, Py_ssize_t count, Runner *W,
                     Py_ssize_t *others) {
    NodeObject *parent = W ? W->current : NULL;
    if (!W) {
        if (tg_runs_add(run->engine, run) < 0) return -1;
        tg_run_hold(&run->r); /* the run cannot end between two of our releases */
    }
    submitter *s = PyMem_Malloc(sizeof *s);
    if (!s) {
        PyErr_NoMemory();
        if (!W && tg_run_release(&run->r)) tg_run_ended(run);
        return -1;
    }
    s->run = run;
    s->W = W;
    s->nready = 0;
    s->refused = NULL;
    find_feed(s);
    stack st = {NULL, 0, 0};
    Py_ssize_t claimed = 0, foreign = 0;
    int64_t prepaid = 0; /* from outside: holds on the run's live count not used by a claim yet */
    int err = 0;
    NodeObject *pruned = NULL; /* children the parent let go of: dropped at the end */
    for (Py_ssize_t i = count - 1; i >= 0 && !err; i--) err = push(&st, (NodeObject *)nodes[i], 0, 1);
    while (!err && st.n > 0) {
        entry en = st.e[--st.n];
        NodeObject *n = en.n;
        if (en.wire) {
            if (wire(n) < 0) {
                st.n++; /* still held: released below, as cancelled */
                err = -1;
                break;
            }
            release(s, n);
            continue;
        }
        if (tg_task_state(&n->t) != TG_NEW) { /* finished, or claimed: edges wait for it */
            foreign += want_if_foreign(n, run);
            continue;
        }
        if (tg_fault(TG_FAULT_CLAIM)) {
            PyErr_NoMemory();
            err = -1;
            break;
        }
        if (!W && (claimed & 0xFFFF) == 0xFFFF && PyErr_CheckSignals() < 0) { /* Ctrl-C */
            err = -1;
            break;
        }
        if (push(&st, n, 1, 0) < 0) { /* room first: a claimed node is never left off the stack */
            err = -1;
            break;
        }
        if (!W && prepaid == 0) {
            tg_run_hold_n(&run->r, LIVE_BATCH);
            prepaid = LIVE_BATCH;
        }
        if (!(W ? tg_task_claim(&n->t, &run->r) : tg_task_claim_prepaid(&n->t, &run->r))) {
            st.n--;
            foreign += want_if_foreign(n, run);
            continue;
        }
        if (!W) prepaid--;
        Py_INCREF(n); /* the core's reference, until the node is finished */
        atomic_store_explicit(&n->owner, run->owner, memory_order_relaxed); /* see noderec.h */
        /* Submitted from inside a task: part of it (implicit sync). Only the nodes given are
         * its children: one finishes only after every node below it that this submission
         * claimed (they are its dependencies, directly or not), so the task's sync waits for
         * them through it (worker.c's sync_kids), and they are held only by their dependents'
         * arguments, as a lazy graph computed outside: an intermediate value is freed once
         * its dependents have run, not at the task's end. */
        if (parent && en.target) {
            tg_node_set_parent(n, parent);
            NodeObject *gone = tg_add_kid(parent, n, NULL, 0); /* it may finish anywhere */
            while (gone) { /* no Python code in this loop: kept for the end */
                NodeObject *next = gone->sibling;
                gone->sibling = pruned;
                pruned = gone;
                gone = next;
            }
        } else if (parent) {
            tg_node_set_parent(n, parent); /* its task: cancelled with it, named in errors */
        }
        claimed++;
        count_submitted(s, n);
        for (Py_ssize_t i = n->deps ? PyTuple_GET_SIZE(n->deps) - 1 : -1; i >= 0 && !err; i--) {
            NodeObject *d = (NodeObject *)PyTuple_GET_ITEM(n->deps, i);
            if (tg_task_state(&d->t) == TG_NEW) err = push(&st, d, 0, 0);
            else foreign += want_if_foreign(d, run);
        }
    }
    if (err) {
        /* Interrupted (Ctrl-C, out of memory): cancel the run, then release what we hold so
         * that it drains as cancelled and the run can end. Nothing is left waiting forever. */
        PyObject *exc = PyErr_GetRaisedException();
        PyObject *why = PyUnicode_FromFormat("the submission was interrupted (%s)",
                                             exc ? Py_TYPE(exc)->tp_name : "error");
        PyErr_Clear();
        tg_run_cancel_with(run, why, NULL);
        Py_XDECREF(why);
        for (Py_ssize_t i = st.n - 1; i >= 0; i--)
            if (st.e[i].wire) release(s, st.e[i].n);
        PyErr_SetRaisedException(exc);
    }
    if (!W) flush(s);
    tg_task *refused = s->refused;
    PyMem_Free(s);
    PyMem_Free(st.e);
    if (refused || pruned) {
        PyObject *exc = PyErr_GetRaisedException();
        if (refused) tg_cancel_refused(refused);
        if (pruned) tg_drop_kids(W, pruned); /* as no task (pruned only with a parent: W is set) */
        PyErr_SetRaisedException(exc);
    }
    /* Our hold and the prepaid claims not used, given back at once. */
    if (!W && tg_run_release_n(&run->r, prepaid + 1)) tg_run_ended(run);
    if (others) *others = foreign;
    return err ? -1 : claimed;
}

int tg_submit_one(RunObject *run, NodeObject *n) {
    /* Acquire: pairs with the release of the engine's mutex that begin_close sets it under. */
    if (atomic_load_explicit(&run->engine->closed, memory_order_acquire)) {
        PyErr_Format(TG.SchedulerClosedError, "%U is closed", run->engine->label);
        if (tg_run_release(&run->r)) tg_run_ended(run); /* the caller's hold, unused */
        return -1;
    }
    if (n->deps || !tg_task_claim_prepaid(&n->t, &run->r)) /* invariant: the caller made it just now */
        Py_FatalError("taskgraph: tg_submit_one was given a claimed node or one with Node arguments");
    Py_INCREF(n); /* the core's reference, until the node is finished (worker.c) */
    atomic_store_explicit(&n->owner, run->owner, memory_order_relaxed); /* see noderec.h */
    if (!tg_task_release_hold(&n->t)) Py_FatalError("taskgraph: a node without dependencies was not ready");
    /* Acquire: pairs with the release store that attaches a feed (csrc/py/feed.c). */
    tg_feedw *f = atomic_load_explicit(&run->engine->watch0->feed, memory_order_acquire);
    if (f) tg_feed_submitted_outside(f->names, n, NULL, NULL);
    tg_task *t = &n->t;
    tg_push r = tg_pool_inject(run->r.pool, &t, 1);
    if (r == TG_PUSH_QUEUED) return 0;
    t->link = NULL;
    tg_cancel_refused(t); /* finished as cancelled (why: the engine closed); drops the core's reference */
    if (r == TG_PUSH_REFUSED) PyErr_Format(TG.SchedulerClosedError, "%U is closed", run->engine->label);
    else PyErr_NoMemory();
    return -1;
}
