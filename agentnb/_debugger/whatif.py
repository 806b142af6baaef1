"""What-ifs on the page: the call result or arguments the selected event offers to edit, and the edit read back.

The debugger's Fork shows the fork in the same widget (:meth:`.controller.Controller.branch`); before that, a
person may edit what a call got (its result, at a ``ToolFinished``) or what the model asked for (its
arguments, at a ``CallParsed``, ``CallValidated`` or ``ApprovalRequested``). :func:`fork_edit` says what
the page offers at an event, written out as it is (invisible characters as JSON escapes);
:func:`page_edit` reads the page's text back into the ``results=`` or ``arguments=`` of a fork, or a clear
error for the page.
"""

from __future__ import annotations

import json
from typing import Any

from .._visible import visible
from ..events import ApprovalRequested, CallParsed, CallValidated, ToolFinished
from .render import jsonable
from .replay_edit import capped, request_edit
from .timeline import Timeline


def fork_edit(tl: Timeline, seq: int) -> dict[str, Any]:
    """``{"seq", "call_id", "kind": "result" | "arguments", "name", "value"}`` at event ``seq``, or ``{}``.

    At a model turn's events it is the turn's request instead (``kind: "request"``, see :mod:`.replay_edit`).

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> tl = Timeline(loop.start("Paris?").run().events)
        >>> done = next(e.seq for e in tl.events if e.type == "ToolFinished")
        >>> fork_edit(tl, done)["kind"], fork_edit(tl, 1)["kind"], fork_edit(tl, 0)
        ('result', 'request', {})
    """
    if not len(tl):
        return {}
    ev = tl.events[seq]
    if isinstance(ev, ToolFinished):
        value = ev.value if ev.value is not None else ev.content
        text = value if isinstance(value, str) else json.dumps(jsonable(value), indent=2, ensure_ascii=False)
        return capped({"seq": seq, "call_id": ev.call_id, "kind": "result", "name": visible(ev.name)[0],
                       "value": visible(text, json=not isinstance(value, str))[0]},
                      f"run.fork({seq}, results={{{ev.call_id!r}: ...}})")
    if isinstance(ev, CallParsed | CallValidated | ApprovalRequested):
        args = tl.call_arguments(seq, ev.call_id)
        if args is None:
            args = getattr(ev, "arguments", None)
        if args is None:
            return {}
        text = json.dumps(jsonable(args), indent=2, ensure_ascii=False)
        return capped({"seq": seq, "call_id": ev.call_id, "kind": "arguments", "name": visible(ev.name)[0],
                       "value": visible(text, json=True)[0]}, f"run.fork({seq}, arguments={{{ev.call_id!r}: {{...}}}})")
    return request_edit(tl, seq)  # a model turn's event: its request, to replay with edits


def page_edit(args: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]] | None, str]:
    """The page's ``{"call_id", "result" | "arguments"}`` as a fork's ``(results, arguments, error)``.

    A result is JSON or, failing that, plain text; arguments must be a JSON object.

    Example:
        >>> page_edit({"call_id": "c1", "result": "snow"})
        ({'c1': 'snow'}, None, '')
        >>> page_edit({"call_id": "c1", "arguments": "[1]"})[2]
        'the arguments must be a JSON object'
    """
    call_id = args.get("call_id")
    if not isinstance(call_id, str):
        return None, None, ""
    if "result" in args:
        text = str(args["result"])
        try:
            return {call_id: json.loads(text)}, None, ""
        except ValueError:
            return {call_id: text}, None, ""  # plain text is a result too
    if "arguments" in args:
        parsed, error = approval_edit(str(args["arguments"]))  # read as text, as the page's editor holds it
        return None, ({call_id: parsed} if parsed is not None else None), error
    return None, None, ""


def approval_edit(arguments: Any) -> tuple[dict[str, Any] | None, str]:
    """The arguments a person edited in an approval card (JSON text, or an object), or a clear error for the page.

    ``None`` (nothing edited) approves the call as the model asked for it.

    Example:
        >>> approval_edit('{"order_id": 42}'), approval_edit(None), approval_edit("[1]")[1]
        (({'order_id': 42}, ''), (None, ''), 'the arguments must be a JSON object')
        >>> approval_edit("{oops")[1]
        'not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)'
    """
    if arguments is None:
        return None, ""
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(parsed, dict):
        return None, "the arguments must be a JSON object"
    return parsed, ""
