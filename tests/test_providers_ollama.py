"""Ollama's /api/chat as a wire API: rendering, parsing (whole and JSON lines), histories, lint, SDK, emulator."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentnb._engine import classify
from agentnb._messages import Message, ModelTurn, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from agentnb._request import ArgumentsDelta, NamedTool, OutputSchema, RequestOptions, TextDelta
from agentnb.exceptions import ArgumentsTooLarge, StreamProtocolError, WireFormatError
from agentnb.providers.ollama import _adapter as wire
from agentnb.providers.ollama._history import parse_history

from .wire_builders import results_for, weather_tool

S_COMPLETED, S_INCOMPLETE = "COMPLETED", "INCOMPLETE"


def chunk(content: str = "", *, thinking: str = "", calls: list[dict[str, Any]] | None = None,
          done: bool = False, reason: str = "stop", model: str = "qwen3") -> dict[str, Any]:
    """One /api/chat stream chunk as the server writes it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking:
        message["thinking"] = thinking
    if calls:
        message["tool_calls"] = calls
    out: dict[str, Any] = {"model": model, "created_at": "2026-01-01T00:00:00Z", "message": message, "done": done}
    if done:
        out.update(done_reason=reason, prompt_eval_count=21, eval_count=9, total_duration=5_000_000)
    return out


def fn(name: str, **args: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": args}}


def whole_of(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The non-streamed response the same answer gives (what the server sends with stream: false)."""
    content = "".join(c["message"].get("content", "") for c in chunks)
    thinking = "".join(c["message"].get("thinking", "") for c in chunks)
    calls = [tc for c in chunks for tc in c["message"].get("tool_calls", ())]
    last = dict(chunks[-1])
    last["message"] = {"role": "assistant", "content": content, **({"thinking": thinking} if thinking else {}),
                       **({"tool_calls": calls} if calls else {})}
    return last


def with_ids(turn: ModelTurn) -> ModelTurn:
    """What the driver does: give the id-less calls unique ids."""
    parts = tuple(replace(p, call_id=f"gen_{i}") if isinstance(p, ToolCallPart) else p
                  for i, p in enumerate(turn.message.parts))
    return replace(turn, message=replace(turn.message, parts=parts))


def state_of(turn: ModelTurn) -> str | None:
    verdict = classify(turn)
    return verdict.state.value if verdict else None


PARALLEL = [chunk(thinking="Two cities."), chunk("Checking "), chunk("both."),
            chunk(calls=[fn("weather", where={"city": "Paris"})]),
            chunk(calls=[fn("weather", where={"city": "Rome"}, units="c")]), chunk(done=True)]


# -- responses and streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("as_lines", [False, True], ids=["dicts", "json-lines"])
def test_whole_and_stream_give_the_same_turn(as_lines: bool) -> None:
    events: list[Any] = [json.dumps(c) for c in PARALLEL] if as_lines else PARALLEL
    items = list(wire.parse_stream(events))
    streamed, whole = items[-1], wire.parse_response(whole_of(PARALLEL))
    assert isinstance(streamed, ModelTurn)
    assert streamed.message == whole.message
    assert (streamed.finish_reason, streamed.finish_reason_raw, streamed.usage) == (
        whole.finish_reason, whole.finish_reason_raw, whole.usage)
    assert streamed.finish_reason == "tool_calls" and streamed.finish_reason_raw == "stop"
    assert (streamed.usage.input_tokens, streamed.usage.output_tokens) == (21, 9)
    parts = streamed.message.parts
    assert isinstance(parts[0], ReasoningPart) and parts[0].provider == "ollama" and parts[0].text == "Two cities."
    assert parts[1] == TextPart(text="Checking both.")
    calls = streamed.message.tool_calls
    assert [(c.call_id, c.name, c.arguments, c.index) for c in calls] == [
        ("", "weather", {"where": {"city": "Paris"}}, 0), ("", "weather", {"where": {"city": "Rome"}, "units": "c"}, 1)]
    assert [i.fragment for i in items if isinstance(i, TextDelta)] == ["Checking ", "both."]
    deltas = [i for i in items if isinstance(i, ArgumentsDelta)]
    assert [(d.index, json.loads(d.fragment)) for d in deltas] == [(0, {"where": {"city": "Paris"}}),
                                                                   (1, {"where": {"city": "Rome"}, "units": "c"})]
    assert classify(streamed) is None  # the calls go on
    assert streamed.raw["total_duration"] == 5_000_000  # the durations stay with the turn


def test_a_plain_answer_completes_and_load_does_not() -> None:
    turn = wire.parse_response(chunk("It is 3.", done=True))
    assert (turn.finish_reason, state_of(turn)) == ("stop", S_COMPLETED)
    loaded = wire.parse_response(chunk("", done=True, reason="load"))  # the server only loaded the model
    assert (loaded.finish_reason, loaded.finish_reason_raw, state_of(loaded)) == ("other", "load", S_INCOMPLETE)


def test_a_length_cut_is_incomplete_even_with_calls() -> None:
    cut = [chunk("Writing"), chunk(calls=[fn("write_file", path="a.txt")]), chunk(done=True, reason="length")]
    turn = list(wire.parse_stream(cut))[-1]
    assert isinstance(turn, ModelTurn) and turn.complete and turn.finish_reason == "length"
    verdict = classify(turn)
    assert verdict is not None and verdict.state.value == S_INCOMPLETE
    assert "inside a tool call" in verdict.event.reason  # type: ignore[attr-defined]


def test_a_stream_without_done_is_incomplete_and_nothing_is_executable() -> None:
    turn = list(wire.parse_stream(PARALLEL[:-1]))[-1]
    assert isinstance(turn, ModelTurn)
    assert not turn.complete and "done: true" in (turn.incomplete_reason or "")
    assert state_of(turn) == S_INCOMPLETE


def test_a_broken_source_and_an_error_line_end_the_turn_incomplete() -> None:
    def broken() -> Any:
        yield PARALLEL[1]
        raise ConnectionResetError("peer went away")

    turn = list(wire.parse_stream(broken()))[-1]
    assert isinstance(turn, ModelTurn) and not turn.complete
    assert "ConnectionResetError" in (turn.incomplete_reason or "") and turn.message.text == "Checking "
    errored = list(wire.parse_stream([PARALLEL[1], {"error": "model runner has unexpectedly stopped"}]))[-1]
    assert isinstance(errored, ModelTurn) and not errored.complete
    assert "unexpectedly stopped" in (errored.incomplete_reason or "")


def test_json_lines_split_anywhere_give_the_same_chunks_and_a_cut_last_line_is_dropped() -> None:
    body = b"".join(json.dumps(c).encode() + b"\n" for c in PARALLEL)
    for size in (1, 7, 64, len(body)):
        pieces = [body[i:i + size] for i in range(0, len(body), size)]
        assert list(wire.iter_json_lines(pieces)) == PARALLEL
    cut = body[: body.rindex(b"\n", 0, len(body) - 1) + 20]  # the done line, cut after 19 bytes
    chunks = list(wire.iter_json_lines([cut]))
    assert chunks == PARALLEL[:-1]
    turn = list(wire.parse_stream(wire.iter_json_lines([cut])))[-1]
    assert isinstance(turn, ModelTurn) and not turn.complete
    with pytest.raises(WireFormatError, match="not JSON"):
        list(wire.iter_json_lines([b'{"done": false}\n{oops}\n{"done": true}\n']))
    for reads in ([b'{"x": "' + b"a" * 200], [b'{}\n{"x": "' + b"a" * 200], [b'{"x": "', b"a" * 60, b"a" * 60]):
        with pytest.raises(StreamProtocolError, match="longer than 100 bytes"):
            list(wire.iter_json_lines(reads, max_line_bytes=100))


def test_arguments_are_bounded_in_bytes() -> None:
    big = [chunk(calls=[fn("write_file", body="é" * 600)]), chunk(done=True)]
    with pytest.raises(ArgumentsTooLarge):
        list(wire.parse_stream(big, max_argument_bytes=1000))
    assert len(list(wire.parse_stream(big, max_argument_bytes=1300))) == 2
    with pytest.raises(ArgumentsTooLarge):  # a raw line is refused before it is decoded
        list(wire.parse_stream([json.dumps(big[0]) + " " * 70_000], max_argument_bytes=1000))


@pytest.mark.parametrize(("raw", "match"), [
    ({"error": "model 'qwen9' not found"}, "error body"),
    ({"model": "m", "done": True}, "without a message"),
    ({"message": "hello", "done": True}, "without a message"),
    ({"message": {"content": ["a"]}, "done": True}, "'content' is a list, expected str"),
    ({"message": {"content": "", "tool_calls": {"function": {}}}, "done": True}, "'tool_calls' is a dict"),
    ({"message": {"content": "", "tool_calls": ["add"]}, "done": True}, "tool call is a str"),
    ({"message": {"content": "", "tool_calls": [{"function": "add"}]}, "done": True}, "'function' is a str"),
    ({"message": {"content": ""}, "done": "yes"}, "'done' is a str"),
    ({"message": {"content": ""}, "done": True, "done_reason": 7}, "'done_reason' is a int"),
    ("[1, 2]", "not an object"),
    (42, "not a JSON object"),
])
def test_hostile_responses_are_a_clear_error(raw: Any, match: str) -> None:
    with pytest.raises(WireFormatError, match=match):
        wire.parse_response(raw)
    if isinstance(raw, dict) and isinstance(raw.get("message"), dict):  # the same chunk in a stream
        with pytest.raises(WireFormatError, match=match):
            list(wire.parse_stream([raw]))


def test_arguments_that_are_not_an_object_are_kept_raw_and_not_executable() -> None:
    turn = wire.parse_response(chunk(calls=[{"function": {"name": "add", "arguments": "{\"a\": 1,"}},
                                            {"function": {"name": "add", "arguments": [1, 2]}},
                                            {"function": {"name": "add", "arguments": "{\"a\": 2}"}}], done=True))
    calls = turn.message.tool_calls
    assert [(c.arguments_raw, c.arguments) for c in calls] == [('{"a": 1,', None), ("[1,2]", None),
                                                               ('{"a": 2}', {"a": 2})]


def test_sdk_response_objects_parse_like_dicts() -> None:
    ollama = pytest.importorskip("ollama")
    raw = whole_of(PARALLEL)
    assert wire.parse_response(ollama.ChatResponse(**raw)).message == wire.parse_response(raw).message
    streamed = list(wire.parse_stream([ollama.ChatResponse(**c) for c in PARALLEL]))[-1]
    assert isinstance(streamed, ModelTurn) and streamed.message == wire.parse_response(raw).message


# -- requests -----------------------------------------------------------------------------------------------


def test_render_a_conversation_with_calls_thinking_and_results() -> None:
    turn = with_ids(wire.parse_response(whole_of(PARALLEL)))
    results = results_for(turn, error_for="gen_3")
    swapped = Message(role="tool", parts=tuple(reversed(results.parts)))  # stored out of order
    history = [Message.system("Be brief."), Message.user("Weather?"), turn.message, swapped, Message.user("Thanks.")]
    body = wire.render_request(history, [weather_tool()], model="qwen3", max_tokens=100, temperature=0.2,
                               stop="END", think=True, keep_alive="5m")
    assert body["model"] == "qwen3" and body["stream"] is False and body["think"] is True
    assert body["keep_alive"] == "5m"
    assert body["options"] == {"num_predict": 100, "temperature": 0.2, "stop": ["END"]}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Checking both.", "thinking": "Two cities.",
         "tool_calls": [fn("weather", where={"city": "Paris"}), fn("weather", where={"city": "Rome"}, units="c")]},
        {"role": "tool", "content": "result of gen_2", "tool_name": "weather"},  # in the calls' order
        {"role": "tool", "content": "result of gen_3", "tool_name": "weather"},
        {"role": "user", "content": "Thanks."},
    ]
    tool = body["tools"][0]
    assert tool["type"] == "function" and tool["function"]["name"] == "weather"
    assert tool["function"]["parameters"] == weather_tool().parameters
    assert "secret" not in json.dumps(body)  # a result's audit value is never rendered


def test_arguments_that_were_not_an_object_are_sent_as_an_empty_object() -> None:
    bad = ToolCallPart(call_id="c1", name="add", arguments_raw='{"a": 1,', arguments=None)
    body = wire.render_request([Message.user("q"), Message(role="assistant", parts=(bad,))])
    assert body["messages"][1]["tool_calls"] == [{"function": {"name": "add", "arguments": {}}}]


def test_other_providers_reasoning_is_not_sent_and_settings_ollama_cannot_express_are_refused() -> None:
    foreign = Message(role="assistant", parts=(ReasoningPart(provider="anthropic", text="x", data={"signature": "s"}),
                                               TextPart(text="hi")))
    assert wire.render_request([foreign])["messages"] == [{"role": "assistant", "content": "hi"}]
    tools = [weather_tool()]
    for bad in (RequestOptions(tool_choice="required"), RequestOptions(tool_choice=NamedTool("weather")),
                RequestOptions(parallel_tool_calls=False)):
        with pytest.raises(ValueError, match="cannot be expressed"):
            wire.render_request([Message.user("q")], tools, request_options=bad)
    assert "tools" not in wire.render_request([Message.user("q")], tools,
                                              request_options=RequestOptions(tool_choice="none"))
    schema = OutputSchema("Answer", {"type": "object", "properties": {"n": {"type": "integer"}}})
    body = wire.render_request([Message.user("q")], stream=True, options={"num_ctx": 8192},
                               request_options=RequestOptions(output=schema))
    assert body["format"] == schema.schema and body["stream"] is True and body["options"] == {"num_ctx": 8192}


# -- histories ----------------------------------------------------------------------------------------------


def test_histories_read_back_bind_results_by_position_and_name() -> None:
    body = {"model": "qwen3", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather and time?"},
        {"role": "assistant", "content": "", "tool_calls": [fn("weather", city="Paris"), fn("clock", tz="CET")]},
        {"role": "tool", "content": "12:00", "tool_name": "clock"},  # out of order: bound by name
        {"role": "tool", "content": "18C", "tool_name": "weather"},
        {"role": "assistant", "content": "", "tool_calls": [fn("weather", city="Rome")]},
        {"role": "tool", "content": "21C"},  # no tool_name: the next call in order
        {"role": "tool", "content": "??", "tool_name": "weather"},  # more results than calls
    ], "tools": [{"type": "function", "function": {"name": "weather", "description": "d", "parameters": {}}}]}
    hist = parse_history(body)
    messages = hist.messages
    calls = [c for m in messages for c in m.tool_calls]
    assert [c.call_id for c in calls] == ["ollama_2_0", "ollama_2_1", "ollama_5_0"]
    results = [r for m in messages for r in m.tool_results]
    assert [(r.call_id, r.name, r.content) for r in results] == [
        ("ollama_2_1", "clock", "12:00"), ("ollama_2_0", "weather", "18C"), ("ollama_5_0", "weather", "21C"),
        ("ollama_7_result", "weather", "??")]
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    again = parse_history(body)
    assert again.messages == messages  # stable ids


def test_a_rendered_history_reads_back_to_the_same_conversation() -> None:
    turn = with_ids(wire.parse_response(whole_of(PARALLEL)))
    history = [Message.system("Be brief."), Message.user("Weather?"), turn.message, results_for(turn),
               Message.user("Thanks.")]
    hist = parse_history(wire.render_request(history, [weather_tool()], model="qwen3"))
    messages = hist.messages
    assert [m.role for m in messages] == [m.role for m in history]
    assert [m.text for m in messages] == [m.text for m in history]
    back = messages[2].tool_calls
    assert [(c.name, c.arguments) for c in back] == [(c.name, c.arguments) for c in turn.message.tool_calls]
    assert [r.call_id for r in messages[3].tool_results] == [c.call_id for c in back]
    assert [r.content for r in messages[3].tool_results] == [r.content for r in results_for(turn).parts
                                                             if isinstance(r, ToolResultPart)]


# -- lint rules ---------------------------------------------------------------------------------------------


def lint_body(body: Any) -> list[Any]:
    import agentnb as anb

    return anb.lint(body, "ollama")


def fix_body(body: Any) -> tuple[list[Any], list[Any]]:
    import agentnb as anb

    return anb.lint(body, "ollama", fix=True)


def call_msg(*names: str, args: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": n, "arguments": {} if args is None else args}} for n in names]}


def tool_msg(name: str | None, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "content": content, **({"tool_name": name} if name is not None else {})}


USER = {"role": "user", "content": "go"}


@pytest.mark.parametrize(("messages", "codes"), [
    ([USER, call_msg("add", "mul"), tool_msg("add"), tool_msg("mul"), USER], []),
    ([USER, call_msg("add", "mul"), tool_msg("mul"), tool_msg("add")], []),  # out of order, names match
    ([USER, call_msg("add"), tool_msg(None)], []),  # no tool_name: bound by position
    ([USER, call_msg("add")], []),  # a pending turn at the end of a history
    ([USER, tool_msg("add")], ["orphan_result"]),
    ([USER, call_msg("add"), USER, tool_msg("add")], ["orphan_result", "unanswered_call"]),
    ([USER, call_msg("add"), tool_msg("add"), tool_msg("add")], ["extra_result"]),
    ([USER, call_msg("add", "mul"), tool_msg("add"), USER], ["unanswered_call"]),
    ([USER, call_msg("add"), tool_msg("sub")], ["tool_name_mismatch"]),
    ([USER, call_msg("add", args='{"a": 1}')], ["arguments_not_object"]),
    ([USER, call_msg("add", args=[1])], ["arguments_not_object"]),
    ([{"role": "robot", "content": "beep"}], ["bad_role"]),
])
def test_lint_rules(messages: list[dict[str, Any]], codes: list[str]) -> None:
    found = lint_body({"model": "qwen3", "messages": messages})
    assert sorted(f.code for f in found) == sorted(codes)
    errors = [f for f in found if f.severity == "error"]
    assert [f.code for f in errors] == [c for c in codes if c == "arguments_not_object"]  # the rest Ollama accepts
    for f in errors:  # in the server's words (its Go decoder)
        assert f.provider_message.startswith("json: cannot unmarshal ") and "ToolCallFunctionArguments" in (
            f.provider_message)


@pytest.mark.parametrize("messages", [
    [USER, tool_msg("add"), call_msg("add"), USER],
    [USER, call_msg("add", "mul"), tool_msg("add"), tool_msg("add"), tool_msg("add"), USER],
    [USER, call_msg("add", args="{oops"), tool_msg("sub")],
    [USER, call_msg("add"), USER, tool_msg("add"), call_msg("mul", "div"), tool_msg("mul")],
])
def test_fixes_leave_a_clean_history(messages: list[dict[str, Any]]) -> None:
    fixed, changes = fix_body({"messages": messages})
    assert changes and lint_body({"messages": fixed}) == []
    again, more = fix_body({"messages": fixed})
    assert again == fixed and more == []  # fixing is idempotent
    interrupted = [m for m in fixed if m["role"] == "tool" and m["content"].startswith("interrupted")]
    assert all(m["tool_name"] for m in interrupted)


@pytest.mark.parametrize("body", [
    "not a body", {"messages": "hi"}, {"messages": [1, None, "x"]}, {"messages": [{"role": 3, "content": ["a"]}]},
    {"messages": [{"role": "assistant", "tool_calls": "add"}]},
    {"messages": [{"role": "assistant", "tool_calls": [7, {"function": "f"}, {"function": {"name": 9}}]}]},
    {"messages": [{"role": "tool", "tool_name": {"x": 1}}], "tools": {"a": 1}},
])
def test_hostile_bodies_are_findings_not_exceptions(body: Any) -> None:
    found = lint_body(body)
    assert found, body
    from agentnb.providers.ollama._shapes import normalize

    clean, _ = normalize(body)
    parse_history(clean)  # reads without an exception


# -- the official client against the emulator ----------------------------------------------------------------


@pytest.fixture(scope="module")
def emu() -> Any:
    from agentnb.emulator import Emulator

    with Emulator() as e:
        yield e


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def answer(messages: list[Message]) -> dict[str, Any]:
    return {"text": "Results: " + ", ".join(r.content for r in messages[-1].tool_results)}


CALL = {"name": "add", "arguments": {"a": 1, "b": 2}}
CALL2 = {"name": "add", "arguments": {"a": 3, "b": 4}}


def test_the_official_client_sync_and_streamed(emu: Any) -> None:
    ollama = pytest.importorskip("ollama")
    emu.play([{"reasoning": "Two sums.", "text": "Adding.", "tool_calls": [CALL, CALL2]},
              {"text": "Hello there, student."}])
    client = ollama.Client(host=emu.url("ollama"))
    whole = client.chat(model="qwen3", messages=[{"role": "user", "content": "Add."}], tools=[add], think=True)
    assert whole.done and whole.done_reason == "stop" and whole.message.thinking == "Two sums."
    assert [(c.function.name, dict(c.function.arguments)) for c in whole.message.tool_calls or ()] == [
        ("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]
    assert whole.prompt_eval_count and whole.eval_count
    chunks = list(client.chat(model="qwen3", messages=[{"role": "user", "content": "Hi"}], stream=True))
    assert len(chunks) > 2 and [c.done for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert "".join(c.message.content or "" for c in chunks) == "Hello there, student."
    sent = emu.requests[-1]
    assert sent.provider == "ollama" and sent.path == "/ollama/api/chat" and sent.stream


def test_the_official_async_client(emu: Any) -> None:
    ollama = pytest.importorskip("ollama")
    import asyncio

    emu.play([{"text": "Async hello."}, {"text": "Async stream."}])

    async def go() -> tuple[str, str]:
        client = ollama.AsyncClient(host=emu.url("ollama"))
        whole = await client.chat(model="qwen3", messages=[{"role": "user", "content": "Hi"}])
        text = "".join([c.message.content or "" async for c in await client.chat(
            model="qwen3", messages=[{"role": "user", "content": "Hi"}], stream=True)])
        return whole.message.content or "", text

    assert asyncio.run(go()) == ("Async hello.", "Async stream.")


def test_errors_come_in_ollamas_shape(emu: Any) -> None:
    ollama = pytest.importorskip("ollama")
    client = ollama.Client(host=emu.url("ollama"))
    emu.play([{"text": "never"}]).fail(404, message='model "qwen9" not found, try pulling it first')
    with pytest.raises(ollama.ResponseError) as info:
        client.chat(model="qwen9", messages=[{"role": "user", "content": "Hi"}])
    assert info.value.status_code == 404 and info.value.error == 'model "qwen9" not found, try pulling it first'
    import httpx  # bodies the client would not send

    r = httpx.post(emu.url("ollama") + "/api/chat", json={"messages": [{"role": "user", "content": "Hi"}]})
    assert (r.status_code, r.json()) == (400, {"error": "model is required"})
    bad = [{"role": "user", "content": "q"},
           {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add", "arguments": "{}"}}]}]
    r = httpx.post(emu.url("ollama") + "/api/chat", json={"model": "qwen3", "messages": bad, "stream": False})
    assert r.status_code == 400 and set(r.json()) == {"error"} and "cannot unmarshal string" in r.json()["error"]
    r = httpx.post(emu.url("ollama") + "/api/chat", content=b"{not json")
    assert r.status_code == 400 and set(r.json()) == {"error"}
    r = httpx.get(emu.url("ollama") + "/api/chat")
    assert r.status_code == 405 and set(r.json()) == {"error"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("async_", [False, True], ids=["sync", "async"])
def test_a_loop_runs_tools_end_to_end_through_the_emulator(emu: Any, stream: bool, async_: bool) -> None:
    import agentnb as anb

    emu.play([{"text": "Let me add.", "tool_calls": [CALL, CALL2]}, answer])
    start = len(emu.requests)
    model = anb.model("ollama:qwen3", base_url=emu.url("ollama"), stream=stream, async_=async_, temperature=0.0)
    assert type(model).__name__ == "OllamaModel" and model.is_async == async_ and model.credentials() == []
    run = anb.Loop(model=model, tools=[anb.tool(add)]).start("Add 1 and 2, and 3 and 4.").run()
    assert run.state is anb.LoopState.COMPLETED and run.output == "Results: 3, 7", run.reason
    turns = [e.response for e in run.events if e.type == "TurnCompleted"]
    assert {t.provider for t in turns} == {"ollama"}
    assert len({c.call_id for t in turns for c in t.message.tool_calls}) == 2  # unique ids from the driver
    second = emu.requests[start + 1].body
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool", "tool"]
    assert [m["tool_name"] for m in second["messages"][2:]] == ["add", "add"]
    assert [m["content"] for m in second["messages"][2:]] == ["3", "7"]  # in the calls' order
    assert second["options"] == {"temperature": 0.0} and second["stream"] is stream
    if stream:
        assert any(e.type == "ArgumentsMerged" for e in run.events)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_length_cut_through_the_client_runs_nothing(emu: Any, stream: bool) -> None:
    import agentnb as anb

    emu.play([{"tool_calls": [CALL, {"name": "add", "arguments": '{"a": 1, "b'}], "finish": "length"}])
    run = anb.Loop(model=anb.model("ollama:qwen3", base_url=emu.url("ollama"), stream=stream),
                   tools=[anb.tool(add)]).start("Add.").run()
    assert run.state is anb.LoopState.INCOMPLETE and "token limit" in (run.reason or ""), run.reason
    assert not any(e.type == "ToolStarted" for e in run.events)


def test_a_stream_cut_mid_call_is_incomplete_and_not_retried(emu: Any) -> None:
    import agentnb as anb

    emu.play([{"text": "Adding.", "tool_calls": [CALL], "interrupt": True}, {"text": "never asked"}])
    run = anb.Loop(model=anb.model("ollama:qwen3", base_url=emu.url("ollama"), stream=True),
                   tools=[anb.tool(add)], retry_base_delay=0.0).start("Add.").run()
    assert run.state is anb.LoopState.INCOMPLETE, run.reason
    assert "nothing in the turn was executed" in (run.reason or "")
    assert not any(e.type in ("ToolStarted", "ModelRetried") for e in run.events)


def test_server_errors_are_retried_then_fail_with_the_servers_message(emu: Any) -> None:
    import agentnb as anb

    emu.play([{"text": "Fine."}]).fail(503, times=1)
    run = anb.Loop(model=anb.model("ollama:qwen3", base_url=emu.url("ollama")), retry_base_delay=0.0).start("Hi").run()
    assert run.output == "Fine." and any(e.type == "ModelRetried" for e in run.events)
    emu.play([{"text": "never"}]).fail(400, message="invalid options: num_gpu", times=1)
    run = anb.Loop(model=anb.model("ollama:qwen3", base_url=emu.url("ollama")), retry_base_delay=0.0).start("Hi").run()
    assert run.state is anb.LoopState.FAILED and "invalid options: num_gpu" in (run.reason or "")
    assert not any(e.type == "ModelRetried" for e in run.events)


def test_no_server_is_a_retryable_error_that_says_how_to_start_one() -> None:
    import socket

    import agentnb as anb
    from agentnb.providers import ProviderError

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = anb.model("ollama:qwen3", base_url=f"http://127.0.0.1:{port}")
    from agentnb._request import ModelRequest

    with pytest.raises(ProviderError, match="ollama serve") as info:
        list(model.respond(ModelRequest(messages=[Message.user("Hi")], tools=[])))
    assert info.value.retryable and str(port) in str(info.value)


def test_settings_the_client_cannot_send_are_refused_before_sending(emu: Any) -> None:
    import agentnb as anb
    from agentnb._request import ModelRequest
    from agentnb.providers import ProviderError

    start = len(emu.requests)
    model = anb.model("ollama:qwen3", base_url=emu.url("ollama"), frobnicate=True)
    with pytest.raises(ProviderError, match="frobnicate"):
        list(model.respond(ModelRequest(messages=[Message.user("Hi")], tools=[])))
    model = anb.model("ollama:qwen3", base_url=emu.url("ollama"), tool_choice="required")
    with pytest.raises(ProviderError, match="nothing was sent"):
        list(model.respond(ModelRequest(messages=[Message.user("Hi")], tools=[anb.tool(add).info])))
    assert len(emu.requests) == start


def test_an_auth_header_is_reported_and_redacted(emu: Any, tmp_path: Any) -> None:
    ollama = pytest.importorskip("ollama")
    import agentnb as anb
    from agentnb.providers.ollama import OllamaModel

    token = "zq9-ollama-proxy-token-4471"
    client = ollama.Client(host=emu.url("ollama"), headers={"Authorization": f"Bearer {token}"})
    model = OllamaModel(client, model="qwen3")
    assert token in model.credentials()
    emu.play([{"text": "never"}]).fail(401, message=f"unauthorized: token {token} is not valid")
    store = anb.SqliteStore(tmp_path / "runs.db", key="ollama-test-key")
    run = anb.Loop(model=model, store=store).start("Hi").run()
    assert run.state is anb.LoopState.FAILED and "[REDACTED]" in (run.reason or ""), run.reason
    run.transcript.save(tmp_path / "transcript.json")
    for path in tmp_path.iterdir():  # the store, its journal files, the saved transcript
        assert token.encode() not in path.read_bytes(), path.name
    via_key = anb.model("ollama:qwen3", base_url=emu.url("ollama"), api_key=token)
    assert token in via_key.credentials()


# -- properties -----------------------------------------------------------------------------------------------

_names = st.sampled_from(["add", "mul", "weather"])
_args = st.dictionaries(st.sampled_from(["a", "b", "city"]), st.integers(-5, 5) | st.text(max_size=5), max_size=3)


@st.composite
def conversations(draw: Any) -> list[Message]:
    """Valid canonical conversations: user turns, answers, and call turns each answered in full."""
    out = [Message.system("sys")] if draw(st.booleans()) else []
    out.append(Message.user(draw(st.text(max_size=8))))
    n = 0
    for _ in range(draw(st.integers(0, 4))):
        calls = [ToolCallPart(call_id=f"c{n + k}", name=draw(_names), arguments_raw="", arguments=draw(_args))
                 for k in range(draw(st.integers(1, 3)))]
        n += len(calls)
        text = draw(st.text(max_size=6))
        out.append(Message(role="assistant", parts=((TextPart(text=text),) if text else ()) + tuple(calls)))
        results = [ToolResultPart(call_id=c.call_id, name=c.name, status="ok", content=draw(st.text(max_size=6)))
                   for c in calls]
        out.append(Message(role="tool", parts=tuple(draw(st.permutations(results)))))
        if draw(st.booleans()):
            out.append(Message.user(draw(st.text(max_size=8))))
    return out


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_every_rendered_conversation_lints_clean_and_reads_back_bound_the_same(messages: list[Message]) -> None:
    body = wire.render_request(messages, model="qwen3")
    assert lint_body(body) == []
    back = parse_history(json.loads(json.dumps(body))).messages
    calls_in = [c for m in messages for c in m.tool_calls]
    calls_out = [c for m in back for c in m.tool_calls]
    assert [(c.name, c.arguments) for c in calls_out] == [(c.name, c.arguments) for c in calls_in]
    # Results are rendered in the calls' order, so each tool message binds back to exactly the call it answered
    # (the first unanswered call of its name is that call), whatever order the results were stored in.
    given_content = {r.call_id: r.content for m in messages for r in m.tool_results}
    read_content = {r.call_id: r.content for m in back for r in m.tool_results}
    assert [read_content[c.call_id] for c in calls_out] == [given_content[c.call_id] for c in calls_in]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=30))
def test_any_chunking_of_the_json_lines_gives_the_same_turn(cuts: list[int]) -> None:
    body = b"".join(json.dumps(c).encode() + b"\n" for c in PARALLEL)
    pieces, at = [], 0
    for n in cuts:
        pieces.append(body[at:at + n])
        at += n
    pieces.append(body[at:])
    turn = list(wire.parse_stream(wire.iter_json_lines(pieces)))[-1]
    assert isinstance(turn, ModelTurn) and turn.complete
    assert turn.message == wire.parse_response(whole_of(PARALLEL)).message


# -- through the registry: importer, linter on canonical messages, wire view -----------------------------------


def test_import_history_reads_ollama_histories_with_their_findings() -> None:
    import agentnb as anb

    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3 and 4*5?"},
               {"role": "assistant", "content": "", "tool_calls": [fn("add", a=2, b=3), fn("mul", a=4, b=5)]},
               {"role": "tool", "content": "5", "tool_name": "add"},
               {"role": "tool", "content": "20", "tool_name": "mul"},
               {"role": "assistant", "content": "5 and 20."}]
    imported = anb.import_history(history, "ollama")  # type: ignore[arg-type]
    assert imported.ok, imported.findings
    calls = imported.transcript.frames.calls()
    assert list(calls["tool"]) == ["add", "mul"] and list(calls["status"]) == ["ok", "ok"]
    assert [m.role for m in imported.messages] == ["system", "user", "assistant", "tool", "assistant"]
    broken = anb.import_history([*history[:3], {"role": "tool", "content": "5", "tool_name": "add"},
                                 {"role": "user", "content": "and?"}], "ollama")  # type: ignore[arg-type]
    assert "unanswered_call" in {f.code for f in broken.findings}


def test_lint_takes_canonical_messages_and_renders_them_for_ollama() -> None:
    import agentnb as anb

    turn = with_ids(wire.parse_response(whole_of(PARALLEL)))
    good = [Message.user("Weather?"), turn.message, results_for(turn), Message.user("Thanks.")]
    assert anb.lint(good, "ollama") == []
    cut = [Message.user("Weather?"), turn.message, Message.user("Thanks.")]
    assert [f.code for f in anb.lint(cut, "ollama")] == ["unanswered_call", "unanswered_call"]


def test_the_debugger_wire_view_has_an_ollama_tab() -> None:
    import agentnb as anb
    from agentnb._debugger import viewdata
    from agentnb._debugger.timeline import Timeline

    loop = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [CALL]}, answer]), tools=[anb.tool(add)])
    run = loop.start("Add 1 and 2.").run()
    tl = Timeline(run.events)
    second = [e.seq for e in run.events if e.type == "ModelRequested"][-1]
    view = viewdata.wire_view(tl, second, "Ollama /api/chat")
    assert "Ollama /api/chat" in view["providers"] and view["provider"] == "Ollama /api/chat"
    body = json.loads(view["request"])
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool"]
    assert body["messages"][1]["tool_calls"] == [fn("add", a=1, b=2)] and body["messages"][2]["tool_name"] == "add"
    assert dict(view["where"])["its result"] == "role tool message (tool_name), in the calls' order"


def test_the_course_switch_takes_a_local_model_without_a_key(emu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentnb.providers.ollama import OllamaModel
    from agentnb.workshop._switch import course_model

    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    model = course_model("weather", provider="ollama:qwen3", base_url=emu.url("ollama"), quiet=True)
    assert isinstance(model, OllamaModel) and model.name == "qwen3" and model.credentials() == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_recorded_ollama_run_replays_offline(emu: Any, tmp_path: Any, stream: bool) -> None:
    import agentnb as anb

    emu.play([{"text": "Let me add.", "tool_calls": [CALL, CALL2]}, answer])
    path = tmp_path / "ollama.jsonl"
    with anb.Recorder(anb.model("ollama:qwen3", base_url=emu.url("ollama"), stream=stream), path) as rec:
        run = anb.Loop(model=rec, tools=[anb.tool(add)]).start("Add.", run_id="r1").run()
    assert run.output == "Results: 3, 7"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    wire_requests = [ln for ln in lines if ln["type"] == "wire_request"]
    assert len(wire_requests) == 2 and wire_requests[1]["body"]["messages"][2]["tool_name"] == "add"
    replay = anb.Loop(model=anb.ScriptedModel.replay(path), tools=[anb.tool(add)]).start("Add.", run_id="r1").run()
    assert replay.output == run.output and replay.state is anb.LoopState.COMPLETED


def test_the_host_comes_from_ollama_host_and_thinking_goes_back_to_ollama(emu: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import agentnb as anb

    monkeypatch.setenv("OLLAMA_HOST", emu.url("ollama"))
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    emu.play([{"reasoning": "Add them first.", "tool_calls": [CALL]}, answer])
    start = len(emu.requests)
    run = anb.Loop(model=anb.model("ollama:qwen3", think=True), tools=[anb.tool(add)]).start("Add.").run()
    assert run.output == "Results: 3", run.reason
    first, second = (r.body for r in emu.requests[start:])
    assert first["think"] is True and second["think"] is True
    assert second["messages"][1]["thinking"] == "Add them first."  # the model's own reasoning, sent back
