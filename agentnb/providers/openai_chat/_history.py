"""Chat Completions request bodies read back into canonical messages (the importer and the emulator's decoder).

``system``/``developer`` messages become system messages; an assistant's ``tool_calls`` become calls and
its ``refusal`` a refusal part; consecutive ``tool`` messages become one tool message of results (the
legacy ``function`` role and ``function_call`` are read too). A call without an ``id`` gets
``call_<item>_<n>``. The request's ``tool_choice`` and strict tools are read for the emulator.
"""

from __future__ import annotations

from typing import Any

from ..._messages import RefusalPart, TextPart
from .._history import Builder, dumps_value, items_of, tool_info
from .._wireapi import History

__all__ = ["parse_history", "requested_choice", "strict_tools"]


def parse_history(body: dict[str, Any]) -> History:
    """The ``messages`` and ``tools`` of a (normalized) Chat Completions request body.

    Example:
        >>> parse_history({"messages": [{"role": "user", "content": "Hi"}]}).messages[0].text
        'Hi'
    """
    b = Builder("messages")
    for i, m in enumerate(items_of(body, "messages")):
        if not isinstance(m, dict) or m.get("malformed"):
            continue
        try:
            _message(b, i, m)
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a shape no reader expected
            b.unreadable(i, exc)
    tools = [tool_info(t.get("function"), "parameters") for t in body.get("tools") or () if isinstance(t, dict)]
    return b.history(tools, tool_choice=requested_choice(body), strict=strict_tools(body))


def _message(b: Builder, i: int, m: dict[str, Any]) -> None:
    role = m.get("role")
    if role in ("system", "developer", "user"):
        text = b.text(m.get("content"), i, b.where(i, ".content"))
        b.add("user" if role == "user" else "system", [TextPart(text=text)], i)
    elif role == "assistant":
        b.add("assistant", _assistant(b, i, m) or [TextPart(text="")], i)
    elif role in ("tool", "function"):
        cid = str(m.get("tool_call_id") or "")
        if role == "function":  # legacy: answers the latest function_call of that name
            cid = next((c for c, n in reversed(b.names.items()) if n == m.get("name")), f"function_{i}")
        content = b.text(m.get("content"), i, b.where(i, ".content"))
        b.add("tool", [b.result(cid, content)], i, merge_results=True)


def _assistant(b: Builder, i: int, m: dict[str, Any]) -> list[Any]:
    parts: list[Any] = []
    text = b.text(m.get("content"), i, b.where(i, ".content"))
    if text:
        parts.append(TextPart(text=text))
    if m.get("refusal"):
        parts.append(RefusalPart(text=str(m["refusal"])))
    for j, tc in enumerate(m.get("tool_calls") or []):
        fn = tc.get("function") or {}
        raw = dumps_value(fn.get("arguments", "{}"))
        parts.append(b.call(str(tc.get("id") or f"call_{i}_{j}"), str(fn.get("name") or ""), raw, None, j))
    if m.get("function_call"):
        fc = m["function_call"]
        parts.append(b.call(f"function_{i}", str(fc.get("name", "")), dumps_value(fc.get("arguments", "{}")), None, 0))
    return parts


def requested_choice(body: dict[str, Any]) -> str | dict[str, str] | None:
    """The request's ``tool_choice`` in canonical form (``auto``, ``none``, ``required``, ``{"name": ...}``)."""
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        return {"any": "required"}.get(choice, choice)
    if not isinstance(choice, dict):
        return None
    fn = choice.get("function")
    name = choice.get("name") or (fn.get("name") if isinstance(fn, dict) else None)
    return {"name": name} if choice.get("type") == "function" and isinstance(name, str) and name else None


def strict_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools in strict mode (``function.strict: true``), by name: ``{name: parameters schema}``."""
    out: dict[str, dict[str, Any]] = {}
    for t in body.get("tools") or ():
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and fn.get("strict") is True and isinstance(fn.get("parameters"), dict):
            out[str(fn.get("name"))] = fn["parameters"]
    return out
