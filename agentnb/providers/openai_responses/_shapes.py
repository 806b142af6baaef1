"""Responses bodies made safe to read: ``input`` is a string or a list of objects.

See :mod:`agentnb.providers._shapes`.
"""

from __future__ import annotations

from typing import Any

from .._shapes import Malformed, Walk, tools_list, walk_body

__all__ = ["normalize"]


def normalize(body: Any) -> tuple[dict[str, Any], list[Malformed]]:
    """A copy of a Responses body the rules can read, and the values that had to be repaired."""
    w, out = walk_body("openai", body)
    if out is None:
        return {}, w.found
    items = body.get("input")
    if isinstance(items, list):
        out["input"] = [_responses_item(w, it, i) for i, it in enumerate(items)]
    elif items is not None and not isinstance(items, str):
        w.bad(["input"], -1, "a string or an array", items)
        out["input"] = []
    tools_list(w, body, out)
    return out, w.found


def _responses_item(w: Walk, it: Any, i: int) -> dict[str, Any]:
    d = w.obj(it, ["input", i], i)
    if d is None:
        return {"type": "malformed", "malformed": True}
    d = dict(d)
    for key in ("type", "role", "id", "call_id", "name"):
        w.ident(d, key, ["input", i], i)
    return d
