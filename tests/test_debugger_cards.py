"""The cards of the rows in sight, sent before they are clicked (``cards?``, :func:`viewdata.cards_answer`).

A page asks for the cards of the events it shows once its list stands still; a click on one of them then
shows its card at once, and the kernel's own answer to the click is the same card. Here: the cards are the
kernel's cards, of the log as it stands; what is not a seq of the log is left out; a moment whose index is
not built yet is not sent (the page would show it as recorded); the answer is capped.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentnb as anb
from agentnb._debugger import viewdata
from agentnb._debugger.timeline import Timeline
from agentnb._transcript import folded


def _debugger(story: str = "refund", *, approve: bool = False) -> anb.Debugger:
    run = anb.Loop(model=anb.ScriptedModel.story(story), tools=anb.stories.tools(story)).start("go")
    dbg = anb.Debugger(run).cont()
    if approve:
        dbg.approve(dbg.pending()[0])
    return dbg


def _asked(dbg: anb.Debugger, content: dict[str, Any]) -> list[Any]:
    """What the debugger sends back to a page's request, as the page receives it."""
    dbg._repr_mimebundle_()  # displayed: the rows are the page's
    sent: list[Any] = []
    dbg.view.send = lambda msg, buffers=None: sent.append(msg)
    dbg.view._handle_custom_msg(content, [])
    return sent


def test_each_card_is_the_one_a_click_shows() -> None:
    dbg = _debugger("refund", approve=True)
    n = len(dbg.timeline)
    [answer] = _asked(dbg, {"kind": "cards?", "seqs": list(range(n))})
    assert answer["kind"] == "cards" and answer["n"] == n and answer["seqs"] == list(range(n))
    for seq, card in zip(answer["seqs"], answer["html"], strict=True):
        dbg.select(seq)
        assert dbg.view.detail == card, seq
    # an approval's card (it changes with the events after it) is the one of the log as it stands
    approval = next(e.seq for e in dbg.timeline.events if e.type == "ApprovalRequested")
    assert "approved" in answer["html"][approval].lower()


def test_hostile_requests_are_answered_with_what_is_a_seq_of_the_log() -> None:
    dbg = _debugger("weather")
    n = len(dbg.timeline)
    for seqs, want in [("0,1", []), ({"0": 1}, []), (None, []), ([True, False, 1.0, "1", None, [1]], []),
                       ([-1, n, 10**12, 2, 2, 0], [2, 0])]:
        [answer] = _asked(dbg, {"kind": "cards?", "seqs": seqs})
        assert answer["seqs"] == want and len(answer["html"]) == len(want), seqs
    [capped] = _asked(dbg, {"kind": "cards?", "seqs": [0] * 1000 + [1]})
    assert capped["seqs"] == [0]  # the first CARDS_AT_ONCE asked for, once each


@given(st.lists(st.integers(min_value=-3, max_value=200), max_size=120))
def test_the_answer_never_holds_more_than_it_may(seqs: list[int]) -> None:
    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("?")
    tl = Timeline(run.run().events)
    got = viewdata.cards_answer(tl, {"kind": "cards?", "seqs": seqs})
    assert len(got["seqs"]) == len(set(got["seqs"])) <= viewdata.CARDS_AT_ONCE
    assert set(got["seqs"]) <= {s for s in seqs[:viewdata.CARDS_AT_ONCE] if 0 <= s < len(tl)}
    assert got["html"] == [viewdata.detail_html(tl, s) for s in got["seqs"]]


def test_a_long_card_is_left_to_the_click() -> None:
    @anb.tool
    def dump(n: int) -> str:
        """A long result."""
        return "x" * n

    script = [{"tool_calls": [{"name": "dump", "arguments": {"n": viewdata.CARD_SENT_CHARS}}]}, {"text": "done"}]
    run = anb.Loop(model=anb.ScriptedModel(script), tools=[dump]).start("go").run()
    tl = Timeline(run.events)
    done = next(e.seq for e in tl.events if e.type == "ToolFinished")
    got = viewdata.cards_answer(tl, {"kind": "cards?", "seqs": [0, done]})
    assert len(viewdata.detail_html(tl, done)) > viewdata.CARD_SENT_CHARS and got["seqs"] == [0]


def test_a_moment_not_indexed_yet_is_not_sent(tmp_path: Any) -> None:
    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("?")
    run.run().transcript.save(tmp_path / "t.jsonl")
    t = anb.Transcript.load(tmp_path / "t.jsonl")
    tl = Timeline.after(t.events, folded(t))
    last = len(tl) - 1
    got = viewdata.cards_answer(tl, {"kind": "cards?", "seqs": [0, last]})
    assert got["seqs"] == [last]  # the last moment is the state after it; the first waits for the index
    tl.build_index()
    assert viewdata.cards_answer(tl, {"kind": "cards?", "seqs": [0, last]})["seqs"] == [0, last]
