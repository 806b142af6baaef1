"""Frames: every frame's columns and dtypes on scripted runs of every kind, and the values that matter."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import agentnb as anb
from agentnb._messages import Message
from agentnb.events import CompressionApplied
from agentnb.frames import FRAMES, Column, build
from agentnb.frames._docs import markdown

S = anb.LoopState


@anb.tool(timeout=0.05)
def slow(seconds: float) -> str:
    """Sleeps too long."""
    time.sleep(seconds)
    return "late"


def story(name: str, run_id: str, **options: Any) -> anb.Run:
    stream = options.pop("stream", False)
    loop = anb.Loop(model=anb.ScriptedModel.story(name, stream=stream), tools=anb.stories.tools(name), **options)
    return loop.start("go", run_id=run_id).run()


def approved() -> anb.Run:
    run = story("refund", "approved")
    run.approve(run.pending_approvals()[0].call_id, by="ana")
    return run.run()


def denied() -> anb.Run:
    run = story("refund", "denied")
    run.deny(run.pending_approvals()[0].call_id, "too much", by="bo")
    return run.run()


def scripted(run_id: str, script: list[Any], tools: list[Any], **options: Any) -> anb.Run:
    stream = options.pop("stream", False)
    model = anb.ScriptedModel(script, stream=stream, chunk_size=4)
    return anb.Loop(model=model, tools=tools, retry_base_delay=0.0, **options).start("go", run_id=run_id).run()


def with_compression(run: anb.Run) -> anb.Transcript:
    """The run's events with a CompressionApplied after its first ResultsBound (the engine emits none yet)."""
    events = list(run.events)
    k = next(i for i, e in enumerate(events) if e.type == "ResultsBound") + 1
    before = run.transcript.at(k - 1).messages
    comp = CompressionApplied(seq=k, ts=events[k - 1].ts, run_id=run.run_id, turn=events[k - 1].turn,
                              state=S.RESULTS_READY, tier=1, tokens_before=500, tokens_after=120,
                              messages=[before[0], Message.user("(summary of the lookups)")], removed=[1, 2])
    rest = [replace(e, seq=e.seq + 1) for e in events[k:]]
    transcript = anb.Transcript([*events[:k], comp, *rest])
    transcript.fold()  # a valid run
    return transcript


@pytest.fixture(scope="module")
def runs() -> dict[str, anb.Transcript]:
    from tests.conftest import add, boom

    out = {
        "approved": approved().transcript,
        "denied": denied().transcript,
        "parallel": story("parallel", "parallel", stream=True).transcript,
        "malformed": story("malformed", "malformed").transcript,
        "guard": story("looping", "guard", max_turns=3).transcript,
        "error": scripted("error", [{"tool_calls": [{"name": "boom", "arguments": {"message": "kaput"}}]},
                                    {"text": "it failed"}], [add, boom]).transcript,
        "timeout": scripted("timeout", [{"tool_calls": [{"name": "slow", "arguments": {"seconds": 0.3}}]},
                                        {"text": "too slow"}], [slow]).transcript,
        "retry": scripted("retry", [{"error": {"status": 500}}, {"text": "ok"}], []).transcript,
        "broken": scripted("broken", [{"text": "partial answer", "interrupt": True}], [], stream=True).transcript,
        "unknown": scripted("unknown", [{"tool_calls": [{"name": "nope", "arguments": {}}]}, {"text": "x"}],
                            [add]).transcript,
    }
    out["compressed"] = with_compression(story("weather", "compressed"))
    return out


def expected_dtype(col: Column) -> str:
    return {"datetime": "datetime64[us, UTC]", "string": "string"}.get(col.dtype, col.dtype)


def check_frame(df: pd.DataFrame, name: str) -> None:
    declared = FRAMES[name]
    assert [c.name for c in declared] == [c for c in df.columns if c != "payload"], name
    for col in declared:
        assert str(df[col.name].dtype) == expected_dtype(col), (name, col.name, df[col.name].dtype)
        if col.categories is not None:
            assert list(df[col.name].cat.categories) == list(col.categories), (name, col.name)
        if col.source is None and col.name != "cost_usd":
            assert df[col.name].isna().all(), (name, col.name)


@pytest.mark.parametrize("frame", list(FRAMES))
def test_every_frame_has_its_declared_columns_and_dtypes(runs: dict[str, anb.Transcript], frame: str) -> None:
    for name, t in runs.items():
        df = t.frames.frame(frame)
        check_frame(df, frame)
        assert set(df["run_id"].astype(str)) <= {name}
        assert list(df["run_id"].cat.categories) == [name]
    all_runs = [t.events for t in runs.values()]
    df = build(frame, all_runs)
    check_frame(df, frame)
    assert list(df["run_id"].cat.categories) == list(runs)
    empty = build(frame, [])
    check_frame(empty, frame)
    assert len(empty) == 0


def test_events_frame(runs: dict[str, anb.Transcript]) -> None:
    t = runs["parallel"]
    df = t.frames.events()
    assert len(df) == len(t) and df["seq"].tolist() == list(range(len(t)))
    assert df["ts"].tolist() == [pd.Timestamp(e.ts) for e in t]
    assert {"TextMerged", "ArgumentsMerged"} <= set(df["type"].astype(str))
    finished = df[df["type"] == "ToolFinished"]
    assert finished["name"].tolist() == ["get_weather"] * 3
    assert finished["call_id"].tolist() == ["call_1_1", "call_1_2", "call_1_3"]
    full = t.to_pandas()
    assert "payload" in full and full["payload"].str.contains('"status":"ok"').sum() == 3


def test_turns_frame(runs: dict[str, anb.Transcript]) -> None:
    turns = runs["approved"].frames.turns()
    assert turns["turn"].tolist() == [1, 2, 3] and turns["calls"].tolist() == [1, 1, 0]
    assert turns["finish_reason"].tolist() == ["tool_calls", "tool_calls", "stop"]
    assert (turns["input_tokens"] > 0).all() and (turns["total_tokens"] ==
                                                  turns["input_tokens"] + turns["output_tokens"]).all()
    assert turns["cost_usd"].isna().all() and turns["outcome"].tolist()[-1] == "the model answered"
    priced = runs["approved"].frames.turns(prices={"story:refund": (1.0, 10.0)})  # dollars per million tokens
    first = priced.iloc[0]
    assert first["cost_usd"] == pytest.approx(first["input_tokens"] * 1e-6 + first["output_tokens"] * 1e-5)
    budget = anb.Budget(prices={"story:refund": (1.0, 10.0)})  # the same table means the same dollars
    from agentnb._engine.prices import spent
    used = (int(first["input_tokens"]), int(first["output_tokens"]))
    dollars, missing = spent([(("scripted", "story:refund"), used)], budget.price)
    assert not missing and dollars == pytest.approx(first["cost_usd"])
    assert runs["approved"].frames.turns(prices={"other": (1.0, 1.0)})["cost_usd"].isna().all()

    retry = runs["retry"].frames.turns()
    assert retry["retries"].tolist() == [1] and retry["finish_reason"].tolist() == ["stop"]
    broken = runs["broken"].frames.turns()
    assert broken["response_seq"].isna().all() and broken["provider"].isna().all()
    assert "stream broke" in broken["outcome"].iloc[0]
    guard = runs["guard"].frames.turns()
    assert guard["finalize"].tolist() == [False, False, False, True]
    assert guard["tools_offered"].tolist() == [1, 1, 1, 0]


def test_calls_frame_statuses(runs: dict[str, anb.Transcript]) -> None:
    def one(name: str) -> pd.Series:
        calls = runs[name].frames.calls()
        return calls.iloc[-1]

    ok = one("approved")
    assert ok["status"] == "ok" and ok["decision"] == "approved" and ok["decided_by"] == "ana"
    assert ok["needs_approval"] and ok["approval_id"] and ok["decided_at"] >= ok["ts_called"]
    assert ok["ts_started"] >= ok["decided_at"] and ok["duration_s"] >= 0 and ok["result_chars"] > 0
    no = one("denied")
    assert no["status"] == "denied" and no["decided_by"] == "bo" and pd.isna(no["duration_s"])
    assert no["result_chars"] == len("Denied by the user: too much") and pd.isna(no["ts_started"])
    err = one("error")
    assert err["status"] == "error" and err["error_type"] == "RuntimeError" and "kaput" in err["error_message"]
    slow_ = one("timeout")
    assert slow_["status"] == "timeout" and "timed out" in slow_["error_message"]
    unknown = one("unknown")
    assert unknown["status"] == "error" and unknown["reject_reason"] == "unknown_tool"
    assert unknown["error_type"] == "unknown_tool" and pd.isna(unknown["ts_started"])

    bad = runs["malformed"].frames.calls()
    assert bad["reject_reason"].tolist()[:2] == ["invalid_json", "schema"]
    assert bad["parse_error"].notna().tolist() == [True, False, False]
    assert bad["arguments"].isna().tolist() == [True, False, False]
    assert bad["status"].tolist() == ["error", "error", "ok"]

    par = runs["parallel"].frames.calls(flatten_arguments=True)
    assert par["index"].tolist() == [0, 1, 2] and par["arg_city"].tolist() == ["Paris", "London", "Tokyo"]
    assert par["seq"].nunique() == 1 and par["bound_seq"].nunique() == 1
    assert par["binding_hash"].str.len().tolist() == [64] * 3 and not par["reused"].any()
    refund = runs["approved"].frames.calls()
    assert refund["idempotency_key"].notna().tolist() == [False, True]  # only the side-effecting tool has a key


def test_frames_join_on_run_and_seq(runs: dict[str, anb.Transcript]) -> None:
    t = runs["approved"]
    calls, turns, events = t.frames.calls(), t.frames.turns(), t.frames.events()
    joined = calls.merge(turns, on=["run_id", "turn"], suffixes=("", "_turn"))
    assert len(joined) == len(calls) and (joined["seq"] == joined["response_seq"]).all()
    anchored = calls.merge(events, on=["run_id", "seq"], suffixes=("", "_event"))
    assert anchored["type"].astype(str).tolist() == ["TurnCompleted", "TurnCompleted"]


def test_messages_frame_rebuilds_the_conversation(runs: dict[str, anb.Transcript]) -> None:
    for name in ("approved", "denied", "parallel", "malformed", "guard"):
        t = runs[name]
        df = t.frames.messages()
        final = df[df["in_final"]]
        assert final["message_index"].max() + 1 == len(t.messages), name
        parts = [(m.role, p.kind) for m in t.messages for p in m.parts]
        assert list(zip(final["role"].astype(str), final["kind"].astype(str), strict=True)) == parts, name
    denied = runs["denied"].frames.messages()
    result = denied[denied["kind"] == "tool_result"].iloc[-1]
    assert result["status"] == "denied" and result["content"] == "Denied by the user: too much"
    guard = runs["guard"].frames.messages()
    assert guard[guard["origin"] == "request"]["role"].tolist() == ["user"]


def test_compressions_and_guards(runs: dict[str, anb.Transcript]) -> None:
    t = runs["compressed"]
    comp = t.frames.compressions()
    assert len(comp) == 1
    row = comp.iloc[0]
    assert (row["tier"], row["tokens_saved"], row["messages_before"], row["messages_after"], row["removed"]) == (
        1, 380, 3, 2, 2)
    msgs = t.frames.messages()
    assert not msgs[msgs["seq"] < row["seq"]]["in_final"].any()
    final = msgs[msgs["in_final"]]
    assert final["message_index"].max() + 1 == len(t.messages)
    assert final[final["origin"] == "compression"]["text"].tolist()[1] == "(summary of the lookups)"

    guards = runs["guard"].frames.guards()
    assert guards[["guard", "limit", "value", "action"]].values.tolist() == [["max_turns", 3.0, 3.0, "finalize"]]


def test_approvals_frame(runs: dict[str, anb.Transcript]) -> None:
    a = runs["approved"].frames.approvals().iloc[0]
    assert a["kind"] == "approval" and pd.isna(a["expires_at"])
    assert a["decision"] == "approved" and a["risk"] == "write" and a["wait_s"] >= 0 and not a["edited"]
    d = runs["denied"].frames.approvals().iloc[0]
    assert d["decision"] == "denied" and d["note"] == "too much" and d["tool"] == "create_refund"
    run = story("refund", "edited")
    run.approve(run.pending_approvals()[0].call_id, arguments={"order_id": "42", "amount_cents": 500})
    run.run()
    e = run.transcript.frames.approvals().iloc[0]
    assert e["edited"] and '"amount_cents":500' in e["edited_arguments"]
    assert '"amount_cents":500' in run.transcript.frames.calls()["arguments"].iloc[-1]
    waiting = story("refund", "waiting").transcript.frames.approvals().iloc[0]
    assert pd.isna(waiting["decision"]) and pd.isna(waiting["wait_s"])
    assert story("refund", "waiting2").transcript.frames.calls()["status"].tolist() == ["ok", "unanswered"]


def test_history_calls_are_rows_with_origin_history(make_loop: Callable[..., anb.Loop]) -> None:
    prior = anb.Transcript(story("weather", "w").events).messages
    run = make_loop([{"text": "done"}]).start(prior, run_id="h").run()
    calls = run.transcript.frames.calls()
    assert calls["origin"].tolist() == ["history"] and calls["status"].tolist() == ["ok"]
    assert calls["seq"].tolist() == [0] and calls["duration_s"].isna().all()


def test_unknown_frame_is_named() -> None:
    with pytest.raises(KeyError, match="frames: events"):
        anb.Transcript([]).frames.frame("nope")


def test_docs_table_is_in_sync_with_the_declarations() -> None:
    path = Path(__file__).parent.parent / "docs" / "frames.md"
    assert path.read_text(encoding="utf-8") == markdown(), "run: python -m agentnb.frames._docs"
    for cols in FRAMES.values():
        for col in cols:
            assert f"`{col.name}`" in markdown()


def test_headless_denials_match_the_conversation() -> None:
    run = story("refund", "headless", headless=True)
    calls = run.transcript.frames.calls()
    assert calls["status"].tolist() == ["ok", "denied"] and calls["decided_by"].tolist()[-1] == "headless"
    msgs = run.transcript.frames.messages()
    final = msgs[msgs["in_final"] & (msgs["kind"] == "tool_result")]["content"].tolist()
    assert final == [p.content for m in run.messages for p in m.tool_results]
