"""Every column of every frame, declared once as data.

A :class:`Column` names its pandas dtype and its *source*: where the builder reads the value. A source is
``"<field>"`` or ``"<field>.<attribute path>"``, where ``<field>`` is one of the aligned lists a frame's row
builder produces (see :mod:`agentnb.frames._rows`): an event of the row (``ToolFinished``), a part of the
conversation (``call``, ``part``), or a value the builder computed (``status``). ``None`` means today's events
do not record the fact: the column exists, with its dtype, and is all null. When an event gains the field,
adding the source is a one-word change here (``source=None`` -> ``source="CompressionApplied.strategy"``).

``docs/frames.md`` is generated from these declarations (``python -m agentnb.frames._docs``); a test fails
when it is out of date.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from .._engine import FOLD_RULES
from .._messages import FinishReason, ResultStatus
from .._states import LoopState
from ..events import EVENT_CLASSES, RejectReason, json_text

Dtype = Literal["Int64", "Float64", "boolean", "string", "category", "datetime"]
"""The dtypes a column may have. ``datetime`` is ``datetime64[us, UTC]``; the rest are pandas' own names
(nullable integers, floats and booleans, ``string`` with ``<NA>``)."""

DATETIME: Final = "datetime64[us, UTC]"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a frame.

    Attributes:
        name: the column name.
        dtype: its pandas dtype (see :data:`Dtype`).
        source: where the value comes from (``"ToolFinished.duration_s"``), or None when no event records it
            yet (the column is then all null).
        doc: one line for the docs table.
        value: applied to each non-null source value (``len``, ``json.dumps``, ...).
        categories: the fixed vocabulary of a ``category`` column (its categories, in this order, even when
            unused); None for an open vocabulary (categories sorted from the values).
        reads: for a value the row builder computes (a source that names no event), the event types it is made
            from: what :data:`EVENT_COLUMNS` and the docs list for each event kind.

    Example:
        >>> Column("duration_s", "Float64", "ToolFinished.duration_s", "seconds the tool ran").field
        'ToolFinished'
    """

    name: str
    dtype: Dtype
    source: str | None
    doc: str
    value: Callable[[Any], Any] | None = None
    categories: tuple[str, ...] | None = None
    reads: tuple[str, ...] = ()

    @property
    def field(self) -> str | None:
        """The row builder's list the source reads (the part before the first dot)."""
        return self.source.split(".", 1)[0] if self.source else None

    @property
    def path(self) -> str | None:
        """The attribute path read on each item of the field (None: the item itself)."""
        if not self.source or "." not in self.source:
            return None
        return self.source.split(".", 1)[1]


def _json(value: Any) -> str:
    # The event log's own encoding (pydantic-core's encoder, ~10x json.dumps; NaN kept, lone surrogates escaped)
    return json_text(value)


EVENT_TYPES: tuple[str, ...] = tuple(EVENT_CLASSES)
STATES: tuple[str, ...] = tuple(s.value for s in LoopState)
FINISH_REASONS: tuple[str, ...] = get_args(FinishReason)
CALL_STATUSES: tuple[str, ...] = (*get_args(ResultStatus), "unanswered")
REJECT_REASONS: tuple[str, ...] = get_args(RejectReason)
DECISIONS: tuple[str, ...] = ("approved", "denied", "submitted")
APPROVAL_KINDS: tuple[str, ...] = ("approval", "client_result", "outcome_unknown")
RISKS: tuple[str, ...] = ("read", "write", "dangerous")
GUARD_ACTIONS: tuple[str, ...] = ("finalize", "stop", "escalate", "note")
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
PART_KINDS: tuple[str, ...] = ("text", "tool_call", "tool_result", "refusal", "reasoning")
MESSAGE_ORIGINS: tuple[str, ...] = ("prompt", "request", "response", "results", "compression")
CALL_ORIGINS: tuple[str, ...] = ("model", "history")


CONVERSATION_EVENTS: tuple[str, ...] = tuple(c.__name__ for c, r in FOLD_RULES.items() if r.conversation)
"""The events that change the conversation (the engine says which): what the messages frame reads."""
ANSWER_EVENTS: tuple[str, ...] = tuple(c.__name__ for c, r in FOLD_RULES.items() if r.answer)
"""The events that may answer a call (the engine says which): where a call's status and result come from."""


def _key(anchor: str, reads: tuple[str, ...] = ()) -> tuple[Column, ...]:
    """The join keys every frame starts with (``reads``: the event types an ``anchor`` field may hold)."""
    return (
        Column("run_id", "category", "run_id", "the run (categories: every run of the collection, in order)"),
        Column("seq", "Int64", f"{anchor}.seq", f"position in the run's log of the row's event ({anchor})",
               reads=reads),
        Column("turn", "Int64", f"{anchor}.turn", "the model turn the row belongs to (0 before the first)"),
    )


EVENTS: tuple[Column, ...] = (
    *_key("event"),
    Column("ts", "datetime", "event.ts", "when the event was appended (UTC)"),
    Column("type", "category", "event.type", "the event type", categories=EVENT_TYPES),
    Column("state", "category", "event.state", "the loop state after the event", categories=STATES),
    Column("call_id", "string", "event.call_id", "the call the event is about, if any"),
    Column("name", "category", "event.name", "the tool the event is about, if any"),
)

EVENTS_PAYLOAD: Column = Column(
    "payload", "string", "payload", "the event's own fields as JSON text (only with ``payload=True``; HTTP captures, "
    "``wire``, only with ``events_with_payload(runs, wire=True)``)"
)

TURNS: tuple[Column, ...] = (
    *_key("ModelRequested"),
    Column("ts_requested", "datetime", "ModelRequested.ts", "when the request was made"),
    Column("ts_completed", "datetime", "TurnCompleted.ts", "when the whole answer arrived (null if it never did)"),
    Column("response_seq", "Int64", "TurnCompleted.seq", "seq of the TurnCompleted event"),
    Column("provider", "category", "TurnCompleted.response.provider", "the provider that answered"),
    Column("model", "category", "TurnCompleted.response.model", "the model that answered"),
    Column("response_id", "string", "TurnCompleted.response.response_id", "the provider's response id"),
    Column("latency_s", "Float64", "TurnCompleted.latency_s", "seconds from request to the answer's last item"),
    Column("input_tokens", "Int64", "TurnCompleted.response.usage.input_tokens", "input tokens billed"),
    Column("output_tokens", "Int64", "TurnCompleted.response.usage.output_tokens", "output tokens billed"),
    Column("total_tokens", "Int64", "TurnCompleted.response.usage.total_tokens", "input plus output tokens"),
    Column("cost_usd", "Float64", None, "cost of the turn in US dollars, priced as ``Budget`` prices it for "
           "``max_cost``: ``prices=`` first, then the maintained price table; null when nothing prices it"),
    Column("finish_reason_raw", "string", "TurnCompleted.response.finish_reason_raw", "the provider's own value"),
    Column("finish_reason", "category", "TurnCompleted.response.finish_reason", "the normalized finish reason",
           categories=FINISH_REASONS),
    Column("complete", "boolean", "TurnCompleted.response.complete", "False when the stream ended early"),
    Column("incomplete_reason", "string", "TurnCompleted.response.incomplete_reason", "why it is incomplete"),
    Column("calls", "Int64", "TurnCompleted.response.message.tool_calls", "tool calls in the answer", value=len),
    Column("text_chars", "Int64", "TurnCompleted.response.message.text", "characters of answer text", value=len),
    Column("retries", "Int64", "retries", "retries of this request (ModelRetried events)", reads=("ModelRetried",)),
    Column("fragments", "Int64", "fragments", "streamed fragments of the answer (TextMerged and ArgumentsMerged "
           "events; 0: the answer came whole)", reads=("TextMerged", "ArgumentsMerged")),
    Column("finalize", "boolean", "ModelRequested.finalize", "True for the tools-free finalization request"),
    Column("interjected", "string", "interjected", "what a person told the model before this request (the text "
           "of its Interjected events, one per line; null: nothing)", reads=("Interjected",)),
    Column("tool_choice", "string", "ModelRequested", "the request's tool choice (a per-turn policy's, else the "
           "loop's setting; null: the provider's default)", value=lambda ev: _choice_text(ev)),
    Column("message_count", "Int64", "ModelRequested.message_count", "messages in the request"),
    Column("tools_offered", "Int64", "ModelRequested.tools", "tools offered in the request", value=len),
    Column("outcome", "string", "outcome", "the RunFinished reason when the run ended during this turn",
           reads=("RunFinished",)),
    Column("output_ok", "boolean", "OutputValidated.ok", "``output_type`` runs: whether this turn's final answer "
           "fit the type (null: no final answer checked)"),
    Column("output", "string", "OutputValidated.output", "the validated output as compact JSON text", value=_json),
    Column("output_errors", "Int64", "OutputValidated.errors", "validation errors of the final answer", value=len),
    Column("output_final", "boolean", "OutputValidated.final", "a failed check with no retries left (the run "
           "ends FAILED)"),
)

def _choice_text(ev: Any) -> str | None:
    choice = ev.tool_choice if ev.tool_choice is not None else (ev.settings or {}).get("tool_choice")
    if choice is None:
        return None
    return choice if isinstance(choice, str) else _json(choice)


CALLS: tuple[Column, ...] = (
    *_key("anchor", reads=("RunStarted", "TurnCompleted")),
    Column("origin", "category", "origin", "``model``: asked for in this run; ``history``: in the prompt",
           categories=CALL_ORIGINS),
    Column("index", "Int64", "position", "the call's position in its assistant message"),
    Column("call_id", "string", "call.call_id", "the call id (model's own, or generated)"),
    Column("tool", "category", "call.name", "the tool name as the model wrote it"),
    Column("server", "category", "tool_info.server", "the MCP server that ran the tool (null: a local function "
           "or an unknown tool)"),
    Column("arguments_raw", "string", "call.arguments_raw", "argument text exactly as received"),
    Column("arguments", "string", "arguments", "arguments the call ran with (edited > validated > parsed), as "
           "compact JSON text; ``calls(flatten_arguments=True)`` adds one ``arg_<key>`` column per top-level key",
           value=_json, reads=("CallValidated", "ApprovalResolved")),
    Column("generated_id", "boolean", "CallParsed.generated_id", "True when agentnb made the id"),
    Column("parse_error", "string", "CallParsed.error", "why the arguments are not a JSON object"),
    Column("reject_reason", "category", "CallRejected.reason", "why the call could not run",
           categories=REJECT_REASONS),
    Column("cancelled_by", "string", "CallRejected.by", "who cancelled the call (``run.cancel_call``; null: nobody "
           "did, or they gave no name)"),
    Column("needs_approval", "boolean", "CallValidated.needs_approval", "True when a person had to decide"),
    Column("approval_id", "string", "ApprovalRequested.approval_id", "the approval request"),
    Column("decision", "category", "ApprovalResolved.decision", "the person's decision", categories=DECISIONS),
    Column("decided_by", "string", "ApprovalResolved.by", "who decided"),
    Column("decided_at", "datetime", "ApprovalResolved.ts", "when they decided"),
    Column("status", "category", "status", "the result's status, as the run bound it: the ToolFinished status, "
           "``error`` when rejected (``skipped`` when compression skipped it), ``denied``, ``ok`` for a submitted "
           "result, the history result's status, or ``unanswered``", categories=CALL_STATUSES, reads=ANSWER_EVENTS),
    Column("ts_called", "datetime", "anchor.ts", "when the answer holding the call arrived"),
    Column("ts_started", "datetime", "ToolStarted.ts", "when the tool started"),
    Column("ts_finished", "datetime", "ToolFinished.ts", "when the tool finished"),
    Column("duration_s", "Float64", "ToolFinished.duration_s", "seconds the tool ran"),
    Column("error_type", "category", "error_type", "exception type, or the reject reason for rejected calls",
           reads=("ToolFinished", "CallRejected")),
    Column("error_message", "string", "error_message", "the error message (tool error or rejection)",
           reads=("ToolFinished", "CallRejected")),
    Column("result_chars", "Int64", "result_content", "characters of the result the model sees", value=len,
           reads=ANSWER_EVENTS),
    Column("idempotency_key", "string", "ToolStarted.idempotency_key", "the effect ledger's key for the call "
           "(side-effecting tools and tools that take a context)"),
    Column("reused", "boolean", "ToolFinished.reused", "True when the ledger already held this call's own outcome "
           "(after a restart; not re-run)"),
    Column("duplicate_of", "string", "ToolFinished.duplicate_of", "for ``duplicate`` results: the call that did the "
           "effect (this one was not run)"),
    Column("effect", "category", "ToolFinished.effect", "what happened to the call's effect: ``happened`` (ran in "
           "this run), ``inherited`` (an earlier run of the operation did it; not run again), ``reused`` (a fork's "
           "read answered from its parent), ``simulated`` (a fork ran the tool's simulator, or refused the write), "
           "``rerun`` (a fork allowed to repeat it ran it again); null for reads",
           categories=("happened", "inherited", "reused", "simulated", "rerun")),
    Column("effect_run", "string", "ToolFinished.effect_run", "for ``inherited``/``reused``: the run that did it"),
    Column("effect_call", "string", "ToolFinished.effect_call", "for ``inherited``/``reused``: the call that did it"),
    Column("binding_hash", "string", "ToolFinished.call_binding_sha256", "hash binding the result to its call"),
    Column("bound_seq", "Int64", "ResultsBound.seq", "seq of the ResultsBound that sent the result back"),
)

MESSAGES: tuple[Column, ...] = (
    *_key("anchor", reads=CONVERSATION_EVENTS),
    Column("origin", "category", "origin", "the event that added the message: RunStarted (``prompt``), "
           "ModelRequested (``request``), TurnCompleted (``response``), ResultsBound (``results``), "
           "CompressionApplied (``compression``)", categories=MESSAGE_ORIGINS, reads=CONVERSATION_EVENTS),
    Column("message_index", "Int64", "message_index", "the message's position in the conversation then"),
    Column("part_index", "Int64", "part_index", "the part's position in its message"),
    Column("in_final", "boolean", "in_final", "True when the message is in the run's final conversation"),
    Column("role", "category", "message.role", "system, user, assistant or tool", categories=ROLES),
    Column("kind", "category", "part.kind", "the part kind", categories=PART_KINDS),
    Column("text", "string", "part.text", "text of text, refusal and reasoning parts"),
    Column("call_id", "string", "part.call_id", "call id of tool_call and tool_result parts"),
    Column("tool", "category", "part.name", "tool name of tool_call and tool_result parts"),
    Column("arguments_raw", "string", "part.arguments_raw", "argument text of a tool_call"),
    Column("status", "category", "part.status", "status of a tool_result", categories=get_args(ResultStatus)),
    Column("content", "string", "part.content", "what the model sees of a tool_result"),
    Column("provider", "category", "part.provider", "the provider a reasoning part belongs to"),
    Column("chars", "Int64", "chars", "characters of text, arguments or content"),
)

APPROVALS: tuple[Column, ...] = (
    *_key("anchor", reads=("ApprovalRequested", "CallRejected")),
    Column("approval_id", "string", "ApprovalRequested.approval_id", "the approval request (null: a call a "
           "person cancelled without being asked)"),
    Column("call_id", "string", "anchor.call_id", "the call waiting (or cancelled)"),
    Column("tool", "category", "anchor.name", "its tool"),
    Column("kind", "category", "ApprovalRequested.kind", "what is asked: may it run, a client-side result, or "
           "reconciling an unknown outcome", categories=APPROVAL_KINDS),
    Column("risk", "category", "ApprovalRequested.risk", "the tool's risk", categories=RISKS),
    Column("arguments", "string", "ApprovalRequested.arguments", "arguments shown to the person (JSON)",
           value=_json),
    Column("arguments_digest", "string", "ApprovalRequested.arguments_digest", "SHA-256 of tool and arguments"),
    Column("request_note", "string", "ApprovalRequested.note", "why it was asked when that is not obvious (a "
           "policy that raised, an interrupted or timed-out write)"),
    Column("ts_requested", "datetime", "ApprovalRequested.ts", "when the run paused for it"),
    Column("expires_at", "datetime", "ApprovalRequested.expires_at", "when the request expires (null: never)"),
    Column("decision", "category", "decision", "approved, denied or submitted; ``cancelled`` when a person "
           "cancelled the call (``run.cancel_call``); null: waiting", categories=(*DECISIONS, "cancelled"),
           reads=("ApprovalResolved", "CallRejected")),
    Column("decided_by", "string", "decided.by", "who decided (or cancelled)",
           reads=("ApprovalResolved", "CallRejected")),
    Column("note", "string", "decision_note", "the reason given (a cancellation: what the model reads)",
           reads=("ApprovalResolved", "CallRejected")),
    Column("ts_decided", "datetime", "decided.ts", "when they decided", reads=("ApprovalResolved", "CallRejected")),
    Column("wait_s", "Float64", "wait_s", "seconds between request and decision"),
    Column("edited", "boolean", "edited", "True when the person changed the arguments"),
    Column("edited_arguments", "string", "ApprovalResolved.arguments", "the arguments as edited (JSON)",
           value=_json),
    Column("decided_seq", "Int64", "decided.seq", "seq of the ApprovalResolved (or cancelling CallRejected) event",
           reads=("ApprovalResolved", "CallRejected")),
    Column("run_tags", "string", "run_tags", "the run's tags (``loop.start(..., tags=)``, ``anb.batch(..., "
           "tags=)``) as a JSON list; null: none", value=_json, reads=("RunStarted",)),
)

GUARDS: tuple[Column, ...] = (
    *_key("GuardTripped"),
    Column("ts", "datetime", "GuardTripped.ts", "when it tripped"),
    Column("guard", "category", "GuardTripped.guard", "the guard or budget"),
    Column("limit", "Float64", "GuardTripped.limit", "its limit"),
    Column("value", "Float64", "GuardTripped.value", "the value that reached it"),
    Column("action", "category", "GuardTripped.action", "what the loop did about it", categories=GUARD_ACTIONS),
    Column("message", "string", "GuardTripped.message", "the guard's message"),
    Column("call_id", "string", "GuardTripped.call_id", "the call it is about (``approval_override``)"),
    Column("state", "category", "GuardTripped.state", "the loop state then", categories=STATES),
)

COMPRESSIONS: tuple[Column, ...] = (
    *_key("CompressionApplied"),
    Column("ts", "datetime", "CompressionApplied.ts", "when the history was rebuilt"),
    Column("tier", "Int64", "CompressionApplied.tier", "the compression tier"),
    Column("strategy", "category", None, "how it was compressed (not recorded yet)"),
    Column("tokens_before", "Int64", "CompressionApplied.tokens_before", "estimated tokens before"),
    Column("tokens_after", "Int64", "CompressionApplied.tokens_after", "estimated tokens after"),
    Column("tokens_saved", "Int64", "tokens_saved", "tokens_before minus tokens_after"),
    Column("messages_before", "Int64", "messages_before", "messages in the conversation before",
           reads=CONVERSATION_EVENTS),
    Column("messages_after", "Int64", "CompressionApplied.messages", "messages after", value=len),
    Column("removed", "Int64", "CompressionApplied.removed", "messages removed or replaced", value=len),
)

FRAMES: dict[str, tuple[Column, ...]] = {
    "events": EVENTS,
    "turns": TURNS,
    "calls": CALLS,
    "messages": MESSAGES,
    "approvals": APPROVALS,
    "guards": GUARDS,
    "compressions": COMPRESSIONS,
}
"""Every frame's columns, in order."""

FRAME_NAMES: tuple[str, ...] = tuple(FRAMES)


def _event_columns() -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {t: [] for t in EVENT_TYPES}
    for frame, cols in FRAMES.items():
        if frame == "events":
            continue  # the events frame has a row for every event: it says nothing about one kind
        for col in cols:
            for t in (col.field, *col.reads):
                if t in out and f"{frame}.{col.name}" not in out[t]:
                    out[t].append(f"{frame}.{col.name}")
    return {t: tuple(cols) for t, cols in out.items()}


EVENT_COLUMNS: dict[str, tuple[str, ...]] = _event_columns()
"""For each event type, the columns (``frame.column``, beyond the events frame) that read it."""
