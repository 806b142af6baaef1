"""How the engine's events get their header: built without one, stamped by :func:`stamp` as they are appended.

Theory of operation. Every event the engine decides on is a complete, typed event object -- body and
``state`` -- except for its header: ``seq``, ``ts``, ``run_id`` and ``turn`` say *where* and *when* the event
lands in the log, which is only known at the moment the driver appends it. So the engine builds events with
the placeholder header :data:`HEAD` (``ts`` is :data:`UNSTAMPED`, ``seq`` is -1, which the fold refuses, so an
unstamped event can never be folded by mistake), and the driver calls :func:`stamp` with the clock reading
just before it stores the event. The rule for each header field lives here, not in the driver.

The split keeps :func:`~agentnb._engine.decide` pure -- the same state gives equal actions, whatever the
time -- while the driver stays the only reader of the clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .._states import LoopState
from ..events import BaseEvent, ModelRequested, RunFinished

UNSTAMPED = datetime(1970, 1, 1, tzinfo=UTC)
"""The ``ts`` of an event the engine built and the driver has not appended yet."""

HEAD: dict[str, Any] = {"seq": -1, "ts": UNSTAMPED, "run_id": "", "turn": 0}
"""The placeholder header of an engine-built event. The engine writes it out on each event it builds
(``Event(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=..., ...)``: a third faster than ``**HEAD``)."""


def stamp(rs: Any, event: BaseEvent, ts: datetime) -> BaseEvent:
    """Give ``event`` its place in the run folded as ``rs``: the next ``seq``, the run, the turn, and ``ts``.

    A ``ModelRequested`` opens the next turn; every other event belongs to the current one. A run's first
    event (``RunStarted``) keeps the ``run_id`` it was built with (the state knows none yet).

    Example:
        >>> from agentnb._engine import RunState, finished
        >>> from agentnb._states import S
        >>> ev = stamp(RunState(run_id="run_1", seq=7, turn=2), finished(S.CANCELLED, "stop"), UNSTAMPED)
        >>> ev.seq, ev.run_id, ev.turn
        (7, 'run_1', 2)
    """
    event.seq = rs.seq
    event.ts = ts
    if rs.run_id:
        event.run_id = rs.run_id
    event.turn = rs.turn + 1 if type(event) is ModelRequested else rs.turn
    return event


def finished(state: LoopState, reason: str, output: str | None = None) -> RunFinished:
    """The run ends in ``state`` (a terminal one), for ``reason``, with ``output`` (the answer's text, if any)."""
    return RunFinished(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=state, final=state, reason=reason, output=output)


__all__ = ["HEAD", "UNSTAMPED", "finished", "stamp"]
