"""A run as OpenTelemetry spans, live (an event listener) or after the fact (the same listener over a log).

Theory of operation. :class:`SpanWriter` is called with each event of one run, in order. It folds the
events into its own :class:`~agentnb._engine.RunState` (the fold is the one interpretation of the log, so the
request it describes is the request the run sent) and opens and closes spans at the events' own timestamps:

- ``invoke_agent {agent}`` (INTERNAL) from ``RunStarted`` to ``RunFinished``;
- ``chat {model}`` (CLIENT) from each ``ModelRequested`` to its ``TurnCompleted``, retries as span events;
- ``execute_tool {tool}`` (INTERNAL) from ``ToolStarted`` to ``ToolFinished``; a call answered without
  running (rejected, denied, skipped, a submitted client result) gets a span at the event that answered it,
  with ``agentnb.call.outcome`` saying which.

Because every time comes from the events, a live export (``Loop(tracer_provider=...)``) and an export of
the saved transcript (:func:`export`) write the same spans. Message content (prompts, answers, tool
arguments and results, tool definitions) is written only when asked for, as the conventions want it
opt-in: ``include_content=True`` or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. Every
string attribute passes through :func:`agentnb._redact.redact_text` first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._engine import RunState
from .._gc import gc_paused
from .._messages import Message
from .._redact import redact_text
from .._states import LoopState
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    ArgumentsMerged,
    BaseEvent,
    CallRejected,
    CompressionApplied,
    GuardTripped,
    ModelRequested,
    ModelRetried,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
)
from . import _conv as c

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from .._run import Run
    from .._transcript import Transcript

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_ERROR_STATES = frozenset({LoopState.FAILED, LoopState.INCOMPLETE, LoopState.CANCELLED})


def ns(ts: datetime) -> int:
    """Nanoseconds since the epoch, exactly (a float would round the microseconds)."""
    return ((ts - _EPOCH) // _MICRO) * 1000


def _content_default() -> bool:
    return os.environ.get(_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


class Tracing:
    """Where a run's spans go and what they hold; pass it (or a bare tracer provider) to ``Loop``.

    Args:
        tracer_provider: an ``opentelemetry.sdk.trace.TracerProvider`` (None: the global one).
        include_content: write prompts, answers, tool arguments and results (opt-in in the conventions;
            default from ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
        agent_name: ``gen_ai.agent.name`` of the invocation spans.

    Example:
        >>> import agentnb as anb
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        >>> spans = InMemorySpanExporter()
        >>> provider = TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(spans))
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"),
        ...                 tracer_provider=anb.otel.Tracing(provider, include_content=True))
        >>> _ = loop.start("Weather in Paris?").run()
        >>> [s.name for s in spans.get_finished_spans()]
        ['chat story:weather', 'execute_tool get_weather', 'chat story:weather', 'invoke_agent agentnb']
    """

    def __init__(self, tracer_provider: TracerProvider | None = None, *, include_content: bool | None = None,
                 agent_name: str = "agentnb") -> None:
        self.tracer_provider = tracer_provider
        self.include_content = _content_default() if include_content is None else include_content
        self.agent_name = agent_name

    def tracer(self) -> Tracer:
        """The tracer spans are made with."""
        from opentelemetry import trace

        from .._version import __version__

        return trace.get_tracer("agentnb", __version__, tracer_provider=self.tracer_provider)

    def attach(self, run: Run) -> SpanWriter:
        """Write ``run``'s spans as its events happen (call before the run's first step)."""
        writer = SpanWriter(self)
        run.on_event(writer)
        return writer

    def __repr__(self) -> str:
        return f"<agentnb.otel.Tracing content={self.include_content} agent={self.agent_name!r}>"


def as_tracing(value: Any) -> Tracing:
    """A :class:`Tracing` from itself or from a tracer provider."""
    return value if isinstance(value, Tracing) else Tracing(value)


class SpanWriter:
    """An event listener that writes one run's spans; call it with each event, in order."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing
        self.content = tracing.include_content
        self.tracer = tracing.tracer()
        self.rs = RunState()
        self.agent: Span | None = None
        self.chat: Span | None = None
        self.tools: dict[str, Span] = {}
        self.asked: dict[str, ApprovalRequested] = {}
        self.decisions: dict[str, ApprovalResolved] = {}
        self.descriptions: dict[str, str] = {}
        self.provider = ""
        self.model = ""
        self.request_ts: datetime | None = None
        self.first_chunk = False
        self.sent: tuple[int, Message | None, Message | None] = (0, None, None)
        """The conversation the chat spans hold so far: its length, its first and its last message."""

    # -- helpers ---------------------------------------------------------------------------------------

    def _set(self, span: Span, attrs: dict[str, Any]) -> None:
        for key, value in attrs.items():
            if value is None:
                continue
            if isinstance(value, str):
                value = redact_text(value)
            elif isinstance(value, list | tuple):
                value = [redact_text(v) if isinstance(v, str) else v for v in value]
            span.set_attribute(key, value)

    def _json(self, value: Any) -> str | None:
        return c.dumps(value) if self.content else None

    def _start(self, name: str, ts: datetime, kind: Any, attrs: dict[str, Any]) -> Span:
        from opentelemetry import trace

        ctx = trace.set_span_in_context(self.agent) if self.agent is not None else None
        span = self.tracer.start_span(name, context=ctx, kind=kind, start_time=ns(ts))
        self._set(span, attrs)
        return span

    def _error(self, span: Span, error_type: str, message: str | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute(c.ERROR_TYPE, error_type)
        span.set_status(Status(StatusCode.ERROR, redact_text(message) if message else None))

    # -- the listener ----------------------------------------------------------------------------------

    def __call__(self, event: BaseEvent, state: RunState | None = None) -> None:
        """Write what ``event`` opens, adds or closes; ``state`` is the run's fold after it (None: fold it here).

        A live run hands its own state (``Run.on_event``), so the log is folded once; a saved transcript is
        folded here as it is written.
        """
        if state is None:
            self.rs.apply(event)
        else:
            self.rs = state
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _run_started(self, ev: RunStarted) -> None:
        from opentelemetry.trace import SpanKind

        self.provider, _, self.model = ev.model.partition(":")
        self.descriptions = {t.name: t.description for t in ev.tools}
        system, inputs = c.messages_to_otel(ev.messages)
        tools = [{"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
                 for t in ev.tools]
        self.agent = self._start(f"invoke_agent {self.tracing.agent_name}", ev.ts, SpanKind.INTERNAL, {
            c.OPERATION: "invoke_agent", c.AGENT_NAME: self.tracing.agent_name,
            c.PROVIDER: c.provider_name(self.provider), c.SYSTEM: c.provider_name(self.provider),
            c.REQUEST_MODEL: self.model, c.CONVERSATION_ID: str(ev.settings.get("operation_id") or ev.run_id),
            c.A_RUN_ID: ev.run_id, c.A_MODEL: ev.model,
            c.SYSTEM_INSTRUCTIONS: self._json(system) if system else None,
            c.INPUT_MESSAGES: self._json(inputs),
            c.TOOL_DEFINITIONS: self._json(tools) if tools else None,
        })

    def _model_requested(self, ev: ModelRequested) -> None:
        from opentelemetry.trace import SpanKind

        if self.chat is not None:  # a request without an answer (cannot happen in a valid log; be safe)
            self.chat.end(end_time=ns(ev.ts))
        system, inputs, start = self._new_inputs() if self.content else ([], [], 0)
        attrs: dict[str, Any] = {
            c.OPERATION: "chat", c.PROVIDER: c.provider_name(self.provider), c.SYSTEM: c.provider_name(self.provider),
            c.REQUEST_MODEL: self.model, c.CONVERSATION_ID: str(self.rs.settings.get("operation_id") or ev.run_id),
            c.A_TURN: ev.turn, c.A_FINALIZE: ev.finalize,
            c.SYSTEM_INSTRUCTIONS: self._json(system) if system else None, c.INPUT_MESSAGES: self._json(inputs),
            c.A_INPUT_FROM: start if self.content else None,
        }
        for key, attr in c.REQUEST_SETTINGS.items():
            value = ev.settings.get(key)
            if isinstance(value, str) and key == "stop":
                value = [value]
            if isinstance(value, bool | int | float | str) or (
                    isinstance(value, list) and all(isinstance(v, str) for v in value)):
                attrs[attr] = value
        self.chat = self._start(f"chat {self.model}", ev.ts, SpanKind.CLIENT, attrs)
        self.request_ts = ev.ts
        self.first_chunk = False

    def _new_inputs(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
        """The system instructions, the input messages new since the previous chat span, and how many came before.

        A request sends the whole conversation, but a chat span holds only what is new in it (the results of
        the last turn, a person's words), with ``agentnb.input.from`` saying how many input messages came before
        them: written whole on every span, a long run's trace grows with the square of its turns. The
        conventions let an instrumentation limit what ``gen_ai.input.messages`` holds; each span's value stays a
        valid list of input messages, and the first span, or one after a compression replaced the conversation,
        holds it all (``from`` 0). :func:`agentnb.import_trace` joins them back into each request.
        """
        msgs = self.rs.messages
        count, first, last = self.sent
        if not (msgs and 0 < count <= len(msgs) and msgs[0] is first and msgs[count - 1] is last):
            count = 0  # the first request, or the conversation was replaced: write it whole
        self.sent = (len(msgs), msgs[0] if msgs else None, msgs[-1] if msgs else None)
        lead = 1 if msgs and msgs[0].role == "system" else 0
        system, _ = c.messages_to_otel(msgs[:lead])
        return system, [c.message_to_otel(m) for m in msgs[max(count, lead):]], max(count - lead, 0)

    def _fragment(self, ev: BaseEvent) -> None:
        if not self.first_chunk and self.chat is not None and self.request_ts is not None:
            self.first_chunk = True
            self.chat.set_attribute(c.TIME_TO_FIRST_CHUNK, (ev.ts - self.request_ts).total_seconds())

    def _model_retried(self, ev: ModelRetried) -> None:
        if self.chat is not None:
            self.chat.add_event("agentnb.model_retried", {
                "attempt": ev.attempt, "status": ev.status or 0, "error": redact_text(ev.error),
                "delay_s": ev.delay_s,
            }, timestamp=ns(ev.ts))

    def _turn_completed(self, ev: TurnCompleted) -> None:
        span = self.chat
        if span is None:
            return
        r = ev.response
        self._set(span, {
            c.RESPONSE_MODEL: r.model, c.RESPONSE_ID: r.response_id, c.FINISH_REASONS: [c.finish_to_spec(
                r.finish_reason)], c.INPUT_TOKENS: r.usage.input_tokens, c.OUTPUT_TOKENS: r.usage.output_tokens,
            c.A_WIRE: r.provider, c.A_FINISH_RAW: r.finish_reason_raw, c.A_COMPLETE: r.complete,
            c.A_INCOMPLETE: r.incomplete_reason,
            c.OUTPUT_MESSAGES: self._json(c.output_to_otel(r.message, r.finish_reason)),
        })
        if not r.complete:
            self._error(span, "incomplete", r.incomplete_reason)
        elif r.finish_reason == "error":
            self._error(span, "provider_error", r.finish_reason_raw)
        span.end(end_time=ns(ev.ts))
        self.chat = None

    def _tool_span(self, call_id: str, name: str, ts: datetime) -> Span:
        from opentelemetry.trace import SpanKind

        call = self.rs.calls.get(call_id)
        arguments = call.arguments if call is not None and call.arguments is not None else (
            call.part.arguments_raw if call is not None else None)
        return self._start(f"execute_tool {name}", ts, SpanKind.INTERNAL, {
            c.OPERATION: "execute_tool", c.TOOL_NAME: name, c.TOOL_CALL_ID: call_id, c.TOOL_TYPE: "function",
            c.TOOL_DESCRIPTION: self.descriptions.get(name),
            c.TOOL_ARGUMENTS: (arguments if isinstance(arguments, str) else self._json(arguments))
            if self.content else None,
        })

    def _answered(self, span: Span, call_id: str, outcome: str, ts: datetime, error: str | None = None) -> None:
        """Close a call's span with its result, as the fold recorded it."""
        call = self.rs.calls[call_id]
        result = call.result
        attrs: dict[str, Any] = {c.A_OUTCOME: outcome}
        if result is not None:
            attrs[c.A_STATUS] = result.status
            if self.content:
                attrs[c.TOOL_RESULT] = result.content
            if result.status != "ok":
                self._error(span, error or result.status, result.content if self.content else None)
        decision = self.decisions.get(call_id)
        if decision is not None:
            attrs.update({c.A_DECISION: decision.decision, c.A_BY: decision.by, c.A_NOTE: decision.note,
                          c.A_KIND: self.asked[call_id].kind if call_id in self.asked else None})
        self._set(span, attrs)
        span.end(end_time=ns(ts))

    def _call_rejected(self, ev: CallRejected) -> None:
        span = self._tool_span(ev.call_id, ev.name, ev.ts)
        span.set_attribute(c.A_REJECT, ev.reason)
        self._answered(span, ev.call_id, "rejected", ev.ts, ev.reason)

    def _approval_requested(self, ev: ApprovalRequested) -> None:
        self.asked[ev.call_id] = ev
        if ev.kind == "escalation" and self.agent is not None:
            self.agent.add_event("agentnb.escalation", {"guard": ev.name}, timestamp=ns(ev.ts))

    def _approval_resolved(self, ev: ApprovalResolved) -> None:
        self.decisions[ev.call_id] = ev
        asked = self.asked.get(ev.call_id)
        if asked is None or asked.kind == "escalation" or ev.decision == "approved":
            return  # an approved call runs next: its execute_tool span tells the rest
        span = self._tool_span(ev.call_id, asked.name, asked.ts)
        self._answered(span, ev.call_id, ev.decision, ev.ts)

    def _tool_started(self, ev: ToolStarted) -> None:
        self.tools[ev.call_id] = self._tool_span(ev.call_id, ev.name, ev.ts)

    def _tool_finished(self, ev: ToolFinished) -> None:
        span = self.tools.pop(ev.call_id, None)
        if span is not None:
            self._answered(span, ev.call_id, "executed", ev.ts, ev.error_type)

    def _note(self, ev: GuardTripped | CompressionApplied) -> None:
        if self.agent is None:
            return
        if isinstance(ev, GuardTripped):
            self.agent.add_event("agentnb.guard_tripped", {
                "guard": ev.guard, "limit": ev.limit, "value": ev.value, "action": ev.action,
                "message": redact_text(ev.message)}, timestamp=ns(ev.ts))
        else:
            self.agent.add_event("agentnb.compression_applied", {
                "tier": ev.tier, "tokens_before": ev.tokens_before, "tokens_after": ev.tokens_after,
            }, timestamp=ns(ev.ts))

    def close(self, ts: datetime) -> None:
        """End the spans of a run that has not finished (paused, or stopped by a crash) at ``ts``.

        The agent span records the state the run was in, so an import knows the run did not end there.
        """
        if self.agent is None:
            return
        end = ns(ts)
        for span in [*([self.chat] if self.chat is not None else []), *self.tools.values()]:
            span.end(end_time=end)
        self.chat, self.tools = None, {}
        self._set(self.agent, {c.INPUT_TOKENS: self.rs.input_tokens, c.OUTPUT_TOKENS: self.rs.output_tokens,
                               c.A_STATE: self.rs.state.value, c.A_REASON: "the run had not finished when exported"})
        self.agent.end(end_time=end)
        self.agent = None

    def _run_finished(self, ev: RunFinished) -> None:
        end = ns(ev.ts)
        for span in [*([self.chat] if self.chat is not None else []), *self.tools.values()]:
            self._error(span, "interrupted", f"the run ended ({ev.final.value}) before this finished")
            span.end(end_time=end)
        self.chat, self.tools = None, {}
        if self.agent is None:
            return
        rs = self.rs
        output = [{"role": "assistant", "parts": [{"type": "text", "content": ev.output}],
                   "finish_reason": "stop"}] if ev.output is not None else None
        self._set(self.agent, {
            c.INPUT_TOKENS: rs.input_tokens, c.OUTPUT_TOKENS: rs.output_tokens, c.A_STATE: ev.final.value,
            c.A_REASON: ev.reason, c.A_OUTPUT: ev.output if self.content else None,
            c.OUTPUT_MESSAGES: self._json(output) if output else None,
        })
        if ev.final in _ERROR_STATES:
            self._error(self.agent, ev.final.value.lower(), ev.reason)
        self.agent.end(end_time=end)
        self.agent = None


_HANDLERS: dict[type[BaseEvent], Any] = {
    RunStarted: SpanWriter._run_started,
    ModelRequested: SpanWriter._model_requested,
    TextMerged: SpanWriter._fragment,
    ArgumentsMerged: SpanWriter._fragment,
    ModelRetried: SpanWriter._model_retried,
    TurnCompleted: SpanWriter._turn_completed,
    CallRejected: SpanWriter._call_rejected,
    ApprovalRequested: SpanWriter._approval_requested,
    ApprovalResolved: SpanWriter._approval_resolved,
    ToolStarted: SpanWriter._tool_started,
    ToolFinished: SpanWriter._tool_finished,
    GuardTripped: SpanWriter._note,
    CompressionApplied: SpanWriter._note,
    RunFinished: SpanWriter._run_finished,
}
"""What each event class writes (the others -- parsing, validation, binding -- change no span)."""


def export(source: Transcript | Run | Iterable[BaseEvent], tracer_provider: Any = None, *,
           include_content: bool | None = None, agent_name: str = "agentnb") -> int:
    """Write a finished (or unfinished) run as GenAI spans; returns the number of events read.

    Args:
        source: a transcript, a run, or its events.
        tracer_provider: a tracer provider or a :class:`Tracing` (None: the global provider).
        include_content: see :class:`Tracing`.
        agent_name: see :class:`Tracing`.

    Example:
        >>> import agentnb as anb
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        >>> spans, provider = InMemorySpanExporter(), TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(spans))
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> anb.otel.export(run.start("Paris?").run().transcript, provider)
        11
        >>> spans.get_finished_spans()[-1].attributes["gen_ai.usage.output_tokens"] > 0
        True
    """
    tracing = tracer_provider if isinstance(tracer_provider, Tracing) else Tracing(
        tracer_provider, include_content=include_content, agent_name=agent_name)
    writer = SpanWriter(tracing)
    events: Iterable[BaseEvent] = source.events if hasattr(source, "events") else source
    n = 0
    last: BaseEvent | None = None
    with gc_paused():  # the spans made so far all stay alive: nothing for the collector to find
        for ev in events:
            writer(ev)
            last = ev
            n += 1
        if last is not None:
            writer.close(last.ts)
    return n
