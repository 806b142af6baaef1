"""``generateContent`` bodies made safe to read (see :mod:`agentnb.providers._shapes`).

The service takes snake_case or camelCase names (protobuf JSON) and ``tools`` as one object or a list: both
are accepted and turned into the camelCase list form the rules read.
"""

from __future__ import annotations

from typing import Any

from .._shapes import Malformed, Walk, list_of, walk_body

__all__ = ["GEMINI_ALIASES", "normalize"]


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


def normalize(body: Any) -> tuple[dict[str, Any], list[Malformed]]:
    """A copy of a ``generateContent`` body the rules can read, and the values that had to be repaired."""
    w, start = walk_body("gemini", body)
    if start is None:
        return {}, w.found
    out = {GEMINI_ALIASES.get(k, k): v for k, v in start.items()}
    out["contents"] = [_gemini_content(w, c, i) for i, c in enumerate(list_of(w, out, "contents"))]
    tools = out.get("tools")
    if isinstance(tools, dict):  # the service takes one Tool object for the list
        tools = [tools]
    out["tools"] = [{GEMINI_ALIASES.get(k, k): v for k, v in t.items()} for t in w.objects(tools, ["tools"], -1)]
    for t in out["tools"]:
        t["functionDeclarations"] = w.objects(t.get("functionDeclarations"), ["tools", "functionDeclarations"], -1)
    if out.get("tools") == [] and "tools" not in start:
        del out["tools"]
    return out, w.found


def _gemini_content(w: Walk, c: Any, i: int) -> dict[str, Any]:
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
