"""Messages bodies made safe to read (see :mod:`agentnb.providers._shapes`): messages and blocks are objects."""

from __future__ import annotations

from typing import Any

from .._shapes import Malformed, Walk, list_of, tools_list, walk_body

__all__ = ["normalize"]


def normalize(body: Any) -> tuple[dict[str, Any], list[Malformed]]:
    """A copy of a Messages body the rules can read, and the values that had to be repaired."""
    w, out = walk_body("anthropic", body)
    if out is None:
        return {}, w.found
    out["messages"] = [_anthropic_message(w, m, i) for i, m in enumerate(list_of(w, body, "messages"))]
    if body.get("thinking") is not None and not isinstance(body.get("thinking"), dict):
        w.bad(["thinking"], -1, "an object", body["thinking"])
        out["thinking"] = None
    tools_list(w, body, out)
    return out, w.found


def _anthropic_message(w: Walk, m: Any, i: int) -> dict[str, Any]:
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
