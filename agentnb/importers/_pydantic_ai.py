"""PydanticAI message histories (``result.all_messages()`` or ``ModelMessagesTypeAdapter`` JSON).

A history is a list of ``ModelRequest`` (``kind: "request"``) and ``ModelResponse`` (``kind: "response"``).
Request parts: ``system-prompt`` and the request's ``instructions`` become the system message,
``user-prompt`` a user message, ``tool-return`` a result (``outcome`` ``failed`` or ``retried`` is an error,
``denied`` a denial), ``retry-prompt`` with a tool name an error result (the validation error the model was shown), and
without one a user message. Response parts: ``text``, ``tool-call`` and ``thinking`` (reasoning kept for
PydanticAI). Other parts (files, native tools, capability changes) are findings and are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._messages import ReasoningPart, TextPart, ToolCallPart
from ._base import History, dumps
from ._wire import Imported

_OUTCOME = {"failed": "error", "retried": "error", "denied": "denied", "interrupted": "error"}


def _dump(item: Any) -> Any:
    """A PydanticAI ``ModelMessage`` as its own serializer writes it (anything else is refused)."""
    try:
        from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ModelResponse
    except ImportError:  # without PydanticAI there are no PydanticAI objects: this is something else
        raise TypeError("not a PydanticAI message") from None
    if not isinstance(item, ModelRequest | ModelResponse):
        raise TypeError("not a ModelRequest or ModelResponse")
    return ModelMessagesTypeAdapter.dump_python([item], mode="json")[0]


def _user_text(h: History, content: Any, i: int, path: str) -> str:
    content = h.content(content, i, path)
    if isinstance(content, str):
        return content
    out = []
    for j, item in enumerate(content):
        if isinstance(item, str):
            out.append(item)
        else:
            kind = item.get("kind", "?") if isinstance(item, Mapping) else type(item).__name__
            h.find("unsupported_part", f"a {kind!r} user content item is kept as a placeholder", i, f"{path}[{j}]")
            out.append(f"[{kind}]")
    return "".join(out)


def _parts(h: History, m: Mapping[str, Any], i: int) -> list[tuple[int, Mapping[str, Any], Any]]:
    """``(index, part, part_kind)`` of a message's parts that are objects (the others are findings)."""
    out = []
    for j, p in enumerate(h.field_list(m.get("parts"), "parts", i, f"[{i}].parts")):
        if isinstance(p, Mapping):
            out.append((j, p, p.get("part_kind")))
        else:
            h.find("malformed", f"part {j} is a {type(p).__name__}, not an object: left out", i, f"[{i}].parts[{j}]",
                   "error")
    return out


def _request(h: History, m: Mapping[str, Any], i: int, system_seen: bool) -> bool:
    instructions = m.get("instructions")
    if instructions and not system_seen:
        text = instructions if isinstance(instructions, str) else dumps(instructions)
        h.add("system", [TextPart(text=text)], i)
        system_seen = True
    results: list[Any] = []
    users: list[Any] = []
    for j, p, kind in _parts(h, m, i):
        path = f"[{i}].parts[{j}]"
        call_id = h.word(p.get("tool_call_id"), "tool_call_id", i, f"{path}.tool_call_id")
        tool = h.word(p.get("tool_name"), "tool_name", i, f"{path}.tool_name")
        if kind == "system-prompt":
            content = p.get("content", "")
            h.add("system", [TextPart(text=content if isinstance(content, str) else dumps(content))], i)
            system_seen = True
        elif kind == "user-prompt":
            users.append(TextPart(text=_user_text(h, p.get("content"), i, f"{path}.content")))
        elif kind == "tool-return":
            outcome = p.get("outcome")
            status = _OUTCOME.get(outcome, "ok") if isinstance(outcome, str) else "ok"
            results.append(h.result(call_id, p.get("content"), status, tool or None))
        elif kind == "retry-prompt":
            content = p.get("content")
            text = content if isinstance(content, str) else dumps(content)
            if tool:
                results.append(h.result(call_id, text, "error", tool))
            else:
                users.append(TextPart(text=text))
        else:
            h.find("unsupported_part", f"a {kind!r} request part is left out", i, path)
    h.add("tool", results, i)
    h.add("user", users, i)
    return system_seen


def _response(h: History, m: Mapping[str, Any], i: int) -> None:
    h.model = h.model or h.word(m.get("model_name"), "model_name", i, f"[{i}].model_name") or None
    parts: list[Any] = []
    for j, p, kind in _parts(h, m, i):
        path = f"[{i}].parts[{j}]"
        if kind == "text":
            content = p.get("content", "")
            parts.append(TextPart(text=content if isinstance(content, str) else dumps(content)))
        elif kind == "tool-call":
            index = sum(isinstance(q, ToolCallPart) for q in parts)
            call_id = h.word(p.get("tool_call_id"), "tool_call_id", i, f"{path}.tool_call_id") or f"pydantic_ai_{i}_{j}"
            parts.append(h.call(call_id, h.word(p.get("tool_name"), "tool_name", i, f"{path}.tool_name"),
                                p.get("args"), index, i, path))
        elif kind == "thinking":
            content = p.get("content")
            parts.append(ReasoningPart(provider="pydantic_ai", text=content if isinstance(content, str) else None,
                                       data=dict(p)))
        else:
            h.find("unsupported_part", f"a {kind!r} response part is left out", i, path)
    h.add("assistant", parts or [TextPart(text="")], i)


def from_pydantic_ai(history: Any, *, model: str | None = None, run_id: str | None = None,
                     ts: Any = None) -> Imported:
    """Import a PydanticAI history: ``ModelMessage`` objects, their JSON (``all_messages_json()``) or dicts.

    Example:
        >>> out = from_pydantic_ai([
        ...     {"kind": "request", "instructions": "Be brief.",
        ...      "parts": [{"part_kind": "user-prompt", "content": "Weather in Paris?"}]},
        ...     {"kind": "response", "model_name": "test", "parts": [
        ...         {"part_kind": "tool-call", "tool_name": "get_weather", "args": {"city": "Paris"},
        ...          "tool_call_id": "c1"}]},
        ...     {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "get_weather",
        ...                                    "content": {"temp_c": 18}, "tool_call_id": "c1"}]},
        ... ])
        >>> [m.role for m in out.messages], out.ok
        (['system', 'user', 'assistant', 'tool'], True)
    """
    h = History("pydantic_ai")
    system_seen = False
    for i, m in enumerate(h.items(history, _dump)):
        if not isinstance(m, Mapping):
            if m is not None:  # None: an item the reading already reported
                h.find("not_a_message", f"item {i} is a {type(m).__name__}, not a message", i, f"[{i}]", "error")
        elif m.get("kind") == "request":
            system_seen = _request(h, m, i, system_seen)
        elif m.get("kind") == "response":
            _response(h, m, i)
        else:
            h.find("unknown_role", f"kind {m.get('kind')!r} is neither 'request' nor 'response'", i, f"[{i}].kind",
                   "error")
    return h.done(model=model, run_id=run_id, ts=ts)
