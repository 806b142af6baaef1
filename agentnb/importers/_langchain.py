"""LangChain message lists: ``messages_to_dict`` output, or ``BaseMessage`` objects.

Each item is ``{"type": "human" | "ai" | "system" | "tool" | ..., "data": {...}}``. An ``ai`` message's
``tool_calls`` become calls and its ``invalid_tool_calls`` calls whose arguments are not a JSON object (as
the model wrote them, never repaired); a ``tool`` message answers ``tool_call_id`` (``status: "error"``
makes an error result). Content given as a list of blocks keeps its text blocks; others are findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._messages import TextPart, ToolCallPart
from ._base import History, dumps
from ._wire import Imported

_ROLES = {"human": "user", "HumanMessageChunk": "user", "ai": "assistant", "AIMessageChunk": "assistant",
          "system": "system", "SystemMessageChunk": "system", "tool": "tool", "ToolMessageChunk": "tool",
          "function": "tool", "developer": "system"}


def _dump(item: Any) -> Any:
    """A LangChain message object as ``messages_to_dict`` writes it (anything else is refused)."""
    try:
        from langchain_core.messages import BaseMessage, message_to_dict
    except ImportError:  # without LangChain there are no LangChain objects: this is something else
        raise TypeError("not a LangChain message") from None
    if not isinstance(item, BaseMessage):
        raise TypeError("not a LangChain BaseMessage")
    return message_to_dict(item)


def _text(h: History, content: Any, i: int) -> str:
    content = h.content(content, i, f"[{i}].data.content")
    if isinstance(content, str):
        return content
    out = []
    for j, block in enumerate(content):
        if isinstance(block, str):
            out.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            text = block.get("text", "")
            out.append(text if isinstance(text, str) else dumps(text))
        else:
            kind = block.get("type", "?") if isinstance(block, Mapping) else type(block).__name__
            h.find("unsupported_part", f"a {kind!r} content block is kept as a placeholder", i,
                   f"[{i}].data.content[{j}]")
            out.append(f"[{kind}]")
    return "".join(out)


def from_langchain(history: Any, *, model: str | None = None, run_id: str | None = None, ts: Any = None) -> Imported:
    """Import a LangChain message list (``messages_to_dict`` dicts, their JSON text, or message objects).

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
    for i, item in enumerate(h.items(history, _dump)):
        if not isinstance(item, Mapping):
            if item is not None:  # None: an item the reading already reported
                h.find("not_a_message", f"item {i} is a {type(item).__name__}, not a message", i, f"[{i}]", "error")
            continue
        data: Mapping[str, Any] = item["data"] if isinstance(item.get("data"), Mapping) else item
        kind = item.get("type") or data.get("type")
        role = _ROLES.get(kind) if isinstance(kind, str) else None
        if role is None:
            h.find("unknown_role", f"message type {kind!r} is not a LangChain role", i, f"[{i}].type", "error")
            continue
        text = _text(h, data.get("content"), i)
        if role == "tool":
            status = "error" if data.get("status") == "error" else "ok"
            call_id = h.word(data.get("tool_call_id"), "tool_call_id", i, f"[{i}].data.tool_call_id")
            name = h.word(data.get("name"), "name", i, f"[{i}].data.name")
            h.add("tool", [h.result(call_id, text, status, name or None)], i)
        elif role == "assistant":
            _assistant(h, data, text, i)
        else:
            h.add(role, [TextPart(text=text)], i)
    return h.done(model=model, run_id=run_id, ts=ts)


def _assistant(h: History, data: Mapping[str, Any], text: str, i: int) -> None:
    meta = h.mapping(data.get("response_metadata"), "response_metadata", i, f"[{i}].data.response_metadata") or {}
    h.model = h.model or h.word(meta.get("model_name") or meta.get("model"), "the model name", i,
                                f"[{i}].data.response_metadata.model_name") or None
    parts: list[Any] = [TextPart(text=text)] if text else []
    calls = [*h.field_list(data.get("tool_calls"), "tool_calls", i, f"[{i}].data.tool_calls"),
             *h.field_list(data.get("invalid_tool_calls"), "invalid_tool_calls", i, f"[{i}].data.invalid_tool_calls")]
    for j, tc in enumerate(calls):
        path = f"[{i}].data.tool_calls[{j}]"
        if not isinstance(tc, Mapping):
            h.find("malformed", f"tool call {j} is a {type(tc).__name__}, not an object: left out", i, path, "error")
            continue
        index = sum(isinstance(p, ToolCallPart) for p in parts)
        call_id = h.word(tc.get("id"), "the call id", i, f"{path}.id") or f"langchain_{i}_{j}"
        parts.append(h.call(call_id, h.word(tc.get("name"), "the tool name", i, f"{path}.name"), tc.get("args"),
                            index, i, path))
    h.add("assistant", parts or [TextPart(text="")], i)
