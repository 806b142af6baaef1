"""Responses request bodies read back into canonical messages (the importer and the emulator's decoder).

``instructions`` become the system message (a string ``input`` is one user message). Consecutive assistant
items (``message``, ``function_call``, ``reasoning``) become one assistant message; reasoning items are kept
whole as :class:`~agentnb._messages.ReasoningPart` tagged ``openai_responses``; ``function_call_output``
items become results. Items the canonical conversation cannot hold (server-side tool calls) are
``unsupported_part`` warnings and are left out.
"""

from __future__ import annotations

from typing import Any

from ..._messages import ReasoningPart, RefusalPart, TextPart, ToolCallPart
from .._history import Builder, dumps_value, items_of, tool_info
from .._wireapi import History
from ..openai_chat._history import requested_choice

__all__ = ["parse_history", "strict_tools"]


class _Reader:
    """One pass over the items; assistant items wait in ``pending`` until something else comes."""

    def __init__(self) -> None:
        self.b = Builder("input")
        self.pending: list[Any] = []
        self.pending_at: list[int] = []

    def flush(self) -> None:
        self.b.add("assistant", list(self.pending), list(self.pending_at))
        self.pending.clear()
        self.pending_at.clear()

    def hold(self, i: int, part: Any) -> None:
        self.pending_at.append(i)
        self.pending.append(part)

    def item(self, i: int, m: dict[str, Any]) -> None:
        b = self.b
        kind, role = m.get("type") or "message", m.get("role")
        if kind == "message" and role == "assistant":
            content = m.get("content")
            for j, c in enumerate(content if isinstance(content, list) else [content]):
                if isinstance(c, dict) and c.get("type") == "refusal":
                    self.hold(i, RefusalPart(text=str(c.get("refusal", ""))))
                else:
                    self.hold(i, TextPart(text=b.text(c, i, b.where(i, f".content[{j}]"))))
        elif kind == "function_call":
            index = sum(1 for p in self.pending if isinstance(p, ToolCallPart))
            self.hold(i, b.call(str(m.get("call_id") or ""), str(m.get("name") or ""),
                                dumps_value(m.get("arguments", "{}")), None, index, provider_id=m.get("id")))
        elif kind == "reasoning":
            summary = "".join(s.get("text", "") for s in m.get("summary") or [] if isinstance(s, dict))
            self.hold(i, ReasoningPart(provider="openai_responses", text=summary or None, data=dict(m)))
        elif kind == "function_call_output":
            self.flush()
            out = b.text(m.get("output", ""), i, b.where(i, ".output"))
            b.add("tool", [b.result(str(m.get("call_id") or ""), out)], i, merge_results=True)
        elif kind == "message" and role in ("user", "system", "developer", None):
            self.flush()
            text = b.text(m.get("content"), i, b.where(i, ".content"))
            b.add("system" if role in ("system", "developer") else "user", [TextPart(text=text)], i)
        else:
            self.flush()
            b.find("unsupported_part", f"a {kind!r} item is left out", i, b.where(i), "warning")


def parse_history(body: dict[str, Any]) -> History:
    """The ``instructions``, ``input`` and ``tools`` of a (normalized) Responses request body.

    Example:
        >>> parse_history({"instructions": "Be brief.", "input": "Hi"}).messages[0].role
        'system'
    """
    r = _Reader()
    if body.get("instructions"):
        r.b.add("system", [TextPart(text=r.b.text(body["instructions"], -1, "instructions"))], -1)
    items = body.get("input")
    if isinstance(items, str):
        r.b.add("user", [TextPart(text=items)], -1)
    for i, m in enumerate(items_of(body, "input")):
        if not isinstance(m, dict) or m.get("malformed"):
            continue
        try:
            r.item(i, m)
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            r.b.unreadable(i, exc)
    r.flush()
    tools = [tool_info(t, "parameters") for t in body.get("tools") or () if isinstance(t, dict)]
    return r.b.history(tools, tool_choice=requested_choice(body), strict=strict_tools(body))


def strict_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The function tools in strict mode (the Responses API makes strict the default), by name."""
    out: dict[str, dict[str, Any]] = {}
    for t in body.get("tools") or ():
        if (isinstance(t, dict) and t.get("type") == "function" and t.get("strict", True) is not False
                and isinstance(t.get("parameters"), dict)):
            out[str(t.get("name"))] = t["parameters"]
    return out
