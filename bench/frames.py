"""Frames at scale: build the events and calls frames of ~1,000,000 events (~20,000 runs).

A handful of scripted runs of every kind (answers, parallel calls, approvals, denials, schema and JSON errors, a
guard trip, streamed and whole turns) are cloned, with new run ids and shifted times, into a synthetic
collection. Then, in the same process:

- the naive way: ``pandas.DataFrame([event_to_dict(e) for e in events])``;
- ours: ``frames.events()`` and ``frames.calls()`` (column-wise, typed);
- Parquet: ``save_parquet`` and, from a fresh load, the events and calls frames.

Peak memory is the process's maximum resident set size after each phase (``ru_maxrss``).

    python bench/frames.py                # 1,000,000 events
    python bench/frames.py --events 100000
    python bench/frames.py --dataset 10000000   # a 10 M event Parquet dataset: write, open, three DuckDB queries

``--dataset N`` writes N events as one partitioned Parquet dataset (``partition_by="run_date"``), one
million events at a time (``append=True``: the whole set never sits in memory), frames only
(``payload=False``); beside it, one million events written with the payload (the lossless default) for the
per-million comparison. Then, from a fresh ``load_transcripts``: three typical queries through DuckDB.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pandas as pd

import agentnb as anb
from agentnb.events import BaseEvent, event_to_dict
from agentnb.frames import build


def templates() -> list[list[BaseEvent]]:
    def story(name: str, **opts: Any) -> anb.Run:
        stream = opts.pop("stream", False)
        model = anb.ScriptedModel.story(name, stream=stream, chunk_size=3)
        loop = anb.Loop(model=model, tools=anb.stories.tools(name), **opts)
        return loop.start("go").run()

    # streamed and whole turns mixed so a run averages ~50 events, as in the issue (1M events ~ 20,000 runs)
    runs = [story("weather", stream=True), story("parallel", stream=True), story("calculator"),
            story("malformed", stream=True), story("looping", max_turns=4), story("parallel"),
            story("weather")]
    for decide in ("approve", "deny"):
        r = story("refund", stream=True)
        call = r.pending_approvals()[0].call_id
        r.approve(call) if decide == "approve" else r.deny(call, "no")
        r.run()
        runs.append(r)
    return [list(r.events) for r in runs]


def synthetic(n_events: int, start: int = 0, tpls: list[list[BaseEvent]] | None = None) -> list[list[BaseEvent]]:
    tpls = tpls or templates()
    out: list[list[BaseEvent]] = []
    total = 0
    i = start
    while total < n_events:
        tpl = tpls[i % len(tpls)]
        rid = f"run_{i:06d}"
        shift = timedelta(seconds=i)
        out.append([replace(e, run_id=rid, ts=e.ts + shift) for e in tpl])
        total += len(tpl)
        i += 1
    return out


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Any) -> tuple[float, Any]:
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


QUERIES = {
    "tool latency by tool": "select tool, count(*) as calls, avg(duration_s) as mean_s, "
                            "quantile_cont(duration_s, 0.95) as p95_s from calls group by tool order by calls desc",
    "tokens per run": "select run_id, sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens "
                      "from turns group by run_id order by input_tokens desc limit 10",
    "failure rate by model": "select t.model, avg(case when c.status = 'ok' then 0.0 else 1.0 end) as failure_rate, "
                             "count(*) as calls from calls c join turns t using (run_id, turn) group by t.model",
}


def dataset(n_events: int, chunk: int = 1_000_000) -> int:
    tpls = templates()
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        one = synthetic(min(chunk, n_events), 0, tpls)
        coll = anb.TranscriptCollection(anb.Transcript(r) for r in one)
        m = sum(len(r) for r in one) / 1e6
        t_base, _ = timed(lambda: coll.save_parquet(f"{tmp}/before"))
        rows.append(("write 1 M events as before (payload, no partitions)", t_base / m, "s per million events"))
        t_pay, _ = timed(lambda: coll.save_parquet(f"{tmp}/lossless", partition_by="run_date"))
        rows.append(("write 1 M events with payload, partitioned", t_pay / m, "s per million events"))
        t_frames, _ = timed(lambda: coll.save_parquet(f"{tmp}/frames1", partition_by="run_date", payload=False))
        rows.append(("write 1 M events, frames only", t_frames / m, "s per million events"))
        del coll, one
        written, start, t_write = 0, 0, 0.0
        while written < n_events:
            runs = synthetic(min(chunk, n_events - written), start, tpls)
            start += len(runs)
            coll = anb.TranscriptCollection(anb.Transcript(r) for r in runs)
            t, _ = timed(lambda c=coll, w=written: c.save_parquet(f"{tmp}/big", partition_by="run_date",
                                                                  payload=False, append=w > 0))
            t_write += t
            written += sum(len(r) for r in runs)
            print(f"  wrote {written:,} events ({t_write:.1f} s so far), peak RSS {peak_mb():,.0f} MB", flush=True)
            del coll, runs
        rows.append((f"write {written / 1e6:.0f} M events, frames only (in 1 M batches)", t_write,
                     f"{t_write / (written / 1e6):.2f} s per million"))
        t_open, big = timed(lambda: anb.load_transcripts(f"{tmp}/big"))
        rows.append(("open the dataset (load_transcripts)", t_open, f"{len(big):,} runs"))
        for name, query in QUERIES.items():
            t_q, answer = timed(lambda q=query: big.sql(q))
            rows.append((f"DuckDB: {name}", t_q, f"{len(answer)} rows; target < 10 s"))
    print(f"\n| measurement ({written:,} events) | seconds | notes |\n|---|---:|---|")
    for name, sec, note in rows:
        print(f"| {name} | {sec:.2f} | {note} |")
    print(f"\nfinal peak RSS {peak_mb():,.0f} MB")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--dataset", type=int, default=0, help="write and query a Parquet dataset of this many events")
    args = ap.parse_args()
    if args.dataset:
        return dataset(args.dataset)

    t_make, runs = timed(lambda: synthetic(args.events))
    n = sum(len(r) for r in runs)
    print(f"synthetic collection: {n:,} events, {len(runs):,} runs, built in {t_make:.1f} s; "
          f"peak RSS {peak_mb():,.0f} MB", flush=True)
    coll = anb.TranscriptCollection(anb.Transcript(r) for r in runs)

    rows: list[tuple[str, float, str]] = []
    t_ev, ev = timed(lambda: coll.frames.events())
    rows.append(("events frame (ours)", t_ev, f"{len(ev):,} rows, {ev.memory_usage(deep=True).sum() / 2**20:,.0f} MB"))
    t_calls, calls = timed(lambda: coll.frames.calls())
    rows.append(("calls frame (ours)", t_calls,
                 f"{len(calls):,} rows, {calls.memory_usage(deep=True).sum() / 2**20:,.0f} MB"))
    ours = t_ev + t_calls
    rows.append(("events + calls (ours)", ours, f"peak RSS {peak_mb():,.0f} MB"))
    del ev

    with tempfile.TemporaryDirectory() as tmp:
        t_save, _ = timed(lambda: coll.save_parquet(tmp))
        rows.append(("save_parquet (all frames + payload)", t_save, f"peak RSS {peak_mb():,.0f} MB"))
        t_load, loaded_ev = timed(lambda: anb.load_transcripts(tmp).frames.events())
        rows.append(("load events frame from Parquet", t_load, f"{len(loaded_ev):,} rows"))
        t_lcalls, _ = timed(lambda: anb.load_transcripts(tmp).frames.calls())
        rows.append(("load calls frame from Parquet", t_lcalls, ""))
        del loaded_ev

    if not args.skip_naive:
        flat = [e for r in runs for e in r]

        def naive() -> pd.DataFrame:
            return pd.DataFrame([event_to_dict(e) for e in flat])

        t_naive, df = timed(naive)
        rows.append(("naive DataFrame([event_to_dict(e)])", t_naive,
                     f"{df.shape[1]} untyped columns, peak RSS {peak_mb():,.0f} MB"))
        del df
        rows.append(("ratio naive / ours (events + calls)", t_naive / ours, "target >= 5x"))
        rows.append(("ratio naive / ours (events only)", t_naive / t_ev, ""))

    print(f"\n| measurement ({n:,} events, {len(runs):,} runs) | seconds | notes |\n|---|---:|---|")
    for name, sec, note in rows:
        value = f"{sec:.1f}x" if name.startswith("ratio") else f"{sec:.2f}"
        print(f"| {name} | {value} | {note} |")
    print(f"\nfinal peak RSS {peak_mb():,.0f} MB; python {sys.version.split()[0]}, pandas {pd.__version__}")
    _ = build  # the builder used by frames (imported to show where the work happens)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
