/* The worker loop and joins. One dispatch loop (tg_wait_until) serves a worker's whole life
 * (awaited == NULL) and every join (awaited == the node): find a task in the pool (own deque,
 * injector, steal, park), run or skip it, repeat. Running a task never fails: whatever
 * happens, the node is finished (done, failed or cancelled) by the worker that took it.
 *
 * Ownership (docs/design/native.md): a claimed node carries one strong reference for the core
 * (taken at claim, in tg_spawn / submit.c); the worker that is handed the node owns it and
 * that reference, and drops it after the finish. */
#include "tgpy.h"
#include "callbacks.h"

/* The task running on W (innermost), if it is being traced: its joins are timed. */
static inline tg_frame *traced_frame(Worker *W) {
    int top = W->nframes - 1;
    return top >= 0 && top < W->capframes && W->frames[top].traced ? &W->frames[top] : NULL;
}

static void idle_begin(void *ctx) {
    Worker *W = ctx;
    if (traced_frame(W)) { /* idle inside a traced task's join: that is join time */
        W->idle_t0 = tg_clock_ticks();
        W->idle_g0 = tg_trace_gc_ticks();
    }
    W->saved = PyEval_SaveThread(); /* nothing below touches Python objects */
}

static void idle_end(void *ctx) {
    Worker *W = ctx;
    PyEval_RestoreThread(W->saved);
    W->saved = NULL;
    tg_frame *f = traced_frame(W);
    if (f) {
        f->join += tg_clock_ticks() - W->idle_t0;
        f->join_gc += tg_trace_gc_ticks() - W->idle_g0;
    }
}

tg_idle_fn tg_idle_begin = idle_begin, tg_idle_end = idle_end;

/* ---------------------------------------------------------------- frames (own-time accounting) */

/* Pushes a frame for a task starting on W. If the stack cannot grow (out of memory) the
 * frame is counted but not stored: frames above capframes are never read. */
static void push_frame(Worker *W) {
    if (W->nframes == W->capframes) {
        int cap = W->capframes ? W->capframes * 2 : 64;
        tg_frame *nf = PyMem_RawRealloc(W->frames, sizeof(tg_frame) * (size_t)cap);
        if (nf) {
            W->frames = nf;
            W->capframes = cap;
        }
    }
    if (W->nframes < W->capframes) W->frames[W->nframes] = (tg_frame){0, 0, 0};
    W->nframes++;
}

static tg_frame pop_frame(Worker *W) {
    W->nframes--;
    return W->nframes < W->capframes ? W->frames[W->nframes] : (tg_frame){0, 0, 0};
}

/* ---------------------------------------------------------------- finishing */

/* Finishes n (W: the worker finishing it, or NULL) and handles what that causes: the end of
 * its run, and successors that a shut-down pool refused. */
static void finish(Worker *W, NodeObject *n, int final) {
    tg_task *refused = NULL;
    tg_run *run = tg_task_run(&n->t); /* read before the finish publishes n */
    int ended = W ? tg_pool_finish(W->engine->pool, W->index, &n->t, (tg_state)final, &refused)
                  : tg_pool_finish(NULL, -1, &n->t, (tg_state)final, &refused);
    tg_callbacks_fire(n); /* n's done callbacks, now that its state is final (before its run ends) */
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
            reason = PyUnicode_FromFormat("its dependency %U %s", key,
                                          st == TG_FAILED ? "failed" : "was cancelled");
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
    PyObject *msg = key ? PyUnicode_FromFormat("task %U was cancelled: %U", key, reason) : NULL;
    Py_XDECREF(key);
    err = msg ? PyObject_CallOneArg(TG.CancelledError, msg) : NULL;
    Py_XDECREF(msg);
    if (!err) goto fail;
    if (cause) PyException_SetCause(err, Py_NewRef(cause));
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
        tg_callbacks_fire(n); /* n's done callbacks, now that its state is final (before its run ends) */
        if (ended) tg_run_ended(RUN_OF(run));
        if (more) { /* its successors were refused too: handle them in this loop */
            tg_task *tail = more;
            while (tail->link) tail = tail->link;
            tail->link = refused;
            refused = more;
        }
        Py_DECREF(n); /* the core's reference */
    }
}

/* ---------------------------------------------------------------- failures */

/* ---- The rules of a failed call, in one place. The dask backend runs tasks in Python on
 * other processes; it calls these through the module (core._note_origin, _note_attempts,
 * _note_sibling, _retry_wanted) instead of restating them. Notes are a courtesy: an exception
 * object that refuses attributes keeps its own error, and none of these raises. */

/* Adds one note naming the task `key` and where it ran (`where`, e.g. "on worker 0 of <...>")
 * to exc, unless exc has one already (it is not noted again at each parent it propagates
 * through). */
void tg_note_origin(PyObject *exc, PyObject *key, PyObject *where) {
    PyObject *mark = NULL, *note = NULL, *r = NULL;
    if (PyObject_GetOptionalAttr(exc, TG.str_taskgraph_task, &mark) < 0) goto done;
    if (mark && mark != Py_None) goto done;
    if (PyObject_SetAttr(exc, TG.str_taskgraph_task, key) < 0) goto done;
    note = PyUnicode_FromFormat("taskgraph: raised by task %U %U", key, where);
    if (note) r = PyObject_CallMethodOneArg(exc, TG.str_add_note, note);
done:
    PyErr_Clear();
    Py_XDECREF(mark);
    Py_XDECREF(note);
    Py_XDECREF(r);
}

/* Adds a note saying the task failed `attempts` times with `retries` retries. */
void tg_note_attempts(PyObject *exc, PyObject *key, int attempts, PyObject *retries) {
    PyObject *note = PyUnicode_FromFormat("taskgraph: task %U failed %d times (retries=%S)", key,
                                          attempts, retries);
    PyObject *r = note ? PyObject_CallMethodOneArg(exc, TG.str_add_note, note) : NULL;
    PyErr_Clear();
    Py_XDECREF(note);
    Py_XDECREF(r);
}

/* Adds to exc a note about another child (kkey, failed with kexc) of the task pkey whose
 * failure nobody observed. */
void tg_note_sibling(PyObject *exc, PyObject *pkey, PyObject *kkey, PyObject *kexc) {
    if (kexc == exc) return;
    PyObject *note = PyUnicode_FromFormat("taskgraph: task %U also had child task %U fail, "
                                          "unobserved: %s: %S", pkey, kkey, Py_TYPE(kexc)->tp_name, kexc);
    PyObject *r = note ? PyObject_CallMethodOneArg(exc, TG.str_add_note, note) : NULL;
    PyErr_Clear();
    Py_XDECREF(note);
    Py_XDECREF(r);
}

/* Whether failed attempt `attempt` (0 for the first) with exception exc is run again, for a
 * task with these retry options ((retries, retry_on) or NULL): retries left, and exc is one of
 * the retry_on classes (a cancellation or a closed scheduler never is: running again cannot
 * help). The caller also checks that nobody asked the task to stop. */
int tg_retry_wanted(PyObject *retry, PyObject *exc, int attempt) {
    if (!retry || attempt >= PyLong_AsLong(PyTuple_GET_ITEM(retry, 0))) return 0;
    return PyErr_GivenExceptionMatches(exc, PyTuple_GET_ITEM(retry, 1)) &&
           !PyErr_GivenExceptionMatches(exc, TG.CancelledError) &&
           !PyErr_GivenExceptionMatches(exc, TG.SchedulerClosedError);
}

/* note_origin for a node run by W (or inline, W NULL). */
static void note_origin(PyObject *exc, NodeObject *n, Worker *W) {
    PyObject *key = tg_node_key(n), *where = NULL;
    if (key && W) {
        where = PyUnicode_FromFormat("on worker %d of %U", W->index, W->engine->label);
    } else if (key) {
        PyObject *threading = PyImport_ImportModule("threading");
        PyObject *th = threading ? PyObject_CallMethod(threading, "current_thread", NULL) : NULL;
        PyObject *name = th ? PyObject_GetAttrString(th, "name") : NULL;
        if (name) where = PyUnicode_FromFormat("(serial mode, thread %S)", name);
        Py_XDECREF(name);
        Py_XDECREF(th);
        Py_XDECREF(threading);
    }
    if (where) tg_note_origin(exc, key, where);
    PyErr_Clear();
    Py_XDECREF(key);
    Py_XDECREF(where);
}

static void note_sibling(PyObject *exc, NodeObject *parent, NodeObject *k) {
    PyObject *pkey = tg_node_key(parent), *key = pkey ? tg_node_key(k) : NULL;
    if (key) tg_note_sibling(exc, pkey, key, k->value);
    PyErr_Clear();
    Py_XDECREF(pkey);
    Py_XDECREF(key);
}

static void set_failing(NodeObject *n, PyObject *exc /* stolen */) {
    Py_XSETREF(n->value, exc);
    /* Release: pairs with the acquire in cancel_error (a child skipped because of us). */
    atomic_store_explicit(&n->failing, 1, memory_order_release);
}

/* A top-level task failed: fail fast, cancel the rest of its run. */
static void fail_run(NodeObject *n) {
    PyObject *key = tg_node_key(n);
    PyObject *reason = key ? PyUnicode_FromFormat("task %U failed (%s)", key, Py_TYPE(n->value)->tp_name) : NULL;
    PyErr_Clear();
    tg_run_cancel_with(RUN_OF(tg_task_run(&n->t)), reason, n->value);
    Py_XDECREF(key);
    Py_XDECREF(reason);
}

/* ---------------------------------------------------------------- running */

/* Calls the node's function with its arguments (Nodes inside replaced by their values). */
static PyObject *call_task(NodeObject *n) {
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

static tg_find wait_loop(Worker *W, NodeObject *awaited, int how);
static int depends_on_waiter(NodeObject *cur, NodeObject *n, NodeObject **via);

/* Waits for n as a join (nested helping, counted in the join depth). The time it takes is
 * accounted by the tasks it runs and by its idle periods (see tg_frame). `foreign`: n may
 * finish without waking this pool (it belongs to another scheduler, or was claimed inline):
 * the join polls while parked. Past max_help_depth nested joins, or when the thread's C stack
 * runs low, it stops stealing (its own deque and the injector only). */
static tg_find join_wait(Worker *W, NodeObject *n, int foreign) {
    int how = W->depth < W->engine->max_help_depth && !tg_c_stack_low() ? TG_LOOK_STEAL : TG_LOOK_LOCAL;
    if (foreign) how |= TG_LOOK_POLL;
    W->depth++;
    tg_find r = wait_loop(W, n, how);
    W->depth--;
    return r;
}

/* Add n to parent's children (a strong reference). At powers of two from 64 children,
 * children that no sync needs any more are forgotten: finished with a result, or finished
 * and their outcome read. So a task that spawns and joins many children in a loop, with or
 * without Node arguments (tg_submit links those here too), keeps a bounded number alive. */
void tg_add_kid(NodeObject *parent, NodeObject *n) {
    n->sibling = parent->kids;
    parent->kids = (NodeObject *)Py_NewRef((PyObject *)n);
    int32_t c = ++parent->nkids;
    if (c < 64 || (c & (c - 1))) return;
    NodeObject **link = &parent->kids;
    while (*link) {
        NodeObject *k = *link;
        int st = tg_task_state(&k->t);
        /* Relaxed `seen`: set by whoever read the outcome, usually this thread. */
        if (st == TG_DONE || (st > TG_DONE && atomic_load_explicit(&k->seen, memory_order_relaxed))) {
            *link = k->sibling;
            k->sibling = NULL;
            parent->nkids--;
            Py_DECREF(k);
        } else {
            link = &k->sibling;
        }
    }
}

/* A child that will never run and still waits for its dependencies (cancelled while PENDING):
 * the sync does not wait for it. It is finished, as cancelled, when its dependencies are; one
 * of them may be the syncing task itself (a child that consumes its parent's node). */
static int never_runs_pending(NodeObject *k) {
    int why = tg_task_poisoned(&k->t);
    return tg_task_state(&k->t) == TG_PENDING && why != TG_POISON_NONE && why != TG_POISON_STARTED;
}

/* The RecursionError of a task whose thread's C stack is too low for more nesting. */
static PyObject *stack_error(NodeObject *n, const char *doing) {
    PyObject *key = tg_node_key(n);
    if (key) {
        PyErr_Format(PyExc_RecursionError,
                     "task %U: the worker thread's C stack is nearly exhausted while %s (tasks "
                     "joined inside tasks, %d deep on this thread); recurse less deeply or "
                     "switch to serial code below a cutoff", key, doing, TG_TLS.worker ? TG_TLS.worker->depth : 0);
        Py_DECREF(key);
    }
    PyObject *err = PyErr_GetRaisedException();
    return err ? err : tg_memory_error();
}

/* Implicit sync at the end of a task (Cilk's sync, rayon's scope): the task finishes only
 * after every child it spawned. If it failed, children not started yet are cancelled first.
 * A child that failed and whose outcome nobody read makes the task fail with that error (no
 * error is lost: further ones are attached as notes). */
static void sync_kids(Worker *W, NodeObject *n, PyObject **res) {
    NodeObject *kids = n->kids;
    n->kids = NULL;
    n->nkids = 0;
    /* Relaxed: our own store. */
    int failing = atomic_load_explicit(&n->failing, memory_order_relaxed);
    for (NodeObject *k = kids; k && !failing; k = k->sibling) { /* a child waiting for us */
        NodeObject *via = NULL;
        if (never_runs_pending(k) || depends_on_waiter(n, k, &via) <= 0) {
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
        Py_CLEAR(*res);
        set_failing(n, err ? err : tg_memory_error());
        failing = 1;
    }
    if (!failing && tg_c_stack_low()) { /* no room to run children nested: fail, skip them */
        Py_CLEAR(*res);
        set_failing(n, stack_error(n, "waiting for its children"));
        failing = 1;
    }
    if (failing)
        for (NodeObject *k = kids; k; k = k->sibling)
            if (tg_task_state(&k->t) < TG_DONE) tg_task_cancel(&k->t, TG_POISON_CANCEL);
    int closed = 0;
    for (NodeObject *k = kids; k && !closed; k = k->sibling)
        if (tg_task_state(&k->t) < TG_DONE && !never_runs_pending(k))
            closed = join_wait(W, k, 0) == TG_FIND_SHUTDOWN;
    NodeObject *first = NULL;
    for (NodeObject *k = kids; k; k = k->sibling) {
        /* Relaxed: see add_kid. */
        if (tg_task_state(&k->t) <= TG_DONE || atomic_load_explicit(&k->seen, memory_order_relaxed)) continue;
        if (!first && !failing) {
            first = k;
            atomic_store_explicit(&k->seen, 1, memory_order_relaxed);
            Py_CLEAR(*res);
            set_failing(n, Py_NewRef(k->value));
        } else if (tg_task_state(&k->t) == TG_FAILED) { /* not the siblings cancelled because of it */
            note_sibling(n->value, n, k);
        }
    }
    /* Dropping the children may run finalizers: not as part of this task (a task they call
     * would be spawned into it after its sync). */
    NodeObject *cur = W->current;
    W->current = NULL;
    while (kids) {
        NodeObject *next = kids->sibling;
        kids->sibling = NULL;
        Py_DECREF(kids);
        kids = next;
    }
    W->current = cur;
}

/* Whether the failed attempt `attempt` (0 for the first) of n is run again: the rule above,
 * and nobody asked it to stop. */
static int retry_wanted(NodeObject *n, int attempt) {
    return n->retry && !tg_node_cancel_requested(n) && tg_retry_wanted(n->retry, n->value, attempt);
}

/* Adds a note saying how many times the task ran before its final failure. */
static void note_attempts(PyObject *exc, NodeObject *n, int attempts) {
    PyObject *key = tg_node_key(n);
    if (key) tg_note_attempts(exc, key, attempts, PyTuple_GET_ITEM(n->retry, 0));
    PyErr_Clear();
    Py_XDECREF(key);
}

/* Calls n's function, again while a failure is to be retried (W NULL: inline, no children to
 * sync, no trace). Returns the result, or NULL with n failing; *attempts: how many calls. A
 * failed attempt that is retried is recorded in the trace, its children synced first. */
static PyObject *run_attempts(Worker *W, NodeObject *n, tg_rec_start *rs, int *attempts) {
    for (int attempt = 0;; attempt++) {
        PyObject *res = call_task(n);
        if (!res) set_failing(n, PyErr_GetRaisedException());
        if (W && n->kids) sync_kids(W, n, &res);
        if (res || !retry_wanted(n, attempt)) {
            *attempts = attempt + 1;
            return res;
        }
        if (W && rs->timed) tg_rec_attempt(W, rs, n, attempt);
        Py_CLEAR(n->value);
        /* Relaxed: our own flag; the children that read it were synced above. */
        atomic_store_explicit(&n->failing, 0, memory_order_relaxed);
    }
}

/* An internal failure while finishing n (an injected fault in the tests): n fails with
 * BrokenSchedulerError and the engine is broken. */
static PyObject *internal_failure(Worker *W, NodeObject *n, const char *what) {
    PyObject *key = tg_node_key(n);
    PyObject *reason = key ? PyUnicode_FromFormat("internal error on worker %d of %U: %s of task "
                                                  "%U failed", W->index, W->engine->label, what, key) : NULL;
    Py_XDECREF(key);
    if (reason) tg_engine_break(W->engine, reason);
    PyObject *err = reason ? PyObject_CallOneArg(TG.BrokenSchedulerError, reason) : NULL;
    Py_XDECREF(reason);
    if (!err) err = PyErr_GetRaisedException();
    return err ? err : tg_memory_error();
}

static void skip(Worker *W, NodeObject *n);

/* Drops n's inputs after it ran (or was skipped) on W. Their finalizers (__del__, weakref
 * callbacks) may run here: they run as no task's code (W->current is NULL meanwhile), so a
 * task they call is built lazily instead of being spawned into whatever task W is nested in. */
static void drop_inputs_detached(Worker *W, NodeObject *n) {
    NodeObject *cur = W->current;
    W->current = NULL;
    tg_node_drop_inputs(n);
    W->current = cur;
}

/* Runs node n, handed to W by the pool, and finishes it. */
static void execute(Worker *W, NodeObject *n) {
    /* Relaxed: a hint (see RunObject.cancel_running). */
    NodeObject *parent = tg_node_parent(n);
    if (atomic_load_explicit(&RUN_OF(tg_task_run(&n->t))->cancel_running, memory_order_relaxed) &&
        parent && tg_node_cancel_asked(parent)) { /* its spawner was cancelled meanwhile */
        skip(W, n);
        return;
    }
    NodeObject *prev = W->current;
    W->current = n;
    push_frame(W);
    tg_rec_start rs;
    tg_rec_begin(W, &rs);
    /* No recursion check of our own: every level of nested joins runs the task's Python
     * frame, which CPython counts (and, from 3.12, the C entry into it too). */
    int attempts;
    PyObject *res = run_attempts(W, n, &rs, &attempts);
    W->current = prev;
    if (res && tg_fault(TG_FAULT_RESULT)) { /* as if storing the result had failed */
        Py_CLEAR(res);
        set_failing(n, internal_failure(W, n, "storing the result"));
    }
    int final = TG_DONE;
    if (res) {
        n->value = res;
    } else {
        final = TG_FAILED;
        note_origin(n->value, n, W);
        if (attempts > 1) note_attempts(n->value, n, attempts);
        if (!parent) fail_run(n);
    }
    rs.attempt = attempts - 1;
    tg_frame f = pop_frame(W);
    if (rs.timed) tg_rec_end(W, &rs, n, final, &f);
    drop_inputs_detached(W, n);
    finish(W, n, final);
    Py_DECREF(n); /* the core's reference */
}

/* Finishes node n, handed to W with skip set, as cancelled. */
static void skip(Worker *W, NodeObject *n) {
    push_frame(W);
    tg_rec_start rs;
    tg_rec_begin(W, &rs);
    n->value = cancel_error(n);
    tg_frame f = pop_frame(W);
    if (rs.timed) tg_rec_end(W, &rs, n, TG_CANCELLED, &f);
    drop_inputs_detached(W, n);
    finish(W, n, TG_CANCELLED);
    Py_DECREF(n); /* the core's reference */
}

/* An injected fault stops worker W between two tasks (its thread ends: work() raises). */
static tg_find worker_dies(Worker *W) {
    W->died = 1;
    return TG_FIND_SHUTDOWN;
}

/* The one dispatch loop. */
static tg_find wait_loop(Worker *W, NodeObject *awaited, int how) {
    tg_pool *pool = W->engine->pool;
    tg_task *want = awaited ? &awaited->t : NULL, *t;
    for (;;) {
        tg_find r = tg_pool_find(pool, W->index, want, how, W, &t);
        if (r == TG_FIND_RUN) execute(W, NODE_OF(t));
        else if (r == TG_FIND_SKIP) skip(W, NODE_OF(t));
        else return r;
        if (!awaited && tg_fault(TG_FAULT_WORKER)) return worker_dies(W);
    }
}

tg_find tg_wait_until(Worker *W, NodeObject *awaited) {
    return awaited ? join_wait(W, awaited, 0) : wait_loop(W, NULL, TG_LOOK_STEAL);
}

void tg_drain_one(Worker *W, tg_task *t) { skip(W, NODE_OF(t)); }

/* ---------------------------------------------------------------- spawning and joining */

int tg_spawn(Worker *W, NodeObject *n) {
    NodeObject *parent = W->current;
    tg_run *prun = tg_task_run(&parent->t);
    if (n->deps) { /* it waits for other nodes: wire its edges (submit.c) */
        PyObject *one = (PyObject *)n;
        return tg_submit(W->engine, RUN_OF(prun), &one, 1, W) < 0 ? -1 : 0;
    }
    tg_node_set_parent(n, parent);
    atomic_store_explicit(&n->owner, W->engine, memory_order_relaxed); /* see tgpy.h */
    tg_add_kid(parent, n);
    Py_INCREF(n); /* the core's reference, until the node is finished */
    tg_push r;
    if (tg_fault(TG_FAULT_SPAWN)) { /* as if the deque could not grow */
        tg_task_claim(&n->t, prun);
        tg_task_release_hold(&n->t);
        r = TG_PUSH_NOMEM;
    } else {
        r = tg_pool_spawn(W->engine->pool, W->index, &n->t, prun);
    }
    if (r == TG_PUSH_QUEUED) return 0;
    if (r != TG_PUSH_NOMEM) Py_FatalError("taskgraph: a new node was claimed twice"); /* invariant */
    /* Claimed and ready but not queued: it fails with MemoryError; nothing waits forever. */
    PyErr_NoMemory();
    set_failing(n, PyErr_GetRaisedException());
    tg_node_drop_inputs(n);
    finish(W, n, TG_FAILED);
    Py_DECREF(n);
    return 0;
}

static int is_ancestor(NodeObject *a, NodeObject *of) {
    for (NodeObject *p = of ? tg_node_parent(of) : NULL; p; p = tg_node_parent(p))
        if (p == a) return 1;
    return 0;
}

/* Whether the pending node n waits, directly or through other pending nodes, for cur or one
 * of the tasks that spawned it (which cannot finish before cur's join of n returns): then
 * *via is that task (borrowed; it is running). Cheap in the common cases: only a node still
 * waiting for dependencies (PENDING) can depend on anything, and only a running task that has
 * consumers (edges) can be depended on; the walk visits pending nodes only. -1 on error. */
static int depends_on_waiter(NodeObject *cur, NodeObject *n, NodeObject **via) {
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

int tg_join(Worker *W, NodeObject *n) {
    NodeObject *cur = W->current;
    if (n == cur || (tg_node_parent(n) != cur && is_ancestor(n, cur))) return join_refused(cur, n, NULL);
    tg_run *mine = tg_task_run(&cur->t);
    if (tg_task_state(&n->t) == TG_NEW) { /* a lazy node first needed here: joins this run */
        PyObject *one = (PyObject *)n;
        if (tg_submit(W->engine, RUN_OF(mine), &one, 1, W) < 0) return -1;
    }
    if (tg_task_state(&n->t) >= TG_DONE) return 0;
    NodeObject *via = NULL;
    int dep = depends_on_waiter(cur, n, &via);
    if (dep > 0 && tg_node_parent(n) == cur) /* our child, which can never run: the sync of cur
                                              * does not wait for it (never_runs_pending) */
        tg_task_cancel(&n->t, TG_POISON_CANCEL);
    if (dep) return dep < 0 ? -1 : join_refused(cur, n, via);
    if (tg_c_stack_low()) {
        PyObject *err = stack_error(cur, "joining another task");
        PyErr_SetRaisedException(err);
        return -1;
    }
    /* Claimed by another run (a concurrent compute, another scheduler): that run's cancel
     * must not skip it under us. */
    if (tg_task_run(&n->t) != mine) tg_task_want(&n->t);
    /* Relaxed owner: NULL (claimed inline, or a moment ago) counts as foreign: we poll. */
    int foreign = atomic_load_explicit(&n->owner, memory_order_relaxed) != (const void *)W->engine;
    if (foreign && tg_engine_check_owner(n) < 0) return -1; /* a run made before fork() */
    if (join_wait(W, n, foreign) == TG_FIND_SHUTDOWN && tg_task_state(&n->t) < TG_DONE) {
        PyObject *key = tg_node_key(n), *ck = key ? tg_node_key(cur) : NULL;
        if (ck)
            PyErr_Format(TG.SchedulerClosedError, "%U closed while task %U waited for %U",
                         W->engine->label, ck, key);
        Py_XDECREF(key);
        Py_XDECREF(ck);
        return -1;
    }
    return 0;
}

void tg_finish_external(NodeObject *n, int final, PyObject *value) {
    n->value = Py_NewRef(value);
    if (final == TG_FAILED) atomic_store_explicit(&n->failing, 1, memory_order_release); /* see set_failing */
    tg_node_drop_inputs(n);
    finish(NULL, n, final);
}

/* ---------------------------------------------------------------- serial elision */

int tg_run_inline(NodeObject *n) {
    if (tg_c_stack_low()) { /* serial calls nested this deep would overflow the C stack */
        PyObject *key = tg_node_key(n);
        if (key) {
            PyErr_Format(PyExc_RecursionError, "task %U: serial calls nested too deeply for "
                         "this thread's C stack", key);
            Py_DECREF(key);
        }
        return -1;
    }
    if (!tg_task_claim_inline(&n->t)) return 0;
    for (Py_ssize_t i = 0; n->deps && i < PyTuple_GET_SIZE(n->deps); i++) {
        NodeObject *d = (NodeObject *)PyTuple_GET_ITEM(n->deps, i);
        int st = tg_task_state(&d->t);
        if (st == TG_DONE) continue;
        PyObject *key = tg_node_key(n), *dk = key ? tg_node_key(d) : NULL;
        PyObject *msg = dk ? PyUnicode_FromFormat("task %U was cancelled: its dependency %U %s", key, dk,
                                                  st == TG_FAILED ? "failed" : st == TG_CANCELLED
                                                  ? "was cancelled" : "had not run") : NULL;
        PyObject *err = msg ? PyObject_CallOneArg(TG.CancelledError, msg) : NULL;
        if (err && st > TG_DONE) PyException_SetCause(err, Py_NewRef(d->value));
        Py_XDECREF(key);
        Py_XDECREF(dk);
        Py_XDECREF(msg);
        n->value = err ? err : PyErr_GetRaisedException();
        tg_node_drop_inputs(n);
        finish(NULL, n, TG_CANCELLED);
        return 1;
    }
    int attempts;
    PyObject *res = run_attempts(NULL, n, NULL, &attempts);
    int final = TG_DONE, reraise = 0;
    if (res) {
        n->value = res;
    } else {
        final = TG_FAILED;
        reraise = PyErr_GivenExceptionMatches(n->value, PyExc_KeyboardInterrupt) ||
                  PyErr_GivenExceptionMatches(n->value, PyExc_SystemExit);
        note_origin(n->value, n, NULL);
        if (attempts > 1) note_attempts(n->value, n, attempts);
    }
    tg_node_drop_inputs(n);
    finish(NULL, n, final);
    if (reraise) {
        PyErr_SetRaisedException(Py_NewRef(n->value));
        return -1;
    }
    return 1;
}
