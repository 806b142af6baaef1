"""Replay a turn with an edited request: a fork from just before a model request, with that request changed.

``run.fork(at, request={...})`` names a model request (its ``ModelRequested`` event, or any event of its
turn) and what to change in it; the fork starts from the conversation that request held, so its first request
is the edited one. What may be changed:

- ``"system"``: the system prompt (``""`` or None: none). It stays for the fork's later requests too.
- ``"messages"``: ``{position: text}``, the text of a message of the conversation, counted from 0 after the
  system prompt (a user message, or an assistant's text beside its calls; a tool result is changed with
  ``results=``).
- ``"tool_choice"``: ``auto``, ``none``, ``required`` or ``{"name": tool}``, for the fork's first request; the
  ones after it go back to the loop's choice (its policy, its fixed choice, or ``auto``).
- ``"tools"``: the names of the tools offered (some of the loop's); a tool left out is neither offered nor run.

Everything else is a fork as any other (:mod:`.fork`): the same operation, store and effect policy, so a write
the parent made is never made again. A seekable model (a script, a cassette) is sought to the request the fork
starts at. The edit and its diff are kept in the fork's lineage (``RunStarted.settings["fork"]["request"]``
and ``["request_diff"]``), and a fork resumed in another process applies the edit again (:func:`edited_loop`).

Example:
    >>> import agentnb as anb
    >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    >>> run = loop.start("Weather in Paris?").run()
    >>> other = run.fork(1, request={"messages": {0: "Weather in Rome?"}, "tool_choice": "required"})
    >>> other.step().settings["fork"]["request_diff"]  # its first event, RunStarted
    ["message 0 (user): 'Weather in Paris?' -> 'Weather in Rome?'", "tool_choice: 'auto' -> 'required'"]
    >>> other.run().state.value
    'COMPLETED'
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._engine import check_tool_choice
from .._messages import Message, TextPart
from ..events import BaseEvent, ModelRequested
from ..exceptions import AgentnbError
from ..tools import ToolRegistry

if TYPE_CHECKING:
    from collections.abc import Callable

    from .loopspec import LoopSpec

KEYS = ("system", "messages", "tool_choice", "tools")
"""What an edited request may change."""


def request_at(events: list[BaseEvent], at: int | None) -> ModelRequested:
    """The model request ``at`` names: its ``ModelRequested``, or the last one at or before ``at`` (None: the last).

    Raises:
        AgentnbError: no model request at or before ``at``.
    """
    end = len(events) - 1 if at is None else at
    if not -len(events) <= end < len(events):
        raise AgentnbError(f"at={at}: the run has events 0 to {len(events) - 1}")
    found = next((e for e in reversed(events[: end % len(events) + 1]) if isinstance(e, ModelRequested)), None)
    if found is None:
        raise AgentnbError(f"no model request at or before event {at}: pick a model turn's event to replay it")
    return found


def check(request: Any, history: list[Message], loop: LoopSpec) -> dict[str, Any]:
    """The edit in canonical form (message positions as ints, the tool choice checked), or a clear error.

    Raises:
        AgentnbError: an unknown key, a position that is not a message one can edit, a text that is not text,
            a tool that is not the loop's, a tool choice that is not one.
    """
    if not isinstance(request, dict) or not request:
        raise AgentnbError(f"request={request!r}: give a dict with any of {', '.join(KEYS)}")
    unknown = sorted(set(map(str, request)) - set(KEYS))
    if unknown:
        raise AgentnbError(f"request: {', '.join(unknown)} cannot be edited; the keys are {', '.join(KEYS)}")
    out: dict[str, Any] = {}
    if "system" in request:
        system = request["system"]
        if system is not None and not isinstance(system, str):
            raise AgentnbError(f"request['system'] must be text (or None for none), got {type(system).__name__}")
        out["system"] = system or None
    if "messages" in request:
        out["messages"] = _check_messages(request["messages"], _body(history))
    names = loop.registry.names
    if "tools" in request:
        tools = request["tools"]
        if isinstance(tools, str) or not isinstance(tools, list | tuple) or not all(isinstance(t, str) for t in tools):
            raise AgentnbError(f"request['tools'] must be a list of tool names, got {tools!r}")
        strangers = [t for t in tools if t not in names]
        if strangers:
            raise AgentnbError(f"request['tools']: {', '.join(strangers)} is not a tool of this loop "
                               f"({', '.join(names) or 'none'})")
        out["tools"] = [n for n in names if n in tools]  # the registry's order
    if "tool_choice" in request:
        offered = out.get("tools", names)
        try:
            out["tool_choice"] = check_tool_choice(request["tool_choice"], offered)
        except ValueError as exc:
            raise AgentnbError(f"request['tool_choice']: {exc}") from None
    return out


def _check_messages(edits: Any, body: list[Message]) -> dict[int, str]:
    if not isinstance(edits, dict):
        raise AgentnbError(f"request['messages'] must map a message's position to its new text, got {edits!r}")
    out: dict[int, str] = {}
    for key, text in edits.items():
        try:
            at = int(key)
        except (TypeError, ValueError):
            raise AgentnbError(f"request['messages']: {key!r} is not a message's position") from None
        if not 0 <= at < len(body):
            raise AgentnbError(f"request['messages']: no message {at}; the request held messages 0 to {len(body) - 1} "
                               "(after the system prompt)")
        if body[at].role not in ("user", "assistant"):
            raise AgentnbError(f"request['messages']: message {at} is a {body[at].role} message; a tool's result is "
                               "replaced with results={call_id: value}")
        if not isinstance(text, str):
            raise AgentnbError(f"request['messages'][{at}] must be text, got {type(text).__name__}")
        out[at] = text
    return out


def _body(history: list[Message]) -> list[Message]:
    return history[1:] if history and history[0].role == "system" else history


def _with_text(m: Message, text: str) -> Message:
    """``m`` with its text parts replaced by one holding ``text``, where its first text part was."""
    parts: list[Any] = []
    placed = False
    for p in m.parts:
        if isinstance(p, TextPart):
            if not placed:
                parts.append(TextPart(text=text))
                placed = True
        else:
            parts.append(p)
    if not placed:
        parts.insert(0, TextPart(text=text))
    return replace(m, parts=tuple(parts))


def edited_history(history: list[Message], edit: dict[str, Any]) -> tuple[str | None, list[Message]]:
    """The system prompt and the messages after it, as the edited request holds them."""
    system = history[0].text if history and history[0].role == "system" else None
    body = list(_body(history))
    for at, text in (edit.get("messages") or {}).items():
        body[int(at)] = _with_text(body[int(at)], text)
    return (edit["system"] if "system" in edit else system), body


def edited_loop(loop: LoopSpec, edit: dict[str, Any], system: str | None) -> LoopSpec:
    """A copy of ``loop`` with the edit's system prompt, tools and first tool choice (``loop`` is untouched)."""
    out = copy.copy(loop)
    out.system = system
    config = loop.config
    if "tools" in edit:
        registry = ToolRegistry([t for t in loop.registry if t.name in edit["tools"]])
        out.registry = registry
        config = replace(config, registry=registry)
    if "tool_choice" in edit:
        config = replace(config, tool_choice=_first_choice(edit["tool_choice"], config.tool_choice,
                                                           config.settings.get("tool_choice")))
    out.config = config
    return out


def _first_choice(first: Any, policy: Callable[[Any], Any] | None, fixed: Any) -> Callable[[Any], Any]:
    """A tool-choice policy: ``first`` for the run's first request (turn 0), then the loop's own."""

    def choose(state: Any) -> Any:
        if state.turn == 0:
            return first
        if policy is not None:
            return policy(state)
        return fixed if fixed is not None else "auto"

    return choose


def diff(history: list[Message], edit: dict[str, Any], offered: list[str], choice: Any) -> list[str]:
    """What the edit changed, one line each (``old -> new``), for the lineage and the fork's card."""
    system, body = (history[0].text if history and history[0].role == "system" else None), _body(history)
    lines = []
    if "system" in edit and edit["system"] != system:
        lines.append(f"system: {system!r} -> {edit['system']!r}")
    for at, text in sorted((edit.get("messages") or {}).items()):
        if text != body[at].text:
            lines.append(f"message {at} ({body[at].role}): {body[at].text!r} -> {text!r}")
    if "tool_choice" in edit and edit["tool_choice"] != choice:
        lines.append(f"tool_choice: {choice if choice is not None else 'auto'!r} -> {edit['tool_choice']!r}")
    if "tools" in edit and edit["tools"] != offered:
        gone, added = [t for t in offered if t not in edit["tools"]], [t for t in edit["tools"] if t not in offered]
        lines.append("tools: " + ", ".join([*(f"-{t}" for t in gone), *(f"+{t}" for t in added)]))
    return lines or ["nothing changed: the request as it was"]


__all__ = ["KEYS", "check", "diff", "edited_history", "edited_loop", "request_at"]
