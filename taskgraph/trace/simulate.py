"""A discrete-event simulation of randomized work stealing over a recorded task graph.

The graph is that of a trace: each task's own time, the children it spawned (in the order they
started) and its data dependencies. The model is taskgraph's scheduler (docs/design): a task
does its own work, pushes its children onto its worker's deque, then joins them in order; a
join whose child is still on the worker's deque runs the newest task there (help-first), one
whose child was stolen steals work from a random other worker while it waits. An idle worker
pops its own deque (newest first), then takes a root task from the shared queue, then steals the
oldest task of a random other worker. A task whose data dependencies are all done is pushed
onto the deque of the worker that finished the last one. Costs: ``per_task`` ns for every task
run (what the trace shows outside the tasks' own time), ``per_steal`` ns for a successful
steal, ``per_attempt`` ns for a steal attempt that finds the victim's deque empty, and
``per_shared`` ns for each atomic read-modify-write on the one cache line that every worker
writes: the run's count of live tasks, which a *counted* task (a root, or a task with data
dependencies) increments when it is claimed and decrements when it finishes (children spawned
without dependencies are covered by their parent and never touch it: docs/design/scheduler.md).
That line is one resource: an RMW by the worker that wrote it last costs nothing extra; any
other waits for the line to be free, then moves it and holds it ``per_shared`` ns, so many
workers claiming and finishing counted tasks at once queue for it. On one worker the line never
moves. A worker that finds no work anywhere sleeps until a task is
pushed.
"""
from __future__ import annotations

import heapq
import math
import random
from collections import deque

__all__ = ["Graph", "graph_of", "simulate"]


class Graph:
    """own[i] (ns), children[i] (indices, in spawn order), deps[i] (indices)."""

    def __init__(self, own, children, deps):
        self.own = list(own)
        self.children = [list(c) for c in children]
        self.deps = [list(d) for d in deps]
        n = len(self.own)
        self.dependents = [[] for _ in range(n)]
        has_parent = [False] * n
        for i in range(n):
            for c in self.children[i]:
                has_parent[c] = True
            for d in self.deps[i]:
                self.dependents[d].append(i)
        self.roots = [i for i in range(n) if not has_parent[i] and not self.deps[i]]
        # Counted in the run's live count (claimed by a submission): roots and tasks with data
        # dependencies; a child spawned without dependencies is covered by its parent.
        self.counted = [not has_parent[i] or bool(self.deps[i]) for i in range(n)]
        # A child with data dependencies waits for them too: it is pushed when both its parent
        # spawned it and its dependencies are done.
        self.waits = [len(self.deps[i]) + has_parent[i] for i in range(n)]


def graph_of(records) -> Graph:
    """The Graph of a trace's records (children ordered by their start)."""
    index = {r.key: i for i, r in enumerate(records)}
    children = [[] for _ in records]
    deps = [[] for _ in records]
    for i, r in enumerate(records):  # records are in start order
        p = index.get(r.parent)
        if p is not None:
            children[p].append(i)
        deps[i] = [index[d] for d in r.deps if d in index]
    return Graph([r.own for r in records], children, deps)


def simulate(g: Graph, workers: int, *, per_task=0.0, per_steal=0.0, per_attempt=0.0,
             per_shared=0.0, seed=0) -> float:
    """The simulated makespan (ns) of g on ``workers`` workers."""
    n = len(g.own)
    if n == 0:
        return 0.0
    rng = random.Random(seed)
    P = workers
    clock = [0.0] * P
    stacks = [[] for _ in range(P)]        # frames [task, next child to join or -1 if unstarted]
    deques = [deque() for _ in range(P)]   # right end = newest
    inject = deque(g.roots)
    waits = list(g.waits)
    done = [False] * n
    left = n
    queued = len(inject)                  # tasks sitting in deques or the shared queue
    sleeping = {}                          # workers with nothing to do, in the order they slept
    waiter = {}                            # task -> the worker joining it that sleeps
    heap = [(0.0, w, w) for w in range(P)]  # (clock, order, worker): ties go in turn
    seq = [P]
    counted = g.counted if P > 1 and per_shared > 0 else [False] * n
    line = [0.0, -1]                       # the shared line: when it is next free, who has it

    def shared_rmw(w):
        """One RMW of worker w on the shared line: free if w wrote it last (it is still in w's
        cache); else wait for the line, move it to w and hold it per_shared ns."""
        if line[1] == w:
            return
        start = max(clock[w], line[0])
        clock[w] = line[0] = start + per_shared
        line[1] = w

    def wake(w):
        seq[0] += 1
        heapq.heappush(heap, (clock[w], seq[0], w))

    def rouse(s, at):
        del sleeping[s]
        clock[s] = max(clock[s], at)
        wake(s)

    def push(w, t, at):
        nonlocal queued
        deques[w].append(t)
        queued += 1
        if sleeping:  # one more task: one sleeper may take it
            rouse(next(iter(sleeping)), at)

    def release(w, t, at):
        waits[t] -= 1
        if waits[t] == 0:
            push(w, t, at)

    def steal(w):
        """Takes a task for worker w: own deque, shared queue, a random victim; "none" if there
        is no queued task anywhere."""
        nonlocal queued
        if deques[w]:
            queued -= 1
            return deques[w].pop()
        if inject:
            queued -= 1
            return inject.popleft()
        if queued == 0:
            return "none"
        # Random victims until one has work: the number of failed attempts before the first
        # success is geometric (k of the P-1 others have work); their cost is charged at once.
        full = [v for v in range(P) if v != w and deques[v]]
        q = len(full) / (P - 1)
        fails = 0
        if q < 1.0:
            fails = int(math.log(1.0 - rng.random()) / math.log(1.0 - q))
        v = full[rng.randrange(len(full))]
        queued -= 1
        clock[w] += fails * per_attempt + per_steal
        return deques[v].popleft()

    while left:
        if not heap:  # cannot happen for a well-formed graph: every task becomes ready
            raise RuntimeError("simulation stalled: the graph has a cycle or a missing task")
        _, _, w = heapq.heappop(heap)
        st = stacks[w]
        if st and st[-1][1] >= 0:
            t, j = st[-1]
            ch = g.children[t]
            while j < len(ch) and done[ch[j]]:
                j += 1
            st[-1][1] = j
            if j == len(ch):  # every child joined: the task ends
                st.pop()
                if counted[t]:
                    shared_rmw(w)  # its finish decrements the run's live count
                done[t] = True
                left -= 1
                s = waiter.pop(t, None)
                if s is not None and s in sleeping:
                    rouse(s, clock[w])
                for d in g.dependents[t]:
                    release(w, d, clock[w])
                wake(w)
                continue
            got = steal(w)  # help while the child is unfinished
            if got == "none":  # nothing to help with: sleep until the child ends or work comes
                waiter[ch[j]] = w
                sleeping[w] = True
                continue
            st.append([got, -1])
            wake(w)
            continue
        if not st:
            got = steal(w)
            if got == "none":
                sleeping[w] = True
                continue
            st.append([got, -1])
        t = st[-1][0]  # start it: its own work, then push its children
        if counted[t]:
            shared_rmw(w)  # its claim incremented the run's live count
        clock[w] += per_task + g.own[t]
        st[-1][1] = 0
        for c in g.children[t]:
            release(w, c, clock[w])
        wake(w)
    return max(clock)
