"""Recorder and ScriptedModel.replay: a recorded run replays with the same events and the same final state."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._messages import ModelTurn
from agentnb._recorder import read_cassette
from agentnb._request import ModelRequest
from agentnb.events import event_to_dict
from agentnb.providers import _sse as sse
from agentnb.providers import openai_chat
from agentnb.providers._scripted import ReplayedModel
from agentnb.providers._sdk import SdkModel

WIRE = Path(__file__).parent / "fixtures" / "wire"
FAKE_KEY = "sk-test-SECRET-4f9a8b7c6d5e4f3a2b1c"
TIMING_FIELDS = {"ts", "latency_s", "delay_s", "duration_s"}


def comparable(run: anb.Run) -> list[dict[str, Any]]:
    """The run's events without the fields that measure time, nor a turn's HTTP capture (a replay sends nothing)."""
    out = [{k: v for k, v in event_to_dict(e).items() if k not in TIMING_FIELDS} for e in run.events]
    for data in out:
        if isinstance(data.get("response"), dict):
            data["response"].pop("wire", None)
    return out


def drive(loop: anb.Loop, prompt: str, run_id: str) -> anb.Run:
    run = loop.start(prompt, run_id=run_id).run()
    while run.paused:
        run.approve(run.pending_approvals()[0].call_id, by="test")
        run.run()
    return run


def record_and_replay(model: Any, tools: list[Any], tmp_path: Path, prompt: str = "Refund order 42",
                      **replay: Any) -> tuple[anb.Run, anb.Run, Path]:
    path = tmp_path / "cassette.jsonl"
    with anb.Recorder(model, path) as rec:
        original = drive(anb.Loop(model=rec, tools=tools, retry_base_delay=0.001), prompt, "run-1")
    replayed = drive(anb.Loop(model=anb.ScriptedModel.replay(path, **replay), tools=tools, retry_base_delay=0.001),
                     prompt, "run-1")
    return original, replayed, path


@pytest.mark.parametrize("stream", [False, True])
def test_replay_gives_the_same_events_and_final_state(tmp_path: Path, stream: bool) -> None:
    original, replayed, _ = record_and_replay(
        anb.ScriptedModel.story("refund", stream=stream, chunk_size=5), anb.stories.tools("refund"), tmp_path
    )
    assert original.state is anb.LoopState.COMPLETED
    assert comparable(replayed) == comparable(original)
    assert (replayed.state, replayed.output, replayed.messages) == (original.state, original.output, original.messages)
    if stream:
        assert sum(e.type == "ArgumentsMerged" for e in replayed.events) > 3


def test_the_recording_run_is_the_same_as_an_unrecorded_one(tmp_path: Path) -> None:
    tools = anb.stories.tools("parallel")
    plain = drive(anb.Loop(model=anb.ScriptedModel.story("parallel", stream=True), tools=tools), "Trip?", "run-1")
    with anb.Recorder(anb.ScriptedModel.story("parallel", stream=True), tmp_path / "c.jsonl") as rec:
        recorded = drive(anb.Loop(model=rec, tools=tools), "Trip?", "run-1")
        assert (rec.provider, rec.name, rec.requests) == ("scripted", "story:parallel", 2)
    assert comparable(recorded) == comparable(plain)


def test_errors_retries_and_broken_streams_replay(tmp_path: Path) -> None:
    script = [
        {"error": {"status": 429, "message": "rate limited"}},
        {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "It is", "interrupt": True},
    ]
    model = anb.ScriptedModel(script, stream=True)
    original, replayed, path = record_and_replay(model, anb.stories.tools("calculator"), tmp_path, "2 + 3?")
    assert [e.type for e in original.events].count("ModelRetried") == 1
    assert original.state is anb.LoopState.INCOMPLETE
    assert comparable(replayed) == comparable(original)
    errors = [json.loads(line) for line in path.read_text().splitlines() if '"type":"error"' in line]
    assert [(e["status"], e["interrupted"]) for e in errors] == [(429, False), (None, True)]


def test_lines_carry_turn_index_and_offsets(tmp_path: Path) -> None:
    model = anb.ScriptedModel.story("weather", stream=True, chunk_size=4, latency=0.02, chunk_delay=0.002)
    _, _, path = record_and_replay(model, anb.stories.tools("weather"), tmp_path, "Paris?")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["type"] == "cassette" and lines[0]["version"] == 1 and lines[0]["stream"] is True
    assert {line["type"] for line in lines[1:]} == {"request", "text", "arguments", "turn"}
    assert sorted({line["turn"] for line in lines[1:]}) == [0, 1]
    first = [line for line in lines[1:] if line["turn"] == 0]
    offsets = [line["ms"] for line in first]
    assert offsets == sorted(offsets) and offsets[0] == 0.0 and offsets[1] >= 20  # latency before the first item
    turn = next(line for line in first if line["type"] == "turn")
    assert turn["response"]["raw"] == {"text": "Let me check.",
                                       "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    second = next(line for line in lines if line["type"] == "request" and line["turn"] == 1)
    assert (second["messages_from"], second["message_count"], len(second["messages"])) == (1, 3, 2)


def test_recorded_timing_is_played_back(tmp_path: Path) -> None:
    model = anb.ScriptedModel.story("weather", stream=True, chunk_size=4, latency=0.05, chunk_delay=0.005)
    path = tmp_path / "c.jsonl"
    with anb.Recorder(model, path) as rec:
        drive(anb.Loop(model=rec, tools=anb.stories.tools("weather")), "Paris?", "r")
    recorded_ms = sum(r.items[-1]["ms"] for r in read_cassette(path).requests)
    timings = {}
    for timing in ("none", "recorded"):
        t0 = time.perf_counter()
        drive(anb.Loop(model=anb.ScriptedModel.replay(path, timing=timing), tools=anb.stories.tools("weather")),
              "Paris?", "r")
        timings[timing] = (time.perf_counter() - t0) * 1000
    assert timings["recorded"] >= recorded_ms * 0.9
    assert timings["none"] < recorded_ms / 2
    fast = time.perf_counter()
    drive(anb.Loop(model=anb.ScriptedModel.replay(path, timing="recorded", speed=4),
                   tools=anb.stories.tools("weather")), "Paris?", "r")
    assert (time.perf_counter() - fast) * 1000 < timings["recorded"]


def test_replayed_model_keeps_provider_and_name(tmp_path: Path) -> None:
    _, replayed, path = record_and_replay(anb.ScriptedModel.story("weather"), anb.stories.tools("weather"),
                                          tmp_path, "Paris?")
    model = replayed.loop.model
    assert isinstance(model, anb.ScriptedModel) and isinstance(model, ReplayedModel)
    assert (model.provider, model.name) == ("scripted", "story:weather")
    assert "2 turns" in repr(model)


def test_a_run_that_goes_further_than_the_recording_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with anb.Recorder(anb.ScriptedModel([{"text": "hi"}]), path) as rec:
        anb.Loop(model=rec).start("hello", run_id="a").run()
    model = anb.ScriptedModel.replay(path)
    model.seek("b", 1)  # as a fork past the recording would
    run = anb.Loop(model=model).start("hello", run_id="b").run()
    assert run.state is anb.LoopState.FAILED
    assert "went further than the recording" in (run.reason or "")


def test_many_runs_in_one_cassette(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    tools = anb.stories.tools("weather")
    with anb.Recorder(anb.ScriptedModel([{"text": "one"}, {"text": "two"}]), path) as rec:
        loop = anb.Loop(model=rec, tools=tools)
        loop.start("a", run_id="first").run()
        rec.seek("second", 1)
        loop.start("b", run_id="second").run()
    with pytest.raises(ValueError, match="holds 2 runs"):
        anb.ScriptedModel.replay(path)
    for run, text in (("first", "one"), (1, "two"), ("second", "two")):
        model = anb.ScriptedModel.replay(path, run=run)
        assert anb.Loop(model=model, tools=tools).start("x").run().output == text
    with pytest.raises(ValueError, match="no run 'third'"):
        anb.ScriptedModel.replay(path, run="third")


def test_bad_cassettes_and_options(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "request", "turn": 0}\n')
    with pytest.raises(ValueError, match="expected the cassette header"):
        anb.ScriptedModel.replay(bad)
    bad.write_text('{"type": "cassette", "version": 1}\nnot json\n')
    with pytest.raises(ValueError, match="line 2: not JSON"):
        anb.ScriptedModel.replay(bad)
    bad.write_text('{"type": "cassette", "version": 99}\n')
    with pytest.raises(ValueError, match="version 99"):
        anb.ScriptedModel.replay(bad)
    good = tmp_path / "good.jsonl"
    anb.Recorder(anb.ScriptedModel([]), good).close()
    with pytest.raises(ValueError, match="timing"):
        anb.ScriptedModel.replay(good, timing="fast")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="respond"):
        anb.Recorder(object(), good)


def test_a_closed_recorder_refuses_to_record(tmp_path: Path) -> None:
    rec = anb.Recorder(anb.ScriptedModel([{"text": "hi"}]), tmp_path / "c.jsonl")
    rec.close()
    rec.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        rec.respond(ModelRequest(messages=[], tools=[]))


# -- wire level: an SDK-shaped model fed with a recorded OpenAI stream ----------------------------------------


class FakeClient:
    api_key = FAKE_KEY


class WireModel(SdkModel):
    """An SDK model (the real request cycle and wire hook) whose one SDK call reads a recorded OpenAI answer."""

    provider = openai_chat.PROVIDER
    adapter = openai_chat

    def __init__(self, fixtures: list[str], *, stream: bool = True) -> None:
        super().__init__(FakeClient(), model="gpt-4o", stream=stream,
                         extra_headers={"Authorization": f"Bearer {FAKE_KEY}"})
        self.fixtures = list(fixtures)
        self.sent: list[dict[str, Any]] = []

    def _send(self, body: dict[str, Any]) -> Any:
        self.sent.append(body)
        data = (WIRE / "openai-chat" / self.fixtures.pop(0)).read_bytes()
        if self.stream:
            return iter(list(sse.iter_sse_json([data])))
        return json.loads(data)


@anb.tool
def GetWeatherArgs(city: str, country: str, units: str = "c") -> str:  # noqa: N802 - the recorded tool name
    """Weather."""
    return f"cloudy in {city}"


def test_wire_events_are_recorded_beside_the_items(tmp_path: Path) -> None:
    fixture = "stream-single-tool-call.sse"
    n_events = len(list(sse.iter_sse_json([(WIRE / "openai-chat" / fixture).read_bytes()])))
    model = WireModel([fixture, "stream-refusal.sse"])
    path = tmp_path / "wire.jsonl"
    with anb.Recorder(model, path) as rec:
        assert len(model._wire) == 1  # noqa: SLF001 - the recorder listens on the model's wire hook ...
        original = anb.Loop(model=rec, tools=[GetWeatherArgs]).start("Weather?", run_id="w").run()
    assert model._wire == []  # noqa: SLF001 - ... and stops listening on close
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    first = [line for line in lines[1:] if line["turn"] == 0]
    assert [line["type"] for line in first][:2] == ["request", "wire_request"]
    assert sum(line["type"] == "wire_event" for line in first) == n_events
    assert first[2]["event"]["id"] == "chatcmpl-ABfw8AOXnoa2kzy11vVTSjuQhHCQr"
    wire_request = first[1]["body"]
    assert wire_request["model"] == "gpt-4o" and wire_request["tools"][0]["function"]["name"] == "GetWeatherArgs"
    # the items the adapter made from those events, each after the wire event that carried it
    kinds = [line["type"] for line in first]
    assert kinds.index("wire_event") < kinds.index("arguments") < kinds.index("turn")
    replay = anb.Loop(model=anb.ScriptedModel.replay(path), tools=[GetWeatherArgs])
    replayed = replay.start("Weather?", run_id="w").run()
    assert comparable(replayed) == comparable(original)
    assert replayed.loop.model.provider == "openai_chat"


def test_whole_responses_are_recorded_raw(tmp_path: Path) -> None:
    model = WireModel(["nonstream-parallel-tool-calls.json"], stream=False)
    path = tmp_path / "whole.jsonl"
    with anb.Recorder(model, path) as rec:
        items = list(rec.respond(ModelRequest(messages=[anb.Message.user("hi")], tools=[], run_id="x")))
    turn = items[-1]
    assert isinstance(turn, ModelTurn)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    wire = next(line for line in lines if line["type"] == "wire_response")
    assert wire["body"]["choices"][0]["message"]["tool_calls"][0]["id"] == turn.message.tool_calls[0].call_id
    replayed = list(anb.ScriptedModel.replay(path).respond(ModelRequest(messages=[], tools=[], run_id="y")))
    assert replayed == items


def test_keys_and_auth_headers_never_reach_the_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    leaky = anb.ScriptedModel([
        {"text": f"my key is {FAKE_KEY}", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ])
    path = tmp_path / "leaky.jsonl"
    with anb.Recorder(leaky, path) as rec:
        anb.Loop(model=rec, settings={"extra_headers": {"Authorization": f"Bearer {FAKE_KEY}"}, "api_key": FAKE_KEY}
                 ).start(f"use {FAKE_KEY}").run()
    wire_path = tmp_path / "wire.jsonl"
    with anb.Recorder(WireModel(["stream-single-tool-call.sse"]), wire_path) as rec:
        anb.Loop(model=rec, tools=[GetWeatherArgs]).start("Weather?").run()
    other = "proj-custom-token-without-a-known-shape"
    with anb.Recorder(anb.ScriptedModel([{"text": f"token {other}"}]), tmp_path / "custom.jsonl",
                      secrets=[other]) as rec:
        anb.Loop(model=rec).start("hi").run()
    for p in (path, wire_path, tmp_path / "custom.jsonl"):
        text = p.read_text()
        assert "SECRET" not in text and other not in text
        assert "[REDACTED]" in text


# -- through the emulator and a real SDK client, when both are available ------------------------------------


def test_a_run_through_the_emulator_replays_exactly(tmp_path: Path) -> None:
    emulator = pytest.importorskip("agentnb.emulator")
    openai = pytest.importorskip("openai")
    from agentnb.providers.openai_chat import OpenAIChatModel

    script = [
        {"text": "Let me check.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": "It is 18 °C and sunny in Paris."},
    ]
    tools = anb.stories.tools("weather")
    path = tmp_path / "emulated.jsonl"
    with emulator.Emulator(script) as emu:
        client = openai.OpenAI(base_url=emu.url("openai"), api_key=FAKE_KEY)
        with anb.Recorder(OpenAIChatModel(client, model="gpt-4o-mini", stream=True), path) as rec:
            original = anb.Loop(model=rec, tools=tools).start("Weather in Paris?", run_id="emu").run()
    assert original.state is anb.LoopState.COMPLETED
    replayed = anb.Loop(model=anb.ScriptedModel.replay(path), tools=tools).start("Weather in Paris?",
                                                                                  run_id="emu").run()
    assert comparable(replayed) == comparable(original)
    assert replayed.state is original.state and replayed.output == original.output
    text = path.read_text()
    assert "SECRET" not in text
    assert '"type":"wire_event"' in text


def test_a_replay_asked_something_else_says_so(tmp_path: Path) -> None:
    import warnings

    from agentnb.providers._scripted import ReplayDivergenceWarning

    path = tmp_path / "weather.jsonl"
    loop = anb.Loop(model=anb.Recorder(anb.ScriptedModel.story("weather"), path), tools=anb.stories.tools("weather"))
    loop.start("What's the weather in Paris?").run()
    loop.model.close()
    tools = anb.stories.tools("weather")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same question: not a word of warning
        same = anb.Loop(model=anb.ScriptedModel.replay(path), tools=tools).start("What's the weather in Paris?").run()
    assert same.state is anb.LoopState.COMPLETED
    with pytest.warns(ReplayDivergenceWarning, match="message 1 .user. is .What's the weather in Oslo") as caught:
        oslo = anb.Loop(model=anb.ScriptedModel.replay(path), tools=tools).start("What's the weather in Oslo?").run()
    assert len(caught) == 1  # once per run, though every later request differs too
    assert "Paris" in (oslo.output or "")  # the recorded answer was played
    strict = anb.Loop(model=anb.ScriptedModel.replay(path, strict=True), tools=tools)
    failed = strict.start("What's the weather in Oslo?").run()
    assert failed.state is anb.LoopState.FAILED and "recorded for another conversation" in (failed.reason or "")


def test_transport_headers_never_reach_a_cassette(tmp_path: Path) -> None:
    from agentnb.emulator import Emulator

    path = tmp_path / "gemini.jsonl"
    with Emulator() as emu:
        for stream in (False, True):
            emu.play([{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}, {"text": "Sunny."}])
            model = anb.Recorder(anb.GeminiModel(emu.client("gemini"), model="gemini-3-pro-preview", stream=stream),
                                 path)
            anb.Loop(model=model, tools=anb.stories.tools("weather")).start("Paris?").run()
            model.close()
    text = path.read_text(encoding="utf-8")
    assert "wire_" in text  # the wire was recorded ...
    for header in ("sdk_http_response", "content-type", "Content-Type", "x-goog"):
        assert header not in text, header  # ... without its transport headers
