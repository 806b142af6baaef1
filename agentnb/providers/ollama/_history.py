"""``/api/chat`` request bodies read back into canonical messages (the importer and the emulator's decoder).

The wire has no call ids, so reading gives them (see :mod:`._adapter`, "Binding without ids"): the calls of
the assistant message at ``messages[i]`` get ``ollama_<i>_<k>`` (``k`` their position), unique in the
conversation and the same each time a body is read; a call ``id``, which newer servers may send, is kept
instead. A tool message binds to an unanswered call of the assistant message before it: the one its
``tool_call_id`` names, else the first whose name is its ``tool_name``, else (no ``tool_name``) the first
in order. A tool message that matches no call keeps the id ``ollama_<i>_result`` (the lint rules report
it). Consecutive tool messages become one canonical tool message. ``thinking`` on an assistant message is a
reasoning part tagged ``ollama``.
"""

from __future__ import annotations

from typing import Any

from ..._messages import ReasoningPart, TextPart, ToolCallPart
from .._history import Builder, items_of, tool_info
from .._wireapi import History
from ._adapter import PROVIDER, call_part

__all__ = ["parse_history"]


def parse_history(body: dict[str, Any]) -> History:
    """The ``messages`` and ``tools`` of a (normalized) ``/api/chat`` request body.

    Example:
        >>> h = parse_history({"messages": [
        ...     {"role": "user", "content": "2+3?"},
        ...     {"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]},
        ...     {"role": "tool", "content": "5", "tool_name": "add"}]})
        >>> h.messages[1].tool_calls[0].call_id, h.messages[2].tool_results[0].call_id
        ('ollama_1_0', 'ollama_1_0')
    """
    b = Builder("messages")
    waiting: list[ToolCallPart] = []  # the calls of the last assistant message not answered yet
    for i, m in enumerate(items_of(body, "messages")):
        if not isinstance(m, dict) or m.get("malformed"):
            continue
        try:
            waiting = _message(b, i, m, waiting)
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            b.unreadable(i, exc)
    tools = [tool_info(t.get("function"), "parameters") for t in body.get("tools") or () if isinstance(t, dict)]
    return b.history(tools, tool_choice="auto" if tools else None)


def _message(b: Builder, i: int, m: dict[str, Any], waiting: list[ToolCallPart]) -> list[ToolCallPart]:
    role = m.get("role")
    if role == "assistant":
        return _assistant(b, i, m)
    if role == "tool":
        b.add("tool", [_result(b, i, m, waiting)], i, merge_results=True)
        return waiting
    if role in ("system", "user"):
        b.add(role, [TextPart(text=b.text(m.get("content"), i, b.where(i, ".content")))], i)
    else:
        b.find("bad_role", f"role {role!r} is not an Ollama role; the message is left out", i, b.where(i, ".role"),
               "warning")
    return []


def _assistant(b: Builder, i: int, m: dict[str, Any]) -> list[ToolCallPart]:
    parts: list[Any] = []
    if m.get("thinking"):
        parts.append(ReasoningPart(provider=PROVIDER, text=str(m["thinking"])))
    if m.get("content"):
        parts.append(TextPart(text=b.text(m.get("content"), i, b.where(i, ".content"))))
    calls: list[ToolCallPart] = []
    for k, tc in enumerate(m.get("tool_calls") or ()):
        fn = tc["function"]
        wire_id = tc.get("id") if isinstance(tc.get("id"), str) and tc.get("id") else None
        part = call_part(wire_id or f"ollama_{i}_{k}", str(fn.get("name") or ""), fn.get("arguments"), k, wire_id)
        if part.arguments is None:
            b.find("invalid_arguments", f"the arguments of call {part.call_id!r} are not a JSON object", i,
                   b.where(i, f".tool_calls[{k}].function.arguments"), "warning")
        b.names.setdefault(part.call_id, part.name)
        calls.append(part)
    b.add("assistant", [*parts, *calls] or [TextPart(text="")], i)
    return list(calls)


def _result(b: Builder, i: int, m: dict[str, Any], waiting: list[ToolCallPart]) -> Any:
    name = str(m.get("tool_name") or "")
    by_id = m.get("tool_call_id")
    match = next((c for c in waiting if by_id and c.call_id == by_id), None)
    if match is None:
        match = next((c for c in waiting if c.name == name), None) if name else (waiting[0] if waiting else None)
    if match is not None:
        waiting.remove(match)
    call_id = match.call_id if match is not None else f"ollama_{i}_result"
    return b.result(call_id, b.text(m.get("content"), i, b.where(i, ".content")),
                    name=name or (match.name if match is not None else ""))
