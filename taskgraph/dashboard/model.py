"""What the dashboard shows, kept up to date by one sampler thread and bounded in size.

Every TICK seconds the sampler takes the records each watched scheduler's workers published
in their live feeds (``core.LiveFeed``: C rings, summed up in C per task name and per time
bucket, so a million tasks a second cost this thread a bounded amount of Python work), samples
what the workers show now (running tasks, idle time, queue lengths, ``Scheduler.stats()``)
and the process's memory, and every PUBLISH seconds hands an update to the server. Nothing
here runs per task, and nothing here touches what the workers write except through the feed.

Bounds: the task stream keeps what falls inside the window (``window`` seconds) and at most
MAX_ITEMS long tasks and MAX_BUCKETS buckets; names are capped per scheduler in C and at
MAX_NAMES here; memory keeps MEMORY_SAMPLES samples; at most MAX_TRACES traces are kept. So
the dashboard's memory is bounded however long it runs.
"""
from __future__ import annotations

import collections
import os
import threading
import time

from taskgraph._native import core
from taskgraph._state import State
from taskgraph.trace import record as _record
from taskgraph.trace.analysis import analyse

__all__ = ["Model", "TICK", "PUBLISH"]

TICK = 0.1            # seconds between two drains of the feeds
PUBLISH = 0.25        # seconds between two updates sent to the pages
MAX_ITEMS = 20000     # long tasks kept in the window (each at least a bucket wide)
MAX_BUCKETS = 40000   # time buckets kept in the window
ITEMS_PER_DRAIN = 4000
RING = 1 << 17        # records per worker's ring (csrc/live.h: TG_LIVE_RING)
PIXELS = 1000         # buckets per window: a bucket is about a pixel of the page's stream
MAX_NAMES = 4096
MEMORY_SAMPLES = 600  # RSS samples kept (5 minutes at one every half second)
MAX_TRACES = 4
BUSY_SPAN = 1.0       # seconds over which a worker's busy share is measured
_DONE, _FAILED, _CANCELLED = State.DONE.value, State.FAILED.value, State.CANCELLED.value


def rss_bytes():
    """The process's resident memory now (Linux: /proc/self/statm), or None."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _but_last(seq, n):
    out = list(seq)
    return out[:max(0, len(out) - n)]


class _Watched:
    """One scheduler the model follows: its feed, the map of its name indices to the model's,
    its lanes, and the samples its busy shares come from."""

    def __init__(self, sched, feed, first_lane):
        self.sched, self.feed = sched, feed
        self.number = sched.number
        self.names = []           # feed's name index -> model's name index
        # One lane per worker, and one for all the spares (they run tasks while others wait)
        self.nworkers = feed.workers
        self.spares = feed.slots > feed.workers
        self.lanes = list(range(first_lane, first_lane + feed.workers + self.spares))
        self.idle = collections.deque()  # (now_us, [idle_us per worker])
        self.closed_at = None     # model time (us) when it closed
        self.last = None          # the last sample: (workers, now_us)
        self.stats = [{} for _ in self.lanes]
        self.still = []           # per worker: idle, inferred (Model._sample)


class Model:
    """The dashboard's state, for every scheduler it watches (``add``); ``start()`` runs the
    sampler thread, ``close()`` stops it and detaches the feeds. ``publish(message)`` (set by
    the server) receives each update; ``snapshot()`` gives the whole state for a new page."""

    def __init__(self, window=10.0, publish=None):
        self.window_us = int(window * 1e6)
        self.bucket_us = max(1, self.window_us // PIXELS)
        _, scale = _record._ticks_to_ns()
        self.us_per_tick = scale / 1000.0
        self.tick0, _ = core.clock_pair()
        self.lock = threading.Lock()
        self.publish = publish
        self.watched = []
        self.lane_names = []      # "s1.w0" per lane
        self.names, self._name_index = ["(other names)"], {"(other names)": 0}
        self.items = collections.deque()    # [lane, start, end, name, state, stolen, depth]
        self.buckets = collections.deque()  # [lane, bucket, count, busy, name, stolen, failed]
        self.new_items, self.new_buckets = [], []
        self.memory = collections.deque(maxlen=MEMORY_SAMPLES)  # [t_us, rss]
        self.new_memory = []
        self.traces = collections.OrderedDict()  # id -> {"trace", "when", "info"}
        self.trace_seq = 0
        self.now_us = 0
        self.taken = 0
        self.seq = 0
        self._stop = threading.Event()
        self._thread = None
        self._last_publish = self._last_memory = 0.0

    # ------------------------------------------------------------------ watching
    def add(self, sched):
        """Follows scheduler sched from now on (RuntimeError if another dashboard does)."""
        with self.lock:
            if any(w.sched is sched for w in self.watched):
                return
            feed = core.LiveFeed(sched._engine)
            w = _Watched(sched, feed, len(self.lane_names))
            self.lane_names += [f"s{sched.number}.w{i}" for i in range(feed.workers)]
            if w.spares:
                self.lane_names.append(f"s{sched.number}.spares")
            self.watched.append(w)
            self._sample(w)  # its lanes show at once

    def closed(self, sched):
        """Scheduler sched closed: its lanes stay until their tasks leave the window."""
        with self.lock:
            for w in self.watched:
                if w.sched is sched and w.closed_at is None:
                    self._sample(w)
                    w.closed_at = self.now_us

    def add_trace(self, tr):
        """A trace block closed: kept (the MAX_TRACES newest) for its summary, picture and file."""
        with self.lock:
            self.trace_seq += 1
            self.traces[self.trace_seq] = {"trace": tr, "when": time.time(), "info": None,
                                           "lock": threading.Lock()}
            while len(self.traces) > MAX_TRACES:
                self.traces.popitem(last=False)

    def trace(self, tid):
        with self.lock:
            t = self.traces.get(tid)
        return None if t is None else t["trace"]

    def trace_info(self, tid):
        """The summary of trace tid (computed once, outside the model's lock), or None."""
        with self.lock:
            t = self.traces.get(tid)
        if t is None:
            return None
        with t["lock"]:
            if t["info"] is None:
                tr = t["trace"]
                recs = tr.records
                a = analyse(recs) if recs else {"work": 0, "span": 0, "path": []}
                wall = tr.wall
                P = max(tr.pool_size or 0, tr.workers)
                par = a["work"] / a["span"] if a["span"] else 1.0
                t["info"] = {"id": tid, "tasks": len(recs), "workers": P, "wall_ms": wall / 1e6,
                             "work_ms": a["work"] / 1e6, "span_ms": a["span"] / 1e6,
                             "parallelism": par, "bound": min(P, par) if P else par,
                             "achieved": a["work"] / wall if wall else 0.0,
                             "summary": tr.summary()}
            return t["info"]

    # ------------------------------------------------------------------ the sampler
    def start(self):
        self._thread = threading.Thread(target=self._run, name="taskgraph-dashboard-sampler",
                                        daemon=True)
        self._thread.start()

    def close(self):
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self.lock:
            for w in self.watched:
                w.feed.close()

    def _run(self):
        wait = TICK
        while not self._stop.wait(wait):
            taken = self.taken
            self.tick()
            # Busy rings are drained sooner: a worker fills its ring (RING records) in about
            # 50 ms of trivial tasks, and a full ring drops records.
            per_worker = (self.taken - taken) / max(1, sum(w.feed.workers for w in self.watched))
            wait = TICK / 5 if per_worker > RING / 8 else TICK

    def _name(self, w, local):
        """The model's index of scheduler w's name index local."""
        if local >= len(w.names):
            for name in w.feed.names(len(w.names)):
                i = self._name_index.get(name)
                if i is None:
                    i = 0 if len(self.names) >= MAX_NAMES else len(self.names)
                    if i:
                        self._name_index[name] = i
                        self.names.append(name)
                w.names.append(i)
        return w.names[local] if 0 <= local < len(w.names) else local

    def _drain(self, w):
        items, buckets, counts, taken = w.feed.drain(self.tick0, self.us_per_tick, self.bucket_us,
                                                     ITEMS_PER_DRAIN)
        self.taken += taken
        for lw, s, e, name, state, stolen, depth in items:
            # name -1: idle inside a join; -2: records a full ring dropped (csrc/py/feed.c)
            it = [w.lanes[min(lw, w.nworkers)], s, e, self._name(w, name) if name >= 0 else name, state, stolen, depth]
            self.items.append(it)
            self.new_items.append(it)
        for lw, b, count, busy, name, stolen, failed in buckets:
            bk = [w.lanes[min(lw, w.nworkers)], b, count, busy, self._name(w, name), stolen, failed]
            self.buckets.append(bk)
            self.new_buckets.append(bk)
        w.counts = counts

    def _sample(self, w):
        """Drains w's feed and samples its workers (the model's lock held)."""
        self._drain(w)
        w.last = w.feed.sample(self.tick0, self.us_per_tick)
        self.now_us = max(self.now_us, w.last[1])
        w.idle.append((w.last[1], [row[0] for row in w.last[0]]))
        while len(w.idle) > 2 and w.idle[1][0] < w.last[1] - BUSY_SPAN * 1e6:
            w.idle.popleft()
        stats = w.sched.stats()
        # A worker parked since before the feed attached has no idle start in it: one that
        # runs nothing, has no task open and has not moved since the last sample is idle too.
        w.still = [not row[1] and not row[4] and i < len(w.stats) and
                   st["tasks_run"] == w.stats[i].get("tasks_run") and
                   (len(w.idle) < 2 or row[0] == w.idle[0][1][i])
                   for i, (row, st) in enumerate(zip(w.last[0], stats))]
        w.stats = stats

    def tick(self):
        """One step of the sampler (tests call it directly)."""
        with self.lock:
            for w in self.watched:
                if w.closed_at is None:
                    self._sample(w)
            if not any(w.closed_at is None for w in self.watched):  # the clock goes on
                self.now_us = int((core.clock_pair()[0] - self.tick0) * self.us_per_tick)
            self._prune()
            now = time.monotonic()
            if now - self._last_memory >= 0.5:
                self._last_memory = now
                rss = rss_bytes()
                if rss is not None:
                    m = [self.now_us, rss]
                    self.memory.append(m)
                    self.new_memory.append(m)
            due = now - self._last_publish >= PUBLISH
            if due:
                self._last_publish = now
                msg = self._message(snapshot=False)
        if due and self.publish is not None:
            self.publish(msg)

    def _prune(self):
        """Drops what left the window; lanes of closed schedulers go once their tasks have."""
        horizon = self.now_us - self.window_us
        while self.items and (self.items[0][2] < horizon or len(self.items) > MAX_ITEMS):
            self.items.popleft()
        hb = horizon // self.bucket_us - 1
        while self.buckets and (self.buckets[0][1] < hb or len(self.buckets) > MAX_BUCKETS):
            self.buckets.popleft()
        gone = [w for w in self.watched if w.closed_at is not None and w.closed_at < horizon]
        for w in gone:
            self.watched.remove(w)

    # ------------------------------------------------------------------ what the page gets
    def _lanes(self):
        out = []
        for w in self.watched:
            if w.last is None:
                continue
            rows, now = w.last
            old_t, old_idle = w.idle[0]
            span = now - old_t
            for i, (idle_us, idle_now, queued, dropped, running) in enumerate(rows[:w.nworkers]):
                busy = 1.0 - (idle_us - old_idle[i]) / span if span > 0 else 0.0
                st = w.stats[i] if i < len(w.stats) else {}
                still = i < len(w.still) and w.still[i]
                out.append({"lane": w.lanes[i], "name": self.lane_names[w.lanes[i]],
                            "scheduler": w.number, "worker": i,
                            "closed": w.closed_at is not None, "idle": bool(idle_now) or still,
                            "busy": 0.0 if still else min(1.0, max(0.0, busy)), "queued": queued,
                            "dropped": dropped, "tasks": st.get("tasks_run", 0),
                            "stolen": st.get("stolen", 0),
                            "steal_attempts": st.get("steal_attempts", 0),
                            "parks": st.get("parks", 0),
                            "running": [[self._name(w, n), s] for n, s in running]})
            if w.spares:
                out.append(self._spare_lane(w, rows[w.nworkers:]))
        return out

    def _spare_lane(self, w, rows):
        """The spares' lane: their slots as one. A spare slot has no thread while no task
        waits, so its idle clock says nothing: the lane is busy when a spare runs a task at
        the sample, and shows all their running tasks."""
        running = [[self._name(w, n), s] for row in rows for n, s in row[4]]
        lane = w.lanes[w.nworkers]
        return {"lane": lane, "name": self.lane_names[lane], "scheduler": w.number,
                "worker": w.nworkers, "closed": w.closed_at is not None,
                "idle": not running, "busy": 1.0 if running else 0.0,
                "queued": sum(row[2] for row in rows), "dropped": sum(row[3] for row in rows),
                "tasks": 0, "stolen": 0, "steal_attempts": 0, "parks": 0, "running": running}

    def _progress(self):
        """Per task name: [name, done, running, failed, cancelled, waiting], counted since the
        dashboard opened. Waiting: submitted (spawned, or claimed by a compute, a submit, a
        map) and not started yet, whether ready in a queue or waiting for its dependencies:
        what was submitted minus what finished and what runs now (at least 0: a task
        submitted before the dashboard opened is not counted as submitted)."""
        totals = {}
        for w in self.watched:
            for local, (done, failed, cancelled, submitted) in enumerate(getattr(w, "counts", ())):
                if done or failed or cancelled or submitted:
                    t = totals.setdefault(self._name(w, local), [0, 0, 0, 0, 0])
                    t[0] += done
                    t[2] += failed
                    t[3] += cancelled
                    t[4] += submitted
            if w.last is not None and w.closed_at is None:
                for row in w.last[0]:
                    for n, _ in row[4]:
                        totals.setdefault(self._name(w, n), [0, 0, 0, 0, 0])[1] += 1
        rows = []
        for name, (done, running, failed, cancelled, submitted) in totals.items():
            waiting = max(0, submitted - done - running - failed - cancelled)
            if done or running or failed or cancelled or waiting:
                rows.append([name, done, running, failed, cancelled, waiting])
        rows.sort(key=lambda r: -(r[1] + r[2] + r[3] + r[4] + r[5]))
        return rows

    def _message(self, snapshot):
        if not snapshot:
            self.seq += 1
        queued = sum(sum(r[2] for r in w.last[0]) for w in self.watched
                     if w.last is not None and w.closed_at is None)
        lanes, progress = self._lanes(), self._progress()  # first: they may meet new names
        msg = {"type": "snapshot" if snapshot else "update", "seq": self.seq,
               "now": self.now_us, "window": self.window_us, "bucket": self.bucket_us,
               "names": list(self.names), "lanes": lanes, "progress": progress,
               "queued": queued, "taken": self.taken,
               "finished": sum(r[1] + r[3] + r[4] for r in progress),
               "rss": self.memory[-1][1] if self.memory else None,
               "held": self.watched[0].feed.held if self.watched else None,
               "traces": [{"id": k, "when": v["when"], "tasks": len(v["trace"])}
                          for k, v in self.traces.items()]}
        if snapshot:  # without what the next update brings (the page would draw it twice)
            msg.update(items=_but_last(self.items, len(self.new_items)),
                       buckets=_but_last(self.buckets, len(self.new_buckets)),
                       memory=_but_last(self.memory, len(self.new_memory)))
        else:
            msg.update(items=self.new_items, buckets=self.new_buckets, memory=self.new_memory)
            self.new_items, self.new_buckets, self.new_memory = [], [], []
        return msg

    def snapshot(self):
        """The whole state (what a page that just connected draws first), as a dict."""
        with self.lock:
            return self._message(snapshot=True)
