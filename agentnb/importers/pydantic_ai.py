"""PydanticAI message histories (``result.all_messages()`` or ``ModelMessagesTypeAdapter`` JSON).

A history is a list of ``ModelRequest`` (``kind: "request"``) and ``ModelResponse`` (``kind: "response"``).
Request parts: ``system-prompt`` and the request's ``instructions`` become the system message,
``user-prompt`` a user message, ``tool-return`` a result (``outcome`` ``failed`` or ``retried`` is an error,
``denied`` a denial), ``retry-prompt`` with a tool name an error result (the validation error the model was shown), and
without one a user message. Response parts: ``text``, ``tool-call`` and ``thinking`` (reasoning kept for
PydanticAI). Other parts (files, native tools, capability changes) are findings and are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..messages import ReasoningPart, TextPart, ToolCallPart
from ._base import History, dumps
from .wire import Imported

_OUTCOME = {"failed": "error", "retried": "error", "denied": "denied", "interrupted": "error"}


def _as_dicts(history: Any) -> list[Any]:
    if isinstance(history, bytes | str):
        data = json.loads(history)
        return list(data) if isinstance(data, list) else [data]
    items = list(history)
    if items and not isinstance(items[0], Mapping):  # ModelMessage objects: PydanticAI's own serializer
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        return list(ModelMessagesTypeAdapter.dump_python(items, mode="json"))
    return items


def _user_text(h: History, content: Any, i: int, path: str) -> str:
    if isinstance(content, str):
        return content
    out = []
    for j, item in enumerate(content or []):
        if isinstance(item, str):
            out.append(item)
        else:
            kind = item.get("kind", "?") if isinstance(item, Mapping) else type(item).__name__
            h.find("unsupported_part", f"a {kind!r} user content item is kept as a placeholder", i, f"{path}[{j}]")
            out.append(f"[{kind}]")
    return "".join(out)


def _request(h: History, m: Mapping[str, Any], i: int, system_seen: bool) -> bool:
    instructions = m.get("instructions")
    if instructions and not system_seen:
        h.add("system", [TextPart(text=str(instructions))], i)
        system_seen = True
    results: list[Any] = []
    users: list[Any] = []
    for j, p in enumerate(m.get("parts") or []):
        kind = p.get("part_kind")
        path = f"[{i}].parts[{j}]"
        if kind == "system-prompt":
            h.add("system", [TextPart(text=str(p.get("content", "")))], i)
            system_seen = True
        elif kind == "user-prompt":
            users.append(TextPart(text=_user_text(h, p.get("content"), i, f"{path}.content")))
        elif kind == "tool-return":
            status = _OUTCOME.get(str(p.get("outcome")), "ok")
            results.append(h.result(str(p.get("tool_call_id", "")), p.get("content"), status, p.get("tool_name")))
        elif kind == "retry-prompt":
            content = p.get("content")
            text = content if isinstance(content, str) else dumps(content)
            if p.get("tool_name"):
                results.append(h.result(str(p.get("tool_call_id", "")), text, "error", p.get("tool_name")))
            else:
                users.append(TextPart(text=text))
        else:
            h.find("unsupported_part", f"a {kind!r} request part is left out", i, path)
    h.add("tool", results, i)
    h.add("user", users, i)
    return system_seen


def _response(h: History, m: Mapping[str, Any], i: int) -> None:
    h.model = h.model or m.get("model_name")
    parts: list[Any] = []
    for j, p in enumerate(m.get("parts") or []):
        kind = p.get("part_kind")
        if kind == "text":
            parts.append(TextPart(text=str(p.get("content", ""))))
        elif kind == "tool-call":
            index = sum(isinstance(q, ToolCallPart) for q in parts)
            parts.append(h.call(str(p.get("tool_call_id") or f"pydantic_ai_{i}_{j}"), str(p.get("tool_name", "")),
                                p.get("args"), index, i, f"[{i}].parts[{j}]"))
        elif kind == "thinking":
            parts.append(ReasoningPart(provider="pydantic_ai", text=p.get("content"), data=dict(p)))
        else:
            h.find("unsupported_part", f"a {kind!r} response part is left out", i, f"[{i}].parts[{j}]")
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
    for i, m in enumerate(_as_dicts(history)):
        if not isinstance(m, Mapping):
            h.find("not_a_message", f"item {i} is a {type(m).__name__}, not a message", i, f"[{i}]", "error")
        elif m.get("kind") == "request":
            system_seen = _request(h, m, i, system_seen)
        elif m.get("kind") == "response":
            _response(h, m, i)
        else:
            h.find("unknown_role", f"kind {m.get('kind')!r} is neither 'request' nor 'response'", i, f"[{i}].kind",
                   "error")
    return h.done(model=model, run_id=run_id, ts=ts)
