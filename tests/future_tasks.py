"""Tasks shared by the tests of the Future protocol: test_futures, test_aio, test_wait."""
import taskgraph as tg


@tg.task
def add(a, b):
    return a + b


@tg.task
def fail(msg):
    raise ValueError(msg)


@tg.task
def hold(ev, value=None):
    """Returns value once ev is set (at most 30 s: a failing test does not hang)."""
    ev.wait(30)
    return value
