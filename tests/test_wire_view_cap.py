"""The wire view of a long run's request: its start and its end, and what it left out, not megabytes per click."""

from __future__ import annotations

import json
import re

import agentnb as anb
from agentnb._debugger import viewdata
from agentnb._debugger.bundle import export_bundle
from agentnb._debugger.timeline import Timeline
from agentnb._debugger.viewdata import WIRE_TEXT_CAP
from tests.conftest import add


def test_the_wire_view_of_a_long_request_shows_its_start_and_end_and_says_what_it_left_out() -> None:
    trips = [{"text": f"step {i}: " + "lorem ipsum " * 60,
              "tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]} for i in range(300)]
    loop = anb.Loop(model=anb.ScriptedModel([*trips, {"text": "the last answer"}]), tools=[add], max_turns=400)
    run = loop.start("the first question").run()
    assert run.output == "the last answer", run.reason
    tl = Timeline(run.events)
    for title in ("OpenAI Chat Completions", "Anthropic Messages", "Google Gemini"):
        shown = viewdata.wire_view(tl, len(tl) - 1, title)["request"]
        assert len(shown) < WIRE_TEXT_CAP + 500, title
        assert "the first question" in shown and "step 299: lorem" in shown, title  # the start and the end
        left = re.search(r"… ([\d,]+) characters left out here \(the first ([\d,]+) and the last ([\d,]+) of "
                         r"([\d,]+) are shown", shown)
        assert left is not None, title
        gap, first, last, total = (int(g.replace(",", "")) for g in left.groups())
        assert gap + first + last == total > WIRE_TEXT_CAP
    short = anb.Loop(model=anb.ScriptedModel([{"text": "x"}])).start("hi").run()
    small = viewdata.wire_view(Timeline(short.events), 2, "OpenAI Chat Completions")["request"]
    assert "left out here" not in small and json.loads(small)["messages"][-1]["content"] == "hi"


def test_an_export_keeps_no_request_the_view_would_cut() -> None:
    def run_of(trips: int) -> Timeline:
        turns = [{"text": "lorem ipsum " * 80, "tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]}
                 for i in range(trips)]
        loop = anb.Loop(model=anb.ScriptedModel([*turns, {"text": "done"}]), tools=[add], max_turns=trips + 5)
        return Timeline(loop.start("go").run().events)

    for trips in (20, 250):
        tl = run_of(trips)
        kept = export_bundle(tl, title="t")["wire"]
        assert kept == viewdata.static_bundle(tl, title="t")["wire"]
        assert not any(viewdata.CUT in v["request"] for views in kept.values() for v in views.values())
        if trips == 20:  # short requests: the latest are kept
            assert str(tl.turn_starts()[-1]) in kept
        else:  # the latest requests are over the cap: the export keeps none of them
            assert str(tl.turn_starts()[-1]) not in kept
            assert viewdata.CUT in viewdata.wire_view(tl, tl.turn_starts()[-1], "OpenAI Chat Completions")["request"]
