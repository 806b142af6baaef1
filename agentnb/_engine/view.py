"""Read-only views of a run's folded state: what user callbacks receive, and ``run.view``.

The engine hands user code the state it decides on -- an approval policy ``(call, state)``, a tool-choice
policy ``(state)`` -- and a callback that could write to it could lift a budget (``state.tool_calls = 0``) or
edit a call on its way to the tool. So a callback gets a :class:`StateView`: every attribute and query of a
:class:`~agentnb._engine.RunState`, none of its writes. Setting or deleting an attribute raises, and every
value read is a copy (containers are deep-copied; numbers, text and states are returned as they are, since
they cannot change), so changing what a view returns changes nothing in the run. Taking a view copies
nothing: a policy that reads one counter pays for one counter.

:class:`RunView` (``run.view``) is the same view pinned to a moment: while the run has not moved on it reads
the run's own state; once the run moved on, it reads the fold of the log's prefix up to that moment (made
once, on first need). It holds the run's state and its event list, never the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any, ClassVar

from .._states import LoopState
from ..events import BaseEvent
from .fold import RunState

_AS_IS = frozenset({int, float, str, bool, type(None), LoopState})
"""Values returned without a copy: they cannot be changed."""

_OWN = frozenset({"_view_live", "_view_now", "_view_seq", "_view_prefix", "_view_events", "_view_source",
                  "_view_what", "__class__", "__setattr__", "__delattr__", "__eq__", "__repr__"})
"""Names a view answers itself; every other name is read off the state it shows."""


class StateView(RunState):
    """A read-only view of a :class:`~agentnb._engine.RunState` (what a policy receives as its ``state``).

    Example:
        >>> import agentnb as anb
        >>> from agentnb._engine import RunState
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("hi")
        >>> view = StateView(RunState.fold(run.run().events))
        >>> view.tool_calls
        1
        >>> view.tool_calls = 0
        Traceback (most recent call last):
        ...
        AttributeError: the state a callback receives is read-only: tool_calls cannot be set ...
    """

    __slots__ = ("_view_live",)

    _view_what: ClassVar[str] = "the state a callback receives is read-only"

    def __init__(self, state: RunState) -> None:  # holds no state of its own
        object.__setattr__(self, "_view_live", state)

    def _view_source(self) -> RunState:
        live: RunState = object.__getattribute__(self, "_view_live")
        return live

    def __getattribute__(self, name: str) -> Any:
        if name in _OWN:
            return object.__getattribute__(self, name)
        value = getattr(object.__getattribute__(self, "_view_source")(), name)
        return value if type(value) in _AS_IS else deepcopy(value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._view_what}: {name} cannot be set (fold the events, RunState.fold(run.events), "
                             "for a state of your own)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self._view_what}: {name} cannot be deleted")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunState):
            return NotImplemented
        theirs = other._view_source() if isinstance(other, StateView) else other
        return RunState.__eq__(self._view_source(), theirs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({RunState.__repr__(self._view_source())})"


class RunView(StateView):
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

    __slots__ = ("_view_events", "_view_now", "_view_prefix", "_view_seq")

    _view_what: ClassVar[str] = "run.view is a read-only snapshot"

    def __init__(self, now: Callable[[], RunState], events: Sequence[BaseEvent]) -> None:
        live = now()
        StateView.__init__(self, live)
        object.__setattr__(self, "_view_now", now)
        object.__setattr__(self, "_view_events", events)
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


__all__ = ["RunView", "StateView"]
