"""The loop's state machine.

Every state change of a run goes through :data:`TRANSITIONS`, one table of
``{state: {event type: allowed next states}}``; nothing here does I/O. An event type missing from a state's
row, or a next state outside the allowed set, raises :class:`IllegalTransition` naming
both. Most rows allow exactly one next state; where the event itself decides (``RunFinished`` names the
terminal state, ``ApprovalResolved`` goes on waiting while other approvals are open), the set lists every
legal choice. The debugger draws its diagram from this table.

A run's life::

    NEW -RunStarted-> READY -ModelRequested-> MODEL_REQUESTED (-TextMerged/ArgumentsMerged/ModelRetried->)
      -TurnCompleted-> RESPONDED -CallParsed-> VALIDATING (-CallValidated/CallRejected->)
      [-ApprovalRequested-> WAITING_APPROVAL -ApprovalResolved->] -ToolStarted-> EXECUTING (-ToolFinished->)
      -ResultsBound-> RESULTS_READY -ModelRequested-> MODEL_REQUESTED ...
    RESPONDED -RunFinished-> COMPLETED | REFUSED | INCOMPLETE | FAILED | ...
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from .exceptions import TranscriptError


class IllegalTransition(TranscriptError):
    """An event arrived that the state machine does not allow in the current state.

    Attributes:
        state: the state the event arrived in.
        next_state: the state the event said the run moves to.
    """

    def __init__(self, state: LoopState, event_type: str, next_state: LoopState | None, why: str, *,
                 seq: int | None = None) -> None:
        self.state = state
        self.next_state = next_state
        target = f" -> {next_state.value}" if next_state is not None else ""
        where = f"event {seq} ({event_type}): " if seq is not None else ""
        super().__init__(f"{where}illegal transition: {event_type} in state {state.value}{target} ({why})",
                         seq=seq, event_type=event_type)


class LoopState(StrEnum):
    """Where a run is. Terminal states are listed in :data:`TERMINAL`."""

    NEW = "NEW"
    READY = "READY"
    MODEL_REQUESTED = "MODEL_REQUESTED"
    RESPONDED = "RESPONDED"
    VALIDATING = "VALIDATING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    EXECUTING = "EXECUTING"
    RESULTS_READY = "RESULTS_READY"
    COMPLETED = "COMPLETED"
    REFUSED = "REFUSED"
    INCOMPLETE = "INCOMPLETE"
    FAILED = "FAILED"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    NO_PROGRESS = "NO_PROGRESS"
    CANCELLED = "CANCELLED"

    @property
    def is_terminal(self) -> bool:
        """True for the states a run never leaves."""
        return self in TERMINAL

    @property
    def is_paused(self) -> bool:
        """True for the states in which a run waits for a person."""
        return self in PAUSED


class S:
    """The members of :class:`LoopState` as plain class attributes, for hot paths.

    Reading ``LoopState.READY`` goes through the Enum metaclass and costs several times a plain attribute;
    the engine reads states on every event.
    """

    NEW: Final = LoopState.NEW
    READY: Final = LoopState.READY
    MODEL_REQUESTED: Final = LoopState.MODEL_REQUESTED
    RESPONDED: Final = LoopState.RESPONDED
    VALIDATING: Final = LoopState.VALIDATING
    WAITING_APPROVAL: Final = LoopState.WAITING_APPROVAL
    EXECUTING: Final = LoopState.EXECUTING
    RESULTS_READY: Final = LoopState.RESULTS_READY
    COMPLETED: Final = LoopState.COMPLETED
    REFUSED: Final = LoopState.REFUSED
    INCOMPLETE: Final = LoopState.INCOMPLETE
    FAILED: Final = LoopState.FAILED
    BUDGET_EXHAUSTED: Final = LoopState.BUDGET_EXHAUSTED
    NO_PROGRESS: Final = LoopState.NO_PROGRESS
    CANCELLED: Final = LoopState.CANCELLED


TERMINAL: frozenset[LoopState] = frozenset(
    {S.COMPLETED, S.REFUSED, S.INCOMPLETE, S.FAILED, S.BUDGET_EXHAUSTED, S.NO_PROGRESS, S.CANCELLED}
)
"""States with no way out."""

PAUSED: frozenset[LoopState] = frozenset({S.WAITING_APPROVAL})
"""States in which a run waits for a person and does nothing by itself."""

_STAY = "stay"  # marker for self-loops, expanded below


def _row(**events: frozenset[LoopState] | str) -> dict[str, frozenset[LoopState] | str]:
    return events


_ABORT = frozenset({S.CANCELLED, S.FAILED, S.BUDGET_EXHAUSTED})

_TABLE: dict[LoopState, dict[str, frozenset[LoopState] | str]] = {
    S.NEW: _row(RunStarted=frozenset({S.READY})),
    S.READY: _row(
        Interjected=_STAY,
        ModelRequested=frozenset({S.MODEL_REQUESTED}),
        GuardTripped=_STAY,
        CompressionApplied=_STAY,
        RunFinished=_ABORT,
    ),
    S.MODEL_REQUESTED: _row(
        Interjected=_STAY,
        TextMerged=_STAY,
        ArgumentsMerged=_STAY,
        ModelRetried=_STAY,
        GuardTripped=_STAY,
        TurnCompleted=frozenset({S.RESPONDED}),
        RunFinished=_ABORT | {S.INCOMPLETE},
    ),
    S.RESPONDED: _row(
        Interjected=_STAY,
        CallParsed=frozenset({S.VALIDATING}),
        OutputValidated=frozenset({S.RESPONDED, S.RESULTS_READY}),
        ResultsBound=frozenset({S.RESULTS_READY}),  # a paused turn (finish "pause") goes back as it is
        GuardTripped=_STAY,
        RunFinished=_ABORT | {S.COMPLETED, S.REFUSED, S.INCOMPLETE},
    ),
    S.VALIDATING: _row(
        Interjected=_STAY,
        CallParsed=_STAY,
        CallValidated=_STAY,
        CallRejected=_STAY,
        ApprovalRequested=frozenset({S.WAITING_APPROVAL}),
        ToolStarted=frozenset({S.EXECUTING}),
        ResultsBound=frozenset({S.RESULTS_READY}),
        OutputValidated=_STAY,
        GuardTripped=_STAY,
        CompressionApplied=_STAY,
        RunFinished=_ABORT | {S.COMPLETED},
    ),
    S.WAITING_APPROVAL: _row(
        Interjected=_STAY,
        ApprovalRequested=_STAY,
        CallRejected=frozenset({S.WAITING_APPROVAL, S.EXECUTING}),  # a person cancelled a call (run.cancel_call)
        ApprovalResolved=frozenset({S.WAITING_APPROVAL, S.EXECUTING, S.RESULTS_READY}),
        GuardTripped=_STAY,
        RunFinished=_ABORT,
    ),
    S.EXECUTING: _row(
        Interjected=_STAY,
        ToolStarted=_STAY,
        ToolFinished=_STAY,
        CallRejected=_STAY,
        ApprovalRequested=frozenset({S.WAITING_APPROVAL}),
        ResultsBound=frozenset({S.RESULTS_READY}),
        GuardTripped=_STAY,
        CompressionApplied=_STAY,
        RunFinished=_ABORT,
    ),
    S.RESULTS_READY: _row(
        Interjected=_STAY,
        ModelRequested=frozenset({S.MODEL_REQUESTED}),
        ApprovalRequested=frozenset({S.WAITING_APPROVAL}),
        GuardTripped=_STAY,
        CompressionApplied=_STAY,
        RunFinished=_ABORT | {S.NO_PROGRESS},
    ),
}

TRANSITIONS: dict[LoopState, dict[str, frozenset[LoopState]]] = {
    state: {ev: (frozenset({state}) if nxt == _STAY else nxt) for ev, nxt in row.items()}  # type: ignore[misc]
    for state, row in _TABLE.items()
}
"""``{state: {event type: allowed next states}}``; terminal states have no row."""
for _t in TERMINAL:
    TRANSITIONS[_t] = {}

EVENT_TYPES: frozenset[str] = frozenset(ev for row in TRANSITIONS.values() for ev in row)
"""Every event type the table knows."""


def check_transition(state: LoopState, event_type: str, next_state: LoopState, *, seq: int | None = None) -> None:
    """Raise :class:`IllegalTransition` unless ``event_type`` may move ``state`` to ``next_state``.

    ``seq``, when given, is the event's: the error names it.
    """
    allowed = TRANSITIONS[state].get(event_type)
    if allowed is None:
        if state in TERMINAL:
            why = f"{state.value} is terminal: no event follows the run's end"
        else:
            why = f"{event_type} is not allowed in {state.value}"
        raise IllegalTransition(state, event_type, next_state, why, seq=seq)
    if next_state not in allowed:
        names = ", ".join(sorted(s.value for s in allowed))
        raise IllegalTransition(
            state, event_type, next_state, f"{event_type} in {state.value} may lead only to {names}", seq=seq
        )


def edges() -> list[tuple[LoopState, str, LoopState]]:
    """Every (state, event type, next state) edge of the table, for drawing the diagram."""
    return [(s, ev, n) for s, row in TRANSITIONS.items() for ev, nxts in row.items() for n in sorted(nxts)]
