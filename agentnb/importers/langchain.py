"""LangChain message lists: ``messages_to_dict`` output, or ``BaseMessage`` objects.

Each item is ``{"type": "human" | "ai" | "system" | "tool" | ..., "data": {...}}``. An ``ai`` message's
``tool_calls`` become calls and its ``invalid_tool_calls`` calls whose arguments are not a JSON object (as
the model wrote them, never repaired); a ``tool`` message answers ``tool_call_id`` (``status: "error"``
makes an error result). Content given as a list of blocks keeps its text blocks; others are findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..messages import TextPart, ToolCallPart
from ._base import History
from .wire import Imported

_ROLES = {"human": "user", "HumanMessageChunk": "user", "ai": "assistant", "AIMessageChunk": "assistant",
          "system": "system", "SystemMessageChunk": "system", "tool": "tool", "ToolMessageChunk": "tool",
          "function": "tool", "developer": "system"}


def _as_dicts(history: Any) -> list[Any]:
    items = list(history)
    if items and not isinstance(items[0], Mapping):
        from langchain_core.messages import messages_to_dict

        return list(messages_to_dict(items))
    return items


def _text(h: History, content: Any, i: int) -> str:
    if isinstance(content, str):
        return content
    out = []
    for j, block in enumerate(content or []):
        if isinstance(block, str):
            out.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            out.append(str(block.get("text", "")))
        else:
            kind = block.get("type", "?") if isinstance(block, Mapping) else type(block).__name__
            h.find("unsupported_part", f"a {kind!r} content block is kept as a placeholder", i,
                   f"[{i}].data.content[{j}]")
            out.append(f"[{kind}]")
    return "".join(out)


def from_langchain(history: Any, *, model: str | None = None, run_id: str | None = None, ts: Any = None) -> Imported:
    """Import a LangChain message list (``messages_to_dict`` dicts or message objects).

    Example:
        >>> out = from_langchain([
        ...     {"type": "human", "data": {"content": "Weather in Paris?"}},
        ...     {"type": "ai", "data": {"content": "", "tool_calls": [
        ...         {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]}},
        ...     {"type": "tool", "data": {"content": "18 C", "tool_call_id": "c1"}},
        ... ])
        >>> [(m.role, len(m.parts)) for m in out.messages], out.ok
        ([('user', 1), ('assistant', 1), ('tool', 1)], True)
    """
    h = History("langchain")
    for i, item in enumerate(_as_dicts(history)):
        if not isinstance(item, Mapping):
            h.find("not_a_message", f"item {i} is a {type(item).__name__}, not a message", i, f"[{i}]", "error")
            continue
        data: Mapping[str, Any] = item["data"] if isinstance(item.get("data"), Mapping) else item
        role = _ROLES.get(str(item.get("type") or data.get("type")))
        if role is None:
            h.find("unknown_role", f"message type {item.get('type')!r} is not a LangChain role", i, f"[{i}].type",
                   "error")
            continue
        text = _text(h, data.get("content"), i)
        if role == "tool":
            status = "error" if data.get("status") == "error" else "ok"
            h.add("tool", [h.result(str(data.get("tool_call_id") or ""), text, status, data.get("name"))], i)
        elif role == "assistant":
            meta = data.get("response_metadata") or {}
            h.model = h.model or meta.get("model_name") or meta.get("model")
            parts: list[Any] = [TextPart(text=text)] if text else []
            calls = [*(data.get("tool_calls") or []), *(data.get("invalid_tool_calls") or [])]
            for j, tc in enumerate(calls):
                index = sum(isinstance(p, ToolCallPart) for p in parts)
                parts.append(h.call(str(tc.get("id") or f"langchain_{i}_{j}"), str(tc.get("name") or ""),
                                    tc.get("args"), index, i, f"[{i}].data.tool_calls[{j}]"))
            h.add("assistant", parts or [TextPart(text="")], i)
        else:
            h.add(role, [TextPart(text=text)], i)
    return h.done(model=model, run_id=run_id, ts=ts)
