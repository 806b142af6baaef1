"""A long run's tree, built after its rows in a thread of its own (agentnb/_debugger/tree.py: SentTree, Building).

What a page is sent is decoded as the page decodes it (widgets/debugger.js applyTree) and compared with the tree
built in one go. The build is held at an event by a gate (a patched ``TreeEncoder.add`` that waits in the
building thread), never by timing: while it waits, the page's clicks and requests are answered, and a live run
goes on appending.
"""

from __future__ import annotations

import math
import sys
import threading
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger import rows as rows_mod
from agentnb._debugger import tree as tree_mod
from agentnb.events import BaseEvent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from debugger import long_run  # noqa: E402

Sent = list[tuple[dict[str, Any], list[bytes]]]
WAIT = 60  # seconds: a safety net against a hang, never a measure


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of a few hundred events take the long runs' way: built in the background, in small chunks."""
    monkeypatch.setattr(tree_mod.SentTree, "AT_ONCE", 20)
    monkeypatch.setattr(tree_mod.Building, "CHUNK", 7)
    monkeypatch.setattr(rows_mod, "TEXTS_WITH_ROWS", 50)  # and their texts and labels go as asked for
    monkeypatch.setattr(tree_mod, "LABELS_WITH_NODES", 10)


class Gate:
    """Holds the building thread when it is about to place event ``at``, until :meth:`open` (or WAIT runs out)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int) -> None:
        self.at, self.reached, self.opened, self.timed_out = at, threading.Event(), threading.Event(), False
        add = tree_mod.TreeEncoder.add
        main = threading.main_thread()

        def gated(tree: tree_mod.TreeEncoder, ev: BaseEvent) -> None:
            if ev.seq == self.at and threading.current_thread() is not main and not self.reached.is_set():
                self.reached.set()
                self.timed_out = not self.opened.wait(WAIT)
            add(tree, ev)

        monkeypatch.setattr(tree_mod.TreeEncoder, "add", gated)

    def open(self) -> None:
        self.opened.set()


def _listening(dbg: anb.Debugger) -> Sent:
    sent: Sent = []
    dbg.view.send = lambda content, buffers=None: sent.append((content, list(buffers or [])))  # type: ignore[method-assign]
    return sent


def _hello(dbg: anb.Debugger) -> None:
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p"}, [])


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def page_tree(sent: Sent) -> tuple[list[int], list[dict[str, Any]]]:
    """Each event's group and the nodes, as a page holds them after these messages (debugger.js applyTree)."""
    groups: list[int] = []
    nodes: dict[int, dict[str, Any]] = {}
    for content, buffers in sent:
        if content["kind"] == "reset":
            groups, nodes = [], {}
        elif content["kind"] == "tree":
            start = content["start"]
            assert start <= len(groups), "a tree message past what the page has is dropped by the page"
            groups[start:] = array("i", buffers[0]).tolist()
            fields = [*content["ints"], *content["floats"], *content["codes"]]
            cols = {f: array("d" if f in content["floats"] else "i", b).tolist()
                    for f, b in zip(fields, buffers[1:], strict=True)}
            for j, i in enumerate(cols["i"]):
                nodes[i] = {f: content["vocab"][f][cols[f][j]] if f in content["codes"] else _clean(cols[f][j])
                            for f in fields}
            if start == 0:
                nodes = {i: v for i, v in nodes.items() if i < content["count"]}
    return groups, [nodes[i] for i in sorted(nodes)]


def expected(events: list[BaseEvent]) -> tuple[list[int], list[dict[str, Any]]]:
    """The same, from the tree built in one go."""
    tree = tree_mod.tree_of(events)
    return tree.groups, [{"i": n.i, "p": n.parent, "d": n.depth, "a": n.first, "b": n.last, "f": n.fragments,
                          "t0": n.start_ms, "t1": n.end_ms, "tok": n.tokens, "c": n.cost, "x0": n.ran[0],
                          "x1": n.ran[1], "n": n.kind, "x": n.status, "tool": n.tool, "e": n.effect}
                         for n in tree.nodes]


def story_run(name: str, **options: Any) -> anb.Run:
    loop = anb.Loop(model=anb.ScriptedModel.story(name, **options), tools=anb.stories.tools(name))
    return loop.start("go").run()


def runs_of_every_story(long: int = 600) -> Iterator[tuple[str, list[BaseEvent]]]:
    """Every story, whole and streamed, a long streamed run of about ``long`` events and a fork of it."""
    for name in anb.stories.names():
        yield name, list(story_run(name).events)
        yield f"{name}, streamed", list(story_run(name, stream=True, chunk_size=2).events)
    big = long_run(long)
    yield "long", list(big.events)
    yield "a fork of it", list(big.fork(at=len(big.events) // 2).run().events)


@pytest.mark.parametrize("chunk", [1, 7, 100])
def test_the_tree_built_after_the_rows_is_the_tree_built_in_one_go(monkeypatch: pytest.MonkeyPatch,
                                                                   chunk: int) -> None:
    monkeypatch.setattr(tree_mod.Building, "CHUNK", chunk)
    for name, events in runs_of_every_story():
        if len(events) <= tree_mod.SentTree.AT_ONCE:
            continue
        dbg = anb.Debugger(anb.Transcript(events), start="end")
        sent = _listening(dbg)
        _hello(dbg)
        assert dbg._tree.wait(WAIT), name
        kinds = [c["kind"] for c, _ in sent if c["kind"] != "texts"]
        assert kinds == ["reset", "rows", "building", "welcome", "tree"], (name, kinds)  # the rows first
        assert page_tree(sent) == expected(events), name
        labels = dbg._tree.labels([[0, len(events)]])["l"]
        assert labels == [n.label for n in tree_mod.tree_of(events).nodes], name


def test_a_click_and_the_texts_are_answered_while_the_tree_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    events = list(long_run(400).events)
    gate = Gate(monkeypatch, at=250)  # the build waits there, in the middle of a chunk, until the test says
    dbg = anb.Debugger(anb.Transcript(events), start="end")
    sent = _listening(dbg)
    _hello(dbg)
    assert gate.reached.wait(WAIT)
    assert [c["kind"] for c, _ in sent][-2:] == ["building", "welcome"]
    sent.clear()
    dbg.view._handle_custom_msg({"kind": "call", "method": "select", "args": {"seq": 17}}, [])
    assert dbg.selected == 17 and 'data-seq="17"' in dbg.view.detail  # the card came, the tree still building
    dbg.view._handle_custom_msg({"kind": "texts?", "rows": [[10, 20]], "nodes": [[0, 5]]}, [])
    (texts, _), = [m for m in sent if m[0]["kind"] == "texts"]
    assert texts["rows"] == [[10, 20]] and len(texts["m"]) == 10 and texts["l"] == []  # no node yet: no label
    assert not [c for c, _ in sent if c["kind"] == "tree"]
    gate.open()
    assert dbg._tree.wait(WAIT) and not gate.timed_out
    assert page_tree(sent) == expected(events)  # sent after the clear: the tree whole
    labels = [c for c, _ in sent if c["kind"] == "texts"][-1]
    assert labels["nodes"][0] == [0, 1]  # and the labels around the selected event (17) go along


def test_a_live_run_appending_while_its_tree_builds_loses_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    run = long_run(300)  # a live run, not over: the debugger goes on stepping it
    gate = Gate(monkeypatch, at=120)
    dbg = anb.Debugger(run)
    sent = _listening(dbg)
    _hello(dbg)
    assert gate.reached.wait(WAIT)
    for _ in range(40):  # rows go as usual; the tree waits
        dbg.step()
    assert not [c for c, _ in sent if c["kind"] == "tree"]
    assert len(dbg.events) > 300
    gate.open()
    assert dbg._tree.wait(WAIT) and not gate.timed_out
    for _ in range(25):  # and then the tree follows the run, a live update at a time
        dbg.step()
    events = list(dbg.events)
    assert page_tree(sent) == expected(events)
    rows = [c for c, _ in sent if c["kind"] == "rows"]
    assert rows[-1]["end"] == len(events)


def test_appended_during_the_encoding_or_the_hand_over_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events that come after the thread placed its last one reach the page with the tree's hand-over."""
    run = long_run(200)
    dbg = anb.Debugger(run)
    binary = tree_mod.TreeEncoder.binary
    main = threading.main_thread()

    def late(tree: tree_mod.TreeEncoder, events: list[BaseEvent], start: int, end: int,
             labels: bool | None = None) -> tuple[dict[str, Any], list[bytes]]:
        if threading.current_thread() is not main:  # the building thread encodes: the run goes on meanwhile
            for _ in range(15):
                run.step()
        return binary(tree, events, start, end, labels)

    monkeypatch.setattr(tree_mod.TreeEncoder, "binary", late)
    sent = _listening(dbg)
    _hello(dbg)
    assert dbg._tree.wait(WAIT)
    dbg.refresh()
    assert page_tree(sent) == expected(list(dbg.events))


def test_another_timeline_stops_the_build_and_its_tree_is_never_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    events = list(long_run(300).events)
    gate = Gate(monkeypatch, at=100)
    dbg = anb.Debugger(anb.Transcript(events), start="end")
    sent = _listening(dbg)
    _hello(dbg)
    assert gate.reached.wait(WAIT)
    building = dbg._tree.building
    assert building is not None
    dbg.restart()  # back to the first event: a new timeline
    gate.open()
    assert building.finished.wait(WAIT) and building.encoded is None  # stopped at its next chunk
    dbg.step()
    groups, nodes = page_tree(sent)
    assert (groups, nodes) == expected(events[:2])  # the page holds the new timeline's tree only


def test_a_second_page_gets_the_built_tree_without_building_or_encoding_it_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    events = list(long_run(300).events)
    dbg = anb.Debugger(anb.Transcript(events), start="end")
    _listening(dbg)
    _hello(dbg)
    assert dbg._tree.wait(WAIT) and dbg._tree.ready
    encoded: list[int] = []
    columns = tree_mod.columns
    monkeypatch.setattr(tree_mod, "columns", lambda nodes, vocab: encoded.append(1) or columns(nodes, vocab))
    for page in ("q", "r"):
        sent = _listening(dbg)
        dbg.view._handle_custom_msg({"kind": "hello", "page": page}, [])
        assert "building" not in [c["kind"] for c, _ in sent]
        assert page_tree(sent) == expected(events)
    assert encoded == []


def test_a_build_that_fails_says_so_and_the_list_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    events = list(long_run(300).events)
    add = tree_mod.TreeEncoder.add

    def broken(tree: tree_mod.TreeEncoder, ev: BaseEvent) -> None:
        if ev.seq == 50 and threading.current_thread() is not threading.main_thread():
            raise ValueError("no such node")
        add(tree, ev)

    monkeypatch.setattr(tree_mod.TreeEncoder, "add", broken)
    dbg = anb.Debugger(anb.Transcript(events), start="end")
    sent = _listening(dbg)
    _hello(dbg)
    assert dbg._tree.wait(WAIT)
    notes = [c for c, _ in sent if c["kind"] == "building"]
    assert [n["error"] for n in notes] == ["", "ValueError: no such node"]
    assert dbg._built() is None and not [c for c, _ in sent if c["kind"] == "tree"]
    dbg.select(5)  # the debugger goes on
    assert 'data-seq="5"' in dbg.view.detail
