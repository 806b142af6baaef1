from __future__ import annotations

import pytest

from agentnb._engine import classify
from agentnb._messages import Message, ReasoningPart
from agentnb._request import ArgumentsDelta, RequestOptions
from agentnb.exceptions import ArgumentsTooLarge, StreamProtocolError, WireFormatError
from agentnb.providers import openai_responses

from .wire_builders import (
    CUT,
    PARALLEL,
    REFUSAL,
    SINGLE,
    TEXT_AND_CALLS,
    Call,
    Spec,
    every,
    responses_stream,
    results_for,
    roundtrip,
    same_turn,
    weather_tool,
)

NAME = "openai_responses"


@pytest.mark.parametrize("spec", [SINGLE, PARALLEL, TEXT_AND_CALLS, REFUSAL], ids=["single", "parallel", "text", "ref"])
def test_whole_and_stream_give_the_same_turn(spec: Spec) -> None:
    whole, streamed, items = roundtrip(NAME, spec, every(3))
    assert same_turn(whole, streamed)
    calls = whole.message.tool_calls
    assert [(c.call_id, c.provider_id) for c in calls] == [(c.id, f"fc_{i}") for i, c in enumerate(spec.calls)]
    firsts = [i for i in items if isinstance(i, ArgumentsDelta) and i.call_id]
    assert [i.index for i in firsts] == list(range(len(spec.calls)))


def test_results_reference_call_id_not_item_id() -> None:
    turn, _, _ = roundtrip(NAME, TEXT_AND_CALLS)
    history = [Message.system("Be brief."), Message.user("Weather?"), turn.message, results_for(turn)]
    body = openai_responses.render_request(history, [weather_tool()], model="gpt-5",
                                           request_options=RequestOptions(tool_choice="required"))
    assert body["instructions"] == "Be brief."
    items = body["input"]
    assert [i.get("type") for i in items] == ["message", "message", "function_call", "function_call",
                                              "function_call_output", "function_call_output"]
    assert items[1]["id"] == "msg_1" and items[1]["content"][0]["text"] == "Let me check both cities."
    assert [(i["call_id"], i["id"]) for i in items[2:4]] == [("call_1", "fc_0"), ("call_2", "fc_1")]
    assert [(i["call_id"], i["output"]) for i in items[4:]] == [("call_1", "result of call_1"),
                                                                ("call_2", "result of call_2")]
    assert body["tools"][0]["strict"] is False and body["tool_choice"] == "required"
    assert "secret" not in str(body)


def test_reasoning_item_goes_back_unchanged_with_the_last_encrypted_content() -> None:
    spec = Spec(reasoning="Think.", calls=SINGLE.calls)
    whole, streamed, _ = roundtrip(NAME, spec, every(2))
    assert same_turn(whole, streamed)
    part = streamed.message.parts[0]
    assert isinstance(part, ReasoningPart) and part.data["encrypted_content"] == "enc-final"
    assert part.text == "Think."
    body = openai_responses.render_request([Message.user("x"), streamed.message, results_for(streamed)])
    assert body["input"][1] == part.data
    assert body["input"][2]["type"] == "function_call"


def test_refusal_and_cut() -> None:
    turn, _, _ = roundtrip(NAME, REFUSAL)
    assert turn.message.refusal == REFUSAL.refusal and turn.finish_reason == "refusal"
    whole, streamed, _ = roundtrip(NAME, CUT, every(4))
    assert whole.finish_reason == "length" and whole.finish_reason_raw == "incomplete"
    assert streamed.finish_reason == "length" and streamed.message.tool_calls[0].arguments is None
    assert streamed.message.tool_calls[0].arguments_raw == CUT.calls[0].args
    assert classify(streamed).state.value == "INCOMPLETE"  # type: ignore[union-attr]


def test_restated_arguments_are_checked_not_appended() -> None:
    events = responses_stream(SINGLE, every(4))
    turn = list(openai_responses.parse_stream(events))[-1]
    assert turn.message.tool_calls[0].arguments_raw == SINGLE.calls[0].args  # not doubled
    bad = [dict(e, arguments='{"where": {"city": "Rome"}}')
           if e["type"] == "response.function_call_arguments.done" else e for e in events]
    with pytest.raises(StreamProtocolError, match="restates arguments"):
        list(openai_responses.parse_stream(bad))


def test_an_item_at_a_taken_output_index_is_an_error() -> None:
    events = responses_stream(PARALLEL)
    added = [e for e in events if e["type"] == "response.output_item.added"]
    clash = {**added[1], "output_index": 0}
    with pytest.raises(StreamProtocolError, match="already taken"):
        list(openai_responses.parse_stream([*events[:3], clash]))


def test_byte_cap_truncation_and_errors() -> None:
    big = Spec(calls=[Call("call_big", "f", '{"s": "' + "x" * 5000 + '"}')])
    with pytest.raises(ArgumentsTooLarge):
        list(openai_responses.parse_stream(responses_stream(big, every(8)), max_argument_bytes=4096))
    events = responses_stream(SINGLE, every(3))
    turn = list(openai_responses.parse_stream(events[:-3]))[-1]
    assert not turn.complete and turn.message.tool_calls[0].arguments is None
    turn = list(openai_responses.parse_stream([*events[:3], {"type": "error", "message": "server_error"}]))[-1]
    assert not turn.complete and "server_error" in (turn.incomplete_reason or "")
    with pytest.raises(WireFormatError):
        openai_responses.parse_response({"error": {"message": "bad"}})
