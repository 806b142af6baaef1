"""Forks on the page: the debugger's Fork and edit-then-fork show the fork in the same widget, with a handle."""

from __future__ import annotations

import json
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger.tree import tree_of
from agentnb.events import ApprovalRequested, ToolFinished
from agentnb.exceptions import AgentnbError


def refund_debugger() -> anb.Debugger:
    loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
    dbg = anb.Debugger(loop.start("Please refund order 42"))
    dbg.cont()
    dbg.approve(dbg.pending()[0])
    assert dbg.state is anb.LoopState.COMPLETED
    return dbg


def _page(dbg: anb.Debugger, method: str, **args: Any) -> None:
    dbg.view._handle_custom_msg({"kind": "call", "method": method, "args": args}, [])


def test_fork_from_the_page_shows_the_fork_in_this_widget_with_a_handle_and_a_picker() -> None:
    dbg = refund_debugger()
    parent = dbg.run
    assert parent is not None and dbg.view.runs == []  # one run: no picker
    order = next(e for e in dbg.events if isinstance(e, ToolFinished) and e.name == "get_order")
    dbg.select(order.seq)
    _page(dbg, "fork", call_id=order.call_id, result=json.dumps({"order_id": "42", "total_cents": 500}))
    dbg.wait()
    fork = dbg.forks[-1]
    assert dbg.run is fork is not parent and dbg.runs == [parent, fork]
    assert fork.run_id in dbg.view.header["lineage"] or parent.run_id in dbg.view.header["lineage"]
    assert dbg.view.header["run_id"] == fork.run_id and "results replaced" in dbg.view.header["lineage"]
    picker = dbg.view.runs
    assert [r["run_id"] for r in picker] == [parent.run_id, fork.run_id] and picker[1]["active"]
    assert f"fork of {parent.run_id}" in picker[1]["label"]
    # the refund asks a person again in the fork; approved, it is answered from the ledger: marked, not made twice
    assert fork.state is anb.LoopState.WAITING_APPROVAL and any(isinstance(e, ApprovalRequested) for e in fork.events)
    dbg.approve(dbg.pending()[0])
    refunds = [e for e in fork.events if isinstance(e, ToolFinished) and e.name == "create_refund"]
    assert [e.effect for e in refunds] == ["inherited"] and "Already done in run" in refunds[0].content
    calls = [n for n in tree_of(dbg.events).nodes if n.kind == "call" and n.tool == "create_refund"]
    assert [c.effect for c in calls] == ["inherited"]
    # the picker goes back to the parent and to the fork again; each keeps one listener
    _page(dbg, "show", run_id=parent.run_id)
    assert dbg.run is parent and len(dbg.events) == len(parent.events)
    dbg.show(-1)
    assert dbg.run is fork and len(dbg.timeline) == len(fork.events)


def test_edit_arguments_then_fork_checks_the_edit_and_shows_errors_on_the_page() -> None:
    dbg = refund_debugger()
    parsed = next(e for e in dbg.events if e.type == "CallParsed" and e.name == "create_refund")
    dbg.select(parsed.seq)
    edit = dbg.view.fork_edit
    assert edit["kind"] == "arguments" and edit["call_id"] == parsed.call_id
    assert json.loads(edit["value"]) == parsed.arguments  # type: ignore[attr-defined]
    _page(dbg, "fork", call_id=parsed.call_id, arguments="{not json")
    assert dbg.view.error.startswith("not JSON") and dbg.forks == []
    _page(dbg, "fork", call_id=parsed.call_id, arguments="[1, 2]")
    assert dbg.view.error == "the arguments must be a JSON object" and dbg.forks == []
    args = {**parsed.arguments, "amount_cents": 100}  # type: ignore[attr-defined]
    _page(dbg, "fork", call_id=parsed.call_id, arguments=json.dumps(args))
    dbg.wait()
    fork = dbg.forks[-1]
    assert dbg.run is fork and "arguments edited" in dbg.view.header["lineage"]
    # another amount is another effect: the fork asks a person before it runs
    assert fork.state is anb.LoopState.WAITING_APPROVAL
    waiting = fork.pending_approvals()[0]
    assert waiting.arguments["amount_cents"] == 100


def test_the_fork_button_forks_at_the_selected_event_and_bad_picks_are_clear_errors() -> None:
    dbg = refund_debugger()
    parent = dbg.run
    assert parent is not None
    dbg.select(3)
    _page(dbg, "fork")
    dbg.wait()
    assert dbg.forks and dbg.run is dbg.forks[-1]
    assert dbg.lineage[dbg.forks[-1].run_id] == f"fork of {parent.run_id} at event 3"
    with pytest.raises(AgentnbError, match="no run 5"):
        dbg.show(5)
    with pytest.raises(AgentnbError, match="no run 'nope'"):
        dbg.show("nope")
    _page(dbg, "show", run_id="nope")  # from the page: a message, never a traceback
    assert "no run 'nope'" in dbg.message
    replay = anb.Debugger(parent.transcript)
    assert replay.view.fork_edit == {}  # a replay has nothing to fork from


def test_an_edit_too_large_for_the_page_is_not_sent_and_the_page_says_how_to_fork_from_code() -> None:
    from agentnb._debugger.replay_edit import EDIT_CAP

    big = "x" * (EDIT_CAP + 1)

    @anb.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text + text

    script = [{"tool_calls": [{"name": "echo", "arguments": {"text": big}}]}, {"text": "done"}]
    dbg = anb.Debugger(anb.Loop(model=anb.ScriptedModel(script), tools=[echo]).start("short"))
    dbg.cont()
    events = dbg.events
    done = next(e for e in events if isinstance(e, ToolFinished))
    parsed = next(e for e in events if e.type == "CallParsed")
    for ev, kind in ((done, "result"), (parsed, "arguments")):
        dbg.select(ev.seq)
        offer = dbg.view.fork_edit
        assert offer["kind"] == kind and offer["value"] == "", kind
        assert f"too large to edit here (at most {EDIT_CAP:,})" in offer["too_large"]
        assert f"run.fork({ev.seq}, " in offer["too_large"] and repr(ev.call_id) in offer["too_large"]
    first_turn = next(e for e in events if e.type == "TurnCompleted")
    dbg.select(first_turn.seq)
    assert dbg.view.fork_edit["kind"] == "request" and "too_large" not in dbg.view.fork_edit  # a short request
    long = anb.Debugger(anb.Loop(model=anb.ScriptedModel([{"text": "ok"}])).start(big))
    long.cont()
    long.select(next(e.seq for e in long.events if e.type == "TurnCompleted"))
    assert long.view.fork_edit["value"] == "" and "request={...}" in long.view.fork_edit["too_large"]
