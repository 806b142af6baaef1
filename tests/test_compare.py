"""Two runs compared step by step: the same run agrees with itself, and each kind of parting is named right."""

from __future__ import annotations

from typing import Any

import pytest

import agentnb as anb
from agentnb.exceptions import AgentnbError

SNOW = {"city": "Paris", "temp_c": -5, "sky": "snow"}


def weather(**options: Any) -> anb.Run:
    return anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"),
                    **options).start("Paris?").run()


def first_call(run: anb.Run) -> str:
    return next(e.call_id for e in run.events if e.type == "ToolFinished")


def test_a_run_and_its_replay_take_the_same_trajectory() -> None:
    run = weather()
    again = weather()
    c = anb.compare(run, again)
    assert c.same and c.parting is None and c.table["same"].all()
    assert list(c.table["kind"]) == ["turn", "call", "turn", "end"]
    assert "the same trajectory" in c._repr_html_()


def test_a_fork_with_another_result_parts_at_that_result() -> None:
    run = weather()
    snow = run.fork(results={first_call(run): SNOW}).run()
    c = anb.compare(run, snow)
    assert c.parting is not None and c.parting.step == 1  # the turn before it is shared: read from the parent
    assert c.parting.why.startswith("another tool result") and "replaced in the fork" in c.parting.why
    assert c.table.loc[0, "same"] and not c.table.loc[1, "same"]
    reverse = anb.compare(snow, run)  # either order
    assert reverse.parting is not None and reverse.parting.step == 1


def test_another_model_answer_is_named_as_such() -> None:
    tools = anb.stories.tools("weather")
    a = anb.Loop(model=anb.ScriptedModel([{"text": "sunny"}]), tools=tools).start("Paris?").run()
    b = anb.Loop(model=anb.ScriptedModel([{"text": "rainy"}]), tools=tools).start("Paris?").run()
    c = anb.compare(a, b)
    assert c.parting is not None and c.parting.step == 0 and c.parting.why.startswith("another model answer")


def test_another_policy_decision_is_named_as_such() -> None:
    story = dict(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
    a = anb.Loop(**story).start("refund order 42").run()  # type: ignore[arg-type]
    for call in a.pending_approvals():
        a.approve(call.call_id)
    a.run()
    story["model"] = anb.ScriptedModel.story("refund")
    b = anb.Loop(**story).start("refund order 42").run()  # type: ignore[arg-type]
    for call in b.pending_approvals():
        b.deny(call.call_id, "no")
    b.run()
    c = anb.compare(a, b)
    assert c.parting is not None and c.parting.why.startswith("another policy decision"), c.parting


def test_a_run_that_goes_on_longer_is_named() -> None:
    run = weather()
    short = weather(max_turns=1, on_max_turns="stop")
    c = anb.compare(run, short)
    assert c.parting is not None and not c.same


def test_many_runs_compared_by_model() -> None:
    tools = anb.stories.tools("weather")
    runs = []
    for name, sky in (("m1", "sunny"), ("m2", "sunny"), ):
        for prompt in ("Paris?", "Rome?"):
            model = anb.ScriptedModel([{"text": sky if prompt == "Paris?" or name == "m1" else "cloudy"}], name=name)
            runs.append(anb.Loop(model=model, tools=tools).start(prompt).run().transcript)
    table = anb.TranscriptCollection(runs).compare(by="model")
    assert len(table) == 2 and table.attrs["identical_share"] == 0.5
    assert table.set_index("task").loc['["Rome?"]', "why"].startswith("another model answer")


@pytest.mark.parametrize("bad", [42, [], "run_x"])
def test_what_is_not_a_run_is_refused(bad: Any) -> None:
    with pytest.raises(AgentnbError, match="compare needs runs"):
        anb.compare(bad, weather())


def test_by_must_give_two_groups() -> None:
    runs = anb.TranscriptCollection([weather().transcript])
    with pytest.raises(AgentnbError, match="compares two groups"):
        runs.compare(by="model")
