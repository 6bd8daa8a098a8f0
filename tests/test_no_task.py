"""Code that runs as no task (docs/design/native.md, "Code that runs as no task"). What the
engine runs on its own behalf -- the notes on a failing task's exception (add_note, its
attributes), the text of an exception (a sibling's note, the trace record), a result or child
dropped by the sync, children pruned by a spawn or forgotten after a read, the inputs of a node
cancelled or skipped, the done callbacks -- runs with no task current on the worker: a task
called there (from a finalizer, add_note, __setattr__, __str__, a callback) builds a lazy node.
Spawned instead, it would be a child of a task that did not call it, or of one that has synced
already: an orphan (a fatal error when it is freed unretired, or a use-after-free of its run).

Each finalizer below is made on the thread that drops it (free-threaded CPython frees an object
its owner thread made there; dropped by another thread, its finalizer runs later on the owner,
wherever that thread is then: see the design note)."""
import threading
import time

import pytest

import taskgraph as tg

pytestmark = pytest.mark.timeout(120)


@tg.task
def leaf(x):
    return x


class Made:
    """Records what each task call made from engine-run code: (where, state, has a parent)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []

    def call_a_task(self, where):
        n = leaf(where)
        with self.lock:
            self.calls.append((where, n.state, n.parent is not None))

    def all_lazy(self, *wheres):
        """Every call was made as no task (a lazy node, no parent), from each of `wheres`."""
        with self.lock:
            calls = list(self.calls)
        assert {w for w, _, _ in calls} >= set(wheres), calls
        assert all(state == "new" and not has_parent for _, state, has_parent in calls), calls


class Bomb:
    """Calls a task from its finalizer."""

    def __init__(self, made, where):
        self.made, self.where = made, where

    def __del__(self):
        self.made.call_a_task(self.where)


# ---------------------------------------------------------------------- an exception's notes
class Noted(Exception):
    """Calls a task from the two things taskgraph calls to note where it was raised."""
    made = None

    def add_note(self, note):
        Noted.made.call_a_task("add_note")
        super().add_note(note)

    def __setattr__(self, name, value):
        if name == "__taskgraph_task__":
            Noted.made.call_a_task("setattr")
        super().__setattr__(name, value)


@tg.task
def raise_noted():
    raise Noted("x")


@tg.task
def catch_a_noted_child():
    c = raise_noted()
    # exception(): the stored exception (result() would raise a copy, made by this task's own
    # call, which sets the attribute again: as this task, rightly)
    assert isinstance(c.exception(), Noted)
    return 1


@pytest.mark.thread_unsafe(reason="Noted.made is shared by the class")
def test_the_note_on_a_failing_task_exception_is_written_as_no_task(sched):
    Noted.made = made = Made()
    assert sched.compute(catch_a_noted_child()) == 1
    with pytest.raises(Noted):
        sched.compute(raise_noted())
    made.all_lazy("add_note", "setattr")


# ---------------------------------------------------------------------- an exception's text
class Loud(Exception):
    made = None

    def __str__(self):
        Loud.made.call_a_task("str")
        return "loud"


@tg.task
def raise_loud(i):
    raise Loud(i)


@tg.task
def two_unread_failures():
    raise_loud(1)
    raise_loud(2)  # the second becomes a note on the first: its text is read then
    return 1


@pytest.mark.thread_unsafe(reason="Loud.made is shared by the class")
def test_the_text_of_an_exception_is_read_as_no_task(sched):
    Loud.made = made = Made()
    with tg.trace():  # the trace records the failures' text too
        with pytest.raises(Loud):
            sched.compute(two_unread_failures())
    made.all_lazy("str")


# ---------------------------------------------------------------------- what the sync drops
@tg.task
def fail_child():
    raise ValueError("child")


@tg.task
def result_replaced_by_a_child_failure(made):
    fail_child()  # unread: it fails this task at its sync, which drops the result below
    return Bomb(made, "result")


@tg.task
def bomb_child(made, where):
    return Bomb(made, where)


@tg.task
def children_dropped_by_the_sync(made):
    bomb_child(made, "sync")  # not kept: the sync holds its last reference
    return 1


def test_what_the_sync_drops_is_finalized_as_no_task():
    made = Made()
    with tg.Scheduler(1) as s:  # one thread: the finalizers run where the objects were made
        with pytest.raises(ValueError, match="child"):
            s.compute(result_replaced_by_a_child_failure(made))
        assert s.compute(children_dropped_by_the_sync(made)) == 1
    made.all_lazy("result", "sync")


# ---------------------------------------------------------------------- children let go early
@tg.task
def ident(x):
    return x


@tg.task
def prune_a_finished_child(made):
    b = Bomb(made, "prune")  # made here: freed here when the prune drops the child holding it
    a = ident(b)
    del b
    ran = threading.Event()
    a.add_done_callback(lambda node: ran.set())
    del a
    assert ran.wait(30)  # this worker waits: the other one steals and finishes it
    for _ in range(63):  # children 2..64: the 64th spawn prunes the finished one
        leaf(0)
    return 1


def test_children_pruned_by_a_spawn_are_finalized_as_no_task():
    made = Made()
    with tg.Scheduler(2) as s:
        assert s.compute(prune_a_finished_child(made)) == 1
    made.all_lazy("prune")


@tg.task
def forget_a_finished_child(made):
    w = leaf(0)
    b = Bomb(made, "forget")
    ident(b)  # not kept: run first by the join below (last in, first out), then forgotten
    del b
    return w.result()  # forgets the finished children at the head of the list


def test_children_forgotten_after_a_read_are_finalized_as_no_task():
    made = Made()
    with tg.Scheduler(1) as s:
        assert s.compute(forget_a_finished_child(made)) == 0
    made.all_lazy("forget")


# ---------------------------------------------------------------------- cancelled, skipped
@tg.task
def skip_a_cancelled_child(made):
    w = leaf(0)
    b = Bomb(made, "skip")
    k = ident(b)  # queued after w: the join of w below hands it out first, skipped
    del b
    assert k.cancel() is True
    value = w.result()
    assert isinstance(k.exception(), tg.CancelledError)
    return value


def test_a_child_skipped_inside_a_join_drops_its_inputs_as_no_task():
    made = Made()
    with tg.Scheduler(1) as s:
        assert s.compute(skip_a_cancelled_child(made)) == 0
    made.all_lazy("skip")


class Box:
    """Not a container taskgraph looks into: the node inside is not an argument's Node."""

    def __init__(self):
        self.node = None


@tg.task
def skip_a_dependent_of_a_failure():
    b = raise_loud(0)
    assert isinstance(b.exception(), Loud)
    w = leaf(0)
    d = leaf(b)  # never runs: skipped first by the join below; its message quotes str(b's error)
    value = w.result()
    assert isinstance(d.exception(), tg.CancelledError)
    return value


@pytest.mark.thread_unsafe(reason="Loud.made is shared by the class")
def test_the_message_of_a_skipped_dependent_reads_the_failure_as_no_task():
    Loud.made = made = Made()
    with tg.Scheduler(1) as s:
        assert s.compute(skip_a_dependent_of_a_failure()) == 0
    made.all_lazy("str")


@tg.task
def cancel_a_lazy_node(box):
    node, box.node = box.node, None
    return node.cancel()


def test_a_lazy_node_cancelled_inside_a_task_drops_its_inputs_as_no_task():
    made = Made()
    box = Box()
    with tg.Scheduler(1) as s:
        first = leaf(0)
        # A lazy node whose argument the worker made (a callback runs as no task): cancelling
        # it in a task on that worker frees the argument there, at once.
        first.add_done_callback(lambda node: setattr(box, "node", leaf(Bomb(made, "cancel"))))
        assert s.compute(first) == 0
        deadline = time.monotonic() + 30  # compute waits for the result, not the callbacks
        while box.node is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert box.node is not None and box.node.state == "new"
        assert s.compute(cancel_a_lazy_node(box)) is True
    made.all_lazy("cancel")


# ---------------------------------------------------------------------- callbacks
@tg.task
def callbacks_in_a_task(made):
    c = leaf(1)
    c.add_done_callback(lambda node: made.call_a_task("finisher"))  # run where c finishes
    c.result()
    c.add_done_callback(lambda node: made.call_a_task("at once"))  # c is done: runs here
    return 1


def test_callbacks_run_as_no_task_on_the_finisher_and_at_once(sched):
    made = Made()
    assert sched.compute(callbacks_in_a_task(made)) == 1
    deadline = time.monotonic() + 30  # a child's callback on another worker may still run
    while len(made.calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    made.all_lazy("finisher", "at once")
