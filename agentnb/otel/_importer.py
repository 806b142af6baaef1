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
- ``RunFinished`` from the last turn by the engine's own rule (:func:`agentnb._engine.classify`), or as the
  agent span recorded it when it was written by agentnb.

What a trace does not hold is not invented: it is listed in ``RunStarted.settings["lacks"]`` (message
content, tool timings, finish reasons, the model turns left out after a turn that agentnb reads as final).
So is what the trace holds but the import could not read: the spans and fields :mod:`agentnb.otel._spans` left
out (a start time that is not a time, a span id given twice), parent ids that form a cycle, and attributes whose
values have the wrong type (a token count that is a word, an unknown state), each read as absent. Whatever a
document holds, the import gives transcripts or a :class:`~agentnb.TranscriptError` naming what was wrong.

Cost. Everything is linear in the number of spans: tool spans are found by time with a binary search, and
calls without ids are matched to tool spans by name through an index. The reader never builds the document as
one tree of JSON objects (see :mod:`agentnb.otel._otlp`), and the cyclic garbage collector is paused while
the records and events are made: they are millions of young objects that form no cycle, and its passes over
them cost more than the import itself on large traces.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

from .._engine import Emit, EngineConfig, RunState, arguments_digest, classify, decide
from .._gc import gc_paused
from .._messages import Message, ModelTurn, ResultStatus, TextPart, ToolCallPart, ToolResultPart, Usage
from .._states import TERMINAL, TRANSITIONS, LoopState
from .._transcript import Transcript
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
    RejectReason,
    ResultsBound,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolInfo,
    ToolStarted,
    TurnCompleted,
)
from ..exceptions import TranscriptError
from ..tools import as_registry
from . import _conv as c
from ._otlp import Notes
from ._spans import Reading, SpanRecord, read

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CONFIG = EngineConfig(registry=as_registry([]))
"""Enough configuration for the engine to judge a final turn (it reads no tool there)."""


_STATES = frozenset(s.value for s in LoopState)
_STATUSES = frozenset(get_args(ResultStatus))
_REJECTS = frozenset(get_args(RejectReason))
_DECISIONS = frozenset({"approved", "denied", "submitted"})
_KINDS = frozenset({"approval", "client_result", "outcome_unknown", "escalation"})
_ACTIONS = frozenset({"finalize", "stop", "escalate", "note"})


def _ts(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


def import_trace(source: Any) -> list[Transcript]:
    """Transcripts from GenAI-convention spans, one per agent invocation, in the order they started.

    What a trace does not hold, and what it holds that cannot be read (a span whose start is not a time, an
    attribute of the wrong type, ...), is listed in each transcript's ``events[0].settings["lacks"]``. A file of
    JSON Lines is read a line at a time; for one too large to hold with its transcripts,
    :func:`~agentnb.iter_trace` yields the same transcripts as each invocation is done.

    Args:
        source: finished SDK spans (or the ``InMemorySpanExporter`` holding them), an OTLP/JSON document or
            its text, or the path of a file of them (see :func:`agentnb.otel._spans.read_spans`).

    Raises:
        TranscriptError: nothing in ``source`` can be read as spans: empty text, text that is not UTF-8 or
            not JSON, JSON nested too deeply, a file that does not exist, or a document none of whose spans can
            be read (the message names why).

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
    with gc_paused():
        return transcripts_of(read(source))


def transcripts_of(reading: Reading) -> list[Transcript]:
    """The transcripts of the spans read, in the order they started (the work of :func:`import_trace`).

    ``reading.spans`` is emptied: each group's records are let go once its transcript is made.
    """
    spans, notes = reading.spans, reading.notes
    reading.spans = []
    owners = _Owners(spans, notes)
    groups: dict[str, tuple[SpanRecord | None, list[SpanRecord]]] = {}
    for s in sorted(spans, key=lambda s: s.start_ns):
        if s.operation == "invoke_agent":
            groups.setdefault(s.span_id, (s, []))
    for s in spans:
        if not is_member(s):
            continue
        owner = owners.of(s)
        key = owner.span_id if owner is not None else f"trace:{s.trace_id}"
        groups.setdefault(key, (owner, []))[1].append(s)
    del spans, owners
    out = []
    for key in list(groups):  # each group's records are let go once its transcript is made
        agent, members = groups.pop(key)
        out.append(rebuild(agent, members, notes))
    return sorted(out, key=lambda t: t.events[0].ts if t.events else _EPOCH)


def is_member(span: SpanRecord) -> bool:
    """Whether a span is part of the invocation it descends from (a chat or a tool span)."""
    op = span.operation
    return op in c.CHAT_OPERATIONS or op == "execute_tool"


def rebuild(agent: SpanRecord | None, members: list[SpanRecord], notes: Notes) -> Transcript:
    """The transcript of one invocation.

    Its agent span (None: a trace's spans with no agent above them), its chat and tool spans in the order they
    were read, and the notes of the reading.
    """
    return _Rebuild(agent, members, notes).run()


class _Owners:
    """The agent span each span descends from, remembered along the way; a cycle of parent ids is noted."""

    def __init__(self, spans: list[SpanRecord], notes: Notes) -> None:
        self.by_id = {s.span_id: s for s in spans}
        self.notes = notes
        self.known: dict[str, SpanRecord | None] = {}

    def of(self, span: SpanRecord) -> SpanRecord | None:
        """The nearest ``invoke_agent`` above ``span``, or None."""
        path: list[str] = []
        seen: set[str] = {span.span_id}
        parent = self.by_id.get(span.parent_id or "")
        owner: SpanRecord | None = None
        while parent is not None:
            if parent.span_id in self.known:
                owner = self.known[parent.span_id]
                break
            if parent.operation == "invoke_agent":
                owner = parent
                break
            if parent.span_id in seen:
                self.notes.add(f"the parent ids of span {span.span_id} ({span.name!r}) form a cycle through span "
                               f"{parent.span_id}: read as having no agent above it", span.trace_id)
                break
            seen.add(parent.span_id)
            path.append(parent.span_id)
            parent = self.by_id.get(parent.parent_id or "")
        for sid in path:
            self.known[sid] = owner
        return owner


class _Rebuild:
    """Rebuilds one agent invocation's events (see the module docstring)."""

    def __init__(self, agent: SpanRecord | None, members: list[SpanRecord], notes: Notes) -> None:
        self.agent = agent
        self.a = agent.attributes if agent is not None else {}
        self.chats = sorted((s for s in members if s.operation in c.CHAT_OPERATIONS), key=lambda s: s.start_ns)
        first = self.chats[0].attributes if self.chats else {}
        self.reader = c.MessageReader("otel")
        self.lost = self.reader.lost
        """What could not be read, in the reader's words (attributes of the wrong type included)."""
        tools = sorted((s for s in members if s.operation == "execute_tool"), key=lambda s: s.start_ns)
        self.tools = tools
        self.tool_starts = [s.start_ns for s in tools]
        self.tool_spans: dict[str, SpanRecord] = {}
        self.anonymous: dict[str, list[SpanRecord]] = {}
        """Tool spans with no call id (the Agents SDK writes none), by tool name: matched to calls in order."""
        self.matched: set[str] = set()
        for s in tools:
            call_id = c.text(s.attributes, c.TOOL_CALL_ID, self.lost)
            self.tool_spans[call_id or s.span_id] = s
            if not call_id:
                self.anonymous.setdefault(c.text(s.attributes, c.TOOL_NAME, self.lost) or "", []).append(s)
        self.provider = (self._text(c.PROVIDER) or self._text(c.SYSTEM) or c.text(first, c.PROVIDER, self.lost)
                         or c.text(first, c.SYSTEM, self.lost) or "otel")
        self.reader.provider = self.provider
        self.trace = agent.trace_id if agent is not None else (self.chats[0].trace_id if self.chats else "")
        self.lacks: list[str] = notes.about(self.trace)
        span = agent.span_id if agent is not None else "none"
        self.run_id = self._text(c.A_RUN_ID) or f"otel_{self.trace[:8]}_{span}"
        self.rs = RunState()
        self.events: list[BaseEvent] = []
        self.inputs: dict[str, tuple[list[Message], int, list[Message]]] = {}
        """Per request read: its input messages, how many came before the ones its span holds, and those."""
        self.conversation: list[Message] = []
        """The input messages of the last request read (a span that holds only what was new continues it)."""
        self.guards = deque(sorted((e for e in agent.events if e[0] == "agentnb.guard_tripped"),
                                   key=lambda e: e[1])) if agent is not None else deque()

    def _text(self, key: str) -> str | None:
        """An attribute of the agent span, as text."""
        return c.text(self.a, key, self.lost)

    def _state(self) -> LoopState | None:
        """The state agentnb recorded on the agent span (None when absent or not a state)."""
        recorded = c.choice(self.a, c.A_STATE, _STATES, self.lost)
        return LoopState(recorded) if recorded is not None else None

    # -- the log ---------------------------------------------------------------------------------------

    def add(self, cls: type[BaseEvent], state: LoopState, ns: int, **fields: Any) -> None:
        while self.guards and self.guards[0][1] <= ns and cls is not GuardTripped:
            _, at, g = self.guards.popleft()
            if "GuardTripped" in TRANSITIONS[self.rs.state]:
                self.add(GuardTripped, self.rs.state, at, guard=c.text(g, "guard", self.lost) or "",
                         limit=c.number(g, "limit", self.lost), value=c.number(g, "value", self.lost),
                         action=c.choice(g, "action", _ACTIONS, self.lost) or "note",
                         message=c.text(g, "message", self.lost) or "")
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
        except (TranscriptError, ValueError, KeyError) as exc:
            self.lack(f"the trace breaks off: {exc}")
        self.lacks.extend(sorted(self.lost))
        settings["lacks"] = self.lacks
        return Transcript(self.events)

    def _started(self, settings: dict[str, Any]) -> None:
        first = self.chats[0].attributes if self.chats else {}
        system = self.reader.system(self.a.get(c.SYSTEM_INSTRUCTIONS) or first.get(c.SYSTEM_INSTRUCTIONS))
        inputs = self.a.get(c.INPUT_MESSAGES) or first.get(c.INPUT_MESSAGES)
        if inputs is None and not system:
            self.lack("message content (export with content capture on)")
        defs = c.loads(self.a.get(c.TOOL_DEFINITIONS) or first.get(c.TOOL_DEFINITIONS)) or []
        if not isinstance(defs, list):
            self.lost.add("gen_ai.tool.definitions that are not a list (left out)")
            defs = []
        tools = [self._tool(d) for d in defs if isinstance(d, dict)]
        if len(tools) < len(defs):
            self.lost.add("gen_ai.tool.definitions items that are not objects (left out)")
        if not tools:
            names = dict.fromkeys(c.text(s.attributes, c.TOOL_NAME, self.lost) or "" for s in self.tools)
            tools = [ToolInfo(name=n, description="", parameters={}) for n in names if n]
        model = self._text(c.A_MODEL) or (
            f"{self.provider}:{self._text(c.REQUEST_MODEL) or c.text(first, c.REQUEST_MODEL, self.lost) or 'unknown'}")
        if self.agent is not None:
            settings["trace_id"] = self.agent.trace_id
            settings["agent"] = self._text(c.AGENT_NAME)
        settings["operation_id"] = self._text(c.CONVERSATION_ID) or c.text(first, c.CONVERSATION_ID, self.lost)
        start = self.agent.start_ns if self.agent is not None else (self.chats[0].start_ns if self.chats else 0)
        self.add(RunStarted, LoopState.READY, start, messages=system + self.reader.messages(inputs), model=model,
                 tools=tools, settings=settings)

    def _tool(self, d: dict[str, Any]) -> ToolInfo:
        """One tool definition; a name or description that is not text, or parameters that are no object, are lost."""
        parameters = d.get("parameters") or {}
        if not isinstance(parameters, dict):
            self.lost.add("tool parameters that are not a JSON schema object (left out)")
            parameters = {}
        return ToolInfo(name=c.text(d, "name", self.lost) or "", description=c.text(d, "description", self.lost) or "",
                        parameters=parameters)

    def _inputs(self, chat: SpanRecord) -> tuple[list[Message], int, list[Message]]:
        """A request's input messages, read once (a turn's results are looked up in the next request).

        A span that holds only what was new (``agentnb.input.from`` > 0: see ``SpanWriter._new_inputs``) is
        joined to the inputs of the request before it, which are read before it and not needed after: the
        list grows in place, so a long run is read in time linear in its length. Only the last two requests'
        are kept: each is the whole conversation so far, so keeping them all would grow with the square of a
        long run's turns.
        """
        if chat.span_id not in self.inputs:
            if len(self.inputs) >= 2:
                del self.inputs[next(iter(self.inputs))]
            new = self.reader.messages(chat.attributes.get(c.INPUT_MESSAGES))
            start = c.count(chat.attributes, c.A_INPUT_FROM, self.lost)
            if start and start > len(self.conversation):
                self.lack(f"{start - len(self.conversation)} input message(s) of a request written before it")
                start = len(self.conversation)
            if start and start == len(self.conversation):
                self.conversation.extend(new)  # the request before it is read already: continue its list
            else:
                self.conversation = self.conversation[:start] + new
            self.inputs[chat.span_id] = (self.conversation, start, new)
        return self.inputs[chat.span_id]

    def _request(self, chat: SpanRecord) -> None:
        a = chat.attributes
        if a.get(c.INPUT_MESSAGES) is not None:
            system = self.reader.system(a.get(c.SYSTEM_INSTRUCTIONS))
            if not system and self.rs.messages and self.rs.messages[0].role == "system":
                system = [self.rs.messages[0]]
            inputs, start, added = self._inputs(chat)
            cur = self.rs.messages
            known = len(cur) - len(system) - start  # of what this span holds, what the log has already
            if start and 0 <= known <= len(added) and all(
                    m.role == n.role for m, n in zip(added, cur[len(cur) - known:], strict=False)):
                new = added[known:]  # a span that holds what was new: compare only that
            elif len(system) + len(inputs) >= len(cur) and all(
                    m.role == n.role for m, n in zip(system + inputs, cur, strict=False)):
                new = (system + inputs)[len(cur):]
            else:
                self.add(CompressionApplied, self.rs.state, chat.start_ns, tier=0, tokens_before=0,
                         tokens_after=0, messages=system + inputs)
                self.lack("token counts of compressions")
                new = []
        else:
            new = []
        finalize = c.flag(a, c.A_FINALIZE, self.lost, False)
        settings = {k: a[attr] for k, attr in c.REQUEST_SETTINGS.items() if attr in a}
        self.add(ModelRequested, LoopState.MODEL_REQUESTED, chat.start_ns,
                 message_count=len(self.rs.messages) + len(new), new_messages=new,
                 tools=[] if finalize else list(self.rs.tool_names), settings=settings, finalize=finalize)
        for name, at, attrs in chat.events:
            if name == "agentnb.model_retried":
                status = c.count(attrs, "status", self.lost)
                self.add(ModelRetried, LoopState.MODEL_REQUESTED, at,
                         attempt=c.count(attrs, "attempt", self.lost, default=1), status=status or None,
                         error=c.text(attrs, "error", self.lost) or "", delay_s=c.number(attrs, "delay_s", self.lost))

    def _untold_calls(self, chat: SpanRecord, nxt: SpanRecord | None) -> list[SpanRecord]:
        """The tool spans that started between a turn's end and the next request (or the agent's end)."""
        end = nxt.start_ns if nxt is not None else (self.agent.end_ns if self.agent else chat.end_ns + 1)
        return self.tools[bisect_left(self.tool_starts, chat.end_ns):bisect_right(self.tool_starts, end)]

    def _response(self, chat: SpanRecord, nxt: SpanRecord | None) -> ModelTurn:
        a = chat.attributes
        message = next((m for m in self.reader.messages(a.get(c.OUTPUT_MESSAGES), c.OUTPUT_MESSAGES)
                        if m.role == "assistant"), None)
        if message is None:
            self.lack("the model's answers (no gen_ai.output.messages): calls rebuilt from execute_tool spans")
            parts = [self.reader.call({"id": c.text(s.attributes, c.TOOL_CALL_ID, self.lost) or s.span_id,
                                       "name": c.text(s.attributes, c.TOOL_NAME, self.lost) or "",
                                       "arguments": s.attributes.get(c.TOOL_ARGUMENTS)}, i)
                     for i, s in enumerate(self._untold_calls(chat, nxt))]
            message = Message(role="assistant", parts=tuple(parts) or (TextPart(text=""),))
        reasons = a.get(c.FINISH_REASONS) or []
        spec = str(reasons[0]) if isinstance(reasons, list | tuple) and reasons else (
            str(reasons) if isinstance(reasons, str) and reasons else None)
        if spec is None:
            self.lack("finish reasons (inferred from the calls)")
        return ModelTurn(
            message=message, provider=c.text(a, c.A_WIRE, self.lost) or self.provider,
            model=c.text(a, c.RESPONSE_MODEL, self.lost) or c.text(a, c.REQUEST_MODEL, self.lost) or "unknown",
            response_id=c.text(a, c.RESPONSE_ID, self.lost), finish_reason_raw=c.text(a, c.A_FINISH_RAW, self.lost)
            or spec, finish_reason=c.finish_from_spec(spec, bool(message.tool_calls)),
            usage=Usage(input_tokens=c.count(a, c.INPUT_TOKENS, self.lost),
                        output_tokens=c.count(a, c.OUTPUT_TOKENS, self.lost)),
            complete=c.flag(a, c.A_COMPLETE, self.lost, True), incomplete_reason=c.text(a, c.A_INCOMPLETE, self.lost),
        )

    def _anonymous(self, p: ToolCallPart, after: int) -> SpanRecord | None:
        """The first tool span of ``p``'s tool with no call id, not matched yet, that started at ``after`` or later."""
        spans = self.anonymous.get(p.name)
        if not spans:
            return None
        i = bisect_left(spans, after, key=lambda s: s.start_ns)
        while i < len(spans) and spans[i].span_id in self.matched:
            i += 1
        if i == len(spans):
            return None
        self.matched.add(spans[i].span_id)
        return spans[i]

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
                span = self._anonymous(p, chat.end_ns)
                if span is not None:
                    self.tool_spans[p.call_id] = span
        later: dict[str, ToolResultPart] = {}
        if nxt is not None:
            for m in self._inputs(nxt)[2]:  # a turn's results are new in the next request
                later.update((r.call_id, r) for r in m.tool_results)
        recorded = self._state()
        if nxt is None and recorded is not None and not recorded.is_terminal:
            self.lack(f"the rest of the run: it had not finished when exported (it was {recorded.value})")
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
            outcome = c.text(sa, c.A_OUTCOME, self.lost)
            if outcome == "rejected" and span is not None:
                self.add(CallRejected, LoopState.VALIDATING, span.start_ns, call_id=p.call_id, name=p.name,
                         reason=c.choice(sa, c.A_REJECT, _REJECTS, self.lost) or "schema",
                         message=c.text(sa, c.TOOL_RESULT, self.lost) or "")
                continue
            if span is None and p.call_id not in later:
                self.lack("results of calls the trace does not answer (marked skipped)")
                self.add(CallRejected, LoopState.VALIDATING, at, call_id=p.call_id, name=p.name, reason="skipped",
                         message="(the trace holds no result for this call)")
                continue
            approval = c.choice(sa, c.A_DECISION, _DECISIONS, self.lost) is not None
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
        decision = c.choice(sa, c.A_DECISION, _DECISIONS, self.lost)
        if decision is not None:
            self.add(ApprovalRequested, LoopState.WAITING_APPROVAL, ns, approval_id=f"apr_{self.run_id}_{p.call_id}",
                     call_id=p.call_id, name=p.name, arguments=p.arguments or {},
                     arguments_digest=arguments_digest(p.name, p.arguments), risk="read",
                     kind=c.choice(sa, c.A_KIND, _KINDS, self.lost) or "approval")
        if decision in ("denied", "submitted") and span is not None:
            return  # the answer comes with the span's end
        if decision is not None:
            self.add(ApprovalResolved, LoopState.EXECUTING, ns, approval_id=f"apr_{self.run_id}_{p.call_id}",
                     call_id=p.call_id, decision="approved", by=c.text(sa, c.A_BY, self.lost),
                     note=c.text(sa, c.A_NOTE, self.lost))
        self.add(ToolStarted, LoopState.EXECUTING, ns, call_id=p.call_id, name=p.name)

    def _end(self, p: ToolCallPart, span: SpanRecord | None, result: ToolResultPart | None, ns: int) -> None:
        if span is None:
            assert result is not None
            self.add(ToolFinished, LoopState.EXECUTING, ns, call_id=p.call_id, name=p.name, status=result.status,
                     content=result.content, value=result.audit, duration_s=0.0)
            return
        sa = span.attributes
        decision = c.choice(sa, c.A_DECISION, _DECISIONS, self.lost)
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
                     by=c.text(sa, c.A_BY, self.lost), note=c.text(sa, c.A_NOTE, self.lost),
                     content=content if decision == "submitted" else None,
                     value=c.loads(content) if decision == "submitted" else None)
            return
        status = c.choice(sa, c.A_STATUS, _STATUSES, self.lost) or (
            "error" if span.status == "ERROR" or c.ERROR_TYPE in sa else "ok")
        self.add(ToolFinished, LoopState.EXECUTING, ns, call_id=p.call_id, name=p.name, status=status,
                 content=content, value=c.loads(raw), duration_s=max(0, span.end_ns - span.start_ns) / 1e9,
                 error_type=c.text(sa, c.ERROR_TYPE, self.lost) if status != "ok" else None,
                 error_message=span.status_message if status != "ok" else None)

    def _finish(self, verdict: dict[str, Any] | None = None) -> None:
        state = self.rs.state
        if state in TERMINAL or state is LoopState.NEW:
            return
        recorded = self._state()
        allowed = TRANSITIONS[state].get("RunFinished", frozenset())
        end = self.agent.end_ns if self.agent is not None else (self.chats[-1].end_ns if self.chats else 0)
        if recorded is not None and recorded in allowed:
            self.add(RunFinished, recorded, end, final=recorded, reason=self._text(c.A_REASON) or "",
                     output=self.a.get(c.A_OUTPUT))
        elif verdict is not None and verdict["final"] in allowed:
            output = verdict.get("output")
            self.add(RunFinished, verdict["final"], end, final=verdict["final"], reason=verdict["reason"],
                     output=output)
        elif self.agent is not None and self.agent.status == "ERROR" and LoopState.FAILED in allowed:
            self.add(RunFinished, LoopState.FAILED, end, final=LoopState.FAILED,
                     reason=self.agent.status_message or "the agent span ended with an error")
        elif self.rs.state is not LoopState.READY:
            self.lack("how the run ended (the trace stops in state " + state.value + ")")
