"""Replay against today's code: a recorded run driven again, nothing executed, the first difference named.

Every story replays with no divergence (whole and streamed, approvals answered as recorded); a changed tool
schema, approval policy, guard or tool result is reported at the event where the code now decides otherwise;
nothing runs during a replay; ``then="live"`` carries on from the divergence as a fork that repeats no effect.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._states import LoopState as S
from agentnb.exceptions import AgentnbError


def story_run(name: str, **options: Any) -> anb.Run:
    loop = anb.Loop(model=anb.ScriptedModel.story(name, **options), tools=anb.stories.tools(name))
    run = loop.start("go").run()
    while run.paused:  # the refund story asks a person: approve, as a person would
        for call in run.pending_approvals():
            run.approve(call.call_id, by="ana")
        run.run()
    return run


def silent(tools: list[anb.Tool], **options: Any) -> anb.Loop:
    """Today's loop, with a model that must never be asked (the recording answers)."""
    return anb.Loop(model=anb.ScriptedModel([]), tools=tools, **options)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name", anb.stories.names())
def test_every_story_replays_with_no_divergence(name: str, stream: bool) -> None:
    run = story_run(name, stream=stream)
    result = anb.replay(run, loop=silent(anb.stories.tools(name)))
    assert result.ok, result.divergence
    assert "does what the recording says" in result._repr_html_()
    assert result.compared == len([e for e in run.events if e.type not in ("TextMerged", "ArgumentsMerged")])
    assert result.run.state is run.state


def counting_refund() -> tuple[list[int], anb.Tool]:
    ran: list[int] = []

    @anb.tool(risk="write", approval=False)
    def refund(order_id: str, cents: int) -> str:
        """Refund an order."""
        ran.append(cents)
        return f"refunded {cents}"

    return ran, refund


SCRIPT = [{"tool_calls": [{"name": "refund", "arguments": {"order_id": "42", "cents": 1500}}]}, {"text": "done"}]


def test_nothing_runs_during_a_replay(tmp_path: Path) -> None:
    ran, refund = counting_refund()
    run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=[refund]).start("refund order 42").run()
    run.transcript.save(tmp_path / "run.jsonl")
    for source in (run, run.transcript, run.events, tmp_path / "run.jsonl", str(tmp_path / "run.jsonl")):
        assert anb.replay(source, loop=silent([refund])).ok
    assert ran == [1500]


def test_a_changed_tool_schema_is_reported_at_the_start() -> None:
    _, refund = counting_refund()
    run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=[refund]).start("refund order 42").run()

    @anb.tool(risk="write", approval=False, name="refund")
    def refund_v2(order_id: str, cents: int, reason: str) -> str:
        """Refund an order, saying why."""
        return reason

    result = anb.replay(run, loop=silent([refund_v2]))
    assert result.divergence is not None and result.divergence.seq == 0
    assert "the tools differ: refund" in result.divergence.what
    assert result.divergence.expected is run.events[0]


def test_a_changed_approval_policy_is_reported_at_the_validation() -> None:
    _, refund = counting_refund()
    run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=[refund]).start("refund order 42").run()
    strict = anb.tool(risk="write", approval=True, name="refund")(refund.fn)
    result = anb.replay(run, loop=silent([strict]))
    validated = next(e for e in run.events if e.type == "CallValidated")
    assert result.divergence is not None and result.divergence.seq == validated.seq
    assert "needs_approval" in result.divergence.what
    assert result.run.state is S.VALIDATING and result.run.events[-1].type == "CallValidated"  # stopped right there


def test_a_changed_guard_is_reported_where_it_trips() -> None:
    _, refund = counting_refund()
    script = [*SCRIPT[:1], {"tool_calls": [{"name": "refund", "arguments": {"order_id": "43", "cents": 10}}]},
              {"text": "done"}]
    run = anb.Loop(model=anb.ScriptedModel(script), tools=[refund]).start("refund").run()
    result = anb.replay(run, loop=silent([refund], budget=anb.Budget(max_tool_calls=1)))
    d = result.divergence
    assert d is not None and d.actual is not None and d.actual.type == "GuardTripped"
    second = [e for e in run.events if e.type == "ModelRequested"][1]
    assert d.seq <= second.seq + 1 and d.expected is not None


def test_a_changed_tool_result_is_reported_at_that_result() -> None:
    _, refund = counting_refund()
    run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=[refund]).start("refund order 42").run()
    finished = next(e for e in run.events if e.type == "ToolFinished")
    result = anb.replay(run, loop=silent([refund]), results={finished.call_id: "refund failed: card expired"})
    assert result.divergence is not None and result.divergence.seq == finished.seq
    assert "content" in result.divergence.what
    page = result._repr_html_()
    assert "the recording" in page and "the code now" in page and "ToolFinished" in page


def test_then_live_carries_on_as_a_fork_that_repeats_no_effect(tmp_path: Path) -> None:
    ran, refund = counting_refund()
    store = anb.SqliteStore(tmp_path / "r.db", key="replay-test-key-01")
    script = [*SCRIPT, {"text": "unused"}]
    run = anb.Loop(model=anb.ScriptedModel(script), tools=[refund], store=store).start("refund order 42").run()
    finished = next(e for e in run.events if e.type == "ToolFinished")
    live_model = anb.ScriptedModel([*SCRIPT[:1], {"text": "the new model's answer"}])
    today = anb.Loop(model=live_model, tools=[refund], store=store)
    result = anb.replay(run.run_id, store=store, loop=today, results={finished.call_id: "changed"}, then="live",
                        effects="run")
    assert result.divergence is not None and result.live is not None
    live = result.live.run()
    assert live.state is S.COMPLETED and ran == [1500]  # the recorded refund is inherited, never repeated
    assert [e.effect for e in live.events if e.type == "ToolFinished"] == ["inherited"]
    assert live.events[0].settings["fork"]["parent"] == run.run_id  # type: ignore[attr-defined]


@pytest.mark.parametrize(("source", "options", "message"), [
    (42, {}, "replay needs a Run"),
    ("no-such-file.jsonl", {}, "replay needs a Run"),
    ([], {}, "starts with its RunStarted"),
])
def test_what_is_not_a_recorded_run_is_refused(source: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentnbError, match=message):
        anb.replay(source, loop=silent([]), **options)


def test_then_must_be_stop_or_live_and_live_needs_a_stored_run() -> None:
    _, refund = counting_refund()
    run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=[refund]).start("x").run()
    with pytest.raises(AgentnbError, match="then='later'"):
        anb.replay(run, loop=silent([refund]), then="later")
    finished = next(e for e in run.events if e.type == "ToolFinished")
    with pytest.raises(AgentnbError, match="must be a stored one"):
        anb.replay(run.transcript, loop=silent([refund]), results={finished.call_id: "x"}, then="live")
