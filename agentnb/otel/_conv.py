"""The GenAI semantic conventions as agentnb reads and writes them: attribute names and message mapping.

Both directions live here so that a change to the conventions is one diff. Messages follow the JSON schemas
of ``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions``: a message is
``{"role", "parts": [...]}`` (plus ``finish_reason`` on output messages) and a part is ``{"type": "text",
"content"}``, ``{"type": "tool_call", "id", "name", "arguments"}``, ``{"type": "tool_call_response", "id",
"response"}``, ``{"type": "reasoning", "content"}`` or any other ``{"type": ...}`` (the schemas allow extra
properties, which is where agentnb keeps a result's ``status`` and ``name``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any, get_args

from .._messages import (
    FinishReason,
    Message,
    ReasoningPart,
    RefusalPart,
    ResultStatus,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

# -- attribute names (the conventions' registry, as of semantic-conventions 1.37 and later) ------------------

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"
"""Deprecated in favour of ``gen_ai.provider.name``; still written (and read) because many back ends use it."""
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

REQUEST_SETTINGS: dict[str, str] = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "stop": "gen_ai.request.stop_sequences",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}
"""agentnb request settings and the ``gen_ai.request.*`` attribute each one is written to."""

CHAT_OPERATIONS = frozenset({"chat", "generate_content", "text_completion"})

# agentnb's own attributes: what the conventions have no name for, so that an agentnb run comes back whole.
A_RUN_ID = "agentnb.run_id"
A_INPUT_FROM = "agentnb.input.from"
"""On a chat span: how many input messages came before the ones in ``gen_ai.input.messages`` (what was new)."""
A_MODEL = "agentnb.model"
A_STATE = "agentnb.state"
A_REASON = "agentnb.reason"
A_OUTPUT = "agentnb._output"
A_TURN = "agentnb.turn"
A_FINALIZE = "agentnb.finalize"
A_WIRE = "agentnb.provider"
A_FINISH_RAW = "agentnb.response.finish_reason_raw"
A_COMPLETE = "agentnb.response.complete"
A_INCOMPLETE = "agentnb.response.incomplete_reason"
A_STATUS = "agentnb.result.status"
A_OUTCOME = "agentnb.call.outcome"
"""``executed``, ``rejected``, ``denied``, ``submitted``: how the call got its result."""
A_REJECT = "agentnb.call.reject_reason"
A_DECISION = "agentnb.approval.decision"
A_BY = "agentnb.approval.by"
A_NOTE = "agentnb.approval.note"
A_KIND = "agentnb.approval.kind"

# -- provider names and finish reasons ------------------------------------------------------------------------

def provider_name(wire: str) -> str:
    """The conventions' ``gen_ai.provider.name`` for an agentnb wire API (each declares its ``otel_name``).

    Names that are not a registered wire API pass through.
    """
    from ..providers._registry import WIRE_APIS

    api = WIRE_APIS.get(wire)
    return api.otel_name or api.name if api is not None else wire


_TO_SPEC: dict[str, str] = {"stop": "stop", "tool_calls": "tool_call", "length": "length",
                            "content_filter": "content_filter", "error": "error", "refusal": "refusal"}
_FROM_SPEC: dict[str, FinishReason] = {
    "stop": "stop", "end_turn": "stop", "stop_sequence": "stop", "completed": "stop",
    "tool_call": "tool_calls", "tool_calls": "tool_calls", "tool_use": "tool_calls", "function_call": "tool_calls",
    "length": "length", "max_tokens": "length", "max_output_tokens": "length",
    "content_filter": "content_filter", "safety": "content_filter", "recitation": "content_filter",
    "refusal": "refusal", "error": "error",
}


def finish_to_spec(reason: str) -> str:
    """Agentnb's normalized finish reason as the conventions spell it (``tool_calls`` -> ``tool_call``)."""
    return _TO_SPEC.get(reason, "other")


def finish_from_spec(raw: str | None, has_calls: bool) -> FinishReason:
    """A finish reason from a trace, normalized; a trace without one gets ``tool_calls`` or ``stop``."""
    if not raw:
        return "tool_calls" if has_calls else "stop"
    reason = _FROM_SPEC.get(raw.lower())
    if reason is None:
        return "other"
    return reason


# -- messages: canonical -> conventions -----------------------------------------------------------------------


def _arguments(p: ToolCallPart) -> Any:
    return p.arguments if p.arguments is not None else p.arguments_raw


def part_to_otel(p: Any) -> dict[str, Any]:
    """One canonical part as a conventions part."""
    if isinstance(p, TextPart):
        return {"type": "text", "content": p.text}
    if isinstance(p, ToolCallPart):
        return {"type": "tool_call", "id": p.call_id, "name": p.name, "arguments": _arguments(p)}
    if isinstance(p, ToolResultPart):
        return {"type": "tool_call_response", "id": p.call_id, "response": p.content, "name": p.name,
                "status": p.status}
    if isinstance(p, RefusalPart):
        return {"type": "refusal", "content": p.text}
    if isinstance(p, ReasoningPart):
        # the provider's opaque data (signatures, encrypted content) stays out of telemetry
        return {"type": "reasoning", "content": p.text or "", "provider": p.provider}
    raise TypeError(f"not a message part: {type(p).__name__}")


def messages_to_otel(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system instructions, input messages)``: a leading system message goes to the instructions."""
    system: list[dict[str, Any]] = []
    rest = list(messages)
    if rest and rest[0].role == "system":
        system = [part_to_otel(p) for p in rest.pop(0).parts]
    return system, [message_to_otel(m) for m in rest]


def message_to_otel(message: Message) -> dict[str, Any]:
    """One message of ``gen_ai.input.messages``."""
    return {"role": message.role, "parts": [part_to_otel(p) for p in message.parts]}


def output_to_otel(message: Message, finish_reason: str) -> list[dict[str, Any]]:
    """The ``gen_ai.output.messages`` of one turn."""
    return [{"role": "assistant", "parts": [part_to_otel(p) for p in message.parts],
             "finish_reason": finish_to_spec(finish_reason)}]


def dumps(value: Any) -> str:
    """Compact JSON, as attribute values carry structured data."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# -- messages: conventions -> canonical -----------------------------------------------------------------------

_STATUSES = frozenset(get_args(ResultStatus))
_ROLES = {"system": "system", "developer": "system", "user": "user", "human": "user", "assistant": "assistant",
          "model": "assistant", "ai": "assistant", "tool": "tool", "function": "tool"}


def loads(value: Any) -> Any:
    """An attribute value that holds JSON text, parsed (other values, and text that is not JSON, as they are)."""
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
            return value
    return value


# -- attribute values, checked: a trace may hold anything under any name ---------------------------------------
# Each reader returns the value when it has the type the conventions give it, and otherwise records in ``lost``
# (what the import lists as lacking) that the attribute's values were unreadable, and returns the default.


def text(attrs: Mapping[str, Any], key: str, lost: set[str]) -> str | None:
    """A string attribute (a number is read as its text)."""
    value = attrs.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    lost.add(f"{key} values that are not text (left out)")
    return None


def count(attrs: Mapping[str, Any], key: str, lost: set[str], default: int = 0) -> int:
    """A non-negative integer attribute (token counts, attempts)."""
    value = attrs.get(key)
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    lost.add(f"{key} values that are not counts (read as {default})")
    return default


def number(attrs: Mapping[str, Any], key: str, lost: set[str], default: float = 0.0) -> float:
    """A finite number attribute."""
    value = attrs.get(key)
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    lost.add(f"{key} values that are not finite numbers (read as {default:g})")
    return default


def flag(attrs: Mapping[str, Any], key: str, lost: set[str], default: bool) -> bool:
    """A boolean attribute."""
    value = attrs.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    lost.add(f"{key} values that are not booleans (read as {default})")
    return default


def choice(attrs: Mapping[str, Any], key: str, allowed: Collection[str], lost: set[str]) -> str | None:
    """A string attribute from a closed vocabulary (a state, a status, an outcome)."""
    value = attrs.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value in allowed:
        return value
    lost.add(f"{key} values that are none of {', '.join(sorted(allowed))} (left out)")
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


class MessageReader:
    """Turns conventions messages into canonical ones, remembering tool names and what it could not keep."""

    def __init__(self, provider: str = "otel") -> None:
        self.provider = provider
        self.names: dict[str, str] = {}
        self.lost: set[str] = set()
        self._n = 0

    def _word(self, part: Mapping[str, Any], key: str, what: str) -> str:
        """A part's ``id`` or ``name``: text (a number as its text); anything else is lost."""
        value = part.get(key)
        if value is None or isinstance(value, str):
            return value or ""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        self.lost.add(f"{what} that are not text (left out)")
        return ""

    def call(self, part: Mapping[str, Any], index: int) -> ToolCallPart:
        """A ``tool_call`` part (arguments as an object, or as JSON text)."""
        self._n += 1
        call_id = self._word(part, "id", "call ids") or f"otel_call_{self._n}"
        name = self._word(part, "name", "tool names")
        args = loads(part.get("arguments"))
        parsed: dict[str, Any] | None
        if isinstance(args, dict):
            raw, parsed = dumps(args), args
        else:
            raw = "{}" if args is None else _text(part.get("arguments"))
            parsed = {} if args is None else None
        self.names[call_id] = name
        return ToolCallPart(call_id=call_id, name=name, arguments_raw=raw, arguments=parsed, index=index)

    def result(self, part: Mapping[str, Any]) -> ToolResultPart:
        """A ``tool_call_response`` part (``response`` in the schema; some emitters write ``result``)."""
        call_id = self._word(part, "id", "call ids")
        value = part["response"] if "response" in part else part.get("result")
        said = part.get("status")
        status: ResultStatus = said if isinstance(said, str) and said in _STATUSES else "ok"  # type: ignore[assignment]
        name = self._word(part, "name", "tool names") or self.names.get(call_id, "")
        return ToolResultPart(call_id=call_id, name=name, status=status, content=_text(value),
                              audit=None if isinstance(value, str) else value)

    def parts(self, parts: Any) -> tuple[list[Any], list[ToolResultPart]]:
        """``(parts, results)`` of one message: results are told apart, as they form tool messages."""
        out: list[Any] = []
        results: list[ToolResultPart] = []
        if isinstance(parts, str):  # a message whose parts are one text
            parts = [parts]
        elif not isinstance(parts, list):
            self.lost.add("message parts that are not a list (left out)")
            parts = []
        for raw in parts:
            p = raw if isinstance(raw, Mapping) else {"type": "text", "content": _text(raw)}
            kind = p.get("type")
            if not isinstance(kind, str):
                kind = repr(kind)
            if kind == "text":
                out.append(TextPart(text=_text(p.get("content", ""))))
            elif kind == "tool_call":
                out.append(self.call(p, sum(isinstance(q, ToolCallPart) for q in out)))
            elif kind == "tool_call_response":
                results.append(self.result(p))
            elif kind in ("reasoning", "thinking"):
                out.append(ReasoningPart(provider=str(p.get("provider") or self.provider),
                                         text=_text(p.get("content", "")) or None))
            elif kind == "refusal":
                out.append(RefusalPart(text=_text(p.get("content", ""))))
            else:
                self.lost.add(f"{kind} parts (kept as placeholders)")
                out.append(TextPart(text=f"[{kind}]"))
        return out, results

    def messages(self, value: Any, what: str = "gen_ai.input.messages") -> list[Message]:
        """Canonical messages from a ``gen_ai.input.messages``/``output.messages`` value (JSON text or a list).

        Tool results become tool messages, wherever they were (PydanticAI before its format 6 sends them in
        a user message); consecutive tool messages merge, as the canonical conversation has one per turn.
        """
        out: list[Message] = []
        items = loads(value)
        if isinstance(items, Mapping):
            items = [items]
        elif not isinstance(items, list):
            if items is not None and items != "":
                self.lost.add(f"{what} that are not a list of messages (left out)")
            return out
        for m in items:
            if not isinstance(m, Mapping):
                self.lost.add(f"{what} items that are not messages (left out)")
                continue
            role = _ROLES.get(m.get("role", "user") if isinstance(m.get("role", "user"), str) else "", "user")
            parts, results = self.parts(m.get("parts") or [])
            if results:
                if out and out[-1].role == "tool":
                    out[-1] = Message(role="tool", parts=(*out[-1].parts, *results))
                else:
                    out.append(Message(role="tool", parts=tuple(results)))
            if parts or (role == "assistant" and not results):
                out.append(Message(role=role, parts=tuple(parts)))  # type: ignore[arg-type]
        return out

    def system(self, value: Any) -> list[Message]:
        """The system message from ``gen_ai.system_instructions`` (none when absent)."""
        parts = loads(value)
        if not parts:
            return []
        if isinstance(parts, str | Mapping):  # one instruction, as text or as one part
            parts = [parts]
        elif not isinstance(parts, list):
            self.lost.add("gen_ai.system_instructions that are not a list of parts (left out)")
            return []
        texts = [_text(p.get("content", "")) if isinstance(p, Mapping) else _text(p) for p in parts]
        return [Message.system("\n".join(texts))]
