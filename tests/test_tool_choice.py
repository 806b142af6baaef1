"""tool_choice and parallel_tool_calls, first class: rendered per wire API, honoured by the emulator, per turn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import agentnb as anb
from agentnb._request import NamedTool
from agentnb._states import LoopState as S
from agentnb.emulator import Emulator
from tests.conftest import add

PROVIDERS = {
    "openai_chat": (anb.OpenAIChatModel, {"model": "gpt-4.1"}),
    "openai_responses": (anb.OpenAIResponsesModel, {"model": "gpt-5", "store": False}),
    "anthropic": (anb.AnthropicModel, {"model": "claude-sonnet-4-6"}),
    "gemini": (anb.GeminiModel, {"model": "gemini-3-pro-preview"}),
}


@anb.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped"}


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


def model(emu: Emulator, provider: str, stream: bool = False) -> Any:
    cls, options = PROVIDERS[provider]
    return cls(emu.client(provider), stream=stream, **options)


def sent_choice(emu: Emulator, provider: str, start: int) -> Any:
    body = emu.requests[start].body
    if provider == "gemini":
        return (body.get("toolConfig") or body.get("tool_config") or {})
    return body.get("tool_choice")


def answer(messages: list[anb.Message]) -> dict[str, Any]:
    return {"text": "done: " + ", ".join(r.name for r in messages[-1].tool_results)}


EXPECTED: dict[str, dict[str, Any]] = {
    "required": {"openai_chat": "required", "openai_responses": "required", "anthropic": {"type": "any"},
                 "gemini": {"functionCallingConfig": {"mode": "ANY"}}},
    "none": {"openai_chat": "none", "openai_responses": "none", "anthropic": {"type": "none"},
             "gemini": {"functionCallingConfig": {"mode": "NONE"}}},
    "name": {"openai_chat": {"type": "function", "function": {"name": "lookup_order"}},
             "openai_responses": {"type": "function", "name": "lookup_order"},
             "anthropic": {"type": "tool", "name": "lookup_order"},
             "gemini": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup_order"]}}},
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_forced_tool_is_called_even_when_the_model_wanted_to_talk(emu: Emulator, provider: str, stream: bool) -> None:
    emu.play([{"text": "I'd rather chat."}, {"text": "Still chatting."}, {"text": "It has shipped."}])
    start = len(emu.requests)
    loop = anb.Loop(model=model(emu, provider, stream), tools=[add, lookup_order],
                    tool_choice={"name": "lookup_order"}, max_turns=2, retry_base_delay=0)
    run = loop.start("Where is my order?").run()  # a fixed forced choice: only the turn cap's finalization ends it
    calls = [e.name for e in run.events if e.type == "CallValidated"]
    assert run.state is S.COMPLETED, (run.reason, [r.error for r in emu.requests[start:]])
    assert calls == ["lookup_order", "lookup_order"] and run.output == "It has shipped."
    assert_subset(EXPECTED["name"][provider], sent_choice(emu, provider, start))


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_required_forces_some_call(emu: Emulator, provider: str) -> None:
    emu.play([{"text": "No tools for me."}, {"text": "Shipped."}])
    start = len(emu.requests)
    loop = anb.Loop(model=model(emu, provider), tools=[lookup_order], tool_choice="required", max_turns=1,
                    retry_base_delay=0)
    run = loop.start("Where is order 7?").run()
    assert run.state is S.COMPLETED and [e.name for e in run.events if e.type == "ToolFinished"] == ["lookup_order"]
    assert_subset(EXPECTED["required"][provider], sent_choice(emu, provider, start))


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_none_keeps_the_model_from_calling(emu: Emulator, provider: str) -> None:
    emu.play([{"text": "Shipped, I think.", "tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "7"}}]}])
    start = len(emu.requests)
    run = anb.Loop(model=model(emu, provider), tools=[lookup_order], tool_choice="none",
                   retry_base_delay=0).start("Where is order 7?").run()
    assert run.state is S.COMPLETED and not any(e.type == "ToolStarted" for e in run.events)
    assert_subset(EXPECTED["none"][provider], sent_choice(emu, provider, start))


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_per_turn_policy_forces_the_first_turn_then_lets_the_model_choose(emu: Emulator, provider: str) -> None:
    emu.play([{"text": "hello"}, answer])
    start = len(emu.requests)

    def first_lookup(state: anb.RunState) -> Any:
        return {"name": "lookup_order"} if state.turn == 0 else "auto"

    run = anb.Loop(model=model(emu, provider), tools=[lookup_order, add], tool_choice=first_lookup,
                   retry_base_delay=0).start("Order 7?").run()
    assert run.state is S.COMPLETED, run.reason
    requested = [e for e in run.events if e.type == "ModelRequested"]
    assert [e.tool_choice for e in requested] == [{"name": "lookup_order"}, "auto"]
    assert_subset(EXPECTED["name"][provider], sent_choice(emu, provider, start))
    turns = run.transcript.frames.turns()
    assert turns["tool_choice"].tolist() == ['{"name":"lookup_order"}', "auto"]


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_parallel_tool_calls_false_is_sent(emu: Emulator, provider: str) -> None:
    emu.play([{"text": "ok"}])
    if provider == "gemini":  # no switch for parallel function calls: refused before anything is sent
        start = len(emu.requests)
        run = anb.Loop(model=model(emu, provider), tools=[lookup_order], parallel_tool_calls=False).start("x").run()
        assert run.state is S.FAILED and "cannot be expressed on Gemini" in (run.reason or "")
        assert len(emu.requests) == start
        return
    start = len(emu.requests)
    anb.Loop(model=model(emu, provider), tools=[lookup_order], parallel_tool_calls=False).start("x").run()
    body = emu.requests[start].body
    if provider == "anthropic":
        assert body["tool_choice"]["disable_parallel_tool_use"] is True
    else:
        assert body["parallel_tool_calls"] is False


def test_bad_choices_are_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="not offered"):
        anb.Loop(model=anb.ScriptedModel([]), tools=[lookup_order], tool_choice={"name": "refund"})
    with pytest.raises(ValueError, match="use 'auto'"):
        anb.Loop(model=anb.ScriptedModel([]), tools=[lookup_order], tool_choice="sometimes")
    with pytest.raises(ValueError, match="not both"):
        anb.Loop(model=anb.ScriptedModel([]), tools=[lookup_order], tool_choice="auto",
                 settings={"tool_choice": "none"})


def test_a_policy_that_fails_ends_the_run_plainly() -> None:
    run = anb.Loop(model=anb.ScriptedModel([{"text": "x"}]), tools=[lookup_order],
                   tool_choice=lambda state: {"name": "nope"}).start("x").run()
    assert run.state is S.FAILED and "tool_choice policy failed" in (run.reason or "") and "not offered" in run.reason


def test_the_output_tool_is_forced_at_the_turn_cap() -> None:
    import pydantic

    class Answer(pydantic.BaseModel):
        status: str

    seen: list[Any] = []

    class Spy(anb.ScriptedModel):
        def respond(self, request: anb.ModelRequest) -> Any:
            assert "tool_choice" not in request.settings  # typed in the options, not in the pass-through settings
            seen.append((request.options.finalize, [t.name for t in request.tools], request.options.tool_choice))
            return super().respond(request)

    script: list[Any] = [{"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "7"}}]},
                         {"tool_calls": [{"name": "final_result", "arguments": {"status": "shipped"}}]}]
    run = anb.Loop(model=Spy(script), tools=[lookup_order], output_type=Answer, max_turns=1).start("x").run()
    assert run.state is S.COMPLETED and run.output == Answer(status="shipped")
    assert seen[-1] == (True, ["final_result"], NamedTool("final_result"))


def assert_subset(expected: Any, actual: Any) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), actual
        for k, v in expected.items():
            assert k in actual, (k, actual)
            assert_subset(v, actual[k])
    else:
        assert expected == actual, (expected, actual)
