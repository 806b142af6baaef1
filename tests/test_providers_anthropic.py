from __future__ import annotations

from typing import Any

import pytest

from agentnb._engine import classify
from agentnb._messages import Message, ReasoningPart, TextPart, ToolResultPart
from agentnb._request import ArgumentsDelta, NamedTool, RequestOptions
from agentnb.exceptions import ArgumentsTooLarge, StreamProtocolError, WireFormatError
from agentnb.providers import anthropic

from .wire_builders import (
    CUT,
    PARALLEL,
    REFUSAL,
    SINGLE,
    TEXT_AND_CALLS,
    Call,
    Spec,
    anthropic_stream,
    every,
    results_for,
    roundtrip,
    same_turn,
    weather_tool,
)

NAME = "anthropic"


@pytest.mark.parametrize("spec", [SINGLE, PARALLEL, TEXT_AND_CALLS, REFUSAL], ids=["single", "parallel", "text", "ref"])
def test_whole_and_stream_give_the_same_turn(spec: Spec) -> None:
    whole, streamed, items = roundtrip(NAME, spec, every(3))
    assert same_turn(whole, streamed)
    firsts = [i for i in items if isinstance(i, ArgumentsDelta) and i.call_id]
    assert [(i.index, i.call_id) for i in firsts] == [(n, c.id) for n, c in enumerate(spec.calls)]


def test_results_are_tool_result_blocks_first_in_the_next_user_message() -> None:
    turn, _, _ = roundtrip(NAME, TEXT_AND_CALLS)
    history = [Message.system("Be brief."), Message.user("Weather?"), turn.message,
               results_for(turn, error_for="call_2"), Message.user("Answer now.")]
    body = anthropic.render_request(history, [weather_tool()], model="claude",
                                    request_options=RequestOptions(parallel_tool_calls=False))
    assert body["system"] == "Be brief." and body["max_tokens"] == 4096
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert [b["type"] for b in msgs[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert msgs[1]["content"][1]["input"] == {"where": {"city": "Paris"}}
    assert [(b["type"], b.get("tool_use_id"), b.get("is_error")) for b in msgs[2]["content"]] == [
        ("tool_result", "call_1", False), ("tool_result", "call_2", True), ("text", None, None)]
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert body["tools"][0]["input_schema"] == weather_tool().parameters
    assert "secret" not in str(body)


def test_thinking_goes_back_unchanged_with_its_signature() -> None:
    spec = Spec(reasoning="Paris first.", calls=SINGLE.calls)
    whole, streamed, _ = roundtrip(NAME, spec, every(2))
    assert same_turn(whole, streamed)
    part = streamed.message.parts[0]
    assert isinstance(part, ReasoningPart)
    assert part.data == {"type": "thinking", "thinking": "Paris first.", "signature": spec.signature}
    body = anthropic.render_request([Message.user("x"), streamed.message, results_for(streamed)])
    assert body["messages"][1]["content"][0] == part.data
    redacted = Message(role="assistant", parts=(
        ReasoningPart(provider="anthropic", data={"type": "redacted_thinking", "data": "opaque"}),
        TextPart(text=""), ReasoningPart(provider="gemini", text="t", data={"thoughtSignature": "x"})))
    assert anthropic.render_request([Message.user("x"), redacted])["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "opaque"}]


def test_refusal_and_max_tokens_cut() -> None:
    turn, _, _ = roundtrip(NAME, REFUSAL)
    assert turn.finish_reason == "refusal"
    assert classify(turn).state.value == "REFUSED"  # type: ignore[union-attr]
    whole, streamed, _ = roundtrip(NAME, Spec(text=CUT.text, calls=CUT.calls[:0] + [
        Call("call_9", "write_file", '{"path": "a.txt"}')], finish="length"))
    assert whole.finish_reason == "length"
    _, cut, _ = roundtrip(NAME, CUT, every(4))
    call = cut.message.tool_calls[0]
    assert cut.complete and cut.finish_reason == "length" and call.arguments is None
    assert call.arguments_raw == CUT.calls[0].args
    assert classify(cut).state.value == "INCOMPLETE"  # type: ignore[union-attr]


def test_protocol_errors_byte_cap_and_breaks() -> None:
    events = anthropic_stream(SINGLE, every(3))
    start = next(e for e in events if e["type"] == "content_block_start")
    with pytest.raises(StreamProtocolError, match="already open"):
        list(anthropic.parse_stream([*events[:2], start]))
    with pytest.raises(StreamProtocolError, match="never started"):
        list(anthropic.parse_stream([events[0], {"type": "content_block_delta", "index": 5,
                                                 "delta": {"type": "text_delta", "text": "x"}}]))
    big = Spec(calls=[Call("toolu_big", "f", '{"s": "' + "x" * 5000 + '"}')])
    with pytest.raises(ArgumentsTooLarge):
        list(anthropic.parse_stream(anthropic_stream(big, every(8)), max_argument_bytes=4096))
    turn = list(anthropic.parse_stream(events[:-3]))[-1]
    assert not turn.complete and turn.message.tool_calls[0].arguments is None
    turn = list(anthropic.parse_stream([*events[:3], {"type": "error", "error": {"type": "overloaded_error"}}]))[-1]
    assert not turn.complete and "overloaded_error" in (turn.incomplete_reason or "")
    with pytest.raises(WireFormatError):
        anthropic.parse_response({"type": "error", "error": {"type": "invalid_request_error"}})


def test_tool_choice_mapping() -> None:
    tools = [weather_tool()]
    render = anthropic.render_request
    def choice(c: Any) -> Any:
        return render([Message.user("x")], tools, request_options=RequestOptions(tool_choice=c))["tool_choice"]

    assert choice("required") == {"type": "any"}
    assert choice("none") == {"type": "none"}
    assert choice(NamedTool("weather")) == {"type": "tool", "name": "weather"}
    with pytest.raises(ValueError, match="request option"):  # the untyped setting is refused, not sent raw
        render([Message.user("x")], tools, tool_choice="none")
    assert render([Message.user("x")], stop="END")["stop_sequences"] == ["END"]
    with pytest.raises(ValueError, match="at the start"):
        render([Message.user("x"), Message.system("late")])
    only_results = render([Message(role="tool", parts=(ToolResultPart(call_id="t", name="f", status="denied",
                                                                      content="Denied by the user."),))])
    assert only_results["messages"][0]["content"][0]["is_error"] is True


def test_json_outputs_and_strict_tools_get_the_subset_of_json_schema_anthropic_takes() -> None:
    from agentnb.providers.anthropic._adapter import json_output_schema

    schema = {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 8},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 2},
        "when": {"type": "string", "format": "date"},
        "kind": {"oneOf": [{"const": "a"}, {"type": "null"}]}}, "required": ["n"], "additionalProperties": True}
    out = json_output_schema(schema)
    assert out["additionalProperties"] is False and out["required"] == ["n"]
    assert out["properties"]["n"] == {"type": "integer", "description": "{minimum: 1, maximum: 8}"}
    assert out["properties"]["tags"]["description"] == "{minItems: 2}"
    assert out["properties"]["tags"]["items"]["description"] == "{pattern: ^[a-z]+$}"
    assert out["properties"]["when"] == {"type": "string", "format": "date"}
    assert out["properties"]["kind"] == {"anyOf": [{"const": "a"}, {"type": "null"}]}
    assert schema["properties"]["n"]["minimum"] == 1  # the tool's own schema is left as it was
