"""The wire view: one model request in each provider's own shape, one provider at a time.

The canonical request of a turn (the conversation as it stood, the tools offered, the settings) is rendered
by each wire adapter exactly as agentnb would send it. Switching between providers is how a workshop sees
what "provider-agnostic" hides: where the system prompt goes, how a call and its result are shaped and linked
(``tool_call_id``, ``call_id``, ``tool_use_id``, the function name), where continuation data travels.
:func:`.viewdata.wire_view` adds the raw response of the turn, on the tab of the API that produced it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..events import BaseEvent, ToolInfo
from ..providers.registry import WIRE_APIS
from ..request import split_options
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
    if req is None:
        return None
    settings = {k: v for k, v in settings.items() if k in ("tool_choice", "max_tokens", "temperature",
                                                          "parallel_tool_calls")}
    adapter = dict(ADAPTERS)[title]
    try:
        options, settings = split_options(settings)  # the event records the options under their setting names
        return adapter.render_request(messages, tools, model="<model>", request_options=options, **settings)
    except Exception as exc:  # show why a provider cannot take this request
        return f"cannot render for this provider: {type(exc).__name__}: {exc}"
