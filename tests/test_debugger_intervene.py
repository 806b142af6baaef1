"""Stepping into a paused run from the debugger, without a browser: the page's box calls the same methods.

A message the model reads on its next request, a queued call cancelled, the run ended -- each with the
debugger's ``by`` -- and every refusal (headless, finished, blank, answered, still going) is a message in the
view's ``intervene`` trait, never a traceback, and appends nothing.
"""

from __future__ import annotations

import getpass
import threading
from typing import Any

import pytest

import agentnb as anb
from agentnb._states import LoopState as S
from agentnb.events import CallRejected, Interjected, ModelRequested, RunFinished

from .test_cancel_call import RAN, make_loop
from .test_debugger import click


def step_in(dbg: anb.Debugger, what: str, **args: Any) -> dict[str, Any]:
    click(dbg, "intervene", what=what, **args)
    return dict(dbg.view.intervene)


def test_a_message_typed_in_the_box_is_read_by_the_models_next_request() -> None:
    dbg = anb.Debugger(make_loop().start("refund order 42"), by="ana").cont()
    assert dbg.state is S.WAITING_APPROVAL
    box = dbg.view.intervene
    assert box["by"] == "ana" and box["why"] == "" and [c["name"] for c in box["calls"]] == ["refund"]
    got = step_in(dbg, "interject", text="refund only half, the customer kept one item")
    ev = dbg.events[-1]
    assert isinstance(ev, Interjected) and ev.by == "ana" and got["error"] == ""
    assert got["said"] == f"ana told the model (event {ev.seq})"
    assert dbg.selected == ev.seq and "refund only half" in dbg.view.detail  # its card shows at once
    click(dbg, "approve", call_id=dbg.pending()[0])
    dbg.wait()
    assert dbg.state is S.COMPLETED
    request = [e for e in dbg.events if isinstance(e, ModelRequested)][-1]
    assert [m.text for m in request.new_messages] == ["refund only half, the customer kept one item"]
    resolved = next(e for e in dbg.events if e.type == "ApprovalResolved")
    assert resolved.by == "ana"  # type: ignore[attr-defined]  # the page's approvals are the same person's


def test_a_queued_call_is_cancelled_and_the_run_ended_from_the_box() -> None:
    RAN.clear()
    dbg = anb.Debugger(make_loop(None, "refund", "refund").start("two refunds"), by="ben").cont()
    first, second = dbg.pending()
    dbg.run.approve(first, by="ben")  # type: ignore[union-attr]  # queued behind the second
    dbg.refresh()
    assert {c["call_id"]: c["status"] for c in dbg.view.intervene["calls"]} == {first: "approved",
                                                                               second: "awaiting approval"}
    got = step_in(dbg, "cancel_call", call_id=first, reason="approved by mistake")
    ev = dbg.events[-1]
    assert isinstance(ev, CallRejected) and ev.by == "ben" and ev.message == "Cancelled by ben: approved by mistake"
    assert [c["call_id"] for c in got["calls"]] == [second] and "cancelled" in dbg.view.detail.lower()
    got = step_in(dbg, "end", reason="a duplicate ticket")
    end = dbg.events[-1]
    assert isinstance(end, RunFinished) and dbg.state is S.CANCELLED and RAN == []
    assert dbg.run.reason == "ended by ben: a duplicate ticket"  # type: ignore[union-attr]
    assert got["why"] == "the run is over (CANCELLED)" and got["calls"] == []


@pytest.mark.parametrize(("setup", "what", "args", "message"), [
    ("paused", "interject", {"text": "   "}, "needs some text"),
    ("paused", "end", {"reason": ""}, "end needs a reason"),
    ("paused", "cancel_call", {"call_id": "nope", "reason": "x"}, "not a call of this turn"),
    ("answered", "cancel_call", {"reason": "too late"}, "has its result already"),
    ("done", "end", {"reason": "x"}, "the run is COMPLETED"),
    ("done", "interject", {"text": "hi"}, "COMPLETED"),
    ("headless", "interject", {"text": "hi"}, "headless"),
    ("replay", "end", {"reason": "x"}, "read-only"),
    ("paused", "nonsense", {}, "no such control"),
])
def test_a_refusal_is_a_message_on_the_page_and_records_nothing(setup: str, what: str, args: dict[str, Any],
                                                                 message: str) -> None:
    if setup == "headless":
        run = make_loop(None, headless=True).start("x")
        run.step()
        dbg = anb.Debugger(run, by="ana")
    elif setup == "done":
        dbg = anb.Debugger(anb.Loop(model=anb.ScriptedModel([{"text": "ok"}])).start("x"), by="ana").cont()
    elif setup == "replay":
        dbg = anb.Debugger(anb.Loop(model=anb.ScriptedModel([{"text": "ok"}])).start("x").run().transcript)
    else:
        dbg = anb.Debugger(make_loop().start("refund order 42"), by="ana").cont()
    if setup == "answered":  # the lookup ran before the pause: the box's list, if stale, still names it
        args = {**args, "call_id": next(e.call_id for e in dbg.events if e.type == "ToolFinished")}  # type: ignore[attr-defined]
    before = len(dbg.events)
    click(dbg, "intervene", what=what, **args)  # no exception reaches the notebook
    assert message in dbg.view.intervene.get("error", dbg.intervene_error), dbg.intervene_error
    assert len(dbg.events) == before


def test_a_debugger_that_is_continuing_refuses_until_paused() -> None:
    started, go = threading.Event(), threading.Event()

    @anb.tool
    def slow(order_id: str) -> str:
        """Look an order up, slowly."""
        started.set()
        go.wait(30)
        return "paid"

    model = anb.ScriptedModel([{"tool_calls": [{"name": "slow", "arguments": {"order_id": "1"}}]}, {"text": "ok"}])
    dbg = anb.Debugger(anb.Loop(model=model, tools=[slow]).start("x"), by="ana").cont(background=True)
    try:
        assert started.wait(30)
        dbg.refresh()
        assert dbg.view.intervene["why"] == "the run is going: press Pause first"
        before = len(dbg.events)
        click(dbg, "intervene", what="interject", text="hi")
        assert "press Pause first" in dbg.view.intervene["error"] and len(dbg.events) == before
    finally:
        go.set()
        dbg.wait()
    assert dbg.state is S.COMPLETED and not any(isinstance(e, Interjected) for e in dbg.events)


def test_the_person_is_the_os_user_unless_the_debugger_is_told() -> None:
    run = make_loop().start("refund order 42")
    assert anb.Debugger(run).by == getpass.getuser()
    assert anb.Debugger(run, by="ana").view.intervene["by"] == "ana"
