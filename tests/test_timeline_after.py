"""A loaded log's timeline reuses the transcript's fold (agentnb/_debugger/timeline.py: ``Timeline.after``).

Its answers at every moment are those of a timeline that folds the log itself, whatever the order it is asked
in and whether its index is built by the queries or by its background thread; a debugger opened on a loaded
transcript folds nothing again before the page has its rows; and a transcript whose events changed since it
was folded is folded again.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger.timeline import Timeline
from agentnb._engine import RunState
from agentnb._transcript import folded
from agentnb.events import ArgumentsMerged, BaseEvent, TextMerged
from tests.test_debugger_tree_building import runs_of_every_story

WAIT = 60  # seconds: a safety net against a hang, never a measure


RUNS = dict(runs_of_every_story(long=400))


def answers(tl: Timeline, seq: int) -> tuple[Any, ...]:
    """Everything a timeline says about the moment after event ``seq``."""
    ev = tl.events[seq]
    call_id = getattr(ev, "call_id", None)
    call = tl.call_at(seq, call_id) if call_id else None
    return (
        tl.messages_at(seq), tl.last_message_at(seq), tl.counters_at(seq),
        tl.text_buffer(seq) if isinstance(ev, TextMerged) else None,
        tl.argument_buffer(seq) if isinstance(ev, ArgumentsMerged) else None,
        (call.part, call.status, call.decision) if call is not None else None,
        tl.call_raw(seq, call_id) if call_id else None, tl.call_arguments(seq, call_id) if call_id else None,
        tl.approval_decision(call_id, seq) if call_id else None,
    )


@pytest.mark.parametrize("name", list(RUNS))
def test_every_moment_is_what_a_timeline_folding_the_log_says(name: str) -> None:
    events = RUNS[name]
    eager = Timeline(events)
    order = list(range(len(events)))
    random.Random(name).shuffle(order)  # asked in any order: the index catches up as far as each one needs
    lazy = Timeline.after(events, RunState.fold(events))
    assert [answers(lazy, k) for k in order] == [answers(eager, k) for k in order]
    assert lazy.history_versions() == eager.history_versions()
    assert lazy.state.messages == eager.state.messages and lazy.indexed == len(events)


@pytest.mark.parametrize("name", ["refund, streamed", "long"])
def test_built_in_the_background_it_says_the_same(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    events = RUNS[name]
    monkeypatch.setattr(Timeline, "CHUNK", 7)
    lazy = Timeline.after(events, RunState.fold(events))
    thread = threading.Thread(target=lazy.build_index)  # as the page's tree thread builds it
    thread.start()
    mid = [answers(lazy, k) for k in range(0, len(events), 5)]  # the page's clicks while it builds
    thread.join(WAIT)
    assert not thread.is_alive() and lazy.indexed == len(events)
    eager = Timeline(events)
    assert mid == [answers(eager, k) for k in range(0, len(events), 5)]


def test_the_last_moment_is_answered_without_building_the_index() -> None:
    events = RUNS["long"]
    lazy = Timeline.after(events, RunState.fold(events))
    last = len(events) - 1
    eager = Timeline(events)
    assert lazy.messages_at(last) == eager.messages_at(last)
    assert lazy.last_message_at(last) == eager.last_message_at(last)
    assert lazy.counters_at(last) == eager.counters_at(last)
    assert lazy.indexed == 0


def test_stepping_on_after_the_end_extends_the_index_and_folds_on(tmp_path: Path) -> None:
    events = RUNS["long"]
    cut = len(events) - 5
    lazy = Timeline.after(events[:cut], RunState.fold(events[:cut]))
    lazy.extend(events[cut:])
    eager = Timeline(events)
    assert [answers(lazy, k) for k in range(len(events))] == [answers(eager, k) for k in range(len(events))]
    assert lazy.state.seq == len(events)


def test_a_refused_event_stays_out_of_the_timeline() -> None:
    events = RUNS["weather"]
    tl = Timeline(events[:3])
    with pytest.raises(anb.TranscriptError):
        tl.extend([events[4]])  # seq 4 after seq 2
    assert len(tl) == tl.indexed == 3
    tl.extend(events[3:])
    assert len(tl) == len(events)


@pytest.fixture
def long_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of a few hundred events takes a long one's way: rows after the hello, the tree in a thread."""
    from agentnb._debugger import tree as tree_mod

    monkeypatch.setattr(anb.Debugger, "EARLY_ROWS", 50)
    monkeypatch.setattr(tree_mod.SentTree, "AT_ONCE", 20)
    monkeypatch.setattr(tree_mod.Building, "CHUNK", 7)
    monkeypatch.setattr(Timeline, "CHUNK", 7)


def _opened(path: Path) -> tuple[anb.Debugger, list[dict[str, Any]]]:
    dbg = anb.Debugger(anb.Transcript.load(path), start="end")
    sent: list[dict[str, Any]] = []
    dbg.view.send = lambda content, buffers=None: sent.append(content)
    return dbg, sent


def _hello(dbg: anb.Debugger) -> None:
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p"}, [])


def test_a_debugger_on_a_loaded_transcript_folds_nothing_again_before_the_rows(tmp_path: Path,
                                                                                long_way: None) -> None:
    path = tmp_path / "long.jsonl"
    anb.Transcript(RUNS["long"]).save(path)
    dbg, sent = _opened(path)
    dbg._repr_mimebundle_()  # the static view and the widget's state: the header, the last card, the meters
    assert dbg.timeline.indexed == 0
    folds: list[int] = []
    apply = RunState.apply

    def counted(rs: RunState, ev: BaseEvent, **kw: Any) -> None:
        folds.append(ev.seq)
        apply(rs, ev, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RunState, "apply", counted)
        _hello(dbg)
        assert max(c["end"] for c in sent if c.get("kind") == "rows") == len(RUNS["long"])
        assert dbg._tree.wait(WAIT)  # the tree's thread builds the index first, then the tree
    assert dbg.timeline.indexed == len(RUNS["long"])
    assert sorted(folds) == list(range(len(RUNS["long"])))  # each event folded once more, for the index only
    assert answers(dbg.timeline, 3) == answers(Timeline(RUNS["long"]), 3)


def test_a_short_log_s_index_is_built_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "weather.jsonl"
    anb.Transcript(RUNS["weather, streamed"]).save(path)
    dbg, _ = _opened(path)
    dbg._repr_mimebundle_()
    assert dbg.timeline.indexed == len(RUNS["weather, streamed"])  # a few milliseconds: no thread for it


def test_the_index_is_built_before_the_tree_and_the_card_waits_for_it(tmp_path: Path, long_way: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """While the index is built, a selected event shows as recorded; then its full card replaces it."""
    from agentnb._debugger import tree as tree_mod

    path = tmp_path / "long.jsonl"
    anb.Transcript(RUNS["long"]).save(path)
    dbg, sent = _opened(path)
    gate, reached = threading.Event(), threading.Event()
    build_index, prepare = Timeline.build_index, tree_mod.TreeEncoder.prepare
    order: list[str] = []

    def held(tl: Timeline) -> None:
        order.append("index")
        reached.set()
        assert gate.wait(WAIT)
        build_index(tl)

    def noted(tree: Any, events: Any, end: int) -> None:
        if not order or order[-1] != "tree":
            order.append("tree")
        prepare(tree, events, end)

    monkeypatch.setattr(Timeline, "build_index", held)
    monkeypatch.setattr(tree_mod.TreeEncoder, "prepare", noted)
    _hello(dbg)
    assert reached.wait(WAIT)
    seq = 5
    dbg.select(seq)  # the page's click, while the index is being built
    card = dbg.view.detail
    assert f'data-seq="{seq}"' in card and 'data-provisional="true"' in card
    assert RUNS["long"][seq].type in card and "being indexed" in card
    assert "being indexed" in dbg.view.conversation and dbg.view.meters == ""
    assert dbg.timeline.indexed == 0  # the click did not build it
    gate.set()
    assert dbg._tree.wait(WAIT)
    assert order == ["index", "tree"]
    full = dbg.view.detail
    assert f'data-seq="{seq}"' in full and "data-provisional" not in full  # the full card came by itself
    from agentnb._debugger import viewdata

    eager = Timeline(RUNS["long"])  # a timeline that folded the log itself
    assert full == viewdata.detail_html(eager, seq) and dbg.view.conversation == viewdata.conversation_html(eager, seq)
    assert dbg.view.meters == viewdata.meters_html(eager, seq) != ""


def test_a_transcript_changed_since_its_fold_is_folded_again(tmp_path: Path) -> None:
    path = tmp_path / "weather.jsonl"
    anb.Transcript(RUNS["weather"]).save(path)
    t = anb.Transcript.load(path)
    whole = folded(t)
    assert folded(t) is whole  # load's own fold, kept
    t.events = t.events[:4]
    assert folded(t) is not whole and folded(t).seq == 4
    t.events.append(RUNS["weather"][4])
    assert folded(t).seq == 5
    shown = t.messages
    shown.clear()  # a caller's list: the kept fold is not changed through it
    assert t.messages == folded(t).messages != []


def test_a_stopped_background_index_stops_and_queries_still_build_it(monkeypatch: pytest.MonkeyPatch) -> None:
    events = RUNS["long"]
    monkeypatch.setattr(Timeline, "CHUNK", 7)
    lazy = Timeline.after(events, RunState.fold(events))
    seen: list[int] = []
    ready = Timeline._ready

    def noted(tl: Timeline, seq: int) -> None:
        seen.append(seq)
        if len(seen) == 3:
            tl.stop_indexing()  # as the widget does when another timeline replaces this one
        ready(tl, seq)

    monkeypatch.setattr(Timeline, "_ready", noted)
    thread = threading.Thread(target=lazy.build_index)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive() and lazy.indexed == 3 * 7 < len(events)
    assert answers(lazy, len(events) - 2) == answers(Timeline(events), len(events) - 2)
    assert lazy.indexed == len(events) - 1


def test_events_appended_while_the_index_is_built_are_indexed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    events = RUNS["long"]
    cut = len(events) - 9
    monkeypatch.setattr(Timeline, "CHUNK", 7)
    lazy = Timeline.after(events[:cut], RunState.fold(events[:cut]))
    gate, reached = threading.Event(), threading.Event()
    index_events = Timeline._index_events
    main = threading.main_thread()

    def held(tl: Timeline, evs: Any, fold: bool) -> None:
        if threading.current_thread() is not main and not reached.is_set():
            reached.set()  # the building thread holds the lock here, in the middle of a chunk
            assert gate.wait(WAIT)
        index_events(tl, evs, fold)

    monkeypatch.setattr(Timeline, "_index_events", held)
    thread = threading.Thread(target=lazy.build_index)
    thread.start()
    assert reached.wait(WAIT)
    appending = threading.Thread(target=lambda: lazy.extend(events[cut:]))
    appending.start()
    appending.join(0.2)  # it waits for the chunk: the index is not built twice over
    assert appending.is_alive() and len(lazy) == cut
    gate.set()
    appending.join(WAIT)
    thread.join(WAIT)
    eager = Timeline(events)
    assert len(lazy) == lazy.indexed == len(events) and lazy.state.seq == len(events)
    assert [answers(lazy, k) for k in range(len(events))] == [answers(eager, k) for k in range(len(events))]
