"""A person steps into a paused run: cancels one call with a reason the model reads, or ends the run with one.

Each is an event (a ``CallRejected`` of reason ``cancelled``, a ``RunFinished`` in ``CANCELLED``), stored and
resumed like the rest; a write that had started follows the outcome-unknown rules; headless runs refuse them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import agentnb as anb
from agentnb._debugger.cards import CARDS, CardContext
from agentnb._debugger.timeline import Timeline
from agentnb._states import LoopState as S
from agentnb.events import ApprovalRequested, CallRejected, RunFinished, ToolStarted
from agentnb.exceptions import AgentnbError
from agentnb.providers import WIRE_APIS

KEY = "cancel-call-test-key-1"
HERE = Path(__file__).parent
RAN: list[str] = []


@anb.tool(risk="write")
def refund(order_id: str, cents: int) -> str:
    """Refund an order (a person approves it)."""
    RAN.append(f"refund {order_id}")
    return f"refunded {cents}"


@anb.tool(risk="write", approval=False)
def notify(order_id: str) -> str:
    """Tell the customer (a write nobody approves)."""
    RAN.append(f"notify {order_id}")
    return "notified"


@anb.tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    RAN.append(f"lookup {order_id}")
    return f"order {order_id}: paid"


def reads(messages: Any) -> dict[str, Any]:
    """The model's last turn: says what each of its calls' results told it."""
    results = [r.content for m in messages if m.role == "tool" for r in m.tool_results]
    return {"text": "I read: " + " | ".join(results)}


def make_loop(store: Any = None, *calls: str, **options: Any) -> anb.Loop:
    args = {"refund": {"order_id": "42", "cents": 1999}, "notify": {"order_id": "42"}, "lookup": {"order_id": "42"}}
    turn = {"tool_calls": [{"name": n, "arguments": args[n]} for n in (calls or ("lookup", "refund"))]}
    return anb.Loop(model=anb.ScriptedModel([turn, reads]), tools=[refund, notify, lookup], store=store, **options)


def finish(run: anb.Run, mode: str) -> anb.Run:
    if mode == "run":
        return run.run()
    while run.step() is not None:
        pass
    return run


@pytest.mark.parametrize("mode", ["step", "run"])
def test_a_waiting_call_cancelled_with_a_reason_is_what_the_model_reads(mode: str) -> None:
    RAN.clear()
    run = make_loop().start("refund order 42").run()
    assert run.paused and [c.name for c in run.pending_approvals()] == ["refund"]
    call = run.pending_approvals()[0].call_id
    ev = run.cancel_call(call, "the customer asked for store credit instead", by="ana")
    assert isinstance(ev, CallRejected) and ev.reason == "cancelled" and ev.state is S.EXECUTING
    finish(run, mode)
    assert run.state is S.COMPLETED and RAN == ["lookup 42"]  # the refund never ran
    assert run.output == "I read: order 42: paid | Cancelled by ana: the customer asked for store credit instead"
    calls = run.transcript.frames.calls().set_index("call_id")
    assert calls.loc[call, "status"] == "skipped" and calls.loc[call, "reject_reason"] == "cancelled"


def test_the_approval_card_of_a_cancelled_call_says_it_was_never_decided_not_waiting() -> None:
    run = make_loop().start("refund order 42").run()
    call = run.pending_approvals()[0].call_id
    asked = next(e for e in run.events if isinstance(e, ApprovalRequested))
    waiting = CARDS[ApprovalRequested].body(asked, CardContext(Timeline(run.events)))
    assert "waiting" in waiting
    run.cancel_call(call, "store credit instead", by="ana")
    run.run()
    card = CARDS[ApprovalRequested].body(asked, CardContext(Timeline(run.events)))
    assert "never decided: the call was skipped" in card and "waiting" not in card


@pytest.mark.parametrize("mode", ["step", "run"])
def test_a_queued_call_is_cancelled_while_another_waits(mode: str) -> None:
    RAN.clear()
    loop = make_loop(None, "refund", "refund")
    run = loop.start("two refunds").run()
    first, second = (c.call_id for c in run.pending_approvals())
    run.approve(first, by="ana")  # queued: it runs once every waiting call is answered
    assert run.paused and run.view.calls[first].status == "approved"
    ev = run.cancel_call(first, "approved by mistake", by="ana")
    assert ev.state is S.WAITING_APPROVAL and run.paused  # the second still waits
    run.deny(second, "not needed", by="ana")
    finish(run, mode)
    assert RAN == [] and run.output == "I read: Cancelled by ana: approved by mistake | Denied by the user: not needed"


@pytest.mark.parametrize("mode", ["step", "run"])
def test_a_started_read_is_cancelled_before_it_runs_and_a_started_write_follows_the_outcome_unknown_rules(
        mode: str) -> None:
    RAN.clear()
    run = make_loop(None, "lookup", "notify").start("look and notify")
    started = run.run_until(lambda e: isinstance(e, ToolStarted))  # paused between steps, the read started
    assert isinstance(started, ToolStarted) and started.name == "lookup"
    run.cancel_call(started.call_id, "not needed")
    nxt = run.run_until(lambda e: isinstance(e, ToolStarted))
    assert isinstance(nxt, ToolStarted) and nxt.name == "notify"
    asked = run.cancel_call(nxt.call_id, "wrong customer", by="ben")
    # a write that started may have happened (a resumed run's call may have been claimed): a person reconciles
    assert isinstance(asked, ApprovalRequested) and asked.kind == "outcome_unknown" and run.paused
    assert "wrong customer" in (asked.note or "")
    run.deny(nxt.call_id, "cancelled: wrong customer", by="ben")
    finish(run, mode)
    assert RAN == [] and run.state is S.COMPLETED
    assert run.output == "I read: Cancelled by the user: not needed | Denied by the user: cancelled: wrong customer"


def test_cancelling_a_call_whose_outcome_is_unknown_tells_the_model_so() -> None:
    run = make_loop(None, "lookup", "notify").start("look and notify")
    started = run.run_until(lambda e: isinstance(e, ToolStarted) and e.name == "notify")
    assert started is not None
    run.cancel_call(started.call_id, "stop")  # outcome unknown now
    run.cancel_call(started.call_id, "stop it", by="ana")  # cancelling the reconciliation itself
    run.run()
    assert run.output.endswith("Cancelled by ana: stop it (It had started before: whether it happened is unknown.)")


@pytest.mark.parametrize("mode", ["step", "run"])
def test_ending_a_paused_run_with_a_reason(mode: str) -> None:
    RAN.clear()
    run = make_loop(None, "lookup", "notify").start("look and notify")
    run.run_until(lambda e: e.type == "ToolFinished")  # the read is done, the write started
    assert {c.name: c.status for c in run.view.calls.values()} == {"lookup": "done", "notify": "running"}
    ev = run.end("the customer closed the ticket", by="ana")
    assert isinstance(ev, RunFinished) and run.state is S.CANCELLED
    assert run.reason == "ended by ana: the customer closed the ticket"
    assert finish(run, mode).state is S.CANCELLED and RAN == ["lookup 42"]
    status = run.transcript.frames.calls().set_index("tool")["status"]
    assert status["lookup"] == "ok" and status["notify"] == "skipped"  # a started call is never left unanswered


def test_a_cancellation_and_an_end_are_stored_and_resumed_in_another_process(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    for n in (1, 2):
        make_loop(anb.SqliteStore(db, key=KEY)).start("refund order 42", run_id=f"r{n}").run()
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]); import agentnb as anb; "
        "from tests.test_cancel_call import KEY, make_loop; "
        "loop = make_loop(anb.SqliteStore(sys.argv[1], key=KEY)); "
        "run = anb.Run.resume('r1', loop=loop); "
        "run.cancel_call(run.pending_approvals()[0].call_id, 'store credit instead', by='ana'); run.release(); "
        "anb.Run.resume('r2', loop=loop).end('duplicate ticket', by='ben')"
    )
    done = subprocess.run([sys.executable, "-c", code, str(db), str(HERE.parent)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    loop = make_loop(anb.SqliteStore(db, key=KEY))
    one = anb.Run.resume("r1", loop=loop).run()
    assert one.state is S.COMPLETED and one.output == "I read: order 42: paid | Cancelled by ana: store credit instead"
    two = anb.Run.resume("r2", loop=loop)
    assert two.state is S.CANCELLED and two.reason == "ended by ben: duplicate ticket"
    assert anb.Inbox(anb.SqliteStore(db, key=KEY)).items() == []


def test_every_wire_api_renders_a_conversation_with_a_cancelled_call_validly() -> None:
    run = make_loop(None, "lookup", "refund", "refund").start("refunds").run()
    waiting = [c.call_id for c in run.pending_approvals()]
    run.approve(waiting[0])
    run.cancel_call(waiting[0], "no")
    run.cancel_call(waiting[1], "no")
    run.run()
    assert run.state is S.COMPLETED
    for name, api in WIRE_APIS.items():
        body = api.render_request(run.messages[:-1])  # the conversation the last request sent
        errors = [f for f in anb.lint(body, name) if f.severity == "error"]
        assert errors == [], (name, errors)


@pytest.mark.parametrize(("setup", "act", "message"), [
    ("new", "cancel", "NEW"),
    ("done", "end", "COMPLETED"),
    ("headless", "cancel", "headless"),
    ("headless", "end", "headless"),
    ("paused", "blank", "needs a reason"),
    ("paused", "unknown", "not a call of this turn"),
    ("paused", "answered", "has its result already"),
    ("responded", "cancel", "step once"),
])
def test_a_cancellation_nobody_may_make_is_refused_and_records_nothing(setup: str, act: str, message: str) -> None:
    if setup == "done":
        run = anb.Loop(model=anb.ScriptedModel([{"text": "ok"}])).start("x").run()
    elif setup == "headless":
        run = make_loop(None, headless=True).start("x")
        run.step()
    elif setup == "responded":
        run = make_loop().start("x")
        run.run_until(lambda e: e.type == "TurnCompleted")
    else:
        run = make_loop().start("x")
        if setup == "paused":
            run.run()
    call = next(iter(run.view.calls), "none")
    answered = next((c.call_id for c in run.view.calls.values() if c.status == "done"), "none")
    before = len(run.events)
    with pytest.raises(AgentnbError, match=message):
        if act == "end":
            run.end("bye", by="ana")
        else:
            run.cancel_call({"unknown": "call_x", "answered": answered}.get(act, call), " " if act == "blank" else "no")
    assert len(run.events) == before and not run.done or setup == "done"


def test_a_cancellation_is_in_the_audit_trail_with_who_and_when_and_older_logs_still_load(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "audit.db", key=KEY)
    run = make_loop(store, "refund", "refund").start("two refunds", run_id="audit").run()
    first, second = (c.call_id for c in run.pending_approvals())
    run.approve(first, by="ana")  # queued behind the second: its cancellation is a row of its own
    run.cancel_call(first, "approved by mistake", by="ana")
    ev = run.cancel_call(second, "not needed", by="ben")  # it waited: the cancellation resolves its request
    run.run()
    assert isinstance(ev, CallRejected) and ev.by == "ben"
    card = CARDS[CallRejected].body(ev, CardContext(Timeline(run.events)))
    assert "cancelled by" in card and "<b>ben</b>" in card
    for table in (run.transcript.frames.approvals(), anb.Inbox(store).decisions()):
        rows = table.set_index(["call_id", "decision"])
        ben = rows.loc[(second, "cancelled")]
        assert ben["decided_by"] == "ben" and ben["note"] == "Cancelled by ben: not needed"
        assert ben["ts_decided"] == ev.ts and ben["wait_s"] >= 0 and ben["approval_id"] is not None
        assert rows.loc[(first, "approved"), "decided_by"] == "ana"
        ana = rows.loc[(first, "cancelled")]
        assert ana["decided_by"] == "ana" and pd.isna(ana["approval_id"]) and pd.isna(ana["wait_s"])
        assert len(table) == 3
    assert run.transcript.frames.calls().set_index("call_id").loc[second, "cancelled_by"] == "ben"
    path = tmp_path / "old.jsonl"
    run.transcript.save(path)
    text = path.read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines()]
    for line in lines:  # a log written before `by` was recorded
        if line["type"] == "CallRejected":
            del line["by"]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    again = anb.Transcript.load(path)
    rejected = [e for e in again.events if isinstance(e, CallRejected)]
    assert [e.by for e in rejected] == [None, None] and again.state is S.COMPLETED
    assert again.frames.approvals()["decided_by"].fillna("-").tolist() == ["ana", "-", "-"]
