"""The lint rules that mirror the services, one test per rule, each with the shape the service accepts or refuses.

The recorded corpus (test_conformance.py) proves the rules on real traffic; these tests pin each rule on a
small history, including the cases the corpus does not hold, and run the emulator on the same bodies so the
linter and the emulator cannot drift apart.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

import agentnb as anb
from agentnb._lint import ANTHROPIC_INLINE_SYSTEM, GEMINI_PLACEHOLDER_SIGNATURES
from agentnb.emulator import Emulator
from agentnb.emulator._http import _Request


def errors(history: Any, provider: str, **kw: Any) -> list[str]:
    return [f.code for f in anb.lint(history, provider, **kw) if f.severity == "error"]


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


def status(emu: Emulator, provider: str, body: dict[str, Any], model: str = "m") -> int:
    emu.play([{"text": "ok"}])
    try:
        emu.answer(provider, {"max_tokens": 10, **body, "model": model}, model, False)
    except _Request as exc:
        return exc.status
    return 200


USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}
USE2 = {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {}}


def result(cid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": "1"}


# -- merged same-role turns -------------------------------------------------------------------------------


def test_anthropic_consecutive_assistant_messages_are_one_turn(emu: Emulator) -> None:
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": [{"type": "text", "text": "Let me add."}, USE]},
               {"role": "assistant", "content": [USE2]},
               {"role": "user", "content": [result("toolu_1"), result("toolu_2")]}]
    assert errors(history, "anthropic") == []
    assert status(emu, "anthropic", {"messages": history, "tools": [{"name": "add", "input_schema": {}}]}) == 200
    # still refused: a call of the merged turn left unanswered, and results behind text in a merged user turn
    assert errors(history[:3] + [{"role": "user", "content": [result("toolu_1")]}], "anthropic") == [
        "unanswered_call"]
    split = history[:3] + [{"role": "user", "content": "and"}, {"role": "user", "content": history[3]["content"]}]
    assert errors(split, "anthropic") == ["results_not_first"]


def test_gemini_consecutive_model_contents_are_one_turn(emu: Emulator) -> None:
    call = {"functionCall": {"name": "add", "args": {}}}
    resp = {"functionResponse": {"name": "add", "response": {"output": 1}}}
    history = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [call]},
               {"role": "model", "parts": [call]}, {"role": "user", "parts": [resp, resp]}]
    assert errors(history, "gemini") == []
    assert status(emu, "gemini", {"contents": history}, "gemini-2.5-flash") == 200
    assert errors(history[:3] + [{"role": "user", "parts": [resp]}], "gemini") == ["unanswered_call"]


# -- system entries inside messages, per Claude family -----------------------------------------------------


@pytest.mark.parametrize(("model", "severity"), [
    *[(f"{family}-20260101", None) for family in ANTHROPIC_INLINE_SYSTEM],
    ("claude-sonnet-5", "warning"), ("claude-sonnet-4-6", "error"), ("claude-3-5-haiku-latest", "error"),
    ("", "warning"),
])
def test_anthropic_system_entries_by_model(emu: Emulator, model: str, severity: str | None) -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "and now"}, {"role": "system", "content": "Answer in French."}]
    found = [f for f in anb.lint(history, "anthropic", model=model or None) if f.code == "system_not_first"]
    assert [f.severity for f in found] == ([severity] if severity else [])
    if severity == "error":
        assert found[0].provider_message == "role 'system' is not supported on this model"
    if model:
        assert status(emu, "anthropic", {"messages": history}, model) == (400 if severity == "error" else 200)


def test_gemini_still_refuses_a_system_role() -> None:
    assert errors([{"role": "system", "parts": [{"text": "x"}]}], "gemini") == ["system_not_first"]


# -- Responses server-side state -----------------------------------------------------------------------------


@pytest.mark.parametrize("state", [{"previous_response_id": "resp_1"}, {"conversation": "conv_1"}, {
    "extra_input": [{"type": "item_reference", "id": "fc_1"}]}])
def test_responses_outputs_may_answer_calls_held_by_the_service(emu: Emulator, state: dict[str, Any]) -> None:
    items = [*state.pop("extra_input", []), {"type": "function_call_output", "call_id": "call_9", "output": "1"}]
    body = {"input": items, **state}
    assert errors(body, "openai_responses") == []
    assert status(emu, "openai_responses", body) == 200
    assert errors({"input": items[-1:]}, "openai_responses") == ["orphan_result"]  # stateless: refused
    unanswered = {**body, "input": [*items, {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"}]}
    assert errors(unanswered, "openai_responses") == ["unanswered_call"]  # what the input shows is still checked


_SEARCH = {"type": "tool_search_call", "id": "ts_1", "call_id": "call_ts", "execution": "client",
           "status": "completed", "arguments": {"query": "refund policy"}}


def test_responses_outputs_may_answer_call_items_of_other_types(emu: Emulator) -> None:
    call = _SEARCH  # a client-executed tool search, answered by the client
    output = {"type": "function_call_output", "call_id": "call_ts", "output": "[]"}
    server = {**_SEARCH, "id": "ts_2", "call_id": None, "execution": "server"}  # run by the service: no output
    body = {"input": [{"role": "user", "content": "refund for order 7?"}, server, call, output]}
    assert errors(body, "openai_responses") == []
    assert status(emu, "openai_responses", body) == 200
    unanswered = {"input": [{"role": "user", "content": "hi"}, call]}
    assert errors(unanswered, "openai_responses") == []  # who runs it decides whether an output is owed
    early = {"input": [{"role": "user", "content": "hi"}, output, call]}
    assert errors(early, "openai_responses") == ["result_before_call"]  # its place is still checked
    assert errors({"input": [{"role": "user", "content": "hi"}, output]}, "openai_responses") == ["orphan_result"]


# -- the reasoning item and its following item --------------------------------------------------------------


RS = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"}


@pytest.mark.parametrize(("after", "refused"), [
    ({"role": "assistant", "content": "The meaning of life is 42"}, True),  # an edited message (no id)
    ({"role": "user", "content": "Anything to add?"}, True),
    ({"type": "function_call_output", "call_id": "c", "output": "1"}, True),
    (None, True),  # at the end
    ({"type": "message", "role": "assistant", "id": "msg_1", "content": [{"type": "output_text", "text": "42"}]},
     False),
    ({"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f", "arguments": "{}"}, False),
    ({"type": "web_search_call", "id": "ws_1", "status": "completed"}, False),
])
def test_a_reasoning_item_needs_its_following_item_at_every_position(
    emu: Emulator, after: dict[str, Any] | None, refused: bool
) -> None:
    items: list[Any] = [{"role": "user", "content": "q"}, RS]
    if after is not None:
        items.append(after)
    if after is None or after.get("type") != "function_call":
        items.append({"role": "user", "content": "Anything to add?"})
    if after is not None and after.get("type") == "function_call":
        items.append({"type": "function_call_output", "call_id": "c", "output": "1"})
    if after is None:
        items = items[:2]
    found = [f for f in anb.lint(items, "openai_responses") if f.code == "missing_reasoning"]
    assert bool(found) == refused
    if refused:
        assert found[0].provider_message == (
            "Item 'rs_1' of type 'reasoning' was provided without its required following item.")
    with Emulator(verify_signatures=False) as own:
        assert status(own, "openai_responses", {"input": items}) == (400 if refused else 200)


# -- Gemini's placeholder thought signatures ----------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("placeholder", sorted(GEMINI_PLACEHOLDER_SIGNATURES) + [
    _b64(p) for p in sorted(GEMINI_PLACEHOLDER_SIGNATURES)])  # as the SDK sends ``thought_signature=b"..."``
def test_gemini_placeholder_signatures_are_accepted_where_real_ones_are_verified(placeholder: str) -> None:
    with Emulator(strict_signatures=True) as strict:
        _placeholder_case(strict, placeholder)


def _placeholder_case(emu: Emulator, placeholder: str) -> None:
    call = {"functionCall": {"name": "add", "args": {}}}
    history = [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [
        {**call, "thoughtSignature": placeholder}]}, {"role": "user", "parts": [
            {"functionResponse": {"name": "add", "response": {"output": 1}}}]}]
    body = {"contents": history}
    assert status(emu, "gemini", body, "gemini-3-pro-preview") == 200
    forged = {"contents": [history[0], {"role": "model", "parts": [{**call, "thoughtSignature": "Zm9yZ2Vk"}]},
                           history[2]]}
    assert status(emu, "gemini", forged, "gemini-3-pro-preview") == 400  # strict: a real-looking one is checked


# -- signatures and encrypted reasoning the emulator did not issue -------------------------------------------

_THOUGHT_CALL = {"functionCall": {"name": "add", "args": {}}, "thoughtSignature": "Zm9yZ2Vk"}
FOREIGN: dict[str, dict[str, Any]] = {
    "anthropic": {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "RXFvYWJj"},
        {"type": "redacted_thinking", "data": "RXFvYWJjZGVm"}, USE]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}]}],
        "tools": [{"name": "add", "input_schema": {"type": "object"}}]},
    "openai_responses": {"store": False, "input": [{"role": "user", "content": "hi"}, {
        "type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAABforeign"},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "add", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "1"}]},
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [_THOUGHT_CALL]},
                            {"role": "user", "parts": [{"functionResponse": {"name": "add", "response": {}}}]}]},
}


@pytest.mark.parametrize("provider", sorted(FOREIGN))
def test_signatures_it_did_not_issue_are_accepted_unless_strict(emu: Emulator, provider: str) -> None:
    body, model = FOREIGN[provider], "gemini-3-pro-preview" if provider == "gemini" else "m"
    assert errors(body, provider) == []
    assert status(emu, provider, body, model) == 200  # the default: they may be the real service's
    with Emulator(strict_signatures=True) as strict:
        assert status(strict, provider, body, model) == 400


def test_gemini_tools_as_one_object_and_snake_case_are_tolerated(emu: Emulator) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": {"function_declarations": [{"name": "add", "parameters": {"type": "object"}}]},
            "system_instruction": {"parts": [{"text": "Be brief."}]}}
    assert errors(body, "gemini") == []
    assert status(emu, "gemini", body, "gemini-2.5-flash") == 200
    snake = {"contents": [{"role": "user", "parts": [{"text": "hi"}]},
                          {"role": "model", "parts": [{"function_call": {"name": "add", "args": {}}}]},
                          {"role": "user", "parts": [{"function_response": {"name": "add", "response": {}}}]}],
             "unknown_field": 1}
    assert errors(snake, "gemini") == []
    assert status(emu, "gemini", snake, "gemini-2.5-flash") == 200
