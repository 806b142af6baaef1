"""The saved static view shows the tree (run → turns → model and tool calls), and the tree's statuses are the fold's."""

from __future__ import annotations

import re

import pytest

import agentnb as anb
from agentnb._debugger import static_tree, viewdata
from agentnb._debugger.timeline import Timeline
from agentnb._debugger.tree import tree_of
from agentnb.events import CallRejected


def _items(html: str, kind: str) -> list[str]:
    return re.findall(rf'<li class="agentnb-tree-{kind}">(.*?)(?:<ul>|</li>)', html)


def test_the_static_view_lists_the_tree_above_the_events() -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
    run = loop.start("Weather in Paris and Rome?").run()
    html = viewdata.fallback_html(Timeline(run.events), live=False, style=False)
    assert html.index('class="agentnb-fallback-tree"') < html.index('class="agentnb-fallback-events"')
    nodes = tree_of(run.events).nodes
    assert len(_items(html, "turn")) == sum(n.kind == "turn" for n in nodes) == 2
    calls = _items(html, "call")
    assert len(calls) == 3 and all("get_weather" in c and "<i>ok</i>" in c for c in calls)
    (run_line,) = _items(html, "run")
    total = sum(n.tokens for n in nodes if n.kind == "model")
    assert f"{total:,} tok" in run_line and "<i>COMPLETED</i>" in run_line
    assert html.count("<ul>") == html.count("</ul>") and html.count("<li") == html.count("</li>") == len(nodes)


def test_a_long_run_lists_its_first_and_last_nodes_and_says_how_many_it_left_out() -> None:
    script = [{"tool_calls": [{"name": "get_weather", "arguments": {"city": f"c{i}"}}]} for i in range(40)]
    loop = anb.Loop(model=anb.ScriptedModel([*script, {"text": "done"}]), tools=anb.stories.tools("weather"),
                    max_turns=50)
    run = loop.start("go").run()
    n = len(tree_of(run.events).nodes)
    html = viewdata.fallback_html(Timeline(run.events), live=False, rows=40)  # 20 nodes: the first and last 10
    assert f"… {n - 20:,} more nodes …" in html and html.count("<li") == 21
    assert "c0" in html and "c39" in html and "c20" not in html.split("agentnb-fallback-events")[0]


def test_past_its_bound_the_static_view_draws_the_tree_of_the_first_events_and_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    events = loop.start("Paris?").run().events
    monkeypatch.setattr(static_tree, "STATIC_TREE_EVENTS", 4)
    html = viewdata.fallback_html(Timeline(events), live=False)
    assert f"the tree of the first 4 of {len(events)} events" in html and len(_items(html, "turn")) == 1
    built = tree_of(events)  # the debugger's own tree, once it holds every event, is drawn whole
    whole = viewdata.fallback_html(Timeline(events), live=False, built=built)
    assert "the tree of the first" not in whole and len(_items(whole, "turn")) == 2


def test_a_call_compression_skips_shows_skipped_in_the_tree_and_the_static_view() -> None:
    @anb.tool
    def store(text: str) -> str:
        """Store a text."""
        return "stored " + text

    history = [{"tool_calls": [{"name": "store", "arguments": {"text": f"q{i}"}}]} for i in range(3)]
    huge = {"tool_calls": [{"name": "store", "arguments": {"text": f"{i}" * 1500}} for i in range(3)]}
    budget = anb.Budget(context_window=1200, compress_at=0.5)
    run = anb.Loop(model=anb.ScriptedModel([*history, huge, {"text": "answer"}]), tools=[store],
                   budget=budget).start("go").run()
    skipped = {e.call_id for e in run.events if isinstance(e, CallRejected) and e.reason == "skipped"}
    assert skipped, "the scenario must skip calls"
    tree = tree_of(run.events)
    by_call = {getattr(run.events[n.first], "call_id", ""): n.status for n in tree.nodes if n.kind == "call"}
    assert {by_call[c] for c in skipped} == {"skipped"}
    html = viewdata.fallback_html(Timeline(run.events), live=False)
    assert sum("<i>skipped</i>" in c for c in _items(html, "call")) == len(skipped)


def test_the_tree_drawn_once_per_length_is_the_tree_of_the_events_as_they_stand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(static_tree, "STATIC_TREE_EVENTS", 12)
    built: list[int] = []
    real = static_tree.tree_of

    def counting(events: list[anb.events.BaseEvent]) -> object:
        built.append(len(events))
        return real(events)

    monkeypatch.setattr(static_tree, "tree_of", counting)
    run = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel")).start("?")
    tl, lengths, builds = Timeline(), set(), 0
    while run.step() is not None:
        tl.extend(run.events[len(tl):])
        lengths.add(min(len(tl), 12))
        before = len(built)
        shown = [static_tree.static_tree(tl, rows) for rows in (400, 100)]  # the output, then the snapshot
        builds += len(built) - before
        fresh = Timeline(run.events)
        assert shown == [static_tree.static_tree(fresh, rows) for rows in (400, 100)], len(tl)
    # once per length while the log is short, then the tree of its first 12 events, once
    assert len(run.events) > 12 and builds == len(lengths)
