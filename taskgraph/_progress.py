"""Progress bar for ``compute(..., progress=True)``: tasks done of tasks known.

Counts come from the scheduler's per-worker C counters (no shared Python counter in the hot
path): done = tasks handed out since the run started, known = nodes the compute submitted plus
tasks created inside workers since then. With several computes at once on one scheduler the
counts include the others' tasks. Uses tqdm when it is installed (``pip install
"taskgraph-ft[progress]"``); otherwise prints a plain one-line bar to stderr. Nothing is drawn
until the compute has submitted its graph and the total is known: one bar per compute.
"""
import sys
import time

__all__ = ["ProgressBar"]


def _totals(sched):
    run = spawned = 0
    for s in sched.stats():
        run += s["tasks_run"]
        spawned += s["spawned"]
    return run, spawned


class ProgressBar:
    def __init__(self, sched):
        self.sched = sched
        self.submitted = 0
        self.run0, self.spawned0 = _totals(self.sched)  # before the run's first task starts
        self.shown = 0
        self.t0 = time.monotonic()
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        self._tqdm = tqdm
        self.bar = None    # the tqdm bar, made at the first update (with its total)
        self.drawn = False

    def set_total(self, submitted):
        self.submitted = submitted
        self.update()

    def _counts(self):
        run, spawned = _totals(self.sched)
        done = run - self.run0
        known = max(self.submitted + spawned - self.spawned0, done)
        return done, known

    def update(self):
        done, known = self._counts()
        self.drawn = True
        if self._tqdm is not None and self.bar is None:
            # initial=done: the tasks done before the bar appeared (while the graph was being
            # submitted) are not counted in its rate, whose clock starts now: counted, the
            # first refresh divided thousands of tasks by a few microseconds.
            self.bar = self._tqdm(total=known, initial=done, unit="task", desc="taskgraph",
                                  leave=True)
            self.shown = done
        if self.bar is not None:
            if known != self.bar.total:
                self.bar.total = known
            self.bar.update(done - self.shown)
            self.bar.refresh()
        else:
            width = 30
            filled = int(width * done / known) if known else width
            sys.stderr.write(f"\rtaskgraph [{'#' * filled}{'.' * (width - filled)}] "
                             f"{done}/{known} tasks {time.monotonic() - self.t0:6.1f} s")
            sys.stderr.flush()
        self.shown = done

    def finish(self):
        self.update()

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
