"""Approvals, client results, expiry, digests, headless mode, abandoned pauses, idempotency, binding."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

import agentnb as anb
from agentnb._engine import Emit, RunState, decide
from agentnb.events import ResultsBound, RunFinished

S = anb.LoopState


def refund_loop(**options: Any) -> anb.Loop:
    return anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), **options)


def paused(**options: Any) -> anb.Run:
    run = refund_loop(**options).start("Refund order 42").run()
    assert run.state is S.WAITING_APPROVAL
    return run


def results(run: anb.Run) -> list[Any]:
    return [r for m in run.messages for r in m.tool_results]


def test_approval_request_carries_id_digest_and_expiry() -> None:
    run = paused(approval_ttl=60)
    req = next(e for e in run.events if e.type == "ApprovalRequested")
    assert req.approval_id and len(req.arguments_digest) == 64 and req.kind == "approval"
    assert req.expires_at is not None and 59 < (req.expires_at - req.ts).total_seconds() <= 60


def test_expired_approval_is_refused_and_nothing_runs() -> None:
    run = paused(approval_ttl=0.01)
    time.sleep(0.05)
    call = run.pending_approvals()[0].call_id
    with pytest.raises(anb.ApprovalExpired, match="expired"):
        run.approve(call)
    assert run.state is S.WAITING_APPROVAL and not any(e.type == "ToolStarted" and e.name == "create_refund"
                                                       for e in run.events)
    run.deny(call, reason="too late")
    assert run.run().state is S.COMPLETED


def test_unknown_call_and_digest_mismatch_are_refused() -> None:
    run = paused()
    with pytest.raises(anb.ApprovalError, match="no call 'call_x'"):
        run.approve("call_x")
    call = run.pending_approvals()[0]
    with pytest.raises(anb.DigestMismatch, match="not the ones waiting"):
        run.approve(call.call_id, digest="0" * 64)
    req = next(e for e in run.events if e.type == "ApprovalRequested")
    run.approve(call.call_id, digest=req.arguments_digest)
    assert run.run().state is S.COMPLETED


def test_client_executed_tool_waits_for_submit_result() -> None:
    @anb.tool(client=True)
    def pick_color(prompt: str) -> str:
        """Ask the user's browser for a colour."""
        raise AssertionError("a client tool never runs on the server")

    model = anb.ScriptedModel([
        {"tool_calls": [{"name": "pick_color", "arguments": {"prompt": "favourite?"}}]},
        lambda m: {"text": f"You picked {m[-1].tool_results[0].content}."},
    ])
    run = anb.Loop(model=model, tools=[pick_color]).start("go").run()
    assert run.state is S.WAITING_APPROVAL
    req = next(e for e in run.events if e.type == "ApprovalRequested")
    assert req.kind == "client_result"
    with pytest.raises(anb.ApprovalError, match="submit_result"):
        run.approve(req.call_id)
    run.submit_result(req.call_id, "teal", by="browser")
    assert run.run().output == "You picked teal."
    resolved = next(e for e in run.events if e.type == "ApprovalResolved")
    assert (resolved.decision, resolved.content, resolved.by) == ("submitted", "teal", "browser")


def test_headless_mode_denies_with_an_event_and_the_model_finishes() -> None:
    run = refund_loop(headless=True).start("Refund order 42").run()
    assert run.state is S.COMPLETED and "not approved" in (run.output or "")
    resolved = next(e for e in run.events if e.type == "ApprovalResolved")
    assert resolved.decision == "denied" and resolved.by == "headless"
    denied = [r for r in results(run) if r.status == "denied"]
    assert len(denied) == 1 and denied[0].content.startswith("Denied (headless)")


def test_loop_wide_policy_raises_approval_and_waives_it_only_visibly() -> None:
    kept = refund_loop(approval=False).start("Refund order 42").run()  # a loop policy cannot lower a tool's own rule
    assert kept.state is S.WAITING_APPROVAL and not [e for e in kept.events if e.type == "GuardTripped"]
    waived = refund_loop(approval=False, override_tool_approval=True).start("Refund order 42").run()
    assert waived.state is S.COMPLETED
    (note,) = [e for e in waived.events if e.type == "GuardTripped"]
    assert note.guard == "approval_override" and note.call_id and "create_refund" in note.message
    weather = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"), approval=True)
    assert weather.start("Paris?").run().state is S.WAITING_APPROVAL


def test_abandoned_pause_is_resolved_before_a_follow_up() -> None:
    run = paused()
    nxt = run.follow_up("Actually, never mind. What is 2 + 2?")
    assert run.state is S.CANCELLED and "abandoned" in (run.reason or "")
    denied = [r for r in results(run) if r.status == "denied"]
    assert len(denied) == 1 and "abandoned" in denied[0].content
    prompt = nxt.prompt
    calls = {c.call_id for m in prompt for c in m.tool_calls}
    answered = {r.call_id for m in prompt for r in m.tool_results}
    assert calls == answered and prompt[-1].text == "Actually, never mind. What is 2 + 2?"


def test_follow_up_after_cancel_answers_the_calls_left_behind() -> None:
    run = refund_loop().start("Refund order 42")
    run.run_until(lambda e: e.type == "CallValidated")
    run.cancel()
    nxt = run.follow_up("go on")
    skipped = [r for m in nxt.prompt for r in m.tool_results if r.status == "skipped"]
    assert len(skipped) == 1
    busy = refund_loop().start("x")
    busy.run_until(lambda e: e.type == "TurnCompleted")
    with pytest.raises(anb.RunNotPaused, match="still going"):
        busy.follow_up("w")


def test_a_repeated_write_runs_once() -> None:
    effects: list[tuple[str, int]] = []

    @anb.tool(risk="write", approval=False)
    def charge(order_id: str, cents: int) -> str:
        """Charge."""
        effects.append((order_id, cents))
        return f"charged {cents}"

    call = {"name": "charge", "arguments": {"order_id": "7", "cents": 100}}
    model = anb.ScriptedModel([{"tool_calls": [call]}, {"tool_calls": [call]}, {"text": "done"}])
    run = anb.Loop(model=model, tools=[charge]).start("go").run()
    assert run.state is S.COMPLETED and effects == [("7", 100)]
    finished = [e for e in run.events if e.type == "ToolFinished"]
    assert [e.status for e in finished] == ["ok", "duplicate"]
    assert finished[0].idempotency_key == finished[1].idempotency_key and finished[0].idempotency_key
    assert finished[1].duplicate_of == finished[0].call_id
    assert "was not run again" in finished[1].content and "charged 100" in finished[1].content


def test_tools_can_hand_the_key_downstream_and_supply_their_own() -> None:
    seen: list[str | None] = []

    @anb.tool(risk="write", approval=False, idempotency_key=lambda args, ctx: f"order-{args['order_id']}")
    def ship(ctx: anb.ToolContext, order_id: str, express: bool = False) -> str:
        """Ship."""
        seen.append(ctx.idempotency_key)
        return "shipped"

    model = anb.ScriptedModel([
        {"tool_calls": [{"name": "ship", "arguments": {"order_id": "9"}}]},
        {"tool_calls": [{"name": "ship", "arguments": {"order_id": "9", "express": True}}]},
        {"text": "ok"},
    ])
    run = anb.Loop(model=model, tools=[ship]).start("go").run()
    assert seen == ["order-9"]  # same business intent by the tool's own key: shipped once
    assert [e.status for e in run.events if e.type == "ToolFinished"] == ["ok", "duplicate"]


def test_every_result_carries_binding_hashes() -> None:
    run = refund_loop(approval=False).start("Refund order 42").run()
    for ev in (e for e in run.events if e.type == "ToolFinished"):
        assert len(ev.request_sha256) == len(ev.result_sha256) == len(ev.call_binding_sha256) == 64


def _parallel_before_binding() -> tuple[anb.Loop, list[Any]]:
    loop = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
    run = loop.start("go")
    while True:
        ev = run.step()
        assert ev is not None
        if sum(e.type == "ToolFinished" for e in run.events) == 3:
            return loop, list(run.events)


def test_swapped_results_are_refused_before_they_reach_the_model() -> None:
    loop, events = _parallel_before_binding()
    fin = [i for i, e in enumerate(events) if e.type == "ToolFinished"]
    a, b = events[fin[0]], events[fin[1]]
    swapped = list(events)
    swapped[fin[0]] = replace(a, content=b.content, value=b.value)
    swapped[fin[1]] = replace(b, content=a.content, value=a.value)
    action = decide(RunState.fold(swapped), loop.config)
    assert isinstance(action, Emit) and isinstance(action.event, RunFinished) and action.state is S.FAILED
    assert "changed after it was recorded" in action.event.reason

    moved = list(events)  # a result (with all its hashes) attached to another call
    moved[fin[0]] = replace(b, call_id=a.call_id, seq=a.seq)
    moved[fin[1]] = replace(a, call_id=b.call_id, seq=b.seq)
    action = decide(RunState.fold(moved), loop.config)
    assert isinstance(action, Emit) and isinstance(action.event, RunFinished) and action.state is S.FAILED
    assert "made for a different call" in action.event.reason

    intact = decide(RunState.fold(events), loop.config)
    assert isinstance(intact, Emit) and isinstance(intact.event, ResultsBound)


def test_duplicate_and_unknown_results_are_refused_by_the_fold() -> None:
    _, events = _parallel_before_binding()
    fin = [e for e in events if e.type == "ToolFinished"]
    dup = [*events, replace(fin[0], seq=len(events))]
    with pytest.raises(anb.TranscriptError, match="a second result"):
        RunState.fold(dup)
    unknown = [*events[:-1], replace(fin[-1], call_id="call_nope")]
    with pytest.raises(anb.TranscriptError, match="not a call of this turn"):
        RunState.fold(unknown)


def test_resume_from_the_in_memory_store_of_the_loop() -> None:
    loop = refund_loop()
    run = loop.start("Refund order 42").run()
    again = anb.Run.resume(run.run_id, loop=loop)
    assert again.state is S.WAITING_APPROVAL and len(again.events) == len(run.events)
    again.approve(again.pending_approvals()[0].call_id)
    assert again.run().state is S.COMPLETED


def _boom(call: Any, state: Any) -> bool:
    raise RuntimeError("policy bug")


@pytest.mark.parametrize(("tool_opts", "loop_opts", "waits", "waived"), [
    ({"approval": True}, {"approval": False}, True, False),  # a loop policy cannot lower a tool's own rule
    ({"risk": "write"}, {"approval": lambda call, state: False}, True, False),
    ({"risk": "dangerous"}, {"approval": False, "override_tool_approval": True}, False, True),  # visible waiver
    ({"approval": True}, {"approval": False, "override_tool_approval": True}, False, True),
    ({}, {"approval": True}, True, False),  # a read tool: the loop may ask
    ({}, {"approval": lambda call, state: True, "override_tool_approval": True}, True, False),
    ({"client": True}, {"approval": False, "override_tool_approval": True}, True, False),  # the client must answer
    ({"approval": _boom}, {}, True, False),  # a tool policy that raises: a person decides
    ({}, {"approval": _boom}, True, False),
    ({"risk": "write", "approval": False}, {}, False, False),  # the tool's author waived it: no loop involved
])
def test_the_approval_precedence_table(tool_opts: dict[str, Any], loop_opts: dict[str, Any], waits: bool,
                                       waived: bool) -> None:
    @anb.tool(**tool_opts)
    def act(x: int) -> str:
        """Act."""
        return "done"

    model = anb.ScriptedModel([{"tool_calls": [{"name": "act", "arguments": {"x": 1}}]}, {"text": "ok"}])
    run = anb.Loop(model=model, tools=[act], **loop_opts).start("go").run()
    assert (run.state is S.WAITING_APPROVAL) is waits, run.reason
    notes = [e for e in run.events if e.type == "GuardTripped" and e.guard == "approval_override"]
    assert bool(notes) is waived


def test_approving_one_of_two_waiting_calls_waits_for_the_other() -> None:
    """Nothing starts while a person is asked: the approved call runs once every waiting call is answered."""
    pay = {"name": "create_refund", "arguments": {"order_id": "42", "amount_cents": 500}}
    script = [{"tool_calls": [pay, {**pay, "arguments": {"order_id": "43", "amount_cents": 700}}]}, {"text": "ok"}]
    run = anb.Loop(model=anb.ScriptedModel(script), tools=anb.stories.tools("refund")).start("refund both").run()
    first, second = (c.call_id for c in run.pending_approvals())
    run.approve(first)
    assert run.step() is None and run.run().state is S.WAITING_APPROVAL  # waits, and says so
    assert not any(e.type == "ToolStarted" for e in run.events)
    run.deny(second, "not this one")
    assert run.run().state is S.COMPLETED
    assert [e.call_id for e in run.events if e.type == "ToolStarted"] == [first]
