/* Spawning and joining inside a running task: a spawned node goes onto the worker's own deque
 * (or, if it has dependencies, is submitted with its edges); a join refuses what could never
 * return and otherwise runs other work until the node is done (tg_join_wait, worker.c).
 *
 * Ownership (docs/design/native.md): a node claimed by tg_submit carries one strong reference
 * for the core, which the worker handed the node drops after the finish. A child spawned here
 * without dependencies is covered by its parent (tg_task_claim_child) and carries none: the
 * parent's `kids` list holds it until its runner has retired it (noderec.h). */
#include "join.h"

/* ---------------------------------------------------------------- spawning and joining */
int tg_spawn(Runner *W, NodeObject *n) {
    NodeObject *parent = W->current;
    tg_run *prun = tg_task_run(&parent->t);
    if (n->deps) { /* it waits for other nodes: wire its edges (submit.c) */
        PyObject *one = (PyObject *)n;
        return tg_submit(RUN_OF(prun), &one, 1, W, NULL) < 0 ? -1 : 0;
    }
    tg_node_set_parent(n, parent);
    atomic_store_explicit(&n->owner, W->engine, memory_order_relaxed); /* see noderec.h */
    /* Also the reference that keeps it alive in flight: it is covered. */
    NodeObject *pruned = tg_add_kid(parent, n, W->pool, W->index); /* pushed below */
    tg_push r;
    if (tg_fault(TG_FAULT_SPAWN)) { /* as if the deque could not grow */
        tg_task_claim_child(&n->t, prun);
        tg_task_release_hold(&n->t);
        r = TG_PUSH_NOMEM;
    } else {
        r = tg_pool_spawn_fresh(W->pool, W->index, &n->t, prun); /* made just now: ours alone */
    }
    /* Acquire: pairs with the release store that attaches a feed (csrc/py/feed.c). */
    tg_feedw *feed = atomic_load_explicit(&W->watch->feed, memory_order_acquire);
    if (feed && r == TG_PUSH_QUEUED) tg_feed_submitted(feed, n); /* n is held by its parent */
    if (r != TG_PUSH_QUEUED) {
        if (r != TG_PUSH_NOMEM) Py_FatalError("taskgraph: a new node was claimed twice"); /* invariant */
        /* Claimed and ready but not queued: it fails with MemoryError; nothing waits forever. */
        PyErr_NoMemory();
        tg_set_failing(n, PyErr_GetRaisedException());
        NodeObject *cur = tg_suspend_task(); /* its inputs' finalizers: as no task */
        tg_node_drop_inputs(n);
        tg_resume_task(cur);
        tg_finish(W, n, TG_FAILED);
        tg_node_retire(n, 1);
    }
    if (pruned) tg_drop_kids(W, pruned); /* once n is queued: their finalizers run as no task */
    return 0;
}

static int is_ancestor(NodeObject *a, NodeObject *of) {
    for (NodeObject *p = of ? tg_node_parent(of) : NULL; p; p = tg_node_parent(p))
        if (p == a) return 1;
    return 0;
}

/* The TaskgraphError of a join that could never return. */
static int join_refused(NodeObject *cur, NodeObject *n, NodeObject *via) {
    PyObject *key = tg_node_key(n), *ck = key ? tg_node_key(cur) : NULL;
    PyObject *vk = ck && via ? tg_node_key(via) : NULL;
    if (ck && n == cur)
        PyErr_Format(TG.TaskgraphError, "task %U called result() on its own node (it would "
                     "wait for itself forever)", key);
    else if (ck && !via)
        PyErr_Format(TG.TaskgraphError, "task %U awaits %U, one of the tasks that spawned it; "
                     "a task finishes only after its children (implicit sync), so this would "
                     "wait forever", ck, key);
    else if (vk)
        PyErr_Format(TG.TaskgraphError, "task %U awaits %U, which depends on %s%U; %U cannot "
                     "finish before this await returns, so it would wait forever", ck, key,
                     via == cur ? "this very task " : "a task that spawned it, ", vk, vk);
    Py_XDECREF(key);
    Py_XDECREF(ck);
    Py_XDECREF(vk);
    return -1;
}

int tg_join(Runner *W, NodeObject *n) {
    NodeObject *cur = W->current;
    if (n == cur || (tg_node_parent(n) != cur && is_ancestor(n, cur))) return join_refused(cur, n, NULL);
    tg_run *mine = tg_task_run(&cur->t);
    if (tg_task_state(&n->t) == TG_NEW) { /* a lazy node first needed here: joins this run */
        PyObject *one = (PyObject *)n;
        if (tg_submit(RUN_OF(mine), &one, 1, W, NULL) < 0) return -1;
    }
    if (tg_task_state(&n->t) >= TG_DONE) return 0;
    NodeObject *via = NULL;
    int dep = tg_depends_on_waiter(cur, n, &via);
    if (dep > 0 && tg_node_parent(n) == cur) /* our child, which can never run: the sync of cur
                                              * does not wait for it (never_runs_pending) */
        tg_task_cancel(&n->t, TG_POISON_CANCEL);
    if (dep) return dep < 0 ? -1 : join_refused(cur, n, via);
    if (tg_c_stack_below(W->stack_low)) {
        PyObject *err = tg_stack_error(cur, "joining another task");
        PyErr_SetRaisedException(err);
        return -1;
    }
    /* Claimed by another run (a concurrent compute, another scheduler): that run's cancel
     * must not skip it under us. */
    if (tg_task_run(&n->t) != mine) tg_task_want(&n->t);
    /* Relaxed owner: NULL (claimed inline, or a moment ago) counts as foreign: we poll. */
    int foreign = atomic_load_explicit(&n->owner, memory_order_relaxed) != (const void *)W->engine;
    if (foreign && tg_engine_check_owner(n) < 0) return -1; /* a run made before fork() */
    if (tg_join_wait(W, n, foreign) == TG_FIND_SHUTDOWN && tg_task_state(&n->t) < TG_DONE) {
        PyObject *key = tg_node_key(n), *ck = key ? tg_node_key(cur) : NULL;
        if (ck)
            PyErr_Format(TG.SchedulerClosedError, "%U closed while task %U waited for %U",
                         W->runs->label, ck, key);
        Py_XDECREF(key);
        Py_XDECREF(ck);
        return -1;
    }
    return 0;
}
