r"""The events of a run: one append-only log that everything else is a projection of.

Each event is a slotted dataclass with a literal ``type`` (the union :data:`Event` is discriminated on it;
pydantic validates and serializes it through ``TypeAdapter``) and the common fields ``seq`` (position in the
log), ``ts`` (UTC time), ``run_id``, ``turn`` (the model turn it belongs to, 0 before the first request) and
``state`` (the loop state *after* the event).

Events hold deltas, not snapshots: ``ModelRequested`` carries only what is new since the previous request
(a finalization instruction, say) and the number of messages the request held, so the full request is
rebuilt by folding the log up to it (see :mod:`agentnb._engine`). A long run therefore stays linear.

Events are never changed after they are appended. They are not ``frozen`` dataclasses only because a frozen
dataclass costs three to four times more to build (each field goes through ``object.__setattr__``), and a run
appends seven of them per tool round trip (``bench/loop_overhead.py``).

Encoding. An event is one line of compact JSON (:func:`event_to_json`), the same text in a transcript file,
a SQLite checkpoint and the ``payload`` column of the frames. Two things plain JSON cannot say are written
so that they read back exactly:

- NaN and ±Infinity (a tool's float result, an ``Any`` argument) are the tokens ``NaN``, ``Infinity`` and
  ``-Infinity``, the extension of JSON that Python's ``json`` module, pydantic and pandas read;
- a lone surrogate (half an emoji in a model's text) has no UTF-8 form, so a line that holds one is
  written with ``\uXXXX`` escapes throughout (standard JSON; :func:`event_from_json` reads it back).

Values that cannot be written at all never reach an event: :mod:`agentnb._values` refuses them where they
enter a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import cache
from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, TypeAdapter
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from ._gc import gc_paused
from ._messages import Message, ModelTurn, ResultStatus
from ._states import LoopState

__all__ = [
    "ApprovalRequested", "ApprovalResolved", "ArgumentsMerged", "BaseEvent", "CallParsed", "CallRejected",
    "CallValidated", "CompressionApplied", "EVENT_CLASSES", "Event", "GuardTripped", "Interjected", "ModelRequested",
    "ModelRetried", "OutputValidated", "ResultsBound", "RunFinished", "RunStarted", "TextMerged", "ToolFinished",
    "ToolInfo", "ToolStarted", "TurnCompleted", "event_from_json", "event_to_dict", "event_to_json",
    "events_from_json"
]

EffectMark = Literal["happened", "inherited", "reused", "simulated", "rerun"]
"""What happened to a call's effect (``ToolFinished.effect``)."""


@dataclass(slots=True, kw_only=True)
class BaseEvent:
    """Fields every event has."""

    type: str = ""
    seq: int
    ts: datetime
    run_id: str
    turn: int
    state: LoopState


@dataclass(slots=True, kw_only=True)
class ToolInfo:
    """A tool as offered to the model: enough to show it and to render it for any provider."""

    name: str
    description: str
    parameters: dict[str, Any]
    risk: str = "read"
    approval: bool | str = False
    """``True``/``False``, or ``"policy"`` when a callable decides per call."""
    server: str | None = None
    """The MCP server that runs the tool (None for a local function)."""
    strict: bool = False
    """The tool asks for strict mode (its schema follows the rules; see :mod:`agentnb._strict`)."""


@dataclass(slots=True, kw_only=True)
class RunStarted(BaseEvent):
    """A run began with these messages, this model and these tools."""

    type: Literal["RunStarted"] = "RunStarted"
    messages: list[Message]
    model: str
    """``provider:model`` of the model the loop was built with."""
    tools: list[ToolInfo]
    settings: dict[str, Any] = field(default_factory=dict)
    """Loop settings that shape the run (max_turns, the cap policy, request settings)."""


@dataclass(slots=True, kw_only=True)
class ModelRequested(BaseEvent):
    """The loop asked the model for a turn."""

    type: Literal["ModelRequested"] = "ModelRequested"
    message_count: int
    """How many messages of the conversation (after ``new_messages``) the request held."""
    new_messages: list[Message] = field(default_factory=list)
    """Messages added to the conversation by this request (e.g. the finalization instruction)."""
    tools: list[str] = field(default_factory=list)
    """Names of the tools offered; empty when finalizing."""
    settings: dict[str, Any] = field(default_factory=dict)
    finalize: bool = False
    tool_choice: Any = None
    """The tool choice a per-turn policy made for this request (``auto``, ``none``, ``required``, ``{"name": ...}``;
    None: the loop's fixed setting, if any, in ``settings``)."""
    """True for the tools-free call that asks the model to answer with what it has."""


@dataclass(slots=True, kw_only=True)
class TextMerged(BaseEvent):
    """A streamed text fragment was appended to the answer."""

    type: Literal["TextMerged"] = "TextMerged"
    fragment: str
    length: int
    """Characters of text accumulated so far in this turn."""


@dataclass(slots=True, kw_only=True)
class ArgumentsMerged(BaseEvent):
    """A streamed argument fragment was appended to one call's buffer."""

    type: Literal["ArgumentsMerged"] = "ArgumentsMerged"
    index: int
    """The call's stream index (not its id: parallel calls are told apart by index)."""
    call_id: str | None = None
    name: str | None = None
    fragment: str
    length: int
    """Bytes accumulated so far for this call."""


@dataclass(slots=True, kw_only=True)
class ModelRetried(BaseEvent):
    """A model call failed in a way a retry may cure; the loop waits and asks again."""

    type: Literal["ModelRetried"] = "ModelRetried"
    attempt: int
    status: int | None = None
    error: str
    delay_s: float
    wire: dict[str, Any] | None = None
    """The failed request's HTTP exchange, masked, when an SDK model captured it (the keys of
    ``ModelTurn.wire`` plus ``provider``)."""


@dataclass(slots=True, kw_only=True)
class TurnCompleted(BaseEvent):
    """The model's answer arrived whole: the assistant message and what the provider said about it."""

    type: Literal["TurnCompleted"] = "TurnCompleted"
    response: ModelTurn
    latency_s: float
    """Seconds from sending the request to the final item of the answer (streaming included)."""


@dataclass(slots=True, kw_only=True)
class CallParsed(BaseEvent):
    """One call of the turn was read: its arguments parsed as JSON, or the parse error."""

    type: Literal["CallParsed"] = "CallParsed"
    call_id: str
    name: str
    index: int
    """The call's position in the turn (0-based), as in ``ArgumentsMerged.index``."""
    arguments: dict[str, Any] | None = None
    error: str | None = None
    """Why ``arguments_raw`` is not a JSON object (it is never repaired)."""
    generated_id: bool = False
    """True when the model gave no (or a duplicate) id and agentnb made one, used on both sides."""


@dataclass(slots=True, kw_only=True)
class CallValidated(BaseEvent):
    """A call named a known tool and its arguments passed the tool's schema."""

    type: Literal["CallValidated"] = "CallValidated"
    call_id: str
    name: str
    arguments: dict[str, Any]
    needs_approval: bool = False
    approval_note: str | None = None
    """Why a person must decide when no rule asked for it plainly (an approval policy that raised)."""
    idempotency_key: str | None = None
    """The key the tool's own idempotency-key function named for these arguments (None: the key, if the call
    needs one, is made when it starts; see ``ToolStarted``)."""


RejectReason = Literal["unknown_tool", "invalid_json", "schema", "skipped", "idempotency_key", "output",
                       "invalid_arguments", "cancelled"]
"""``skipped``: not run because the context window was full (the result's status is ``skipped``).
``cancelled``: a person cancelled the call before it ran (``run.cancel_call``; the result's status is ``skipped``
and its message, "Cancelled by <who>: <reason>", is what the model reads).
``idempotency_key``: the tool's own idempotency-key function raised, so the call's intent is unknown.
``output``: a call of the output tool whose arguments do not fit the loop's ``output_type``.
``invalid_arguments``: refused by the value boundary before the schema (a lone surrogate, nesting deeper
than :data:`agentnb._values.MAX_DEPTH`, a non-finite number the schema does not allow)."""


@dataclass(slots=True, kw_only=True)
class CallRejected(BaseEvent):
    """A call cannot run; ``message`` goes back to the model as an error result."""

    type: Literal["CallRejected"] = "CallRejected"
    call_id: str
    name: str
    reason: RejectReason
    message: str
    errors: list[dict[str, Any]] = field(default_factory=list)
    """Field errors (``loc``, ``msg``, ``type``) for schema failures."""
    by: str | None = None
    """Who cancelled the call (``run.cancel_call(..., by=)``; reason ``cancelled``); None for the engine's own
    rejections, a cancellation that named nobody, and logs written before it was recorded."""


@dataclass(slots=True, kw_only=True)
class ApprovalRequested(BaseEvent):
    """A call waits for a person to approve or deny it."""

    type: Literal["ApprovalRequested"] = "ApprovalRequested"
    approval_id: str
    call_id: str
    name: str
    arguments: dict[str, Any]
    arguments_digest: str
    risk: str
    kind: Literal["approval", "client_result", "outcome_unknown", "escalation", "fork_effect"] = "approval"
    """``approval``: may this call run? ``client_result``: the client runs the tool and submits the result.
    ``outcome_unknown``: the process stopped while a side-effecting call ran; a person reconciles it.
    ``fork_effect``: a fork (``effects="ask"``) wants a write its parent never made; may it run in this fork?
    ``escalation``: a guard ran out (``call_id`` is ``guard:<name>``); approving grants one more allowance."""
    ttl_s: float | None = None
    """Seconds the request stays valid after ``ts`` (None: no expiry)."""
    idempotency_key: str | None = None
    note: str | None = None
    """Why it was asked when that is not obvious (a policy that raised, an interrupted or timed-out write)."""

    @property
    def expires_at(self) -> datetime | None:
        """When the request expires (None: never)."""
        if self.ttl_s is None:
            return None
        from datetime import timedelta

        return self.ts + timedelta(seconds=self.ttl_s)


@dataclass(slots=True, kw_only=True)
class ApprovalResolved(BaseEvent):
    """A person approved or denied a call (possibly with edited arguments)."""

    type: Literal["ApprovalResolved"] = "ApprovalResolved"
    approval_id: str
    call_id: str
    decision: Literal["approved", "denied", "submitted"]
    """``submitted``: a client (or a person reconciling an unknown outcome) supplied the result."""
    by: str | None = None
    note: str | None = None
    arguments: dict[str, Any] | None = None
    """Edited arguments, when the approver changed them."""
    content: str | None = None
    """For ``submitted``: what the model will see."""
    value: Any = None
    """For ``submitted``: the submitted value (audit projection)."""


@dataclass(slots=True, kw_only=True)
class ToolStarted(BaseEvent):
    """A tool began to run for a call."""

    type: Literal["ToolStarted"] = "ToolStarted"
    call_id: str
    name: str
    idempotency_key: str | None = None
    """The call's business intent (run's operation id + tool + canonical arguments, unless the tool says)."""
    request_sha256: str | None = None
    """The call's request hash, made from trusted state as it starts; its ``ToolFinished`` must carry the same
    (see :mod:`agentnb._binding`). None in logs written before it was recorded here."""


@dataclass(slots=True, kw_only=True)
class ToolFinished(BaseEvent):
    """A tool finished (or failed, or timed out) for a call."""

    type: Literal["ToolFinished"] = "ToolFinished"
    call_id: str
    name: str
    status: ResultStatus
    content: str
    """What the model will see."""
    value: Any = None
    """The tool's return value (audit projection), JSON-safe."""
    error_type: str | None = None
    error_message: str | None = None
    duration_s: float
    idempotency_key: str | None = None
    reused: bool = False
    """True when the effect ledger already held this call's own outcome (a resume) and the tool was not run again."""
    duplicate_of: str | None = None
    """For ``status="duplicate"``: the call that did the effect (this call's effect was not repeated)."""
    truncated: int = 0
    """Characters cut from ``content`` by the result size cap (``value`` keeps the whole result)."""
    effect: EffectMark | None = None
    """For a side-effecting call (and a read a fork reused): what happened to its effect -- ``happened`` (it
    ran in this run), ``inherited`` (an earlier run of the operation did it; not run again), ``reused`` (a
    fork's read answered from its parent), ``simulated`` (a fork ran the tool's simulator, or refused the
    write for want of one) or ``rerun`` (a fork explicitly allowed to repeat it ran it again)."""
    effect_run: str | None = None
    """For ``inherited``/``reused``: the run that did it."""
    effect_call: str | None = None
    """For ``inherited``/``reused``: the call of that run that did it."""
    request_sha256: str | None = None
    result_sha256: str | None = None
    call_binding_sha256: str | None = None
    """Binds this result to this call of this response of this run (see :mod:`agentnb._binding`)."""


@dataclass(slots=True, kw_only=True)
class ResultsBound(BaseEvent):
    """Every call of the turn has exactly one result; they join the conversation in the model's order."""

    type: Literal["ResultsBound"] = "ResultsBound"
    call_ids: list[str]


@dataclass(slots=True, kw_only=True)
class GuardTripped(BaseEvent):
    """A budget or guard ran out; ``action`` is what the loop does about it."""

    type: Literal["GuardTripped"] = "GuardTripped"
    guard: str
    limit: float
    value: float
    action: Literal["finalize", "stop", "escalate", "note"]
    message: str
    call_id: str | None = None
    """The call the guard is about, when it is about one (``approval_override``)."""


@dataclass(slots=True, kw_only=True)
class CompressionApplied(BaseEvent):
    """The conversation was rebuilt shorter; ``messages`` is the new history."""

    type: Literal["CompressionApplied"] = "CompressionApplied"
    tier: int
    tokens_before: int
    tokens_after: int
    messages: list[Message]
    removed: list[int] = field(default_factory=list)
    """Indices (in the old history) of the messages removed or replaced."""


@dataclass(slots=True, kw_only=True)
class Interjected(BaseEvent):
    """A person told the model something while the run was paused (``run.interject``).

    The text is a user message the model reads with its next request (after the results of the current turn,
    so no call is ever separated from its result); it changes nothing else.
    """

    type: Literal["Interjected"] = "Interjected"
    text: str
    by: str | None = None


@dataclass(slots=True, kw_only=True)
class OutputValidated(BaseEvent):
    """A final answer was checked against the loop's ``output_type`` (from the output tool's call, or the text).

    When it passes, the run completes with ``output`` as its typed output; when it fails, ``errors`` go back to
    the model for a correction turn, up to ``output_retries`` times.
    """

    type: Literal["OutputValidated"] = "OutputValidated"
    ok: bool
    call_id: str | None = None
    """The output tool's call (None when the answer came as text)."""
    output: Any = None
    """The validated output as JSON-safe data (when ``ok``)."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    """Field errors (``loc``, ``msg``, ``type``) when it failed."""
    attempt: int = 1
    """1 for the first final answer, 2 for the first correction, ..."""
    final: bool = False
    """A failed check after which no correction is owed: the retries are spent, and the run ends ``FAILED``."""


@dataclass(slots=True, kw_only=True)
class RunFinished(BaseEvent):
    """The run reached a terminal state."""

    type: Literal["RunFinished"] = "RunFinished"
    final: LoopState
    reason: str
    output: str | None = None
    wire: dict[str, Any] | None = None
    """When a failed or broken model request ended the run: its HTTP exchange, masked, as on ``ModelRetried``."""


Event = Annotated[
    RunStarted
    | ModelRequested
    | TextMerged
    | ArgumentsMerged
    | ModelRetried
    | TurnCompleted
    | CallParsed
    | CallValidated
    | CallRejected
    | ApprovalRequested
    | ApprovalResolved
    | ToolStarted
    | ToolFinished
    | ResultsBound
    | GuardTripped
    | CompressionApplied
    | Interjected
    | OutputValidated
    | RunFinished,
    Field(discriminator="type"),
]
"""Any event, discriminated on ``type``."""

@cache
def event_adapter() -> TypeAdapter[Event]:
    """Validates any event from JSON or Python data (built on first use: importing agentnb stays quick)."""
    return TypeAdapter(Event)

EVENT_CLASSES: dict[str, type[BaseEvent]] = {
    next(f.default for f in fields(cls) if f.name == "type"): cls  # type: ignore[misc]
    for cls in get_args(get_args(Event)[0])
}
"""Every event class by its ``type``."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_B = re.compile(rb"\\u[dD][89a-fA-F]")
"""A ``\\uD800``-``\\uDFFF`` escape: only the fallback encoding writes them (see :func:`json_text`)."""

_REPLACEMENT = "\ufffd".encode()

_LOG_CONFIG = ConfigDict(ser_json_inf_nan="constants")
"""NaN and ±Infinity written as the tokens ``NaN``/``Infinity``/``-Infinity`` (see the module docs)."""


@cache
def _adapter(type_name: str) -> TypeAdapter[Any]:
    # ``cls | None``: pydantic takes a config only for a type that is not itself a dataclass, and only a
    # config given here reaches the ``Any`` fields (values, arguments) inside the event.
    optional: Any = EVENT_CLASSES[type_name] | None
    return TypeAdapter(optional, config=_LOG_CONFIG)


def _fallback_json(data: Any) -> str:
    # Standard JSON escapes (\\uXXXX) carry a lone surrogate that UTF-8 cannot; ensure_ascii writes them.
    # ``data`` comes from pydantic's python mode, which keeps such text (its JSON mode fails like dump_json).
    return json.dumps(data, ensure_ascii=True, allow_nan=True, separators=(",", ":"), default=_leaf)


def _leaf(value: Any) -> Any:
    return to_jsonable_python(value, inf_nan_mode="constants")  # datetimes, enums: as pydantic writes them


def json_text(value: Any, *, exclude: set[str] | dict[str, Any] | None = None) -> str:
    r"""Compact JSON text of an event or of any data held by one, in the log's encoding (see the module docs).

    Example:
        >>> json_text({"x": float("nan"), "y": [1.5, float("-inf")]})
        '{"x":NaN,"y":[1.5,-Infinity]}'
        >>> json_text("half an emoji: \ud83d")
        '"half an emoji: \\ud83d"'
    """
    if isinstance(value, BaseEvent):
        adapter = _adapter(value.type)
        try:
            out = adapter.dump_json(value, exclude=exclude)
        except PydanticSerializationError:
            return _fallback_json(adapter.dump_python(value, exclude=exclude))
        if _REPLACEMENT in out:
            # pydantic writes a lone surrogate in a dict *key* as U+FFFD instead of failing: take the exact path
            # (a U+FFFD the text really holds comes out the same there, escaped)
            return _fallback_json(adapter.dump_python(value, exclude=exclude))
        return out.decode()
    try:
        return to_json(value, exclude=exclude, inf_nan_mode="constants").decode()
    except PydanticSerializationError:
        return _fallback_json(value)


def json_texts(events: Sequence[BaseEvent], *, exclude: set[str] | dict[str, Any] | None = None) -> list[str]:
    """``[json_text(ev, exclude=exclude) for ev in events]`` (events of one type): one serializer call per batch.

    The batch's JSON list is cut where an event ends and the next begins (``},{"<first field>":``); when the
    texts hold no such seam of their own (the count tells) the cut is exact, else (and for mixed types, lone
    surrogates) each event of the batch goes through :func:`json_text`.
    """
    out: list[str] = []
    for k in range(0, len(events), 8192):  # a few megabytes of JSON at a time
        batch, texts, kind = events[k:k + 8192], None, events[k].type
        if all(ev.type == kind for ev in batch):
            keys = [f.name for f in fields(EVENT_CLASSES[kind]) if f.name not in (exclude or ())
                    or (isinstance(exclude, dict) and exclude[f.name] is not True)]
            head = f'"{keys[0]}":' if keys else ""
            try:
                raw = _list_adapter(kind).dump_json(batch, exclude={"__all__": exclude} if exclude else None)
            except PydanticSerializationError:
                raw = _REPLACEMENT
            if _REPLACEMENT not in raw:
                texts = raw.decode()[2:-2].split("},{" + head)
        if texts is not None and len(texts) == len(batch):
            out.extend(["{" + texts[0] + "}", *["{" + head + t + "}" for t in texts[1:]]])
        else:
            out.extend([json_text(ev, exclude=exclude) for ev in batch])
    return out


@cache
def _list_adapter(type_name: str) -> TypeAdapter[Any]:
    optional: Any = EVENT_CLASSES[type_name] | None  # a list of what _adapter takes
    return TypeAdapter(list[optional], config=_LOG_CONFIG)


def event_to_json(event: BaseEvent) -> str:
    """One event as compact JSON text (the transcript's line format; see the module docs for the encoding)."""
    return json_text(event)


def event_to_dict(event: BaseEvent) -> dict[str, Any]:
    """One event as Python data of JSON types (NaN and ±Infinity stay floats)."""
    data: dict[str, Any] = _adapter(event.type).dump_python(event, mode="json")
    return data


def event_from_json(text: str | bytes) -> BaseEvent:
    """Validate one event from its JSON text; raises pydantic's ``ValidationError``."""
    escaped = _SURROGATE_ESCAPE_B.search(text) if isinstance(text, bytes) else _SURROGATE_ESCAPE.search(text)
    if escaped is None:
        event: BaseEvent = event_adapter().validate_json(text)
        return event
    # A line written with surrogate escapes: pydantic's JSON reader refuses them in values and silently
    # garbles them in dict keys, while Python's reads them back exactly.
    try:
        data = json.loads(text)
    except ValueError:
        event_adapter().validate_json(text)  # raises pydantic's ValidationError, naming the JSON error
        raise
    event = event_adapter().validate_python(data)
    return event


def events_from_json(texts: Iterable[str | bytes]) -> list[BaseEvent]:
    """Validate many events, one JSON text each, as :func:`event_from_json` does one at a time.

    The same events and the same errors as a loop over :func:`event_from_json` (a line with surrogate
    escapes takes that function's exact path), with the garbage collector paused (:func:`gc_paused`).

    Raises:
        pydantic.ValidationError: for the first text that is not a valid event.
    """
    validate = event_adapter().validate_json
    escaped_b, escaped = _SURROGATE_ESCAPE_B.search, _SURROGATE_ESCAPE.search
    with gc_paused():
        return [
            event_from_json(text)
            if (escaped_b(text) if isinstance(text, bytes) else escaped(text))
            else validate(text)
            for text in texts
        ]
