"""What taskgraph takes from CPython's internals holds on the running interpreter.

docs/design/native.md ("What is taken from CPython's internals") lists each use with the
interpreters it is valid for, what it relies on, and the test that fails if that breaks; the
first test here checks that each listed test exists, the others are the tests of the uses no
other module covers."""
import pathlib
import re
import sys
import threading
import weakref

import pytest

import taskgraph as tg
from taskgraph._native import core

ROOT = pathlib.Path(__file__).resolve().parent.parent
NATIVE = ROOT / "docs" / "design" / "native.md"


def internals_table():
    """The rows of native.md's table of internals: (use, interpreters, relies on, test)."""
    text = NATIVE.read_text()
    part = text.split("## What is taken from CPython's internals", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in part.splitlines() if line.startswith("|")]
    return [r for r in rows[2:] if len(r) == 4]  # below the header and its rule


def test_every_use_of_cpython_internals_names_a_test_that_exists():
    rows = internals_table()
    assert len(rows) >= 6, rows
    for use, versions, relies, test in rows:
        found = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", test)
        assert found, f"{use}: no test named in {test!r}"
        for path, name in found:
            src = (ROOT / path).read_text()
            assert re.search(rf"^(async )?def {name}\(", src, re.M), f"{use}: {path}::{name} does not exist"


@tg.task
def _box(x):
    return x


@pytest.mark.skipif(not core.FREE_THREADED, reason="an object's owner thread is a free-threaded "
                    "build's (biased reference counting)")
def test_a_lazy_node_dropped_last_by_another_thread_is_freed_there_at_once():
    """A lazy node gives up its owner thread when it is made (tg_node_unown, noderec.c: the
    'merged' state CPython itself gives an object whose owner let go): another thread that
    drops the last reference frees it at once, rather than queueing it to this thread, which
    would free it only when it next runs Python code (never, while it sleeps in a compute)."""
    box = [_box(1)]
    freed_on = []
    ref = weakref.ref(box[0], lambda r: freed_on.append(threading.get_ident()))
    seen = []

    def drop():
        node = box.pop()
        del node
        seen.append(list(freed_on))  # before this thread ends, before the main thread runs on

    t = threading.Thread(target=drop)
    t.start()
    t.join()
    assert ref() is None
    assert seen == [[t.ident]], f"freed on {seen}, not at once by the thread that dropped it ({t.ident})"


def test_a_node_and_a_task_the_interpreter_counts_as_the_docs_say():
    """The counts the per-task path relies on, on this interpreter: a Task of a top-level
    function is immortal (its first one, 3.13t) or deferred (3.14t) or plainly counted (GIL
    builds); a spawned node's references are the spawning thread's own (non-atomic)."""
    t = tg.task(_box.fn)  # a second Task of the same top-level function
    count = sys.getrefcount(t)
    if core.FREE_THREADED and sys.version_info >= (3, 14):
        assert count > 1 << 40  # deferred: the count carries CPython's bias
    elif core.FREE_THREADED:
        assert count < 100  # not the first Task of _box's function: mortal
    else:
        assert count < 100
