from __future__ import annotations

import pytest

from agentnb._engine import classify
from agentnb._messages import Message, ReasoningPart, ToolCallPart
from agentnb._request import ArgumentsDelta, NamedTool, RequestOptions, TextDelta, tool_choice_of
from agentnb.exceptions import ArgumentsTooLarge, StreamProtocolError, WireFormatError
from agentnb.providers import openai_chat

from .wire_builders import (
    CUT,
    PARALLEL,
    REFUSAL,
    SINGLE,
    TEXT_AND_CALLS,
    Call,
    Spec,
    chat_stream,
    every,
    results_for,
    roundtrip,
    same_turn,
    weather_tool,
)

NAME = "openai_chat"


@pytest.mark.parametrize("spec", [SINGLE, PARALLEL, TEXT_AND_CALLS, REFUSAL], ids=["single", "parallel", "text", "ref"])
def test_whole_and_stream_give_the_same_turn(spec: Spec) -> None:
    whole, streamed, items = roundtrip(NAME, spec, every(3))
    assert same_turn(whole, streamed)
    assert [c.call_id for c in whole.message.tool_calls] == [c.id for c in spec.calls]
    assert "".join(i.fragment for i in items if isinstance(i, TextDelta)) == spec.text
    firsts = [i for i in items if isinstance(i, ArgumentsDelta) and i.call_id]
    assert [(i.index, i.call_id, i.name) for i in firsts] == [(n, c.id, c.name) for n, c in enumerate(spec.calls)]


def test_parallel_calls_render_as_one_assistant_message_then_one_tool_message_each() -> None:
    turn, _, _ = roundtrip(NAME, TEXT_AND_CALLS)
    history = [Message.system("Be brief."), Message.user("Weather in Paris and Oslo?"), turn.message,
               results_for(turn, error_for="call_2")]
    body = openai_chat.render_request(history, [weather_tool()], model="gpt-4o",
                                      request_options=RequestOptions(parallel_tool_calls=True))
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool"]
    assert msgs[2]["content"] == "Let me check both cities."
    assert [c["id"] for c in msgs[2]["tool_calls"]] == ["call_1", "call_2"]
    assert msgs[2]["tool_calls"][1]["function"] == {"name": "weather", "arguments": TEXT_AND_CALLS.calls[1].args}
    assert [(m["tool_call_id"], m["content"]) for m in msgs[3:]] == [
        ("call_1", "result of call_1"), ("call_2", "result of call_2")]
    assert "secret" not in str(body)
    assert body["parallel_tool_calls"] is True
    assert body["tools"][0]["function"]["parameters"] == weather_tool().parameters
    assert "strict" not in body["tools"][0]["function"]


def test_refusal_is_apart_from_text_and_refuses() -> None:
    turn, _, _ = roundtrip(NAME, REFUSAL)
    assert turn.message.refusal == REFUSAL.refusal and turn.message.text == ""
    assert turn.finish_reason == "refusal" and turn.finish_reason_raw == "stop"
    assert classify(turn).state.value == "REFUSED"  # type: ignore[union-attr]
    body = openai_chat.render_request([Message.user("x"), turn.message])
    assert body["messages"][1] == {"role": "assistant", "content": None, "refusal": REFUSAL.refusal}


def test_max_tokens_cut_inside_arguments_is_incomplete_and_not_executable() -> None:
    whole, streamed, _ = roundtrip(NAME, CUT, every(4))
    for turn in (whole, streamed):
        assert turn.finish_reason == "length" and turn.complete
        call = turn.message.tool_calls[0]
        assert call.arguments is None and call.arguments_raw == CUT.calls[0].args
        assert classify(turn).state.value == "INCOMPLETE"  # type: ignore[union-attr]


def test_reasoning_content_goes_back_unchanged_on_the_assistant_message() -> None:
    spec = Spec(reasoning="The user wants Paris.", calls=SINGLE.calls)
    whole, streamed, _ = roundtrip(NAME, spec, every(5))
    assert same_turn(whole, streamed)
    part = whole.message.parts[0]
    assert isinstance(part, ReasoningPart) and part.provider == "openai_chat"
    body = openai_chat.render_request([Message.user("x"), whole.message, results_for(whole)])
    assert body["messages"][1]["reasoning_content"] == "The user wants Paris."
    off = openai_chat.render_request([Message.user("x"), whole.message], send_reasoning=False)
    assert "reasoning_content" not in off["messages"][1]
    # another provider's continuation data is never sent here
    foreign = Message(role="assistant", parts=(ReasoningPart(provider="anthropic", text="t", data={"x": 1}),))
    assert openai_chat.render_request([foreign])["messages"][0] == {"role": "assistant", "content": None}


def test_settings() -> None:
    tools = [weather_tool()]
    body = openai_chat.render_request([Message.user("x")], tools, max_tokens=9, stream=True, temperature=0.2,
                                      system_role="developer",
                                      request_options=RequestOptions(tool_choice=NamedTool("weather")))
    assert body["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert body["max_completion_tokens"] == 9 and body["temperature"] == 0.2
    assert body["stream_options"] == {"include_usage": True}
    any_ = RequestOptions(tool_choice=tool_choice_of("any"))
    assert openai_chat.render_request([Message.user("x")], tools, request_options=any_)["tool_choice"] == "required"
    no_tools = openai_chat.render_request([Message.user("x")], [], request_options=RequestOptions(
        tool_choice="none", parallel_tool_calls=False))
    assert "tool_choice" not in no_tools and "parallel_tool_calls" not in no_tools
    assert openai_chat.render_request([Message.system("s")], system_role="developer")["messages"][0]["role"] == \
        "developer"
    with pytest.raises(ValueError, match="tool_choice='sometimes' is not a tool choice"):
        openai_chat.render_request([Message.user("x")], tools, request_options=RequestOptions(
            tool_choice="sometimes"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_choice is a request option"):
        openai_chat.render_request([Message.user("x")], tools, tool_choice="auto")
    with pytest.raises(ValueError, match="strict mode needs every property required"):
        openai_chat.render_request([Message.user("x")], tools, strict=True)


def test_a_second_id_under_a_taken_index_is_an_error() -> None:
    events = chat_stream(SINGLE)
    bad = {**events[2], "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
        {"index": 0, "id": "call_other", "function": {"arguments": "{}"}}]}}]}
    with pytest.raises(StreamProtocolError, match="call_other"):
        list(openai_chat.parse_stream([*events[:2], bad, *events[2:]]))


def test_the_byte_cap_rejects_a_call_clearly() -> None:
    spec = Spec(calls=[Call("call_big", "weather", '{"s": "' + "é" * 600 + '"}')])
    with pytest.raises(ArgumentsTooLarge, match="call_big") as info:
        list(openai_chat.parse_stream(chat_stream(spec, every(8)), max_argument_bytes=1000))
    assert info.value.limit == 1000 and info.value.name == "weather"
    assert isinstance(list(openai_chat.parse_stream(chat_stream(spec, every(8)), max_argument_bytes=2000))[-1].message
                      .tool_calls[0], ToolCallPart)


def test_a_stream_that_breaks_ends_with_an_incomplete_turn() -> None:
    def broken():  # type: ignore[no-untyped-def]
        yield from chat_stream(SINGLE, every(3))[:4]
        raise ConnectionError("peer reset")

    turn = list(openai_chat.parse_stream(broken()))[-1]
    assert not turn.complete and "ConnectionError" in (turn.incomplete_reason or "")
    assert turn.message.tool_calls[0].arguments is None
    assert classify(turn).state.value == "INCOMPLETE"  # type: ignore[union-attr]


def test_error_bodies_and_events() -> None:
    with pytest.raises(WireFormatError, match="without choices"):
        openai_chat.parse_response({"error": {"message": "bad"}})
    turn = list(openai_chat.parse_stream([*chat_stream(SINGLE)[:2], {"error": {"message": "overloaded"}}]))[-1]
    assert not turn.complete and "overloaded" in (turn.incomplete_reason or "")
    done = list(openai_chat.parse_stream([*chat_stream(Spec(text="hi")), "[DONE]"]))[-1]
    assert done.complete and done.message.text == "hi"


def test_compatible_servers_quirks() -> None:
    # arguments as an object, stop with calls, content as a list of parts
    raw = {"id": "x", "model": "local", "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": [{"type": "text", "text": "ok"}],
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}}]}
    turn = openai_chat.parse_response(raw)
    assert turn.finish_reason == "tool_calls" and turn.message.text == "ok"
    assert turn.message.tool_calls[0].arguments == {"a": 1}
