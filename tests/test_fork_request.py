"""Replay a turn with an edited request (``run.fork(at, request=...)``): what the model gets, the lineage with
its diff, the fork rules for effects, a resume in a fresh loop, and clear errors for edits that cannot be."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._request import ModelRequest, StreamItem
from agentnb.events import ModelRequested, ToolFinished
from agentnb.exceptions import AgentnbError


class Recording:
    """A scripted model that keeps every request it was sent (the messages, tools and tool choice)."""

    def __init__(self, model: anb.ScriptedModel) -> None:
        self.model = model
        self.provider, self.name = model.provider, model.name
        self.sent: list[ModelRequest] = []

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        self.sent.append(request)
        answer: Iterator[StreamItem] = self.model.respond(request)
        return answer

    def seek(self, run_id: str, position: int) -> None:
        self.model.seek(run_id, position)


def _refund(store: Any = None) -> tuple[anb.Loop, anb.Run, Recording, list[str]]:
    made: list[str] = []
    tools = anb.stories.tools("refund")

    @anb.tool(risk="write", approval=True)
    def create_refund(order_id: str, amount_cents: int) -> dict[str, Any]:
        """Create a refund."""
        made.append(order_id)
        return {"refund_id": f"rf_{order_id}", "order_id": order_id, "amount_cents": amount_cents}

    model = Recording(anb.ScriptedModel.story("refund"))
    loop = anb.Loop(model=model, tools=[tools[0], create_refund], system="You are a refund desk.", store=store)
    run = loop.start("Please refund order 42").run()
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    assert run.state is anb.LoopState.COMPLETED and made == ["42"]
    return loop, run, model, made


def _requests(run: anb.Run) -> list[ModelRequested]:
    return [e for e in run.events if isinstance(e, ModelRequested)]


def test_the_edited_request_is_what_the_model_gets_and_the_lineage_says_so() -> None:
    loop, run, model, _ = _refund()
    second = _requests(run)[1]  # the turn that asked for the refund
    sent = len(model.sent)
    fork = run.fork(second.seq + 1, request={  # any event of the turn names its request
        "system": "You are a careful refund desk.", "messages": {0: "Please refund order 43"},
        "tools": ["get_order"], "tool_choice": "none"})
    fork.run_until(lambda e: e.type == "TurnCompleted")
    first = model.sent[sent]
    assert first.messages[0].text == "You are a careful refund desk."
    assert first.messages[1].text == "Please refund order 43"
    assert len(first.messages) == second.message_count  # the conversation that request held, edited
    assert [t.name for t in first.tools] == ["get_order"] and first.options.tool_choice == "none"
    fork_info = fork.events[0].settings["fork"]
    assert fork_info["parent"] == run.run_id and fork_info["at"] == second.seq - 1
    assert fork_info["request"] == {"system": "You are a careful refund desk.", "tools": ["get_order"],
                                    "messages": {"0": "Please refund order 43"}, "tool_choice": "none"}
    assert fork_info["request_diff"] == [
        "system: 'You are a refund desk.' -> 'You are a careful refund desk.'",
        "message 0 (user): 'Please refund order 42' -> 'Please refund order 43'",
        "tool_choice: 'auto' -> 'none'", "tools: -create_refund"]
    assert run.events[-1].type == "RunFinished" and len(run.loop.registry) == 2  # the parent and its loop untouched


def test_the_tool_choice_edit_is_for_the_first_request_and_the_rest_go_back_to_the_loop() -> None:
    loop, run, model, _ = _refund()
    fork = run.fork(_requests(run)[0].seq, request={"tool_choice": {"name": "get_order"}})
    fork.run()
    choices = [e.tool_choice for e in _requests(fork)]
    assert choices[0] == {"name": "get_order"} and all(c == "auto" for c in choices[1:]) and len(choices) > 1


def test_a_replayed_turn_never_makes_a_write_its_parent_made() -> None:
    loop, run, model, made = _refund()
    second = _requests(run)[1]
    fork = run.fork(second.seq, request={"messages": {0: "Refund order 42, please"}}, effects="run")
    fork.run()
    if fork.pending_approvals():
        fork.approve(fork.pending_approvals()[0].call_id)
        fork.run()
    refunds = [e for e in fork.events if isinstance(e, ToolFinished) and e.name == "create_refund"]
    assert made == ["42"] and [e.effect for e in refunds] == ["inherited"]


def test_a_stored_fork_resumed_by_a_fresh_loop_keeps_its_edited_request(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "runs.db")
    loop, run, model, _ = _refund(store)
    fork = run.fork(_requests(run)[0].seq, request={"tools": ["get_order"], "tool_choice": "required"})
    fork.step()  # RunStarted only: the edited request is not sent yet
    fork.release()
    fresh_model = Recording(anb.ScriptedModel.story("refund"))
    fresh = anb.Loop(model=fresh_model, tools=list(loop.registry), system="You are a refund desk.", store=store)
    resumed = anb.Run.resume(fork.run_id, loop=fresh, store=store)
    resumed.run_until(lambda e: e.type == "TurnCompleted")
    first = fresh_model.sent[0]
    assert [t.name for t in first.tools] == ["get_order"] and first.options.tool_choice == "required"


@pytest.mark.parametrize(("request_", "said"), [
    ({"model": "gpt"}, "model cannot be edited"),
    ({}, "give a dict"),
    ({"messages": {1: "x"}}, "no message 1"),
    ({"messages": {"zero": "x"}}, "'zero' is not a message's position"),
    ({"messages": {0: 42}}, "must be text"),
    ({"system": 3}, "must be text"),
    ({"tools": ["delete_everything"]}, "delete_everything is not a tool of this loop"),
    ({"tools": "get_order"}, "a list of tool names"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": ["get_order"], "tool_choice": {"name": "create_refund"}}, "create_refund"),
])
def test_an_edit_that_cannot_be_is_a_clear_error(request_: Any, said: str) -> None:
    loop, run, model, _ = _refund()
    with pytest.raises(AgentnbError, match=said):
        run.fork(_requests(run)[0].seq, request=request_)


def test_a_tool_result_is_not_edited_as_a_request_and_a_request_needs_a_model_turn() -> None:
    loop, run, model, _ = _refund()
    second = _requests(run)[1]
    with pytest.raises(AgentnbError, match="message 2 is a tool message"):
        run.fork(second.seq, request={"messages": {2: "fake"}})
    with pytest.raises(AgentnbError, match="no model request at or before event 0"):
        run.fork(0, request={"system": "x"})
    with pytest.raises(AgentnbError, match="on their own"):
        run.fork(second.seq, request={"system": "x"}, results={"c": 1})
    with pytest.raises(AgentnbError, match="the run has events"):
        run.fork(10_000, request={"system": "x"})


# -- on the page: a model turn's card offers its request; the edit replays as a fork in the same widget --------


def _page(dbg: anb.Debugger, method: str, **args: Any) -> None:
    dbg.view._handle_custom_msg({"kind": "call", "method": method, "args": args}, [])


def test_replay_this_turn_with_edits_from_the_page_shows_the_fork_here() -> None:
    import json

    loop, run, model, made = _refund()
    dbg = anb.Debugger(run)
    second = _requests(run)[1]
    done = next(e.seq for e in run.events if e.type == "TurnCompleted" and e.seq > second.seq)
    dbg.select(done)
    offer = dbg.view.fork_edit
    assert offer["kind"] == "request" and offer["seq"] == second.seq
    edited = json.loads(offer["value"])
    assert edited["system"] == "You are a refund desk." and edited["tools"] == ["get_order", "create_refund"]
    assert [m["role"] for m in edited["messages"]] == ["user", "assistant", "tool"]
    edited["messages"][0]["text"] = "Please refund order 42 (it arrived broken)"
    _page(dbg, "replay", seq=offer["seq"], request=json.dumps(edited))
    dbg.wait()
    fork = dbg.forks[-1]
    assert dbg.run is fork and dbg.view.error == ""
    assert "request edited" in dbg.view.header["lineage"]
    assert fork.events[0].settings["fork"]["request_diff"] == [
        "message 0 (user): 'Please refund order 42' -> 'Please refund order 42 (it arrived broken)'"]
    assert fork.messages[1].text == "Please refund order 42 (it arrived broken)"
    dbg.select(0)
    assert "request edited" in dbg.view.detail  # the fork's RunStarted card shows the diff
    assert made == ["42"]  # nothing repeated


@pytest.mark.parametrize(("change", "said"), [
    (lambda r: r, "nothing was edited"),
    (lambda r: {**r, "messages": r["messages"][:1]}, "held 3 messages"),
    (lambda r: {**r, "messages": [r["messages"][0], r["messages"][1], {"role": "tool", "text": "x",
                                                                         "results": ["get_order"]}]}, "tool's result"),
    (lambda r: {**r, "messages": [r["messages"][0], {**r["messages"][1], "calls": []}, r["messages"][2]]},
     "calls cannot be edited"),
    (lambda r: {**r, "model": "gpt-5"}, "model cannot be edited"),
    (lambda r: {**r, "tools": ["nope"]}, "nope is not a tool"),
    (lambda r: [1], "must be a JSON object"),
])
def test_a_page_edit_that_cannot_be_replayed_says_why_and_forks_nothing(change: Any, said: str) -> None:
    import json

    loop, run, model, made = _refund()
    dbg = anb.Debugger(run)
    second = _requests(run)[1]
    dbg.select(second.seq)
    request = change(json.loads(dbg.view.fork_edit["value"]))
    _page(dbg, "replay", seq=second.seq, request=json.dumps(request))
    assert said in dbg.view.error and dbg.forks == [] and dbg.run is run
    _page(dbg, "replay", seq=second.seq, request="{not json")
    assert "not JSON" in dbg.view.error and dbg.forks == []
