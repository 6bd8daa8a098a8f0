import threading
import warnings

import pytest

with warnings.catch_warnings():  # on a GIL build: warned at import, expected here
    warnings.filterwarnings("ignore", message="taskgraph: the GIL is enabled")
    import taskgraph as tg

WORKER_COUNTS = [1, 2, 4, 8]


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
