"""One projection: for every prefix of random runs, the frames, the debugger's view and the fold agree.

The runs are real: a :class:`~agentnb.Loop` over a :class:`~agentnb.ScriptedModel` whose turns hypothesis draws
(answers, calls that succeed, fail, need approval, run on the client, break the schema, name no tool, send broken
JSON, or are so bulky that compression prunes the history and skips the rest of the turn), streamed or whole,
with approvals, edits, denials and client results drawn too, and a fork from a drawn moment. For each prefix of
the log the fold (:class:`~agentnb._engine.RunState`) is the reference; the frames of that prefix and the
debugger's timeline (built live, event by event, as the debugger builds it) must say the same thing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._debugger import cards, viewdata
from agentnb._debugger.timeline import Timeline
from agentnb._debugger.tree import tree_of
from agentnb._engine import FOLD_RULES, RunState, conversation_step
from agentnb._engine.projection import ConversationOrigin
from agentnb.events import EVENT_CLASSES, BaseEvent, CompressionApplied, Event, ResultsBound
from agentnb.frames import FRAMES, build
from agentnb.frames._columns import CONVERSATION_EVENTS, EVENT_COLUMNS
from agentnb.frames._rows import conversation_steps


@anb.tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}: " + "lorem ipsum " * 30


@anb.tool
def boom(message: str) -> str:
    """Always fails."""
    raise RuntimeError(message)


@anb.tool(approval=True, risk="write")
def refund(cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents}"


@anb.tool(client=True)
def ask(question: str) -> str:
    """Ask the person at the keyboard (runs on the client)."""
    raise AssertionError("a client tool never runs here")


@anb.tool
def store(text: str) -> str:
    """Store a document."""
    return "stored"


TOOLS = [lookup, boom, refund, ask, store]

CALLS: dict[str, dict[str, Any]] = {
    "ok": {"name": "lookup", "arguments": {"q": "x"}},
    "error": {"name": "boom", "arguments": {"message": "kaput"}},
    "approval": {"name": "refund", "arguments": {"cents": 5}},
    "client": {"name": "ask", "arguments": {"question": "name?"}},
    "schema": {"name": "lookup", "arguments": {"nope": 1}},
    "unknown": {"name": "nowhere", "arguments": {}},
    "json": {"name": "lookup", "arguments": '{"q": '},
    "bulky": {"name": "store", "arguments": {"text": "z" * 1500}},
}

turns = st.one_of(
    st.just({"text": "an answer"}),
    st.just({"tool_calls": [CALLS["bulky"], CALLS["bulky"]]}),  # over the window: compression, then skips
    st.lists(st.sampled_from(sorted(CALLS)), min_size=1, max_size=3).map(
        lambda kinds: {"tool_calls": [CALLS[k] for k in kinds]}),
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "script": [*draw(st.lists(turns, max_size=4)), {"text": "done"}],
        "stream": draw(st.booleans()),
        "compress": draw(st.booleans()),
        "decisions": draw(st.lists(st.sampled_from(["approve", "edit", "deny", "submit"]), min_size=8, max_size=8)),
        "fork": draw(st.none() | st.floats(0.0, 1.0)),
    }


def drive(run: anb.Run, decisions: Sequence[str]) -> anb.Run:
    """Run to the end, answering every pause with the drawn decisions (in turn)."""
    choices = iter([*decisions] * 4)
    for _ in range(16):
        run.run()
        pending = run.pending_approvals()
        if not pending:
            break
        for c in pending:
            choice = next(choices, "deny")
            if choice == "deny":
                run.deny(c.call_id, "no")
            elif c.kind == "client_result" or choice == "submit":
                run.submit_result(c.call_id, {"answer": 42})
            elif choice == "edit" and c.name == "refund":
                run.approve(c.call_id, arguments={"cents": 7})
            else:
                run.approve(c.call_id)
    return run


def make_run(sc: dict[str, Any]) -> anb.Run:
    budget = anb.Budget(max_turns=6, max_no_progress=None,
                        **({"context_window": 900, "compress_at": 0.8, "keep_pairs": 1} if sc["compress"] else {}))
    model = anb.ScriptedModel(sc["script"], stream=sc["stream"], chunk_size=5)
    loop = anb.Loop(model=model, tools=TOOLS, budget=budget, retry_base_delay=0.0)
    return drive(loop.start("go"), sc["decisions"])


def _none(v: Any) -> Any:
    return None if v is pd.NA or v is None or (isinstance(v, float) and pd.isna(v)) else v


def _rows(df: pd.DataFrame, cols: Sequence[str]) -> list[tuple[Any, ...]]:
    return [tuple(_none(v) for v in row) for row in df[list(cols)].astype(object).itertuples(index=False)]


def _parts(messages: Sequence[anb.Message]) -> list[tuple[Any, ...]]:
    return [(i, m.role, p.kind, getattr(p, "call_id", None), getattr(p, "status", None), getattr(p, "content", None))
            for i, m in enumerate(messages) for p in m.parts]


def prefixes(events: Sequence[BaseEvent]) -> Iterator[tuple[int, RunState, Timeline]]:
    """Each prefix's fold and the debugger's timeline of it, both built event by event (as a live debugger)."""
    rs, tl = RunState(), Timeline()
    for k, ev in enumerate(events):
        rs.apply(ev)
        tl.add(ev)
        yield k, rs, tl


def assert_one_projection(events: Sequence[BaseEvent]) -> None:
    """For every prefix of ``events``: frames, debugger and fold agree."""
    n = len(events)
    runs = [list(events[: k + 1]) for k in range(n)]
    ids = [f"p{k}" for k in range(n)]
    frames = {name: build(name, runs, run_ids=ids) for name in ("events", "turns", "calls", "messages", "compressions")}
    by = {name: dict(tuple(frames[name].groupby("run_id", observed=False)))
          for name in ("events", "turns", "calls", "messages")}
    whole = Timeline(events)  # the debugger on a finished run, travelling back in time
    tree_calls = {(events[node.first].turn, getattr(events[node.first], "call_id", "")): node.status
                  for node in tree_of(list(events)).nodes if node.kind == "call"}  # the debugger's tree
    before = 0  # the fold's conversation length before the event
    for k, rs, tl in prefixes(events):
        if isinstance(events[k], ResultsBound):  # the tree's call statuses are the fold's (a skip included)
            for c in rs.calls.values():
                if c.result is not None and c.kind != "escalation":
                    assert tree_calls.get((rs.turn, c.call_id)) == c.result.status, (k, c, tree_calls)
        rid = ids[k]
        ev_f, turns_f, calls_f, msgs_f = (by[name][rid] for name in ("events", "turns", "calls", "messages"))
        assert len(ev_f) == k + 1
        # the conversation: frames (final rows), the debugger now and in time travel, the fold
        final = msgs_f[msgs_f["in_final"]].sort_values(["message_index", "part_index"])
        assert _rows(final, ["message_index", "role", "kind", "call_id", "status", "content"]) == _parts(rs.messages)
        assert tl.messages_at(k) == rs.messages == whole.messages_at(k)
        assert f"{len(rs.messages)} messages</div>" in viewdata.conversation_html(whole, k)
        # the calls: statuses and results as the fold bound them, and how many were answered
        model_calls = calls_f[calls_f["origin"] == "model"]
        assert int((model_calls["status"] != "unanswered").sum()) == rs.tool_calls
        current = model_calls[model_calls["turn"] == rs.turn].set_index("call_id")
        for c in rs.calls.values():
            if c.kind == "escalation":
                continue  # a guard's question, not a call of the model's
            row = current.loc[c.call_id]
            assert row["status"] == (c.result.status if c.result is not None else "unanswered"), (k, c)
            assert _none(row["result_chars"]) == (len(c.result.content) if c.result is not None else None)
            assert tl.approval_decision(c.call_id, k) == c.decision
        # turns and budget use: frames, the debugger's meters and the fold
        assert len(turns_f) == rs.turn
        assert int(turns_f["input_tokens"].fillna(0).sum()) == rs.input_tokens
        assert int(turns_f["response_seq"].notna().sum()) == rs.turns_completed
        meters = {label: value for label, value, _, _ in viewdata.meters(whole, k)}
        assert (meters["turns"], meters["tool calls"]) == (rs.turns_completed, rs.tool_calls)
        c_ = tl.counters_at(k)
        assert (c_.turns, c_.tool_calls, c_.input_tokens, c_.output_tokens) == (
            rs.turns_completed, rs.tool_calls, rs.input_tokens, rs.output_tokens)
        # a compression's row counts the conversation it replaced as the fold had it
        if isinstance(events[k], CompressionApplied):
            comp = frames["compressions"]
            assert comp[(comp["run_id"] == rid) & (comp["seq"] == k)]["messages_before"].tolist() == [before]
        before = len(rs.messages)
        # the selected event's card shows the results the fold bound
        if isinstance(events[k], ResultsBound) and events[k].call_ids:
            card = viewdata.detail_html(whole, k)
            assert all(f"[{p.status}]" in card for p in rs.messages[-1].tool_results)


@given(scenarios())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_frames_debugger_and_fold_agree_on_every_prefix_of_random_runs(sc: dict[str, Any]) -> None:
    run = make_run(sc)
    assert_one_projection(run.events)
    if sc["fork"] is not None and len(run.events) > 2:
        dbg = anb.Debugger(run)
        child = dbg.fork(int(sc["fork"] * (len(run.events) - 1)))
        assert child.run is not None
        assert_one_projection(drive(child.run, sc["decisions"]).events)


def test_a_skipped_call_is_skipped_in_every_projection() -> None:
    """The drift this module exists for: compression skips a call; fold, frames and debugger say ``skipped``."""
    history = [{"tool_calls": [{"name": "lookup", "arguments": {"q": f"q{i}"}}]} for i in range(3)]
    huge = {"tool_calls": [{"name": "store", "arguments": {"text": f"{i}" * 1500}} for i in range(3)]}
    run = make_run({"script": [*history, huge, {"text": "answer"}], "stream": False, "compress": True,
                    "decisions": [], "fork": None})
    skipped = {r.call_id for m in run.messages for r in m.tool_results if r.status == "skipped"}
    assert skipped, "the scenario must skip calls"
    calls = run.transcript.frames.calls().set_index("call_id")
    assert set(calls.loc[sorted(skipped), "status"]) == {"skipped"}
    msgs = run.transcript.frames.messages()
    results = msgs[(msgs["kind"] == "tool_result") & msgs["call_id"].isin(skipped)]
    assert len(results) and set(results["status"]) == {"skipped"}
    assert_one_projection(run.events)


def test_a_skipped_call_is_skipped_in_every_projection_also_when_compression_comes_first() -> None:
    run = make_run({"script": [{"tool_calls": [CALLS["ok"]]}, {"tool_calls": [CALLS["bulky"], CALLS["bulky"]]},
                               {"text": "done"}], "stream": True, "compress": True, "decisions": [], "fork": None})
    kinds = [e.type for e in run.events]
    assert "CompressionApplied" in kinds and any(getattr(e, "reason", "") == "skipped" for e in run.events)
    assert_one_projection(run.events)


# -- completeness: every event kind has each of its homes -------------------------------------------------


def union_classes() -> set[type]:
    """The classes of the :data:`~agentnb.events.Event` union, read off the annotation itself."""
    union = get_args(Event)[0]
    return set(get_args(union))


def test_every_event_class_has_a_fold_rule_a_card_frame_columns_and_a_line_in_the_docs() -> None:
    classes = union_classes()
    assert {c.__name__ for c in classes} == set(EVENT_CLASSES)
    assert set(FOLD_RULES) == classes, "add a fold rule: @_rule(YourEvent) in agentnb/_engine/fold.py"
    assert set(cards.CARDS) == classes, "add a CardSpec for it to CARDS in agentnb/_debugger/cards.py"
    missing = [c.__name__ for c in classes if not EVENT_COLUMNS[c.__name__]]
    assert not missing, f"no frame column reads {missing}: declare one in agentnb/frames/_columns.py"
    docs = (Path(__file__).parent.parent / "docs" / "frames.md").read_text(encoding="utf-8")
    assert all(f"\n| {c.__name__} | `" in docs for c in classes), "run: python -m agentnb.frames._docs"


def test_the_messages_frame_reads_exactly_the_events_the_engine_says_change_the_conversation() -> None:
    """What ``messages_rows``/``compressions_rows`` once knew implicitly, now declared once and checked."""
    changes = {c.__name__ for c, rule in FOLD_RULES.items() if rule.conversation is not None}
    assert changes == {"RunStarted", "ModelRequested", "TurnCompleted", "ResultsBound", "CompressionApplied"}
    assert set(CONVERSATION_EVENTS) == changes
    origin = next(c for c in FRAMES["messages"] if c.name == "origin")
    assert origin.categories == get_args(ConversationOrigin) and set(origin.reads) == changes
    answers = {c.__name__ for c, rule in FOLD_RULES.items() if rule.answer is not None}
    assert answers == {"ToolFinished", "CallRejected", "ApprovalResolved"}
    status = next(c for c in FRAMES["calls"] if c.name == "status")
    assert set(status.reads) == answers


def test_a_paused_turn_sent_back_without_results_adds_no_message_anywhere() -> None:
    """A ``ResultsBound`` naming no call adds no message: not to the fold, not to the frames' count."""
    run = make_run({"script": [{"tool_calls": [CALLS["ok"]]}, {"text": "done"}], "stream": False,
                    "compress": False, "decisions": [], "fork": None})
    events = list(run.events)
    k = next(i for i, e in enumerate(events) if isinstance(e, ResultsBound))
    empty = replace(events[k], call_ids=[])
    step = conversation_step(empty, lambda cid: None)
    assert step is None
    rs = RunState.fold(events[:k])
    n = len(rs.messages)
    rs.apply(empty)
    assert len(rs.messages) == n
    assert [ev for ev, _ in conversation_steps([*events[:k], empty])][-1] is not empty  # the frames' walk
