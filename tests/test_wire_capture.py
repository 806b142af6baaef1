"""The real wire: each SDK model keeps the HTTP exchange of every request, as the emulator on 127.0.0.1 got it.

Through the five official SDK clients, whole and streamed: the captured body parses and equals what the
emulator received, with the real model name and stream flag; the stream's frames are the emulator's frames,
in order, with times that never go back; the client's key is nowhere in the run. Then the cap, the opt-out,
save/resume/export, the frames payload, the wire view's texts and its curl command (run by a real curl).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger import viewdata, wire
from agentnb._debugger.timeline import Timeline
from agentnb._redact import MASK
from agentnb.emulator import Emulator
from agentnb.events import event_to_json
from agentnb.frames import events_with_payload
from tests.conftest import SDK_MODEL_NAMES, add, sdk_model

APIS = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama"]
NAMES = SDK_MODEL_NAMES
KEY = "zq9-wire-capture-credential-4471"  # no known shape: only the model's credentials() can mask it
SCRIPT = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "The sum is 3."}]


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


def model(emu: Emulator, api: str, stream: bool, **options: Any) -> Any:
    return sdk_model(emu.url, api, KEY, stream=stream, **options)


def turns(run: anb.Run) -> list[anb.ModelTurn]:
    return [e.response for e in run.events if e.type == "TurnCompleted"]


def frame_text(data: str | bytes) -> str:
    text = data.decode() if isinstance(data, bytes) else data
    return text.replace("\r\n", "\n").strip()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_the_capture_is_what_the_emulator_received(emu: Emulator, api: str, stream: bool) -> None:
    emu.play(SCRIPT)
    start = len(emu.requests)
    run = anb.Loop(model=model(emu, api, stream), tools=[add]).start("Add 1 and 2.").run()
    assert run.output == "The sum is 3.", run.reason
    got = emu.requests[start:]
    assert len(got) == len(turns(run)) == 2
    for turn, logged in zip(turns(run), got, strict=True):
        w = turn.wire
        assert w is not None and w["status"] == 200 and w["method"] == "POST" and w["attempts"] == 1
        body = json.loads(w["request_body"])
        if api == "gemini":  # the model and the stream flag travel in the URL; the emulator logs the model too
            assert f"models/{NAMES[api]}:{'streamGenerateContent' if stream else 'generateContent'}" in w["url"]
            assert body == {k: v for k, v in logged.body.items() if k != "model"}
        else:
            assert body == logged.body
            assert body["model"] == NAMES[api]  # the real name, not "<model>"
            assert bool(body.get("stream")) is stream
        # the key went over the wire (the emulator saw it), and the capture holds only the mask
        assert any(KEY in v for v in logged.headers.values())
        assert any(MASK in v for v in w["request_headers"].values())
        assert w["stream"] is stream
        if stream:
            assert [frame_text(t) for _, t in w["frames"]] == [frame_text(f) for f in logged.frames]
            assert w["frames_total"] == len(logged.frames) > 1 and w["response_body"] is None
            times = [ms for ms, _ in w["frames"]]
            assert times == sorted(times) and times[0] >= 0
        else:
            assert w["frames"] == [] and isinstance(json.loads(w["response_body"]), dict | list)
    text = "\n".join(map(event_to_json, run.events))
    assert "request_headers" in text and KEY not in text


@pytest.mark.parametrize("api", APIS)
def test_async_clients_are_captured_too(emu: Emulator, api: str) -> None:
    emu.play([{"text": "hi"}])
    run = anb.Loop(model=sdk_model(emu.url, api, KEY, stream=True, async_=True)).start("Hi").run()
    w = turns(run)[0].wire
    assert w is not None and run.output == "hi"
    logged = emu.requests[-1]
    assert json.loads(w["request_body"]) == {k: v for k, v in logged.body.items() if api != "gemini" or k != "model"}
    assert [frame_text(t) for _, t in w["frames"]] == [frame_text(f) for f in logged.frames]


def test_the_cap_keeps_whole_frames_and_says_where_it_cut(emu: Emulator) -> None:
    emu.play([{"text": "word " * 400}])
    run = anb.Loop(model=model(emu, "openai_chat", True, wire_cap=1500)).start("Talk.").run()
    w = turns(run)[0].wire
    assert w is not None and w["truncated"] is not None
    kept = len(w["request_body"].encode()) + sum(len(t.encode()) for _, t in w["frames"])
    assert kept <= 1500 < w["bytes"]
    assert w["truncated"] == f"truncated at {kept:,} bytes of {w['bytes']:,}"
    assert 0 < len(w["frames"]) < w["frames_total"] == len(emu.requests[-1].frames)
    assert all(frame_text(t) == frame_text(f) for (_, t), f in zip(w["frames"], emu.requests[-1].frames, strict=False))
    view = viewdata.wire_view(Timeline(run.events), 2, "OpenAI Chat Completions")["sent"]
    assert view["truncated"] == w["truncated"]
    assert f"{len(w['frames'])} of {w['frames_total']} frames kept" in view["response"]
    with pytest.raises(ValueError, match="wire_cap must be a number of bytes"):
        model(emu, "openai_chat", True, wire_cap=-1)


def test_capture_off_keeps_nothing_and_the_view_says_so(emu: Emulator) -> None:
    emu.play([{"text": "hi"}])
    run = anb.Loop(model=model(emu, "anthropic", True, capture_wire=False)).start("Hi").run()
    assert run.output == "hi" and turns(run)[0].wire is None
    note = viewdata.wire_view(Timeline(run.events), 2, "Anthropic Messages")["sent"]["note"]
    assert "capture_wire was off" in note


def test_the_capture_survives_save_resume_and_export(emu: Emulator, tmp_path: Path) -> None:
    emu.play(SCRIPT)
    loop = anb.Loop(model=model(emu, "openai_responses", True), tools=[add],
                    store=anb.SqliteStore(tmp_path / "runs.db", key="store-key-for-tests"))
    run = loop.start("Add 1 and 2.", run_id="w").run()
    wires = [t.wire for t in turns(run)]
    assert all(wires)
    run.transcript.save(tmp_path / "run.jsonl")
    assert [t.wire for t in turns(anb.Transcript.load(tmp_path / "run.jsonl"))] == wires  # type: ignore[arg-type]
    resumed = anb.Run.resume("w", loop=loop)
    assert [e.response.wire for e in resumed.events if e.type == "TurnCompleted"] == wires
    page = run.transcript.to_html(tmp_path / "run.html")
    assert [t.wire for t in turns(anb.Transcript.load(page))] == wires  # type: ignore[arg-type]
    for path in (tmp_path / "run.jsonl", tmp_path / "runs.db", page):
        assert KEY.encode() not in path.read_bytes(), path.name
    # the frames payload leaves the capture out unless asked
    payload = run.transcript.frames.events(payload=True)
    turn_payloads = payload[payload["type"] == "TurnCompleted"]["payload"]
    assert not any('"wire"' in p for p in turn_payloads)
    asked = events_with_payload([run.events], wire=True)
    assert all('"request_headers"' in p for p in asked[asked["type"] == "TurnCompleted"]["payload"])
    # the export's wire view carries it, on the tab of the API that sent it
    bundle = viewdata.static_bundle(Timeline(run.events), title="t")
    sent = bundle["wire"][str(run.events[1].seq)]["OpenAI Responses"]["sent"]
    assert sent["title"].startswith("as sent through OpenAI Responses: POST") and "frames" in sent["response"]


def test_copy_as_curl_sends_the_same_request_with_the_key_from_the_shell(emu: Emulator) -> None:
    emu.play([{"text": "hi"}, {"text": "again"}])
    run = anb.Loop(model=model(emu, "openai_chat", False)).start("Hi").run()
    command = viewdata.wire_view(Timeline(run.events), 2, "OpenAI Chat Completions")["sent"]["curl"]
    assert "$OPENAI_API_KEY" in command and KEY not in command
    sent_body = json.loads(turns(run)[0].wire["request_body"])  # type: ignore[index]
    out = subprocess.run(["bash", "-c", command + " --silent --show-error"], capture_output=True, text=True,
                         timeout=30, env={**os.environ, "OPENAI_API_KEY": KEY}, check=True)
    assert json.loads(out.stdout)["choices"][0]["message"]["content"] == "again"
    assert emu.requests[-1].body == sent_body and emu.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    assert shlex.split(command)[0] == "curl"


def test_a_scripted_run_says_nothing_went_over_the_wire_and_the_where_table_fits_the_request() -> None:
    run = anb.Loop(model=anb.ScriptedModel([{"text": "x"}])).start("hi").run()
    view = viewdata.wire_view(Timeline(run.events), 2, wire.ADAPTERS[0][0])
    assert "played by a ScriptedModel" in view["sent"]["note"] and not view["sent"]["request"]
    assert view["where"] == [] and view["note"].endswith(": 1 message, 0 tools")  # no system prompt, no tools
    tooled = anb.Loop(model=anb.ScriptedModel([{"text": "x"}]), tools=[add]).start("hi").run()
    tooled_view = viewdata.wire_view(Timeline(tooled.events), 2, wire.ADAPTERS[0][0])
    assert [row[0] for row in tooled_view["where"]] == ["a tool call", "its result"]
    told = anb.Loop(model=anb.ScriptedModel([{"text": "x"}]), system="Be brief.").start("hi").run()
    assert viewdata.wire_view(Timeline(told.events), 2, wire.ADAPTERS[0][0])["where"][0][0] == "system prompt"
