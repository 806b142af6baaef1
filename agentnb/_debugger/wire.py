"""The wire view: one model request in each provider's own shape, one provider at a time.

The canonical request of a turn (the conversation as it stood, the tools offered, the settings) is rendered
by each wire adapter exactly as agentnb would send it. Switching between providers is how a workshop sees
what "provider-agnostic" hides: where the system prompt goes, how a call and its result are shaped and linked
(``tool_call_id``, ``call_id``, ``tool_use_id``, the function name), where continuation data travels.
:func:`.viewdata.wire_view` adds the raw response of the turn, on the tab of the API that produced it, and
what really went over HTTP when an SDK model captured it (``turn.wire``, see
:mod:`agentnb.providers._capture`): :func:`sent` shapes it for the view, with a "Copy as curl" command
(:func:`curl`) whose credentials are shell variables, never values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from .._messages import ModelTurn
from .._redact import MASK
from .._request import split_options
from .._visible import visible
from ..events import BaseEvent, ModelRetried, RunFinished, ToolInfo
from ..providers._registry import WIRE_APIS
from .timeline import Timeline


class Adapter(NamedTuple):
    """What the wire view needs of a wire API: its tag on turns, and how it renders a request."""

    PROVIDER: str
    render_request: Any


ADAPTERS = tuple((api.title, Adapter(api.name, api.render_request)) for api in WIRE_APIS.values())
"""(title, adapter) for every wire API of :data:`agentnb.providers.WIRE_APIS`, in its order (the tabs)."""

WHERE = tuple(
    (label, *(api.where[k] for api in WIRE_APIS.values()))
    for k, label in enumerate(("system prompt", "a tool call", "its result"))
)
"""Rows of (what, where it goes in each wire API, in the order of :data:`ADAPTERS`)."""


def request_at(timeline: Timeline, seq: int) -> tuple[BaseEvent | None, list[Any], list[ToolInfo], dict[str, Any]]:
    """The model request in force at event ``seq``: the event, its messages, tools and settings."""
    events = timeline.events
    req = next((events[i] for i in range(min(seq, len(events) - 1), -1, -1)
                if events[i].type == "ModelRequested"), None)
    if req is None:
        return None, [], [], {}
    messages = timeline.messages_at(req.seq)[: req.message_count]  # type: ignore[attr-defined]
    offered = set(req.tools)  # type: ignore[attr-defined]
    tools = [t for t in timeline.state.tools if t.name in offered]
    return req, messages, tools, dict(req.settings)  # type: ignore[attr-defined]


def render(timeline: Timeline, seq: int) -> dict[str, Any]:
    """``{provider title: request body or an error message}`` for the request in force at ``seq``."""
    req = request_at(timeline, seq)[0]
    if req is None:
        return {}
    return {title: render_one(timeline, seq, title) for title, _ in ADAPTERS}


def render_one(timeline: Timeline, seq: int, title: str) -> Any:
    """One provider's request body (or why it cannot take the request) for the request in force at ``seq``."""
    req, messages, tools, settings = request_at(timeline, seq)
    return None if req is None else render_request_for(title, messages, tools, settings)


def render_request_for(title: str, messages: list[Any], tools: Sequence[Any], settings: dict[str, Any]) -> Any:
    """One provider's body for a request already found (:func:`request_at`), or why it cannot take it."""
    settings = {k: v for k, v in settings.items() if k in ("tool_choice", "max_tokens", "temperature",
                                                          "parallel_tool_calls")}
    adapter = dict(ADAPTERS)[title]
    try:
        options, settings = split_options(settings)  # the event records the options under their setting names
        return adapter.render_request(messages, tools, model="<model>", request_options=options, **settings)
    except Exception as exc:  # show why a provider cannot take this request
        return f"cannot render for this provider: {type(exc).__name__}: {exc}"


def where_rows(column: int, messages: list[Any], tools: Sequence[Any] = ()) -> list[list[str]]:
    """The "where does it go" rows of one API (``column``: 1-based in :data:`WHERE`), for this request only.

    The system prompt's row is left out when the request has no system message, and the rows of a tool call and
    its result when it offers no tool and its conversation holds no call.
    """
    has_system = any(getattr(m, "role", None) == "system" for m in messages)
    has_calls = bool(tools) or any(getattr(m, "tool_calls", None) for m in messages)
    return [[row[0], row[column]] for row in WHERE
            if (has_system or row[0] != "system prompt") and (has_calls or row[0] == "system prompt")]


_HOP = frozenset({"host", "content-length", "connection", "transfer-encoding", "accept-encoding"})
"""Headers curl writes itself (an ``accept-encoding`` copied over would print a compressed body)."""


def _title(provider: str) -> str:
    api = WIRE_APIS.get(provider)
    return api.title if api is not None else provider


def _env(provider: str, header: str) -> str:
    """The shell variable that stands for a masked credential under ``header`` (its API's key variable)."""
    api = WIRE_APIS.get(provider)
    names = getattr(api, "api_key_env", ()) if api is not None else ()
    if names and header.lower() in ("authorization", "x-api-key", "x-goog-api-key", "api-key"):
        return str(names[0])
    return "".join(c if c.isalnum() else "_" for c in header.upper())


def _shell(text: str, var: str) -> str:
    """``text`` in double quotes for a POSIX shell, each masked credential in it written as ``$var``."""
    parts = [p.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$")
             for p in text.split(MASK)]
    return '"' + f"${var}".join(parts) + '"'


def curl(wire: dict[str, Any], provider: str) -> str:
    r"""The captured request as a ``curl`` command; a masked credential is a shell variable of its API's key.

    Example:
        >>> print(curl({"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions", "stream": False,
        ...             "request_headers": {"authorization": "Bearer [REDACTED]", "host": "127.0.0.1:9"},
        ...             "request_body": '{"model": "gpt-4.1"}'}, "openai_chat"))
        curl -X POST "http://127.0.0.1:9/v1/chat/completions" \
          -H "authorization: Bearer $OPENAI_API_KEY" \
          --data-raw '{"model": "gpt-4.1"}'
    """
    lines = [f"curl -X {wire.get('method') or 'POST'} {_shell(str(wire.get('url', '')), _env(provider, 'api-key'))}"]
    if wire.get("stream"):
        lines[0] += " --no-buffer"
    for name, value in (wire.get("request_headers") or {}).items():
        if name.lower() not in _HOP:
            lines.append(f"-H {_shell(f'{name}: {value}', _env(provider, name))}")
    body = str(wire.get("request_body") or "")
    lines.append("--data-raw '" + body.replace("'", "'\\''") + "'")
    head = f"# {wire['truncated']}: this sends the part that was kept\n" if wire.get("truncated") else ""
    return head + " \\\n  ".join(lines)


def _pretty_text(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def sent(response: ModelTurn | None, *, in_flight: bool = False) -> dict[str, Any]:
    """What went over HTTP for one turn, for the wire view.

    Returns ``{"title", "api", "request", "response", "curl", "truncated", "note"}``; without a capture, only
    ``note`` says why (and ``request`` is empty).
    """
    out: dict[str, Any] = {"title": "", "api": "", "request": "", "response": "", "curl": "", "truncated": "",
                           "note": ""}
    if response is None:
        out["note"] = ("as sent: the answer has not arrived yet" if in_flight
                       else "as sent: this request got no answer, so no exchange was kept")
        return out
    wire = response.wire
    if not isinstance(wire, dict):
        out["note"] = ("as sent: nothing went over the wire: this turn was played by a ScriptedModel "
                       "(the rendering above is what each API would be sent)" if response.provider == "scripted"
                       else f"as sent: no HTTP exchange was kept for this turn ({response.provider}; the model's "
                            "capture_wire was off, or it does not capture)")
        return out
    out.update(_exchange(wire, response.provider))
    return out


def sent_failed(event: ModelRetried | RunFinished) -> dict[str, Any]:
    """What went over HTTP for a request that failed or broke (the capture its event keeps), as :func:`sent`."""
    wire = event.wire
    if not isinstance(wire, dict):
        return sent(None)
    provider = str(wire.get("provider") or "")
    out = _exchange(wire, provider)
    what = (f"broke mid-stream after {int(wire.get('frames_total') or 0)} frames"
            if isinstance(event, RunFinished) and wire.get("stream") else
            f"failed: {wire.get('method', '')} {wire.get('url', '')} → {wire.get('status') or 'no answer'}")
    out["title"] = f"as sent through {_title(provider)}, {what}"
    out["note"] = (f"attempt {event.attempt} failed; the loop asked again after {event.delay_s:g} s"
                   if isinstance(event, ModelRetried) else "this request ended the run")
    return out


def _exchange(wire: dict[str, Any], provider: str) -> dict[str, Any]:
    """A captured exchange as the wire view shows it: title, request, response, curl, truncation."""
    status = wire.get("status")
    headers = "\n".join(f"{k}: {v}" for k, v in (wire.get("request_headers") or {}).items())
    body_text = _pretty_text(str(wire.get("request_body") or ""))
    request = f"{wire.get('method', '')} {wire.get('url', '')}\n{headers}\n\n{body_text}"
    if wire.get("stream"):
        frames = wire.get("frames") or []
        lines = [f"+{float(ms):9.1f} ms  {text}" for ms, text in frames]
        kept, total = len(frames), int(wire.get("frames_total") or len(frames))
        count = f"{total} frames" if kept == total else f"{kept} of {total} frames kept"
        body = f"{count}, read at (ms after the request was sent):\n" + "\n".join(lines)
    else:
        body = _pretty_text(str(wire.get("response_body") or ""))
    response_headers = "\n".join(f"{k}: {v}" for k, v in (wire.get("response_headers") or {}).items())
    attempts = int(wire.get("attempts") or 1)
    return {
        "api": provider,
        "title": (f"as sent through {_title(provider)}: {wire.get('method', '')} {wire.get('url', '')} "
                  f"→ {status} in {float(wire.get('elapsed_ms') or 0):.1f} ms"
                  + (f" (the last of {attempts} HTTP attempts)" if attempts > 1 else "")),
        "request": visible(request, json=True)[0],
        "response": visible(f"HTTP {status}\n{response_headers}\n\n{body}", json=True)[0],
        "curl": visible(curl(wire, provider))[0],
        "truncated": str(wire.get("truncated") or ""),
        "note": "",
    }
