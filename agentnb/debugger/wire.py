"""The wire view: one model request in each provider's own shape, one provider at a time.

The canonical request of a turn (the conversation as it stood, the tools offered, the settings) is rendered
by each wire adapter exactly as agentnb would send it. Switching between providers is how a workshop sees
what "provider-agnostic" hides: where the system prompt goes, how a call and its result are shaped and linked
(``tool_call_id``, ``call_id``, ``tool_use_id``, the function name), where continuation data travels.
:func:`.viewdata.wire_view` adds the raw response of the turn, on the tab of the API that produced it.
"""

from __future__ import annotations

from typing import Any

from ..events import BaseEvent, ToolInfo
from ..providers import anthropic, gemini, openai_chat, openai_responses
from .timeline import Timeline

ADAPTERS = (
    ("OpenAI Chat Completions", openai_chat),
    ("OpenAI Responses", openai_responses),
    ("Anthropic Messages", anthropic),
    ("Google Gemini", gemini),
)

WHERE = (
    ("system prompt", "messages[0], role system", "instructions", "system", "systemInstruction"),
    ("a tool call", "assistant tool_calls[] (id)", "function_call item (call_id)", "tool_use block (id)",
     "functionCall part (name)"),
    ("its result", "role tool message (tool_call_id)", "function_call_output item (call_id)",
     "tool_result block in the next user message (tool_use_id)", "functionResponse part (name)"),
)


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
        return adapter.render_request(messages, tools, model="<model>", **settings)
    except Exception as exc:  # show why a provider cannot take this request
        return f"cannot render for this provider: {type(exc).__name__}: {exc}"
