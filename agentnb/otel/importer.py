"""GenAI spans back into transcripts: one per agent invocation, replayable and analysable.

Theory of operation. The spans are grouped by the ``invoke_agent`` span they descend from (chat spans with
no agent above them form one group per trace). Each group is rebuilt as the event log an agentnb run would
have written, in the order of the state machine, and every event goes through the fold as it is made, so a
transcript that comes back is a valid run:

- ``RunStarted`` at the agent span's start: ``gen_ai.system_instructions`` + the first request's
  ``gen_ai.input.messages``, the tools of ``gen_ai.tool.definitions``, the model;
- per chat span: ``ModelRequested`` at its start (messages the request adds to the conversation as
  ``new_messages``; a request whose history is not the conversation so far continued becomes a
  ``CompressionApplied`` first), retries from its span events, and ``TurnCompleted`` at its end with
  ``gen_ai.output.messages``, usage, finish reason, response id and model, and the span's duration as latency;
- per call of the turn: ``CallParsed``, then ``CallValidated`` or ``CallRejected``, then the execution as
  its ``execute_tool`` span tells it (``ToolStarted``/``ToolFinished`` at the span's times, approvals and
  denials from agentnb's attributes); a call with no span takes its result from the next request's input
  messages; then ``ResultsBound``;
- ``RunFinished`` from the last turn by the engine's own rule (:func:`agentnb.engine.classify`), or as the
  agent span recorded it when it was written by agentnb.

What a trace does not hold is not invented: it is listed in ``RunStarted.settings["lacks"]`` (message
content, tool timings, finish reasons, the model turns left out after a turn that agentnb reads as final).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ..engine import Emit, EngineConfig, RunState, arguments_digest, classify, decide
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    BaseEvent,
    CallParsed,
    CallRejected,
    CallValidated,
    CompressionApplied,
    GuardTripped,
    ModelRequested,
    ModelRetried,
    ResultsBound,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolInfo,
    ToolStarted,
    TurnCompleted,
)
from ..messages import Message, ModelTurn, TextPart, ToolCallPart, ToolResultPart, Usage
from ..states import TERMINAL, TRANSITIONS, IllegalTransition, LoopState
from ..tools import as_registry
from ..transcript import Transcript
from . import _conv as c
from .spans import SpanRecord, read_spans

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CONFIG = EngineConfig(registry=as_registry([]))
"""Enough configuration for the engine to judge a final turn (it reads no tool there)."""


def _ts(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


def import_trace(source: Any) -> list[Transcript]:
    """Transcripts from GenAI-convention spans, one per agent invocation, in the order they started.

    Args:
        source: finished SDK spans (or the ``InMemorySpanExporter`` holding them), an OTLP/JSON document or
            its text, or the path of a file of them (see :func:`agentnb.otel.spans.read_spans`).

    Example:
        >>> import agentnb as anb
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        >>> spans, provider = InMemorySpanExporter(), TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(spans))
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> _ = anb.otel.export(run.start("Paris?").run(), provider, include_content=True)
        >>> [t] = anb.import_trace(spans)
        >>> t.state, t.frames.calls()["tool"].tolist()
        (<LoopState.COMPLETED: 'COMPLETED'>, ['get_weather'])
    """
    spans = read_spans(source)
    by_id = {s.span_id: s for s in spans}
    groups: dict[str, tuple[SpanRecord | None, list[SpanRecord]]] = {}
    for s in sorted(spans, key=lambda s: s.start_ns):
        if s.operation == "invoke_agent":
            groups.setdefault(s.span_id, (s, []))
    for s in spans:
        op = s.operation
        if op not in c.CHAT_OPERATIONS and op != "execute_tool":
            continue
        owner = _owner(s, by_id)
        key = owner.span_id if owner is not None else f"trace:{s.trace_id}"
        groups.setdefault(key, (owner, []))[1].append(s)
    out = [_Rebuild(agent, members).run() for agent, members in groups.values()]
    return sorted(out, key=lambda t: t.events[0].ts if t.events else _EPOCH)


def _owner(span: SpanRecord, by_id: dict[str, SpanRecord]) -> SpanRecord | None:
    seen = 0
    parent = by_id.get(span.parent_id or "")
    while parent is not None and seen < 1000:
        if parent.operation == "invoke_agent":
            return parent
        parent = by_id.get(parent.parent_id or "")
        seen += 1
    return None


class _Rebuild:
    """Rebuilds one agent invocation's events (see the module docstring)."""

    def __init__(self, agent: SpanRecord | None, members: list[SpanRecord]) -> None:
        self.agent = agent
        self.a = agent.attributes if agent is not None else {}
        self.chats = sorted((s for s in members if s.operation in c.CHAT_OPERATIONS), key=lambda s: s.start_ns)
        tools = sorted((s for s in members if s.operation == "execute_tool"), key=lambda s: s.start_ns)
        self.tool_spans = {str(s.attributes.get(c.TOOL_CALL_ID) or s.span_id): s for s in tools}
        self.tools_unmatched = tools
        self.anonymous = [s for s in tools if not s.attributes.get(c.TOOL_CALL_ID)]
        """Tool spans with no call id (the Agents SDK writes none): matched to calls by name, in order."""
        first = self.chats[0].attributes if self.chats else {}
        self.provider = str(self.a.get(c.PROVIDER) or self.a.get(c.SYSTEM) or first.get(c.PROVIDER)
                            or first.get(c.SYSTEM) or "otel")
        self.reader = c.MessageReader(self.provider)
        self.lacks: list[str] = []
        trace = agent.trace_id if agent is not None else (self.chats[0].trace_id if self.chats else "")
        span = agent.span_id if agent is not None else "none"
        self.run_id = str(self.a.get(c.A_RUN_ID) or f"otel_{trace[:8]}_{span}")
        self.rs = RunState()
        self.events: list[BaseEvent] = []
        self.inputs: dict[str, list[Message]] = {}
        self.guards = sorted((e for e in agent.events if e[0] == "agentnb.guard_tripped"), key=lambda e: e[1]) if (
            agent is not None) else []

    # -- the log ---------------------------------------------------------------------------------------

    def add(self, cls: type[BaseEvent], state: LoopState, ns: int, **fields: Any) -> None:
        while self.guards and self.guards[0][1] <= ns and cls is not GuardTripped:
            _, at, g = self.guards.pop(0)
            if "GuardTripped" in TRANSITIONS[self.rs.state]:
                self.add(GuardTripped, self.rs.state, at, guard=str(g.get("guard", "")),
                         limit=float(g.get("limit", 0)), value=float(g.get("value", 0)),
                         action=g.get("action", "note"), message=str(g.get("message", "")))
        turn = self.rs.turn + 1 if cls is ModelRequested else self.rs.turn
        event = cls(seq=len(self.events), ts=_ts(ns), run_id=self.run_id, turn=turn, state=state, **fields)
        self.rs.apply(event)
        self.events.append(event)

    def lack(self, what: str) -> None:
        if what not in self.lacks:
            self.lacks.append(what)

    # -- the run ---------------------------------------------------------------------------------------

    def run(self) -> Transcript:
        settings: dict[str, Any] = {"imported_from": "otel"}
        try:
            self._started(settings)
            for k, chat in enumerate(self.chats):
                if self.rs.state in TERMINAL:
                    self.lack(f"{len(self.chats) - k} model request(s) after the turn read as final")
                    break
                self._turn(chat, self.chats[k + 1] if k + 1 < len(self.chats) else None)
            self._finish()
        except (IllegalTransition, ValueError, KeyError) as exc:
            self.lack(f"the trace breaks off: {exc}")
        self.lacks.extend(sorted(self.reader.lost))
        settings["lacks"] = self.lacks
        return Transcript(self.events)

    def _started(self, settings: dict[str, Any]) -> None:
        first = self.chats[0].attributes if self.chats else {}
        system = self.reader.system(self.a.get(c.SYSTEM_INSTRUCTIONS) or first.get(c.SYSTEM_INSTRUCTIONS))
        inputs = self.a.get(c.INPUT_MESSAGES) or first.get(c.INPUT_MESSAGES)
        if inputs is None and not system:
            self.lack("message content (export with content capture on)")
        defs = c.loads(self.a.get(c.TOOL_DEFINITIONS) or first.get(c.TOOL_DEFINITIONS)) or []
        tools = [ToolInfo(name=str(d.get("name", "")), description=str(d.get("description") or ""),
                          parameters=d.get("parameters") or {}) for d in defs if isinstance(d, dict)]
        if not tools:
            names = dict.fromkeys(str(s.attributes.get(c.TOOL_NAME, "")) for s in self.tools_unmatched)
            tools = [ToolInfo(name=n, description="", parameters={}) for n in names if n]
        model = self.a.get(c.A_MODEL) or (
            f"{self.provider}:{self.a.get(c.REQUEST_MODEL) or first.get(c.REQUEST_MODEL) or 'unknown'}")
        if self.agent is not None:
            settings["trace_id"] = self.agent.trace_id
            settings["agent"] = self.a.get(c.AGENT_NAME)
        settings["operation_id"] = self.a.get(c.CONVERSATION_ID) or first.get(c.CONVERSATION_ID)
        start = self.agent.start_ns if self.agent is not None else (self.chats[0].start_ns if self.chats else 0)
        self.add(RunStarted, LoopState.READY, start, messages=system + self.reader.messages(inputs), model=model,
                 tools=tools, settings=settings)

    def _inputs(self, chat: SpanRecord) -> list[Message]:
        """A request's input messages, read once (a turn's results are looked up in the next request)."""
        if chat.span_id not in self.inputs:
            self.inputs[chat.span_id] = self.reader.messages(chat.attributes.get(c.INPUT_MESSAGES))
        return self.inputs[chat.span_id]

    def _request(self, chat: SpanRecord) -> None:
        a = chat.attributes
        if a.get(c.INPUT_MESSAGES) is not None:
            system = self.reader.system(a.get(c.SYSTEM_INSTRUCTIONS))
            if not system and self.rs.messages and self.rs.messages[0].role == "system":
                system = [self.rs.messages[0]]
            full = system + self._inputs(chat)
            cur = self.rs.messages
            if len(full) >= len(cur) and [m.role for m in full[: len(cur)]] == [m.role for m in cur]:
                new = full[len(cur):]
            else:
                self.add(CompressionApplied, self.rs.state, chat.start_ns, tier=0, tokens_before=0,
                         tokens_after=0, messages=full)
                self.lack("token counts of compressions")
                new = []
        else:
            new = []
        finalize = bool(a.get(c.A_FINALIZE, False))
        settings = {k: a[attr] for k, attr in c.REQUEST_SETTINGS.items() if attr in a}
        self.add(ModelRequested, LoopState.MODEL_REQUESTED, chat.start_ns,
                 message_count=len(self.rs.messages) + len(new), new_messages=new,
                 tools=[] if finalize else list(self.rs.tool_names), settings=settings, finalize=finalize)
        for name, at, attrs in chat.events:
            if name == "agentnb.model_retried":
                self.add(ModelRetried, LoopState.MODEL_REQUESTED, at, attempt=int(attrs.get("attempt", 1)),
                         status=int(attrs["status"]) or None if "status" in attrs else None,
                         error=str(attrs.get("error", "")), delay_s=float(attrs.get("delay_s", 0.0)))

    def _response(self, chat: SpanRecord, nxt: SpanRecord | None) -> ModelTurn:
        a = chat.attributes
        message = next((m for m in self.reader.messages(a.get(c.OUTPUT_MESSAGES)) if m.role == "assistant"), None)
        if message is None:
            self.lack("the model's answers (no gen_ai.output.messages): calls rebuilt from execute_tool spans")
            end = nxt.start_ns if nxt is not None else (self.agent.end_ns if self.agent else chat.end_ns + 1)
            calls = [s for s in self.tools_unmatched if chat.end_ns <= s.start_ns <= end]
            parts = [self.reader.call({"id": s.attributes.get(c.TOOL_CALL_ID) or s.span_id,
                                       "name": s.attributes.get(c.TOOL_NAME, ""),
                                       "arguments": s.attributes.get(c.TOOL_ARGUMENTS)}, i)
                     for i, s in enumerate(calls)]
            message = Message(role="assistant", parts=tuple(parts) or (TextPart(text=""),))
        reasons = a.get(c.FINISH_REASONS) or []
        spec = str(reasons[0]) if isinstance(reasons, list | tuple) and reasons else (
            str(reasons) if isinstance(reasons, str) and reasons else None)
        if spec is None:
            self.lack("finish reasons (inferred from the calls)")
        complete = bool(a.get(c.A_COMPLETE, True))
        return ModelTurn(
            message=message, provider=str(a.get(c.A_WIRE) or self.provider),
            model=str(a.get(c.RESPONSE_MODEL) or a.get(c.REQUEST_MODEL) or "unknown"),
            response_id=a.get(c.RESPONSE_ID), finish_reason_raw=a.get(c.A_FINISH_RAW) or spec,
            finish_reason=c.finish_from_spec(spec, bool(message.tool_calls)),
            usage=Usage(input_tokens=int(a.get(c.INPUT_TOKENS) or 0), output_tokens=int(a.get(c.OUTPUT_TOKENS) or 0)),
            complete=complete, incomplete_reason=a.get(c.A_INCOMPLETE),
        )

    def _turn(self, chat: SpanRecord, nxt: SpanRecord | None) -> None:
        self._request(chat)
        resp = self._response(chat, nxt)
        self.add(TurnCompleted, LoopState.RESPONDED, chat.end_ns, response=resp,
                 latency_s=max(0, chat.end_ns - chat.start_ns) / 1e9)
        calls = resp.message.tool_calls
        if self.rs.finalizing or classify(resp) is not None:
            # the engine's own rule for a final turn (a finalization turn is read as the loop reads it)
            action = decide(self.rs, _CONFIG)
            ev = action.event if isinstance(action, Emit) else None
            self._finish({"final": ev.final, "reason": ev.reason, "output": ev.output}
                         if isinstance(ev, RunFinished) else None)
            return
        for p in calls:
            if p.call_id not in self.tool_spans:
                span = next((s for s in self.anonymous if s.attributes.get(c.TOOL_NAME) == p.name
                             and s.start_ns >= chat.end_ns), None)
                if span is not None:
                    self.anonymous.remove(span)
                    self.tool_spans[p.call_id] = span
        later: dict[str, ToolResultPart] = {}
        if nxt is not None:
            for m in self._inputs(nxt):
                later.update((r.call_id, r) for r in m.tool_results)
        recorded = self.a.get(c.A_STATE)
        if nxt is None and recorded is not None and not LoopState(recorded).is_terminal:
            self.lack(f"the rest of the run: it had not finished when exported (it was {recorded})")
            return
        if nxt is None and any(p.call_id not in self.tool_spans for p in calls):
            # the trace ends on calls it never answers (an output tool, a crash): end the run at the turn
            ok = self.agent is None or self.agent.status != "ERROR"
            self._finish({"final": LoopState.COMPLETED if ok else LoopState.FAILED,
                          "reason": "the trace ends with calls it holds no result for",
                          "output": self.a.get(c.A_OUTPUT) or self.a.get("final_result")})
            return
        self._calls(chat, calls, later, nxt)

    def _calls(self, chat: SpanRecord, calls: list[ToolCallPart], later: dict[str, ToolResultPart],
               nxt: SpanRecord | None) -> None:
        at = chat.end_ns
        for i, p in enumerate(calls):
            error = None if p.arguments is not None else "the arguments are not a JSON object"
            self.add(CallParsed, LoopState.VALIDATING, at, call_id=p.call_id, name=p.name, index=i,
                     arguments=p.arguments, error=error)
        steps: list[tuple[int, int, int, str, Any]] = []
        for i, p in enumerate(calls):
            span = self.tool_spans.get(p.call_id)
            sa = span.attributes if span is not None else {}
            outcome = sa.get(c.A_OUTCOME)
            if outcome == "rejected" and span is not None:
                self.add(CallRejected, LoopState.VALIDATING, span.start_ns, call_id=p.call_id, name=p.name,
                         reason=sa.get(c.A_REJECT, "schema"), message=str(sa.get(c.TOOL_RESULT, "")))
                continue
            if span is None and p.call_id not in later:
                self.lack("results of calls the trace does not answer (marked skipped)")
                self.add(CallRejected, LoopState.VALIDATING, at, call_id=p.call_id, name=p.name, reason="skipped",
                         message="(the trace holds no result for this call)")
                continue
            approval = sa.get(c.A_DECISION) is not None
            self.add(CallValidated, LoopState.VALIDATING, at, call_id=p.call_id, name=p.name,
                     arguments=p.arguments or {}, needs_approval=approval)
            if span is None:
                self.lack("tool timings of calls with no execute_tool span (shown as 0 s)")
                steps += [(at, 0, i, "start", p), (at, 1, i, "end", (p, None, later[p.call_id]))]
            else:
                steps += [(span.start_ns, 0, i, "start", p), (span.end_ns, 1, i, "end", (p, span, None))]
        for ns, _, _, what, item in sorted(steps, key=lambda s: s[:3]):
            if what == "start":
                self._start(item, ns)
            else:
                self._end(item[0], item[1], item[2], ns)
        end = max([s[0] for s in steps], default=at)
        self.add(ResultsBound, LoopState.RESULTS_READY, end, call_ids=[p.call_id for p in calls])

    def _start(self, p: ToolCallPart, ns: int) -> None:
        span = self.tool_spans.get(p.call_id)
        sa = span.attributes if span is not None else {}
        decision = sa.get(c.A_DECISION)
        if decision is not None:
            self.add(ApprovalRequested, LoopState.WAITING_APPROVAL, ns, approval_id=f"apr_{self.run_id}_{p.call_id}",
                     call_id=p.call_id, name=p.name, arguments=p.arguments or {},
                     arguments_digest=arguments_digest(p.name, p.arguments), risk="read",
                     kind=sa.get(c.A_KIND) or "approval")
        if decision in ("denied", "submitted") and span is not None:
            return  # the answer comes with the span's end
        if decision is not None:
            self.add(ApprovalResolved, LoopState.EXECUTING, ns, approval_id=f"apr_{self.run_id}_{p.call_id}",
                     call_id=p.call_id, decision="approved", by=sa.get(c.A_BY), note=sa.get(c.A_NOTE))
        self.add(ToolStarted, LoopState.EXECUTING, ns, call_id=p.call_id, name=p.name)

    def _end(self, p: ToolCallPart, span: SpanRecord | None, result: ToolResultPart | None, ns: int) -> None:
        if span is None:
            assert result is not None
            self.add(ToolFinished, LoopState.EXECUTING, ns, call_id=p.call_id, name=p.name, status=result.status,
                     content=result.content, value=result.audit, duration_s=0.0)
            return
        sa = span.attributes
        decision = sa.get(c.A_DECISION)
        raw = sa.get(c.TOOL_RESULT)
        if raw is None and span.status == "ERROR":  # a failed tool: its error is what the model was told
            raw = span.status_message or next((str(e[2].get("exception.message", "")) for e in span.events
                                               if e[0] == "exception"), None)
        if raw is None:
            self.lack("tool results (export with content capture on)")
        content = raw if isinstance(raw, str) else (c.dumps(raw) if raw is not None else "")
        if decision in ("denied", "submitted"):
            others = any(cs.status == "awaiting_approval" and cs.call_id != p.call_id for cs in self.rs.calls.values())
            self.add(ApprovalResolved, LoopState.WAITING_APPROVAL if others else LoopState.EXECUTING, ns,
                     approval_id=f"apr_{self.run_id}_{p.call_id}", call_id=p.call_id, decision=decision,
                     by=sa.get(c.A_BY), note=sa.get(c.A_NOTE),
                     content=content if decision == "submitted" else None,
                     value=c.loads(content) if decision == "submitted" else None)
            return
        status = sa.get(c.A_STATUS) or ("error" if span.status == "ERROR" or c.ERROR_TYPE in sa else "ok")
        self.add(ToolFinished, LoopState.EXECUTING, ns, call_id=p.call_id, name=p.name, status=status,
                 content=content, value=c.loads(raw), duration_s=max(0, span.end_ns - span.start_ns) / 1e9,
                 error_type=sa.get(c.ERROR_TYPE) if status != "ok" else None,
                 error_message=span.status_message if status != "ok" else None)

    def _finish(self, verdict: dict[str, Any] | None = None) -> None:
        state = self.rs.state
        if state in TERMINAL or state is LoopState.NEW:
            return
        recorded = self.a.get(c.A_STATE)
        allowed = TRANSITIONS[state].get("RunFinished", frozenset())
        end = self.agent.end_ns if self.agent is not None else (self.chats[-1].end_ns if self.chats else 0)
        if recorded is not None and LoopState(recorded) in allowed:
            self.add(RunFinished, LoopState(recorded), end, final=LoopState(recorded),
                     reason=str(self.a.get(c.A_REASON) or ""), output=self.a.get(c.A_OUTPUT))
        elif verdict is not None and verdict["final"] in allowed:
            output = verdict.get("output")
            self.add(RunFinished, verdict["final"], end, final=verdict["final"], reason=verdict["reason"],
                     output=output)
        elif self.agent is not None and self.agent.status == "ERROR" and LoopState.FAILED in allowed:
            self.add(RunFinished, LoopState.FAILED, end, final=LoopState.FAILED,
                     reason=self.agent.status_message or "the agent span ended with an error")
        elif self.rs.state is not LoopState.READY:
            self.lack("how the run ended (the trace stops in state " + state.value + ")")
