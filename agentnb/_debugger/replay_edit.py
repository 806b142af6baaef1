"""Replay this turn with edits, on the page: a model turn's request to edit, and the edit read back into a fork.

At a model turn's events (its ``ModelRequested``, fragments, ``TurnCompleted``) the card offers the request as
it was sent, written out as JSON a person edits: the system prompt, each message's text (a tool's result and an
assistant's calls are shown, not edited), the tool choice and the tools offered. :func:`request_edit` writes
that text (invisible characters as JSON escapes, as the page's other edits do); :func:`page_request` reads the
page's text back against the original into ``Run.fork``'s ``request=`` (only what changed), or a clear error;
:func:`replay_from_page` forks with it in the same widget (:meth:`.controller.Controller.branch`), and the
fork's lineage says "request edited" with the diff.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from .._messages import Message
from .._visible import visible
from ..events import ArgumentsMerged, ModelRequested, TextMerged, TurnCompleted
from ..exceptions import AgentnbError
from .timeline import Timeline

TURN_EVENTS = (ModelRequested, TextMerged, ArgumentsMerged, TurnCompleted)
"""The events whose card offers their turn's request to edit and replay."""

EDIT_CAP = 100_000
"""Characters of text the page is offered to edit at most (a result, arguments, a request); a larger edit is
made from code, and the page says how (the text would ride in a synced trait on every selection)."""


def capped(edit: dict[str, Any], code: str) -> dict[str, Any]:
    """``edit`` as it is, or, when its text is over :data:`EDIT_CAP`, without it and with ``too_large`` saying why."""
    size = len(edit["value"])
    if size <= EDIT_CAP:
        return edit
    return {**edit, "value": "", "too_large": f"{size:,} characters: too large to edit here (at most "
                                              f"{EDIT_CAP:,}); fork from code: {code}"}


def _request_seq(tl: Timeline, seq: int) -> int | None:
    for ev in reversed(tl.events[: seq + 1]):
        if isinstance(ev, ModelRequested):
            return ev.seq
    return None


def _original(tl: Timeline, req: int) -> dict[str, Any]:
    ev = tl.events[req]
    assert isinstance(ev, ModelRequested)
    messages: list[Message] = tl.messages_at(req)
    system = messages[0].text if messages and messages[0].role == "system" else None
    body = messages[1:] if system is not None else messages
    shown: list[dict[str, Any]] = []
    for m in body:
        item: dict[str, Any] = {"role": m.role}
        if m.role == "tool":
            item["results"] = [getattr(p, "name", "?") for p in m.parts]
        else:
            item["text"] = m.text
            if m.tool_calls:
                item["calls"] = [c.name for c in m.tool_calls]
        shown.append(item)
    choice = ev.tool_choice if ev.tool_choice is not None else (ev.settings or {}).get("tool_choice", "auto")
    return {"system": system, "messages": shown, "tool_choice": choice, "tools": list(ev.tools)}


def request_edit(tl: Timeline, seq: int) -> dict[str, Any]:
    """``{"seq", "kind": "request", "name", "value"}`` at a model turn's event ``seq`` (its request), or ``{}``.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> tl = Timeline(loop.start("Paris?").run().events)
        >>> edit = request_edit(tl, 2)  # the first turn's TurnCompleted: its request is event 1
        >>> edit["seq"], json.loads(edit["value"])["messages"], request_edit(tl, 0)
        (1, [{'role': 'user', 'text': 'Paris?'}], {})
    """
    if not len(tl) or not isinstance(tl.events[seq], TURN_EVENTS):
        return {}
    req = _request_seq(tl, seq)
    if req is None:
        return {}
    text = json.dumps(_original(tl, req), indent=2, ensure_ascii=False)
    return capped({"seq": req, "kind": "request", "name": f"turn {tl.events[req].turn}",
                   "value": visible(text, json=True)[0]}, f"run.fork({req}, request={{...}})")


def page_request(tl: Timeline, seq: int, text: str) -> dict[str, Any]:
    """The page's edited request text as ``Run.fork``'s ``request=``: only what differs from the request at ``seq``.

    Raises:
        AgentnbError: not JSON, not the request's shape (messages added, removed or moved), a tool's result or
            an assistant's calls edited, or nothing changed.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> tl = Timeline(loop.start("Paris?").run().events)
        >>> page_request(tl, 1, json.dumps({"system": None, "messages": [{"role": "user", "text": "Rome?"}],
        ...                                 "tool_choice": "auto", "tools": ["get_weather"]}))
        {'messages': {0: 'Rome?'}}
    """
    if not isinstance(tl.events[seq], ModelRequested):
        raise AgentnbError(f"event {seq} is not a model request")
    try:
        edited = json.loads(text)
    except ValueError as exc:
        raise AgentnbError(f"not JSON: {exc}") from None
    if not isinstance(edited, dict):
        raise AgentnbError("the request must be a JSON object (system, messages, tool_choice, tools)")
    original = _original(tl, seq)
    unknown = sorted(set(edited) - set(original))
    if unknown:
        raise AgentnbError(f"{', '.join(unknown)} cannot be edited here; the request has "
                           f"{', '.join(original)}")
    out: dict[str, Any] = {}
    if "system" in edited and edited["system"] != original["system"]:
        out["system"] = edited["system"]
    if "messages" in edited:
        texts = _texts(edited["messages"], original["messages"])
        if texts:
            out["messages"] = texts
    for key in ("tool_choice", "tools"):
        if key in edited and edited[key] != original[key]:
            out[key] = edited[key]
    if not out:
        raise AgentnbError("nothing was edited: change the system prompt, a message's text, the tool choice or "
                           "the tools, then replay")
    return out


def _texts(edited: Any, original: list[dict[str, Any]]) -> dict[int, str]:
    if not isinstance(edited, list) or len(edited) != len(original):
        raise AgentnbError(f"the request held {len(original)} messages: edit their text, do not add or remove any")
    out: dict[int, str] = {}
    for i, (new, old) in enumerate(zip(edited, original, strict=True)):
        if not isinstance(new, dict) or new.get("role") != old["role"]:
            raise AgentnbError(f"message {i} was a {old['role']} message: keep its role and place")
        for fixed in ("results", "calls"):
            if new.get(fixed, old.get(fixed)) != old.get(fixed):
                raise AgentnbError(f"message {i}'s {fixed} cannot be edited here (a result: Fork with this result "
                                   "on its ToolFinished; a call's arguments: on its CallParsed)")
        if "text" in new and "text" not in old:
            raise AgentnbError(f"message {i} is a tool's result: edit it with Fork with this result")
        if "text" in new and new["text"] != old["text"]:
            if not isinstance(new["text"], str):
                raise AgentnbError(f"message {i}'s text must be a string")
            out[i] = new["text"]
    return out


class _Page(Protocol):
    view: Any
    timeline: Timeline

    def branch(self, seq: int | None = None, *, go: bool = False, request: dict[str, Any] | None = None) -> Any: ...

    def refresh(self) -> None: ...


def replay_from_page(dbg: _Page, args: dict[str, Any]) -> None:
    """The page's "Replay this turn with edits": fork from before the request with the edit, shown in this widget."""
    dbg.view.error = ""
    seq = args.get("seq")
    try:
        if not isinstance(seq, int) or not 0 <= seq < len(dbg.timeline):
            raise AgentnbError(f"seq={seq!r}: no such event to replay")
        request = page_request(dbg.timeline, seq, str(args.get("request", "")))
        dbg.branch(seq, request=request, go=True)
    except (AgentnbError, ValueError) as exc:
        dbg.view.error = str(exc)
        dbg.refresh()


__all__ = ["TURN_EVENTS", "page_request", "replay_from_page", "request_edit"]
