"""Label books on every kind of place: a PostgreSQL store, a Parquet dataset, an HTML export; labels round-trip
between all of them and SQLite and JSONL unchanged, and labelling never changes a seal, an event or the page's run."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import agentnb as anb
from agentnb.exceptions import LabelError
from tests.test_labels import _loop  # the same two-tool refund run the JSONL and SQLite books label

KEY = "label-books-key-1"


def _label(book: anb.Labels, run: anb.Transcript | str) -> None:
    book.add(run, tag="needs a second look", by="ana")
    book.add(run, call_id="call_2_1", score=0, note="check the amount\nand the émoji 🙂", by="ana")
    book.add(run, turn=1, tag="good lookup", by="bo")
    with pytest.raises(LabelError, match="has no call 'call_9_9'"):
        book.add(run, call_id="call_9_9", tag="x")


def _same(a: anb.Labels, b: anb.Labels) -> None:
    assert [lb.to_json() for lb in a] == [lb.to_json() for lb in b]
    pd.testing.assert_frame_equal(a.frame(), b.frame())


@pytest.fixture
def pg(pg_dsn: str, pg_schema: str) -> Any:
    store = anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema)
    yield store
    store.close()


def test_a_postgres_book_leaves_the_sealed_log_as_it_was_and_the_run_resumes(pg: anb.PostgresStore, pg_dsn: str,
                                                                             pg_schema: str) -> None:
    import psycopg

    run = _loop(pg).start("Refund order 42", run_id="r1").run()
    assert run.state is anb.LoopState.WAITING_APPROVAL

    def sealed() -> str:
        with psycopg.connect(pg_dsn) as conn:
            conn.execute(f"SET search_path TO {pg_schema}")
            rows = [conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("events", "runs", "ledger")]
        return hashlib.sha256(repr(rows).encode()).hexdigest()

    before = sealed()
    book = anb.Labels(pg)
    _label(book, "r1")  # by id: checked against the stored run
    assert sealed() == before and len(book) == 3 and "PostgreSQL" in repr(book) and KEY not in repr(book)
    again = anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema)
    try:
        assert [e.seq for e in again.load("r1")] == [e.seq for e in run.events]  # every seal verifies
        resumed = anb.Run.resume("r1", loop=_loop(again))
        resumed.approve(resumed.pending_approvals()[0].call_id)
        assert resumed.run().state is anb.LoopState.COMPLETED
        frame = resumed.transcript.frames.labels(anb.Labels(again))
        assert frame["tag"].tolist()[::2] == ["needs a second look", "good lookup"]
        assert frame["call_id"].tolist()[1] == "call_2_1" and frame["turn"].tolist() == [pd.NA, 2, 1]
    finally:
        again.close()
    book.extend(book.all())  # a label given twice is kept once
    assert len(book) == 3


def test_labels_round_trip_through_every_book_unchanged(pg: anb.PostgresStore, tmp_path: Path) -> None:
    done = _loop().start("Refund order 42", run_id="r1").run()
    done.approve(done.pending_approvals()[0].call_id)
    t = done.run().transcript
    first = anb.Labels(tmp_path / "first.jsonl")
    _label(first, t)
    t.to_html(tmp_path / "run.html")
    anb.TranscriptCollection([t]).save_parquet(tmp_path / "runs")
    chain = [anb.Labels(tmp_path / "labels.db"), anb.Labels(pg), anb.Labels(tmp_path / "runs"),
             anb.Labels(tmp_path / "run.html"), anb.Labels(tmp_path / "last.jsonl")]
    source = first
    for book in chain:
        book.extend(source)
        book.extend(source)  # once, by id
        _same(book, first)
        source = book
    assert [repr(b).rsplit("(", 1)[1] for b in chain] == ["SQLite)>", "PostgreSQL)>", "Parquet)>", "HTML)>", "JSONL)>"]


def test_labels_travel_with_a_parquet_dataset_and_leave_its_runs_as_they_were(tmp_path: Path) -> None:
    runs = anb.TranscriptCollection([_loop().start(f"Refund order {i}", run_id=f"r{i}").run().transcript
                                     for i in range(3)])
    runs.save_parquet(tmp_path / "runs")

    def files() -> dict[str, str]:
        return {str(p.relative_to(tmp_path)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted((tmp_path / "runs").rglob("*")) if p.is_file() and "labels" not in p.parts}

    before = files()
    loaded = anb.load_transcripts(tmp_path / "runs")
    book = anb.Labels(tmp_path / "runs")
    book.add(loaded["r1"], call_id="call_1_1", tag="looked up", by="ana")
    book.add(loaded["r2"], tag="stuck", by="bo")
    assert files() == before
    moved = tmp_path / "moved"
    (tmp_path / "runs").rename(moved)  # the dataset travels, its labels with it
    again = anb.load_transcripts(moved)
    frame = again.frames.labels(anb.Labels(moved))
    assert frame["run_id"].astype(str).tolist() == ["r1", "r2"] and frame["tag"].tolist() == ["looked up", "stuck"]
    assert frame["run_id"].cat.categories.tolist() == ["r0", "r1", "r2"]
    assert [t.events for t in again] == [t.events for t in runs]
    runs_more = anb.TranscriptCollection([_loop().start("Refund order 9", run_id="r9").run().transcript])
    runs_more.save_parquet(moved, append=True)  # appending runs keeps the labels
    assert len(anb.Labels(moved)) == 2
    (moved / "labels" / "part-bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(LabelError, match="part-bad.parquet: not a label file"):
        anb.Labels(moved).all()
    (tmp_path / "plain").mkdir()
    with pytest.raises(LabelError, match="no Parquet transcripts directory"):
        anb.Labels(tmp_path / "plain")


def test_labels_are_a_duckdb_view_that_joins_the_frames(tmp_path: Path) -> None:
    runs = anb.TranscriptCollection([_loop().start(f"Refund order {i}", run_id=f"r{i}").run().transcript
                                     for i in range(3)])
    book = anb.Labels(tmp_path / "labels.jsonl")
    book.add(runs["r1"], call_id="call_1_1", tag="looked up", by="ana")
    book.add(runs["r2"], seq=3, tag="this event", score=2, by="bo")
    book.add(runs["r2"], tag="the run", by="bo")
    book.add("elsewhere", tag="another collection's run")
    calls = runs.sql("select run_id, c.tool, l.tag from calls c join labels l using (run_id, call_id)", labels=book)
    assert calls.values.tolist() == [["r1", "lookup", "looked up"]]
    events = runs.sql("select run_id, e.type, l.tag, coalesce(l.score, -1) as score from events e join labels l "
                      "using (run_id, seq) order by run_id", labels=book)
    assert events.values.tolist() == [["r1", runs["r1"].events[2].type, "looked up", -1.0],
                                      ["r2", runs["r2"].events[3].type, "this event", 2.0]]
    whole = runs.sql("select run_id, tag from labels where seq is null", labels=book)
    assert whole.values.tolist() == [["r2", "the run"]]  # only this collection's runs
    assert runs.sql("select count(*) as n from labels")["n"].tolist() == [0]  # no book: the view is there, empty
    runs.save_parquet(tmp_path / "runs")
    anb.Labels(tmp_path / "runs").extend(book)  # a Parquet dataset carries its labels: the view reads them
    lazy = anb.load_transcripts(tmp_path / "runs")
    typed = lazy.sql("select typeof(l.seq) as s, typeof(l.score) as f, typeof(l.at) as t from labels l limit 1")
    assert typed.values.tolist() == [["BIGINT", "DOUBLE", "TIMESTAMP WITH TIME ZONE"]]
    joined = lazy.duckdb().sql("select l.tag from labels l join turns t using (run_id, turn) order by 1").fetchall()
    assert joined == [("looked up",), ("this event",)]


def test_labels_travel_inside_an_html_export_and_the_page_still_loads_its_run(tmp_path: Path) -> None:
    t = _loop().start("Refund order 42", run_id="r1").run().transcript
    page = t.to_html(tmp_path / "run.html")
    before = anb.Transcript.load(page).events
    book = anb.Labels(page)
    assert len(book) == 0
    _label(book, t)
    book.add(t, tag="</script><script>alert(1)</script>", by="eve")
    text = page.read_text(encoding="utf-8")
    assert text.count('id="agentnb-labels"') == 1 and "alert(1)" not in text  # inert, and encoded
    assert anb.Transcript.load(page).events == before
    assert [lb.tag for lb in anb.Labels(page)][-1] == "</script><script>alert(1)</script>" and len(book) == 4
    with pytest.raises(LabelError, match="no such HTML export"):
        anb.Labels(tmp_path / "missing.html")
    damaged = text.replace('data-labels="jsonl+gzip+base64">', 'data-labels="jsonl+gzip+base64">AAAA', 1)
    (tmp_path / "damaged.html").write_text(damaged, encoding="utf-8")
    with pytest.raises(LabelError, match="the labels in this page are damaged"):
        anb.Labels(tmp_path / "damaged.html").all()


def test_sqlite_seals_are_unchanged_after_labelling_through_the_file_path(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "runs.db", key=KEY)
    _loop(store).start("Refund order 42", run_id="r1").run()

    def sealed() -> str:
        with sqlite3.connect(tmp_path / "runs.db") as db:
            rows = [db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("events", "runs", "ledger")]
        return hashlib.sha256(repr(rows).encode()).hexdigest()

    before = sealed()
    _label(anb.Labels(store), "r1")
    anb.Labels(tmp_path / "runs.db").add("r1", tag="by path", by="ana")
    assert sealed() == before
    assert [e.seq for e in anb.SqliteStore(tmp_path / "runs.db", key=KEY).load("r1")] == list(range(len(
        store.load("r1"))))
