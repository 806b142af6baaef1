"""The debugger, driven through its public methods and its buttons (the same handlers a click fires)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import agentnb as anb
from agentnb.debugger import cards
from agentnb.debugger.diagram import state_diagram
from agentnb.debugger.timeline import Timeline
from agentnb.events import EVENT_CLASSES

S = anb.LoopState


def story_debugger(name: str = "refund", **model_options: Any) -> anb.Debugger:
    loop = anb.Loop(model=anb.ScriptedModel.story(name, **model_options), tools=anb.stories.tools(name),
                    retry_base_delay=0)
    return anb.Debugger(loop.start("go"))


def test_every_event_kind_has_a_summary_and_a_card() -> None:
    assert set(cards._SUMMARIES) == set(EVENT_CLASSES)
    assert set(cards._BODIES) == set(EVENT_CLASSES)


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


def test_step_next_turn_and_header() -> None:
    dbg = story_debugger("weather")
    assert dbg.state is S.NEW and "NEW" in dbg.header.value
    ev = dbg.step()
    assert ev is not None and ev.type == "RunStarted" and len(dbg.events) == 1
    dbg.step()
    dbg.next_turn()
    assert dbg.events[-1].type == "ModelRequested" and dbg.events[-1].turn == 2
    assert "MODEL_REQUESTED" in dbg.header.value
    dbg.cont()
    assert dbg.state is S.COMPLETED and "COMPLETED" in dbg.header.value and "the model answered" in dbg.header.value
    assert dbg.btn_step.disabled and dbg.btn_cont.disabled
    assert dbg.step() is None and "over" in dbg.message


def test_buttons_drive_the_same_methods() -> None:
    dbg = story_debugger("weather")
    dbg.btn_step.click()
    dbg.btn_step.click()
    assert [e.type for e in dbg.events] == ["RunStarted", "ModelRequested"]
    dbg.btn_cont.click()  # a background thread, like in the notebook
    dbg.wait()
    assert dbg.state is S.COMPLETED and not dbg.running


def test_approve_button_resolves_the_pause_and_continues() -> None:
    dbg = story_debugger("refund")
    dbg.cont()
    assert dbg.state is S.WAITING_APPROVAL and dbg.btn_step.disabled
    (panel,) = dbg.approvals.children
    approve = _find(panel, "agentnb-btn-approve")
    approve.click()
    dbg.wait()
    assert dbg.state is S.COMPLETED and dbg.approvals.children == ()
    assert "Done: refund" in (dbg.run.output if dbg.run else "")


def test_deny_button_sends_the_reason() -> None:
    dbg = story_debugger("refund")
    dbg.cont()
    (panel,) = dbg.approvals.children
    _find(panel, "agentnb-deny-reason").value = "too much"
    _find(panel, "agentnb-btn-deny").click()
    dbg.wait()
    assert dbg.run is not None and dbg.run.state is S.COMPLETED
    assert "Denied by the user: too much" in json.dumps([r.content for m in dbg.run.messages for r in m.tool_results])


def test_edit_arguments_is_validated_before_approving() -> None:
    dbg = story_debugger("refund")
    dbg.cont()
    (panel,) = dbg.approvals.children
    edit, error, edited = (_find(panel, c) for c in
                           ("agentnb-edit-arguments", "agentnb-edit-error", "agentnb-btn-approve-edited"))
    edit.value = "{not json"
    edited.click()
    assert "not JSON" in error.value and dbg.state is S.WAITING_APPROVAL
    edit.value = json.dumps({"order_id": "42", "amount_cents": "lots"})
    edited.click()
    assert "amount_cents" in error.value and dbg.state is S.WAITING_APPROVAL
    edit.value = json.dumps({"order_id": "42", "amount_cents": 700})
    edited.click()
    dbg.wait()
    assert dbg.state is S.COMPLETED and dbg.run is not None and "$7.00" in (dbg.run.output or "")


def test_breakpoints_stop_continue_and_can_be_removed() -> None:
    dbg = story_debugger("parallel", stream=True)
    bp_tool = dbg.add_breakpoint(tool="get_weather")
    dbg.cont()
    # the first event that names the tool: the first argument fragment of its call
    assert dbg.events[-1].type == "ArgumentsMerged" and dbg.events[-1].name == "get_weather"
    assert "breakpoint: tool = get_weather" in dbg.message
    dbg.remove_breakpoint(bp_tool)
    dbg.add_breakpoint(state="RESULTS_READY")
    dbg.cont()
    assert dbg.state is S.RESULTS_READY
    dbg.add_breakpoint(when=lambda e: e.type == "TextMerged")
    assert len(dbg.breakpoints) == 2 and len(dbg.bp_list.children) == 2
    dbg.cont()
    assert dbg.events[-1].type == "TextMerged"
    for chip in list(dbg.bp_list.children):
        chip.click()  # the ✕ chip removes its breakpoint
    assert dbg.breakpoints == [] and dbg.bp_list.children == ()
    dbg.bp_kind.value, dbg.bp_value.value = "event", "RunFinished"
    dbg.bp_add.click()
    assert [b.label() for b in dbg.breakpoints] == ["event = RunFinished"]
    dbg.cont()
    assert dbg.state is S.COMPLETED
    with pytest.raises(ValueError, match="no event type"):
        dbg.add_breakpoint(event="Nope")
    with pytest.raises(ValueError, match="exactly one"):
        dbg.add_breakpoint(event="RunFinished", tool="x")


def test_pause_stops_a_background_continue_between_events() -> None:
    model = anb.ScriptedModel.story("weather", stream=True, chunk_size=1, chunk_delay=0.01)
    dbg = anb.Debugger(anb.Loop(model=model, tools=anb.stories.tools("weather")).start("go"))
    dbg.cont(background=True)
    time.sleep(0.15)
    assert dbg.running and not dbg.btn_pause.disabled
    dbg.pause()
    assert not dbg.running and dbg.message == "paused" and not dbg.state.is_terminal
    n = len(dbg.events)
    time.sleep(0.05)
    assert len(dbg.events) == n  # nothing runs after a pause
    dbg.cont()
    assert dbg.state is S.COMPLETED


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
    assert not dbg.follow and 'data-seq="4"' in dbg.conversation.value and "viewing event 4" in dbg.status.value
    assert 'class="agentnb-card agentnb-selected agentnb-ev-' in dbg.cards.value
    assert dbg.scrubber.value == 4
    dbg.scrubber.value = 7  # the slider selects too
    assert dbg.selected == 7
    dbg.btn_prev.click()
    assert dbg.selected == 6
    dbg.btn_last.click()
    assert dbg.selected == len(dbg.events) - 1 and dbg.follow


def test_replay_steps_through_a_saved_transcript_without_a_model(tmp_path: Path) -> None:
    run = anb.Loop(model=anb.ScriptedModel.story("parallel", stream=True), tools=anb.stories.tools("parallel"))
    run = run.start("go").run()
    path = tmp_path / "t.jsonl"
    run.transcript.save(path)
    dbg = anb.Debugger.load(path)
    assert not dbg.live and len(dbg.events) == 1 and "replay · 1/" in dbg.header.value
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


def test_a_run_displays_as_its_debugger() -> None:
    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("go").run()
    bundle = run._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "application/vnd.jupyter.widget-view+json" in run.transcript._repr_mimebundle_()


def test_state_diagram_is_drawn_from_the_table() -> None:
    svg = state_diagram(S.EXECUTING)
    for state in S:
        assert f'data-state="{state.value}"' in svg
    assert svg.count("agentnb-current-state") == 1 and 'class="agentnb-current-state" data-state="EXECUTING"' in svg
    assert "<title>EXECUTING → RESULTS_READY: ResultsBound</title>" in svg


def test_meters_follow_the_selected_moment() -> None:
    dbg = story_debugger("calculator")
    dbg.cont()
    assert "turns 3 / 25" in dbg.meter_label.value and dbg.meter_turns.value == 3
    dbg.select(1)
    assert "turns 0 / 25" in dbg.meter_label.value


def test_budget_meters_show_the_limits_that_are_set() -> None:
    model = anb.ScriptedModel([{"tool_calls": [{"name": "get_weather", "arguments": {"city": c}}]}
                               for c in ("Paris", "Oslo", "Tokyo")] + [{"text": "done"}])
    budget = anb.Budget(max_tool_calls=2, max_cost=1.0, prices={"scripted": (100.0, 100.0)}, deadline_s=60)
    loop = anb.Loop(model=model, tools=anb.stories.tools("weather"), budget=budget)
    dbg = anb.Debugger(loop.start("go")).cont()
    label = dbg.meter_label.value
    assert "tool calls 2 / 2" in label and "cost $0." in label and " / 1" in label and "time " in label
    bars = {b._dom_classes[0]: b for b in dbg.meter_bars}
    assert bars["agentnb-meter-tool-calls"].layout.display == "" and bars["agentnb-meter-tool-calls"].value == 2
    assert bars["agentnb-meter-tool-calls"].bar_style == "danger"
    assert bars["agentnb-meter-tokens"].layout.display == "none"  # no token budget set


def _find(widget: Any, css_class: str) -> Any:
    if css_class in getattr(widget, "_dom_classes", ()):
        return widget
    for child in getattr(widget, "children", ()):
        found = _find(child, css_class)
        if found is not None:
            return found
    return None


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
    (panel,) = dbg.approvals.children
    assert _find(panel, "agentnb-btn-approve") is None and _find(panel, "agentnb-edit-arguments") is None
    assert "client" in cards.summary_text(next(e for e in dbg.events if e.type == "ApprovalRequested"))
    _find(panel, "agentnb-submit-value").value = "Ada"
    _find(panel, "agentnb-btn-submit-result").click()
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


def test_wire_view_renders_the_request_for_all_four_providers() -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"), system="Be brief.")
    dbg = anb.Debugger(loop.start("Paris?")).cont()
    assert dbg.wire.value == ""  # drawn only when its tab is open
    dbg.tabs.selected_index = 2
    last_request = [e for e in dbg.events if e.type == "ModelRequested"][-1]
    html = dbg.wire.value
    assert f'data-seq="{last_request.seq}"' in html
    for needle in ("OpenAI Chat Completions", "OpenAI Responses", "Anthropic Messages", "Google Gemini",
                   "tool_call_id", "function_call_output", "tool_use_id", "functionResponse", "systemInstruction"):
        assert needle in html, needle
    dbg.select(1)
    assert 'data-seq="1"' in dbg.wire.value and "1 messages, 1 tools" not in dbg.wire.value


def test_plots_tab_draws_the_run() -> None:
    dbg = story_debugger("parallel")
    dbg.cont()
    assert dbg.plots.value == ""
    dbg.tabs.selected_index = 3
    html = dbg.plots.value
    assert html.count("data:image/png;base64,") == 4, html[:300]


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
