"""Collections: frames over many runs, lossless JSONL and Parquet round trips, lazy Parquet loading."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import agentnb as anb
from agentnb.events import event_to_dict
from agentnb.frames import FRAMES
from tests.test_frames import approved, denied, scripted, story, with_compression


@pytest.fixture(scope="module")
def collection() -> anb.TranscriptCollection:
    from tests.conftest import add, boom

    return anb.TranscriptCollection([
        approved().transcript,
        denied().transcript,
        story("parallel", "parallel", stream=True).transcript,
        story("malformed", "malformed").transcript,
        story("looping", "guard", max_turns=2).transcript,
        scripted("error", [{"tool_calls": [{"name": "boom", "arguments": {"message": "é ünïcode"}}]},
                           {"text": "it failed"}], [add, boom]).transcript,
        with_compression(story("weather", "compressed")),
        story("refund", "waiting").transcript,
    ])


def same_events(a: anb.TranscriptCollection, b: anb.TranscriptCollection) -> None:
    assert a.run_ids == b.run_ids
    for x, y in zip(a, b, strict=True):
        assert [event_to_dict(e) for e in x] == [event_to_dict(e) for e in y]
        assert x.messages == y.messages and x.state is y.state


def same_frames(a: anb.TranscriptCollection, b: anb.TranscriptCollection) -> None:
    for name in FRAMES:
        assert_frame_equal(a.frames.frame(name), b.frames.frame(name), obj=name)
    assert_frame_equal(a.frames.events(payload=True), b.frames.events(payload=True))


def test_frames_cover_every_run(collection: anb.TranscriptCollection) -> None:
    calls = collection.frames.calls()
    assert list(calls["run_id"].cat.categories) == collection.run_ids
    per_run = calls.groupby("run_id", observed=False).size()
    assert per_run["parallel"] == 3 and per_run["guard"] == 2 and per_run["waiting"] == 2
    assert collection.frames.guards()["run_id"].tolist() == ["guard"]
    assert collection.frames.compressions()["run_id"].tolist() == ["compressed"]
    events = collection.frames.events()
    assert len(events) == sum(len(t) for t in collection)
    assert collection["denied"].run_id == "denied" and len(collection[1:3]) == 2


def test_repeated_run_ids_are_refused(collection: anb.TranscriptCollection) -> None:
    with pytest.raises(ValueError, match="repeated run ids"):
        anb.TranscriptCollection([collection[0], collection[0]])


@pytest.mark.parametrize("layout", ["file", "folder"])
def test_jsonl_round_trip_is_lossless(collection: anb.TranscriptCollection, tmp_path: Path, layout: str) -> None:
    target = tmp_path / ("all.jsonl" if layout == "file" else "runs")
    collection.save_jsonl(target)
    loaded = anb.load_transcripts(target if layout == "file" else str(target / "*.jsonl"))
    if layout == "folder":  # files come back sorted by name
        loaded = anb.TranscriptCollection(loaded[r] for r in collection.run_ids)
    same_events(collection, loaded)
    same_frames(collection, loaded)


@pytest.mark.parametrize("partition_by_run", [False, True])
def test_parquet_round_trip_is_lossless(collection: anb.TranscriptCollection, tmp_path: Path,
                                        partition_by_run: bool) -> None:
    collection.save_parquet(tmp_path / "pq", partition_by_run=partition_by_run)
    if partition_by_run:
        assert (tmp_path / "pq" / "calls" / "run_id=parallel").is_dir()
    loaded = anb.load_transcripts(tmp_path / "pq")
    assert "from" in repr(loaded)
    same_frames(collection, loaded)  # read from the stored frames
    same_events(collection, loaded)  # rebuilt from the events dataset
    assert "from" not in repr(loaded)
    same_frames(collection, loaded)  # now built from the rebuilt events


def test_parquet_files_are_plain_tables(collection: anb.TranscriptCollection, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    collection.save_parquet(tmp_path)
    table = pq.read_table(tmp_path / "calls" / "part-0.parquet")
    assert table.column_names == [c.name for c in FRAMES["calls"]]
    assert str(table.schema.field("ts_called").type) == "timestamp[us, tz=UTC]"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["run_files"] == ["runs/part-0.parquet"] and "run_ids" not in manifest  # a batch's line, no ids
    assert pq.read_table(tmp_path / "runs" / "part-0.parquet").column("run_id").to_pylist() == collection.run_ids


def test_stale_parquet_frames_are_rebuilt(collection: anb.TranscriptCollection, tmp_path: Path) -> None:
    collection.save_parquet(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["frames"]["calls"] = manifest["frames"]["calls"][:-1]  # as if written by an older version
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    loaded = anb.load_transcripts(tmp_path)
    assert_frame_equal(loaded.frames.calls(), collection.frames.calls())


def test_loading_errors_name_the_file(tmp_path: Path, collection: anb.TranscriptCollection) -> None:
    with pytest.raises(FileNotFoundError, match="no file matches"):
        anb.load_transcripts(str(tmp_path / "*.jsonl"))
    with pytest.raises(FileNotFoundError, match="no such file"):
        anb.load_transcripts(tmp_path / "missing.jsonl")
    collection[0].save(tmp_path / "a.jsonl")
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    (tmp_path / "b.jsonl").write_text("\n".join([lines[0], lines[2]]) + "\n")
    with pytest.raises(anb.TranscriptError, match=r"b\.jsonl: run approved"):
        anb.load_transcripts(tmp_path / "b.jsonl")
    (tmp_path / "c.jsonl").write_text('{"type": "Nope"}\n')
    with pytest.raises(anb.TranscriptError, match=r"c\.jsonl:1"):
        anb.load_transcripts([tmp_path / "c.jsonl"])


def test_collection_frames_equal_concatenated_transcript_frames(collection: anb.TranscriptCollection) -> None:
    parts = [t.frames.calls() for t in collection]
    glued = pd.concat(parts, ignore_index=True)
    whole = collection.frames.calls()
    assert glued["call_id"].tolist() == whole["call_id"].tolist()
    assert glued["status"].astype(str).tolist() == whole["status"].astype(str).tolist()
