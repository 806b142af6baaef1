from __future__ import annotations

import pytest

from agentnb._engine import classify
from agentnb._messages import Message, ModelTurn, ReasoningPart, TextPart, ToolCallPart
from agentnb._request import ArgumentsDelta, RequestOptions
from agentnb.exceptions import ArgumentsTooLarge, WireFormatError
from agentnb.providers import gemini

from .wire_builders import (
    CUT,
    PARALLEL,
    REFUSAL,
    SINGLE,
    TEXT_AND_CALLS,
    Call,
    Spec,
    every,
    gemini_stream,
    results_for,
    roundtrip,
    same_turn,
    weather_tool,
)

NAME = "gemini"


def with_ids(turn: ModelTurn) -> ModelTurn:
    """What the driver does: give the id-less calls unique ids."""
    from dataclasses import replace

    parts = tuple(replace(p, call_id=f"gen_{i}") if isinstance(p, ToolCallPart) else p
                  for i, p in enumerate(turn.message.parts))
    return replace(turn, message=replace(turn.message, parts=parts))


@pytest.mark.parametrize("spec", [SINGLE, PARALLEL, TEXT_AND_CALLS, REFUSAL], ids=["single", "parallel", "text", "ref"])
def test_whole_and_stream_give_the_same_turn(spec: Spec) -> None:
    whole, streamed, items = roundtrip(NAME, spec, every(3))
    assert same_turn(whole, streamed)
    assert [i.index for i in items if isinstance(i, ArgumentsDelta)] == list(range(len(spec.calls)))
    assert all(c.call_id == "" for c in whole.message.tool_calls)


def test_stop_with_calls_runs_them_and_signatures_stay_on_their_parts() -> None:
    turn, _, _ = roundtrip(NAME, TEXT_AND_CALLS)
    assert turn.finish_reason_raw == "STOP" and turn.finish_reason == "tool_calls"
    assert classify(turn) is None
    turn = with_ids(turn)
    history = [Message.system("Be brief."), Message.user("Weather?"), turn.message,
               results_for(turn, error_for="gen_2"), Message.user("Go on.")]
    body = gemini.render_request(history, [weather_tool()], max_tokens=100,
                                 request_options=RequestOptions(tool_choice="required"))
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    contents = body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    model_parts = contents[1]["parts"]
    assert model_parts[0] == {"text": "Let me check both cities."}
    assert model_parts[1] == {"functionCall": {"name": "weather", "args": {"where": {"city": "Paris"}}},
                              "thoughtSignature": TEXT_AND_CALLS.signature}
    assert "thoughtSignature" not in model_parts[2]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "weather", "response": {"output": "result of gen_1"}}},
        {"functionResponse": {"name": "weather", "response": {"error": "result of gen_2"}}},
        {"text": "Go on."}]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["generationConfig"] == {"maxOutputTokens": 100}
    assert "secret" not in str(body)


def test_function_call_ids_travel_back_where_the_api_has_them() -> None:
    raw = {"candidates": [{"finishReason": "STOP", "content": {"role": "model", "parts": [
        {"functionCall": {"id": "fc-7", "name": "weather", "args": {"where": {"city": "Rome"}}}}]}}]}
    turn = gemini.parse_response(raw)
    assert turn.message.tool_calls[0].call_id == "fc-7"
    body = gemini.render_request([Message.user("x"), turn.message, results_for(turn)])
    assert body["contents"][1]["parts"][0]["functionCall"]["id"] == "fc-7"
    assert body["contents"][2]["parts"][0]["functionResponse"]["id"] == "fc-7"


def test_thoughts_are_reasoning_sent_back_and_never_answer_text() -> None:
    spec = Spec(reasoning="**Plan** call it.", text="Done.", signature="c2ln")
    whole, streamed, _ = roundtrip(NAME, spec, every(4))
    assert same_turn(whole, streamed)
    assert streamed.message.text == "Done."
    assert isinstance(streamed.message.parts[0], ReasoningPart)
    body = gemini.render_request([Message.user("x"), streamed.message])
    assert body["contents"][1]["parts"][0] == {"text": "**Plan** call it.", "thought": True}


def test_a_signature_on_a_trailing_empty_text_part_belongs_to_the_text() -> None:
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}}]} for t in ("Hel", "lo")]
    chunks.append({"candidates": [{"content": {"role": "model", "parts": [{"text": "", "thoughtSignature": "c2ln"}]},
                                   "finishReason": "STOP"}]})
    turn = list(gemini.parse_stream(chunks))[-1]
    assert turn.message.parts == (TextPart(text="Hello", provider_data={"gemini": {"thoughtSignature": "c2ln"}}),)
    assert gemini.render_request([turn.message])["contents"][0]["parts"] == [{"text": "Hello",
                                                                              "thoughtSignature": "c2ln"}]
    assert gemini.render_request([Message.user("x")])["contents"][0]["parts"] == [{"text": "x"}]


def test_refusal_cut_and_breaks() -> None:
    turn, _, _ = roundtrip(NAME, REFUSAL)
    assert turn.finish_reason == "content_filter"
    assert classify(turn).state.value == "REFUSED"  # type: ignore[union-attr]
    cut = Spec(text="Writ", calls=[Call("", "write_file", '{"path": "a.txt"}')], finish="length")
    whole, _, _ = roundtrip(NAME, cut)
    assert whole.finish_reason == "length"
    assert classify(whole).state.value == "INCOMPLETE"  # type: ignore[union-attr]
    turn = list(gemini.parse_stream(gemini_stream(SINGLE)[:-1]))[-1]
    assert not turn.complete
    assert classify(turn).state.value == "INCOMPLETE"  # type: ignore[union-attr]
    with pytest.raises(ArgumentsTooLarge):
        list(gemini.parse_stream(gemini_stream(SINGLE), max_argument_bytes=10))
    with pytest.raises(WireFormatError):
        gemini.parse_response({"error": {"code": 400}})
    blocked = gemini.parse_response({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})
    assert blocked.finish_reason == "content_filter"
    assert CUT.cut


def test_schema_dialect() -> None:
    tool = weather_tool()
    decl = gemini.render_tool(tool)
    params = decl["parameters"]
    assert "$defs" not in str(params) and "$ref" not in str(params)
    assert "additionalProperties" not in str(params) and "title" not in str(params)
    assert params["properties"]["where"]["properties"]["city"] == {"type": "string"}
    assert params["properties"]["days"] == {"type": "integer", "nullable": True}
    assert params["properties"]["units"] == {"type": "string", "enum": ["c", "f"]}
    assert params["required"] == ["where"]
    assert gemini.render_tool(tool, schema_dialect="json_schema")["parametersJsonSchema"] == tool.parameters
    from agentnb.events import ToolInfo

    noargs = ToolInfo(name="now", description="d", parameters={"type": "object", "properties": {},
                                                                "additionalProperties": False})
    assert "parameters" not in gemini.render_tool(noargs)
    recursive = {"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
                 "$ref": "#/$defs/N"}
    with pytest.raises(ValueError, match="recursive"):
        gemini.gemini_schema(recursive)
