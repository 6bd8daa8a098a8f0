"""The Backend protocol (taskgraph._backend): what compute(), use_scheduler and result() accept,
and the one compute sequence they run over it."""
import pytest

import taskgraph as tg
from taskgraph._backend import Backend
from taskgraph.serial import run_serially


@tg.task
def add(a, b):
    return a + b


@tg.task
def boom():
    raise ValueError("boom")


class InThread:
    """A backend that runs graphs in the calling thread (records what it ran)."""
    closed = False

    def __init__(self):
        self.ran = []

    def _check_open(self):
        if self.closed:
            raise tg.SchedulerClosedError("closed")

    def _runs_current_task(self):
        return False

    def _run(self, nodes, timeout=None, progress=False, cancel_on_timeout=False):
        self.ran.append(list(nodes))
        run_serially(nodes)
        return None


def test_both_schedulers_are_backends_and_other_objects_are_refused():
    with tg.Scheduler(1) as s:
        assert isinstance(s, Backend)
    assert not isinstance(object(), Backend)
    with pytest.raises(TypeError, match="scheduler must be a taskgraph.Scheduler or backend"):
        tg.compute(add(1, 2), scheduler=object())
    with pytest.raises(TypeError, match="use_scheduler needs"):
        tg.use_scheduler(object())


def test_compute_runs_any_backend_with_the_same_shapes_and_errors():
    b = InThread()
    x = add(1, 2)
    assert tg.compute(x, [add(x, 1)], scheduler=b) == (3, [4])
    assert len(b.ran) == 1
    with pytest.raises(ValueError, match="boom"):
        tg.compute(boom(), scheduler=b)
    b.closed = True
    with pytest.raises(tg.SchedulerClosedError):
        tg.compute(add(1, 1), scheduler=b)


def test_a_current_backend_runs_result_of_a_lazy_node():
    b = InThread()
    with tg.use_scheduler(b):
        assert add(2, 3).result() == 5
        assert tg.compute(add(1, 1)) == 2
    assert len(b.ran) == 2
