"""What a person approves is what runs: the debugger shows hidden characters written out, and flags them.

An argument ``"\u202e0987654321\u202c"`` (a right-to-left override) is drawn by a browser as ``1234567890``
while the tool receives ``0987654321``. Every view of a waiting call -- the cards, the timeline rows, the
approvals pane, the static ``text/html`` of a saved notebook, the one-file export, the wire view -- must show
it as ``⟨U+202E⟩0987654321⟨U+202C⟩`` with the warning, and never hand the browser the override itself.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import agentnb as anb
from agentnb._debugger import cards, viewdata
from agentnb._debugger.timeline import Timeline
from agentnb._visible import FLAG, visible

S = anb.LoopState
RLO = "\u202e0987654321\u202c"
SHOWN = "⟨U+202E⟩0987654321⟨U+202C⟩"
HIDDEN = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u061c\u2060\ufeff]")


def transfer_run(account: str = RLO, *, call_id: str | None = None) -> tuple[anb.Run, list[str]]:
    received: list[str] = []

    @anb.tool(risk="write")
    def transfer(account: str) -> str:
        """Send the money to an account."""
        received.append(account)
        return "sent"

    call: dict[str, Any] = {"name": "transfer", "arguments": {"account": account}}
    if call_id is not None:
        call["id"] = call_id
    model = anb.ScriptedModel([{"tool_calls": [call]}, {"text": "done"}])
    run = anb.Loop(model=model, tools=[transfer]).start("pay").run()
    assert run.state is S.WAITING_APPROVAL
    return run, received


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def test_every_card_and_row_of_a_waiting_call_shows_the_override_written_out_and_flagged() -> None:
    run, _ = transfer_run()
    tl = Timeline(run.events)
    flagged = {"TurnCompleted", "CallParsed", "CallValidated", "ApprovalRequested"}
    for ev in run.events:
        summary, detail = cards.summary_text(ev), viewdata.detail_html(tl, ev.seq)
        assert not HIDDEN.search(summary) and not HIDDEN.search(detail), ev.type
        if ev.type in flagged:
            assert FLAG in summary and FLAG in detail, ev.type
        if ev.type in flagged - {"TurnCompleted"}:
            assert SHOWN in summary and SHOWN in detail and "1234567890" not in summary + detail, ev.type
    rows = viewdata.RowEncoder().encode(run.events, 0, len(run.events))
    assert not HIDDEN.search(json.dumps(rows, ensure_ascii=False)) and sum(FLAG in m for m in rows["m"]) == 4


def test_the_started_call_shows_the_arguments_it_runs_with_and_the_flag() -> None:
    run, received = transfer_run()
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    assert received == [RLO]  # the tool got the characters themselves
    tl = Timeline(run.events)
    started = next(e for e in run.events if e.type == "ToolStarted")
    detail = viewdata.detail_html(tl, started.seq)
    assert SHOWN in detail and FLAG in detail and not HIDDEN.search(detail)


def test_the_approvals_pane_shows_json_escapes_and_approving_the_text_as_shown_runs_the_same_call() -> None:
    run, received = transfer_run(call_id="call_\u202eevil")
    dbg = anb.Debugger(run)
    (panel,) = dbg.view.pending
    assert panel["flag"] == FLAG
    assert "\\u202e0987654321\\u202c" in panel["arguments"] and not HIDDEN.search(json.dumps(panel, ensure_ascii=False)
                                                                               .replace(panel["call_id"], ""))
    assert panel["shown_id"] == "call_⟨U+202E⟩evil" and panel["call_id"] == "call_\u202eevil"
    # "Approve edited arguments" sends the pane's text back as it is: the very same arguments, not the escapes
    dbg.view._handle_custom_msg({"kind": "call", "method": "approve",
                                 "args": {"call_id": panel["call_id"], "arguments": panel["arguments"]}}, [])
    dbg.wait()
    assert dbg.view.error == "" and received == [RLO]


def test_edited_arguments_that_are_not_a_json_object_are_refused_on_the_page_and_nothing_runs() -> None:
    run, received = transfer_run()
    dbg = anb.Debugger(run)
    (panel,) = dbg.view.pending
    for text, error in [("{oops", "not JSON: "), ("[1, 2]", "the arguments must be a JSON object"),
                        ('"just text"', "the arguments must be a JSON object")]:
        dbg.view._handle_custom_msg({"kind": "call", "method": "approve",
                                     "args": {"call_id": panel["call_id"], "arguments": text}}, [])
        assert dbg.view.error.startswith(error), (text, dbg.view.error)
        assert received == [] and [c.call_id for c in run.pending_approvals()] == [panel["call_id"]]
    dbg.view._handle_custom_msg({"kind": "call", "method": "approve", "args": {"call_id": panel["call_id"]}}, [])
    dbg.wait()  # no edit: the call as the model asked for it
    assert dbg.view.error == "" and len(received) == 1 and run.state is anb.LoopState.COMPLETED


def test_the_static_view_and_the_wire_view_write_it_out() -> None:
    run, _ = transfer_run()
    tl = Timeline(run.events)
    page = viewdata.fallback_html(tl, live=False)
    assert SHOWN in page and FLAG in page and not HIDDEN.search(page) and "1234567890" not in page
    turn = next(e.seq for e in run.events if e.type == "TurnCompleted")
    for provider in viewdata.wire_view(tl, turn, "")["providers"]:
        wire = viewdata.wire_view(tl, turn, provider)
        assert not HIDDEN.search(wire["request"] + wire["response"]), provider


def test_the_one_file_export_holds_no_hidden_character_anywhere(tmp_path: Path) -> None:
    run, _ = transfer_run()
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    page = run.transcript.to_html(tmp_path / "run.html").read_text(encoding="utf-8")
    assert not HIDDEN.search(page)
    data: list[Any] = []
    for packed in re.findall(r'data-encoding="gzip\+base64">([^<]+)</script>', page):
        data.append(json.loads(gzip.decompress(base64.b64decode(packed))))
    texts = strings(data)
    assert len(data) == 2 and not [t for t in texts if visible(t)[1]]
    assert any(SHOWN in t and FLAG in t for t in texts) and not any("1234567890" in t for t in texts)


def test_a_tool_name_from_the_model_is_written_out_in_the_rows_vocabulary() -> None:
    model = anb.ScriptedModel([{"tool_calls": [{"name": "no\u202etool", "arguments": {}}]}, {"text": "done"}])
    run = anb.Loop(model=model, tools=[]).start("go").run()
    rows = viewdata.RowEncoder().encode(run.events, 0, len(run.events))
    assert "no⟨U+202E⟩tool" in rows["tools"] and not HIDDEN.search(json.dumps(rows, ensure_ascii=False))
