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
steal, ``per_attempt`` ns for a steal attempt that finds the victim's deque empty. A worker
that finds no work anywhere sleeps until a task is pushed.
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
             seed=0) -> float:
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
        clock[w] += per_task + g.own[t]
        st[-1][1] = 0
        for c in g.children[t]:
            release(w, c, clock[w])
        wake(w)
    return max(clock)
