"""The engine's inbound door: every I/O result class has a rule, and each rule holds on hand-made states (no Run)."""

from __future__ import annotations

import typing
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

import agentnb as anb
from agentnb._engine import (
    RULES,
    AwaitFirst,
    CallState,
    Cancelled,
    Decision,
    DuplicateDone,
    Emit,
    EngineConfig,
    LedgerAnswered,
    LedgerPeeked,
    ModelFailed,
    ModelLost,
    ParentRead,
    Proceed,
    Result,
    RetryPolicy,
    RunState,
    Summary,
    ToolReturned,
    ToolStopped,
    TurnReceived,
    arguments_digest,
    model_failed,
    receive,
)
from agentnb._engine.build import UNSTAMPED
from agentnb._messages import Message, ModelTurn, ToolCallPart
from agentnb._outcomes import Effect, EffectDone, Outcome
from agentnb._request import ArgumentsDelta, TextDelta
from agentnb._states import S
from agentnb.events import ApprovalRequested, CompressionApplied, ModelRetried, RunFinished, ToolFinished, TurnCompleted
from agentnb.tools import ToolRegistry


@anb.tool
def lookup(q: str) -> str:
    """Read something."""
    return q


@anb.tool(risk="write", approval=False)
def ship(order: str) -> str:
    """Ship an order."""
    return order


@anb.tool(client=True)
def pick(choice: str) -> str:
    """The client answers."""
    return choice


CFG = EngineConfig(registry=ToolRegistry([lookup, ship, pick]))


def _part(call_id: str, name: str, **arguments: object) -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name=name, arguments_raw="{}", arguments=dict(arguments))


def _state(*calls: CallState, state: S = S.EXECUTING) -> RunState:
    return RunState(run_id="run_t", state=state, calls={c.call_id: c for c in calls})


def _running(call_id: str, name: str, key: str | None = None, **arguments: object) -> CallState:
    return CallState(part=_part(call_id, name, **arguments), status="running", arguments=dict(arguments),
                     idempotency_key=key, expected_request="req")


def _event(emit: object) -> object:
    assert isinstance(emit, Emit)
    return emit.event


# -- completeness ----------------------------------------------------------------------------------------


def test_every_result_class_has_a_rule_and_every_rule_a_result_class() -> None:
    classes = {*typing.get_args(Result), TextDelta, ArgumentsDelta}
    assert set(RULES) == classes, f"missing rules: {classes - set(RULES)}; rules for no result: {set(RULES) - classes}"


def test_something_that_is_not_a_result_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="no rule for an I/O result of type dict"):
        receive(RunState(), CFG, {"kind": "text"})


# -- the model ---------------------------------------------------------------------------------------------


def test_retry_or_fail() -> None:
    policy = RetryPolicy(max_retries=2, base_delay=1.0, max_time=10.0)
    first = model_failed(RunState(), policy, ModelFailed("busy", 503, True, jitter=0.5))
    assert isinstance(first, ModelRetried) and (first.attempt, first.delay_s, first.status) == (1, 0.5, 503)
    later = model_failed(RunState(retries=1), policy, ModelFailed("busy", 503, True, jitter=1.0))
    assert isinstance(later, ModelRetried) and later.delay_s == 2.0  # doubled
    told = model_failed(RunState(), policy, ModelFailed("slow down", 429, True, retry_after=4.0, jitter=0.5))
    assert isinstance(told, ModelRetried) and told.delay_s == 4.0  # the provider's retry-after wins
    used_up = model_failed(RunState(retries=2), policy, ModelFailed("busy", 503, True))
    assert isinstance(used_up, RunFinished) and used_up.final is S.FAILED
    assert used_up.reason == "the model call failed after 3 attempts: HTTP 503: busy"
    late = model_failed(RunState(), policy, ModelFailed("busy", 503, True, spent_s=9.9, jitter=1.0))
    assert isinstance(late, RunFinished) and "max_retry_time=10 s" in late.reason
    final = model_failed(RunState(), policy, ModelFailed("bad request", 400, False))
    assert isinstance(final, RunFinished) and final.reason == "the model call failed: HTTP 400: bad request"
    slow = RetryPolicy(base_delay=100.0, max_time=None)
    capped = model_failed(RunState(retries=1), slow, ModelFailed("x", None, True))
    assert isinstance(capped, ModelRetried) and capped.delay_s == 30.0


def test_fragments_count_what_is_shown() -> None:
    rs = RunState(state=S.MODEL_REQUESTED, text_length=3, argument_lengths={1: 2})
    text = _event(receive(rs, CFG, TextDelta("ab")))
    assert text.length == 5 and text.fragment == "ab"  # type: ignore[attr-defined]
    args = _event(receive(rs, CFG, ArgumentsDelta(1, "é", "c1", "lookup")))
    assert args.length == 4 and args.index == 1  # type: ignore[attr-defined]  # bytes: é is two


def test_a_turn_gets_ids_unique_in_the_conversation_read_once() -> None:
    earlier = Message(role="assistant", parts=(_part("a", "lookup"),))
    rs = RunState(run_id="run_q", turn=2, state=S.MODEL_REQUESTED, messages=[Message.user("hi"), earlier])
    again = ModelTurn(message=Message(role="assistant", parts=(_part("a", "lookup"),)), finish_reason="tool_calls",
                      provider="scripted", model="m")
    ev = _event(receive(rs, CFG, TurnReceived(again, 0.25)))
    assert isinstance(ev, TurnCompleted) and ev.latency_s == 0.25
    assert [c.call_id for c in ev.response.message.tool_calls] == ["call_q_2_0"]
    rs.messages = [Message.user("hi")]  # compressed: the old call is gone, its id is free again
    ev = _event(receive(rs, CFG, TurnReceived(again)))
    assert [c.call_id for c in ev.response.message.tool_calls] == ["a"]  # type: ignore[attr-defined]


def test_a_lost_request_is_asked_again() -> None:
    ev = _event(receive(RunState(state=S.MODEL_REQUESTED, retries=1), CFG, ModelLost()))
    assert isinstance(ev, ModelRetried) and ev.attempt == 2 and ev.delay_s == 0.0


# -- the ledger ---------------------------------------------------------------------------------------------


def test_ledger_verdicts() -> None:
    c = _running("c1", "ship", "k", order="o1")
    rs = _state(c)
    mine = Effect(key="k", run_id="run_t", call_id="c1", tool="ship", status="started")
    assert receive(rs, CFG, LedgerAnswered("c1", None, False)) == Proceed()
    unknown = _event(receive(rs, CFG, LedgerAnswered("c1", mine, False)))
    assert isinstance(unknown, ApprovalRequested) and unknown.kind == "outcome_unknown"
    assert unknown.note is not None and "its effect was claimed before and no outcome was recorded" in unknown.note
    assert receive(rs, CFG, LedgerAnswered("c1", mine, False, unrun=True)) == Proceed()  # claimed here, never ran
    assert receive(rs, CFG, LedgerAnswered("c1", mine, True)) == Proceed(retry=True)  # idempotent: again, same key
    c.retry_confirmed = True
    assert receive(rs, CFG, LedgerAnswered("c1", mine, False)) == Proceed(retry=True)
    done = Effect(key="k", run_id="run_t", call_id="c1", tool="ship", status="done", content="shipped")
    reused = _event(receive(rs, CFG, LedgerAnswered("c1", done, False)))
    assert isinstance(reused, ToolFinished) and reused.reused and reused.content == "shipped"
    other = Effect(key="k", run_id="run_t", call_id="c0", tool="ship", status="started")
    assert receive(rs, CFG, LedgerAnswered("c1", other, False, frozenset({"c0", "c1"}))) == AwaitFirst("c0")
    dup = _event(receive(rs, CFG, LedgerAnswered("c1", other, False, frozenset({"c1"}))))
    assert isinstance(dup, ToolFinished) and dup.status == "duplicate" and "outcome is not known yet" in dup.content
    elsewhere = Effect(key="k", run_id="run_z", call_id="c9", tool="ship", status="done", content="ok")
    dup = _event(receive(rs, CFG, LedgerAnswered("c1", elsewhere, False)))
    assert isinstance(dup, ToolFinished) and dup.duplicate_of == "c9" and dup.content.endswith("Its result: ok")
    assert (dup.status, dup.effect, dup.effect_run, dup.effect_call) == ("duplicate", "inherited", "run_z", "c9")
    assert "Already done in run run_z by call c9" in dup.content


def _fork_state(c: CallState, **policy: object) -> RunState:
    rs = _state(c)
    rs.settings = {"fork": {"parent": "run_p", "effects": "ask", "reads": "rerun", "rerun": [], **policy}}
    return rs


def test_a_forks_write_follows_its_effect_policy_before_any_claim() -> None:
    c = _running("c1", "ship", "k", order="o1")
    ask = _event(receive(_fork_state(c), CFG, LedgerPeeked("c1", None)))  # nobody made it: a person decides
    assert isinstance(ask, ApprovalRequested) and ask.kind == "fork_effect" and ask.state is S.WAITING_APPROVAL
    assert ask.note is not None and "fork of run_p" in ask.note and "never made" in ask.note
    assert receive(_fork_state(c, effects="run"), CFG, LedgerPeeked("c1", None)) == Proceed(claim=True)
    refused = _event(receive(_fork_state(c, effects="simulate"), CFG, LedgerPeeked("c1", None)))
    assert isinstance(refused, ToolFinished) and refused.status == "error" and refused.effect == "simulated"
    assert "has no simulator" in refused.content and "Nothing happened" in refused.content
    fake = anb.tool(risk="write", approval=False, simulate=lambda order: f"would ship {order}")(ship.fn)
    assert receive(_fork_state(c, effects="simulate"), EngineConfig(registry=ToolRegistry([fake])),
                   LedgerPeeked("c1", None)) == Proceed(simulate=True)
    found = Effect(key="k", run_id="run_p", call_id="c0", tool="ship", status="done", content="shipped")
    for effects in ("ask", "simulate", "run"):  # an effect that exists is claimed, so its claim says inherited
        assert receive(_fork_state(c, effects=effects), CFG, LedgerPeeked("c1", found)) == Proceed(claim=True)
    assert receive(_fork_state(c, rerun=["ship"]), CFG, LedgerPeeked("c1", None)) == Proceed(claim=True)
    c.fork_confirmed = True  # a person approved it
    assert receive(_fork_state(c), CFG, LedgerPeeked("c1", None)) == Proceed(claim=True)


def test_a_forks_outcomes_are_marked() -> None:
    c = _running("c1", "ship", "k", order="o1")
    done = EffectDone("k", "shipped", "shipped", "ok")
    ran = _event(receive(_fork_state(c), CFG, ToolReturned("c1", Outcome("ok", "shipped"), done)))
    assert isinstance(ran, ToolFinished) and ran.effect == "happened"
    again = _event(receive(_fork_state(c, rerun=["ship"]), CFG, ToolReturned("c1", Outcome("ok", "shipped"), done)))
    assert isinstance(again, ToolFinished) and again.effect == "rerun"
    sim = _event(receive(_fork_state(c), CFG, ToolReturned("c1", Outcome("ok", "fake"), None, simulated=True)))
    assert isinstance(sim, ToolFinished) and sim.effect == "simulated"
    read = _running("r1", "lookup", q="x")
    assert _event(receive(_state(read), CFG, ToolReturned("r1", Outcome("ok", "x")))).effect is None  # type: ignore[attr-defined]


def test_a_forks_read_is_answered_from_its_parent_when_it_reuses_reads() -> None:
    read = _running("r1", "lookup", q="x")
    rs = _fork_state(read, reads="reuse")
    assert receive(rs, CFG, ParentRead("r1", None)) == Proceed()
    parent = ToolFinished(seq=4, ts=UNSTAMPED, run_id="run_p", turn=1, state=S.EXECUTING, call_id="p1",
                          name="lookup", status="ok", content="from the parent", value="v", duration_s=0.1)
    ev = _event(receive(rs, CFG, ParentRead("r1", parent)))
    assert isinstance(ev, ToolFinished) and ev.content == "from the parent" and ev.call_id == "r1"
    assert (ev.effect, ev.effect_run, ev.effect_call) == ("reused", "run_p", "p1")


def test_a_batch_duplicate_says_what_the_first_call_did() -> None:
    rs = _state(_running("c1", "ship", "k", order="o1"))
    ev = _event(receive(rs, CFG, DuplicateDone("c1", "c0", "shipped")))
    assert isinstance(ev, ToolFinished) and ev.duplicate_of == "c0" and "already done by call c0" in ev.content


# -- outcomes and the write-vs-read rule ----------------------------------------------------------------------


def test_an_outcome_is_cut_for_the_model_and_carries_its_ledger_outcome() -> None:
    cfg = EngineConfig(registry=CFG.registry, budget=anb.Budget(max_result_chars=10))
    rs = _state(_running("c1", "lookup", q="x"))
    emit = receive(rs, cfg, ToolReturned("c1", Outcome(status="ok", content="x" * 25)))
    assert isinstance(emit, Emit) and isinstance(emit.event, ToolFinished)
    ev = emit.event
    assert ev.truncated == 15 and ev.value == "x" * 25 and "15 more characters cut" in ev.content


@pytest.mark.parametrize(("tool", "stop", "kind", "text"), [
    ("lookup", ToolStopped("c1", "limit", True, limit_s=2.0, elapsed_s=2.1), "timeout", "did not finish within 2 s"),
    ("ship", ToolStopped("c1", "limit", True, limit_s=2.0, by_deadline=True), "unknown", "the run's deadline (2 s)"),
    ("lookup", ToolStopped("c1", "interrupted", True, raised=True), "error", "was interrupted (KeyboardInterrupt)"),
    ("ship", ToolStopped("c1", "interrupted", True), "unknown", "still running when the run was interrupted"),
    ("ship", ToolStopped("c1", "interrupted", False), "skipped", "interrupted before this call started"),
    ("ship", ToolStopped("c1", "cancelled", False, reason="x"), "skipped", "cancelled (x) before this call started"),
    ("lookup", ToolStopped("c1", "cancelled", False, reason="bye", queued=False), "skipped", "before this call ran"),
    # a call the cancelled run let go of while it ran (Tool.cancellable): a read is an error, a write unknown
    ("lookup", ToolStopped("c1", "cancelled", True, reason="bye", elapsed_s=1.5), "error",
     "was stopped while it ran: the run was cancelled (bye)"),
    ("ship", ToolStopped("c1", "cancelled", True, reason="bye"), "unknown",
     "still running when the run was cancelled (bye); it may still complete"),
])
def test_the_write_vs_read_rule(tool: str, stop: ToolStopped, kind: str, text: str) -> None:
    arguments = {"order": "o"} if tool == "ship" else {"q": "x"}
    rs = _state(_running("c1", tool, "k" if tool == "ship" else None, **arguments))
    ev = _event(receive(rs, CFG, stop))
    if kind == "unknown":
        assert isinstance(ev, ApprovalRequested) and ev.kind == "outcome_unknown" and text in (ev.note or "")
        assert ev.state is S.WAITING_APPROVAL
    else:
        assert isinstance(ev, ToolFinished) and ev.status == kind and text in ev.content


# -- a person's decision ---------------------------------------------------------------------------------------


def _waiting(call_id: str = "c1", name: str = "ship", kind: str = "approval", ttl: float | None = None,
             **arguments: object) -> RunState:
    arguments = arguments or {"order": "o1"}
    req = ApprovalRequested(seq=4, ts=datetime(2026, 1, 1, tzinfo=UTC), run_id="run_t", turn=1,
                            state=S.WAITING_APPROVAL, approval_id="apr", call_id=call_id, name=name,
                            arguments=dict(arguments), arguments_digest=arguments_digest(name, dict(arguments)),
                            risk="write", kind=kind, ttl_s=ttl)  # type: ignore[arg-type]
    c = CallState(part=_part(call_id, name, **arguments), status="awaiting_approval", arguments=dict(arguments),
                  approval_id="apr", kind=kind, request=req)
    return _state(c, state=S.WAITING_APPROVAL)


NOON = datetime(2026, 1, 1, 12, tzinfo=UTC)


def test_a_decision_is_checked_against_its_request() -> None:
    rs = _waiting(ttl=60.0)
    with pytest.raises(anb.ApprovalExpired):
        receive(rs, CFG, Decision("c1", "approved", NOON))
    denied = _event(receive(rs, CFG, Decision("c1", "denied", NOON, by="ana", note="late")))
    assert denied.decision == "denied" and denied.by == "ana" and denied.state is S.EXECUTING  # type: ignore[attr-defined]
    in_time = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
    with pytest.raises(anb.DigestMismatch, match="are not the ones waiting"):
        receive(rs, CFG, Decision("c1", "approved", in_time, digest="0" * 64))
    ok = _event(receive(rs, CFG, Decision("c1", "approved", in_time, digest=arguments_digest("ship", {"order": "o1"}))))
    assert ok.decision == "approved"  # type: ignore[attr-defined]
    with pytest.raises(anb.ApprovalError, match="no call 'c9' in this turn; calls waiting for approval: c1"):
        receive(rs, CFG, Decision("c9", "approved", in_time))
    with pytest.raises(anb.RunNotPaused):
        receive(_state(_running("c1", "ship")), CFG, Decision("c1", "approved", in_time))


def test_edited_arguments_fit_the_schema_before_anything_is_recorded() -> None:
    rs = _waiting()
    with pytest.raises(ValidationError):
        receive(rs, CFG, Decision("c1", "approved", NOON, arguments={"order": 5}))
    ev = _event(receive(rs, CFG, Decision("c1", "approved", NOON, arguments={"order": "o2"})))
    assert ev.arguments == {"order": "o2"}  # type: ignore[attr-defined]


def test_a_client_call_is_answered_with_a_result_not_approved() -> None:
    rs = _waiting(name="pick", kind="client_result", choice="a")
    with pytest.raises(anb.ApprovalError, match="submit_result"):
        receive(rs, CFG, Decision("c1", "approved", NOON))
    ev = _event(receive(rs, CFG, Decision("c1", "submitted", NOON, content='"b"', value="b")))
    assert ev.decision == "submitted" and ev.content == '"b"'  # type: ignore[attr-defined]


# -- compression, cancellation ------------------------------------------------------------------------------------


def test_a_summary_is_used_only_when_it_is_shorter() -> None:
    msgs = [Message.system("s"), Message.user("u " * 400), Message.assistant("a " * 400), Message.user("next")]
    rs = RunState(state=S.RESULTS_READY, messages=msgs)
    shorter = _event(receive(rs, CFG, Summary(10_000, [Message.user("short")], [1, 2])))
    assert shorter.tier == 1 and shorter.tokens_after < 10_000  # type: ignore[attr-defined]
    failed = _event(receive(rs, CFG, Summary(10_000, None, [])))  # the summarizer failed: tier 2 decides
    assert not isinstance(failed, CompressionApplied) or failed.tier == 2


def test_a_cancellation_ends_the_run() -> None:
    ev = _event(receive(_state(), CFG, Cancelled("bye")))
    assert isinstance(ev, RunFinished) and ev.final is S.CANCELLED and ev.reason == "bye"


def test_a_deadline_limit_is_the_engines_rule() -> None:
    from agentnb._engine import call_limit

    cfg = EngineConfig(registry=CFG.registry, budget=anb.Budget(deadline_s=30.0, tool_timeout=5.0))
    rs = RunState(started_at=1000.0)
    assert call_limit(rs, cfg, _running("c1", "lookup", q="x")) == (5.0, 1030.0)
    assert call_limit(RunState(), CFG, _running("c1", "lookup", q="x")) == (None, None)


def test_a_tools_ceiling_caps_every_timeout() -> None:
    import dataclasses

    from agentnb._engine import call_limit

    capped = dataclasses.replace(lookup, max_timeout=2.0)
    for tool_timeout, own, limit in [(None, None, 2.0), (5.0, None, 2.0), (1.0, None, 1.0), (None, 30.0, 2.0),
                                     (None, 0.5, 0.5)]:
        cfg = EngineConfig(registry=ToolRegistry([dataclasses.replace(capped, timeout=own)]),
                           budget=anb.Budget(tool_timeout=tool_timeout))
        assert call_limit(RunState(), cfg, _running("c1", "lookup", q="x")) == (limit, None), (tool_timeout, own)


def test_receive_writes_nothing() -> None:
    rs = _waiting()
    before = repr(rs)
    receive(rs, CFG, Decision("c1", "denied", NOON))
    receive(rs, CFG, ToolStopped("c1", "limit", True, limit_s=1.0))
    assert repr(rs) == before
