"""The timeline's tree (agentnb/_debugger/tree.py), without a browser: groups, times, tokens, live encoding."""

from __future__ import annotations

import time
from array import array
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentnb as anb
from agentnb._debugger import rows as rows_mod
from agentnb._debugger import tree as tree_mod
from agentnb._debugger.viewdata import RowEncoder
from agentnb.events import ArgumentsMerged, TextMerged, ToolFinished, ToolStarted, TurnCompleted


@anb.tool
def slow(city: str) -> str:
    """Answer after a while."""
    time.sleep(0.05)
    return city.upper()


def _parallel_run() -> anb.Run:
    model = anb.ScriptedModel([
        {"text": "both", "tool_calls": [{"name": "slow", "arguments": {"city": "Paris"}},
                                        {"name": "slow", "arguments": {"city": "Rome"}}]},
        {"text": "done"},
    ], stream=True, chunk_size=3)
    return anb.Loop(model=model, tools=[slow]).start("go").run()


def test_a_run_is_turns_of_one_model_call_and_one_node_per_tool_call() -> None:
    run = _parallel_run()
    tree = tree_mod.tree_of(run.events)
    kinds = [(n.kind, n.depth) for n in tree.nodes]
    assert kinds == [("run", 0), ("turn", 1), ("model", 2), ("call", 2), ("call", 2), ("turn", 1), ("model", 2)]
    calls = [n for n in tree.nodes if n.kind == "call"]
    assert [c.label for c in calls] == ['slow(city="Paris")', 'slow(city="Rome")']
    # every event sits in exactly one group, and the group's seqs hold it
    for seq, g in enumerate(tree.groups):
        node = tree.nodes[g]
        assert node.first <= seq <= node.last, (seq, node)
    # a call's events are its own, however the two calls interleave
    for c in calls:
        mine = [run.events[s] for s, g in enumerate(tree.groups) if g == c.i]
        assert {getattr(e, "call_id", None) for e in mine} == {mine[0].call_id}  # type: ignore[attr-defined]
        assert [e.type for e in mine][-2:] == ["ToolStarted", "ToolFinished"]
    # fragments are folded into their model call and counted
    model = tree.nodes[2]
    frags = [e for s, e in enumerate(run.events) if tree.groups[s] == 2 and isinstance(e, TextMerged | ArgumentsMerged)]
    assert model.fragments == len(frags) > 0


def test_times_tokens_and_the_parallel_calls_overlap_on_the_waterfall() -> None:
    run = _parallel_run()
    tree = tree_mod.tree_of(run.events)
    t0 = run.events[0].ts.timestamp() * 1000
    calls = [n for n in tree.nodes if n.kind == "call"]
    for c in calls:
        started = next(e for e in run.events if isinstance(e, ToolStarted) and tree.groups[e.seq] == c.i)
        finished = next(e for e in run.events if isinstance(e, ToolFinished) and tree.groups[e.seq] == c.i)
        assert c.ran[0] == started.ts.timestamp() * 1000 - t0
        assert c.ran[1] == finished.ts.timestamp() * 1000 - t0
        assert c.ran[1] - c.ran[0] >= 40  # it slept 50 ms
        assert c.status == "ok"
    a, b = calls
    assert a.ran[0] < b.ran[1] and b.ran[0] < a.ran[1], "parallel calls run at the same time"
    root = tree.nodes[0]
    assert root.end_ms == run.events[-1].ts.timestamp() * 1000 - t0
    used = sum(e.response.usage.total_tokens for e in run.events if isinstance(e, TurnCompleted))
    assert root.tokens == used == sum(n.tokens for n in tree.nodes if n.kind == "turn") > 0
    assert root.status == "COMPLETED"


def test_a_live_encoding_in_pieces_ends_with_the_same_nodes_as_one_encoding() -> None:
    run = _parallel_run()
    whole = tree_mod.TreeEncoder().encode(run.events, 0, len(run.events))
    live = tree_mod.TreeEncoder()
    nodes: dict[int, list[Any]] = {}
    groups: list[int] = []
    for end in range(1, len(run.events) + 1):  # one event at a time, as a live run sends them
        msg = live.encode(run.events, end - 1, end)
        groups += msg["g"]
        for r in msg["nodes"]:
            nodes[r[0]] = r
        assert len(msg["nodes"]) <= 4  # only the nodes that grew (the event's group and its parents)
    assert groups == whole["g"]
    assert [nodes[i] for i in sorted(nodes)] == whole["nodes"]
    again = live.encode(run.events, 0, len(run.events))  # a page starting over gets every node
    assert again["nodes"] == whole["nodes"]


def test_outline_folds_fragments_and_a_fork_says_its_lineage() -> None:
    run = _parallel_run()
    lines = tree_mod.outline(run.events)
    assert not any("TextMerged" in line or "ArgumentsMerged" in line for line in lines)
    assert any("TextMerged" in line for line in tree_mod.outline(run.events, fragments=True))
    call = next(e.call_id for e in run.events if isinstance(e, ToolFinished))
    fork = run.fork(results={call: "SNOW"}).run()
    root = tree_mod.tree_of(fork.events).nodes[0]
    assert f"fork of {run.run_id}" in root.label


def test_rows_carry_their_time_since_the_run_began() -> None:
    run = _parallel_run()
    rows = RowEncoder().encode(run.events, 0, len(run.events))
    t0 = run.events[0].ts.timestamp()
    assert rows["w"][0] == 0
    assert rows["w"] == [round((e.ts.timestamp() - t0) * 1000, 1) for e in run.events]
    assert rows["w"] == sorted(rows["w"]) and rows["w"][-1] >= 40


def test_the_export_carries_the_tree_beside_the_rows() -> None:
    from agentnb._debugger.timeline import Timeline
    from agentnb._debugger.viewdata import static_bundle

    run = _parallel_run()
    bundle = static_bundle(Timeline(run.events), title="t")
    assert bundle["tree"]["g"] == tree_mod.tree_of(run.events).groups
    assert [r[3] for r in bundle["tree"]["nodes"]] == ["run", "turn", "model", "call", "call", "turn", "model"]
    assert tuple(bundle["tree"]["fields"]) == tree_mod.FIELDS


@given(st.lists(st.integers(0, 2**31 - 1), max_size=300), st.sampled_from([None, 0x100, 0x10000, 1 << 31]))
def test_a_column_s_narrow_bytes_are_its_values(values: list[int], vocab: int | None) -> None:
    """The row codes' 8- and 16-bit buffers (a strided view of the column) hold each value, as the page reads them."""
    column = array("i", values)
    if vocab is not None:
        column = array("i", [v % vocab for v in values])
    dtype, data = rows_mod._narrow(column, vocab)
    assert array({"u1": "B", "u2": "H", "i4": "i"}[dtype], data).tolist() == column.tolist()
