"""The wire of a request that failed: what an SDK model sent and got back when the answer was an HTTP error.

Through the five official SDK clients against the emulator on 127.0.0.1 (their own retries off, so the loop's
retry is the one that asks again): a 503 then a retry keeps the failed exchange on ``ModelRetried.wire`` (its
status, the provider's error body, the same request the retry sent, no key anywhere); a 400 that fails the run
keeps it on ``RunFinished.wire`` through save and load; the frames payload leaves it out unless asked; the
wire view shows it at the failure and, for a turn that got no answer, at its request. A stream cut mid-way
keeps the frames that came before the cut.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger import cards, viewdata, wire
from agentnb._debugger.timeline import Timeline
from agentnb.emulator import Emulator
from agentnb.events import event_to_json
from agentnb.frames import events_with_payload
from tests.conftest import add, sdk_model

APIS = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama"]
TITLES = {adapter.PROVIDER: title for title, adapter in wire.ADAPTERS}
KEY = "zq9-failed-wire-credential-5582"  # no known shape: only the model's credentials() can mask it
SCRIPT = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "The sum is 3."}]


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


def model(emu: Emulator, api: str, stream: bool) -> Any:
    """The API's SDK model on its official client, with the SDK's own retries off (openai, anthropic)."""
    client = {"max_retries": 0} if api.startswith(("openai", "anthropic")) else {}
    return sdk_model(emu.url, api, KEY, stream=stream, client=client)


def no_key_in(run: anb.Run) -> None:
    text = "\n".join(event_to_json(e) for e in run.events)
    assert KEY not in text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_a_failed_attempt_keeps_its_exchange_on_the_retry(emu: Emulator, api: str, stream: bool) -> None:
    emu.play(SCRIPT)
    emu.fail(503, message="overloaded, come back soon")  # after play: playing a script clears the faults
    run = anb.Loop(model=model(emu, api, stream), tools=[add], retry_base_delay=0.01).start("Add 1 and 2.").run()
    assert run.output == "The sum is 3.", run.reason
    [retried] = [e for e in run.events if isinstance(e, anb.events.ModelRetried)]
    w = retried.wire
    assert w is not None and w["status"] == 503 and w["provider"] == api and w["attempts"] == 1
    assert "overloaded, come back soon" in w["response_body"] and not w["stream"]
    answered = next(e.response.wire for e in run.events if isinstance(e, anb.events.TurnCompleted))
    assert answered is not None
    assert json.loads(w["request_body"]) == json.loads(answered["request_body"])  # the retry asked the same
    assert w["url"] == answered["url"]
    no_key_in(run)
    view = viewdata.wire_view(Timeline(run.events), retried.seq, TITLES[api])["sent"]
    assert view["title"].startswith(f"as sent through {TITLES[api]}, failed: POST")
    assert view["response"].startswith("HTTP 503") and "overloaded" in view["response"]
    assert "attempt 1 failed" in view["note"] and view["curl"].startswith("curl")
    assert "the Wire tab shows the exchange" in cards.body_html(retried, cards.CardContext(Timeline(run.events)))


def test_the_frames_payload_leaves_a_failed_exchange_out_unless_asked(emu: Emulator) -> None:
    emu.play(SCRIPT)
    emu.fail(503)
    run = anb.Loop(model=model(emu, "openai_chat", True), tools=[add], retry_base_delay=0.01).start("Add.").run()
    plain = events_with_payload([run.events])
    asked = events_with_payload([run.events], wire=True)
    retried = plain["type"] == "ModelRetried"
    assert retried.sum() == 1
    assert '"wire"' not in plain[retried]["payload"].iloc[0]
    assert json.loads(asked[retried]["payload"].iloc[0])["wire"]["status"] == 503


def test_a_request_that_fails_the_run_keeps_its_exchange_through_save_and_load(emu: Emulator, tmp_path: Path) -> None:
    emu.play(SCRIPT)
    emu.fail(400, message="messages: this field is not allowed here")
    run = anb.Loop(model=model(emu, "anthropic", False), tools=[add]).start("Add 1 and 2.").run()
    assert run.state is anb.LoopState.FAILED
    last = run.events[-1]
    assert isinstance(last, anb.events.RunFinished) and last.wire is not None
    assert last.wire["status"] == 400 and "not allowed here" in last.wire["response_body"]
    no_key_in(run)
    run.transcript.save(tmp_path / "run.jsonl")
    loaded = anb.Transcript.load(tmp_path / "run.jsonl")
    assert loaded.events[-1].wire == last.wire  # type: ignore[attr-defined]
    assert KEY.encode() not in (tmp_path / "run.jsonl").read_bytes()
    # the request got no answer: its own row shows the failed exchange, and so does the last event
    tl = Timeline(run.events)
    asked = next(e.seq for e in run.events if e.type == "ModelRequested")
    for seq in (asked, last.seq):
        view = viewdata.wire_view(tl, seq, "Anthropic Messages")["sent"]
        assert "failed: POST" in view["title"] and view["response"].startswith("HTTP 400"), seq
        assert view["note"] == "this request ended the run"
    # on another API's tab, the view names the tab that sent it
    other = viewdata.wire_view(tl, last.seq, "OpenAI Chat Completions")["sent"]
    assert not other["request"] and other["note"] == "as sent through Anthropic Messages, failed (see its tab)"


def test_a_stream_cut_mid_way_keeps_the_frames_before_the_cut(emu: Emulator) -> None:
    turn = {"text": "The quick brown fox jumps over the lazy dog",
            "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}], "interrupt": True}
    emu.play([turn])
    run = anb.Loop(model=model(emu, "openai_chat", True), tools=[add], max_retries=0).start("Add.").run()
    assert run.state is anb.LoopState.INCOMPLETE
    [done] = [e for e in run.events if isinstance(e, anb.events.TurnCompleted)]
    w = done.response.wire
    assert w is not None and w["stream"] and w["frames_total"] == len(w["frames"]) >= 2
    assert not done.response.complete
    assert "[DONE]" not in "".join(text for _, text in w["frames"])  # the cut came before the done signal
    assert not any(e.type == "ToolStarted" for e in run.events)


class Hostile(http.server.BaseHTTPRequestHandler):
    """Answers a Chat Completions request with one good chunk, then an event of the wrong shape (or a body)."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        good = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}]}
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.wfile.write(f"data: {json.dumps(good)}\n\ndata: {{\"id\": \"c1\", \"choices\": 7}}\n\n"
                             "data: [DONE]\n\n".encode())
        else:
            data = json.dumps({"id": "c1", "object": "chat.completion", "choices": "none today"}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns as it serializes the odd chunk
def test_an_answer_of_the_wrong_shape_fails_the_run_clearly_with_what_came(stream: bool) -> None:
    from agentnb.providers.openai_chat import _model as chat

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = chat.client(KEY, f"http://127.0.0.1:{server.server_port}/v1", max_retries=0)
        run = anb.Loop(model=chat.OpenAIChatModel(client, model="gpt-4.1", stream=stream)).start("hi").run()
    finally:
        server.shutdown()
        server.server_close()
    assert run.state is anb.LoopState.FAILED
    assert "openai_chat: an answer of an unexpected shape" in run.reason, run.reason  # not "the model raised"
    last = run.events[-1]
    assert isinstance(last, anb.events.RunFinished) and last.wire is not None and last.wire["status"] == 200
    if stream:
        assert [text for _, text in last.wire["frames"]][1] == 'data: {"id": "c1", "choices": 7}'
    else:
        assert json.loads(last.wire["response_body"])["choices"] == "none today"
    no_key_in(run)


def test_what_an_adapter_cannot_read_is_named_a_broken_stream_or_a_wrong_shape() -> None:
    """The fallback when an exception escapes the adapter: transport faults break the stream, the rest is shape."""
    import httpx

    from agentnb.exceptions import StreamInterrupted, WireFormatError
    from agentnb.providers.openai_chat import _model as chat

    sdk = chat.OpenAIChatModel(chat.client(KEY, "http://127.0.0.1:9/v1", max_retries=0), model="gpt-4.1")
    broke = sdk._unreadable(httpx.RemoteProtocolError("peer closed connection"), None)
    assert isinstance(broke, StreamInterrupted) and "the stream broke (RemoteProtocolError" in str(broke)
    odd = sdk._unreadable(AttributeError("'str' object has no attribute 'get'"), None)
    assert isinstance(odd, WireFormatError) and "an answer of an unexpected shape (AttributeError" in str(odd)
    own = WireFormatError("openai_chat: no choices")
    assert sdk._unreadable(own, None) is own and own.wire is None  # nothing was captured: no wire
