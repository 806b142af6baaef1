"""Request bodies of any shape made safe to read: what is malformed becomes a finding, never an exception.

Theory of operation. The history rules (:mod:`agentnb.lint`), the importers and the emulator read request
bodies that come from anywhere: a user's own list, a log, a hostile client. The rules are written for the
documented shapes (a message is an object, ``tool_calls`` is a list of objects, a Gemini part is an
object). :func:`normalize` walks a body once, *before* any rule runs, and returns

- a copy in which every value the rules read has the type they expect: a message that is not an object
  becomes an empty one of a neutral role, a list that is not a list becomes an empty list, a call id that
  is not a string becomes its JSON text (a list as an id would otherwise be unhashable), a block that is
  not an object is dropped;
- a :class:`Malformed` record for each of those repairs, with the position and the message the service
  answers with (each service refuses such a body with a 400; the texts follow their validation errors).

Shapes the services *tolerate* are accepted as they are and converted, not reported: Gemini takes
``tools`` as one object or a list, and snake_case or camelCase field names (``function_call`` and
``functionCall``, ``function_declarations`` and ``functionDeclarations``); every service ignores the
fields it does not know.

Each service refuses a JSON value at the wrong place with its own validation error:

- OpenAI: ``Invalid type for 'messages[0]': expected an object, but got a string instead.``
- Anthropic: ``messages.0.content.0: Input should be a valid dictionary or object to extract fields from``
- Gemini: ``Invalid value at 'contents[0].parts[0]' (type.googleapis.com/google.ai.generativelanguage.v1beta.
  Part), "hello"``
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["GEMINI_ALIASES", "Malformed", "normalize"]

GEMINI_ALIASES = {
    "function_call": "functionCall",
    "function_response": "functionResponse",
    "thought_signature": "thoughtSignature",
    "function_declarations": "functionDeclarations",
    "system_instruction": "systemInstruction",
    "inline_data": "inlineData",
    "file_data": "fileData",
    "parameters_json_schema": "parametersJsonSchema",
}
"""The snake_case names Gemini accepts for the camelCase fields the rules read (protobuf JSON takes both)."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """One value of the wrong JSON type: where, and what the service answers."""

    position: str
    index: int
    message: str
    provider_message: str
    param: str | None = None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


class _Walk:
    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.found: list[Malformed] = []

    def bad(self, path: list[Any], index: int, expected: str, value: Any) -> None:
        pos = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if k else p) for k, p in enumerate(path))
        got = _kind(value)
        if self.provider == "anthropic":
            dotted = ".".join(str(p) for p in path)
            text = (f"{dotted}: Input should be a valid dictionary or object to extract fields from" if
                    expected == "an object" else f"{dotted}: Input should be a valid {expected.split()[-1]}")
        elif self.provider == "gemini":
            text = f"Invalid value at '{pos}', {json.dumps(value)[:80] if _jsonable(value) else got}"
        else:
            text = f"Invalid type for '{pos}': expected {expected}, but got {_article(got)} instead."
        self.found.append(Malformed(pos, index, f"{pos} is {_article(got)}, not {expected}", text, pos))

    def obj(self, value: Any, path: list[Any], index: int) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        self.bad(path, index, "an object", value)
        return None

    def objects(self, value: Any, path: list[Any], index: int) -> list[dict[str, Any]]:
        """A list of objects (a value that is not a list, and entries that are not objects, reported)."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.bad(path, index, "an array", value)
            return []
        out = []
        for j, v in enumerate(value):
            if isinstance(v, dict):
                out.append(v)
            else:
                self.bad([*path, j], index, "an object", v)
        return out

    def ident(self, d: dict[str, Any], key: str, path: list[Any], index: int) -> None:
        """Ids and names are read as strings (hashable): a number is kept as its text, anything else reported."""
        v = d.get(key)
        if v is None or isinstance(v, str):
            return
        if isinstance(v, int | float) and not isinstance(v, bool):
            d[key] = json.dumps(v)
            return
        self.bad([*path, key], index, "a string", v)
        d[key] = None


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _article(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def normalize(provider: str, body: Any) -> tuple[dict[str, Any], list[Malformed]]:
    """A copy of ``body`` the rules can read without a type check, and what had to be repaired.

    Example:
        >>> clean, found = normalize("anthropic", {"messages": [{"role": "user", "content": ["hello"]}]})
        >>> clean["messages"]
        [{'role': 'user', 'content': []}]
        >>> found[0].provider_message
        'messages.0.content.0: Input should be a valid dictionary or object to extract fields from'
    """
    w = _Walk(provider)
    if not isinstance(body, dict):
        w.bad(["body"], -1, "an object", body)
        return {}, w.found
    out = dict(body)
    if provider == "openai_chat":
        out["messages"] = [_chat_message(w, m, i) for i, m in enumerate(_list(w, body, "messages"))]
    elif provider == "openai_responses":
        items = body.get("input")
        if isinstance(items, list):
            out["input"] = [_responses_item(w, it, i) for i, it in enumerate(items)]
        elif items is not None and not isinstance(items, str):
            w.bad(["input"], -1, "a string or an array", items)
            out["input"] = []
    elif provider == "anthropic":
        out["messages"] = [_anthropic_message(w, m, i) for i, m in enumerate(_list(w, body, "messages"))]
        if body.get("thinking") is not None and not isinstance(body.get("thinking"), dict):
            w.bad(["thinking"], -1, "an object", body["thinking"])
            out["thinking"] = None
    elif provider == "gemini":
        out = {GEMINI_ALIASES.get(k, k): v for k, v in body.items()}
        out["contents"] = [_gemini_content(w, c, i) for i, c in enumerate(_list(w, out, "contents"))]
        tools = out.get("tools")
        if isinstance(tools, dict):  # the service takes one Tool object for the list
            tools = [tools]
        out["tools"] = [{GEMINI_ALIASES.get(k, k): v for k, v in t.items()} for t in w.objects(tools, ["tools"], -1)]
        for t in out["tools"]:
            t["functionDeclarations"] = w.objects(t.get("functionDeclarations"), ["tools", "functionDeclarations"], -1)
        if out.get("tools") == [] and "tools" not in body:
            del out["tools"]
    if provider != "gemini" and body.get("tools") is not None:
        out["tools"] = w.objects(body.get("tools"), ["tools"], -1)
    return out, w.found


def _list(w: _Walk, body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        w.bad([key], -1, "an array", value)
        return []
    return value


def _chat_message(w: _Walk, m: Any, i: int) -> dict[str, Any]:
    d = w.obj(m, ["messages", i], i)
    if d is None:
        return {"role": None, "content": None, "malformed": True}
    d = dict(d)
    w.ident(d, "role", ["messages", i], i)
    w.ident(d, "tool_call_id", ["messages", i], i)
    if "tool_calls" in d:
        calls = []
        for j, tc in enumerate(w.objects(d.get("tool_calls"), ["messages", i, "tool_calls"], i)):
            tc = dict(tc)
            w.ident(tc, "id", ["messages", i, "tool_calls", j], i)
            fn = tc.get("function")
            if fn is not None and not isinstance(fn, dict):
                w.bad(["messages", i, "tool_calls", j, "function"], i, "an object", fn)
                fn = {}
            fn = dict(fn or {})
            w.ident(fn, "name", ["messages", i, "tool_calls", j, "function"], i)
            tc["function"] = fn
            calls.append(tc)
        d["tool_calls"] = calls
    return d


def _responses_item(w: _Walk, it: Any, i: int) -> dict[str, Any]:
    d = w.obj(it, ["input", i], i)
    if d is None:
        return {"type": "malformed", "malformed": True}
    d = dict(d)
    for key in ("type", "role", "id", "call_id", "name"):
        w.ident(d, key, ["input", i], i)
    return d


def _anthropic_message(w: _Walk, m: Any, i: int) -> dict[str, Any]:
    d = w.obj(m, ["messages", i], i)
    if d is None:
        return {"role": None, "content": [], "malformed": True}
    d = dict(d)
    w.ident(d, "role", ["messages", i], i)
    content = d.get("content")
    if not isinstance(content, str):
        blocks = []
        for j, b in enumerate(w.objects(content, ["messages", i, "content"], i)):
            b = dict(b)
            for key in ("type", "id", "tool_use_id", "name"):
                w.ident(b, key, ["messages", i, "content", j], i)
            blocks.append(b)
        d["content"] = blocks
    return d


def _gemini_content(w: _Walk, c: Any, i: int) -> dict[str, Any]:
    d = w.obj(c, ["contents", i], i)
    if d is None:
        return {"role": "user", "parts": [], "malformed": True}
    d = dict(d)
    w.ident(d, "role", ["contents", i], i)
    parts = []
    for j, p in enumerate(w.objects(d.get("parts"), ["contents", i, "parts"], i)):
        p = {GEMINI_ALIASES.get(k, k): v for k, v in p.items()}
        for key in ("functionCall", "functionResponse"):
            if key in p:
                inner = p[key]
                if not isinstance(inner, dict):
                    w.bad(["contents", i, "parts", j, key], i, "an object", inner)
                    inner = {}
                inner = dict(inner)
                for k in ("id", "name"):
                    w.ident(inner, k, ["contents", i, "parts", j, key], i)
                p[key] = inner
        if "thoughtSignature" in p and not isinstance(p["thoughtSignature"], str | None):
            w.bad(["contents", i, "parts", j, "thoughtSignature"], i, "a string", p["thoughtSignature"])
            p["thoughtSignature"] = None
        parts.append(p)
    d["parts"] = parts
    return d
