"""The debugger's Label and Add-to-dataset buttons, driven as the page drives them (its messages), with no browser:
labels go beside the log through the label API (seals unchanged), show in the view's state at once, work on a
finished run and a replayed file, and a refusal is a message on the page, never a traceback."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb.evals import Dataset
from tests.test_labels import _loop

KEY = b"k" * 32


def _click(dbg: anb.Debugger, method: str, **args: Any) -> dict[str, Any]:
    """What a click in the page sends, and the labels' state the page then draws."""
    dbg._on_msg(dbg.view, {"kind": "call", "method": method, "args": args}, None)
    return dict(dbg.view.labels)


def _sealed(path: Path) -> str:
    with sqlite3.connect(path) as db:
        rows = [db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("events", "runs", "ledger")]
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def _finished(store: anb.Store | None = None) -> anb.Run:
    run = _loop(store).start("Refund order 42", run_id="r1").run()
    run.approve(run.pending_approvals()[0].call_id)
    return run.run()


def test_labels_from_the_page_go_beside_a_finished_runs_log_and_show_at_once(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "runs.db", key=KEY)
    run = _finished(store)
    before = _sealed(tmp_path / "runs.db")
    dbg = anb.Debugger(run, by="ana")  # no book given: the run's own store keeps them
    assert dbg.view.labels["can"] and "SQLite" in dbg.view.labels["book"] and dbg.view.labels["items"] == []
    state = _click(dbg, "label", form="run", about="run", tag="good run", note="", score="")
    assert state["error"] == "" and state["done"] == "labelled the run (good run)" and state["form"] == "run"
    assert [(i["seq"], i["tag"], i["by"]) for i in state["items"]] == [(None, "good run", "ana")]
    call = next(e for e in run.events if e.type == "ToolFinished" and e.name == "refund")
    dbg.select(call.seq)
    targets = dbg.view.labels["targets"]
    assert [t["about"] for t in targets] == ["event", "call", "turn"] and targets[1]["call_id"] == call.call_id
    state = _click(dbg, "label", form="event", about="event", seq=call.seq, tag="slow", score="0.5")
    state = _click(dbg, "label", form="event", about="call", call_id=call.call_id, tag="right amount", score="1")
    assert state["error"] == "" and len(state["items"]) == 3
    assert _sealed(tmp_path / "runs.db") == before  # nothing of the log changed: no event, no seal
    frame = run.transcript.frames.labels(anb.Labels(store))
    assert frame["tag"].tolist() == ["good run", "slow", "right amount"]
    assert frame["seq"].tolist()[1] == call.seq and frame["call_id"].tolist()[2] == call.call_id
    assert frame["score"].tolist()[1:] == [0.5, 1.0] and set(frame["by"]) == {"ana"}
    merged = frame.merge(run.transcript.frames.calls(), on=["run_id", "call_id"])
    assert merged["tool"].tolist() == ["refund"]
    again = anb.SqliteStore(tmp_path / "runs.db", key=KEY)
    assert [e.seq for e in again.load("r1")] == [e.seq for e in run.events]  # every seal still verifies


def test_a_refusal_is_a_message_on_the_page(tmp_path: Path) -> None:
    in_memory = anb.Debugger(_finished(), by="ana")
    state = in_memory.view.labels
    assert not state["can"] and "nowhere to keep labels" in state["why"]
    state = _click(in_memory, "label", form="run", about="run", tag="x")
    assert "Debugger(run, labels=" in state["error"] and state["form"] == "run" and state["items"] == []
    dbg = anb.Debugger(_finished(), labels=tmp_path / "labels.jsonl", by="ana")
    for args, said in [({"about": "event", "seq": 999, "tag": "x"}, "has no event 999"),
                       ({"about": "call", "call_id": "call_9_9", "tag": "x"}, "has no call 'call_9_9'"),
                       ({"about": "turn", "turn": 42, "tag": "x"}, "has no turn 42"),
                       ({"about": "run", "tag": "", "note": " ", "score": ""}, "give a tag, a note or a score"),
                       ({"about": "run", "score": "very"}, "a score is a number"),
                       ({"about": "run", "score": "nan"}, "a score is a finite number"),
                       ({"about": "run", "tag": "x" * 201}, "at most 200 characters"),
                       ({"about": "event", "tag": "x"}, "select an event first"),
                       ({"about": "turn", "tag": "x"}, "select an event first")]:
        state = _click(dbg, "label", form="event", **args)
        assert said in state["error"] and state["form"] == "event" and state["done"] == "", args
    assert not (tmp_path / "labels.jsonl").exists() or anb.Labels(tmp_path / "labels.jsonl").all() == []
    (tmp_path / "a-file").write_text("")
    unwritable = anb.Debugger(_finished(), labels=tmp_path / "a-file" / "labels.jsonl")  # a book that cannot be
    assert "a-file" in _click(unwritable, "label", form="run", about="run", tag="x")["error"]  # written: said
    store = anb.SqliteStore(tmp_path / "ro.db", key=KEY)
    _finished(store)
    readonly = anb.Debugger(anb.Transcript(anb.SqliteStore(tmp_path / "ro.db", key=KEY, readonly=True).load("r1")),
                            labels=anb.SqliteStore(tmp_path / "ro.db", key=KEY, readonly=True))
    assert "read-only" in _click(readonly, "label", form="run", about="run", tag="x")["error"]


def test_a_replayed_file_is_labelled_beside_it_and_an_export_inside_itself(tmp_path: Path) -> None:
    t = _finished().transcript
    t.save(tmp_path / "run.jsonl")
    dbg = anb.Debugger(str(tmp_path / "run.jsonl"), by="bo")  # a replay at its first event labels the whole run
    assert not dbg.live and dbg.view.labels["can"] and len(dbg.timeline) == 1
    assert dbg.view.labels["dataset"] is None
    assert _click(dbg, "label", form="event", about="event", seq=3, tag="look")["error"] == ""
    assert [lb.tag for lb in anb.Labels.beside(tmp_path / "run.jsonl")] == ["look"]
    assert anb.Transcript.load(tmp_path / "run.jsonl").events == t.events
    t.to_html(tmp_path / "run.html")
    page = anb.Debugger(str(tmp_path / "run.html"), start="end", by="bo")
    assert _click(page, "label", form="run", about="run", tag="exported", note="read me")["error"] == ""
    assert [lb.tag for lb in anb.Labels(tmp_path / "run.html")] == ["exported"]
    assert anb.Transcript.load(tmp_path / "run.html").events == t.events  # the page still loads its run


def test_labels_given_elsewhere_show_when_the_person_clicks_or_asks(tmp_path: Path) -> None:
    book = anb.Labels(tmp_path / "labels.jsonl")
    run = _finished()
    dbg = anb.Debugger(run, labels=book, by="ana")
    book.add(run.transcript, seq=2, tag="from code", by="ben")  # another hand, another cell
    dbg.select(2)
    assert [(i["seq"], i["tag"], i["by"]) for i in dbg.view.labels["items"]] == [(2, "from code", "ben")]
    book.add(run.transcript, tag="later", by="ben")
    dbg.reload_labels()
    assert [i["tag"] for i in dbg.view.labels["items"]] == ["from code", "later"]
    page = dbg.export_html(tmp_path / "run.html")  # the labels travel with the debugger's export
    assert [lb.tag for lb in anb.Labels(page)] == ["from code", "later"]
    assert anb.Transcript.load(page).events == run.events
    hostile = dbg.label(tag="a\u202eb", note="<script>alert(1)</script>")
    shown = dbg.view.labels["items"][-1]
    assert hostile.tag == "a\u202eb" and "\u202e" not in shown["tag"] and shown["note"] == hostile.note


def test_add_this_run_to_a_dataset_from_the_page() -> None:
    ds = Dataset()
    run = _finished()
    dbg = anb.Debugger(run, dataset=ds)
    offer = dbg.view.labels["dataset"]
    assert offer == {"where": "0 cases", "id": "r1", "expected": "Refunded."}
    state = _click(dbg, "add_to_dataset", id="r1", expected="Refunded.", calls=True)
    assert state["done"] == "added case 'r1' to the dataset (1 case)" and state["form"] == "dataset"
    assert ds["r1"].prompt == "Refund order 42" and ds["r1"].expected == "Refunded."
    assert [c["tool"] for c in ds["r1"].calls or []] == ["lookup", "refund"]
    state = _click(dbg, "add_to_dataset", id="r1", expected="", calls=True)
    assert "has a case 'r1' already" in state["error"] and len(ds) == 1
    state = _click(dbg, "add_to_dataset", id="r1-bare", expected="  ", calls=False)
    assert state["error"] == "" and ds["r1-bare"].expected is None and ds["r1-bare"].calls is None
    result = anb.evaluate(_loop(), ds, [anb.scorers.exact(), anb.scorers.calls()], progress=False, concurrency=1)
    assert len(result.table) == 4
    nowhere = anb.Debugger(run)
    assert nowhere.view.labels["dataset"] is None
    assert "no dataset to add to" in _click(nowhere, "add_to_dataset", expected="x")["error"]
    with pytest.raises(TypeError, match="dataset= is an agentnb.evals.Dataset"):
        anb.Debugger(run, dataset={"id": "x"})  # type: ignore[arg-type]


def test_a_typed_runs_expected_output_is_its_json_and_a_file_dataset_is_written(tmp_path: Path) -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        city: str
        temp_c: int

    answer = {"name": "final_result", "arguments": {"city": "Paris", "temp_c": 18}}
    model = anb.ScriptedModel([{"tool_calls": [answer]}])
    loop = anb.Loop(model=model, output_type=Answer)
    run = loop.start("Paris?", run_id="typed").run()
    path = tmp_path / "cases.jsonl"
    dbg = anb.Debugger(run, dataset=path)
    offer = dbg.view.labels["dataset"]
    assert json.loads(offer["expected"]) == {"city": "Paris", "temp_c": 18} and offer["where"] == str(path)
    assert "is JSON" in _click(dbg, "add_to_dataset", id="typed", expected="{not json", calls=True)["error"]
    state = _click(dbg, "add_to_dataset", id="typed", expected='{"city": "Paris", "temp_c": 19}', calls=True)
    assert state["error"] == "" and str(path) in state["done"]
    assert Dataset(path)["typed"].expected == {"city": "Paris", "temp_c": 19}
    _click(dbg, "add_to_dataset", id="typed-2", expected="", calls=True)
    assert [c.id for c in Dataset(path)] == ["typed", "typed-2"]  # read, added to and written again


def test_a_forks_debugger_keeps_the_book_the_person_and_the_dataset(tmp_path: Path) -> None:
    book, cases = tmp_path / "labels.jsonl", Dataset()
    run = _finished()
    dbg = anb.Debugger(run, labels=book, by="ana", dataset=cases)
    child = dbg.fork(2)
    assert (child.by, child.labels_by, child.dataset) == ("ana", "ana", cases)
    assert child.label_book is not None and child.label_book == dbg.label_book
