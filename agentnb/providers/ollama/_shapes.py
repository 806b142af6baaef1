"""``/api/chat`` bodies made safe to read: any JSON value in, the documented shape out, each repair a finding.

The Ollama server decodes a request into Go structs, so a value of the wrong JSON type is a 400 in the words
of Go's JSON decoder (``json: cannot unmarshal number into Go struct field Message.messages.content of type
string``); :func:`normalize` reports each such value that way and replaces it by a neutral one, so the rules
and :func:`~.history.parse_history` read every body without a type check. ``arguments`` are left as they
are: whether they are an object is a lint rule (``arguments_not_object``, with its fix).
"""

from __future__ import annotations

from typing import Any

from .._shapes import Malformed

__all__ = ["kind", "normalize"]

_GO_TYPES = {"string": "string", "an object": "api.Message", "an array": "[]api.ToolCall"}


def kind(value: Any) -> str:
    """The JSON kind of a value, in the words of Go's decoder errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    for cls, name in ((str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, cls):
            return name
    return "null" if value is None else "value"


class _Walk:
    def __init__(self) -> None:
        self.found: list[Malformed] = []

    def bad(self, pos: str, index: int, field_name: str, expected: str, value: Any) -> None:
        go = _GO_TYPES.get(expected, expected)
        self.found.append(Malformed(pos, index, f"{pos} is a {kind(value)}, not {expected}",
                                    f"json: cannot unmarshal {kind(value)} into Go struct field {field_name} of "
                                    f"type {go}", pos))


def _message(w: _Walk, m: Any, i: int) -> dict[str, Any]:
    pos = f"messages[{i}]"
    if not isinstance(m, dict):
        w.bad(pos, i, "ChatRequest.messages", "an object", m)
        return {"role": "user", "content": "", "malformed": True}
    d = dict(m)
    for key in ("role", "content", "thinking", "tool_name"):
        if d.get(key) is not None and not isinstance(d[key], str):
            w.bad(f"{pos}.{key}", i, f"Message.messages.{key}", "string", d[key])
            d[key] = "" if key != "role" else "user"
    if "tool_calls" in d and d["tool_calls"] is not None:
        calls = d["tool_calls"]
        if not isinstance(calls, list):
            w.bad(f"{pos}.tool_calls", i, "Message.messages.tool_calls", "an array", calls)
            calls = []
        clean = []
        for j, tc in enumerate(calls):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict):
                w.bad(f"{pos}.tool_calls[{j}]", i, "Message.messages.tool_calls", "an object", tc)
                continue
            fn = dict(fn)
            if fn.get("name") is not None and not isinstance(fn["name"], str):
                w.bad(f"{pos}.tool_calls[{j}].function.name", i, "ToolCallFunction.messages.tool_calls.function.name",
                      "string", fn["name"])
                fn["name"] = ""
            clean.append({**tc, "function": fn})
        d["tool_calls"] = clean
    return d


def normalize(body: Any) -> tuple[dict[str, Any], list[Malformed]]:
    """A copy of an ``/api/chat`` body whose values have the types the rules read, and what was repaired.

    Example:
        >>> clean, found = normalize({"messages": [{"role": "user", "content": 3}, "hi"]})
        >>> clean["messages"][0]["content"], [f.position for f in found]
        ('', ['messages[0].content', 'messages[1]'])
        >>> found[0].provider_message
        'json: cannot unmarshal number into Go struct field Message.messages.content of type string'
    """
    w = _Walk()
    if not isinstance(body, dict):
        w.bad("body", -1, "ChatRequest", "an object", body)
        return {"messages": []}, w.found
    out = dict(body)
    messages = body.get("messages")
    if messages is not None and not isinstance(messages, list):
        w.bad("messages", -1, "ChatRequest.messages", "an array", messages)
        messages = []
    out["messages"] = [_message(w, m, i) for i, m in enumerate(messages or ())]
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            w.bad("tools", -1, "ChatRequest.tools", "an array", tools)
            tools = []
        out["tools"] = [t for t in tools if isinstance(t, dict)]
        for j, t in enumerate(tools):
            if not isinstance(t, dict):
                w.bad(f"tools[{j}]", -1, "ChatRequest.tools", "an object", t)
    return out, w.found
