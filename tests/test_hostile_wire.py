"""Hostile input at the wire edges: any JSON value is findings or a provider-shaped 4xx, never a crash or a 5xx.

Property tests drive arbitrary JSON values (biased towards each wire API's own field names, so they reach
deep into the readers) through ``anb.lint`` (with and without ``fix``), ``anb.import_history`` and the
emulator's request handling. The emulator is then tried under bad HTTP on a raw socket: an invalid
``Content-Length``, a body over the cap, a silent client, wrong paths and methods, deep JSON.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._lint import PROVIDERS, validate
from agentnb._messages import Message, ToolCallPart, ToolResultPart
from agentnb.emulator import Emulator, _http, _records
from agentnb.emulator._http import _Request
from agentnb.providers import WIRE_APIS, anthropic, gemini, ollama, openai_chat, openai_responses

ADAPTERS: dict[str, Any] = {"openai_chat": openai_chat, "openai_responses": openai_responses, "anthropic": anthropic,
                            "gemini": gemini, "ollama": ollama}

FIELDS = [
    "role", "content", "tool_calls", "function", "arguments", "name", "id", "tool_call_id", "type", "input",
    "call_id", "output", "parts", "functionCall", "functionResponse", "function_call", "function_response", "args",
    "response", "thoughtSignature", "thought_signature", "signature", "thinking", "text", "tool_use_id",
    "encrypted_content", "messages", "contents", "tools", "model", "previous_response_id", "store",
    "functionDeclarations", "function_declarations", "systemInstruction", "system", "is_error", "summary",
    "tool_choice", "instructions", "thought", "parameters", "input_schema", "max_tokens",
]
WORDS = ["user", "assistant", "tool", "system", "model", "developer", "function", "function_call",
         "function_call_output", "reasoning", "message", "tool_use", "tool_result", "text", "thinking",
         "item_reference", "enabled", "c1", "{}", "[]", '{"a": 1', "m"]
scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False) | (
    st.text(max_size=4)) | st.sampled_from(WORDS)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(FIELDS) | st.text(max_size=3), children, max_size=5),
    max_leaves=30,
)
# a message-shaped value: mostly the provider's own keys, any values
messages = st.lists(st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5) | json_values, max_size=5)
LIST_KEY = {api.name: api.list_key for api in WIRE_APIS.values()}
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _never_unreadable(findings: list[Any]) -> None:
    # "unreadable" is the last-resort net: a value the shape check should have caught reached a rule
    assert not [f for f in findings if f.code == "unreadable"], findings


@pytest.mark.parametrize("provider", PROVIDERS)
@FUZZ
@given(value=json_values | messages)
def test_lint_reads_any_json_value(provider: str, value: Any) -> None:
    findings = anb.lint(value, provider)
    _never_unreadable(findings)
    fixed, changes = anb.lint(value, provider, fix=True)
    assert isinstance(fixed, list | str) and isinstance(changes, list)


@pytest.mark.parametrize("provider", PROVIDERS)
@FUZZ
@given(history=messages)
def test_lint_fix_leaves_no_shape_error(provider: str, history: list[Any]) -> None:
    fixed, _ = anb.lint(history, provider, fix=True)
    assert not [f for f in anb.lint(fixed, provider) if f.code in ("malformed", "arguments_not_object")]


@pytest.mark.parametrize("provider", PROVIDERS)
@FUZZ
@given(value=json_values | messages)
def test_import_history_reads_any_json_value(provider: str, value: Any) -> None:
    imported = anb.import_history(value, provider)  # type: ignore[arg-type]
    assert not [f for f in imported.findings if f.code == "unreadable"], imported.findings
    imported.transcript.frames.calls()  # the transcript it made is usable


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


@pytest.mark.parametrize("provider", PROVIDERS)
@FUZZ
@given(history=json_values | messages, extra=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=3))
def test_the_emulator_answers_any_body_with_a_4xx_or_an_answer(
    emu: Emulator, provider: str, history: Any, extra: dict[str, Any]
) -> None:
    body = {**extra, LIST_KEY[provider]: history, "model": "m", "max_tokens": 10}
    emu.play([{"text": "ok"}])
    try:
        emu.answer(provider, body, "m", False)
    except _Request as exc:
        assert 400 <= exc.status < 500, (exc.status, exc.message)
        assert exc.message


# -- histories that poison a provider ---------------------------------------------------------------------

BAD_ARGUMENTS = ['{"a": 1,', "[]", '"x"', "not json"]


@pytest.mark.parametrize("raw", BAD_ARGUMENTS)
def test_arguments_that_are_not_an_object_are_sent_as_an_empty_object(raw: str) -> None:
    call = ToolCallPart(call_id="call_1", name="add", arguments_raw=raw)
    result = ToolResultPart(call_id="call_1", name="add", status="error", content=f"invalid arguments: {raw}")
    history = [Message.user("add"), Message(role="assistant", parts=(call,)), Message(role="tool", parts=(result,))]
    sent = {}
    for provider, adapter in ADAPTERS.items():
        sent[provider] = body = adapter.render_request(history)
        assert not [f for f in validate(provider, body) if f.severity == "error"], provider
    assert sent["openai_chat"]["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert sent["openai_responses"]["input"][1]["arguments"] == "{}"
    assert sent["anthropic"]["messages"][1]["content"][0]["input"] == {}
    assert sent["gemini"]["contents"][1]["parts"][0]["functionCall"]["args"] == {}
    assert sent["ollama"]["messages"][1]["tool_calls"][0]["function"]["arguments"] == {}
    assert history[1].tool_calls[0].arguments_raw == raw  # the transcript keeps what the model wrote
    assert raw in history[2].tool_results[0].content  # and so does the result that tells the model


def _poisoned(provider: str, raw: Any) -> list[Any]:
    if provider == "openai_chat":
        return [{"role": "user", "content": "add"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": raw}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "bad arguments"}]
    if provider == "openai_responses":
        return [{"role": "user", "content": "add"},
                {"type": "function_call", "call_id": "c1", "name": "add", "arguments": raw},
                {"type": "function_call_output", "call_id": "c1", "output": "bad arguments"}]
    value = json.loads(raw) if raw.startswith(("[", '"')) else raw
    if provider == "anthropic":
        return [{"role": "user", "content": "add"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "add", "input": value}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "bad"}]}]
    if provider == "ollama":
        return [{"role": "user", "content": "add"},
                {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add", "arguments": value}}]},
                {"role": "tool", "content": "bad arguments", "tool_name": "add"}]
    return [{"role": "user", "parts": [{"text": "add"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "add", "args": value}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "add", "response": {"error": "bad"}}}]}]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("raw", BAD_ARGUMENTS)
def test_a_poisoned_history_is_reported_fixed_and_refused(emu: Emulator, provider: str, raw: str) -> None:
    history = _poisoned(provider, raw)
    found = [f for f in anb.lint(history, provider) if f.severity == "error"]
    assert [f.code for f in found] == ["arguments_not_object"]
    fixed, changes = anb.lint(history, provider, fix=True)
    assert [c.action for c in changes] == ["replaced"]
    assert anb.lint(fixed, provider) == []
    emu.play([{"text": "ok"}])
    with pytest.raises(_Request) as info:
        emu.answer(provider, {LIST_KEY[provider]: history, "model": "m", "max_tokens": 10}, "m", False)
    assert info.value.status == 400 and info.value.findings[0].code == "arguments_not_object"
    emu.play([{"text": "ok"}])
    emu.answer(provider, {LIST_KEY[provider]: fixed, "model": "m", "max_tokens": 10}, "m", False)


def test_the_issue_example_is_a_finding_not_a_crash() -> None:
    found = anb.lint([{"role": "user", "content": ["hello"]}], provider="anthropic")
    assert [(f.code, f.position) for f in found] == [("malformed", "messages[0].content[0]")]
    assert found[0].provider_message.startswith("messages.0.content.0: Input should be a valid dictionary")


# -- the emulator under bad HTTP --------------------------------------------------------------------------


def _raw(emu: Emulator, data: bytes, *, read_timeout: float = 10) -> tuple[int, dict[str, Any], bytes]:
    with socket.create_connection(("127.0.0.1", emu.port), timeout=read_timeout) as s:
        try:
            s.sendall(data)
        except OSError:  # the server answered and closed before we finished sending
            pass
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = {}
    return status, parsed, head


def _post(path: str, body: bytes, length: str | None = None) -> bytes:
    size = str(len(body)) if length is None else length
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n"
            "Connection: close\r\n\r\n").encode() + body


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", ""])
def test_an_invalid_content_length_is_a_400(emu: Emulator, length: str) -> None:
    status, body, _ = _raw(emu, _post("/openai/v1/chat/completions", b"{}", length))
    assert status == 400 and "Content-Length" in body["error"]["message"]
    assert body["error"]["type"] == "invalid_request_error"


def test_a_body_over_the_cap_is_a_413_and_is_never_read(emu: Emulator) -> None:
    size = _records.MAX_BODY_BYTES + 1
    before = len(emu.requests)
    status, body, _ = _raw(emu, _post("/anthropic/v1/messages", b"x" * 1024, str(size)))
    assert status == 413 and body["type"] == "error" and body["error"]["type"] == "request_too_large"
    assert emu.requests[-1].body == {} and len(emu.requests) == before + 1  # nothing of it was kept


def test_a_silent_client_is_cut_off_by_the_read_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http.Handler, "timeout", 0.3)
    with Emulator() as emu:
        started = time.monotonic()
        status, body, _ = _raw(emu, _post("/gemini/v1beta/models/m:generateContent", b"{", "100"))
        assert status == 408 and body["error"]["status"] == "DEADLINE_EXCEEDED"
        assert time.monotonic() - started < 5
        with socket.create_connection(("127.0.0.1", emu.port), timeout=5) as s:  # not even a request line
            s.sendall(b"POST /gemini")
            assert s.recv(100) == b""  # closed by the server, no thread left waiting


@pytest.mark.parametrize(("request_line", "status", "where"), [
    ("GET /openai/v1/chat/completions", 405, "openai"),
    ("DELETE /anthropic/v1/messages", 405, "anthropic"),
    ("GET /gemini/v1beta/models/m:generateContent", 405, "gemini"),
    ("GET /nowhere", 404, "openai"),
    ("POST /anthropic/v2/nothing", 404, "anthropic"),
    ("BREW /openai/v1/responses", 405, "openai"),
])
def test_wrong_paths_and_methods_get_the_services_json_errors(
    emu: Emulator, request_line: str, status: int, where: str
) -> None:
    got, body, head = _raw(emu, f"{request_line} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}".encode())
    assert got == status and b"application/json" in head.lower()
    if where == "anthropic":
        assert body["type"] == "error"
    elif where == "gemini":
        assert body["error"]["code"] == status
    else:
        assert body["error"]["type"] == "invalid_request_error"


def test_json_nested_deeply_is_a_400(emu: Emulator) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    status, body, _ = _raw(emu, _post("/openai/v1/chat/completions", deep))
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    emu.play([{"text": "ok"}])
    for depth in (900, 5000):  # under and over the JSON decoder's own limit: an answer or a 400, never a drop
        nested = '{"a":' * depth + "{}" + "}" * depth
        payload = '{"model": "m", "messages": [{"role": "user", "content": "hi", "x": ' + nested + "}]}"
        status, body, _ = _raw(emu, _post("/openai/v1/chat/completions", payload.encode()))
        assert status in (200, 400), body


def test_the_request_log_is_bounded() -> None:
    with Emulator([{"text": "ok"}] * 5, log_size=3) as emu:
        for _ in range(5):
            _raw(emu, _post("/openai/v1/chat/completions", b'{"model": "m", "messages": []}'))
        assert len(emu.requests) == 3
