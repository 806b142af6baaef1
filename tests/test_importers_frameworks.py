"""Framework histories and traces, captured from the real libraries: PydanticAI (FunctionModel, TestModel),
the OpenAI Agents SDK (a scripted model, its tracing processor) and LangChain (messages_to_dict)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import agentnb as anb

S = anb.LoopState


def calls_of(messages: list[anb.Message]) -> list[tuple[str, str, Any]]:
    return [(p.call_id, p.name, p.arguments) for m in messages for p in m.tool_calls]


def results_of(messages: list[anb.Message]) -> list[tuple[str, str, str]]:
    return [(p.call_id, p.status, p.content) for m in messages for p in m.tool_results]


# -- PydanticAI ------------------------------------------------------------------------------------------------


def weather_agent(model: Any) -> Any:
    pydantic_ai = pytest.importorskip("pydantic_ai")
    agent = pydantic_ai.Agent(model, instructions="Be brief.")

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        if city == "Atlantis":
            raise pydantic_ai.ModelRetry("no such city")
        return {"city": city, "temp_c": 18}

    return agent


def function_model() -> Any:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def script(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="c1"),
                                        ToolCallPart("get_weather", {"city": "Atlantis"}, tool_call_id="c2")])
        return ModelResponse(parts=[TextPart("Paris: 18 C; Atlantis: unknown.")])

    return FunctionModel(script)


def test_pydantic_ai_history_objects_and_json_import_alike() -> None:
    result = weather_agent(function_model()).run_sync("Weather in Paris and Atlantis?")
    history = result.all_messages()
    from_objects = anb.import_history(history, format="pydantic_ai")
    from_json = anb.import_history(result.all_messages_json(), format="pydantic_ai")
    assert from_objects.messages == from_json.messages and from_objects.ok and from_objects.findings == []
    msgs = from_objects.messages
    responses = [m for m in history if m.kind == "response"]
    assert len([m for m in msgs if m.role == "assistant"]) == len(responses) == 2
    assert calls_of(msgs) == [(p.tool_call_id, p.tool_name, p.args) for m in responses for p in m.parts
                              if p.part_kind == "tool-call"]
    statuses = {cid: status for cid, status, _ in results_of(msgs)}
    assert statuses == {"c1": "ok", "c2": "error"}
    assert msgs[0].role == "system" and msgs[0].text == "Be brief."
    assert msgs[-1].text == result.output
    t = from_objects.transcript
    assert t.state is S.READY and t.events[0].model == "pydantic_ai:function:script:"
    assert t.frames.calls()["origin"].tolist() == ["history", "history"]


def test_pydantic_ai_test_model_trace_and_history_agree() -> None:
    pytest.importorskip("pydantic_ai")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    spans, tp = InMemorySpanExporter(), TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    agent = weather_agent(TestModel())
    agent.instrument = InstrumentationSettings(tracer_provider=tp)
    result = agent.run_sync("Weather?")
    history = anb.import_history(result.all_messages(), format="pydantic_ai")
    [trace] = anb.import_trace(spans)
    assert calls_of(trace.messages) == calls_of(history.messages) != []
    assert [s for _, s, _ in results_of(trace.messages)] == [s for _, s, _ in results_of(history.messages)]
    assert trace.fold().output == result.output == history.messages[-1].text
    assert trace.fold().input_tokens == result.usage.input_tokens
    assert trace.fold().output_tokens == result.usage.output_tokens


def test_pydantic_ai_history_findings_point_at_the_input_item() -> None:
    result = weather_agent(function_model()).run_sync("Weather in Paris and Atlantis?")
    items = json.loads(result.all_messages_json())
    del items[2]  # the request holding both results: the calls are left unanswered
    out = anb.import_history(items, format="pydantic_ai")
    assert not out.ok
    assert {(f.code, f.index) for f in out.findings} == {("unanswered_call", 1)}
    items.append({"kind": "banana"})
    assert ("unknown_role", len(items) - 1) in {(f.code, f.index) for f in
                                                 anb.import_history(items, format="pydantic_ai").findings}


# -- OpenAI Agents SDK -----------------------------------------------------------------------------------------


@pytest.fixture
def agents_trace() -> Iterator[Any]:
    agents = pytest.importorskip("agents")
    from agentnb.importers import AgentsTraceCollector

    collector = AgentsTraceCollector()
    agents.set_trace_processors([collector])  # no exporter to the network: only ours
    yield collector
    agents.set_trace_processors([])


def scripted_agents_model() -> Any:
    from agents import generation_span
    from agents.items import ModelResponse
    from agents.models.chatcmpl_converter import Converter
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        """Plays two turns, and writes its generation spans as the SDK's chat-completions model does."""

        def __init__(self) -> None:
            self.n = 0

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                               output_schema: Any, handoffs: Any, tracing: Any, **_: Any) -> ModelResponse:
            self.n += 1
            sent = [{"role": "system", "content": system_instructions}, *Converter.items_to_messages(input)]
            usage = Usage(requests=1, input_tokens=10 * self.n, output_tokens=5)
            out: list[Any]
            if self.n == 1:
                out = [ResponseFunctionToolCall(type="function_call", call_id=f"c{i}", name="get_weather",
                                                arguments=json.dumps({"city": city}), id=f"fc{i}",
                                                status="completed")
                       for i, city in enumerate(["Paris", "Oslo"])]
                answer = [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": o.call_id, "type": "function", "function": {"name": o.name, "arguments": o.arguments}}
                    for o in out]}]
            else:
                out = [ResponseOutputMessage(type="message", id="m1", role="assistant", status="completed",
                                             content=[ResponseOutputText(type="output_text", annotations=[],
                                                                         text="Paris 18 C, Oslo 4 C.")])]
                answer = [{"role": "assistant", "content": "Paris 18 C, Oslo 4 C."}]
            with generation_span(input=sent, output=answer, model="scripted",
                                 usage={"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}):
                pass
            return ModelResponse(output=out, usage=usage, response_id=f"resp_{self.n}")

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    return Scripted()


def test_openai_agents_history_and_trace(agents_trace: Any) -> None:
    from agents import Agent, Runner, function_tool

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return json.dumps({"city": city, "temp_c": 18 if city == "Paris" else 4})

    agent = Agent(name="weather", instructions="Be brief.", model=scripted_agents_model(), tools=[get_weather])
    result = Runner.run_sync(agent, "Weather in Paris and Oslo?")
    items = result.to_input_list()

    history = anb.import_history(items, format="openai_agents", instructions="Be brief.")
    assert history.format == "openai_agents" and history.ok
    assert history.transcript.events[0].settings["imported_from"] == "openai_agents"
    framework_calls = [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in items
                       if i.get("type") == "function_call"]
    framework_outputs = [(i["call_id"], "ok", i["output"]) for i in items if i.get("type") == "function_call_output"]
    assert calls_of(history.messages) == framework_calls
    assert results_of(history.messages) == framework_outputs
    assert history.messages[-1].text == result.final_output

    [trace] = anb.import_trace(agents_trace)
    assert trace.events[0].settings["agent"] == "weather"
    assert calls_of(trace.messages) == framework_calls
    assert [(cid, status, json.loads(c)) for cid, status, c in results_of(trace.messages)] == [
        (cid, status, json.loads(c)) for cid, status, c in framework_outputs]
    turns = trace.frames.turns()
    assert len(turns) == len(result.raw_responses) == 2
    assert turns["input_tokens"].tolist() == [r.usage.input_tokens for r in result.raw_responses]
    assert trace.state is S.COMPLETED and trace.fold().output == result.final_output
    assert trace.frames.calls()["duration_s"].gt(0).all()  # from the SDK's function spans, matched by name


# -- LangChain -------------------------------------------------------------------------------------------------


def test_langchain_messages_to_dict() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    messages = [
        lc.SystemMessage("Be brief."),
        lc.HumanMessage("Weather in Paris?"),
        lc.AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}],
                     invalid_tool_calls=[{"name": "get_weather", "args": '{"city": ', "id": "c2", "error": "bad",
                                          "type": "invalid_tool_call"}],
                     usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
                     response_metadata={"model_name": "gpt-test"}),
        lc.ToolMessage('{"temp_c": 18}', tool_call_id="c1"),
        lc.ToolMessage("could not parse the arguments", tool_call_id="c2", status="error"),
        lc.AIMessage("18 C in Paris."),
    ]
    dicts = lc.messages_to_dict(messages)
    out = anb.import_history(dicts, format="langchain")
    assert anb.import_history(messages, format="langchain").messages == out.messages  # objects import alike
    assert [m.role for m in out.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert calls_of(out.messages) == [("c1", "get_weather", {"city": "Paris"}), ("c2", "get_weather", None)]
    assert results_of(out.messages) == [("c1", "ok", '{"temp_c": 18}'),
                                        ("c2", "error", "could not parse the arguments")]
    assert [f.code for f in out.findings] == ["invalid_arguments"] and out.ok  # a warning: kept as written
    assert out.transcript.events[0].model == "langchain:gpt-test"

    orphan = [*dicts, lc.messages_to_dict([lc.ToolMessage("?", tool_call_id="c9")])[0]]
    found = anb.import_history(orphan, format="langchain").findings
    assert ("orphan_result", len(orphan) - 1) in {(f.code, f.index) for f in found}


def test_provider_formats_still_import_and_unknown_formats_say_what_exists() -> None:
    out = anb.import_history([{"role": "user", "content": "Hi"}], "openai_chat")
    assert out.format == "openai_chat" and out.messages[0].text == "Hi"
    with pytest.raises(ValueError, match="pydantic_ai, openai_agents, langchain"):
        anb.import_history([], "crewai")  # type: ignore[arg-type]
