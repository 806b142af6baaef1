"""Finish reasons that are not endings: a paused turn continues, a turn waiting on the client ends INCOMPLETE.

Anthropic's ``stop_reason: "pause_turn"`` pauses a long server-side tool turn; the client sends the
conversation back and the model continues. A Responses ``tool_search_call`` with ``execution: "client"``
waits for a search result agentnb cannot produce: the run ends INCOMPLETE naming the item, never an empty
COMPLETED. Runs go through the real Anthropic SDK against the emulator.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import agentnb as anb
from agentnb._engine import PAUSE_LIMIT
from agentnb.emulator import Emulator
from agentnb.providers import openai_responses


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


def _loop(emu: Emulator) -> anb.Loop:
    model = anb.AnthropicModel(emu.client("anthropic"), model="claude-opus-4-8")
    return anb.Loop(model=model, tools=[], headless=True, retry_base_delay=0, max_retries=0)


def test_a_paused_turn_is_sent_back_and_continues(emu: Emulator) -> None:
    emu.play([{"text": "Searching the web", "finish": "pause_turn"}, {"text": "Found it: 42."}])
    run = _loop(emu).start("What is the answer?").run()
    assert run.state is anb.LoopState.COMPLETED and run.output == "Found it: 42."
    types = [e.type for e in run.events]
    bound = [e for e in run.events if e.type == "ResultsBound"]
    assert [e.call_ids for e in bound] == [[]]  # the visible continuation step
    assert types.index("ResultsBound") > types.index("TurnCompleted")
    second = emu.requests[-1].body["messages"]
    assert second[-1]["role"] == "assistant" and "Searching the web" in str(second[-1]["content"])
    assert [m["role"] for m in second] == ["user", "assistant"]  # no empty tool message in between
    turns = [e.response.finish_reason for e in run.events if e.type == "TurnCompleted"]
    assert turns == ["pause", "stop"]


def test_pauses_are_capped(emu: Emulator) -> None:
    emu.play([{"text": f"step {i}", "finish": "pause_turn"} for i in range(PAUSE_LIMIT + 2)])
    run = _loop(emu).start("Keep going").run()
    assert run.state is anb.LoopState.INCOMPLETE
    assert f"paused the turn {PAUSE_LIMIT + 1} times" in (run.reason or "")
    assert len(emu.requests) == PAUSE_LIMIT + 1


def test_a_paused_turn_sent_back_counts_against_the_budget(emu: Emulator) -> None:
    emu.play([{"text": f"step {i}", "finish": "pause_turn"} for i in range(PAUSE_LIMIT + 2)])
    model = anb.AnthropicModel(emu.client("anthropic"), model="claude-opus-4-8")
    loop = anb.Loop(model=model, headless=True, retry_base_delay=0, max_retries=0,
                    budget=anb.Budget(max_turns=3, on_exhausted="stop"))
    run = loop.start("Keep going").run()
    assert run.state is anb.LoopState.BUDGET_EXHAUSTED and "max_turns" in (run.reason or "")
    assert len(emu.requests) == 3 and [e.guard for e in run.events if e.type == "GuardTripped"] == ["max_turns"]


def test_a_client_side_tool_search_ends_incomplete_naming_the_item() -> None:
    body = {"id": "resp_1", "model": "gpt-5", "status": "completed", "output": [
        {"type": "tool_search_call", "id": "ts_1", "execution": "client", "status": "in_progress",
         "arguments": {"query": "weather"}}]}
    turn = openai_responses.parse_response(body)
    assert turn.complete and turn.finish_reason == "other" and turn.message.tool_calls == []
    assert "tool_search_call ts_1" in (turn.finish_reason_raw or "")
    from agentnb._engine import classify

    verdict = classify(turn)
    assert verdict is not None and verdict.state is anb.LoopState.INCOMPLETE
    assert "tool_search_call ts_1" in verdict.event.reason  # type: ignore[attr-defined]
    server_side = openai_responses.parse_response({**body, "output": [{**body["output"][0], "execution": "server"}]})
    assert server_side.finish_reason == "stop"  # run by the service: an ordinary answer
