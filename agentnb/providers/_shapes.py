"""Request bodies of any shape made safe to read: what is malformed becomes a finding, never an exception.

Theory of operation. The history rules (:mod:`agentnb._lint`), the importers and the emulator read request
bodies that come from anywhere: a user's own list, a log, a hostile client. The rules are written for the
documented shapes (a message is an object, ``tool_calls`` is a list of objects, a Gemini part is an
object). Each wire API's ``normalize`` (``agentnb/providers/<api>/shapes.py``, found as
``WIRE_APIS[name].normalize``) walks a body once with the helpers here, *before* any rule runs, and returns

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

__all__ = ["Malformed", "Walk", "list_of", "tools_list", "walk_body"]

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


class Walk:
    """One pass over a body: the repairs made, as :class:`Malformed` records in the service's words.

    ``style`` picks the words: ``openai`` (OpenAI's ``Invalid type for ...``), ``anthropic`` (pydantic's
    ``Input should be ...``) or ``gemini`` (protobuf's ``Invalid value at ...``).
    """

    def __init__(self, style: str) -> None:
        self.provider = style
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


def list_of(w: Walk, body: dict[str, Any], key: str) -> list[Any]:
    """The list under ``key`` (absent: empty; not a list: reported, and empty)."""
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        w.bad([key], -1, "an array", value)
        return []
    return value


def walk_body(style: str, body: Any) -> tuple[Walk, dict[str, Any] | None]:
    """Start a walk: the body as a dict copy, or None (reported) when it is not an object."""
    w = Walk(style)
    if not isinstance(body, dict):
        w.bad(["body"], -1, "an object", body)
        return w, None
    return w, dict(body)


def tools_list(w: Walk, body: dict[str, Any], out: dict[str, Any]) -> None:
    """``tools`` as a list of objects, when the body has them (OpenAI and Anthropic)."""
    if body.get("tools") is not None:
        out["tools"] = w.objects(body.get("tools"), ["tools"], -1)
