"""tg.State: the task states, built from the C module's constants."""
import pytest

import taskgraph as tg
from taskgraph._native import core


@tg.task
def one():
    return 1


@tg.task
def boom():
    raise ValueError("boom")


def test_the_states_are_the_c_constants_in_order():
    assert [s.name for s in tg.State] == [n.upper() for n in core.STATE_NAMES]
    for s in tg.State:
        assert int(s) == getattr(core, s.name) and s.label == core.STATE_NAMES[s]
    assert tg.State.DONE < tg.State.FAILED < tg.State.CANCELLED


def test_state_of_a_node_follows_it_to_its_final_state():
    n, b = one(), boom()
    assert tg.State.of(n) is tg.State.NEW and tg.State.of(n.state) is tg.State.NEW
    assert n.result() == 1 and tg.State.of(n) is tg.State.DONE
    assert isinstance(b.exception(), ValueError) and tg.State.of(b) is tg.State.FAILED


def test_labels_that_are_not_states_are_refused():
    with pytest.raises(ValueError, match="not a task state: 'retried'"):
        tg.State.of("retried")
    # Review 2: anything else raised AttributeError (it was read as a Node's .state)
    for bad in (1, None, b"done", [one()]):
        with pytest.raises(ValueError, match="State.of takes a Node or a state's label"):
            tg.State.of(bad)
