"""``run.view``: a read-only snapshot of a run's folded state, cheap to take.

A :class:`RunView` is a :class:`~agentnb.engine.RunState` (every attribute and query of one) that cannot
change the run it was taken from: setting an attribute raises, and every value read is a copy (containers
are deep-copied), so changing what it returns changes nothing in the run. It is the state *as of the moment
it was taken*: while the run has not moved on it reads the run's own state; once the run moved on, it
reads the fold of the log's prefix up to that moment (made once, on first need). Taking one copies nothing,
so reading one counter off it (``run.view.tool_calls``) costs no more than reading the counter.

A view holds the run's state and its event list, never the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any

from ..engine import RunState
from ..events import BaseEvent
from ..states import LoopState

_AS_IS = frozenset({int, float, str, bool, type(None), LoopState})
"""Values returned without a copy: they cannot be changed."""

_OWN = frozenset({"_view_now", "_view_seq", "_view_live", "_view_prefix", "_view_events", "_view_source",
                  "__class__", "__setattr__", "__delattr__", "__eq__", "__repr__"})


class RunView(RunState):
    """A read-only snapshot of a run's folded state (what ``run.view`` returns).

    ``now`` returns the run's state now (a run replaces its state object when it reloads from its store);
    ``events`` is the run's log, from which an older moment is folded again.

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("hi")
        >>> view = run.run().view
        >>> view.tool_calls, view.state.value
        (1, 'COMPLETED')
        >>> view.tool_calls = 5
        Traceback (most recent call last):
        ...
        AttributeError: run.view is a read-only snapshot: tool_calls cannot be set ...
    """

    __slots__ = ("_view_events", "_view_live", "_view_now", "_view_prefix", "_view_seq")

    def __init__(self, now: Callable[[], RunState], events: Sequence[BaseEvent]) -> None:  # holds no state of its own
        live = now()
        object.__setattr__(self, "_view_now", now)
        object.__setattr__(self, "_view_events", events)
        object.__setattr__(self, "_view_live", live)
        object.__setattr__(self, "_view_seq", live.seq)
        object.__setattr__(self, "_view_prefix", None)

    def _view_source(self) -> RunState:
        get = object.__getattribute__
        live: RunState = get(self, "_view_live")
        seq: int = get(self, "_view_seq")
        now: Callable[[], RunState] = get(self, "_view_now")
        if now() is live and live.seq == seq:
            return live  # the run has not moved on: its state is the snapshot
        prefix: RunState | None = get(self, "_view_prefix")
        if prefix is None:
            prefix = RunState.fold(get(self, "_view_events")[:seq])
            object.__setattr__(self, "_view_prefix", prefix)
        return prefix

    def __getattribute__(self, name: str) -> Any:
        if name in _OWN:
            return object.__getattribute__(self, name)
        value = getattr(object.__getattribute__(self, "_view_source")(), name)
        return value if type(value) in _AS_IS else deepcopy(value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"run.view is a read-only snapshot: {name} cannot be set (fold the events, "
                             "RunState.fold(run.events), for a state of your own)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"run.view is a read-only snapshot: {name} cannot be deleted")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunState):
            return NotImplemented
        mine = self._view_source()
        theirs = other._view_source() if isinstance(other, RunView) else other
        return RunState.__eq__(mine, theirs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RunView({RunState.__repr__(self._view_source())})"
