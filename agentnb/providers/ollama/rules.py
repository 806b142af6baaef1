"""Lint rules for Ollama ``/api/chat`` histories, and the shape check that runs before them.

Theory of operation. The Ollama server decodes the body into Go structs, so a value of the wrong JSON type
(a ``content`` that is a number, ``arguments`` that are a string) is refused with a 400 naming the Go field
(``json: cannot unmarshal string into Go struct field ...``): those are *errors*. It does not check how
calls and results pair -- there are no call ids to check -- and renders whatever it gets into the model's
chat template. A result that answers no call, a call left without a result, or a ``tool_name`` naming no
call still reach the model, which then reads a conversation that makes no sense: those are *warnings*
(the emulator accepts them as the server does; ``agentnb.lint`` reports them, and ``fix=True`` repairs them).

Pairing follows the wire's binding rule (see :mod:`.wire`): the run of ``tool`` messages right after an
assistant message with ``tool_calls`` answers those calls in order. So:

======================= ========= ================================================================== ===========
code                    severity  what                                                               fix
======================= ========= ================================================================== ===========
``malformed``           error     a value of the wrong JSON type (:func:`normalize`)                 dropped
``bad_role``            warning   a role other than system, user, assistant, tool                    --
``arguments_not_object`` error    a call's ``arguments`` are not a JSON object                       ``{}``
``orphan_result``       warning   a tool message with no assistant call before it                    dropped
``extra_result``        warning   more tool messages than the assistant message has calls            dropped
``unanswered_call``     warning   fewer tool messages than calls before the conversation goes on     added
``tool_name_mismatch``  warning   a ``tool_name`` that names no call of the assistant message        renamed
======================= ========= ================================================================== ===========
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..._shapes import Malformed
from ...findings import INTERRUPTED, Change, Finding, Rule, View, fix_arguments, not_object

__all__ = ["RULES", "OllamaView", "normalize"]

ROLES = ("system", "user", "assistant", "tool")


# -- shapes ---------------------------------------------------------------------------------------------

_GO_TYPES = {"string": "string", "an object": "api.Message", "an array": "[]api.ToolCall"}


def _kind(value: Any) -> str:
    """The JSON kind of a value, in the words of Go's decoder errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    for kind, name in ((str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else "value"


class _Walk:
    def __init__(self) -> None:
        self.found: list[Malformed] = []

    def bad(self, pos: str, index: int, field_name: str, expected: str, value: Any) -> None:
        go = _GO_TYPES.get(expected, expected)
        self.found.append(Malformed(pos, index, f"{pos} is a {_kind(value)}, not {expected}",
                                    f"json: cannot unmarshal {_kind(value)} into Go struct field {field_name} of "
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


# -- the view: messages paired by position ---------------------------------------------------------------


@dataclass(slots=True)
class _Turn:
    """An assistant message with calls, and the run of tool messages after it."""

    index: int
    calls: list[tuple[int, str]]
    """(call position, name)."""
    results: list[int] = field(default_factory=list)
    """The indices of the tool messages that follow it."""
    ended_by: int | None = None
    """The index of the message that ended the run (None: the history ends)."""


class OllamaView(View):
    """An ``/api/chat`` body as the rules read it, with its call turns computed once."""

    list_key = "messages"

    @cached_property
    def turns(self) -> list[_Turn]:
        """Each assistant message with calls and the tool messages that answer it, in order."""
        out: list[_Turn] = []
        current: _Turn | None = None
        for i, m in enumerate(self.items):
            role = m.get("role")
            if role == "tool" and current is not None:
                current.results.append(i)
                continue
            if current is not None:
                current.ended_by = i
                current = None
            calls = m.get("tool_calls") or []
            if role == "assistant" and calls:
                current = _Turn(i, [(j, str(tc["function"].get("name") or "")) for j, tc in enumerate(calls)])
                out.append(current)
        return out

    @cached_property
    def orphans(self) -> list[int]:
        """Tool messages with no assistant call before them in their run."""
        answered = {r for t in self.turns for r in t.results}
        return [i for i, m in enumerate(self.items) if m.get("role") == "tool" and i not in answered]


def _bad_role(view: OllamaView, i: int, m: dict[str, Any]) -> Iterator[Finding]:
    if not m.get("malformed") and m.get("role") not in ROLES:
        yield Finding("bad_role", f"messages[{i}].role", i, f"role {m.get('role')!r} is not one of {', '.join(ROLES)}",
                      "", "warning")


def _arguments(view: OllamaView, i: int, m: dict[str, Any]) -> Iterator[Finding]:
    for j, tc in enumerate(m.get("tool_calls") or ()):
        args = tc["function"].get("arguments")
        if args is not None and not isinstance(args, dict):
            yield not_object(i, j, f"messages[{i}].tool_calls[{j}].function.arguments", args,
                             f"json: cannot unmarshal {_kind(args)} into Go struct field "
                             "ToolCallFunction.messages.tool_calls.function.arguments of type "
                             "api.ToolCallFunctionArguments", None)


def _orphans(view: OllamaView) -> Iterator[Finding]:
    for i in view.orphans:
        name = view.items[i].get("tool_name") or "?"
        yield Finding("orphan_result", f"messages[{i}]", i,
                      f"the tool message ({name}) follows no assistant message with tool_calls", "", "warning")


def _extra(view: OllamaView) -> Iterator[Finding]:
    for t in view.turns:
        for i in t.results[len(t.calls):]:
            yield Finding("extra_result", f"messages[{i}]", i,
                          f"more tool messages than the {len(t.calls)} call(s) of messages[{t.index}]", "", "warning")


def _unanswered(view: OllamaView) -> Iterator[Finding]:
    for t in view.turns:
        if t.ended_by is None:  # the history ends with the calls (or their results): a pending turn
            continue
        for j, name in t.calls[len(t.results):]:
            yield Finding("unanswered_call", f"messages[{t.index}].tool_calls[{j}]", t.index,
                          f"call {j} ({name}) has no tool message before messages[{t.ended_by}]", "", "warning",
                          part=j)


def _mismatch(view: OllamaView) -> Iterator[Finding]:
    for t in view.turns:
        names = {name for _, name in t.calls}
        for (j, name), i in zip(t.calls, t.results, strict=False):
            given = view.items[i].get("tool_name")
            if given and given not in names:
                yield Finding("tool_name_mismatch", f"messages[{i}].tool_name", i,
                              f"tool_name {given!r} names no call of messages[{t.index}] (in its place: {name!r})",
                              "", "warning", part=j)


# -- fixes (each acts on its own codes; in-place ones first, then the one that moves positions) ----------


def _fix_mismatch(items: list[Any], findings: list[Finding]) -> list[Change]:
    view = OllamaView({"messages": items}, None)
    names = {i: name for t in view.turns for (_, name), i in zip(t.calls, t.results, strict=False)}
    changes = []
    for f in findings:
        if f.code == "tool_name_mismatch" and f.index in names:
            items[f.index]["tool_name"] = names[f.index]
            changes.append(Change("replaced", f.position, f"tool_name by {names[f.index]!r}, the call at its place"))
    return changes


def _fix_pairing(items: list[Any], findings: list[Finding]) -> list[Change]:
    codes = {"orphan_result", "extra_result", "unanswered_call"}
    if not any(f.code in codes for f in findings):
        return []
    view = OllamaView({"messages": items}, None)
    drop = set(view.orphans) | {i for t in view.turns for i in t.results[len(t.calls):]}
    add: dict[int, list[dict[str, Any]]] = {}
    for t in view.turns:
        if t.ended_by is not None:
            add[t.ended_by] = [{"role": "tool", "content": INTERRUPTED, "tool_name": name}
                               for _, name in t.calls[len(t.results):]]
    changes = [Change("dropped", f"messages[{i}]", "a tool message that answers no call") for i in sorted(drop)]
    out: list[Any] = []
    for i, m in enumerate(items):
        for extra in add.get(i, ()):
            changes.append(Change("added", f"messages[{len(out)}]",
                                  f"an 'interrupted' tool message for {extra['tool_name']!r}"))
            out.append(extra)
        if i not in drop:
            out.append(m)
    items[:] = out
    return changes


def _locate(items: list[Any], i: int, j: int | None) -> Any:
    return items[i]["tool_calls"][j or 0]["function"]


RULES: tuple[Rule, ...] = (
    Rule("bad_role", "a role Ollama's templates do not know (system, user, assistant, tool)", _bad_role, each=True),
    Rule("arguments_not_object", "tool_calls[].function.arguments must be a JSON object (the server's Go struct)",
         _arguments, each=True, fix=fix_arguments(_locate, "arguments", {})),
    Rule("tool_name_mismatch", "a tool message's tool_name names a call of the assistant message it answers",
         _mismatch, fix=_fix_mismatch),
    Rule("orphan_result", "a tool message follows an assistant message with tool_calls", _orphans),
    Rule("extra_result", "no more tool messages than calls", _extra),
    # One fix repairs the pairing as a whole (drops orphan and extra results, adds the missing ones): it moves
    # positions, so it runs after the in-place fixes (moves=True).
    Rule("unanswered_call", "every call has its tool message before the conversation goes on", _unanswered,
         fix=_fix_pairing, moves=True),
)
"""The rules, in the order their findings are reported."""

