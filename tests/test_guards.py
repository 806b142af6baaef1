"""Budgets, repetition and stall detection, the result size cap, parallel execution, compression."""

from __future__ import annotations

import threading
import time
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._engine.guards import Budget, estimate_tokens, prune, repetition, signature

S = anb.LoopState


@anb.tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}"


def calls(*names_args: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in names_args]}


def loop_of(script: list[Any], budget: Budget, tools: list[Any] | None = None, **options: Any) -> anb.Loop:
    return anb.Loop(model=anb.ScriptedModel(script), tools=tools or [lookup], budget=budget, retry_base_delay=0,
                    **options)


def distinct(n: int) -> list[Any]:
    return [calls(("lookup", {"q": f"q{i}"})) for i in range(n)]


@pytest.mark.parametrize(
    ("budget", "guard"),
    [
        (Budget(max_tool_calls=3, max_no_progress=None), "max_tool_calls"),
        (Budget(max_input_tokens=40, max_no_progress=None), "max_input_tokens"),
        (Budget(max_output_tokens=30, max_no_progress=None), "max_output_tokens"),
        (Budget(max_total_tokens=60, max_no_progress=None), "max_total_tokens"),
        (Budget(max_cost=0.0001, prices={"scripted": (1.0, 2.0)}, max_no_progress=None), "max_cost"),
    ],
)
def test_each_budget_trips_and_stops(budget: Budget, guard: str) -> None:
    from dataclasses import replace

    run = loop_of(distinct(30) + [{"text": "done"}], replace(budget, on_exhausted="stop")).start("go").run()
    trip = next(e for e in run.events if e.type == "GuardTripped")
    assert trip.guard == guard and trip.value >= trip.limit and trip.action == "stop"
    assert run.state is S.BUDGET_EXHAUSTED and guard in (run.reason or "")
    answered = [r.call_id for m in run.messages for r in m.tool_results]
    assert len(answered) == len({c.call_id for m in run.messages for c in m.tool_calls})  # nothing left unanswered


def test_budget_finalize_asks_for_an_answer_without_tools() -> None:
    script = [*distinct(2), lambda m: {"text": "answer from what I have"}]
    run = loop_of(script, Budget(max_tool_calls=2, max_no_progress=None)).start("go").run()
    assert run.state is S.COMPLETED and run.output == "answer from what I have"
    final = [e for e in run.events if e.type == "ModelRequested"][-1]
    assert final.finalize and final.tools == []


def test_deadline_uses_the_clock_the_driver_hands_in() -> None:
    @anb.tool
    def slow(q: str) -> str:
        """Slow."""
        time.sleep(0.06)
        return q + "!"

    script = [calls(("slow", {"q": f"{i}"})) for i in range(10)] + [{"text": "late"}]
    run = loop_of(script, Budget(deadline_s=0.1, on_exhausted="stop", max_no_progress=None), [slow]).start("go").run()
    trip = next(e for e in run.events if e.type == "GuardTripped")
    assert trip.guard == "deadline_s" and trip.value >= 0.1 and run.state is S.BUDGET_EXHAUSTED


def test_escalation_pauses_and_approving_grants_one_more_allowance() -> None:
    script = [*distinct(6), {"text": "done"}]
    run = loop_of(script, Budget(max_turns=2, on_exhausted="escalate", max_no_progress=None)).start("go").run()
    assert run.state is S.WAITING_APPROVAL
    (pending,) = run.pending_approvals()
    assert pending.call_id == "guard:max_turns" and pending.kind == "escalation"
    run.approve(pending.call_id, by="lead")
    run.run()
    assert run.state is S.WAITING_APPROVAL and run.view.turns_completed == 4  # two more turns, then ask again
    run.deny(run.pending_approvals()[0].call_id, reason="enough")
    run.run()
    assert run.state is S.BUDGET_EXHAUSTED or run.state is S.COMPLETED
    assert [e.finalize for e in run.events if e.type == "ModelRequested"][-1]


def test_headless_escalation_finalizes() -> None:
    script = [*distinct(2), {"text": "final"}]
    run = loop_of(script, Budget(max_turns=2, on_exhausted="escalate", max_no_progress=None), headless=True)
    assert run.start("go").run().output == "final"


def test_repetition_ends_in_no_progress_with_a_structured_reason() -> None:
    same = calls(("lookup", {"q": "x"}))
    run = loop_of([same] * 10, Budget()).start("go").run()
    assert run.state is S.NO_PROGRESS
    trip = next(e for e in run.events if e.type == "GuardTripped")
    assert (trip.guard, trip.limit, trip.action) == ("repetition", 3, "stop")
    assert "lookup" in trip.message and "3 times with the same result" in (run.reason or "")
    assert run.view.turns_completed == 3


def test_key_order_whitespace_and_number_format_do_not_hide_a_repeat() -> None:
    variants = ['{"q": "x", "n": 1}', '{"n":1.0,"q":"x"}', '{ "q" : "x" , "n" : 1 }']

    @anb.tool
    def find(q: str, n: float) -> str:
        """Find."""
        return "nothing"

    script = [{"tool_calls": [{"name": "find", "arguments": v}]} for v in variants] + [{"text": "?"}]
    run = loop_of(script, Budget()).start("go").run()
    assert run.state is S.NO_PROGRESS


def test_ping_pong_counts_as_repetition() -> None:
    a, b = calls(("lookup", {"q": "a"})), calls(("lookup", {"q": "b"}))
    run = loop_of([a, b] * 6, Budget()).start("go").run()
    trip = next(e for e in run.events if e.type == "GuardTripped")
    assert trip.guard == "repetition" and "the same two calls in turn" in trip.message


def test_same_call_with_new_results_is_not_a_loop() -> None:
    counter = iter(range(100))

    @anb.tool
    def poll(job: str) -> str:
        """Poll a job."""
        return f"progress {next(counter)}"

    script = [calls(("poll", {"job": "j"}))] * 5 + [{"text": "done"}]
    run = loop_of(script, Budget(), [poll]).start("go").run()
    assert run.state is S.COMPLETED


def test_note_policy_tells_the_model_once_then_stops() -> None:
    same = calls(("lookup", {"q": "x"}))
    seen: list[str] = []

    def watch(messages: Any) -> dict[str, Any]:
        seen.append(messages[-1].text)
        return same

    run = loop_of([same, same, same, watch, same, same, same], Budget(on_repeat="note")).start("go").run()
    assert any("Note from the loop" in t for t in seen)
    assert run.state is S.NO_PROGRESS
    actions = [e.action for e in run.events if e.type == "GuardTripped"]
    assert actions == ["note", "stop"]


def test_no_progress_counter() -> None:
    @anb.tool
    def ping(n: int) -> str:
        """Ping."""
        return "pong"

    script = [calls(("ping", {"n": i})) for i in range(10)]
    run = loop_of(script, Budget(max_no_progress=3)).start("go").run()
    trip = next(e for e in run.events if e.type == "GuardTripped")
    assert trip.guard == "no_progress" and run.state is S.NO_PROGRESS


def test_repetition_helpers() -> None:
    assert signature("f", {"a": 1, "b": 2.0}, "") == signature("f", {"b": 2, "a": 1.0}, "")
    assert repetition([("a", "1")] * 3, 3) == (1, ["a"])
    assert repetition([("a", "1"), ("a", "1")], 3) is None


def test_result_size_cap_keeps_the_whole_value_for_audit() -> None:
    @anb.tool
    def dump() -> str:
        """A big result."""
        return "x" * 5000

    run = loop_of([calls(("dump", {})), {"text": "ok"}], Budget(max_result_chars=1000), [dump]).start("go").run()
    fin = next(e for e in run.events if e.type == "ToolFinished")
    assert fin.truncated == 4000 and len(fin.value) == 5000
    result = run.messages[2].tool_results[0]
    assert result.content.startswith("x" * 1000) and "4,000 more characters cut" in result.content
    assert result.audit == "x" * 5000


def test_parallel_calls_run_together_and_come_back_in_order() -> None:
    barrier = threading.Barrier(3, timeout=5)

    @anb.tool
    def wait_for_others(i: int) -> int:
        """Only returns once three calls run at the same time."""
        barrier.wait()
        return i

    script = [calls(*[("wait_for_others", {"i": i}) for i in (3, 1, 2)]), {"text": "ok"}]
    run = loop_of(script, Budget(max_parallel=3), [wait_for_others]).start("go").run()
    assert run.state is S.COMPLETED
    assert [r.content for r in run.messages[2].tool_results] == ["3", "1", "2"]
    starts = [e.seq for e in run.events if e.type == "ToolStarted"]
    finishes = [e.seq for e in run.events if e.type == "ToolFinished"]
    assert max(starts) < min(finishes)  # all started before any finished


def test_stepping_still_takes_one_call_at_a_time() -> None:
    script = [calls(*[("lookup", {"q": str(i)}) for i in range(3)]), {"text": "ok"}]
    run = loop_of(script, Budget(max_parallel=3)).start("go")
    finished = []
    while (ev := run.step()) is not None:
        if ev.type == "ToolFinished":
            finished.append(ev.call_id)
    assert len(finished) == 3 and run.state is S.COMPLETED


def _long_history(pairs: int) -> list[Any]:
    return [calls(("lookup", {"q": f"{i}" * 50})) for i in range(pairs)] + [{"text": "done"}]


def test_prune_keeps_complete_pairs_and_never_orphans() -> None:
    run = anb.Loop(model=anb.ScriptedModel(_long_history(6)), tools=[lookup], system="sys").start("go").run()
    kept, removed = prune(run.messages, 2)
    assert [m.role for m in kept][:2] == ["system", "user"] and removed
    ids = {c.call_id for m in kept for c in m.tool_calls}
    assert ids == {r.call_id for m in kept for r in m.tool_results} and len(ids) == 2


def test_tier2_compression_prunes_and_the_run_goes_on() -> None:
    budget = Budget(context_window=300, compress_at=0.5, keep_pairs=1, max_no_progress=None)
    run = loop_of(_long_history(8), budget).start("go").run()
    comps = [e for e in run.events if e.type == "CompressionApplied"]
    assert comps and all(c.tier == 2 and c.tokens_after < c.tokens_before for c in comps)
    assert run.state is S.COMPLETED
    for ev in comps:
        ids = {c.call_id for m in ev.messages for c in m.tool_calls}
        assert ids == {r.call_id for m in ev.messages for r in m.tool_results}  # no orphan, no unanswered call


def test_tier1_summarizer_and_its_failure() -> None:
    budget = Budget(context_window=300, compress_at=0.5, keep_pairs=1, max_no_progress=None)
    run = loop_of(_long_history(8), budget, summarizer=lambda msgs: "looked up 0..n").start("go").run()
    comps = [e for e in run.events if e.type == "CompressionApplied"]
    assert comps[0].tier == 1 and "looked up 0..n" in comps[0].messages[0].text

    def broken(msgs: Any) -> str:
        raise RuntimeError("summarizer down")

    run2 = loop_of(_long_history(8), budget, summarizer=broken).start("go").run()
    assert [e.tier for e in run2.events if e.type == "CompressionApplied"][0] == 2


def test_tier1_with_a_model_as_summarizer() -> None:
    summarizer = anb.ScriptedModel([{"text": "summary by a model"}] * 20)
    budget = Budget(context_window=300, compress_at=0.5, keep_pairs=1, max_no_progress=None)
    run = loop_of(_long_history(8), budget, summarizer=summarizer).start("go").run()
    first = next(e for e in run.events if e.type == "CompressionApplied")
    assert first.tier == 1 and "summary by a model" in first.messages[0].text


def test_tier3_finalizes_when_nothing_more_can_go() -> None:
    big = "y" * 4000
    budget = Budget(context_window=200, compress_at=0.5, max_no_progress=None)
    run = loop_of([{"text": "final answer"}], budget).start(big).run()
    trip = next(e for e in run.events if e.type == "GuardTripped")
    assert trip.guard == "context_window" and trip.action == "finalize" and run.output == "final answer"


def test_estimate_counts_arguments_results_and_schemas() -> None:
    run = anb.Loop(model=anb.ScriptedModel(_long_history(2)), tools=[lookup]).start("go").run()
    text_only = estimate_tokens([anb.Message.user("go")])
    assert estimate_tokens(run.messages) > text_only
    assert estimate_tokens(run.messages, run.view.tools) > estimate_tokens(run.messages)


def test_budget_validation() -> None:
    with pytest.raises(ValueError, match="on_exhausted"):
        Budget(on_exhausted="explode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inside the Budget"):
        anb.Loop(model=anb.ScriptedModel([]), budget=Budget(), max_turns=3)


def test_compression_before_tools_prunes_then_skips_the_rest_of_the_turn() -> None:
    @anb.tool
    def store(text: str) -> str:
        """Store a document."""
        return "stored"

    history = [calls(("lookup", {"q": f"q{i}"})) for i in range(3)]
    huge = calls(*[("store", {"text": f"{i}" * 1500}) for i in range(3)])  # the model sends bulky arguments
    script = [*history, huge, {"text": "answer"}]
    budget = Budget(context_window=800, compress_at=0.8, keep_pairs=1, max_no_progress=None)
    run = loop_of(script, budget, [lookup, store]).start("go").run()
    kinds = [(e.type, e.state.value) for e in run.events]
    assert ("CompressionApplied", "VALIDATING") in kinds  # pruned before the tools ran
    skipped = [e for e in run.events if e.type == "CallRejected" and e.reason == "skipped"]
    assert len(skipped) == 3 and "over 80% of the model's window" in skipped[0].message
    assert not any(e.type == "ToolStarted" and e.name == "store" for e in run.events)
    ids = {c.call_id for m in run.messages for c in m.tool_calls}
    assert ids == {r.call_id for m in run.messages for r in m.tool_results}  # every call answered once
    assert {r.status for m in run.messages for r in m.tool_results if r.name == "store"} == {"skipped"}
    assert [e.finalize for e in run.events if e.type == "ModelRequested"][-1] and run.output == "answer"


# -- every request counts: output corrections, paused turns and finalizations go through the budget -----------


class Invoice(pydantic.BaseModel):
    number: str
    total_cents: int = pydantic.Field(ge=0)


WRONG = {"text": "Sure! The invoice is INV-7. " * 20}  # never JSON: every answer owes a correction
USAGE = {"input_tokens": 300, "output_tokens": 200}


def requests(run: anb.Run) -> list[Any]:
    return [e for e in run.events if e.type == "ModelRequested"]


def test_output_corrections_stop_at_the_token_budget() -> None:
    """The scenario of the issue: corrections owed forever, a small budget; the budget ends the run."""
    loop = anb.Loop(model=anb.ScriptedModel([WRONG] * 200), output_type=Invoice, output_retries=100,
                    budget=Budget(max_turns=5, max_total_tokens=2000))
    run = loop.start("bill").run()
    trip = next(e for e in run.events if e.type == "GuardTripped")
    assert trip.guard == "max_total_tokens" and trip.action == "finalize"
    assert run.state is S.BUDGET_EXHAUSTED and "max_total_tokens" in (run.reason or "")
    assert "did not fit the output type" in (run.reason or "")
    sent = requests(run)
    assert len(sent) <= 5 + 1 and sent[-1].finalize and not any(e.finalize for e in sent[:-1])
    assert "does not match the required output schema" in sent[-1].new_messages[0].text  # the correction goes too


@pytest.mark.parametrize("on_exhausted", ["finalize", "stop", "escalate"])
def test_output_corrections_count_against_every_budget_policy(on_exhausted: Any) -> None:
    script = [{**WRONG, "usage": USAGE}] * 50
    budget = Budget(max_turns=20, max_total_tokens=2000, on_exhausted=on_exhausted)
    run = loop_of(script, budget, [], output_type=Invoice, output_retries=100).start("bill").run()
    assert [e.guard for e in run.events if e.type == "GuardTripped"] == ["max_total_tokens"]
    regular = [e for e in requests(run) if not e.finalize]
    assert len(regular) == 4  # 4 x 500 tokens reach 2000: the fifth request is not made
    if on_exhausted == "escalate":
        assert run.state is S.WAITING_APPROVAL
        run.approve(run.pending_approvals()[0].call_id)  # one more allowance: 2000 more tokens, 4 more turns
        run.run()
        assert len([e for e in requests(run) if not e.finalize]) == 8 and run.state is S.WAITING_APPROVAL
        run.deny(run.pending_approvals()[0].call_id, "enough")
        run.run()
    assert run.state is S.BUDGET_EXHAUSTED and "max_total_tokens" in (run.reason or "")
    assert [e.finalize for e in requests(run)].count(True) == (0 if on_exhausted == "stop" else 1)


def test_output_corrections_stop_at_the_turn_limit_and_the_finalization_can_still_answer() -> None:
    good = {"text": '{"number": "INV-7", "total_cents": 1999}'}
    run = loop_of([WRONG] * 3 + [good], Budget(max_turns=3), [], output_type=Invoice,
                  output_retries=100).start("bill").run()
    assert [e.guard for e in run.events if e.type == "GuardTripped"] == ["max_turns"]
    assert [e.finalize for e in requests(run)] == [False, False, False, True]
    assert run.state is S.COMPLETED and run.output == Invoice(number="INV-7", total_cents=1999)


def test_an_output_correction_is_checked_against_the_deadline() -> None:
    from agentnb._engine import Emit, RunState, decide
    from agentnb.events import GuardTripped

    loop = loop_of([WRONG] * 3, Budget(deadline_s=60), [], output_type=Invoice, output_retries=5)
    run = loop.start("bill")
    run.run_until(lambda e: e.type == "OutputValidated")
    rs = RunState.fold(run.events)
    assert rs.output_note is not None and rs.state is S.RESULTS_READY  # a correction is owed
    action = decide(rs, loop.config, (rs.started_at or 0) + 61)
    assert isinstance(action, Emit) and isinstance(action.event, GuardTripped)
    assert action.event.guard == "deadline_s"


def test_a_guard_s_note_is_checked_against_the_budget_too() -> None:
    from agentnb._engine import Emit, RunState, decide
    from agentnb.events import GuardTripped

    same = calls(("lookup", {"q": "x"}))
    loop = loop_of([same] * 6, Budget(on_repeat="note", deadline_s=60))
    run = loop.start("go")
    run.run_until(lambda e: e.type == "GuardTripped")
    rs = RunState.fold(run.events)
    assert rs.tripped == {"repetition": "note"}  # the note is owed to the next request
    action = decide(rs, loop.config, (rs.started_at or 0) + 61)
    assert isinstance(action, Emit) and isinstance(action.event, GuardTripped) and action.event.guard == "deadline_s"


_answer = st.one_of(
    st.just(WRONG),
    st.just({"text": '{"number": "INV-7", "total_cents": -5}'}),  # JSON that does not fit
    st.just({"text": "", "tool_calls": [{"name": "final_result", "arguments": {"number": "INV-7"}}]}),
    st.just({"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]}),
)
_invalid = st.builds(lambda a, i, o: {**a, "usage": {"input_tokens": i, "output_tokens": o}},
                     _answer, st.integers(0, 400), st.integers(0, 400))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(_invalid, min_size=1, max_size=12), max_turns=st.integers(1, 8),
       max_total=st.one_of(st.none(), st.integers(1, 3000)), retries=st.integers(0, 30),
       on_exhausted=st.sampled_from(["finalize", "stop"]))
def test_invalid_answers_never_outrun_the_budget(script: list[dict[str, Any]], max_turns: int, max_total: int | None,
                                                 retries: int, on_exhausted: Any) -> None:
    """At most max_turns requests (+1 finalization), each made with tokens left: one turn's usage over, at most."""
    budget = Budget(max_turns=max_turns, max_total_tokens=max_total, on_exhausted=on_exhausted,
                    max_no_progress=None, max_repeats=100)
    run = loop_of(script * (60 // len(script) + 1), budget, output_type=Invoice, output_retries=retries,
                  max_retries=0).start("bill").run()
    assert run.done
    sent = requests(run)
    used = [e.response.usage.total_tokens for e in run.events if e.type == "TurnCompleted"]
    finals = [e for e in sent if e.finalize]
    assert len(sent) - len(finals) <= max_turns
    assert len(finals) <= (1 if on_exhausted == "finalize" else 0) and (not finals or finals[0] is sent[-1])
    if max_total is not None:
        regular = used[:len(sent) - len(finals)]
        for i in range(len(regular)):
            assert sum(regular[:i]) < max_total, f"request {i + 1} was made with the token budget spent"
        assert sum(regular) < max_total + max(regular, default=0)  # over by less than one turn (finalization aside)
    if any(e.type == "GuardTripped" for e in run.events):
        assert run.state in (S.BUDGET_EXHAUSTED, S.COMPLETED)
