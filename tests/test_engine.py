"""The engine without I/O: decide() is pure, and the rules that moved out of the driver hold on their own."""

from __future__ import annotations

import copy
import time
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import agentnb as anb
from agentnb import events as ev_module
from agentnb._engine import (
    UNSTAMPED,
    CallState,
    EngineConfig,
    RunState,
    ToolSpec,
    ToolSpecs,
    assign_call_ids,
    decide,
    finished,
    resolution,
    resolved_state,
    stamp,
)
from agentnb._messages import Message, ModelTurn, ToolCallPart
from agentnb._states import S
from agentnb.events import EVENT_CLASSES, ModelRequested

# -- purity: the same state gives equal actions, and decide writes nothing ------------------------------------


@anb.tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@anb.tool(approval=True, risk="write")
def pay(cents: int) -> str:
    """Needs a person."""
    return "paid"


@anb.tool(risk="write", idempotency_key=lambda args: f"ship-{args['order']}")
def ship(order: str) -> str:
    """A write with its own key (needs a person by risk)."""
    return "shipped"


@anb.tool(client=True)
def locate() -> str:
    """Runs on the client."""
    return "here"


class Answer(BaseModel):
    city: str
    temp_c: int


call = st.one_of(
    st.fixed_dictionaries({"name": st.just("add"), "arguments": st.fixed_dictionaries(
        {"a": st.integers(0, 3), "b": st.integers(0, 3)})}),
    st.just({"name": "pay", "arguments": {"cents": 5}}),
    st.just({"name": "ship", "arguments": {"order": "42"}}),
    st.just({"name": "locate", "arguments": {}}),
    st.just({"name": "nope", "arguments": {}}),
    st.just({"name": "add", "arguments": '{"a": 1,'}),
    st.just({"name": "add", "arguments": {"a": "x", "b": 1}}),
    st.just({"name": "final_result", "arguments": {"city": "Paris", "temp_c": 18}}),
    st.just({"name": "final_result", "arguments": {"city": "Paris"}}),
)
turn = st.one_of(
    st.fixed_dictionaries({"tool_calls": st.lists(call, min_size=1, max_size=3)}),
    st.fixed_dictionaries({"text": st.just("thinking out loud " * 8), "tool_calls": st.lists(call, min_size=1,
                                                                                             max_size=2)}),
    st.just({"text": "final answer"}),
    st.just({"text": '{"city": "Rome", "temp_c": 20}'}),
    st.just({"error": {"status": 503}}),
)
budgets = st.builds(
    anb.Budget,
    max_turns=st.integers(1, 5),
    max_tool_calls=st.one_of(st.none(), st.integers(1, 6)),
    on_exhausted=st.sampled_from(["finalize", "stop", "escalate"]),
    context_window=st.one_of(st.none(), st.integers(120, 500)),
    keep_pairs=st.integers(0, 2),
    on_repeat=st.sampled_from(["stop", "note", "escalate"]),
)


def _summarize(messages: list[Message]) -> str:
    return f"{len(messages)} messages so far"


def _check_pure(rs: RunState, cfg: EngineConfig, now: float | None) -> None:
    """decide() twice on one state: equal actions, and the state (compared deeply) unchanged."""
    before = copy.deepcopy(rs)
    first = decide(rs, cfg, now)
    second = decide(rs, cfg, now)
    assert first == second
    assert rs == before, "decide() changed the state it was given"


def _drive(loop: anb.Loop, answers: list[str], *, deadline: bool = False) -> int:
    """Step a run to its end, checking decide() on the fold of every prefix; returns the states checked."""
    run = loop.start("go")
    run.step()
    checked = 0
    answers = list(answers)
    for _ in range(400):
        rs = RunState.fold(run.events)  # the engine's own view of the log, not the driver's object
        _check_pure(rs, loop.config, time.time() if deadline else None)
        checked += 1
        if run.done:
            break
        if run.paused:
            waiting = run.pending_approvals()[0]
            what = answers.pop(0) if answers else "deny"
            if waiting.kind == "client_result":
                run.submit_result(waiting.call_id, {"where": "Paris"})
            elif what == "approve" and waiting.kind != "client_result":
                run.approve(waiting.call_id)
            else:
                run.deny(waiting.call_id, "no")
            continue
        run.step()
    return checked


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(turn, min_size=1, max_size=6), budget=budgets, stream=st.booleans(),
       output=st.booleans(), summarizer=st.booleans(), policy=st.booleans(),
       answers=st.lists(st.sampled_from(["approve", "deny"]), max_size=6))
def test_decide_is_pure_on_every_state_of_random_runs(
    script: list[dict[str, Any]], budget: anb.Budget, stream: bool, output: bool, summarizer: bool, policy: bool,
    answers: list[str],
) -> None:
    model = anb.ScriptedModel([*script, {"text": "done"}], stream=stream, chunk_size=7)
    loop = anb.Loop(
        model=model, tools=[add, pay, ship, locate], budget=budget, retry_base_delay=0, max_retries=1,
        output_type=Answer if output else None, output_mode="tool", summarizer=_summarize if summarizer else None,
        approval=(lambda c, rs: c.name == "add" and rs.turn > 1) if policy else None,
        tool_choice=(lambda rs: "required" if rs.turn == 0 else "auto") if policy else None,
    )
    assert _drive(loop, answers) > 1


@pytest.mark.parametrize("story", anb.stories.names())
@pytest.mark.parametrize("headless", [False, True])
def test_decide_is_pure_on_the_stories(story: str, headless: bool) -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story(story, stream=True, chunk_size=4), tools=anb.stories.tools(story),
                    headless=headless, budget=anb.Budget(deadline_s=600, max_repeats=2, on_repeat="escalate"))
    assert _drive(loop, ["approve", "deny", "approve"], deadline=True) > 3


def test_decide_is_pure_with_an_override_waiver_and_edited_arguments() -> None:
    loop = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [{"name": "pay", "arguments": {"cents": 5}},
                                                              {"name": "ship", "arguments": {"order": "7"}}]},
                                             {"text": "ok"}]),
                    tools=[pay, ship], approval=lambda c, rs: c.name == "ship", override_tool_approval=True)
    run = loop.start("go")
    run.step()
    while not run.paused:
        _check_pure(RunState.fold(run.events), loop.config, None)
        run.step()
    assert [e.guard for e in run.events if e.type == "GuardTripped"] == ["approval_override"]
    run.approve(run.pending_approvals()[0].call_id, arguments={"order": "8"})
    while not run.done:
        _check_pure(RunState.fold(run.events), loop.config, None)
        run.step()
    shipped = next(e for e in run.events if e.type == "ToolStarted" and e.name == "ship")
    assert shipped.idempotency_key == "ship-8"  # the edit is a new intent: the key is made again


def test_the_tool_key_function_is_called_once_per_call() -> None:
    calls: list[str] = []

    def key(args: dict[str, Any]) -> str:
        calls.append(args["order"])
        return f"k-{args['order']}"

    @anb.tool(risk="write", approval=False, idempotency_key=key)
    def send(order: str) -> str:
        """Send."""
        return "sent"

    run = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [{"name": "send", "arguments": {"order": "1"}}]},
                                            {"text": "ok"}]), tools=[send]).start("go").run()
    assert run.state is S.COMPLETED and calls == ["1"]
    validated = next(e for e in run.events if e.type == "CallValidated")
    started = next(e for e in run.events if e.type == "ToolStarted")
    assert validated.idempotency_key == started.idempotency_key == "k-1"
    assert started.request_sha256 == next(e for e in run.events if e.type == "ToolFinished").request_sha256


# -- events: built by the engine, stamped by the driver ----------------------------------------------------------


def test_event_classes_are_the_union() -> None:
    union = typing.get_args(typing.get_args(ev_module.Event)[0])
    assert list(EVENT_CLASSES.values()) == list(union)
    assert all(EVENT_CLASSES[cls.__name__] is cls for cls in union)


def test_stamp_places_an_engine_event_in_the_run() -> None:
    rs = RunState(run_id="run_x", seq=12, turn=3)
    event = finished(S.CANCELLED, "stopped")
    assert event.ts == UNSTAMPED and event.seq == -1
    now = UNSTAMPED.replace(year=2030)
    stamp(rs, event, now)
    assert (event.seq, event.run_id, event.turn, event.ts) == (12, "run_x", 3, now)
    request = ModelRequested(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.MODEL_REQUESTED, message_count=1)
    assert stamp(rs, request, now).turn == 4  # a request opens the next turn


def test_an_unstamped_event_cannot_be_folded() -> None:
    with pytest.raises(anb.TranscriptError, match=r"event -1 \(RunFinished\): expected seq 0"):
        RunState().apply(finished(S.CANCELLED, "x"))


# -- the rules the driver used to hold --------------------------------------------------------------------------


def _call(call_id: str, name: str = "f") -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name=name, arguments_raw="{}", arguments={})


def test_call_ids_are_made_unique_in_the_conversation() -> None:
    turn = ModelTurn(message=Message(role="assistant", parts=(_call(""), _call("c1"), _call("c1"))),
                     finish_reason="tool_calls",
                      provider="scripted", model="m")
    ids = [c.call_id for c in assign_call_ids(turn, "run_abc", 4, {"call_abc_4_2"}).message.tool_calls]
    assert ids == ["call_abc_4_0", "c1", "call_abc_4_2_1"]
    plain = ModelTurn(message=Message(role="assistant", parts=(_call("z"),)), finish_reason="tool_calls",
                      provider="scripted", model="m")
    assert assign_call_ids(plain, "run_abc", 0, set()) is plain  # nothing to change: the same turn


def test_the_state_after_a_resolution() -> None:
    a = CallState(part=_call("a"), status="awaiting_approval")
    b = CallState(part=_call("b"), status="awaiting_approval")
    rs = RunState(calls={"a": a, "b": b})
    assert resolved_state(rs, a) is S.WAITING_APPROVAL  # b still waits
    b.status = "done"
    assert resolved_state(rs, a) is S.EXECUTING
    esc = CallState(part=_call("guard:max_turns", "max_turns"), status="awaiting_approval", kind="escalation")
    assert resolved_state(RunState(calls={"guard:max_turns": esc}), esc) is S.RESULTS_READY
    answer = resolution(rs, a, "denied", by="ann", note="no")
    assert (answer.state, answer.decision, answer.by, answer.note) == (S.EXECUTING, "denied", "ann", "no")


def test_the_engine_needs_only_tool_specs() -> None:
    registry = anb.Loop(model=anb.ScriptedModel([]), tools=[add]).registry
    assert isinstance(registry, ToolSpecs) and isinstance(registry.get("add"), ToolSpec)

    class Specs:
        """A registry of one tool that can run nothing: enough for every decision."""

        def get(self, name: str) -> Any:
            return registry.get(name)

        def unknown_message(self, name: str) -> str:
            return f"no {name}"

    cfg = EngineConfig(registry=Specs())
    run = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}},
                                                             {"name": "zap", "arguments": {}}]}, {"text": "ok"}]),
                   tools=[add]).start("go").run()
    at = next(e.seq for e in run.events if e.type == "CallRejected")
    rejected = decide(RunState.fold(run.events[:at]), cfg)
    assert rejected.event.message == "no zap"  # type: ignore[union-attr]
    validated = next(e.seq for e in run.events if e.type == "CallValidated")
    same = decide(RunState.fold(run.events[:validated]), cfg)
    assert same.event.arguments == run.events[validated].arguments  # type: ignore[union-attr]
