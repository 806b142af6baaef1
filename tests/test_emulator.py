"""The emulator rejects invalid histories with each service's 400 error shape, through the real SDK clients."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest
from google.genai import errors as genai_errors

from agentnb.emulator import Emulator


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator([{"text": "ok"}] * 50) as e:
        yield e


@pytest.fixture(scope="module")
def clients(emu: Emulator) -> dict[str, Any]:
    return {"openai": emu.client("openai"), "anthropic": emu.client("anthropic"), "gemini": emu.client("gemini")}


CALL = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]

CHAT_CASES = {
    "orphan": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_9", "content": "3"}],
    "unknown_id": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [CALL]},
                   {"role": "tool", "tool_call_id": "call_9", "content": "3"}],
    "unanswered": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [CALL]},
                   {"role": "user", "content": "and?"}],
}
CHAT_MESSAGES = {
    "orphan": "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
    "unknown_id": "'tool_call_id' of 'call_9' not found in 'tool_calls' of previous message",
    "unanswered": "The following tool_call_ids did not have response messages: call_1",
}


@pytest.mark.parametrize("case", list(CHAT_CASES))
def test_chat_rejects(clients: dict[str, Any], case: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        clients["openai"].chat.completions.create(model="gpt-4.1", messages=CHAT_CASES[case], tools=TOOLS)
    assert info.value.status_code == 400
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    assert CHAT_MESSAGES[case] in body["message"]


def test_chat_rejects_tool_choice_without_tools(clients: dict[str, Any]) -> None:
    with pytest.raises(openai.BadRequestError, match="only allowed when 'tools' are specified"):
        clients["openai"].chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}],
                                                  tool_choice="none", tools=[])


FC = {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{}"}
RESPONSES_CASES = {
    "orphan": ([{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "call_9",
                                                    "output": "3"}], {},
               "No tool call found for function call output with call_id call_9."),
    "unanswered": ([{"role": "user", "content": "hi"}, FC], {}, "No tool output found for function call call_1."),
    "reasoning_without_content": ([{"role": "user", "content": "hi"}, {"type": "reasoning", "id": "rs_1",
                                                                        "summary": []}, FC,
                                   {"type": "function_call_output", "call_id": "call_1", "output": "3"}],
                                  {"store": False}, "Items are not persisted when `store` is set to false"),
}


@pytest.mark.parametrize("case", list(RESPONSES_CASES))
def test_responses_rejects(clients: dict[str, Any], case: str) -> None:
    items, extra, message = RESPONSES_CASES[case]
    with pytest.raises(openai.BadRequestError) as info:
        clients["openai"].responses.create(model="gpt-5", input=items, **extra)
    assert message in info.value.message


def test_responses_requires_the_reasoning_item_it_issued(emu: Emulator, clients: dict[str, Any]) -> None:
    emu.play([{"reasoning": "think", "tool_calls": [{"name": "add", "arguments": {"a": 1}}]}, {"text": "ok"}])
    c = clients["openai"]
    first = c.responses.create(model="gpt-5", input="hi", store=False, include=["reasoning.encrypted_content"])
    items = [o.model_dump(exclude_none=True) for o in first.output]
    call = next(i for i in items if i["type"] == "function_call")
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "1"}
    with pytest.raises(openai.BadRequestError, match="without its required 'reasoning' item"):
        c.responses.create(model="gpt-5", input=[{"role": "user", "content": "hi"}, call, output], store=False)
    ok = c.responses.create(model="gpt-5", input=[{"role": "user", "content": "hi"}, *items, output], store=False)
    assert ok.output_text == "ok"


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}
A_TOOLS = [{"name": "add", "input_schema": {"type": "object"}}]
ANTHROPIC_CASES: dict[str, tuple[list[dict[str, Any]], list[Any] | None, str]] = {
    "orphan": ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [TOOL_USE]},
                {"role": "user", "content": [{**RESULT, "tool_use_id": "toolu_9"}, RESULT]}], A_TOOLS,
               "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9"),
    "unanswered": ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [TOOL_USE]},
                    {"role": "user", "content": "and?"}], A_TOOLS,
                   "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1"),
    "results_after_text": ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [TOOL_USE]},
                            {"role": "user", "content": [{"type": "text", "text": "here"}, RESULT]}], A_TOOLS,
                           "Did not find 1 `tool_result` block(s) at the beginning of this message"),
    "no_tools": ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [TOOL_USE]},
                  {"role": "user", "content": [RESULT]}], [],
                 "Requests which include `tool_use` or `tool_result` blocks must define tools."),
    "missing_signature": ([{"role": "user", "content": "hi"},
                           {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}, TOOL_USE]},
                           {"role": "user", "content": [RESULT]}], A_TOOLS, "thinking.signature: Field required"),
    "system_role": ([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], A_TOOLS,
                    "role 'system' is not supported on this model"),
}


@pytest.mark.parametrize("case", list(ANTHROPIC_CASES))
def test_anthropic_rejects(clients: dict[str, Any], case: str) -> None:
    messages, tools, message = ANTHROPIC_CASES[case]
    with pytest.raises(anthropic.BadRequestError) as info:
        clients["anthropic"].messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=messages,
                                             tools=tools)
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error" and message in body["error"]["message"]


def test_anthropic_a_foreign_signature_is_refused_only_when_strict() -> None:
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "Zm9yZ2Vk"},
                                                  TOOL_USE]},
                {"role": "user", "content": [RESULT]}]
    with Emulator([{"text": "ok"}]) as lenient:  # the default: a signature it did not issue may be a real one
        ok = lenient.client("anthropic").messages.create(model="claude-sonnet-4-6", max_tokens=100,
                                                         messages=messages, tools=A_TOOLS)
        assert ok.content[0].text == "ok"
    with Emulator([{"text": "ok"}], strict_signatures=True) as strict, pytest.raises(
            anthropic.BadRequestError, match="Invalid `signature` in `thinking` block"):
        strict.client("anthropic").messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=messages,
                                                   tools=A_TOOLS)


def test_anthropic_thinking_must_lead_the_last_tool_turn(clients: dict[str, Any]) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [TOOL_USE]},
                {"role": "user", "content": [RESULT]}]
    with pytest.raises(anthropic.BadRequestError, match="must start with a thinking block"):
        clients["anthropic"].messages.create(model="claude-sonnet-4-6", max_tokens=2000, messages=messages,
                                             tools=A_TOOLS, thinking={"type": "enabled", "budget_tokens": 1024})


CALL_PART = {"functionCall": {"name": "add", "args": {"a": 1}}}
RESP_PART = {"functionResponse": {"name": "add", "response": {"output": "1"}}}
GEMINI_CASES = {
    "count": ([{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [CALL_PART, CALL_PART]},
               {"role": "user", "parts": [RESP_PART]}], "gemini-2.5-flash",
              "number of function response parts is equal to the number of function call parts"),
    "orphan": ([{"role": "user", "parts": [{"text": "hi"}]}, {"role": "user", "parts": [RESP_PART]}],
               "gemini-2.5-flash", "function response turn comes immediately after a function call turn"),
    "missing_signature": ([{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [CALL_PART]},
                           {"role": "user", "parts": [RESP_PART]}], "gemini-3-pro-preview",
                          "Function call is missing a thought_signature"),
    "system_role": ([{"role": "system", "parts": [{"text": "hi"}]}], "gemini-2.5-flash",
                    "Please use a valid role: user, model."),
}


@pytest.mark.parametrize("case", list(GEMINI_CASES))
def test_gemini_rejects(clients: dict[str, Any], case: str) -> None:
    contents, model, message = GEMINI_CASES[case]
    with pytest.raises(genai_errors.ClientError) as info:
        clients["gemini"].models.generate_content(model=model, contents=contents)
    assert info.value.code == 400 and info.value.status == "INVALID_ARGUMENT"
    assert message in (info.value.message or "")


def test_faults_carry_retry_after_and_each_error_shape(emu: Emulator, clients: dict[str, Any]) -> None:
    emu.play([{"text": "ok"}]).fail(429, retry_after=7)
    with pytest.raises(anthropic.RateLimitError) as info:
        clients["anthropic"].messages.create(model="claude-sonnet-4-6", max_tokens=10,
                                             messages=[{"role": "user", "content": "hi"}])
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    emu.fail(503, provider="gemini")
    with pytest.raises(genai_errors.ServerError) as ginfo:
        clients["gemini"].models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert ginfo.value.status == "UNAVAILABLE"


def test_requests_are_logged_with_findings(emu: Emulator, clients: dict[str, Any]) -> None:
    with pytest.raises(openai.BadRequestError):
        clients["openai"].chat.completions.create(model="gpt-4.1", messages=CHAT_CASES["orphan"], tools=TOOLS)
    last = emu.requests[-1]
    assert last.status == 400 and last.provider == "openai_chat"
    assert [f.code for f in last.findings] == ["orphan_result"]


def test_a_script_that_raises_is_answered_once_not_retried_and_does_not_move_the_script_on() -> None:
    def broken(messages: Any) -> Any:
        raise RuntimeError("the script's own bug")

    with Emulator([broken, {"text": "later"}]) as e:
        client = openai.OpenAI(base_url=e.url("openai"), api_key="offline", max_retries=2)  # the SDK's default
        hi = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="gpt-4.1", messages=hi)  # type: ignore[arg-type]
        assert info.value.response.headers["x-should-retry"] == "false"
        assert "RuntimeError: the script's own bug" in str(info.value)
        assert [r.status for r in e.requests] == [500]  # asked once: a retry would have taken the next turn
        again = client.chat.completions.create(model="gpt-4.1", messages=hi)  # type: ignore[arg-type]
        assert again.choices[0].message.content == "later"
        anthropic_client = anthropic.Anthropic(base_url=e.url("anthropic"), api_key="offline", max_retries=2)
        e.play([broken])
        with pytest.raises(anthropic.InternalServerError):
            anthropic_client.messages.create(model="claude-sonnet-4-6", max_tokens=10,
                                             messages=[{"role": "user", "content": "hi"}])
        assert [r.status for r in e.requests][-1] == 500 and len(e.requests) == 3


# -- many clients at once ------------------------------------------------------------------------------------

CLIENTS = 64


def _at_once(n: int, work: Callable[[int], Any]) -> list[Any]:
    """``work(i)`` for ``i`` in ``range(n)``, each in its own thread, all let go at the same moment."""
    gate = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        gate.wait()
        try:
            out[i] = work(i)
        except Exception as exc:  # what the test reports: a reset, a refused connection, a timeout
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_64_clients_connecting_at_once_are_all_accepted_by_the_kernel_at_once() -> None:
    # A full listen queue drops a handshake, and the client sends it again only after a second (or is reset):
    # connecting takes a second. With room for all, each connection is made without the server's help.
    with Emulator() as e:
        def connect(_: int) -> float:
            t0 = time.perf_counter()
            with socket.create_connection(("127.0.0.1", e.port), timeout=10):
                return time.perf_counter() - t0

        took = _at_once(CLIENTS, connect)
    assert not [t for t in took if isinstance(t, Exception)], took
    assert max(took) < 0.9, sorted(took)[-5:]


def test_64_official_sdk_clients_at_once_are_all_answered_without_a_reset() -> None:
    with Emulator([{"text": "ok"}] * CLIENTS) as e:
        clients = [openai.OpenAI(base_url=e.url("openai"), api_key="offline", max_retries=0, timeout=30)
                   for _ in range(CLIENTS)]
        hi: Any = [{"role": "user", "content": "hi"}]
        answers = _at_once(CLIENTS, lambda i: clients[i].chat.completions.create(model="gpt-4.1", messages=hi)
                           .choices[0].message.content)
        assert [a for a in answers if isinstance(a, Exception)] == []
        assert answers == ["ok"] * CLIENTS and [r.status for r in e.requests] == [200] * CLIENTS


# -- malformed tool choices: a 400 in the service's own shape, never a 500 -----------------------------------

CHAT_CHOICES: dict[str, tuple[Any, str]] = {
    "a function that is a number": ({"function": 1.5}, "Missing required parameter: 'tool_choice.type'."),
    "function is a number": ({"type": "function", "function": 1.5},
                             "Invalid type for 'tool_choice.function': expected an object, but got a decimal number"),
    "a name that is a number": ({"type": "function", "function": {"name": 5}},
                                "Invalid type for 'tool_choice.function.name': expected a string"),
    "no name": ({"type": "function", "function": {}}, "Missing required parameter: 'tool_choice.function.name'."),
    "an unknown string": ("sometimes", "Invalid value: 'sometimes'. Supported values are"),
    "a number": (1.5, "Invalid type for 'tool_choice': expected one of a string or an object"),
    "a list": (["auto"], "but got an array instead"),
    "an unknown type": ({"type": "tool"}, "Invalid value: 'tool'."),
    "a type that is a list": ({"type": ["function"]}, "Invalid type for 'tool_choice.type'"),
    "allowed tools of the wrong shape": ({"type": "allowed_tools", "allowed_tools": {"mode": "all", "tools": []}},
                                         "Invalid value: 'all'. Supported values are: 'auto' and 'required'."),
}


@pytest.mark.parametrize("case", list(CHAT_CHOICES))
def test_a_malformed_chat_tool_choice_is_a_400(clients: dict[str, Any], case: str) -> None:
    choice, message = CHAT_CHOICES[case]
    with pytest.raises(openai.BadRequestError) as info:
        clients["openai"].chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}],
                                                  tools=TOOLS, tool_choice=choice)
    body = info.value.body
    assert info.value.status_code == 400
    assert isinstance(body, dict) and body["type"] == "invalid_request_error" and message in body["message"]
    assert str(body["param"]).startswith("tool_choice")


RESPONSES_CHOICES: dict[str, tuple[Any, str]] = {
    "a function that is a number": ({"function": 1.5}, "Missing required parameter: 'tool_choice.type'."),
    "no name": ({"type": "function"}, "Missing required parameter: 'tool_choice.name'."),
    "a name that is an object": ({"type": "function", "name": {"a": 1}}, "expected a string, but got an object"),
    "an unknown type": ({"type": "calculator"}, "Invalid value: 'calculator'."),
    "mcp without a server": ({"type": "mcp"}, "Missing required parameter: 'tool_choice.server_label'."),
    "a boolean": (True, "but got a boolean instead"),
}


@pytest.mark.parametrize("case", list(RESPONSES_CHOICES))
def test_a_malformed_responses_tool_choice_is_a_400(clients: dict[str, Any], case: str) -> None:
    choice, message = RESPONSES_CHOICES[case]
    tools: Any = [{"type": "function", "name": "add", "parameters": {"type": "object"}}]
    with pytest.raises(openai.BadRequestError) as info:
        clients["openai"].responses.create(model="gpt-4.1", input="hi", tools=tools, tool_choice=choice)
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error" and message in body["message"]


ANTHROPIC_CHOICES: dict[str, tuple[Any, str]] = {
    "a string": ("auto", "tool_choice: Input should be a valid dictionary"),
    "no type": ({"function": 1.5}, "Unable to extract tag using discriminator 'type'"),
    "an unknown type": ({"type": "function"}, "Input tag 'function' found using 'type' does not match"),
    "a tool without a name": ({"type": "tool"}, "tool_choice.tool.name: Field required"),
    "a name that is a number": ({"type": "tool", "name": 1.5}, "tool_choice.tool.name: Input should be a valid string"),
    "a flag that is text": ({"type": "auto", "disable_parallel_tool_use": "yes"},
                            "tool_choice.auto.disable_parallel_tool_use: Input should be a valid boolean"),
}


@pytest.mark.parametrize("case", list(ANTHROPIC_CHOICES))
def test_a_malformed_anthropic_tool_choice_is_a_400(clients: dict[str, Any], case: str) -> None:
    choice, message = ANTHROPIC_CHOICES[case]
    tools: Any = [{"name": "add", "input_schema": {"type": "object"}}]
    with pytest.raises(anthropic.BadRequestError) as info:
        clients["anthropic"].messages.create(model="claude-sonnet-4-6", max_tokens=10, tools=tools,
                                             messages=[{"role": "user", "content": "hi"}], tool_choice=choice)
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert message in info.value.body["error"]["message"]  # type: ignore[index]


GEMINI_CONFIGS: dict[str, tuple[Any, str]] = {
    "a number": (5, "Invalid value at 'tool_config'"),
    "a config that is text": ({"functionCallingConfig": "ANY"},
                              "Invalid value at 'tool_config.function_calling_config'"),
    "a mode that is a float": ({"functionCallingConfig": {"mode": 1.5}}, "function_calling_config.mode"),
    "an unknown mode": ({"functionCallingConfig": {"mode": "SOMETIMES"}}, '"SOMETIMES"'),
    "names that are not a list": ({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": "add"}},
                                  "allowed_function_names"),
}


@pytest.mark.parametrize("case", list(GEMINI_CONFIGS))
def test_a_malformed_gemini_tool_config_is_a_400(clients: dict[str, Any], case: str) -> None:
    config, message = GEMINI_CONFIGS[case]
    # the SDK's own types refuse these before sending: extra_body sends them as another client would
    with pytest.raises(genai_errors.ClientError) as info:
        clients["gemini"].models.generate_content(model="gemini-2.5-flash", contents="hi", config={
            "http_options": {"extra_body": {"toolConfig": config}}})
    assert info.value.code == 400 and info.value.status == "INVALID_ARGUMENT"
    assert message in (info.value.message or "")


def test_well_formed_tool_choices_are_still_answered(emu: Emulator) -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    for choice in ("none", "auto", "required", {"type": "function", "function": {"name": "add"}},
                   {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}):
        emu.play([{"text": "ok"}])
        request = urllib.request.Request(emu.url("openai") + "/chat/completions",
                                         json.dumps({**chat, "tool_choice": choice}).encode(),
                                         {"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request) as answer:
                assert answer.status == 200, choice
        except urllib.error.HTTPError as exc:  # pragma: no cover - the failure this test reports
            raise AssertionError((choice, exc.read())) from exc


def test_gemini_a_placeholder_signature_sent_as_bytes_is_accepted_even_when_strict() -> None:
    # The SDK's thought_signature is bytes, sent base64-encoded: the placeholder arrives in that form.
    from google.genai import types

    call = types.Part(function_call=types.FunctionCall(name="add", args={}),
                      thought_signature=b"skip_thought_signature_validator")
    contents = [types.Content(role="user", parts=[types.Part(text="hi")]), types.Content(role="model", parts=[call]),
                types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                    name="add", response={"output": 1}))])]
    with Emulator([{"text": "ok"}], strict_signatures=True) as strict:
        client = strict.client("gemini")  # held: the SDK closes its transport when the client is collected
        answer = client.models.generate_content(model="gemini-3-pro-preview", contents=contents)
        assert answer.text == "ok"
        sent = strict.requests[-1].body["contents"][1]["parts"][0]["thoughtSignature"]
        assert sent == "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="
