"""Chat Completions bodies made safe to read (see :mod:`agentnb.providers._shapes`): messages and calls are objects."""

from __future__ import annotations

from typing import Any

from .._shapes import Malformed, Walk, list_of, tools_list, walk_body

__all__ = ["normalize"]


def normalize(body: Any) -> tuple[dict[str, Any], list[Malformed]]:
    """A copy of a Chat Completions body the rules can read, and the values that had to be repaired."""
    w, out = walk_body("openai", body)
    if out is None:
        return {}, w.found
    out["messages"] = [_chat_message(w, m, i) for i, m in enumerate(list_of(w, body, "messages"))]
    tools_list(w, body, out)
    return out, w.found


def _chat_message(w: Walk, m: Any, i: int) -> dict[str, Any]:
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
