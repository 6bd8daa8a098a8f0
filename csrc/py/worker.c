/* The worker loop. One dispatch loop (tg_wait_until) serves a worker's whole life
 * (awaited == NULL) and every join's wait (awaited == the node; the join's checks are in
 * join.c): find a task in the pool (own deque, injector, steal, park), run or skip it, repeat.
 * Running a task never fails: whatever happens, the node is finished (done, failed or
 * cancelled) by the worker that took it. The trace observer (recorder.h) is called around
 * each task and in the idle hooks.
 *
 * Ownership (docs/design/native.md): a node claimed by tg_submit carries one strong reference
 * for the core; the worker that is handed the node owns it and that reference, and drops it
 * after the finish. A covered child (spawned without dependencies, join.c) carries none: its
 * parent's `kids` list holds it, and its runner retires it after the finish instead
 * (tg_node_retire), after which the parent may let go (tg_wait_retired). */
#include "worker.h"
#include "callbacks.h"

#include <sched.h>

static void idle_begin(void *ctx) {
    Runner *W = ctx;
    /* Nothing left to run at its outermost level (no task of its own is open): the Tasks it
     * leased may be freed now if nobody else holds them (lease.h). Python code may run (a
     * Task's finalizer): as no task, with nothing of the pool held. */
    if (W->depth == 0) tg_leases_release(&W->leases);
    tg_watch_idle_begin(W->watch); /* idle inside a traced task's join is join time */
    tg_feed_held_flush(); /* idle: the dashboard's results held are exact meanwhile */
    W->saved = PyEval_SaveThread(); /* nothing below touches Python objects */
}

static void idle_end(void *ctx) {
    Runner *W = ctx;
    PyEval_RestoreThread(W->saved);
    W->saved = NULL;
    tg_watch_idle_end(W->watch);
}

tg_idle_fn tg_idle_begin = idle_begin, tg_idle_end = idle_end;

/* ---------------------------------------------------------------- finishing */

/* n's done callbacks, now that its state is final (before its run ends: whoever waits for the
 * run sees them done). They run as no task's code: a task called in one builds a lazy node
 * rather than being spawned into whatever task this thread runs (a node.cancel() or a serial
 * run inside a task finishes nodes there). */
static void fire_callbacks(NodeObject *n) {
    if (!tg_callbacks_pending(n)) return;
    NodeObject *cur = tg_suspend_task();
    tg_callbacks_fire_slow(n, 0);
    tg_resume_task(cur);
}

void tg_finish(Runner *W, NodeObject *n, int final) {
    tg_task *refused = NULL;
    tg_run *run = tg_task_run(&n->t); /* read before the finish publishes n */
    int ended = W ? tg_pool_finish(W->pool, W->index, &n->t, (tg_state)final, &refused)
                  : tg_pool_finish(NULL, -1, &n->t, (tg_state)final, &refused);
    fire_callbacks(n);
    if (ended) tg_run_ended(RUN_OF(run));
    if (refused) tg_cancel_refused(refused);
}

/* The CancelledError for a node that will never run, naming why (never NULL: if building it
 * fails, the error that stopped it is returned instead). */
static PyObject *cancel_error(NodeObject *n) {
    PyObject *reason = NULL, *cause = NULL, *err = NULL;
    for (Py_ssize_t i = 0; n->deps && !reason && i < PyTuple_GET_SIZE(n->deps); i++) {
        NodeObject *d = (NodeObject *)PyTuple_GET_ITEM(n->deps, i);
        int st = tg_task_state(&d->t);
        if (st == TG_FAILED || st == TG_CANCELLED) {
            PyObject *key = tg_node_key(d);
            if (!key) goto fail;
            reason = tg_dependency_reason(key, st);
            Py_DECREF(key);
            if (!reason) goto fail;
            cause = Py_NewRef(d->value);
        }
    }
    NodeObject *parent = tg_node_parent(n);
    /* Acquire: pairs with the failing parent's release store (its value is then visible). */
    if (!reason && parent && atomic_load_explicit(&parent->failing, memory_order_acquire)) {
        PyObject *key = tg_node_key(parent);
        if (!key) goto fail;
        reason = PyUnicode_FromFormat("its parent task %U failed", key);
        Py_DECREF(key);
        if (!reason) goto fail;
        cause = Py_NewRef(parent->value);
    }
    /* Relaxed: requests (see tgpy.h). */
    if (!reason && (atomic_load_explicit(&n->cancel, memory_order_relaxed) & TG_CANCEL_ASKED))
        reason = PyUnicode_FromString("node.cancel() was called before it started");
    for (NodeObject *p = parent; !reason && p; p = tg_node_parent(p))
        if (atomic_load_explicit(&p->cancel, memory_order_relaxed)) {
            PyObject *key = tg_node_key(p);
            if (!key) goto fail;
            reason = PyUnicode_FromFormat("task %U, which spawned it, was cancelled", key);
            Py_DECREF(key);
            if (!reason) goto fail;
        }
    if (!reason && tg_task_run(&n->t)) {
        RunObject *run = RUN_OF(tg_task_run(&n->t));
        pthread_mutex_lock(&run->mu);
        reason = Py_XNewRef(run->reason);
        cause = Py_XNewRef(run->error);
        pthread_mutex_unlock(&run->mu);
        if (!reason && atomic_load_explicit(&run->engine->closed, memory_order_acquire))
            reason = PyUnicode_FromFormat("%U was closed before it ran", run->engine->label);
    }
    if (!reason && !PyErr_Occurred()) reason = PyUnicode_FromString("it was cancelled before it started");
    if (!reason) goto fail;
    PyObject *key = tg_node_key(n);
    err = key ? tg_cancelled_error(key, reason, cause) : NULL;
    Py_XDECREF(key);
    if (!err) goto fail;
    Py_XDECREF(reason);
    Py_XDECREF(cause);
    return err;
fail:
    Py_XDECREF(reason);
    Py_XDECREF(cause);
    err = PyErr_GetRaisedException();
    return err ? err : tg_memory_error();
}

void tg_cancel_refused(tg_task *refused) {
    NodeObject *cur = tg_suspend_task(); /* drops and callbacks below: as no task */
    while (refused) {
        tg_task *t = refused;
        refused = t->link;
        t->link = NULL;
        NodeObject *n = NODE_OF(t);
        n->value = cancel_error(n);
        tg_node_drop_inputs(n);
        tg_run *run = tg_task_run(t);
        tg_task *more = NULL;
        int ended = tg_pool_finish(NULL, -1, t, TG_CANCELLED, &more);
        fire_callbacks(n);
        if (ended) tg_run_ended(RUN_OF(run));
        if (more) { /* its successors were refused too: handle them in this loop */
            tg_task *tail = more;
            while (tail->link) tail = tail->link;
            tail->link = refused;
            refused = more;
        }
        Py_DECREF(n); /* the core's reference */
    }
    tg_resume_task(cur);
}

/* ---------------------------------------------------------------- failures */

/* Where a task runs in serial mode, for the note on its exception (tg_body_ops.where). */
static PyObject *serial_where(tg_body *b) {
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *th = threading ? PyObject_CallMethod(threading, "current_thread", NULL) : NULL;
    PyObject *name = th ? PyObject_GetAttrString(th, "name") : NULL;
    PyObject *where = name ? PyUnicode_FromFormat("(serial mode, thread %S)", name) : NULL;
    Py_XDECREF(name);
    Py_XDECREF(th);
    Py_XDECREF(threading);
    return where;
}

void tg_set_failing(NodeObject *n, PyObject *exc /* stolen */) {
    Py_XSETREF(n->value, exc);
    /* Release: pairs with the acquire in cancel_error (a child skipped because of us). */
    atomic_store_explicit(&n->failing, 1, memory_order_release);
}

/* A top-level task failed: fail fast, cancel the rest of its run. Not in an Executor's run,
 * whose calls are independent (each failure is its own future's, executor.c). */
static void fail_run(NodeObject *n) {
    /* Relaxed: set by _exec_hold before the run took its first call. */
    if (atomic_load_explicit(&RUN_OF(tg_task_run(&n->t))->exec, memory_order_relaxed)) return;
    /* "failed" only: the CancelledErrors that quote it add the failure (rules.c). */
    PyObject *reason = tg_node_format(n, "task %U failed");
    PyErr_Clear();
    tg_run_cancel_with(RUN_OF(tg_task_run(&n->t)), reason, n->value);
    Py_XDECREF(reason);
}

/* ---------------------------------------------------------------- running */

/* Calls the node's function with its arguments (Nodes inside replaced by their values). */
static inline __attribute__((always_inline)) PyObject *call_task(NodeObject *n) {
    Py_ssize_t total = Py_SIZE(n);
    if (!n->deps) return PyObject_Vectorcall(n->fn, n->args, (size_t)n->nargs, n->kwnames);
    PyObject *small[8], **sub = total <= 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)total);
    if (!sub) return PyErr_NoMemory();
    Py_ssize_t done = 0;
    PyObject *r = NULL;
    for (; done < total; done++) {
        sub[done] = tg_substitute(n->args[done], n->name);
        if (!sub[done]) break;
    }
    if (done == total) r = PyObject_Vectorcall(n->fn, sub, (size_t)n->nargs, n->kwnames);
    for (Py_ssize_t i = 0; i < done; i++) Py_DECREF(sub[i]);
    if (sub != small) PyMem_Free(sub);
    return r;
}

static tg_find wait_loop(Runner *W, NodeObject *awaited, int how);

/* Waits for n as a join (nested helping, counted in the join depth). The time it takes is
 * accounted by the tasks it runs and by its idle periods (see tg_frame). `foreign`: n may
 * finish without waking this pool (it belongs to another scheduler, or was claimed inline):
 * the join polls while parked. Past max_help_depth nested joins, or when the thread's C stack
 * runs low, it stops stealing (its own deque and the injector only). */
tg_find tg_join_wait(Runner *W, NodeObject *n, int foreign) {
    int how = W->depth < W->max_help_depth && !tg_c_stack_below(W->stack_low) ? TG_LOOK_STEAL : TG_LOOK_LOCAL;
    if (foreign) how |= TG_LOOK_POLL;
    W->depth++;
    tg_find r = wait_loop(W, n, how);
    W->depth--;
    return r;
}

/* A child that will never run and still waits for its dependencies (cancelled while PENDING):
 * the sync does not wait for it. It is finished, as cancelled, when its dependencies are; one
 * of them may be the syncing task itself (a child that consumes its parent's node). */
static int never_runs_pending(NodeObject *k) {
    int why = tg_task_poisoned(&k->t);
    return tg_task_state(&k->t) == TG_PENDING && why != TG_POISON_NONE && why != TG_POISON_STARTED;
}

/* The RecursionError of a task whose thread's C stack is too low for more nesting. */
PyObject *tg_stack_error(NodeObject *n, const char *doing) {
    tg_err_node(PyExc_RecursionError, n,
                "task %U: the worker thread's C stack is nearly exhausted while %s (tasks "
                "joined inside tasks, %d deep on this thread); recurse less deeply or "
                "switch to serial code below a cutoff", doing, TG_TLS.worker ? TG_TLS.worker->depth : 0);
    PyObject *err = PyErr_GetRaisedException();
    return err ? err : tg_memory_error();
}

/* A covered child's runner stores the state, then has a few stores left before its last
 * touch (no Python code: a child with done callbacks is retired before they run, see
 * finish_and_let_go). Detached while waiting (that runner may be the one stopping the world
 * for a collection). */
void tg_wait_retired(NodeObject *k) {
    Py_BEGIN_ALLOW_THREADS
    while (!tg_kid_retired(k)) sched_yield();
    Py_END_ALLOW_THREADS
}

/* Whether k, a child that will never run and still waits for its dependencies, waits only for
 * nodes that do not wait for n (the syncing task) or a task that spawned it: its dependencies
 * that n's submissions claimed are not n's children (submit.c), so the sync waits for them
 * through k, which is finished (as cancelled) when they are. */
static int waits_for_others(NodeObject *n, NodeObject *k) {
    NodeObject *via = NULL;
    int dep = tg_depends_on_waiter(n, k, &via);
    if (dep < 0) PyErr_Clear(); /* out of memory walking: not waited for, as before */
    return dep == 0;
}

/* Implicit sync at the end of a task (Cilk's sync, rayon's scope): the task finishes only
 * after every child it spawned. If it failed, children not started yet are cancelled first.
 * A child that failed and whose outcome nobody read makes the task fail with that error (no
 * error is lost: further ones are attached as notes). */
static void sync_kids(Runner *W, tg_body *b) {
    NodeObject *n = b->node;
    NodeObject *kids = n->kids;
    n->kids = NULL;
    n->nkids = 0;
    /* Relaxed: our own store. */
    int failing = atomic_load_explicit(&n->failing, memory_order_relaxed);
    for (NodeObject *k = kids; k && !failing; k = k->sibling) { /* a child waiting for us */
        NodeObject *via = NULL;
        if (never_runs_pending(k) || tg_depends_on_waiter(n, k, &via) <= 0) {
            PyErr_Clear();
            continue;
        }
        PyObject *key = tg_node_key(n), *kk = key ? tg_node_key(k) : NULL, *vk = kk ? tg_node_key(via) : NULL;
        if (vk)
            PyErr_Format(TG.TaskgraphError, "task %U spawned %U, which depends on %U: %U cannot "
                         "finish before its children (implicit sync), so they would wait for each "
                         "other forever", key, kk, vk, key);
        Py_XDECREF(key);
        Py_XDECREF(kk);
        Py_XDECREF(vk);
        PyObject *err = PyErr_GetRaisedException();
        tg_body_fail(b, err ? err : tg_memory_error());
        failing = 1;
    }
    if (!failing && tg_c_stack_below(W->stack_low)) { /* no room to run children nested: fail, skip them */
        tg_body_fail(b, tg_stack_error(n, "waiting for its children"));
        failing = 1;
    }
    if (failing)
        for (NodeObject *k = kids; k; k = k->sibling)
            if (tg_task_state(&k->t) < TG_DONE) tg_task_cancel(&k->t, TG_POISON_CANCEL);
    int closed = 0;
    for (NodeObject *k = kids; k && !closed; k = k->sibling)
        if (tg_task_state(&k->t) < TG_DONE && (!never_runs_pending(k) || waits_for_others(n, k)))
            closed = tg_join_wait(W, k, 0) == TG_FIND_SHUTDOWN;
    for (NodeObject *k = kids; k; k = k->sibling) tg_body_child(b, k); /* unread failures */
    if (closed) { /* cut short: children may still run, or wait in a queue, after we finish */
        tg_run_hold_until_drain(RUN_OF(tg_task_run(&n->t)), kids);
        return;
    }
    tg_drop_kids(W, kids); /* their finalizers run as no task (W->current is NULL already) */
}

/* The task runner's native backend (rules.h): W's C functions, no Python in between. */
typedef struct {
    Runner *W;
    tg_rec_start *rs;
} native_body;

/* W->current is the task only while its own code runs: from its call (argument substitution
 * included) to its sync. The sync, the notes on its exception, the trace record, the drops
 * and the finish that follow run as no task (docs/design/native.md, "Code that runs as no
 * task"): a task called there builds a lazy node instead of a child nobody would sync. */
static PyObject *native_call(tg_body *b) {
    ((native_body *)b->ctx)->W->current = b->node;
    return call_task(b->node);
}

static void native_sync(tg_body *b) {
    Runner *W = ((native_body *)b->ctx)->W;
    W->current = NULL;
    if (b->node->kids) sync_kids(W, b);
}

static void native_retrying(tg_body *b, int attempt) {
    native_body *c = b->ctx;
    if (c->rs->timed) tg_rec_attempt(c->W->watch, c->rs, b->node, attempt);
}

static int native_stop_asked(tg_body *b) { return tg_node_cancel_requested(b->node); }

static PyObject *worker_where(tg_body *b) {
    Runner *W = ((native_body *)b->ctx)->W;
    return PyUnicode_FromFormat("on worker %d of %U", W->index, W->runs->label);
}

static const tg_body_ops worker_ops = {native_call, native_sync, native_retrying,
                                       native_stop_asked, worker_where};
/* Inline (serial mode): no children to sync, no trace; the current task (serial mode inside a
 * task) stays what it is: a task called in serial mode runs inline, it never spawns. */
static PyObject *inline_call(tg_body *b) { return call_task(b->node); }
static const tg_body_ops inline_ops = {inline_call, NULL, NULL, native_stop_asked, serial_where};

/* An internal failure while finishing n (an injected fault in the tests): n fails with
 * BrokenSchedulerError and the engine is broken. */
static PyObject *internal_failure(Runner *W, NodeObject *n, const char *what) {
    PyObject *key = tg_node_key(n);
    PyObject *reason = key ? PyUnicode_FromFormat("internal error on worker %d of %U: %s of task "
                                                  "%U failed", W->index, W->runs->label, what, key) : NULL;
    Py_XDECREF(key);
    if (reason) tg_runs_break(W->runs, reason);
    PyObject *err = reason ? PyObject_CallOneArg(TG.BrokenSchedulerError, reason) : NULL;
    Py_XDECREF(reason);
    if (!err) err = PyErr_GetRaisedException();
    return err ? err : tg_memory_error();
}

static void skip(Runner *W, NodeObject *n);

/* The trace observer failed on n (an injected fault in the tests): an internal failure that
 * breaks the engine; n itself finishes as it would have. */
static void observer_failed(Runner *W, NodeObject *n) {
    PyObject *key = tg_node_key(n);
    PyObject *reason = key ? PyUnicode_FromFormat("internal error on worker %d of %U: the "
                                                  "trace recorder failed on task %U", W->index,
                                                  W->runs->label, key) : NULL;
    if (reason) tg_runs_break(W->runs, reason);
    PyErr_Clear();
    Py_XDECREF(key);
    Py_XDECREF(reason);
}

/* finish_and_let_go for a node with done callbacks. A covered child is retired before they run,
 * under a reference of our own: its parent's sync waits for its result, not for its callbacks
 * (docs/api/futures.md), so a callback that blocks never holds the parent up. */
static void let_go_with_callbacks(NodeObject *n, int covered, RunObject *ended, tg_task *refused) {
    if (covered) { /* the parent holds it until the retire: the increment comes first */
        Py_INCREF(n);
        tg_node_retire(n, 1);
    }
    fire_callbacks(n);
    if (ended) tg_run_ended(ended);
    if (refused) tg_cancel_refused(refused);
    Py_DECREF(n); /* ours, or the core's reference */
}

/* Finishes n, run or skipped on W, and lets go of it: the core's reference, or, for a
 * covered child, retiring it (noderec.h). */
static void finish_and_let_go(Runner *W, NodeObject *n, int final) {
    int covered = n->t.covered; /* read before the finish: n may be let go after it */
    tg_task *refused = NULL;
    tg_run *run = tg_task_run(&n->t); /* read before the finish publishes n */
    int ended = tg_pool_finish(W->pool, W->index, &n->t, (tg_state)final, &refused);
    if (tg_callbacks_pending(n)) {
        let_go_with_callbacks(n, covered, ended ? RUN_OF(run) : NULL, refused);
        return;
    }
    if (ended) tg_run_ended(RUN_OF(run));
    if (refused) tg_cancel_refused(refused);
    if (covered) tg_node_retire(n, 1); /* its parent's reference keeps it: our last touch */
    else Py_DECREF(n); /* the core's reference */
}

/* Runs node n, handed to W by the pool, and finishes it. W->current is NULL here (wait_loop):
 * the task is current only during its own call (native_call to native_sync). */
static void execute(Runner *W, NodeObject *n) {
    /* Relaxed: a hint (see RunObject.cancel_running). */
    NodeObject *parent = tg_node_parent(n);
    if (atomic_load_explicit(&RUN_OF(tg_task_run(&n->t))->cancel_running, memory_order_relaxed) &&
        parent && tg_node_cancel_asked(parent)) { /* its spawner was cancelled meanwhile */
        skip(W, n);
        return;
    }
    tg_rec_start rs;
    tg_rec_begin(W->watch, &rs, n);
    /* No recursion check of our own: every level of nested joins runs the task's Python
     * frame, which CPython counts (and, from 3.12, the C entry into it too). */
    native_body c = {W, &rs};
    tg_body b = {.ops = &worker_ops, .ctx = &c, .node = n, .retry = n->retry, .value = &n->value,
                 .failing = &n->failing};
    PyObject *res = tg_run_body(&b);
    if (res && tg_fault(TG_FAULT_RESULT)) { /* as if storing the result had failed */
        Py_CLEAR(res);
        tg_set_failing(n, internal_failure(W, n, "storing the result"));
        tg_body_note(&b);
    }
    int final = TG_DONE;
    if (res) {
        n->value = res;
    } else {
        final = TG_FAILED;
        if (!parent) fail_run(n);
    }
    rs.attempt = b.attempts - 1;
    if (rs.timed && tg_rec_end(W->watch, &rs, n, final) < 0) observer_failed(W, n);
    tg_node_drop_inputs(n); /* their finalizers run as no task */
    finish_and_let_go(W, n, final);
}

/* Finishes node n, handed to W with skip set, as cancelled. */
static void skip(Runner *W, NodeObject *n) {
    tg_rec_start rs;
    tg_rec_begin(W->watch, &rs, n);
    n->value = cancel_error(n);
    if (rs.timed && tg_rec_end(W->watch, &rs, n, TG_CANCELLED) < 0) observer_failed(W, n);
    tg_node_drop_inputs(n); /* their finalizers run as no task */
    finish_and_let_go(W, n, TG_CANCELLED);
}

/* An injected fault stops worker W between two tasks (its thread ends: work() raises). */
static tg_find worker_dies(Runner *W) {
    W->died = 1;
    return TG_FIND_SHUTDOWN;
}

/* The one dispatch loop. What it runs (other tasks, skips, their finishing) runs as no task
 * of the joiner's: each task is current during its own call only; the joiner is again when
 * the loop returns. */
static tg_find wait_loop(Runner *W, NodeObject *awaited, int how) {
    tg_pool *pool = W->pool;
    tg_task *want = awaited ? &awaited->t : NULL, *t;
    NodeObject *joiner = W->current;
    W->current = NULL;
    tg_find r;
    for (;;) {
        r = tg_pool_find(pool, W->index, want, how, W, &t);
        if (r == TG_FIND_RUN) execute(W, NODE_OF(t));
        else if (r == TG_FIND_SKIP) skip(W, NODE_OF(t));
        else break;
        if (!awaited && tg_fault(TG_FAULT_WORKER)) {
            r = worker_dies(W);
            break;
        }
    }
    W->watch->fresh = 0; /* back to the joiner's code: the next begin reads the clock */
    W->current = joiner;
    return r;
}

tg_find tg_wait_until(Runner *W, NodeObject *awaited) {
    if (awaited) return tg_join_wait(W, awaited, 0);
    tg_find r = wait_loop(W, NULL, TG_LOOK_STEAL);
    tg_feed_held_flush(); /* the worker's loop ends: what it counted joins the total */
    return r;
}

void tg_drain_one(Runner *W, tg_task *t) { skip(W, NODE_OF(t)); }

/* ---------------------------------------------------------------- what joins share */

/* Whether the pending node n waits, directly or through other pending nodes, for cur or one
 * of the tasks that spawned it (which cannot finish before cur's join of n returns): then
 * *via is that task (borrowed; it is running). Cheap in the common cases: only a node still
 * waiting for dependencies (PENDING) can depend on anything, and only a running task that has
 * consumers (edges) can be depended on; the walk visits pending nodes only. -1 on error. */
int tg_depends_on_waiter(NodeObject *cur, NodeObject *n, NodeObject **via) {
    if (tg_task_state(&n->t) != TG_PENDING) return 0;
    int any = 0;
    for (NodeObject *w = cur; w && !any; w = tg_node_parent(w)) any = tg_task_has_successors(&w->t);
    if (!any) return 0;
    PyObject *seen = PySet_New(NULL), *todo = PyList_New(0);
    int found = 0;
    if (!seen || !todo || PyList_Append(todo, (PyObject *)n) < 0 || PySet_Add(seen, (PyObject *)n) < 0) {
        found = -1;
        goto done;
    }
    while (!found && PyList_GET_SIZE(todo) > 0) {
        Py_ssize_t last = PyList_GET_SIZE(todo) - 1;
        PyObject *x = PyList_GetItemRef(todo, last); /* ours: the list is private */
        if (!x || PyList_SetSlice(todo, last, last + 1, NULL) < 0) {
            Py_XDECREF(x);
            found = -1;
            break;
        }
        PyObject *deps;
        Py_BEGIN_CRITICAL_SECTION(x); /* pairs with tg_node_drop_inputs */
        deps = Py_XNewRef(((NodeObject *)x)->deps);
        Py_END_CRITICAL_SECTION();
        Py_DECREF(x);
        for (Py_ssize_t i = 0; deps && !found && i < PyTuple_GET_SIZE(deps); i++) {
            NodeObject *d = (NodeObject *)PyTuple_GET_ITEM(deps, i); /* held by deps */
            for (NodeObject *w = cur; w; w = tg_node_parent(w))
                if (d == w) {
                    *via = w;
                    found = 1;
                    break;
                }
            if (found || tg_task_state(&d->t) != TG_PENDING) continue;
            int had = PySet_Contains(seen, (PyObject *)d);
            if (had < 0 || (!had && (PySet_Add(seen, (PyObject *)d) < 0 ||
                                     PyList_Append(todo, (PyObject *)d) < 0)))
                found = -1;
        }
        Py_XDECREF(deps);
    }
done:
    Py_XDECREF(seen);
    Py_XDECREF(todo);
    return found;
}

void tg_finish_external(NodeObject *n, int final, PyObject *value) {
    NodeObject *cur = tg_suspend_task(); /* node.cancel() in a task: drops and callbacks as no task */
    n->value = Py_NewRef(value);
    if (final == TG_FAILED) atomic_store_explicit(&n->failing, 1, memory_order_release); /* see set_failing */
    tg_node_drop_inputs(n);
    tg_finish(NULL, n, final);
    tg_resume_task(cur);
}

/* ---------------------------------------------------------------- serial elision */

int tg_run_inline(NodeObject *n) {
    if (tg_c_stack_low()) { /* serial calls nested this deep would overflow the C stack */
        return tg_err_node(PyExc_RecursionError, n, "task %U: serial calls nested too deeply for "
                           "this thread's C stack");
    }
    if (!tg_task_claim_inline(&n->t)) return 0;
    for (Py_ssize_t i = 0; n->deps && i < PyTuple_GET_SIZE(n->deps); i++) {
        NodeObject *d = (NodeObject *)PyTuple_GET_ITEM(n->deps, i);
        int st = tg_task_state(&d->t);
        if (st == TG_DONE) continue;
        PyObject *key = tg_node_key(n), *dk = key ? tg_node_key(d) : NULL;
        PyObject *reason = dk ? tg_dependency_reason(dk, st) : NULL;
        PyObject *err = reason ? tg_cancelled_error(key, reason, st > TG_DONE ? d->value : NULL) : NULL;
        Py_XDECREF(key);
        Py_XDECREF(dk);
        Py_XDECREF(reason);
        n->value = err ? err : PyErr_GetRaisedException();
        tg_node_drop_inputs(n);
        tg_finish(NULL, n, TG_CANCELLED);
        return 1;
    }
    tg_body b = {.ops = &inline_ops, .node = n, .retry = n->retry, .value = &n->value,
                 .failing = &n->failing};
    PyObject *res = tg_run_body(&b);
    int final = TG_DONE, reraise = 0;
    if (res) {
        n->value = res;
    } else {
        final = TG_FAILED;
        reraise = PyErr_GivenExceptionMatches(n->value, PyExc_KeyboardInterrupt) ||
                  PyErr_GivenExceptionMatches(n->value, PyExc_SystemExit);
    }
    tg_node_drop_inputs(n);
    tg_finish(NULL, n, final);
    if (reraise) {
        PyErr_SetRaisedException(Py_NewRef(n->value));
        return -1;
    }
    return 1;
}
