"""The OpenAI Agents SDK: ``RunResult.to_input_list()`` histories, and its traces through a tracing processor.

A history from ``to_input_list()`` is a Responses ``input`` list (messages, ``function_call`` and
``function_call_output`` items), so it goes through the Responses importer and is labelled
``openai_agents``. The SDK's traces are not OpenTelemetry: :class:`AgentsTraceCollector` is a
``TracingProcessor`` that turns its spans into GenAI-convention spans as they end (an agent span becomes
``invoke_agent``, a generation or response span ``chat`` with input and output messages, a function span
``execute_tool``), so :func:`agentnb.import_trace` reads them like any other trace.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..events import RunStarted
from ..otel import _conv as c
from ..otel._spans import SpanRecord
from ._base import History
from ._wire import Imported, from_openai_chat, from_openai_responses


def from_openai_agents(items: Any, *, model: str | None = None, run_id: str | None = None, ts: Any = None,
                       instructions: str | None = None) -> Imported:
    """Import ``RunResult.to_input_list()`` (Responses items, dicts or SDK objects, or the JSON text of them).

    Example:
        >>> out = from_openai_agents([
        ...     {"role": "user", "content": "Weather in Paris?"},
        ...     {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        ...     {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
        ... ])
        >>> out.format, [m.role for m in out.messages]
        ('openai_agents', ['user', 'assistant', 'tool'])
    """
    whole = History("openai_agents")  # what is wrong with the value as a whole (the items are the reader's)
    imported = from_openai_responses(whole.listed(items), instructions=instructions, model=model,
                                     run_id=run_id or "imported_openai_agents", ts=ts)
    imported.format = "openai_agents"
    imported.findings[:0] = whole.findings
    first = imported.transcript.events[0]
    assert isinstance(first, RunStarted)
    first.settings["imported_from"] = "openai_agents"  # the event was made just now, by this call
    first.model = "openai_agents:" + first.model.partition(":")[2]
    return imported


def _ns(iso: str | None) -> int:
    if not iso:
        return 0
    dt = datetime.fromisoformat(iso)
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000


def _messages(imported: Imported) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return c.messages_to_otel(imported.messages)


class AgentsTraceCollector:
    """A tracing processor of the OpenAI Agents SDK that keeps its spans as GenAI-convention spans.

    Example:
        >>> from agents import add_trace_processor  # doctest: +SKIP
        >>> collector = AgentsTraceCollector()  # doctest: +SKIP
        >>> add_trace_processor(collector)  # doctest: +SKIP
        >>> # ... Runner.run_sync(agent, "...") ...
        >>> transcripts = anb.import_trace(collector)  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.spans: list[SpanRecord] = []

    def get_finished_spans(self) -> list[SpanRecord]:
        """The spans collected so far (what :func:`agentnb.import_trace` reads)."""
        return list(self.spans)

    def clear(self) -> None:
        """Forget the spans collected so far."""
        self.spans.clear()

    # -- TracingProcessor --------------------------------------------------------------------------------

    def on_trace_start(self, trace: Any) -> None:
        """Nothing to do: spans carry their trace id."""

    def on_trace_end(self, trace: Any) -> None:
        """Nothing to do."""

    def on_span_start(self, span: Any) -> None:
        """Nothing to do: a span is read when it ends."""

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self) -> None:
        """Nothing is buffered."""

    def on_span_end(self, span: Any) -> None:
        """Keep the ended span, mapped to the conventions."""
        data = span.span_data
        kind = getattr(data, "type", "")
        attrs: dict[str, Any] = {}
        name = kind
        if kind == "agent":
            name = f"invoke_agent {data.name}"
            attrs = {c.OPERATION: "invoke_agent", c.AGENT_NAME: data.name, c.PROVIDER: "openai",
                     c.TOOL_DEFINITIONS: c.dumps([{"type": "function", "name": t} for t in data.tools or []])}
        elif kind in ("generation", "response"):
            attrs = self._chat(data, kind)
            name = f"chat {attrs.get(c.REQUEST_MODEL, '')}".strip()
        elif kind == "function":
            name = f"execute_tool {data.name}"
            attrs = {c.OPERATION: "execute_tool", c.TOOL_NAME: data.name, c.TOOL_TYPE: "function",
                     c.TOOL_ARGUMENTS: data.input, c.TOOL_RESULT: None if data.output is None else str(data.output)}
        error = span.error
        if error:
            attrs[c.ERROR_TYPE] = "error"
        self.spans.append(SpanRecord(
            trace_id=str(span.trace_id), span_id=str(span.span_id), parent_id=span.parent_id, name=name,
            start_ns=_ns(span.started_at), end_ns=_ns(span.ended_at),
            attributes={k: v for k, v in attrs.items() if v is not None}, status="ERROR" if error else "UNSET",
            status_message=str(error.get("message")) if isinstance(error, dict) else None,
        ))

    def _chat(self, data: Any, kind: str) -> dict[str, Any]:
        attrs: dict[str, Any] = {c.OPERATION: "chat", c.PROVIDER: "openai"}
        if kind == "generation":
            sent = from_openai_chat(list(data.input or []))
            answer = from_openai_chat(list(data.output or []))
            attrs[c.REQUEST_MODEL] = data.model
            usage = data.usage or {}
            inputs, outputs = usage.get("input_tokens"), usage.get("output_tokens")
        else:
            response = data.response
            items = data.input if isinstance(data.input, list) else (
                [{"role": "user", "content": data.input}] if data.input else [])
            sent = from_openai_responses(items, instructions=getattr(response, "instructions", None))
            answer = from_openai_responses(list(getattr(response, "output", None) or []))
            attrs[c.REQUEST_MODEL] = getattr(response, "model", None)
            attrs[c.RESPONSE_ID] = getattr(response, "id", None)
            usage_obj = getattr(response, "usage", None)
            inputs = getattr(usage_obj, "input_tokens", None)
            outputs = getattr(usage_obj, "output_tokens", None)
        system, sent_messages = _messages(sent)
        if system:
            attrs[c.SYSTEM_INSTRUCTIONS] = c.dumps(system)
        attrs[c.INPUT_MESSAGES] = c.dumps(sent_messages)
        out = [m for m in answer.messages if m.role == "assistant"]
        if out:
            merged = [p for m in out for p in m.parts]
            finish = "tool_calls" if any(p.kind == "tool_call" for p in merged) else "stop"
            attrs[c.OUTPUT_MESSAGES] = c.dumps([{"role": "assistant", "parts": [c.part_to_otel(p) for p in merged],
                                                 "finish_reason": c.finish_to_spec(finish)}])
        attrs[c.INPUT_TOKENS] = inputs
        attrs[c.OUTPUT_TOKENS] = outputs
        return attrs
