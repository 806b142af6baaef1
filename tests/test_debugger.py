"""The debugger, driven through its public methods and its buttons (the same handlers a click fires)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import agentnb as anb
from agentnb._debugger import cards
from agentnb._debugger.diagram import state_diagram
from agentnb._debugger.timeline import Timeline
from agentnb.events import EVENT_CLASSES

S = anb.LoopState


def story_debugger(name: str = "refund", **model_options: Any) -> anb.Debugger:
    loop = anb.Loop(model=anb.ScriptedModel.story(name, **model_options), tools=anb.stories.tools(name),
                    retry_base_delay=0)
    return anb.Debugger(loop.start("go"))


def test_every_event_kind_has_a_summary_and_a_card() -> None:
    assert {cls.__name__ for cls in cards.CARDS} == set(EVENT_CLASSES)


@pytest.mark.parametrize("name", anb.stories.names())
def test_cards_render_for_every_event_of_every_story(name: str) -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story(name, stream=True), tools=anb.stories.tools(name), max_turns=4)
    run = loop.start("go").run()
    if run.paused:
        run.deny(run.pending_approvals()[0].call_id, reason="no")
        run.run()
    tl = Timeline(run.events)
    ctx = cards.CardContext(tl)
    for ev in run.events:
        html = cards.card(ev, ctx, selected=True, open_=True)
        assert f'data-seq="{ev.seq}"' in html and ev.type in html
        assert cards.summary_text(ev)


def test_card_details_per_kind() -> None:
    dbg = story_debugger("refund", stream=True, chunk_size=5)
    dbg.cont()
    ctx = cards.CardContext(dbg.timeline)
    merge = next(e for e in dbg.events if e.type == "ArgumentsMerged" and e.length > 5)
    body = cards.body_html(merge, ctx)
    assert '<span class="agentnb-frag">' in body and "bytes so far" in body and "not yet" in body
    last_merge = [e for e in dbg.events if e.type == "ArgumentsMerged" and e.index == merge.index and e.turn == 1][-1]
    assert "a complete JSON value" in cards.body_html(last_merge, ctx)
    turn = next(e for e in dbg.events if e.type == "TurnCompleted")
    body = cards.body_html(turn, ctx)
    assert "raw <code>tool_calls</code>" in body and "normalized <b>tool_calls</b>" in body and "latency" in body
    approval = next(e for e in dbg.events if e.type == "ApprovalRequested")
    assert "waiting" in cards.body_html(approval, ctx) and "risk" in cards.body_html(approval, ctx)


def test_schema_errors_are_marked_on_the_fields() -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story("malformed"), tools=anb.stories.tools("malformed"))
    run = loop.start("go").run()
    tl = Timeline(run.events)
    rejected = [e for e in run.events if e.type == "CallRejected"]
    assert [e.reason for e in rejected] == ["invalid_json", "schema"]
    body = cards.body_html(rejected[1], cards.CardContext(tl))
    assert '<div class="agentnb-badfield"><span class="agentnb-jkey">&quot;b&quot;</span>' in body
    raw_body = cards.body_html(next(e for e in run.events if e.type == "CallParsed"), cards.CardContext(tl))
    assert "never repaired" in raw_body and "&quot;b&quot;: " in raw_body


def test_html_in_values_is_escaped() -> None:
    @anb.tool
    def evil() -> str:
        """Return markup."""
        return "<script>alert(1)</script>"

    model = anb.ScriptedModel([{"tool_calls": [{"name": "evil", "arguments": {}}]}, {"text": "<b>hi</b>"}])
    dbg = anb.Debugger(anb.Loop(model=model, tools=[evil]).start("<img src=x>")).cont()
    everything = "".join(cards.card(e, cards.CardContext(dbg.timeline), open_=True) for e in dbg.events)
    assert "<script>" not in everything and "&lt;script&gt;" in everything and "<img" not in everything


def click(dbg: anb.Debugger, method: str, **args: Any) -> None:
    """What a click in the page does: a custom message naming the method, handled by the widget's callbacks."""
    dbg.view._handle_custom_msg({"kind": "call", "method": method, "args": args}, [])


def test_step_next_turn_and_header() -> None:
    dbg = story_debugger("weather")
    assert dbg.state is S.NEW and dbg.view.header["state"] == "NEW"
    ev = dbg.step()
    assert ev is not None and ev.type == "RunStarted" and len(dbg.events) == 1
    dbg.step()
    dbg.next_turn()
    assert dbg.events[-1].type == "ModelRequested" and dbg.events[-1].turn == 2
    assert dbg.view.header["state"] == "MODEL_REQUESTED"
    dbg.cont()
    assert dbg.state is S.COMPLETED and dbg.view.header["state"] == "COMPLETED"
    assert dbg.view.header["reason"] == "the model answered" and dbg.view.header["tone"] == "done"
    assert not dbg.view.controls["step"] and not dbg.view.controls["cont"] and dbg.view.controls["restart"]
    assert dbg.step() is None and "over" in dbg.message and "over" in dbg.view.message


def test_page_controls_drive_the_same_methods() -> None:
    dbg = story_debugger("weather")
    click(dbg, "step")
    click(dbg, "step")
    assert [e.type for e in dbg.events] == ["RunStarted", "ModelRequested"]
    click(dbg, "cont")  # a background thread, like in the notebook
    dbg.wait()
    assert dbg.state is S.COMPLETED and not dbg.running and not dbg.view.running
    click(dbg, "no_such_method")  # ignored: only the listed methods can be called from the page
    click(dbg, "select", seq=2)
    assert dbg.selected == 2 and not dbg.view.follow
    assert 'data-seq="2"' in dbg.view.detail and 'data-seq="2"' in dbg.view.conversation


def test_approve_from_the_panel_resolves_the_pause_and_continues() -> None:
    dbg = story_debugger("refund")
    dbg.cont()
    assert dbg.state is S.WAITING_APPROVAL and not dbg.view.controls["step"]
    (panel,) = dbg.view.pending
    assert panel["name"] == "create_refund" and panel["risk"] == "write"
    assert '"amount_cents": 1999' in panel["arguments"]
    click(dbg, "approve", call_id=panel["call_id"])
    dbg.wait()
    assert dbg.state is S.COMPLETED and dbg.view.pending == []
    assert "Done: refund" in (dbg.run.output if dbg.run else "")


def test_deny_from_the_panel_sends_the_reason() -> None:
    dbg = story_debugger("refund")
    dbg.cont()
    click(dbg, "deny", call_id=dbg.view.pending[0]["call_id"], reason="too much")
    dbg.wait()
    assert dbg.run is not None and dbg.run.state is S.COMPLETED
    assert "Denied by the user: too much" in json.dumps([r.content for m in dbg.run.messages for r in m.tool_results])


def test_edit_arguments_is_validated_before_approving() -> None:
    dbg = story_debugger("refund")
    dbg.cont()
    cid = dbg.view.pending[0]["call_id"]
    click(dbg, "approve", call_id=cid, arguments="{not json")
    assert "not JSON" in dbg.view.error and dbg.state is S.WAITING_APPROVAL
    click(dbg, "approve", call_id=cid, arguments=json.dumps({"order_id": "42", "amount_cents": "lots"}))
    assert "amount_cents" in dbg.view.error and dbg.state is S.WAITING_APPROVAL
    click(dbg, "approve", call_id=cid, arguments=json.dumps({"order_id": "42", "amount_cents": 700}))
    dbg.wait()
    assert dbg.state is S.COMPLETED and dbg.run is not None and "$7.00" in (dbg.run.output or "")
    resolved = next(e for e in dbg.events if e.type == "ApprovalResolved")
    body = cards.body_html(resolved, cards.CardContext(dbg.timeline))
    # the edit is shown as a diff of the model's arguments
    assert '<div class="agentnb-del">-  &quot;amount_cents&quot;: 1999,</div>' in body
    assert '<div class="agentnb-add">+  &quot;amount_cents&quot;: 700,</div>' in body


def test_breakpoints_stop_continue_and_can_be_removed() -> None:
    dbg = story_debugger("parallel", stream=True)
    bp_tool = dbg.add_breakpoint(tool="get_weather")
    dbg.cont()
    # a breakpoint on a tool stops where one on a function would: just before it runs
    assert dbg.events[-1].type == "ToolStarted" and dbg.events[-1].name == "get_weather"
    assert not any(e.type == "ToolFinished" for e in dbg.events)
    assert "breakpoint: tool = get_weather" in dbg.message
    dbg.remove_breakpoint(bp_tool)
    dbg.add_breakpoint(state="RESULTS_READY")
    dbg.cont()
    assert dbg.state is S.RESULTS_READY
    dbg.add_breakpoint(when=lambda e: e.type == "TextMerged")
    assert [b["label"] for b in dbg.view.breakpoints] == ["state = RESULTS_READY", "when <lambda>(event)"]
    dbg.cont()
    assert dbg.events[-1].type == "TextMerged"
    for bp in list(dbg.view.breakpoints):
        click(dbg, "remove_breakpoint", id=bp["id"])  # the chip's ✕
    assert dbg.breakpoints == [] and dbg.view.breakpoints == []
    click(dbg, "add_breakpoint", kind="event", value=" RunFinished ")
    assert [b.label() for b in dbg.breakpoints] == ["event = RunFinished"]
    dbg.cont()
    assert dbg.state is S.COMPLETED
    with pytest.raises(ValueError, match="no event type"):
        dbg.add_breakpoint(event="Nope")
    with pytest.raises(ValueError, match="exactly one"):
        dbg.add_breakpoint(event="RunFinished", tool="x")


def test_a_tool_breakpoint_stops_after_approval_and_before_the_tool_runs() -> None:
    ran: list[int] = []

    @anb.tool(approval=True, risk="write")
    def refund(cents: int) -> str:
        """Refund."""
        ran.append(cents)
        return "refunded"

    model = anb.ScriptedModel([{"tool_calls": [{"name": "refund", "arguments": {"cents": 5}}]}, {"text": "done"}],
                              stream=True)
    dbg = anb.Debugger(anb.Loop(model=model, tools=[refund]).start("go"))
    dbg.add_breakpoint(tool="refund")
    dbg.cont()
    assert dbg.state is S.WAITING_APPROVAL and ran == []  # argument fragments named the tool: no stop there
    dbg.approve(dbg.pending()[0])
    assert dbg.events[-1].type == "ToolStarted" and ran == [] and "breakpoint: tool = refund" in dbg.message
    dbg.step()
    assert dbg.events[-1].type == "ToolFinished" and ran == [5]


def test_toggle_a_breakpoint_from_a_row() -> None:
    dbg = story_debugger("weather")
    dbg.cont()
    started = next(e for e in dbg.events if e.type == "ToolStarted")
    click(dbg, "toggle_breakpoint", seq=started.seq)
    assert [b.label() for b in dbg.breakpoints] == ["tool = get_weather"]
    click(dbg, "toggle_breakpoint", seq=next(e.seq for e in dbg.events if e.type == "ToolFinished"))
    assert dbg.breakpoints == []  # the same tool: the row's button removes it again
    click(dbg, "toggle_breakpoint", seq=1)
    assert [b.label() for b in dbg.breakpoints] == ["event = ModelRequested"]
    dbg.restart()
    dbg.cont()
    assert dbg.events[-1].type == "ModelRequested" and len(dbg.events) == 2


def test_pause_stops_a_background_continue_between_events() -> None:
    model = anb.ScriptedModel.story("weather", stream=True, chunk_size=1, chunk_delay=0.01)
    dbg = anb.Debugger(anb.Loop(model=model, tools=anb.stories.tools("weather")).start("go"))
    dbg.cont(background=True)
    time.sleep(0.15)
    assert dbg.running and dbg.view.controls["pause"] and not dbg.view.controls["step"]
    click(dbg, "pause")
    assert not dbg.running and dbg.message == "paused" and not dbg.state.is_terminal
    n = len(dbg.events)
    time.sleep(0.05)
    assert len(dbg.events) == n  # nothing runs after a pause
    dbg.cont()
    assert dbg.state is S.COMPLETED


def test_live_updates_are_throttled_however_fast_fragments_arrive() -> None:
    model = anb.ScriptedModel([{"text": "fragment " * 60}], stream=True, chunk_size=1, chunk_delay=0.001)
    dbg = anb.Debugger(anb.Loop(model=model).start("go"), updates_per_second=10)
    sent: list[dict[str, Any]] = []
    dbg.view.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    dbg.view._handle_custom_msg({"kind": "hello"}, [])  # a page listens: from now on it gets the new rows
    before = dbg.updates
    t0 = time.monotonic()
    dbg.cont(background=True).wait()
    elapsed = time.monotonic() - t0
    events = len(dbg.events)
    updates = dbg.updates - before
    assert events > 100 and elapsed > 0.3
    assert updates <= elapsed * 10 + 3, (updates, elapsed, events)  # bounded by the rate, not by the events
    assert updates >= 2  # and it did move while the run went on
    rows = [m for m in sent if m["kind"] == "rows"]
    assert sum(len(m["m"]) for m in rows) == events  # every row sent exactly once, in order
    assert [m["start"] for m in rows] == sorted(m["start"] for m in rows)


def test_before_a_page_says_hello_a_short_run_resends_its_rows_from_the_start() -> None:
    # display(dbg); dbg.cont() in one cell: the page's hello waits for the cell to end, so updates start over
    dbg = story_debugger("weather")
    sent: list[dict[str, Any]] = []
    dbg.view.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    dbg.step()
    assert sent == []  # not displayed: nobody listens
    dbg._repr_mimebundle_()
    dbg.step()
    dbg.step()
    starts = [(m["kind"], m.get("start")) for m in sent]
    # the display, then each update: all rows again (and the tree beside them)
    assert starts == [("reset", None), ("rows", 0), ("tree", 0)] * 3
    assert len(sent[-2]["m"]) == 3 and sent[-1]["end"] - sent[-1]["start"] == 3
    sent.clear()
    dbg.view._handle_custom_msg({"kind": "hello"}, [])
    dbg.step()
    assert [(m["kind"], m.get("start"), m.get("end", 0) - m.get("start", 0)) for m in sent] == [
        ("reset", None, 0), ("rows", 0, 3), ("tree", 0, 3), ("welcome", None, 0), ("rows", 3, 1),
        ("tree", 3, 1)]  # heard: only what is new


def test_restart_starts_a_new_run_of_the_same_prompt() -> None:
    dbg = story_debugger("weather")
    dbg.cont()
    first = dbg.run
    dbg.restart()
    assert dbg.run is not first and dbg.run is not None and dbg.state is S.NEW and dbg.events == []
    assert dbg.run.prompt == first.prompt if first else False
    dbg.cont()
    assert dbg.state is S.COMPLETED


def test_time_travel_matches_folding_the_prefix() -> None:
    dbg = story_debugger("calculator", stream=True)
    dbg.cont()
    transcript = anb.Transcript(list(dbg.events))
    for ev in dbg.events:
        assert dbg.timeline.messages_at(ev.seq) == transcript.at(ev.seq).messages
    dbg.select(4)
    assert not dbg.follow and 'data-seq="4"' in dbg.view.conversation and not dbg.view.follow
    assert dbg.view.selected == 4 and 'data-seq="4"' in dbg.view.detail
    dbg.view.selected = 7  # the page selects by setting the trait
    assert dbg.selected == 7 and 'data-seq="7"' in dbg.view.detail
    dbg.view.selected = len(dbg.events) - 1
    assert dbg.follow and dbg.view.follow


def test_replay_steps_through_a_saved_transcript_without_a_model(tmp_path: Path) -> None:
    run = anb.Loop(model=anb.ScriptedModel.story("parallel", stream=True), tools=anb.stories.tools("parallel"))
    run = run.start("go").run()
    path = tmp_path / "t.jsonl"
    run.transcript.save(path)
    dbg = anb.Debugger.load(path)
    assert not dbg.live and len(dbg.events) == 1 and dbg.view.header["mode"].startswith("replay · 1/")
    dbg.step()
    assert len(dbg.events) == 2
    dbg.add_breakpoint(event="ResultsBound")
    dbg.cont()
    assert dbg.events[-1].type == "ResultsBound"
    dbg.cont()
    assert [e.seq for e in dbg.events] == [e.seq for e in run.events] and dbg.state is S.COMPLETED
    assert "COMPLETED" in dbg.message
    with pytest.raises(anb.AgentnbError, match="read-only"):
        dbg.approve("x")
    dbg.restart()
    assert len(dbg.events) == 1
    at_end = anb.Debugger(anb.Transcript.load(path), start="end")
    assert len(at_end.events) == len(run.events)


def test_fork_with_an_edited_tool_result() -> None:
    dbg = story_debugger("weather")
    dbg.cont()
    call_id = next(e.call_id for e in dbg.events if e.type == "ToolFinished")
    child = dbg.fork(results={call_id: {"city": "Paris", "temp_c": 31, "sky": "stormy"}})
    assert child.run is not None and child.run is not dbg.run
    child.cont()
    assert child.run.output == "It is 31 °C and stormy in Paris."
    assert dbg.run is not None and dbg.run.output == "It is 18 °C and sunny in Paris."  # the original is untouched
    with pytest.raises(anb.AgentnbError, match="no result for call"):
        dbg.fork(2, results={call_id: 1})  # before the result existed


def test_fork_mid_turn_drops_the_unanswered_calls() -> None:
    dbg = story_debugger("weather")
    dbg.cont()
    parsed = next(e for e in dbg.events if e.type == "CallParsed")
    child = dbg.fork(parsed.seq)
    assert child.run is not None and [m.role for m in child.run.prompt] == ["user"]
    child.cont()
    assert child.state is S.COMPLETED


def test_a_run_displays_as_its_debugger_with_a_static_fallback() -> None:
    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("go").run()
    bundle, _ = run._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == repr(run) and "VBox" not in bundle["text/plain"]
    html = bundle["text/html"]
    assert "COMPLETED" in html and "the model answered" in html and "It is 18 °C and sunny in Paris." in html
    assert all(f"<td>{e.type}</td>" in html for e in run.events) and f'data-events="{len(run.events)}"' in html
    replay, _ = run.transcript._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in replay and replay["text/plain"] == repr(run.transcript)


def test_state_diagram_is_drawn_from_the_table() -> None:
    svg = state_diagram(S.EXECUTING)
    for state in S:
        assert f'data-state="{state.value}"' in svg
    assert svg.count("agentnb-current-state") == 1 and 'class="agentnb-current-state" data-state="EXECUTING"' in svg
    assert "<title>EXECUTING → RESULTS_READY: ResultsBound</title>" in svg


def test_meters_follow_the_selected_moment() -> None:
    dbg = story_debugger("calculator")
    dbg.cont()
    assert "turns 3 / 25" in dbg.view.meters and 'aria-label="turns" aria-valuenow="3"' in dbg.view.meters
    dbg.select(1)
    assert "turns 0 / 25" in dbg.view.meters


def test_budget_meters_show_the_limits_that_are_set() -> None:
    model = anb.ScriptedModel([{"tool_calls": [{"name": "get_weather", "arguments": {"city": c}}]}
                               for c in ("Paris", "Oslo", "Tokyo")] + [{"text": "done"}])
    budget = anb.Budget(max_tool_calls=2, max_cost=1.0, prices={"scripted": (100.0, 100.0)}, deadline_s=60)
    loop = anb.Loop(model=model, tools=anb.stories.tools("weather"), budget=budget)
    dbg = anb.Debugger(loop.start("go")).cont()
    label = dbg.view.meters
    assert "tool calls 2 / 2" in label and "cost $0." in label and " / 1" in label and "time " in label
    assert 'agentnb-meter agentnb-meter-tool-calls agentnb-meter-over"' in label  # a bar, full
    assert "agentnb-meter-tokens" not in label  # no token budget set: no bar


def test_client_result_is_submitted_from_the_panel() -> None:
    @anb.tool(client=True)
    def ask_user(question: str) -> str:
        """Ask the person at the keyboard."""
        raise AssertionError("runs on the client")

    model = anb.ScriptedModel([
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "name?"}}]},
        lambda m: {"text": f"Hello {m[-1].tool_results[0].content}!"},
    ])
    dbg = anb.Debugger(anb.Loop(model=model, tools=[ask_user]).start("greet me")).cont()
    (panel,) = dbg.view.pending
    assert panel["kind"] == "client_result" and "submit its result" in panel["ask"]
    assert "client" in cards.summary_text(next(e for e in dbg.events if e.type == "ApprovalRequested"))
    click(dbg, "submit_result", call_id=panel["call_id"], value="Ada")
    dbg.wait()
    assert dbg.state is S.COMPLETED and dbg.run is not None and dbg.run.output == "Hello Ada!"
    resolved = next(e for e in dbg.events if e.type == "ApprovalResolved")
    assert "submitted result" in cards.body_html(resolved, cards.CardContext(dbg.timeline))


def test_duplicate_effects_are_marked_on_their_card() -> None:
    @anb.tool(risk="write", approval=False)
    def charge(cents: int) -> str:
        """Charge."""
        return "ok"

    call = {"name": "charge", "arguments": {"cents": 5}}
    model = anb.ScriptedModel([{"tool_calls": [call]}, {"tool_calls": [call]}, {"text": "done"}])
    dbg = anb.Debugger(anb.Loop(model=model, tools=[charge]).start("go")).cont()
    first, again = [e for e in dbg.events if e.type == "ToolFinished"]
    assert again.status == "duplicate" and again.duplicate_of == first.call_id
    assert f"not repeated: done by {first.call_id}" in cards.summary_text(again)
    body = cards.body_html(again, cards.CardContext(dbg.timeline))
    assert "it was not repeated" in body and "call binding sha256" in body and "idempotency key" in body


def test_wire_view_shows_one_provider_at_a_time() -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"), system="Be brief.")
    dbg = anb.Debugger(loop.start("Paris?")).cont()
    assert dbg.view.wire == {}  # computed only when its tab is open
    dbg.view.tab = "wire"
    last_request = [e for e in dbg.events if e.type == "ModelRequested"][-1]
    wire = dbg.view.wire
    assert wire["seq"] == last_request.seq and wire["provider"] == "OpenAI Chat Completions"
    assert wire["providers"] == ["OpenAI Chat Completions", "OpenAI Responses", "Anthropic Messages", "Google Gemini",
                                 "Ollama /api/chat"]
    shapes = {"OpenAI Chat Completions": "tool_call_id", "OpenAI Responses": "function_call_output",
              "Anthropic Messages": "tool_use_id", "Google Gemini": "functionResponse", "Ollama /api/chat": "tool_name"}
    for provider, needle in shapes.items():
        dbg.view.wire_provider = provider  # the page's provider tab
        body = dbg.view.wire["request"]
        assert dbg.view.wire["provider"] == provider and needle in body, provider
        assert all(other not in body for p, other in shapes.items() if p != provider)  # one provider only
    dbg.view.wire_provider = "Google Gemini"
    assert "systemInstruction" in dbg.view.wire["request"]
    assert [row[0] for row in dbg.view.wire["where"]] == ["system prompt", "a tool call", "its result"]
    dbg.select(1)
    assert dbg.view.wire["seq"] == 1 and "2 messages, 1 tool" in dbg.view.wire["note"]  # system + user
    dbg.select(0)
    assert dbg.view.wire["seq"] == -1 and "no model request" in dbg.view.wire["note"]


def test_plots_tab_draws_the_run() -> None:
    dbg = story_debugger("parallel")
    dbg.cont()
    assert dbg.view.plots == ""
    dbg.view.tab = "plots"
    assert dbg.view.plots.count("data:image/png;base64,") == 4, dbg.view.plots[:300]


def test_fork_with_edited_arguments_replays_the_turn_and_runs_the_edited_call() -> None:
    dbg = story_debugger("weather")
    dbg.cont()
    call_id = next(e.call_id for e in dbg.events if e.type == "CallParsed")
    child = dbg.fork(arguments={call_id: {"city": "Oslo"}}).cont()
    assert child.run is not None and child.run.output == "It is 3 °C and snow in Oslo."
    replayed = next(e for e in child.events if e.type == "TurnCompleted")
    assert replayed.response.raw["edited_calls"] == [call_id]
    assert replayed.response.message.tool_calls[0].arguments == {"city": "Oslo", "unit": "c"}
    assert dbg.run is not None and "Paris" in (dbg.run.output or "")
    with pytest.raises(ValidationError):
        dbg.fork(arguments={call_id: {"city": 5, "unit": "kelvin"}})
    body = cards.body_html(replayed, cards.CardContext(child.timeline))
    assert "forked with edited arguments" in body
    assert '<div class="agentnb-add">+  &quot;city&quot;: &quot;Oslo&quot;,</div>' in body


def test_an_unknown_event_kind_is_drawn_from_its_fields() -> None:
    from dataclasses import dataclass

    from agentnb._debugger import viewdata
    from agentnb.events import BaseEvent

    @dataclass(slots=True, kw_only=True)
    class CacheHit(BaseEvent):  # an event kind a newer engine might add
        type: str = "CacheHit"
        key: str
        saved: dict[str, Any]

    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("go").run()
    last = run.events[-1]
    ev = CacheHit(seq=1, ts=last.ts, run_id=last.run_id, turn=1, state=last.state, key="k<1>",
                  saved={"tokens": 12})
    assert "CacheHit" not in EVENT_CLASSES
    summary = cards.summary_text(ev)
    assert summary == 'key=k<1> · saved={"tokens": 12}'
    body = cards.body_html(ev, cards.CardContext(Timeline(run.events)))
    assert "without its own card" in body and "k&lt;1&gt;" in body and "<td>saved</td>" in body
    assert "&quot;tokens&quot;" in body
    rows = viewdata.RowEncoder().encode([*run.events, ev], 0, len(run.events) + 1)
    assert rows["types"][rows["k"][-1]] == "CacheHit" and rows["m"][-1] == summary
    assert rows["type_classes"][rows["k"][-1]] == ""


def test_rows_are_messages_and_the_widget_state_stays_small() -> None:
    model = anb.ScriptedModel([{"tool_calls": [{"name": "get_weather", "arguments": {"city": f"c{i}"}}]}
                               for i in range(150)] + [{"text": "done"}], stream=True)
    run = anb.Loop(model=model, tools=anb.stories.tools("weather"), max_turns=200).start("go").run()
    dbg = anb.Debugger(run.transcript, start="end")
    n = len(dbg.events)
    assert n > 1000
    state = json.dumps(dbg.view.get_state(), default=str)
    summaries = [cards.summary_text(e) for e in dbg.events]
    assert sum(s in state for s in summaries[: n - 5]) < 30  # the rows are not in the state
    assert len(state) - len(dbg.view._esm) - len(dbg.view._css) < 60_000
    rows = dbg.rows()
    assert rows["m"] == summaries and len(rows["k"]) == n
    started = next(i for i, e in enumerate(dbg.events) if e.type == "ToolStarted")
    assert rows["tools"][rows["t"][started]] == "get_weather"
    statuses = {rows["statuses"][x] for x in rows["x"]}
    assert {"error", "completed", ""} <= statuses  # the weather tool knows no city "c1"
    sent: list[dict[str, Any]] = []
    dbg.view.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    dbg.view._handle_custom_msg({"kind": "hello"}, [])  # a page opened: it gets every row, in chunks
    chunks = [m for m in sent if m["kind"] == "rows"]
    assert sent[0] == {"kind": "reset"} and sum(len(m["m"]) for m in chunks) == n


def test_export_html_is_one_self_contained_file(tmp_path: Path) -> None:
    import base64
    import gzip
    import re

    from agentnb._debugger import assets
    from agentnb._redact import register_secret

    secret = "sk-test-0123456789abcdef-export"
    register_secret(secret)
    loop = anb.Loop(model=anb.ScriptedModel.story("refund", stream=True), tools=anb.stories.tools("refund"),
                    settings={"extra_headers": {"x-api-key": secret}})
    dbg = anb.Debugger(loop.start("go")).cont()
    dbg.approve(dbg.pending()[0])
    path = dbg.export_html(tmp_path / "run.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and secret not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing loaded from elsewhere
    assert "http://" not in page and "https://" not in page
    module = page.split('<script type="module">\n', 1)[1].rsplit("standalone(", 1)[0]
    assert module.strip() == assets.text("debugger.js").replace("</", "<\\/").strip()  # the same front end
    def block(name: str) -> Any:
        packed = re.search(rf'id="{name}" data-encoding="gzip\+base64">([^<]+)</script>', page)
        assert packed is not None
        return json.loads(gzip.decompress(base64.b64decode(packed.group(1))))

    data = {**block("agentnb-data"), **block("agentnb-data-later")}
    assert secret not in json.dumps(data)
    n = len(dbg.events)
    assert data["count"] == n and len(data["detail"]) == n and len(data["rows"]["m"]) == n
    assert data["header"]["state"] == "COMPLETED" and data["header"]["static"] is True
    seq = next(e.seq for e in dbg.events if e.type == "ResultsBound")
    version, count = data["where"][seq]
    assert count == len(dbg.timeline.messages_at(seq))
    shown = "".join(data["messages"][i] for i in data["versions"][version][:count])
    assert shown == "".join(cards.message_html(m) for m in dbg.timeline.messages_at(seq))
    same = dbg.run.transcript.to_html(tmp_path / "t.html") if dbg.run else None
    # the view's two data blocks, the front end, and the transcript itself (agentnb/_embedded.py)
    assert same is not None and same.read_text(encoding="utf-8").count("<script") == 4


def test_the_front_end_is_read_from_widgets() -> None:
    from agentnb._debugger import assets

    root = Path(__file__).resolve().parents[1] / "widgets"
    for name in ("debugger.js", "debugger.css"):
        assert assets.text(name) == (root / name).read_text(encoding="utf-8")
    assert "export default { initialize, render }" in assets.text("debugger.js")
    assert anb.Debugger(anb.Transcript([])).view._esm == assets.text("debugger.js")


def test_an_approval_answer_belongs_to_its_tool_in_rows_and_breakpoints() -> None:
    dbg = story_debugger("refund")
    dbg.cont()
    dbg.approve(dbg.pending()[0])
    resolved = next(e for e in dbg.events if e.type == "ApprovalResolved")
    rows = dbg.rows()
    assert rows["tools"][rows["t"][resolved.seq]] == "create_refund"
    dbg.toggle_breakpoint(resolved.seq)
    assert [b.label() for b in dbg.breakpoints] == ["tool = create_refund"]


def test_before_the_first_event_the_header_names_the_run_and_its_model() -> None:
    dbg = story_debugger("weather")
    header = dbg.view.header
    assert header["run_id"] == dbg.run.run_id and header["model"] == "scripted:story:weather"
    assert header["mode"] == "live · not started: Step or Continue" and header["state"] == "NEW"
    static = dbg.fallback_html()
    assert f"<code>{dbg.run.run_id}</code>" in static and "scripted:story:weather" in static and "0 events" in static
    dbg.step()
    assert dbg.view.header["mode"] == "live"
    assert repr(dbg).endswith(" 1 event>") and "1 event ·" in dbg.fallback_html()


def test_the_static_view_says_it_is_a_saved_snapshot_and_is_marked_for_the_widget_to_replace() -> None:
    dbg = story_debugger("weather").cont()
    html = dbg.fallback_html()
    head = html[html.index('<div class="agentnb-header">'):].split("</div>")[0]
    assert '<span class="agentnb-mode">saved snapshot</span>' in head and "live" not in head.replace("badge-live", "")
    assert "agentnb-static-view" in html  # debugger.css hides it once the live widget is drawn below
    assert "agentnb-static-view" not in dbg.view.snapshot  # the widget's own snapshot is not the output's view


def test_displayed_outside_a_kernel_only_the_static_view_shows() -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("go").run()
    InteractiveShell.instance()  # a terminal's shell: no kernel, no widget front end
    try:
        with capture_output() as shown:
            run._ipython_display_()
    finally:
        InteractiveShell.clear_instance()
    (output,) = shown.outputs
    assert output.data["text/plain"] == repr(run) and "agentnb-static-view" in output.data["text/html"]
    assert "application/vnd.jupyter.widget-view+json" not in output.data


def test_the_saved_snapshot_catches_up_with_the_last_of_quick_steps() -> None:
    dbg = story_debugger("weather")
    dbg._repr_mimebundle_()  # displayed: the snapshot is drawn now, then at most once a second
    assert 'data-events="0"' in dbg.view.snapshot
    dbg.step()
    dbg.step()  # both within the second: throttled
    assert 'data-events="2"' not in dbg.view.snapshot
    deadline = time.monotonic() + 10
    while 'data-events="2"' not in dbg.view.snapshot:
        assert time.monotonic() < deadline, "the last steps never reached the snapshot"
        time.sleep(0.05)

