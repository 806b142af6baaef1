"""Messages request bodies read back into canonical messages (the importer and the emulator's decoder).

``system`` becomes the system message. A user message's ``tool_result`` blocks become a tool message
(``is_error`` gives status ``error``) and its other blocks a user message after it; an assistant's
``thinking``/``redacted_thinking`` blocks become reasoning parts kept for Anthropic, its ``tool_use`` blocks
calls; a tool with ``strict: true`` is a strict tool (the emulator then makes its calls fit). Where the
results stand inside their message is a lint rule's business (``results_not_first``).
"""

from __future__ import annotations

from typing import Any

from ..._messages import ReasoningPart, ResultStatus, TextPart, ToolCallPart
from .._history import Builder, dumps_value, items_of, tool_info
from .._wireapi import History

__all__ = ["parse_history", "requested_choice", "strict_tools"]


def blocks(m: dict[str, Any]) -> list[Any]:
    """A message's content as a list of blocks (a string is one text block)."""
    content = m.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def parse_history(body: dict[str, Any]) -> History:
    """The ``system``, ``messages`` and ``tools`` of a (normalized) Messages request body.

    Example:
        >>> parse_history({"system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}]}).messages[1].text
        'Hi'
    """
    b = Builder("messages")
    if body.get("system"):
        b.add("system", [TextPart(text=b.text(body["system"], -1, "system"))], -1)
    for i, m in enumerate(items_of(body, "messages")):
        if not isinstance(m, dict) or m.get("malformed"):
            continue
        try:
            if m.get("role") == "assistant":
                b.add("assistant", _assistant(b, i, blocks(m)) or [TextPart(text="")], i)
            elif m.get("role") == "user":
                _user(b, i, blocks(m))
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            b.unreadable(i, exc)
    tools = [tool_info(t, "input_schema") for t in body.get("tools") or () if isinstance(t, dict)]
    return b.history(tools, tool_choice=requested_choice(body), strict=strict_tools(body))


def _assistant(b: Builder, i: int, blks: list[Any]) -> list[Any]:
    parts: list[Any] = []
    for j, blk in enumerate(blks):
        kind = blk.get("type")
        if kind == "text":
            parts.append(TextPart(text=str(blk.get("text", ""))))
        elif kind == "tool_use":
            args = blk.get("input") or {}
            n = sum(1 for p in parts if isinstance(p, ToolCallPart))
            parts.append(b.call(str(blk.get("id") or ""), str(blk.get("name") or ""), dumps_value(args), args, n))
        elif kind in ("thinking", "redacted_thinking"):
            parts.append(ReasoningPart(provider="anthropic", text=blk.get("thinking"), data=dict(blk)))
        else:
            b.find("unsupported_part", f"a {kind!r} block in an assistant message is left out", i,
                   b.where(i, f".content[{j}]"), "warning")
    return parts


def _user(b: Builder, i: int, blks: list[Any]) -> None:
    results: list[Any] = []
    texts: list[Any] = []
    for j, blk in enumerate(blks):
        if blk.get("type") == "tool_result":
            text = b.text(blk.get("content"), i, b.where(i, f".content[{j}].content"))
            status: ResultStatus = "error" if blk.get("is_error") else "ok"
            results.append(b.result(str(blk.get("tool_use_id") or ""), text, status))
        else:
            texts.append(TextPart(text=b.text(blk, i, b.where(i, f".content[{j}]"))))
    b.add("tool", results, i)
    b.add("user", texts, i)


def requested_choice(body: dict[str, Any]) -> str | dict[str, str] | None:
    """The request's ``tool_choice`` in canonical form (``{"type": "any"}`` is ``required``)."""
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        return {"any": "required"}.get(choice, choice)
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool":
        name = choice.get("name")
        return {"name": name} if isinstance(name, str) and name else None
    return {"any": "required", "none": "none", "auto": "auto"}.get(str(kind))


def strict_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools in strict mode (``strict: true``), by name: ``{name: input_schema}``.

    Example:
        >>> strict_tools({"tools": [{"name": "f", "input_schema": {"type": "object"}, "strict": True}]})
        {'f': {'type': 'object'}}
    """
    out: dict[str, dict[str, Any]] = {}
    for t in body.get("tools") or ():
        if isinstance(t, dict) and t.get("strict") is True and isinstance(t.get("input_schema"), dict):
            out[str(t.get("name"))] = t["input_schema"]
    return out
