"""The emulator streams as the script plays and answers many clients at once, measured at the socket and the SDK.

Streams: a script with a chunk delay reaches a raw socket frame by frame, spread over the script's time (each
frame waits its delay, so the gaps are lower bounds whatever the machine's load), for every wire API; the
official ``openai`` SDK yields its first chunk before the emulator wrote the last frame; a live run sees its
text merge fragment by fragment; a cut still breaks a paced stream. Parallelism is shown without timing:
scripts that wait on a barrier only all of them together can pass, which a serialized emulator never lets
them reach.
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest

import agentnb as anb
from agentnb.emulator import Emulator
from agentnb.emulator._http import Workers
from agentnb.providers import WIRE_APIS

DELAY = 0.05
TEXT = "The quick brown fox jumps over the lazy dog, twice."  # 51 characters: 7 fragments of 8
HI = [{"role": "user", "content": "hi"}]

STREAMED: dict[str, tuple[str, str, dict[str, Any]]] = {  # api -> (url name, path under it, streamed request)
    "openai_chat": ("openai", "/chat/completions", {"model": "gpt-4.1", "stream": True, "messages": HI}),
    "openai_responses": ("openai", "/responses", {"model": "gpt-5", "stream": True, "input": "hi"}),
    "anthropic": ("anthropic", "/v1/messages", {"model": "claude-sonnet-4-6", "max_tokens": 50, "stream": True,
                                                "messages": HI}),
    "gemini": ("gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
               {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    "ollama": ("ollama", "/api/chat", {"model": "qwen3", "messages": HI}),  # streams unless stream: false
}


def test_every_wire_api_has_a_streamed_request_here() -> None:
    assert sorted(STREAMED) == sorted(WIRE_APIS)


def _post_raw(emu: Emulator, api: str) -> tuple[list[float], bytes]:
    """POST the API's streamed request on a raw socket: when each read returned (seconds after sending), and the
    bytes after the headers."""
    name, path, body = STREAMED[api]
    url = emu.url(name) + path
    target = url[url.index("/", len("http://")):]
    data = json.dumps(body).encode()
    arrivals: list[float] = []
    received = b""
    with socket.create_connection(("127.0.0.1", emu.port), timeout=30) as sock:
        sock.sendall(f"POST {target} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                     f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode() + data)
        t0 = time.perf_counter()
        while chunk := sock.recv(65536):
            arrivals.append(time.perf_counter() - t0)
            received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return arrivals, rest


def _chunks(body: bytes) -> tuple[list[bytes], bool]:
    """The HTTP chunks of a chunked body, and whether it ended with the final (empty) chunk."""
    out = []
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out, True
        if len(body) < size + 2:  # a chunk cut short
            out.append(body)
            return out, False
        out.append(body[:size])
        body = body[size + 2:]
    return out, False


@pytest.mark.parametrize("api", list(STREAMED))
def test_frames_reach_the_socket_one_by_one_at_the_script_pace(api: str) -> None:
    model = anb.ScriptedModel([{"text": TEXT}], stream=True, chunk_delay=DELAY)
    with Emulator(model) as emu:
        arrivals, body = _post_raw(emu, api)
        logged = emu.requests[-1]
    frames, ended = _chunks(body)
    assert ended and len(frames) >= 8, frames  # the seven fragments of text, with the service's framing
    assert TEXT[:8].encode() in b"".join(frames)
    reads = arrivals[1:]  # the first read is the headers, sent at once
    spread = reads[-1] - reads[0]
    # each frame waits DELAY after the one before it: the frames cannot all arrive within a few milliseconds
    assert spread >= 0.5 * DELAY * (len(frames) - 1), (spread, arrivals)
    assert len(reads) >= len(frames) // 2, arrivals  # they came in many reads, not one burst
    assert statistics.median(b - a for a, b in zip(reads, reads[1:], strict=False)) >= DELAY / 2, arrivals
    assert logged.status == 200 and logged.stream and logged.finished_at is not None


def test_the_openai_sdk_yields_the_first_chunk_before_the_last_frame_is_written() -> None:
    model = anb.ScriptedModel([{"text": TEXT}], stream=True, chunk_delay=DELAY)
    with Emulator(model) as emu:
        client = openai.OpenAI(base_url=emu.url("openai"), api_key="offline", max_retries=0)
        yielded: list[float] = []
        pieces = []
        for chunk in client.chat.completions.create(model="gpt-4.1", messages=HI, stream=True):  # type: ignore
            content = chunk.choices[0].delta.content if chunk.choices else None
            if content:
                yielded.append(time.perf_counter())
                pieces.append(content)
        # the server notes the time once its last write returned, which can be just after the client read it
        deadline = time.monotonic() + 10
        while emu.requests[-1].finished_at is None and time.monotonic() < deadline:
            time.sleep(0.01)
        finished_at = emu.requests[-1].finished_at
    assert "".join(pieces) == TEXT and len(pieces) == 7
    first_at = yielded[0]
    assert finished_at is not None  # when the emulator wrote the stream's last byte: frames after the first one
    assert finished_at - first_at >= 0.5 * DELAY * (len(pieces) - 1), (first_at, finished_at)


def test_a_live_run_through_the_sdk_sees_its_text_merge_fragment_by_fragment() -> None:
    model = anb.ScriptedModel([{"text": TEXT}], stream=True, chunk_delay=DELAY)
    with Emulator(model) as emu:
        loop = anb.Loop(model=anb.OpenAIChatModel(emu.client("openai"), model="gpt-4.1", stream=True))
        seen: list[float] = []
        run = loop.start("hi")
        run.on_event(lambda event, state: seen.append(time.perf_counter()) if event.type == "TextMerged" else None)
        run.run()
    assert run.output == TEXT
    assert len(seen) == 7 and seen[-1] - seen[0] >= 0.5 * DELAY * 6, seen


@pytest.mark.parametrize("api", list(STREAMED))
def test_a_cut_still_breaks_a_paced_stream(api: str) -> None:
    turn = {"text": TEXT, "tool_calls": [{"name": "add", "arguments": {"a": 123456789, "b": 987654321}}],
            "interrupt": True}
    with Emulator(anb.ScriptedModel([turn], chunk_delay=DELAY)) as emu:
        arrivals, body = _post_raw(emu, api)
    frames, ended = _chunks(body)
    assert not ended and len(frames) >= 2, frames  # some frames, then the connection dropped mid-frame
    assert arrivals[-1] - arrivals[1] >= 0.5 * DELAY * (len(frames) - 2), arrivals


# -- many requests at once -----------------------------------------------------------------------------------


def _at_once(n: int, work: Callable[[int], Any]) -> list[Any]:
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        try:
            out[i] = work(i)
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@pytest.mark.parametrize("n", [2, 64])
def test_scripts_that_wait_for_each_other_are_answered_together(n: int) -> None:
    # Each script function waits at a barrier that opens only when all n requests are inside theirs: an emulator
    # that answers one request at a time (a lock around answering) breaks the barrier and answers 500.
    meeting = threading.Barrier(n, timeout=20)

    def meet(messages: list[anb.Message]) -> dict[str, Any]:
        meeting.wait()
        return {"text": "met"}

    with Emulator([meet] * n) as emu:
        client = openai.OpenAI(base_url=emu.url("openai"), api_key="offline", max_retries=0, timeout=60)
        answers = _at_once(n, lambda i: client.chat.completions.create(model="gpt-4.1", messages=HI)  # type: ignore
                           .choices[0].message.content)  # one client, n connections: its pool holds up to 1,000
        statuses = [r.status for r in emu.requests]
    assert answers == ["met"] * n and statuses == [200] * n


def test_a_waiting_script_holds_back_only_its_own_request() -> None:
    # The first request's script waits until the second one has been answered: serialized, the second would
    # wait behind the first, which would give up after 20 s and answer "gave up".
    entered, release = threading.Event(), threading.Event()

    def held(messages: list[anb.Message]) -> dict[str, Any]:
        entered.set()
        return {"text": "released" if release.wait(20) else "gave up"}

    with Emulator([held, {"text": "quick"}]) as emu:
        client = openai.OpenAI(base_url=emu.url("openai"), api_key="offline", max_retries=0, timeout=60)
        first: list[Any] = []
        waiting = threading.Thread(target=lambda: first.append(
            client.chat.completions.create(model="gpt-4.1", messages=HI).choices[0].message.content))  # type: ignore
        waiting.start()
        assert entered.wait(20)
        quick = client.chat.completions.create(model="gpt-4.1", messages=HI)  # type: ignore[arg-type]
        release.set()
        waiting.join(30)
    assert quick.choices[0].message.content == "quick" and first == ["released"]


# -- the worker threads -----------------------------------------------------------------------------------


def test_workers_reuse_an_idle_thread_and_start_one_per_busy_job() -> None:
    pool = Workers()
    for _ in range(20):  # one after the other: the same worker each time
        done = threading.Event()
        pool.submit(done.set)
        assert done.wait(5)
        time.sleep(0.001)  # let the worker count itself idle again
    assert pool.started == 1
    gate = threading.Event()
    running = threading.Semaphore(0)

    def busy() -> None:
        running.release()
        gate.wait(5)

    for _ in range(5):  # five at once: a worker each (one of them the idle one)
        pool.submit(busy)
    for _ in range(5):
        assert running.acquire(timeout=5)
    assert pool.started == 5
    gate.set()
    pool.close()


def test_an_idle_worker_ends_and_a_failing_job_does_not_take_its_worker_down() -> None:
    pool = Workers(idle_seconds=0.05, name="test-idle-worker")

    def fails() -> None:
        raise RuntimeError("a job's own bug")

    pool.submit(fails)
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(5)
    deadline = time.perf_counter() + 5
    while any(t.name.startswith("test-idle-worker") for t in threading.enumerate()) and time.perf_counter() < deadline:
        time.sleep(0.01)
    assert not any(t.name.startswith("test-idle-worker") for t in threading.enumerate())
    again = threading.Event()
    pool.submit(again.set)  # a new worker starts for the next job
    assert again.wait(5)
    pool.close()
