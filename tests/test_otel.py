"""OpenTelemetry GenAI export and import: round trips through the SDK's in-memory exporter and OTLP/JSON files,
live export equal to export after the fact, content opt-in, secrets, and a real PydanticAI agent's trace."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentnb as anb
from agentnb.events import TurnCompleted

S = anb.LoopState


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    return tp, spans


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@anb.tool
def boom(x: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom on {x}")


@anb.tool(approval=True, risk="write")
def refund(order_id: str) -> str:
    """Refund an order (needs approval)."""
    return f"refunded {order_id}"


TOOLS = [add, boom, refund]

CALLS = st.sampled_from([
    {"name": "add", "arguments": {"a": 2, "b": 3}},
    {"name": "add", "arguments": {"a": "two", "b": 3}},  # schema violation: rejected
    {"name": "add", "arguments": '{"a": 2, "b":'},  # malformed JSON: rejected, never repaired
    {"name": "nope", "arguments": {}},  # unknown tool: rejected
    {"name": "boom", "arguments": {"x": "y"}},  # raises: an error result
    {"name": "refund", "arguments": {"order_id": "42"}},  # needs approval: denied (headless)
])
FINALS = st.sampled_from([
    {"text": "Done."},
    {"text": "Cut", "finish": "length"},
    {"refusal": "I will not."},
    {"text": "", "finish": "error"},
])


@st.composite
def scripts(draw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    turns = draw(st.lists(st.lists(CALLS, min_size=1, max_size=3), max_size=4))
    script: list[dict[str, Any]] = []
    for calls in turns:
        spec: dict[str, Any] = {"tool_calls": calls}
        if draw(st.booleans()):
            spec["text"] = "Let me check."
        script.append(spec)
    script.append(draw(FINALS))
    options = draw(st.sampled_from([{}, {"max_turns": 2, "on_max_turns": "stop"},
                                    {"max_turns": 2, "on_max_turns": "finalize"}]))
    return script, {**options, "stream": draw(st.booleans())}


def essence(t: anb.Transcript) -> dict[str, Any]:
    """What a round trip must keep: calls, results, usage, the states, and the end."""
    rs = t.fold()
    return {
        "calls": [(p.call_id, p.name, p.arguments) for m in t.messages for p in m.tool_calls],
        "results": [(p.call_id, p.name, p.status, p.content) for m in t.messages for p in m.tool_results],
        "usage": [(e.response.usage.input_tokens, e.response.usage.output_tokens, e.response.finish_reason)
                  for e in t.events if isinstance(e, TurnCompleted)],
        "states": [(e.type, e.state) for e in t.events if e.type not in ("TextMerged", "ArgumentsMerged")],
        "texts": [(m.role, m.text, m.refusal) for m in t.messages],
        "end": (rs.state, rs.output, rs.reason, rs.input_tokens, rs.output_tokens),
    }


def run_script(script: list[dict[str, Any]], *, stream: bool = False, tracer_provider: Any = None,
               **options: Any) -> anb.Run:
    model = anb.ScriptedModel(script, stream=stream, chunk_size=5)
    loop = anb.Loop(model=model, tools=TOOLS, headless=True, system="Be brief.", settings={"temperature": 0.2},
                    tracer_provider=tracer_provider, **options)
    return loop.start("Help me.").run()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_export_then_import_keeps_calls_results_usage_and_states(case: Any) -> None:
    script, options = case
    tp, spans = provider()
    run = run_script(script, tracer_provider=anb.otel.Tracing(tp, include_content=True), **options)
    assert run.done
    [back] = anb.import_trace(spans)
    assert essence(back) == essence(run.transcript)
    assert back.events[0].settings["lacks"] == []
    assert back.run_id == run.run_id
    # timings are kept to the microsecond the events have: the tool span runs from ToolStarted to ToolFinished
    started = {e.call_id: e.ts for e in run.events if e.type == "ToolStarted"}
    spans_s = {e.call_id: (e.ts - started[e.call_id]).total_seconds() for e in run.events if e.type == "ToolFinished"}
    assert {e.call_id: e.duration_s for e in back.events if e.type == "ToolFinished"} == spans_s
    timed = ("RunStarted", "ModelRequested", "TurnCompleted", "ToolStarted", "ToolFinished", "RunFinished")
    assert [(e.type, e.ts) for e in back.events if e.type in timed] == [
        (e.type, e.ts) for e in run.events if e.type in timed]


def test_every_outcome_round_trips_and_the_debugger_replays_it() -> None:
    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}},
                              {"name": "add", "arguments": {"a": "x", "b": 1}},
                              {"name": "nope", "arguments": {}}, {"name": "boom", "arguments": {"x": "y"}},
                              {"name": "refund", "arguments": {"order_id": "42"}}]},
              {"text": "5, and the rest failed."}]
    tp, spans = provider()
    run = run_script(script, tracer_provider=anb.otel.Tracing(tp, include_content=True))
    [back] = anb.import_trace(spans)
    statuses = [p.status for m in back.messages for p in m.tool_results]
    assert statuses == ["ok", "error", "error", "error", "denied"]
    assert essence(back) == essence(run.transcript)
    rejected = [e.reason for e in back.events if e.type == "CallRejected"]
    assert rejected == ["schema", "unknown_tool"]
    # the frames and the debugger read the imported run as they read the original
    assert back.frames.calls()["status"].tolist() == run.transcript.frames.calls()["status"].tolist()
    assert back.frames.turns()["input_tokens"].tolist() == run.transcript.frames.turns()["input_tokens"].tolist()
    dbg = anb.Debugger(back)
    assert dbg is not None


def span_view(spans: list[ReadableSpan]) -> list[tuple[Any, ...]]:
    return [(s.name, s.kind, s.start_time, s.end_time, dict(s.attributes or {}), s.status.status_code,
             [(e.name, e.timestamp, dict(e.attributes or {})) for e in s.events]) for s in spans]


def test_live_export_writes_the_same_spans_as_export_after_the_fact() -> None:
    tp, live = provider()
    run = anb.Loop(model=anb.ScriptedModel.story("parallel", stream=True), tools=anb.stories.tools("parallel"),
                   tracer_provider=anb.otel.Tracing(tp, include_content=True)).start("Weather?").run()
    tp2, later = provider()
    assert anb.otel.export(run.transcript, tp2, include_content=True) == len(run.events)
    a, b = live.get_finished_spans(), later.get_finished_spans()
    assert sorted(span_view(list(a)), key=repr) == sorted(span_view(list(b)), key=repr)
    names = [s.name for s in a]
    assert names.count("execute_tool get_weather") == 3 and names[-1] == "invoke_agent agentnb"
    chat = next(s for s in a if s.name.startswith("chat"))
    assert chat.attributes["gen_ai.response.time_to_first_chunk"] >= 0  # streamed turns
    agent = a[-1]
    assert all(s.parent is not None and s.parent.span_id == agent.context.span_id for s in a[:-1])
    assert agent.attributes["gen_ai.usage.input_tokens"] == run.view.input_tokens


def test_content_is_opt_in_and_an_import_says_what_it_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    tp, spans = provider()
    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"),
                   tracer_provider=tp).start("Weather in Paris?").run()
    content_keys = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.tool.definitions",
                    "agentnb._output"}
    for s in spans.get_finished_spans():
        assert not content_keys & set(s.attributes or {}), s.name
        assert "Paris" not in json.dumps(dict(s.attributes or {}))
    [back] = anb.import_trace(spans)
    lacks = back.events[0].settings["lacks"]
    assert any("message content" in x for x in lacks) and any("tool results" in x for x in lacks)
    # what the trace has is kept: the turns, their usage, the call and its timing, the end
    assert essence(back)["usage"] == essence(run.transcript)["usage"]
    assert [(p.call_id, p.name) for m in back.messages for p in m.tool_calls] == [
        (p.call_id, p.name) for m in run.messages for p in m.tool_calls]
    assert back.state is S.COMPLETED

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    tp, spans = provider()
    anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"),
             tracer_provider=tp).start("Weather in Paris?").run()
    assert "gen_ai.input.messages" in spans.get_finished_spans()[0].attributes


def test_otlp_json_files_round_trip_hex_and_base64_ids(tmp_path: Path) -> None:
    tp, spans = provider()
    tracing = anb.otel.Tracing(tp, include_content=True)
    runs = [run_script([{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]}, {"text": f"={i + 1}"}],
                       tracer_provider=tracing) for i in range(2)]
    doc = anb.otel.to_otlp_json(spans.get_finished_spans())
    # as a Collector's file exporter writes them: one export request per line, here one per run
    path = tmp_path / "traces.jsonl"
    first, second = (dict(doc, resourceSpans=[{**doc["resourceSpans"][0], "scopeSpans": [
        {**doc["resourceSpans"][0]["scopeSpans"][0], "spans": part}]}]) for part in _by_trace(doc))
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    back = anb.import_trace(path)
    assert [essence(t) for t in back] == [essence(r.transcript) for r in runs]
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and isinstance(span["startTimeUnixNano"], str)
    assert {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}} in span["attributes"]
    # protobuf's own JSON mapping writes ids in base64; they are read too
    for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if s[key]:
                s[key] = base64.b64encode(bytes.fromhex(s[key])).decode()
    assert [essence(t) for t in anb.import_trace(json.dumps(doc))] == [essence(r.transcript) for r in runs]


def _by_trace(doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        groups.setdefault(s["traceId"], []).append(s)
    return list(groups.values())


def test_no_secret_reaches_a_span() -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8" * 2

    @anb.tool
    def leak(x: str) -> str:
        """Returns a credential, as a careless tool might."""
        return f"token={key} Authorization: Bearer abc.def.ghi"

    tp, spans = provider()
    model = anb.ScriptedModel([{"tool_calls": [{"name": "leak", "arguments": {"x": key}}]},
                               {"text": f"the key is {key}"}])
    anb.Loop(model=model, tools=[leak], settings={"extra_headers": {"Authorization": f"Bearer {key}"}},
             tracer_provider=anb.otel.Tracing(tp, include_content=True)).start(f"use {key}").run()
    text = json.dumps(anb.otel.to_otlp_json(spans.get_finished_spans()))
    assert key not in text and "abc.def.ghi" not in text
    assert "[REDACTED]" in text


def test_a_real_pydantic_ai_agent_trace_imports_with_its_turns_calls_and_results() -> None:
    pydantic_ai = pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    def script(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="c1"),
                                        ToolCallPart("get_weather", {"city": "Atlantis"}, tool_call_id="c2")])
        return ModelResponse(parts=[TextPart("Paris: 18 C; Atlantis: unknown.")])

    tp, spans = provider()
    agent = pydantic_ai.Agent(FunctionModel(script), instructions="Be brief.")
    agent.instrument = InstrumentationSettings(tracer_provider=tp)

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        if city == "Atlantis":
            raise pydantic_ai.ModelRetry("no such city")
        return {"city": city, "temp_c": 18}

    result = agent.run_sync("Weather in Paris and Atlantis?")
    [t] = anb.import_trace(spans)
    history = result.all_messages()
    responses = [m for m in history if m.kind == "response"]
    frames = t.frames
    assert len(frames.turns()) == len(responses) == 2
    assert frames.turns()["input_tokens"].tolist() == [m.usage.input_tokens for m in responses]
    assert sum(frames.turns()["output_tokens"]) == result.usage.output_tokens
    framework_calls = [(p.tool_call_id, p.tool_name, p.args) for m in responses for p in m.parts
                       if p.part_kind == "tool-call"]
    assert [(p.call_id, p.name, p.arguments) for m in t.messages for p in m.tool_calls] == framework_calls
    returns = {p.tool_call_id: p for m in history if m.kind == "request" for p in m.parts
               if p.part_kind in ("tool-return", "retry-prompt")}
    results = {p.call_id: p for m in t.messages for p in m.tool_results}
    assert results["c1"].status == "ok" and results["c1"].audit == returns["c1"].content
    # the framework told the model the call failed (a retry prompt, or a return whose outcome is not "success")
    assert getattr(returns["c2"], "outcome", "retried") in ("failed", "retried")
    assert results["c2"].status == "error" and "no such city" in results["c2"].content
    assert t.state is S.COMPLETED and t.fold().output == result.output
    assert t.messages[0].role == "system" and t.messages[0].text == "Be brief."
    assert frames.calls()["duration_s"].notna().all()


def test_a_paused_run_exports_closed_spans_and_imports_without_inventing_the_rest() -> None:
    run = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund")).start("Refund 42").run()
    assert run.state is S.WAITING_APPROVAL
    tp, spans = provider()
    anb.otel.export(run.transcript, tp, include_content=True)
    agent = spans.get_finished_spans()[-1]
    assert agent.name == "invoke_agent agentnb" and agent.attributes["agentnb.state"] == "WAITING_APPROVAL"
    [back] = anb.import_trace(spans)
    assert not back.state.is_terminal
    assert any("had not finished" in x for x in back.events[0].settings["lacks"])
    # nothing after the pause is made up: no result for the call that waits
    waiting = run.pending_approvals()[0].call_id
    assert waiting not in {p.call_id for m in back.messages for p in m.tool_results}
    assert [p.call_id for m in back.messages for p in m.tool_calls] == [
        p.call_id for m in run.messages for p in m.tool_calls]


def test_chat_spans_hold_what_is_new_and_a_compression_writes_the_conversation_again() -> None:
    from agentnb._engine import RunState

    script: list[dict[str, Any]] = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]}
                                    for i in range(8)]
    budget = anb.Budget(context_window=400, compress_at=0.5, keep_pairs=1, max_no_progress=None, max_turns=12)
    tp, spans = provider()
    model = anb.ScriptedModel([*script, {"text": "Done."}])
    loop = anb.Loop(model=model, tools=TOOLS, system="Be brief.", budget=budget,
                    tracer_provider=anb.otel.Tracing(tp, include_content=True))
    run = loop.start("Help me.").run()
    assert run.state is S.COMPLETED and any(e.type == "CompressionApplied" for e in run.events)
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    sent = [ev.seq for ev in run.events if ev.type == "ModelRequested"]
    assert len(chats) == len(sent)
    written = 0
    for chat, seq in zip(chats, sent, strict=True):
        attrs = chat.attributes or {}
        inputs = json.loads(str(attrs["gen_ai.input.messages"]))
        start = attrs["agentnb.input.from"]
        assert isinstance(start, int)
        request = RunState.fold(run.events[:seq + 1]).messages  # what the run sent with this request
        assert request[0].role == "system" and json.loads(str(attrs["gen_ai.system_instructions"]))
        assert [m["role"] for m in inputs] == [m.role for m in request[1 + start:]]
        assert isinstance(inputs, list) and all(set(m) == {"role", "parts"} for m in inputs)
        written += len(inputs)
    starts = [(c.attributes or {})["agentnb.input.from"] for c in chats]
    assert starts[0] == 0 and 0 in starts[1:]  # the first request, and one after the compression, hold it all
    assert written < sum(len(RunState.fold(run.events[:seq + 1]).messages) for seq in sent) // 2
    [back] = anb.import_trace(spans)
    assert essence(back) == essence(run.transcript)
    assert [m.role for m in back.messages] == [m.role for m in run.messages]
