"""Scripts that do not repeat themselves: a follow-up goes on with the script, and call ids never repeat in a
conversation, whatever model made them (scripted, replayed, or a provider that reuses ids)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import agentnb as anb
from agentnb.emulator import Emulator
from agentnb.providers._scripted import continues_at
from tests.conftest import add

PROVIDERS = ["openai_chat", "openai_responses", "anthropic", "gemini"]
SCRIPT = [
    {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
    {"text": "first"},
    {"tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}]},
    {"text": "second"},
]


def call_ids(messages: list[anb.Message]) -> list[str]:
    return [c.call_id for m in messages for c in m.tool_calls]


def test_follow_up_goes_on_with_the_script_and_a_new_start_replays_it() -> None:
    loop = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=[add])
    first = loop.start("1 + 2?").run()
    second = first.follow_up("and 3 + 4?").run()
    assert (first.output, second.output) == ("first", "second")
    results = [r.content for m in second.messages for r in m.tool_results]
    assert results == ["3", "7"]
    ids = call_ids(second.messages)
    assert len(ids) == len(set(ids)) == 2
    assert loop.start("1 + 2?").run().output == "first"  # the conversation decides: a new one starts over
    assert continues_at(second.messages) == 4


def test_follow_up_after_a_retried_error_counts_the_error_turn() -> None:
    script = [{"error": {"status": 500}}, {"text": "one"}, {"text": "two"}]
    loop = anb.Loop(model=anb.ScriptedModel(script), retry_base_delay=0)
    first = loop.start("a").run()
    assert first.output == "one"
    assert first.follow_up("b").run().output == "two"


def test_follow_up_of_a_follow_up_and_a_script_that_runs_out() -> None:
    loop = anb.Loop(model=anb.ScriptedModel([{"text": "one"}, {"text": "two"}]))
    second = loop.start("a").run().follow_up("b").run()
    third = second.follow_up("c").run()
    assert second.output == "two"
    assert third.state is anb.LoopState.FAILED and "no turn 3" in (third.reason or "")


def test_a_fork_with_seek_never_goes_back_before_its_conversation() -> None:
    model = anb.ScriptedModel(SCRIPT)
    loop = anb.Loop(model=model, tools=[add])
    first = loop.start("q").run()
    run = loop.start([*first.messages, anb.Message.user("more")])
    model.seek(run.run_id, 0)  # a position counted from the wrong start is corrected by the conversation
    assert run.run().output == "second"


def test_call_ids_are_unique_in_a_conversation_when_the_model_repeats_them() -> None:
    def same(a: int) -> dict[str, object]:
        return {"name": "add", "arguments": {"a": a, "b": 1}, "id": "toolu_same"}

    script = [{"tool_calls": [same(1), same(2)]}, {"tool_calls": [same(3)]}, {"text": "done"},
              {"tool_calls": [same(4)]}, {"text": "done again"}]
    loop = anb.Loop(model=anb.ScriptedModel(script), tools=[add])
    first = loop.start("go").run()
    second = first.follow_up("again").run()
    ids = call_ids(second.messages)
    assert second.output == "done again"
    assert len(ids) == 4 and len(set(ids)) == 4 and ids[0] == "toolu_same"
    answered = [r.call_id for m in second.messages for r in m.tool_results]
    assert answered == ids  # each result is bound to its call's new id
    for provider in PROVIDERS:
        assert [f for f in anb.lint(second.messages, provider) if f.severity == "error"] == [], provider


def test_a_replayed_run_followed_up_never_repeats_an_id(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with anb.Recorder(anb.ScriptedModel(SCRIPT[:2]), path) as rec:
        anb.Loop(model=rec, tools=[add]).start("1 + 2?").run()
    loop = anb.Loop(model=anb.ScriptedModel.replay(path), tools=[add])
    first = loop.start("1 + 2?").run()
    second = first.follow_up("again").run()  # the cassette plays its one run again: same ids from the model
    assert second.output == "first"
    ids = call_ids(second.messages)
    assert len(ids) == 2 and len(set(ids)) == 2


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


@pytest.mark.parametrize("provider", PROVIDERS)
def test_follow_up_through_each_provider_continues_and_is_accepted(provider: str, emu: Emulator) -> None:
    classes = {"openai_chat": anb.OpenAIChatModel, "openai_responses": anb.OpenAIResponsesModel,
               "anthropic": anb.AnthropicModel, "gemini": anb.GeminiModel}
    same = {"name": "add", "arguments": {"a": 2, "b": 2}, "id": "call_same"}
    emu.play([{"tool_calls": [same]}, {"text": "four"}, {"tool_calls": [same]}, {"text": "four again"}])
    model = classes[provider](emu.client(provider), model="gemini-2.5-flash" if provider == "gemini" else "m")
    first = anb.Loop(model=model, tools=[add], retry_base_delay=0).start("2 + 2?").run()
    second = first.follow_up("once more").run()  # the emulator rejects a history with a repeated id (400)
    assert second.state is anb.LoopState.COMPLETED, second.reason
    assert second.output == "four again"
    ids = call_ids(second.messages)
    assert len(ids) == len(set(ids)) == 2


@pytest.mark.parametrize(("arguments", "why"), [({"a": 10**5000}, "4300 digits"), ({"s": {1, 2}}, "set")])
def test_arguments_json_cannot_write_are_refused_naming_the_call(arguments: dict[str, object], why: str) -> None:
    says = rf"script\[1\]: tool_calls\[0\]'s arguments cannot be written as JSON .*{why}"
    with pytest.raises(ValueError, match=says):
        anb.ScriptedModel([{"text": "ok"}, {"tool_calls": [{"name": "add", "arguments": arguments}]}])
