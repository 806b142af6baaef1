"""Labels: given from code, kept beside the sealed log (a JSONL file, an SQLite store's table), a frame that joins."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import pandas as pd
import pytest

import agentnb as anb
from agentnb._labels import COLUMNS
from agentnb.exceptions import LabelError

KEY = b"k" * 32


@anb.tool(risk="write")
def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return f"refunded {amount_cents} on {order_id}"


@anb.tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid 1999"


def _loop(store: anb.Store | None = None) -> anb.Loop:
    model = anb.ScriptedModel([
        {"tool_calls": [{"name": "lookup", "arguments": {"order_id": "42"}}]},
        {"tool_calls": [{"name": "refund", "arguments": {"order_id": "42", "amount_cents": 1999}}]},
        {"text": "Refunded."},
    ])
    return anb.Loop(model=model, tools=[lookup, refund], store=store)


@pytest.fixture
def done() -> anb.Transcript:
    run = _loop().start("Refund order 42", run_id="r1").run()
    run.approve(run.pending_approvals()[0].call_id)
    return run.run().transcript


def _all_three(book: anb.Labels, t: anb.Transcript | str) -> None:
    book.add(t, tag="good run", by="ana")
    book.add(t, call_id="call_2_1", tag="right amount", score=1, by="ana")
    book.add(t, turn=3, note="polite answer", score=0.5, by="ben")


def test_labels_of_a_run_a_turn_and_a_call_join_the_frames(done: anb.Transcript, tmp_path: Path) -> None:
    path = tmp_path / "r1.jsonl"
    done.save(path)
    before = path.read_bytes()
    book = anb.Labels.beside(path)
    assert book.path == tmp_path / "r1.labels.jsonl"
    _all_three(book, done)
    anb.label(book, done, seq=0, tag="prompt ok")
    assert path.read_bytes() == before and anb.Transcript.load(path).events == done.events  # the log is untouched

    labels = done.frames.labels(book)
    assert list(labels.columns) == [name for name, _, _ in COLUMNS]
    calls, turns, events = done.frames.calls(), done.frames.turns(), done.frames.events()
    for col in ("run_id", "seq", "turn", "call_id"):
        assert labels[col].dtype == (events if col == "seq" else calls)[col].dtype, col
    assert str(labels["at"].dtype) == "datetime64[us, UTC]" and labels["score"].dtype == "Float64"
    on_call = labels.merge(calls, on=["run_id", "call_id"])
    assert on_call[["tag", "tool", "status"]].values.tolist() == [["right amount", "refund", "ok"]]
    assert on_call["seq_x"].tolist() == on_call["seq_y"].tolist() and on_call["turn_x"].tolist() == [2]
    on_turn = labels[labels["call_id"].isna() & labels["turn"].notna()].merge(turns, on=["run_id", "seq"])
    assert on_turn["note"].tolist() == ["polite answer"] and on_turn["finish_reason"].tolist() == ["stop"]
    on_event = labels.merge(events, on=["run_id", "seq"])
    assert sorted(on_event["type"].astype(str)) == ["ModelRequested", "RunStarted", "TurnCompleted"]
    whole = labels[labels["seq"].isna()]
    assert whole["tag"].tolist() == ["good run"] and whole["turn"].isna().all()
    assert anb.Labels(tmp_path / "r1.labels.jsonl").frame().equals(labels)  # read back by another book


def test_a_store_table_leaves_the_sealed_log_as_it_was_and_the_run_resumes(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "runs.db", key=KEY)
    run = _loop(store).start("Refund order 42", run_id="r1").run()
    assert run.state is anb.LoopState.WAITING_APPROVAL

    def sealed() -> str:
        with sqlite3.connect(tmp_path / "runs.db") as db:
            rows = [db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("events", "runs", "ledger")]
        return hashlib.sha256(repr(rows).encode()).hexdigest()

    before = sealed()
    book = anb.Labels(store)
    book.add("r1", tag="needs a second look", by="ana")  # by id: checked against the stored run
    book.add("r1", call_id="call_2_1", score=0, note="check the amount", by="ana")
    with pytest.raises(LabelError, match="run 'r1' has no call 'call_9_9'"):
        book.add("r1", call_id="call_9_9", tag="x")
    assert sealed() == before
    again = anb.SqliteStore(tmp_path / "runs.db", key=KEY)
    assert [e.seq for e in again.load("r1")] == [e.seq for e in run.events]  # every seal verifies
    resumed = anb.Run.resume("r1", loop=_loop(again))
    resumed.approve(resumed.pending_approvals()[0].call_id)
    assert resumed.run().state is anb.LoopState.COMPLETED
    frame = resumed.transcript.frames.labels(anb.Labels(tmp_path / "runs.db"))
    assert frame["tag"].iloc[0] == "needs a second look" and frame["tag"].isna().tolist() == [False, True]
    assert frame["call_id"].tolist()[1] == "call_2_1" and frame["turn"].tolist()[1] == 2


def test_labels_round_trip_between_jsonl_and_sqlite(done: anb.Transcript, tmp_path: Path) -> None:
    first = anb.Labels(tmp_path / "a.jsonl")
    _all_three(first, done)
    first.add(done, tag="émoji 🙂 and \"quotes\"", note="line\nbreak", by=None)
    db = anb.Labels(tmp_path / "labels.db")
    db.extend(first)
    db.extend(first)  # copied once, by id
    back = anb.Labels(tmp_path / "b.jsonl")
    back.extend(anb.Labels(tmp_path / "labels.db"))
    assert [lb.to_json() for lb in back] == [lb.to_json() for lb in first] == [lb.to_json() for lb in db]
    pd.testing.assert_frame_equal(back.frame(), first.frame())
    assert len(db) == 4 and db.all("r1") == first.all() and db.all("other") == []


def test_frames_of_a_collection_keep_its_runs_and_drop_the_others(done: anb.Transcript, tmp_path: Path) -> None:
    other = _loop().start("Refund order 43", run_id="r2").run().transcript
    runs = anb.TranscriptCollection([other, done])
    book = anb.Labels(tmp_path / "labels.jsonl")
    book.add(done, tag="a")
    book.add(other, tag="b")
    book.add("r-elsewhere", tag="c")
    labels = runs.frames.labels(book)
    assert list(labels["run_id"].cat.categories) == ["r2", "r1"] and labels["tag"].tolist() == ["a", "b"]
    assert list(book.frame()["run_id"].cat.categories) == ["r1", "r2", "r-elsewhere"]


def test_labels_given_from_many_threads_are_all_whole(done: anb.Transcript, tmp_path: Path) -> None:
    book = anb.Labels(tmp_path / "labels.jsonl")
    db = anb.Labels(tmp_path / "labels.db")

    def give(k: int) -> None:
        for i in range(10):
            book.add("r1", tag=f"t{k}-{i}", score=i)
            db.add("r1", tag=f"t{k}-{i}", score=i)

    threads = [threading.Thread(target=give, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for b in (book, db):
        assert sorted(lb.tag or "" for lb in b) == sorted(f"t{k}-{i}" for k in range(6) for i in range(10))


def test_bad_labels_are_refused_with_what_is_wrong(done: anb.Transcript, tmp_path: Path) -> None:
    book = anb.Labels(tmp_path / "labels.jsonl")
    cases = [
        ({"call_id": "nope", "tag": "x"}, "run 'r1' has no call 'nope' \\(its calls: call_1_1, call_2_1\\)"),
        ({"turn": 9, "tag": "x"}, "run 'r1' has no turn 9 \\(its turns: 1 to 3\\)"),
        ({"turn": "2", "tag": "x"}, "has no turn '2'"),
        ({"seq": 999, "tag": "x"}, "has no event 999"),
        ({}, "give a tag, a note or a score"),
        ({"call_id": "call_1_1", "turn": 1, "tag": "x"}, "give one of call_id, turn and seq"),
        ({"score": float("nan")}, "a score is a finite number"),
        ({"score": True}, "a score is a finite number"),
        ({"tag": "  "}, "a tag is a non-empty string"),
        ({"tag": "x" * 201}, "at most 200 characters"),
        ({"note": 5}, "a note is text"),
    ]
    for what, message in cases:
        with pytest.raises(LabelError, match=message):
            book.add(done, **what)  # type: ignore[arg-type]
    assert len(book) == 0  # nothing refused was written
    with pytest.raises(LabelError, match="its Transcript or its id"):
        book.add(42, tag="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a label book is"):
        anb.Labels(42)  # type: ignore[arg-type]
    with pytest.raises(LabelError, match="is a directory"):
        anb.Labels(tmp_path)
    book.add(done, tag="fine")
    with book.path.open("a", encoding="utf-8") as fh:
        fh.write('{"label_id": "x", "run_id": "r1"}\n')
    with pytest.raises(LabelError, match=r"labels.jsonl:2: a label needs 'at'"):
        book.frame()


def test_a_read_only_store_refuses_labels_clearly(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "runs.db", key=KEY)
    _loop(store).start("Refund order 42", run_id="r1").run()
    readonly = anb.SqliteStore(tmp_path / "runs.db", key=KEY, readonly=True)
    assert anb.Labels(readonly).all() == []  # nobody labelled it yet: no table, no labels
    with pytest.raises(LabelError, match="open it with readonly=False"):
        anb.Labels(readonly).add("r1", tag="x")
    anb.Labels(store).add("r1", tag="x")
    assert [lb.tag for lb in anb.Labels(readonly)] == ["x"]  # read through the read-only store


def test_a_line_cut_short_by_a_crash_is_left_out_and_the_book_goes_on(done: anb.Transcript, tmp_path: Path) -> None:
    from agentnb._labels import LabelsRecovered

    book = anb.Labels(tmp_path / "labels.jsonl")
    book.add(done, tag="first")
    with book.path.open("a", encoding="utf-8") as fh:
        fh.write('{"label_id": "x", "run_id": "r1", "ta')  # the process died in the middle of a line
    with pytest.warns(LabelsRecovered, match="labels.jsonl:2: not a whole label"):
        assert [lb.tag for lb in book] == ["first"]
    book.add(done, tag="second")  # starts on a line of its own
    with pytest.warns(LabelsRecovered):
        assert [lb.tag for lb in book] == ["first", "second"]
