"""Tasks shared by several test modules."""
import pytest

import taskgraph as tg
from taskgraph._native import core

# Tests that arm injected faults (core._arm_fault) need a test build of the extension.
needs_faults = pytest.mark.skipif(
    not core.FAULTS, reason="taskgraph._core was built without fault injection (the fault sites are "
    "compiled in only with TASKGRAPH_TEST_BUILD=1, as `make setup` and tools/asan.sh build it)")


def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


@tg.task(name="fib")
def fib(n, cutoff=0):
    if n <= max(cutoff, 1):
        return fib_serial(n)
    a = fib(n - 1, cutoff)
    b = fib(n - 2, cutoff)
    return a.result() + b.result()


def fib_calls(n, cutoff=0):
    """How many tasks fib(n, cutoff) creates."""
    return 1 if n <= max(cutoff, 1) else 1 + fib_calls(n - 1, cutoff) + fib_calls(n - 2, cutoff)


def counted_leaves(n, sleep):
    """n leaf nodes (leaf(i) returns i after sleeping `sleep` s), a task `total(xs)` that sums a
    list of them, and the dict counting how many times each leaf ran (to check that a node
    shared by several computes runs once)."""
    import threading
    import time
    counts, lock = {}, threading.Lock()

    @tg.task
    def leaf(i):
        with lock:
            counts[i] = counts.get(i, 0) + 1
        time.sleep(sleep)
        return i

    @tg.task
    def total(xs):
        return sum(xs)

    return [leaf(i) for i in range(n)], total, counts


def scaled(n, small):
    """n, or small under the sanitizer builds (make test-asan sets TASKGRAPH_SANITIZED)."""
    import os
    return small if os.environ.get("TASKGRAPH_SANITIZED") else n


@tg.task
def qsort(xs, cutoff=64):
    if len(xs) <= cutoff:
        return sorted(xs)
    pivot = xs[len(xs) // 2]
    lo = qsort([x for x in xs if x < pivot], cutoff)
    hi = qsort([x for x in xs if x > pivot], cutoff)
    mid = [x for x in xs if x == pivot]
    return lo.result() + mid + hi.result()


def run_script(code, timeout=60, args=(), env_extra=None):
    """Runs `code` in a fresh interpreter (this one) with faulthandler on; returns the
    CompletedProcess. A crash shows as a non-zero return code with the C stack in stderr, a hang
    as subprocess.TimeoutExpired (the test fails instead of hanging)."""
    import os
    import subprocess
    import sys
    import textwrap
    env = dict(os.environ)
    env.update(env_extra or {})
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


CHROMIUM = __import__("shutil").which("chromium") or __import__("shutil").which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="headless Chromium not installed (Debian package `chromium`)")


def screenshot(page, png, size="1200,2400", timeout=180):
    """Renders the HTML file `page` with headless Chromium into `png` and returns its bytes
    (asserting a PNG was written). Chromium runs without this process's LD_PRELOAD (the
    AddressSanitizer runtime that tools/asan.sh preloads would make it crawl)."""
    import os
    import subprocess
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        f"--window-size={size}", f"--screenshot={png}", page.as_uri()],
                       capture_output=True, text=True, timeout=timeout,
                       env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    assert r.returncode == 0, r.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return data


def dump_dom(page, timeout=180):
    """The DOM of the HTML file `page` after headless Chromium ran its scripts (a probe script
    in the page can write what it measured into the DOM), as text."""
    import os
    import subprocess
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                        page.as_uri()], capture_output=True, text=True, timeout=timeout,
                       env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout
