"""What I/O brings back, as small typed records: the one kind of input :func:`~agentnb._engine.receive` takes.

Theory of operation. The driver's ports each perform one kind of I/O -- ask the model, claim an effect and
run a tool, wait for a person, summarize -- and return one of these records, never an event. The engine's
:func:`~agentnb._engine.receive` turns a record into the event to append (or, for a ledger claim, into a
:data:`Verdict`), dispatched by the record's class as the fold is by the event's class. So every rule that
gives I/O a meaning -- the texts the model reads, the write-vs-read rule for a stopped call, retry or fail --
is in one place, and each is testable on a hand-made state with no I/O at all.

The model's streamed fragments are the stream items themselves (:class:`~agentnb._request.TextDelta`,
:class:`~agentnb._request.ArgumentsDelta`, already masked by the port); the rest are here:

- model: :class:`TurnReceived`, :class:`ModelFailed`, :class:`StreamEnded`, :class:`StreamBroke`,
  :class:`ModelRaised`, :class:`NotAnItem`, :class:`ModelLost` (a process stopped during the request);
- tools: :class:`LedgerAnswered` (what a claim found), :class:`ToolReturned`, :class:`ToolStopped` (a limit,
  an interrupt or a cancellation stopped it, or it never started), :class:`DuplicateDone` (another call of the
  batch did the effect);
- people: :class:`Decision` (approve, deny, submit, with its time), :class:`Intervention` (a person steps into a
  run that nobody drives: says something, cancels one call, ends the run), and :class:`Cancelled`;
- compression: :class:`Summary`.

Records are slotted and never changed after they are made; the ones made on every round trip (a turn, a tool's
return, a ledger answer) are not ``frozen`` because a frozen dataclass costs several times more to build (as
events are not: see :mod:`agentnb.events`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from .._messages import ModelTurn
from .._outcomes import Effect, EffectDone, Outcome

# -- the model ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class TurnReceived:
    """The model's whole answer (its calls may lack ids or repeat ones the conversation holds)."""

    turn: ModelTurn
    latency_s: float = 0.0
    """Seconds from sending the request to the whole answer."""


@dataclass(frozen=True, slots=True)
class ModelFailed:
    """A model request failed with a model error (the facts a retry decision needs)."""

    error: str
    status: int | None = None
    """The HTTP status, when there was one."""
    retryable: bool = False
    retry_after: float | None = None
    """Seconds the provider asked to wait before asking again."""
    spent_s: float = 0.0
    """Seconds since the request's first attempt."""
    jitter: float = 1.0
    """A draw in [0.5, 1) that scales the backoff (the port draws it: the engine draws no random number)."""
    wire: dict[str, Any] | None = None
    """The failed request's HTTP exchange when the model captured it (the event it leads to keeps it)."""


@dataclass(frozen=True, slots=True)
class StreamEnded:
    """The model's answer ended without a final turn."""


@dataclass(frozen=True, slots=True)
class StreamBroke:
    """The answer's stream broke before its done signal."""

    error: str
    wire: dict[str, Any] | None = None
    """What went over HTTP until the break, when the model captured it (the run's last event keeps it)."""


@dataclass(frozen=True, slots=True)
class ModelRaised:
    """The model (or a script turn) raised something that is not a model error: a bug, kept as the cause."""

    where: str


@dataclass(frozen=True, slots=True)
class NotAnItem:
    """The model yielded something that is neither a stream item nor a turn."""

    kind: str
    """The type name of what it yielded."""


@dataclass(frozen=True, slots=True)
class ModelLost:
    """A resumed run had stopped in the middle of a model call: the answer, if any, was lost with the process."""


# -- tools -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class LedgerAnswered:
    """What a side-effecting call's claim on the effect ledger found (``existing``: None when the claim is new)."""

    call_id: str
    existing: Effect | None
    idempotent: bool
    """The tool may run again with the same key (it says so)."""
    batch: frozenset[str] = frozenset()
    """The ids of the calls executed together with this one."""
    unrun: bool = False
    """This process made the claim found, and knows the tool never ran: the claim's reply was lost."""


@dataclass(slots=True)
class LedgerPeeked:
    """What the effect ledger holds for a fork's write, read *before* any claim (``existing``: None, nothing).

    A fork decides by its effect policy what to do with a write nobody made yet (ask, simulate, run), and a
    claim would already make it; so the ledger is only looked at first. An effect found is claimed as usual
    (the claim's answer makes it ``inherited``).
    """

    call_id: str
    existing: Effect | None


@dataclass(slots=True)
class ParentRead:
    """For a fork that reuses reads (``reads="reuse"``): the parent's result of the same read, if it made one."""

    call_id: str
    found: Any
    """The parent's ``ToolFinished`` for the same tool and canonical arguments (None: the parent made no such read)."""


@dataclass(frozen=True, slots=True)
class Proceed:
    """Verdict: run the call.

    ``retry``: it started before and runs again with its key; ``simulate``: run the tool's simulator, without a
    claim; ``claim``: a fork's write may run: claim it first, then judge the claim.
    """

    retry: bool = False
    simulate: bool = False
    claim: bool = False


@dataclass(frozen=True, slots=True)
class AwaitFirst:
    """Verdict: another call of the same batch does the same effect now; this one is its duplicate."""

    first: str
    """The call id that does the effect."""


@dataclass(slots=True)
class ToolReturned:
    """A call ran and its tool returned (or raised: an error outcome). The outcome is already masked."""

    call_id: str
    outcome: Outcome
    effect: EffectDone | None = None
    """The ledger outcome to record with the event (a call that holds a ledger claim)."""
    reused: bool = False
    """The outcome comes from the ledger: this very call finished before (a resume)."""
    simulated: bool = False
    """The tool's simulator ran, not the tool (a fork with ``effects="simulate"``)."""


@dataclass(frozen=True, slots=True)
class ToolStopped:
    """A call did not return: a limit, an interrupt or a cancellation stopped it, or it never started.

    What that means is the engine's write-vs-read rule: a read is answered (``timeout``, an error, ``skipped``);
    a write that may have happened pauses as *outcome unknown*; a call that never started is ``skipped``.
    """

    call_id: str
    why: Literal["limit", "interrupted", "cancelled"]
    started: bool
    """It began running (its effect may have happened)."""
    reason: str = ""
    """The cancellation's reason."""
    limit_s: float | None = None
    elapsed_s: float = 0.0
    by_deadline: bool = False
    """The run's deadline, not the call's timeout, set the limit."""
    raised: bool = False
    """The tool itself raised the interrupt (rather than the run being interrupted while it ran)."""
    queued: bool = True
    """It had been handed to the executor (False: recorded as started, never handed over)."""


@dataclass(frozen=True, slots=True)
class DuplicateDone:
    """A call whose effect another call of its batch did (``first``), with that call's outcome if it has one."""

    call_id: str
    first: str
    content: str | None
    """What the first call's result says (None: its outcome is not known yet)."""


# -- people, compression -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's (or a client's) answer to a waiting call, at time ``at``."""

    call_id: str
    decision: Literal["approved", "denied", "submitted"]
    at: datetime
    by: str | None = None
    note: str | None = None
    arguments: dict[str, Any] | None = None
    """Edited arguments (approve), not validated yet."""
    digest: str | None = None
    """The arguments digest the approver saw."""
    content: str | None = None
    """A submitted result as the model reads it (masked)."""
    value: Any = None
    """A submitted result's JSON-safe value (masked)."""


@dataclass(frozen=True, slots=True)
class Intervention:
    """A person steps into a run nobody is driving: a message for the model, a call cancelled, or the run ended."""

    text: str
    """What the model reads (the message, or the reason of the cancellation)."""
    by: str | None = None
    call_id: str | None = None
    """The call to cancel (None: a message for the model, or the end of the run)."""
    end: bool = False
    """End the run (``CANCELLED``) with ``text`` as the reason."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The run is cancelled."""

    reason: str


@dataclass(frozen=True, slots=True)
class Summary:
    """Tier-1 compression: the summarizer's history (None: the summarizer failed), for a context of ``tokens``."""

    tokens: int
    kept: list[Any] | None
    removed: list[int]


Result = (TurnReceived | ModelFailed | StreamEnded | StreamBroke | ModelRaised | NotAnItem | ModelLost
          | LedgerAnswered | LedgerPeeked | ParentRead | ToolReturned | ToolStopped | DuplicateDone | Decision
          | Intervention | Cancelled | Summary)
"""Every I/O result (the stream's fragments aside, which are the model's own items)."""

Verdict = Proceed | AwaitFirst
"""What a ledger claim means when it is not an event already (see :func:`~agentnb._engine.receive`)."""

__all__ = ["AwaitFirst", "Cancelled", "Decision", "DuplicateDone", "Intervention", "LedgerAnswered", "LedgerPeeked",
           "ModelFailed",
           "ModelLost", "ModelRaised", "NotAnItem", "ParentRead", "Proceed", "Result", "StreamBroke", "StreamEnded",
           "Summary", "ToolReturned", "ToolStopped", "TurnReceived", "Verdict"]
