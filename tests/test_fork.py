"""Run.fork (time travel without the debugger), run.view as a snapshot, and the unpriced-model warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError

import agentnb as anb
from agentnb._engine import RunState
from agentnb._engine.guards import UnpricedModelWarning
from agentnb._states import S
from agentnb.providers._base import Seekable


def weather_run() -> anb.Run:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    return loop.start("What's the weather in Paris?").run()


def test_fork_with_a_replaced_result_answers_from_it() -> None:
    run = weather_run()
    before = list(run.events)
    call_id = next(e.call_id for e in run.events if e.type == "ToolFinished")
    other = run.fork(results={call_id: {"city": "Paris", "temp_c": 31, "sky": "stormy"}})
    assert other is not run and other.run_id != run.run_id and other.loop is run.loop
    assert other.run().output == "It is 31 °C and stormy in Paris."
    assert run.output == "It is 18 °C and sunny in Paris." and run.events == before  # untouched
    sent = [p for m in other.messages if m.role == "tool" for p in m.parts]
    assert sent[0].call_id == call_id and '"stormy"' in sent[0].content
    with pytest.raises(anb.AgentnbError, match="no result for call"):
        run.fork(2, results={call_id: 1})  # before the result existed


def test_fork_at_a_seq_is_the_fold_of_that_prefix() -> None:
    run = weather_run()
    bound = next(e.seq for e in run.events if e.type == "ResultsBound")
    child = run.fork(bound)
    assert child.messages == RunState.fold(run.events[: bound + 1]).messages
    assert child.run().output == run.output  # a script sought to that request answers as it did


def test_fork_mid_turn_drops_the_unanswered_calls() -> None:
    run = weather_run()
    parsed = next(e.seq for e in run.events if e.type == "CallParsed")
    child = run.fork(parsed)
    assert [m.role for m in child.prompt] == ["user"]
    assert child.run().state is S.COMPLETED and child.output == run.output


def test_fork_with_edited_arguments_replays_the_turn() -> None:
    run = weather_run()
    call_id = next(e.call_id for e in run.events if e.type == "CallParsed")
    child = run.fork(arguments={call_id: {"city": "Oslo"}}).run()
    assert child.output == "It is 3 °C and snow in Oslo."
    replayed = next(e for e in child.events if e.type == "TurnCompleted")
    assert replayed.response.raw["edited_calls"] == [call_id]
    assert replayed.response.message.tool_calls[0].arguments == {"city": "Oslo", "unit": "c"}
    assert "Paris" in (run.output or "") and run.loop.model is not child.loop.model
    with pytest.raises(ValidationError):
        run.fork(arguments={call_id: {"city": 5, "unit": "kelvin"}})
    with pytest.raises(anb.AgentnbError, match="no turn made"):
        run.fork(arguments={"call_nope": {}})


@pytest.mark.parametrize("stopped_after", ["RunStarted", "ModelRequested"])
def test_a_fork_of_edited_arguments_stopped_before_its_edited_turn_keeps_its_edit(tmp_path: Path,
                                                                                   stopped_after: str) -> None:
    """The edit lives in the fork's lineage: resumed in a new process's shoes, the fork still runs the edit."""
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"),
                    store=anb.SqliteStore(tmp_path / "f.db", key="fork-edit-key-01"))
    run = loop.start("What's the weather in Paris?").run()
    call_id = next(e.call_id for e in run.events if e.type == "CallParsed")
    child = run.fork(arguments={call_id: {"city": "Oslo"}})
    child.run_until(lambda e: e.type == stopped_after)
    child.release()  # the process is gone: only its stored events remain
    again = anb.Run.resume(child.run_id, loop=loop).run()  # today's loop, whose model would answer Paris
    assert again.output == "It is 3 °C and snow in Oslo."
    turn = next(e for e in again.events if e.type == "TurnCompleted")
    assert turn.response.message.tool_calls[0].arguments == {"city": "Oslo", "unit": "c"}


def test_a_fork_of_a_live_model_starts_without_seeking() -> None:
    class Live:
        provider, name = "scripted", "live"

        def __init__(self) -> None:
            self.script = anb.ScriptedModel([{"text": "fresh answer"}])

        def respond(self, request: anb.ModelRequest):  # type: ignore[no-untyped-def]
            return self.script.respond(request)

    assert not isinstance(Live(), Seekable) and isinstance(anb.ScriptedModel([]), Seekable)
    run = anb.Loop(model=Live()).start("hi").run()
    assert run.fork(0).run().output == "fresh answer"


def test_the_view_is_a_read_only_snapshot() -> None:
    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("hi")
    run.run_until(lambda e: e.type == "ToolFinished")
    view = run.view
    assert isinstance(view, RunState) and view.tool_calls == 1 and view.state is S.EXECUTING
    with pytest.raises(AttributeError, match="read-only snapshot"):
        view.tool_calls = 99
    with pytest.raises(AttributeError, match="read-only snapshot"):
        del view.messages
    view.messages.clear()  # what it returns is a copy: changing it changes nothing
    next(iter(view.calls.values())).status = "unparsed"
    view.tokens_by_model.clear()
    assert run.messages and next(iter(run.view.calls.values())).status == "done" and run.view.tokens_by_model
    at = run.view
    assert run.run().state is S.COMPLETED and run.output == "It is 18 °C and sunny in Paris."
    assert at.state is S.EXECUTING and at.seq == view.seq  # a snapshot: the moment it was taken
    assert at == RunState.fold(run.events[: view.seq]) and at != run.view
    assert run.view == RunState.fold(run.events) and run.view.pending_approvals() == []


def test_a_cost_limit_with_no_price_for_the_model_warns_once() -> None:
    story = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}] * 3 + [{"text": "3"}]
    budget = anb.Budget(max_cost=1.0, prices={"gpt-4o": (2.5, 10.0)})  # priced under another model's name
    loop = anb.Loop(model=anb.ScriptedModel(story), tools=anb.stories.tools("calculator"), budget=budget)
    with pytest.warns(UnpricedModelWarning, match="no price for model 'scripted'") as caught:
        loop.start("add").run()
    assert len([w for w in caught if w.category is UnpricedModelWarning]) == 1
    assert issubclass(UnpricedModelWarning, UserWarning)
    priced = anb.Loop(model=anb.ScriptedModel(story), tools=anb.stories.tools("calculator"),
                      budget=anb.Budget(max_cost=1.0, prices={"scripted": (1.0, 1.0)}))
    unlimited = anb.Loop(model=anb.ScriptedModel(story), tools=anb.stories.tools("calculator"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnpricedModelWarning)
        priced.start("add").run()
        unlimited.start("add").run()


def test_the_types_public_calls_return_are_exported() -> None:
    run = weather_run()
    assert type(run.transcript.frames) is anb.Frames
    assert all(type(c) is anb.CallState for c in run.view.calls.values())
