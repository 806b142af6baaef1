"""The rows a page is sent: every row's codes as binary columns, the texts of the rows in sight on request."""

from __future__ import annotations

import json
import sys
from array import array
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger import cards
from agentnb._debugger.tree import tree_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from debugger import long_run  # noqa: E402

Sent = list[tuple[dict[str, Any], list[bytes]]]


def _listening(dbg: anb.Debugger) -> Sent:
    sent: Sent = []
    dbg.view.send = lambda content, buffers=None: sent.append((content, list(buffers or [])))  # type: ignore[method-assign]
    return sent


def _hello(events: list[Any]) -> tuple[anb.Debugger, Sent]:
    dbg = anb.Debugger(anb.Transcript(events), start="end")
    sent = _listening(dbg)
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p"}, [])
    return dbg, sent


def _column(dtype: str, data: bytes) -> list[int] | list[float]:
    return array({"u1": "B", "u2": "H", "i4": "i", "f8": "d"}[dtype], data).tolist()


@pytest.fixture(scope="module")
def big() -> list[Any]:
    return list(long_run(100_000).events)


def test_the_answer_to_a_hello_does_not_grow_with_the_run_but_by_its_codes(big: list[Any]) -> None:
    """10,000 and 100,000 events: the JSON of the answer is the same size (vocabularies, the texts of the rows
    around the selected event); the binary columns cost a few bytes an event."""
    sizes = {}
    for n in (10_000, len(big)):
        dbg, sent = _hello(big[:n])
        kinds = [c["kind"] for c, _ in sent]
        assert kinds == ["reset", "rows", "texts", "building", "welcome"], kinds  # the tree: built after the rows
        assert dbg._tree.wait(120)
        kinds = [c["kind"] for c, _ in sent]
        assert kinds[5:] == ["tree", "texts"], kinds  # then sent, and the labels around the selected event
        text = sum(len(json.dumps(c)) for c, _ in sent)
        binary = sum(len(b) for _, bs in sent for b in bs)
        sizes[n] = (text, binary)
    (small_text, small_binary), (big_text, big_binary) = sizes[10_000], sizes[len(big)]
    assert big_text < 100_000 and big_text <= small_text * 1.2, sizes  # bounded, whatever the run's length
    assert big_binary <= 40 * len(big), sizes  # every row's codes and the tree, as typed arrays
    assert big_binary > 5 * small_binary, sizes  # (they do grow with the run: they are every row's)


def test_the_binary_columns_are_the_rows_codes_and_the_tree() -> None:
    run = long_run(3_000)
    dbg, sent = _hello(list(run.events))
    rows = dbg.rows()
    (head, buffers), = [(c, b) for c, b in sent if c["kind"] == "rows"]
    assert "m" not in head and head["start"] == 0 and head["end"] == len(run.events)  # the texts: on request
    near, labels = [c for c, _ in sent if c["kind"] == "texts"]  # but those around the selected event go along
    last = len(run.events)  # the selected event is the last one (start="end")
    assert near["rows"] == [[last - 1 - 400, last]] and near["m"] == rows["m"][last - 401:]
    assert labels["nodes"][0] == [0, 1] and labels["l"][0] == tree_of(run.events).nodes[0].label  # after the tree
    for (name, dtype), data in zip(head["cols"], buffers, strict=True):
        assert _column(dtype, data) == rows[name], name
    (tree, tbuf), = [(c, b) for c, b in sent if c["kind"] == "tree"]
    built = tree_of(run.events)
    assert _column("i4", tbuf[0]) == built.groups and tree["count"] == len(built.nodes)
    assert tree["l"] == [n.label for n in built.nodes]  # a few hundred nodes: their labels go along
    fields = [*tree["ints"], *tree["floats"], *tree["codes"]]
    got = {f: _column("f8" if f in tree["floats"] else "i4", b) for f, b in zip(fields, tbuf[1:], strict=True)}
    assert got["p"] == [n.parent for n in built.nodes] and got["b"] == [n.last for n in built.nodes]
    assert [tree["vocab"]["n"][c] for c in got["n"]] == [n.kind for n in built.nodes]
    assert got["t1"] == pytest.approx([n.end_ms for n in built.nodes])


def test_a_page_asks_for_the_texts_in_sight_and_searches_the_kernel() -> None:
    run = long_run(3_000)
    events = list(run.events)
    dbg, sent = _hello(events)
    sent.clear()
    dbg.view._handle_custom_msg({"kind": "texts?", "rows": [[2_990, 3_100], [10, 12]], "nodes": [[0, 3]]}, [])
    (answer, _), = sent
    assert answer["kind"] == "texts" and answer["rows"] == [[2_990, len(events)], [10, 12]]
    seqs = [*range(2_990, len(events)), 10, 11]
    assert answer["m"] == [cards.summary_text(events[s]) for s in seqs] == [dbg.rows()["m"][s] for s in seqs]
    assert answer["w"] == [dbg.rows()["w"][s] for s in seqs]
    assert answer["nodes"] == [[0, 3]] and answer["l"] == [n.label for n in tree_of(events).nodes[:3]]
    sent.clear()
    dbg.view._handle_custom_msg({"kind": "search?", "words": ["alpha-7"], "id": 1}, [])
    (found, buffers), = sent
    matched = array("i", buffers[0]).tolist()
    expected = [s for s, m in enumerate(dbg.rows()["m"]) if "alpha-7" in m.lower()]
    assert found["kind"] == "found" and found["n"] == len(events) and matched == expected and expected


def test_a_live_runs_new_rows_carry_their_texts() -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    dbg = anb.Debugger(loop.start("Paris?"))
    sent = _listening(dbg)
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p"}, [])
    dbg.step()
    dbg.step()
    rows = [c for c, _ in sent if c["kind"] == "rows"]
    assert rows and all(len(c["m"]) == c["end"] - c["start"] for c in rows)
    trees = [c for c, _ in sent if c["kind"] == "tree"]
    assert trees and all("l" in c for c in trees)  # a few changed nodes: their labels go along
