"""Resuming a stored run: fold its log again and check it may go on (``Run.resume``).

Before anything executes: the checkpoint's seals are verified (a tampered or truncated checkpoint raises
:class:`~agentnb.CheckpointError`), and so is the log itself: one whose seals hold but that the fold refuses
(an approval resolved that was never requested, a result before its call started) raises a
``CheckpointError`` naming the event, never the fold's error alone; the loop's tools and approval policy must
be those the run started with (``allow_policy_change`` to accept a change); every call still to run is
validated against the current schema; recorded result bindings are recomputed.

A run stopped in the middle of a model call asks the model again (a ``ModelRetried`` event); a run stopped in
the middle of a side-effecting call consults the effect ledger when it goes on (reuse the outcome, re-run an
idempotent tool with the same key, or pause as "outcome unknown"). One driver at a time: a run whose lease
another driver holds raises :class:`~agentnb.RunLocked` (naming the owner and the expiry); a lease that expired
without being released (its driver died) is taken over only with ``take_over=True``. A paused or finished run
holds no lease.

A seal says who wrote the log (whoever holds the key), not that its decisions still hold, so approval
requirements are derived again rather than read: for every call validated but not started, the engine asks
this loop's tools and approval policy whether a person must decide (:func:`~agentnb._engine.owed_approval`).
A call whose log says it needs nobody but which needs a person now is *asked for*, not refused: ``Run.resume``
appends its ``ApprovalRequested`` (its ``note`` says why) before anything runs, so the run comes back paused
and the approvers decide, as they would have if the log had asked; nothing of that turn starts until they
answer. Requirements are only added, never dropped (a call the log says needs approval still waits for it); a
call that had started is left to the effect ledger, as above; and a decision a person recorded is kept, since
a seal cannot tell a forged approval from a real one.

:func:`load_checked` is a function of the store and the loop: it reads the run's events (the store verifies
their seals), folds them (a refused fold is a ``CheckpointError`` whose cause is the fold's
:class:`~agentnb.TranscriptError`), and refuses a run that cannot go on under this loop -- the loop's tools and
approval policy must be those the run started with; every call still to run must fit the current schema;
recorded result bindings are recomputed from the state, not read from the log (the engine's
:func:`~agentnb._engine.resume_problem`). Nothing is taken or written here, so a refused resume leaves
nothing behind; ``Run.resume`` then takes the lease, appends the approvals the engine says are owed, and moves
a seekable model to where the run stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._engine import RunState, resume_problem
from .._messages import Message
from .._states import S
from ..events import BaseEvent, ModelRequested, ModelRetried, RunStarted
from ..exceptions import CheckpointError, ResumeError, TranscriptError
from ..store import Store
from .history import policy_diff

if TYPE_CHECKING:
    from .loopspec import LoopSpec


@dataclass(frozen=True)
class Stored:
    """A stored run, folded and checked: its events, its state, its first event, where its model stands."""

    events: list[BaseEvent]
    state: RunState
    first: RunStarted
    seek: int
    """The request a seekable model answers next (every request so far, retries included)."""

    def prompt(self, system: str | None) -> list[Message]:
        """The messages the run was started with, without the loop's system prompt (``Run.prompt``)."""
        messages = self.first.messages
        return [m for m in messages if m.role != "system"] if system else list(messages)


def load_checked(store: Store, loop: LoopSpec, run_id: str, *, allow_policy_change: bool) -> Stored:
    """The stored run ``run_id``, folded and checked (see ``Run.resume`` for what is checked and raised)."""
    events = store.load(run_id)
    first = events[0] if events else None
    if not isinstance(first, RunStarted):
        raise ResumeError(f"run {run_id!r} does not start with RunStarted")
    try:
        rs = RunState.fold(events)
    except TranscriptError as exc:  # sealed, yet not a log a run can have: as untrustworthy as a broken seal
        raise CheckpointError(f"run {run_id!r} cannot be resumed: its stored log is not one a run can have "
                              f"({exc})") from exc
    recorded = first.settings.get("policy_revision")
    if recorded != loop.policy_revision and not allow_policy_change:
        raise ResumeError(
            f"run {run_id!r} started under another tool or approval policy: {policy_diff(first, loop.registry)}. "
            "Resume with the loop it started with, or pass allow_policy_change=True."
        )
    problem = resume_problem(rs, loop.config)
    if problem is not None:
        raise ResumeError(f"run {run_id!r}: {problem}")
    attempts = sum(isinstance(e, ModelRequested | ModelRetried) for e in events)
    return Stored(events, rs, first, attempts - 1 if rs.state is S.MODEL_REQUESTED else attempts)
