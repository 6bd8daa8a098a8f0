"""Task states: one IntEnum built from the constants the C module exports (``core.STATE_NAMES``,
indexed by the C core's TG_* values), so that no state is spelled twice.

``Node.state`` returns the lower-case name (``"done"``), as do trace records; ``State.of``
turns either into a ``State``, and ``State.X.label`` is that name."""
from __future__ import annotations

import enum

from taskgraph._native import core

__all__ = ["State"]

State = enum.IntEnum("State", {name.upper(): value for value, name in enumerate(core.STATE_NAMES)},
                     module=__name__, qualname="State")
State.__doc__ = """A node's state: NEW (lazy), PENDING, READY, RUNNING, DONE, FAILED, CANCELLED
(the last three are final, in that order). ``State.of(node)`` or ``State.of("done")`` gives
one; ``state.label`` is the name ``Node.state`` and trace records use (``"done"``)."""

_BY_LABEL = {s.name.lower(): s for s in State}


def _of(cls, x):
    """The State of a Node, or of a state's label (``"done"``). ValueError for anything else:
    another label (a trace record's ``"retried"`` is an outcome, not a state), another type."""
    if isinstance(x, core.Node):
        label = x.state
    elif isinstance(x, str):
        label = x
    else:
        raise ValueError(f"State.of takes a Node or a state's label (a str), got "
                         f"{type(x).__name__} {x!r:.80}")
    try:
        return _BY_LABEL[label]
    except KeyError:
        raise ValueError(f"not a task state: {label!r}") from None


State.of = classmethod(_of)
State.label = property(lambda self: self.name.lower(), doc="The state's name as Node.state "
                       "spells it (lower case).")
