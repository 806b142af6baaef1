"""The projection half of the fold: what each event means, written once for every reader.

Theory of operation. Three questions about an event have one answer each, here, and every reader asks here:
the fold (:mod:`.fold`, which builds :class:`~.fold.RunState` from them), the frames
(:mod:`agentnb.frames._rows`) and the debugger (:mod:`agentnb._debugger.timeline`). Nothing else interprets
events, so the frames cannot say "error" where the run said "skipped".

- :func:`answer_of` -- the result an event gives its call (a ``ToolFinished``, a ``CallRejected``, a denial or
  a submitted result), as ``(call_id, status, content, audit)``; :func:`result_of` makes it a
  :class:`~agentnb._messages.ToolResultPart`.
- :func:`conversation_step` -- how an event changes the conversation: the messages it appends, or the
  conversation it replaces (the prompt, a compression).
- :data:`ANSWERS` and :data:`CONVERSATION_STEPS` -- those two answers per event class; the fold joins them
  with its fold function into :data:`~.fold.FOLD_RULES` (one :class:`~.fold.FoldRule` per class, which
  ``tests/test_projection.py`` checks for every class of the :data:`~agentnb.events.Event` union). This module
  does not name the fold's state, so the fold can import it without a circle.

An event the fold cannot apply (a hand-made or tampered log: a result for a call the turn does not have, a
``ResultsBound`` naming a call without a result) is refused with a :class:`~agentnb.exceptions.TranscriptError`
made by :func:`refused`, which names the event's ``seq`` and type and what was wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

from .._messages import Message, ResultStatus, ToolCallPart, ToolResultPart
from ..events import (
    ApprovalResolved,
    BaseEvent,
    CallRejected,
    CompressionApplied,
    ModelRequested,
    ResultsBound,
    RunStarted,
    ToolFinished,
    TurnCompleted,
)
from ..exceptions import TranscriptError

HEADLESS = "headless"
"""The ``by`` of denials made because no person can answer (``Loop(headless=True)``)."""


def denial_text(note: str | None, by: str | None = None) -> str:
    """What the model reads when its call was denied."""
    if by == HEADLESS:
        return f"Denied (headless): {note}" if note else "Denied (headless): nobody is available to approve it."
    return f"Denied by the user: {note}" if note else "Denied by the user."


class Answer(NamedTuple):
    """The result an event gives a call (see :func:`answer_of`)."""

    call_id: str
    status: ResultStatus
    content: str
    """What the model sees."""
    audit: Any = None

ConversationOrigin = Literal["prompt", "request", "response", "results", "compression"]


class ConversationStep(NamedTuple):
    """How one event changes the conversation: it appends ``messages``, or replaces the whole of it.

    A named tuple, not a frozen dataclass: the fold makes one for every request, answer and result of a live
    run, and the frames one per such event over millions (a frozen dataclass is several times slower to build).
    """

    origin: ConversationOrigin
    messages: Sequence[Message]
    replaces: bool = False


ResultFor = Callable[[str], "ToolResultPart | None"]
"""The result bound to a call id so far (what a ``ResultsBound`` event sends back)."""


def answer_of(ev: BaseEvent) -> Answer | None:
    """The result ``ev`` gives its call, or None when it answers nothing.

    A ``ToolFinished`` answers with the tool's result, a ``CallRejected`` with the rejection (``skipped``
    when compression or a guard skipped the call, else ``error``), an ``ApprovalResolved`` when a person
    denied the call or submitted its result. Every other event answers nothing.

    Example:
        >>> from agentnb.events import CallRejected
        >>> from agentnb._states import S
        >>> from datetime import datetime, timezone
        >>> ev = CallRejected(seq=5, ts=datetime.now(timezone.utc), run_id="r", turn=1, state=S.EXECUTING,
        ...                   call_id="c1", name="f", reason="skipped", message="skipped")
        >>> answer_of(ev)
        Answer(call_id='c1', status='skipped', content='skipped', audit=None)
    """
    fn = ANSWERS.get(type(ev))
    return fn(ev) if fn is not None else None


def result_of(ev: BaseEvent, call: ToolCallPart) -> ToolResultPart | None:
    """The :class:`ToolResultPart` that ``ev`` binds to ``call`` (None when ``ev`` answers nothing)."""
    answer = answer_of(ev)
    return result_from(answer, call) if answer is not None else None


def result_from(answer: Answer, call: ToolCallPart) -> ToolResultPart:
    """The :class:`ToolResultPart` an answer makes for ``call``."""
    return ToolResultPart(call_id=call.call_id, name=call.name, status=answer.status, content=answer.content,
                          audit=answer.audit)


def conversation_step(ev: BaseEvent, result_for: ResultFor) -> ConversationStep | None:
    """How ``ev`` changes the conversation (None: it does not).

    ``result_for`` gives the result bound to a call id so far: a ``ResultsBound`` event appends one tool
    message with the results of its calls, in its order (and nothing when it names no call: a paused turn
    sent back as it is).

    Raises:
        TranscriptError: a ``ResultsBound`` names a call that has no result (or no such call).
    """
    fn = CONVERSATION_STEPS.get(type(ev))
    return fn(ev, result_for) if fn is not None else None


def refused(ev: BaseEvent, problem: str) -> TranscriptError:
    """The error for an event the fold cannot apply: it names the event (seq and type) and what was wrong.

    Example:
        >>> from agentnb.events import CallRejected
        >>> from agentnb._states import S
        >>> from datetime import datetime, timezone
        >>> ev = CallRejected(seq=5, ts=datetime.now(timezone.utc), run_id="r", turn=1, state=S.EXECUTING,
        ...                   call_id="c9", name="f", reason="skipped", message="skipped")
        >>> str(refused(ev, "call 'c9' is not a call of turn 1"))
        "event 5 (CallRejected): call 'c9' is not a call of turn 1"
    """
    return TranscriptError(f"event {ev.seq} ({ev.type}): {problem}", seq=ev.seq, event_type=ev.type)


def _a_tool_finished(ev: ToolFinished) -> Answer:
    return Answer(ev.call_id, ev.status, ev.content, ev.value)


def _a_call_rejected(ev: CallRejected) -> Answer:
    return Answer(ev.call_id, "skipped" if ev.reason in ("skipped", "cancelled") else "error", ev.message)


def _a_approval_resolved(ev: ApprovalResolved) -> Answer | None:
    if ev.decision == "denied":
        return Answer(ev.call_id, "denied", denial_text(ev.note, ev.by))
    if ev.decision == "submitted":
        return Answer(ev.call_id, "ok", ev.content or "", ev.value)
    return None  # approved: the tool runs and its ToolFinished answers


def _c_run_started(ev: RunStarted, _r: ResultFor) -> ConversationStep:
    return ConversationStep("prompt", ev.messages, replaces=True)


def _c_model_requested(ev: ModelRequested, _r: ResultFor) -> ConversationStep:
    return ConversationStep("request", ev.new_messages)


def _c_turn_completed(ev: TurnCompleted, _r: ResultFor) -> ConversationStep:
    return ConversationStep("response", (ev.response.message,))


def _c_results_bound(ev: ResultsBound, result_for: ResultFor) -> ConversationStep | None:
    if not ev.call_ids:  # a paused turn sent back as it is: no result message
        return None
    parts = []
    for cid in ev.call_ids:
        result = result_for(cid)
        if result is None:
            raise refused(ev, f"it names call {cid!r}, which has no result")
        parts.append(result)
    return ConversationStep("results", (Message(role="tool", parts=tuple(parts)),))


def _c_compression_applied(ev: CompressionApplied, _r: ResultFor) -> ConversationStep:
    return ConversationStep("compression", ev.messages, replaces=True)


ANSWERS: dict[type[BaseEvent], Callable[[Any], Answer | None]] = {
    ToolFinished: _a_tool_finished,
    CallRejected: _a_call_rejected,
    ApprovalResolved: _a_approval_resolved,
}
"""The event classes that may answer a call, and how (see :func:`answer_of`)."""

CONVERSATION_STEPS: dict[type[BaseEvent], Callable[[Any, ResultFor], ConversationStep | None]] = {
    RunStarted: _c_run_started,
    ModelRequested: _c_model_requested,
    TurnCompleted: _c_turn_completed,
    ResultsBound: _c_results_bound,
    CompressionApplied: _c_compression_applied,
}
"""The event classes that change the conversation, and how (see :func:`conversation_step`)."""


__all__ = ["ANSWERS", "CONVERSATION_STEPS", "HEADLESS", "Answer", "ConversationOrigin", "ConversationStep",
           "ResultFor", "answer_of", "conversation_step", "denial_text", "refused", "result_from", "result_of"]
