"""Typed final outputs (``Loop(output_type=...)``): valid first time, corrected, failing, streamed, every SDK."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

import agentnb as anb
from agentnb._output import OutputSpec
from agentnb._states import LoopState as S
from agentnb.emulator import Emulator


class Invoice(pydantic.BaseModel):
    number: str
    total_cents: int = pydantic.Field(ge=0)


class Line(TypedDict):
    item: str
    qty: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


GOOD = {"name": "final_result", "arguments": {"number": "INV-7", "total_cents": 1999}}
BAD = {"name": "final_result", "arguments": {"number": "INV-7", "total_cents": -5}}


def checks(run: anb.Run) -> list[bool]:
    return [e.ok for e in run.events if e.type == "OutputValidated"]


def test_valid_first_time_gives_the_typed_object() -> None:
    run = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [GOOD]}]), output_type=Invoice).start("bill").run()
    assert run.state is S.COMPLETED and run.output == Invoice(number="INV-7", total_cents=1999)
    assert checks(run) == [True]
    started = run.events[0]
    assert [t.name for t in started.tools] == ["final_result"]  # offered to the model as a tool
    turns = run.transcript.frames.turns()
    assert turns["output_ok"].tolist() == [True] and '"INV-7"' in turns["output"].iloc[0]


def test_an_invalid_answer_is_corrected_with_its_errors() -> None:
    seen: list[str] = []

    def second(messages: list[anb.Message]) -> dict[str, Any]:
        seen.append(messages[-1].tool_results[0].content)
        return {"tool_calls": [GOOD]}

    run = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [BAD]}, second]), output_type=Invoice).start("b").run()
    assert run.state is S.COMPLETED and run.output.total_cents == 1999 and checks(run) == [False, True]
    assert "total_cents" in seen[0] and "greater than or equal to 0" in seen[0]
    rejected = next(e for e in run.events if e.type == "CallRejected")
    assert rejected.reason == "output"
    assert run.transcript.frames.calls()["reject_reason"].tolist()[0] == "output"


def test_failing_after_the_retries_ends_failed_with_the_reason() -> None:
    model = anb.ScriptedModel([{"tool_calls": [BAD]}] * 3)
    run = anb.Loop(model=model, output_type=Invoice, output_retries=1).start("b").run()
    assert run.state is S.FAILED and run.output is None
    assert "did not fit the output type after 2 attempts" in (run.reason or "") and "total_cents" in (run.reason or "")
    assert checks(run) == [False, False]  # every check is recorded; the second is final: no correction is owed
    last = [e for e in run.events if e.type == "OutputValidated"][-1]
    assert last.final and run.events[-1].type == "RunFinished" and run.events[-2] is last


def test_a_text_answer_counts_when_it_is_json_that_fits_and_is_corrected_when_not() -> None:
    ok = anb.Loop(model=anb.ScriptedModel([{"text": '```json\n{"number": "A", "total_cents": 1}\n```'}]),
                  output_type=Invoice).start("b").run()
    assert ok.state is S.COMPLETED and ok.output == Invoice(number="A", total_cents=1)
    notes: list[str] = []

    def after(messages: list[anb.Message]) -> dict[str, Any]:
        notes.append(messages[-1].text)
        return {"tool_calls": [GOOD]}

    fixed = anb.Loop(model=anb.ScriptedModel([{"text": "It is INV-7."}, after]), output_type=Invoice).start("b").run()
    assert fixed.state is S.COMPLETED and checks(fixed) == [False, True]
    assert "not JSON" in notes[0] and "final_result" in notes[0]


@pytest.mark.parametrize(("output_type", "arguments", "expected"), [
    (list[Invoice], {"result": [{"number": "a", "total_cents": 1}]}, [Invoice(number="a", total_cents=1)]),
    (Line, {"item": "kettle", "qty": "2"}, {"item": "kettle", "qty": 2}),
    (Point, {"x": 1, "y": 2.5}, Point(1.0, 2.5)),
    (int, {"result": 42}, 42),
    ({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, {"n": 3}, {"n": 3}),
])
def test_output_types(output_type: Any, arguments: dict[str, Any], expected: Any) -> None:
    call = {"name": "final_result", "arguments": arguments}
    run = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [call]}]), output_type=output_type).start("x").run()
    assert run.state is S.COMPLETED, run.reason
    assert run.output == expected


def test_a_json_schema_output_refuses_what_does_not_fit() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    calls = [{"tool_calls": [{"name": "final_result", "arguments": {"n": "three"}}]}] * 3
    run = anb.Loop(model=anb.ScriptedModel(calls), output_type=schema, output_retries=0).start("x").run()
    assert run.state is S.FAILED and "'three' is not of type 'integer'" in (run.reason or "")


def test_streamed_output_merges_fragments_and_is_validated_at_the_end() -> None:
    model = anb.ScriptedModel([{"tool_calls": [GOOD]}], stream=True)
    run = anb.Loop(model=model, output_type=Invoice).start("bill").run()
    kinds = [e.type for e in run.events]
    assert run.state is S.COMPLETED and "ArgumentsMerged" in kinds
    assert kinds.index("OutputValidated") > max(i for i, k in enumerate(kinds) if k == "ArgumentsMerged")


def test_the_output_type_survives_save_load_and_resume(tmp_path: Any) -> None:
    store = anb.SqliteStore(tmp_path / "o.db", key="output-test-key")
    loop = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [GOOD]}]), output_type=Invoice, store=store)
    run = loop.start("bill").run()
    again = anb.Run.resume(run.run_id, loop=loop)
    assert again.output == run.output == Invoice(number="INV-7", total_cents=1999)
    run.transcript.save(tmp_path / "o.jsonl")
    loaded = anb.Transcript.load(tmp_path / "o.jsonl")
    assert [e.type for e in loaded.events] == [e.type for e in run.events]


def test_a_tool_named_like_the_output_tool_is_refused() -> None:
    @anb.tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ValueError, match="output tool's name"):
        anb.Loop(model=anb.ScriptedModel([]), tools=[final_result], output_type=Invoice)


# -- the four SDKs through the emulator ----------------------------------------------------------------------

PROVIDERS = {
    "openai_chat": (anb.OpenAIChatModel, {"model": "gpt-4.1"}),
    "openai_responses": (anb.OpenAIResponsesModel, {"model": "gpt-5", "store": False}),
    "anthropic": (anb.AnthropicModel, {"model": "claude-sonnet-4-6"}),
    "gemini": (anb.GeminiModel, {"model": "gemini-3-pro-preview"}),
}


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_corrected_output_through_the_real_sdks(emu: Emulator, provider: str, stream: bool) -> None:
    cls, options = PROVIDERS[provider]
    emu.play([{"tool_calls": [BAD]}, {"tool_calls": [GOOD]}])
    start = len(emu.requests)
    model = cls(emu.client(provider), stream=stream, **options)
    run = anb.Loop(model=model, output_type=Invoice, output_mode="tool",
                   retry_base_delay=0).start("Bill order 7.").run()
    assert run.state is S.COMPLETED, (run.reason, [r.error for r in emu.requests[start:]])
    assert run.output == Invoice(number="INV-7", total_cents=1999) and checks(run) == [False, True]
    assert all(r.status == 200 for r in emu.requests[start:])  # every request, the correction's too, was valid


NATIVE_FIELD = {
    "openai_chat": lambda body: body["response_format"]["json_schema"],
    "openai_responses": lambda body: body["text"]["format"],
    "gemini": lambda body: (body.get("generationConfig") or body.get("generation_config") or {}),
    "anthropic": lambda body: body["output_config"]["format"],
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", list(NATIVE_FIELD))
def test_native_structured_output_where_the_wire_api_has_it(emu: Emulator, provider: str, stream: bool) -> None:
    cls, options = PROVIDERS[provider]
    emu.play([{"text": '{"number": "INV-7", "total_cents": -5}'}, {"text": '{"number": "INV-7", "total_cents": 1999}'}])
    start = len(emu.requests)
    model = cls(emu.client(provider), stream=stream, **options)
    run = anb.Loop(model=model, output_type=Invoice, retry_base_delay=0).start("Bill order 7.").run()
    assert run.state is S.COMPLETED, (run.reason, [r.error for r in emu.requests[start:]])
    assert run.output == Invoice(number="INV-7", total_cents=1999) and checks(run) == [False, True]
    body = emu.requests[start].body
    asked = NATIVE_FIELD[provider](body)
    schema = asked.get("schema") or asked.get("responseJsonSchema") or asked.get("response_json_schema")
    cents = schema["properties"]["total_cents"]
    if provider == "anthropic":  # JSON outputs take no numeric bounds: the bound is written for the model to read
        assert "minimum" not in cents and "{minimum: 0}" in cents["description"]
        assert schema["additionalProperties"] is False
    else:
        assert cents["minimum"] == 0  # the type's own schema went out
    assert "final_result" not in str(body.get("tools"))  # no output tool in native mode
    assert not any(e.type == "CallParsed" for e in run.events)


def test_anthropic_falls_back_to_the_output_tool_for_a_type_json_outputs_cannot_take(emu: Emulator) -> None:
    cls, options = PROVIDERS["anthropic"]
    model = cls(emu.client("anthropic"), **options)
    assert anb.Loop(model=model, output_type=Invoice).tool_infos == []  # JSON outputs: no output tool
    loop = anb.Loop(model=model, output_type=dict[str, int])  # free keys: no strict form, so the output tool
    assert [t.name for t in loop.tool_infos] == ["final_result"]
    emu.play([{"tool_calls": [{"name": "final_result", "arguments": {"a": 1}}]}])
    start = len(emu.requests)
    run = loop.start("Count.").run()
    assert run.state is S.COMPLETED and run.output == {"a": 1}
    assert "output_config" not in emu.requests[start].body
    with pytest.raises(ValueError, match="strict form"):
        anb.Loop(model=model, output_type=dict[str, int], output_mode="native")
    assert anb.Loop(model=model, output_type=Invoice, output_mode="tool").tool_infos


def test_the_emulator_refuses_a_malformed_json_output_request_as_anthropic_does(emu: Emulator) -> None:
    import anthropic

    client = emu.client("anthropic")
    for config, says in [({"format": {"type": "json", "schema": {}}}, "json_schema"),
                         ({"format": {"type": "json_schema"}}, "schema: Field required")]:
        with pytest.raises(anthropic.BadRequestError, match=says):
            client.messages.create(model="claude-sonnet-4-6", max_tokens=10, output_config=config,
                                   messages=[{"role": "user", "content": "Hi"}])


def test_native_strict_output_reads_null_as_the_default() -> None:
    class Query(pydantic.BaseModel):
        text: str
        limit: int = 5

    model = anb.ScriptedModel([{"text": '{"text": "kettle", "limit": null}'}])
    run = anb.Loop(model=model, output_type=Query, output_mode="native").start("q").run()
    assert run.state is S.COMPLETED and run.output == Query(text="kettle", limit=5)
    spec = run.loop.config.output
    assert spec is not None and spec.output_schema().strict is True
    assert spec.output_schema().schema["required"] == ["text", "limit"]


def test_native_mode_corrections_never_ask_for_the_output_tool_it_does_not_offer() -> None:
    tool_mode = OutputSpec.of(Invoice)
    native = OutputSpec.of(Invoice, native=True)
    assert "call final_result" in tool_mode.check_text("It is INV-7.")[2][0]["msg"]
    msg = native.check_text("It is INV-7.")[2][0]["msg"]
    assert "final_result" not in msg and "answer with JSON" in msg


def test_the_last_failed_check_is_recorded_too_as_final_for_text_answers() -> None:
    run = anb.Loop(model=anb.ScriptedModel([{"text": "It is INV-7."}] * 3), output_type=Invoice,
                   output_retries=1).start("b").run()
    assert run.state is S.FAILED and checks(run) == [False, False]
    first, last = [e for e in run.events if e.type == "OutputValidated"]
    assert not first.final and last.final and last.errors and "not JSON" in last.errors[0]["msg"]
    turns = run.transcript.frames.turns()
    assert turns["output_final"].tolist()[-1] is True and turns["output_ok"].tolist()[-1] is False
