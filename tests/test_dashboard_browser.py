"""The dashboard's page in a real browser: headless Chromium (Debian's, installed by `make
setup`) opens it while computes run, driven over its DevTools protocol (tests/cdp.py), and the
test reads the page's DOM: the workers in the task stream and the workers table, the task
functions in the progress table with counts that change from one look to the next, the
stream's canvas drawn on, and a task whose name is markup shown as text. No wall-clock
assert: every wait is a poll with a generous deadline (the machine may be busy)."""
import re
import threading
import time

import pytest

import taskgraph as tg
from taskgraph.dashboard import dashboard
from helpers import fib, needs_chromium

pytestmark = [needs_chromium, pytest.mark.timeout(300),
              pytest.mark.thread_unsafe(reason="one browser and its page per test")]

EVIL = "<img src=x onerror=\"document.title='pwned'\">"


@tg.task
def nap(i):
    time.sleep(0.001)
    return i


evil = tg.task(lambda i: i, name=EVIL)

ROWS = ("[...document.querySelectorAll('#progress-rows tr')]"
        ".map(r => [r.dataset.name, +r.querySelector('.done').textContent])")


def test_the_page_shows_workers_functions_and_changing_counts(tmp_path):
    from cdp import Browser
    stop = threading.Event()
    with tg.Scheduler(2) as s, dashboard(s) as d:
        def load():  # runs until the test has seen what it needs
            while not stop.is_set():
                s.compute([nap(i) for i in range(50)])
                s.compute(fib(14, 6))
                s.compute([evil(i) for i in range(20)])

        th = threading.Thread(target=load)
        th.start()
        try:
            with Browser() as b:
                b.open(d.url)
                b.wait_for("document.body.dataset.updates >= 2", timeout=120)
                lanes = b.wait_for("[...document.querySelectorAll('#lanes .lane')]"
                                   ".map(e => e.dataset.lane).join(' ')", timeout=60)
                assert lanes.split() == [f"s{s.number}.w0", f"s{s.number}.w1",
                                         f"s{s.number}.spares"]
                workers = b.eval("[...document.querySelectorAll('#worker-rows tr')].map(r => r.dataset.lane)")
                assert workers == lanes.split()
                first = dict(b.wait_for(f"(r => r.length >= 3 && r)({ROWS})", timeout=60))
                assert {"nap", "fib", EVIL} <= set(first)
                # the counts change while the computes run
                b.wait_for(f"(r => r.nap > {first['nap']} && r.fib > {first['fib']})"
                           f"(Object.fromEntries({ROWS}))", timeout=120)
                # the legend names the functions; the markup-named one is text, and ran no code
                legend = b.eval("[...document.querySelectorAll('#legend .name')].map(e => e.textContent)")
                assert {"nap", "fib"} <= set(legend)
                assert b.eval("document.title") == "taskgraph dashboard"
                assert b.eval("document.querySelectorAll('img[src=x], #progress-rows img').length") == 0
                assert b.eval(f"[...document.querySelectorAll('#progress-rows td.name')]"
                              f".some(e => e.textContent === {EVIL!r})")
                # the stream's canvas has been drawn on (some pixel is not the background)
                assert b.eval("""(() => { const c = document.getElementById('stream-canvas');
                    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                    for (let i = 0; i < d.length; i += 4)
                      if (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200) return true;
                    return false; })()""")
                assert b.eval("document.getElementById('status').textContent") == "live"
                # each function's row has its waiting count; the memory view, the results held
                assert b.eval("[...document.querySelectorAll('#progress thead th')]"
                              ".map(e => e.textContent).slice(1, 6).join(' ')") == \
                    "done running waiting failed cancelled"
                assert b.eval("[...document.querySelectorAll('#progress-rows tr')]"
                              ".every(r => /^[0-9]+$/.test(r.querySelector('.waiting').textContent))")
                assert re.fullmatch(r"; [0-9,]+ results held",
                                    b.wait_for("document.getElementById('held').textContent", timeout=60))
        finally:
            stop.set()
            th.join()
