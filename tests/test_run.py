"""The driver: stepping, the turn cap, approvals, cancelling, streaming merges, stories, listeners."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import agentnb as anb
from agentnb._engine import FINALIZE_PROMPT

S = anb.LoopState
ADD = {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}


def test_step_does_one_event_at_a_time(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([ADD, {"text": "3"}]).start("1+2?")
    seen = []
    while (ev := run.step()) is not None:
        assert ev is run.events[-1] and ev.seq == len(run.events) - 1 and ev.state is run.state
        seen.append((ev.type, ev.state.value, ev.turn))
    assert seen == [
        ("RunStarted", "READY", 0),
        ("ModelRequested", "MODEL_REQUESTED", 1),
        ("TurnCompleted", "RESPONDED", 1),
        ("CallParsed", "VALIDATING", 1),
        ("CallValidated", "VALIDATING", 1),
        ("ToolStarted", "EXECUTING", 1),
        ("ToolFinished", "EXECUTING", 1),
        ("ResultsBound", "RESULTS_READY", 1),
        ("ModelRequested", "MODEL_REQUESTED", 2),
        ("TurnCompleted", "RESPONDED", 2),
        ("RunFinished", "COMPLETED", 2),
    ]
    assert run.step() is None and run.done


def test_run_until_stops_at_the_first_match(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([ADD, {"text": "3"}]).start("q")
    ev = run.run_until(lambda e: e.type == "ToolFinished")
    assert ev is not None and ev.content == "3" and run.state is S.EXECUTING
    assert run.run_until(lambda e: e.type == "Nothing") is None and run.state is S.COMPLETED


def test_conversation_and_turn_records(make_loop: Callable[..., anb.Loop]) -> None:
    loop = make_loop([{"text": "Let me add.", **ADD}, {"text": "3"}], system="Be brief.")
    run = loop.start("1+2?").run()
    roles = [m.role for m in run.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert run.messages[2].text == "Let me add." and run.messages[2].tool_calls[0].arguments == {"a": 1, "b": 2}
    done = [e for e in run.events if e.type == "TurnCompleted"]
    r = done[0].response
    assert (r.provider, r.model, r.response_id, r.finish_reason_raw, r.finish_reason) == (
        "scripted", "scripted", "scripted-1", "tool_calls", "tool_calls"
    )
    assert r.usage.input_tokens > 0 and r.usage.output_tokens > 0 and done[0].latency_s >= 0
    assert done[1].response.usage.input_tokens > r.usage.input_tokens  # the history grew
    assert run.view.input_tokens == sum(e.response.usage.input_tokens for e in done)


def test_prompt_may_be_a_prior_message_list(make_loop: Callable[..., anb.Loop]) -> None:
    seen: list[list[str]] = []

    def reply(messages: Any) -> dict[str, Any]:
        seen.append([m.role for m in messages])
        return {"text": "fine"}

    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, anb.Message.user("and?")]
    run = make_loop([reply]).start(history).run()
    assert seen == [["user", "assistant", "user"]] and run.output == "fine"


def test_finalize_at_the_cap_sends_a_tools_free_user_turn(make_loop: Callable[..., anb.Loop]) -> None:
    requests: list[anb.ModelRequest] = []
    loop = anb.Loop(model=anb.ScriptedModel.story("looping"), tools=anb.stories.tools("looping"), max_turns=3)
    orig = loop.model.respond

    def spy(request: anb.ModelRequest) -> Any:
        requests.append(request)
        return orig(request)

    loop.model.respond = spy  # type: ignore[method-assign]
    run = loop.start("When is the release?").run()
    assert run.state is S.COMPLETED and "cannot answer" in (run.output or "")
    guard = next(e for e in run.events if e.type == "GuardTripped")
    assert (guard.guard, guard.limit, guard.value, guard.action) == ("max_turns", 3, 3, "finalize")
    assert len(requests) == 4
    last = requests[-1]
    assert last.options.finalize and list(last.tools) == [] and last.options.tool_choice == "none"
    assert "tool_choice" not in last.settings and [t.name for t in last.run_tools] == [t.name for t in loop.tools]
    assert last.messages[-1].role == "user" and last.messages[-1].text == FINALIZE_PROMPT
    assert all(r.tools for r in requests[:-1])
    final_req = [e for e in run.events if e.type == "ModelRequested"][-1]
    assert final_req.finalize and final_req.tools == [] and final_req.message_count == len(last.messages)


def test_stop_at_the_cap_is_budget_exhausted(make_loop: Callable[..., anb.Loop]) -> None:
    loop = anb.Loop(
        model=anb.ScriptedModel.story("looping"), tools=anb.stories.tools("looping"), max_turns=2, on_max_turns="stop"
    )
    run = loop.start("q").run()
    assert run.state is S.BUDGET_EXHAUSTED and "max_turns: 2 reached the limit of 2" in (run.reason or "")
    assert sum(e.type == "ModelRequested" for e in run.events) == 2


def test_finalization_that_still_calls_tools_ignores_them(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([ADD, {"text": "3 (maybe)", **ADD}], max_turns=1).start("q").run()
    assert run.state is S.COMPLETED and run.output == "3 (maybe)"
    assert sum(e.type == "ToolStarted" for e in run.events) == 1
    empty = make_loop([ADD, ADD], max_turns=1).start("q").run()
    assert empty.state is S.BUDGET_EXHAUSTED


def refund_run(**options: Any) -> anb.Run:
    loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), **options)
    return loop.start("Refund order 42").run()


def test_approval_pauses_and_approve_continues() -> None:
    run = refund_run()
    assert run.state is S.WAITING_APPROVAL and run.paused and run.step() is None
    (pending,) = run.pending_approvals()
    req = next(e for e in run.events if e.type == "ApprovalRequested")
    assert req.name == "create_refund" and req.risk == "write" and len(req.arguments_digest) == 64
    ev = run.approve(pending.call_id, by="ana", note="ok")
    assert ev.type == "ApprovalResolved" and ev.state is S.EXECUTING and ev.by == "ana"
    run.run()
    assert run.state is S.COMPLETED and run.output == "Done: refund rf_42_1999 of $19.99 for order 42."


def test_approve_with_edited_arguments_validates_them_first() -> None:
    run = refund_run()
    (pending,) = run.pending_approvals()
    with pytest.raises(ValidationError):
        run.approve(pending.call_id, arguments={"order_id": "42", "amount_cents": "a lot"})
    assert run.state is S.WAITING_APPROVAL  # nothing was recorded
    run.approve(pending.call_id, arguments={"order_id": "42", "amount_cents": 500})
    run.run()
    assert run.output == "Done: refund rf_42_500 of $5.00 for order 42."
    resolved = next(e for e in run.events if e.type == "ApprovalResolved")
    assert resolved.arguments == {"order_id": "42", "amount_cents": 500}


def test_deny_sends_the_reason_to_the_model() -> None:
    run = refund_run()
    run.deny(run.pending_approvals()[0].call_id, reason="amount too high")
    run.run()
    result = run.messages[-2].tool_results[0]
    assert result.status == "denied" and result.content == "Denied by the user: amount too high"
    assert run.state is S.COMPLETED and "not approved" in (run.output or "")
    assert "ToolStarted" not in [e.type for e in run.events if getattr(e, "name", "") == "create_refund"]


def test_approval_errors_are_clear() -> None:
    run = refund_run()
    with pytest.raises(anb.ApprovalError, match="no call 'nope'"):
        run.approve("nope")
    run.deny(run.pending_approvals()[0].call_id)
    with pytest.raises(anb.RunNotPaused, match="not waiting"):
        run.approve("anything")


def test_calls_that_need_no_approval_run_before_the_pause(make_loop: Callable[..., anb.Loop]) -> None:
    @anb.tool(approval=True)
    def risky(x: int) -> int:
        """Risky."""
        return x

    script = [
        {"tool_calls": [{"name": "risky", "arguments": {"x": 1}, "id": "r"}, {**ADD["tool_calls"][0], "id": "a"}]},
        {"text": "ok"},
    ]
    @anb.tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    run = make_loop(script, [risky, add]).start("q").run()
    assert run.state is S.WAITING_APPROVAL
    finished = [e.call_id for e in run.events if e.type == "ToolFinished"]
    assert finished == ["a"]
    run.approve("r")
    run.run()
    assert [r.call_id for r in run.messages[-2].tool_results] == ["r", "a"]  # still the model's order


def test_cancel_ends_the_run() -> None:
    run = refund_run()
    ev = run.cancel("changed my mind")
    assert ev is not None and run.state is S.CANCELLED and run.reason == "changed my mind"
    assert run.cancel() is None


def test_streaming_merges_fragments_by_index(make_loop: Callable[..., anb.Loop]) -> None:
    script = [
        {"text": "Adding both.", "tool_calls": [
            {"name": "add", "arguments": {"a": 10, "b": 20}}, {"name": "add", "arguments": {"a": 3, "b": 4}},
        ]},
        {"text": "30 and 7"},
    ]
    run = make_loop(script, stream=True, chunk_size=5).start("q").run()
    merges = [e for e in run.events if e.type == "ArgumentsMerged" and e.turn == 1]
    by_index: dict[int, str] = {}
    for m in merges:
        by_index[m.index] = by_index.get(m.index, "") + m.fragment
        assert m.length == len(by_index[m.index].encode())
    assert by_index == {0: '{"a": 10, "b": 20}', 1: '{"a": 3, "b": 4}'}
    assert merges[0].name == "add" and merges[1].name is None  # id and name come with the first fragment
    texts = [e for e in run.events if e.type == "TextMerged"]
    assert "".join(e.fragment for e in texts if e.turn == 1) == "Adding both."
    assert run.output == "30 and 7"


@pytest.mark.parametrize(
    ("name", "state"),
    [("weather", S.COMPLETED), ("parallel", S.COMPLETED), ("refund", S.WAITING_APPROVAL),
     ("calculator", S.COMPLETED), ("malformed", S.COMPLETED), ("looping", S.NO_PROGRESS)],
)
def test_every_story_runs(name: str, state: anb.LoopState) -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story(name, stream=True), tools=anb.stories.tools(name), max_turns=5)
    run = loop.start("go").run()
    assert run.state is state, run.reason
    assert anb.stories.describe(name)


def test_unknown_story_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="weather"):
        anb.ScriptedModel.story("nope")


def test_script_specs_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        anb.ScriptedModel([{"txt": "typo"}])
    with pytest.raises(ValueError, match="needs at least a 'name'"):
        anb.ScriptedModel([{"tool_calls": [{"arguments": {}}]}])


def test_one_model_serves_several_runs_independently(make_loop: Callable[..., anb.Loop]) -> None:
    loop = make_loop([ADD, {"text": "3"}])
    a, b = loop.start("q"), loop.start("q")
    a.run_until(lambda e: e.type == "TurnCompleted")
    b.run()
    a.run()
    assert a.output == b.output == "3"


# -- listeners ----------------------------------------------------------------------------------------------


def test_a_raising_listener_is_warned_about_and_the_run_and_the_other_listeners_go_on(
        make_loop: Callable[..., anb.Loop], tmp_path: Path) -> None:
    two = {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}},
                          {"name": "add", "arguments": {"a": 3, "b": 4}}]}
    store = anb.SqliteStore(tmp_path / "listeners.db")
    run = make_loop([two, {"text": "3 and 7"}], store=store).start("1+2? 3+4?")
    before: list[anb.BaseEvent] = []
    after: list[anb.BaseEvent] = []
    states: list[anb.LoopState] = []

    def flaky_widget(ev: anb.BaseEvent, state: Any) -> None:
        if ev.type == "ToolFinished":  # both results of the turn are written one after the other, in one step
            raise RuntimeError("the widget is gone")

    run.on_event(lambda ev, state: before.append(ev))
    run.on_event(flaky_widget)
    run.on_event(lambda ev, state: (after.append(ev), states.append(state.state)))
    with pytest.warns(anb.ListenerWarning) as warned:
        run.run()
    assert run.state is S.COMPLETED and run.output == "3 and 7"
    assert before == run.events and after == run.events  # the others got every event, in order
    assert states == [ev.state for ev in run.events]  # each with the state after it
    assert [str(w.message) for w in warned] == [
        f"the listener {flaky_widget.__qualname__} of run {run.run_id} raised on event {ev.seq} ({ev.type}): "
        "RuntimeError: the widget is gone; the event is stored and the run goes on"
        for ev in run.events if ev.type == "ToolFinished"]
    assert all(w.filename == __file__ for w in warned)  # each points at the listener's line that raised
    assert len(warned) == 2 and {ev.content for ev in run.events if ev.type == "ToolFinished"} == {"3", "7"}
    stored = store.load(run.run_id)  # the log is whole: nothing was lost or written twice
    assert [(e.seq, e.type) for e in stored] == [(e.seq, e.type) for e in run.events]
    assert anb.Run.resume(run.run_id, loop=make_loop([]), store=store).state is S.COMPLETED
    store.close()


def test_a_listeners_keyboard_interrupt_stops_the_run_with_its_log_intact(
        make_loop: Callable[..., anb.Loop], tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "interrupt.db")
    run = make_loop([ADD, {"text": "3"}], store=store).start("1+2?")

    def stop_here(ev: anb.BaseEvent, state: Any) -> None:
        if ev.type == "ToolStarted":
            raise KeyboardInterrupt  # ^C is not a listener's fault: it stops the run, as anywhere else

    run.on_event(stop_here)
    with pytest.raises(KeyboardInterrupt):
        run.run()
    assert [e.type for e in store.load(run.run_id)] == [e.type for e in run.events]
    assert run.events[-1].type == "ToolStarted"
