"""The canonical, provider-neutral conversation.

A conversation is a list of :class:`Message`; a message is a role plus a tuple of parts. Every provider
adapter renders this shape into its own wire format and parses its responses back into it, so the engine
never sees a provider difference.

Parts (discriminated on ``kind``):

- :class:`TextPart` -- text written by the system, the user or the assistant;
- :class:`ToolCallPart` -- a call the assistant asked for (id, name, raw argument text, parsed arguments);
- :class:`ToolResultPart` -- the answer to one call: a status, the value the model sees, and an audit
  value kept out of the model's view;
- :class:`RefusalPart` -- a refusal the provider reported apart from the text;
- :class:`ReasoningPart` -- opaque continuation data (reasoning items, thinking signatures) tagged with the
  provider that produced it, to be sent back only to that provider.

A model turn (:class:`ModelTurn`) is one assistant message plus what the provider said about it: the raw and
the normalized finish reason, usage and the response id (the ``TurnCompleted`` event that carries it adds the
latency the driver measured).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from ._values import fits

Role = Literal["system", "user", "assistant", "tool"]
ResultStatus = Literal["ok", "error", "denied", "skipped", "timeout", "duplicate"]
FinishReason = Literal["stop", "tool_calls", "length", "refusal", "content_filter", "error", "other", "pause"]
"""The normalized finish reason. Only ``stop`` is an explicit completion; ``pause`` is a turn the provider
paused (Anthropic's ``pause_turn``): the conversation goes back to it so the model continues."""

# Core records are slotted dataclasses: a run makes thousands of them, and a dataclass is several times
# cheaper to build than a validating model (see bench/loop_overhead.py). Pydantic validates and serializes
# them at the edges through TypeAdapter (loading a transcript, reading a message list). Messages and parts,
# which runs share and users hold, are frozen; per-turn records (ModelTurn, Usage) are built once per model
# turn on the hot path and are never changed after, so they skip the cost of frozen __init__.


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """Plain text."""

    kind: Literal["text"] = "text"
    text: str
    provider_data: dict[str, dict[str, Any]] | None = None
    """Opaque per-part data keyed by the wire API that produced it (``{"gemini": {"thoughtSignature": ..}}``).

    An adapter reads only its own key, so this data goes back only to the provider that sent it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallPart:
    """One tool call the assistant asked for."""

    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    """The id the model gave (or one generated for it); results reference it."""
    name: str
    """The tool name as the model wrote it (it may not exist in the registry)."""
    arguments_raw: str
    """The argument text exactly as received (JSON that may be malformed; never repaired)."""
    arguments: dict[str, Any] | None = None
    """The parsed arguments, or ``None`` when ``arguments_raw`` is not a JSON object (or one nested deeper
    than :data:`agentnb._values.MAX_DEPTH`, which the event log could not hold; the raw text keeps it)."""
    index: int | None = None
    """The call's position in the provider's stream (Chat ``index``, Anthropic block index, ...)."""
    provider_id: str | None = None
    """A second provider id where the wire has one (the Responses ``fc_...`` item id, the Gemini call id)."""
    provider_data: dict[str, dict[str, Any]] | None = None
    """Opaque per-part data keyed by the wire API that produced it (a Gemini ``thoughtSignature``); see
    :attr:`TextPart.provider_data`."""

    def __post_init__(self) -> None:
        if self.arguments is not None and not fits(self.arguments):
            object.__setattr__(self, "arguments", None)  # the engine answers invalid_arguments from the raw text


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultPart:
    """The answer to one call, bound to it by ``call_id``."""

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    status: ResultStatus
    content: str
    """What the model sees."""
    audit: Any = None
    """The full value for people and analysis; never rendered into a request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RefusalPart:
    """A refusal reported by the provider apart from the answer text."""

    kind: Literal["refusal"] = "refusal"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningPart:
    """Opaque continuation data; sent back only to ``provider``."""

    kind: Literal["reasoning"] = "reasoning"
    provider: str
    text: str | None = None
    """Readable reasoning or a summary of it, when the provider gives one."""
    data: dict[str, Any] = field(default_factory=dict)
    """The provider's own fields (signature, encrypted content, item id), kept verbatim."""


Part = Annotated[
    TextPart | ToolCallPart | ToolResultPart | RefusalPart | ReasoningPart,
    Field(discriminator="kind"),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of the canonical conversation.

    Example:
        >>> Message.user("What is 2 + 3?").text
        'What is 2 + 3?'
    """

    role: Role
    parts: tuple[Part, ...] = ()

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls(role="system", parts=(TextPart(text=text),))

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message."""
        return cls(role="user", parts=(TextPart(text=text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message holding text only."""
        return cls(role="assistant", parts=(TextPart(text=text),))

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool calls in this message, in the model's order."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool results in this message."""
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    @property
    def refusal(self) -> str | None:
        """The refusal text, if the provider reported one."""
        texts = [p.text for p in self.parts if isinstance(p, RefusalPart)]
        return "".join(texts) if texts else None


@dataclass(slots=True, kw_only=True)
class Usage:
    """Token counts of one model turn."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(slots=True, kw_only=True)
class ModelTurn:
    """One answer of a model: the assistant message plus what the provider said about it."""

    message: Message
    provider: str
    model: str
    response_id: str | None = None
    finish_reason_raw: str | None = None
    """The provider's own value (``tool_calls``, ``end_turn``, ``STOP``, ``max_tokens`` ...)."""
    finish_reason: FinishReason
    usage: Usage = field(default_factory=lambda: Usage())
    complete: bool = True
    """False when the stream ended early: nothing in an incomplete turn is executable."""
    incomplete_reason: str | None = None
    """Why an incomplete turn is incomplete (the stream ended early, the provider sent an error event)."""
    raw: Any = None
    """The provider's response as received (for the debugger), when kept."""
    wire: dict[str, Any] | None = None
    """The HTTP exchange of the request as sent and received (an SDK model's capture, redacted and
    size-capped: method, URL, headers, body, status, the response or the stream's frames with their times);
    None for a model that sends nothing over HTTP (``ScriptedModel``) or with the capture off. The keys are
    listed in :mod:`agentnb.providers._capture`."""


def coerce_messages(prompt: str | Message | list[Message] | list[dict[str, Any]]) -> list[Message]:
    """Accept a prompt string, a message, or a list of messages (or plain dicts of them)."""
    if isinstance(prompt, str):
        return [Message.user(prompt)]
    if isinstance(prompt, Message):
        return [prompt]
    out: list[Message] = []
    for m in prompt:
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, dict) and "parts" not in m and isinstance(m.get("content"), str):
            out.append(Message(role=m["role"], parts=(TextPart(text=m["content"]),)))
        else:
            out.append(MESSAGE_ADAPTER.validate_python(m))
    return out


MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)
"""Validates and serializes one message (``MESSAGE_ADAPTER.dump_python(m, mode="json")``)."""
