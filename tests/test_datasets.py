"""Transcript datasets: partitioned Parquet written in batches, read lazily, queried with DuckDB, Dask and Polars."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import agentnb as anb
from agentnb.frames import FRAMES
from tests.test_collection import collection, same_events, same_frames  # noqa: F401 - the fixture

LATENCY_BY_TOOL = "select tool, count(*) as n, avg(duration_s) as mean_s from calls group by tool order by tool"
TOKENS_PER_RUN = ("select run_id, sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens "
                  "from turns group by run_id order by run_id")
FAILURE_RATE_BY_MODEL = (
    "select t.model, avg(case when c.status = 'ok' then 0.0 else 1.0 end) as failure_rate, count(*) as calls "
    "from calls c join turns t using (run_id, turn) group by t.model order by t.model"
)


def pandas_answers(coll: anb.TranscriptCollection) -> dict[str, pd.DataFrame]:
    """The three queries computed with pandas over the frames (what SQL must agree with)."""
    calls, turns = coll.frames.calls(), coll.frames.turns()
    calls = calls.assign(tool=calls["tool"].astype(str), run_id=calls["run_id"].astype(str))
    latency = (calls.groupby("tool").agg(n=("call_id", "size"), mean_s=("duration_s", "mean"))
               .reset_index().sort_values("tool", ignore_index=True))
    turns = turns.assign(run_id=turns["run_id"].astype(str), model=turns["model"].astype(str))
    tokens = (turns.groupby("run_id")[["input_tokens", "output_tokens"]].sum().reset_index()
              .sort_values("run_id", ignore_index=True))
    joined = calls.merge(turns[["run_id", "turn", "model"]], on=["run_id", "turn"])
    joined["failed"] = (joined["status"].astype(str) != "ok").astype(float)
    failure = (joined.groupby("model").agg(failure_rate=("failed", "mean"), calls=("failed", "size"))
               .reset_index().sort_values("model", ignore_index=True))
    return {"latency": latency, "tokens": tokens, "failure": failure}


def sql_answers(coll: anb.TranscriptCollection) -> dict[str, pd.DataFrame]:
    return {"latency": coll.sql(LATENCY_BY_TOOL), "tokens": coll.sql(TOKENS_PER_RUN),
            "failure": coll.sql(FAILURE_RATE_BY_MODEL)}


def same_answers(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    for name in a:
        assert_frame_equal(a[name].reset_index(drop=True), b[name].reset_index(drop=True), check_dtype=False,
                           check_exact=False, obj=name)


def test_sql_agrees_with_pandas_in_memory_and_on_parquet(
    collection: anb.TranscriptCollection, tmp_path: Path  # noqa: F811
) -> None:
    expected = pandas_answers(collection)
    assert len(expected["latency"]) >= 3 and expected["failure"]["failure_rate"].gt(0).any()
    same_answers(sql_answers(collection), expected)
    collection.save_parquet(tmp_path / "pq", partition_by=["run_date", "run_model"])
    loaded = anb.load_transcripts(tmp_path / "pq")
    same_answers(sql_answers(loaded), expected)
    assert "from" in repr(loaded)  # the queries read the files: no run was rebuilt in memory


def test_a_partitioned_dataset_round_trips_and_prunes_by_key(
    collection: anb.TranscriptCollection, tmp_path: Path  # noqa: F811
) -> None:
    collection.save_parquet(tmp_path / "pq", partition_by=["run_date", "run_model"])
    dates = sorted(p.name for p in (tmp_path / "pq" / "calls").iterdir())
    assert dates and all(d.startswith("run_date=") for d in dates)
    loaded = anb.load_transcripts(tmp_path / "pq")
    same_frames(collection, loaded)
    same_events(collection, loaded)
    models = anb.load_transcripts(tmp_path / "pq").sql("select distinct run_model from turns order by 1")
    one = models["run_model"].iloc[-1]
    counted = anb.load_transcripts(tmp_path / "pq").sql(f"select count(*) as n from calls where run_model = '{one}'")
    runs_of_model = {t.run_id for t in collection if t.events[0].model == one}
    assert runs_of_model
    calls = collection.frames.calls()
    assert counted["n"].iloc[0] == calls["run_id"].astype(str).isin(runs_of_model).sum()


def test_a_dataset_is_written_one_batch_at_a_time(
    collection: anb.TranscriptCollection, tmp_path: Path  # noqa: F811
) -> None:
    target = tmp_path / "pq"
    collection[:3].save_parquet(target, partition_by="run_date")
    collection[3:].save_parquet(target, partition_by="run_date", append=True)
    loaded = anb.load_transcripts(target)
    assert loaded.run_ids == collection.run_ids
    same_frames(collection, loaded)
    same_events(collection, loaded)
    with pytest.raises(anb.TranscriptError, match="already holds runs"):
        collection[:1].save_parquet(target, partition_by="run_date", append=True)
    with pytest.raises(anb.TranscriptError, match="other options"):
        collection[:1].save_parquet(target, append=True)
    with pytest.raises(ValueError, match="cannot partition by 'tool'"):
        collection.save_parquet(tmp_path / "x", partition_by="tool")


def test_an_append_writes_its_own_files_and_rewrites_none_of_the_others(
    collection: anb.TranscriptCollection, tmp_path: Path  # noqa: F811
) -> None:
    target = tmp_path / "pq"
    collection[:3].save_parquet(target, partition_by="run_date", payload=False)
    before = {p: p.read_bytes() for p in target.rglob("*.parquet")}
    collection[3:].save_parquet(target, partition_by="run_date", payload=False, append=True)
    assert all(p.read_bytes() == data for p, data in before.items())  # the first batch's files, untouched
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["run_files"] == ["runs/part-0.parquet", "runs/part-1.parquet"] and "run_ids" not in manifest
    assert anb.load_transcripts(target).run_ids == collection.run_ids


def test_a_dataset_with_its_run_ids_in_the_manifest_is_read_and_appended_to(
    collection: anb.TranscriptCollection, tmp_path: Path  # noqa: F811
) -> None:
    target = tmp_path / "pq"
    collection[:3].save_parquet(target, partition_by="run_date")
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))  # as version 2 wrote it
    del manifest["run_files"]
    manifest.update(version=2, run_ids=collection.run_ids[:3])
    shutil.rmtree(target / "runs")
    (target / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert anb.load_transcripts(target).run_ids == collection.run_ids[:3]
    collection[3:].save_parquet(target, partition_by="run_date", append=True)
    loaded = anb.load_transcripts(target)
    assert loaded.run_ids == collection.run_ids
    same_frames(collection, loaded)
    same_events(collection, loaded)
    with pytest.raises(anb.TranscriptError, match=r"already holds runs \['approved'\]"):
        collection[:1].save_parquet(target, partition_by="run_date", append=True)
    (target / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(anb.TranscriptError, match="not JSON"):
        anb.load_transcripts(target)


def test_frames_only_datasets_answer_frames_and_sql_but_not_transcripts(
    collection: anb.TranscriptCollection, tmp_path: Path  # noqa: F811
) -> None:
    collection.save_parquet(tmp_path / "pq", payload=False)
    loaded = anb.load_transcripts(tmp_path / "pq")
    for name in FRAMES:
        assert_frame_equal(loaded.frames.frame(name), collection.frames.frame(name), obj=name)
    same_answers(sql_answers(loaded), pandas_answers(collection))
    with pytest.raises(anb.TranscriptError, match="payload=False"):
        loaded.transcripts  # noqa: B018


def test_dask_and_polars_read_the_dataset_with_the_documented_columns(
    collection: anb.TranscriptCollection, tmp_path: Path  # noqa: F811
) -> None:
    dd = pytest.importorskip("dask.dataframe")
    collection.save_parquet(tmp_path / "pq", partition_by=["run_date"])
    calls = dd.read_parquet(str(tmp_path / "pq" / "calls")).compute()
    documented = [c.name for c in FRAMES["calls"]]
    assert set(documented) <= set(calls.columns) and "run_date" in calls.columns
    assert len(calls) == len(collection.frames.calls())
    by_tool = calls.groupby("tool", observed=True).size().sort_index()
    expected = collection.frames.calls().groupby("tool", observed=True).size().sort_index()
    assert by_tool.to_dict() == expected.to_dict()
    pl = pytest.importorskip("polars")
    turns = pl.read_parquet(str(tmp_path / "pq" / "turns" / "**" / "*.parquet"), hive_partitioning=True)
    assert set(c.name for c in FRAMES["turns"]) <= set(turns.columns) and turns.height == len(collection.frames.turns())
