import os
import signal
import sys
import sysconfig
import threading
import warnings

import pytest

with warnings.catch_warnings():  # on a GIL build: warned at import, expected here
    warnings.filterwarnings("ignore", message="taskgraph: the GIL is enabled")
    import taskgraph as tg

WORKER_COUNTS = [1, 2, 4, 8]

# The Ctrl-C tests (interrupt_main, or SIGINT sent to a script) need Python's own SIGINT
# handler. A shell starts background jobs (`make test &`, nohup) with SIGINT ignored, and then
# Python keeps it ignored and interrupt_main() does nothing: put the handler back, here and,
# through the inherited disposition, in the scripts the tests start.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# tests/core checks the C core through a test-only cffi binding, in a session of its own on a
# free-threaded interpreter (`make test-core` sets TASKGRAPH_CORE_SESSION=1): cffi 1.17 turns
# the GIL on in CPython 3.13t (cffi 2 refuses 3.13t), and on 3.14t, where cffi 2 keeps it off,
# keeping them apart lets this session's check that the GIL stayed off (below) speak for
# taskgraph alone.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
_GIL_FLAG = sys._xoptions.get("gil", os.environ.get("PYTHON_GIL"))
CORE_LEFT_OUT = FREE_THREADED and os.environ.get("TASKGRAPH_CORE_SESSION") != "1"
collect_ignore = ["core"] if CORE_LEFT_OUT else []
_CORE_NOTICE = ("tests/core (cffi checks of the C core) left out of this session on a "
                "free-threaded interpreter: `make test-core` runs them in a session of their own")


def pytest_report_header(config):
    return [_CORE_NOTICE] if CORE_LEFT_OUT else []


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if CORE_LEFT_OUT:
        terminalreporter.write_line(f"notice: {_CORE_NOTICE}")


def pytest_sessionfinish(session, exitstatus):
    """On a free-threaded interpreter whose GIL was not forced on, the session must end with
    the GIL still off: something that turned it on (an import of cffi, say) fails the run."""
    if FREE_THREADED and _GIL_FLAG != "1" and sys._is_gil_enabled():
        culprits = [m for m in ("_cffi_backend",) if m in sys.modules]
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"error: the GIL was turned on during this session (modules loaded: "
                          f"{culprits or 'unknown'}); the package and its tests must keep it off",
                          red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(params=WORKER_COUNTS, ids=lambda n: f"w{n}")
def sched(request):
    """A scheduler per worker count (8 oversubscribes these 2-core machines on purpose)."""
    with tg.Scheduler(workers=request.param) as s:
        yield s


@pytest.fixture(autouse=True)
def no_thread_leak():
    """Every test must leave no worker thread of its own behind."""
    before = {t.ident for t in threading.enumerate()}
    yield
    from taskgraph import scheduler
    default = scheduler._default
    mine = f"taskgraph-{default.number}-" if default is not None else None
    left = [t for t in threading.enumerate()
            if t.ident not in before and t.name.startswith("taskgraph-") and t.is_alive()
            and not (mine and t.name.startswith(mine))]
    assert not left, f"threads left behind: {[t.name for t in left]}"
