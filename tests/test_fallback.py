"""FallbackModel across providers, through the real SDK clients against the emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import agentnb as anb
from agentnb.emulator import Emulator
from tests.conftest import add


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


def answer(messages: list[anb.Message]) -> dict[str, Any]:
    return {"text": "Sum: " + ", ".join(r.content for r in messages[-1].tool_results)}


CALLS = [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "add", "arguments": {"a": 3, "b": 4}}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_primary_503_backup_from_another_provider_answers(emu: Emulator, stream: bool) -> None:
    emu.play([{"tool_calls": CALLS}, answer]).fail(503, provider="openai_chat", times=10)
    primary = anb.OpenAIChatModel(emu.client("openai"), model="gpt-4.1", stream=stream)
    backup = anb.AnthropicModel(emu.client("anthropic"), model="claude-sonnet-4-6", stream=stream)
    run = anb.Loop(model=anb.FallbackModel([primary, backup]), tools=[add], retry_base_delay=0).start("Add").run()
    assert run.state is anb.LoopState.COMPLETED and run.output == "Sum: 3, 7"
    turns = [e.response for e in run.events if e.type == "TurnCompleted"]
    assert [t.provider for t in turns] == ["anthropic", "anthropic"]
    for t in turns:
        info = t.raw["fallback"]
        assert info["answered_by"] == "anthropic:claude-sonnet-4-6" and info["index"] == 1
        assert info["failed"][0]["status"] == 503 and "overloaded" in info["failed"][0]["error"]
    frame = run.transcript.to_pandas()
    assert "TurnCompleted" in set(frame["type"])
    assert not any(e.type == "ModelRetried" for e in run.events)


def test_continuation_of_another_provider_is_dropped_with_a_note(emu: Emulator) -> None:
    emu.play([{"reasoning": "Add both.", "tool_calls": CALLS}, answer])
    primary = anb.AnthropicModel(emu.client("anthropic"), model="claude-sonnet-4-6")
    backup = anb.OpenAIResponsesModel(emu.client("openai"), model="gpt-5")
    run = anb.Loop(model=anb.FallbackModel([primary, backup]), tools=[add], retry_base_delay=0).start("Add")
    run.run_until(lambda e: e.type == "ResultsBound")
    emu.fail(503, provider="anthropic")
    run.run()
    assert run.state is anb.LoopState.COMPLETED, run.reason
    first, second = (e.response for e in run.events if e.type == "TurnCompleted")
    assert (first.provider, second.provider) == ("anthropic", "openai_responses")
    assert second.raw["fallback"]["dropped_continuation"] == [
        "1 continuation part(s) of anthropic were not sent to openai_responses"]
    sent = emu.requests[-1].body
    assert all(i.get("type") != "thinking" for i in sent["input"])


def test_all_fail_raises_the_last_error_and_the_loop_retries_the_chain(emu: Emulator) -> None:
    emu.play([{"text": "late"}]).fail(500, times=2)
    primary = anb.OpenAIChatModel(emu.client("openai"), model="gpt-4.1")
    backup = anb.GeminiModel(emu.client("gemini"), model="gemini-2.5-flash")
    run = anb.Loop(model=anb.FallbackModel([primary, backup]), retry_base_delay=0).start("Hi").run()
    assert run.state is anb.LoopState.COMPLETED and run.output == "late"
    retried = [e for e in run.events if e.type == "ModelRetried"]
    assert len(retried) == 1 and "openai_chat" in retried[0].error


def test_a_stream_broken_after_output_is_not_rerun_elsewhere() -> None:
    primary = anb.ScriptedModel([{"tool_calls": CALLS, "interrupt": True}], stream=True, chunk_size=2)
    backup = anb.ScriptedModel([{"text": "should not be asked"}])
    run = anb.Loop(model=anb.FallbackModel([primary, backup]), tools=[add]).start("Add").run()
    assert run.state is anb.LoopState.INCOMPLETE
    assert not any(e.type == "ToolStarted" for e in run.events)
    assert backup._position == {}


def test_fallback_on_can_limit_what_moves_on() -> None:
    primary = anb.ScriptedModel([{"error": {"status": 400, "message": "bad request"}}])
    backup = anb.ScriptedModel([{"text": "backup"}])
    model = anb.FallbackModel([primary, backup], fallback_on=lambda exc: exc.status != 400)
    run = anb.Loop(model=model).start("Hi").run()
    assert run.state is anb.LoopState.FAILED and "bad request" in (run.reason or "")
