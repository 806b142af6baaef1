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

``--dataset N`` measures a partitioned Parquet dataset (``partition_by="run_date"``) at each size of a curve up to
N (1 M, 10 M, ... N), each in a fresh process: N events written one million at a time (``append=True``: the
whole set never sits in memory), frames only (``payload=False``) and then with the payload (the lossless
default); then, from a fresh ``load_transcripts``, the three DuckDB queries (median of five runs each), and the
process's peak RSS. With ``--baseline-ref REF`` (a git commit, e.g. the one before a change) or ``--baseline
PATH`` (a checkout), the same measurement runs on that agentnb too, size by size, in the same session, and the
tables hold before, after and their ratio against the targets (10 M events: frames-only write <= 20 s, with
payload <= 60 s, each query <= 0.2 s; peak RSS <= 1.5 GB at any size).

    python bench/frames.py --dataset 10000000 --baseline-ref c0fb001
    python bench/frames.py --dataset 100000000 --no-payload     # the 100 M curve, frames only
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
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


CHUNK = 1_000_000
TARGETS = {"frames_s_per_m": 2.0, "payload_s_per_m": 6.0, "query_s": 0.2, "peak_mb": 1500.0}
"""At 10 M events: frames-only write <= 20 s, with payload <= 60 s; each query <= 0.2 s; peak RSS <= 1.5 GB."""


def write_dataset(root: str, n_events: int, tpls: list[list[BaseEvent]], payload: bool) -> list[float]:
    """Write ``n_events`` as one dataset, a million at a time; the seconds of each batch's ``save_parquet``."""
    written, start, batches = 0, 0, []
    while written < n_events:
        runs = synthetic(min(CHUNK, n_events - written), start, tpls)
        start += len(runs)
        coll = anb.TranscriptCollection(anb.Transcript(r) for r in runs)
        t, _ = timed(lambda c=coll, w=written: c.save_parquet(root, partition_by="run_date", payload=payload,
                                                              append=w > 0))
        batches.append(t)
        written += sum(len(r) for r in runs)
        print(f"  {'payload' if payload else 'frames'}: {written:,} events, {sum(batches):.1f} s, "
              f"peak RSS {peak_mb():,.0f} MB", file=sys.stderr, flush=True)
        del coll, runs
    return batches


def measure_one(n_events: int, payload: bool) -> dict[str, Any]:
    """One size, in this process: the figures ``dataset`` prints (as JSON on stdout)."""
    tpls = templates()
    out: dict[str, Any] = {"events": n_events}
    with tempfile.TemporaryDirectory() as tmp:
        out["frames_batches"] = write_dataset(f"{tmp}/frames", n_events, tpls, payload=False)
        out["open_s"], big = timed(lambda: anb.load_transcripts(f"{tmp}/frames"))
        out["runs"] = len(big)
        out["queries"] = {}
        for name, query in QUERIES.items():
            times = [timed(lambda q=query: big.sql(q))[0] for _ in range(5)]
            out["queries"][name] = statistics.median(times)
        if payload:
            shutil.rmtree(f"{tmp}/frames")
            out["payload_batches"] = write_dataset(f"{tmp}/payload", n_events, tpls, payload=True)
    out["peak_mb"] = peak_mb()
    return out


def run_one(n_events: int, payload: bool, tree: Path | None) -> dict[str, Any]:
    """``measure_one`` in a fresh process, on the agentnb of ``tree`` (None: this checkout)."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(tree if tree is not None else root)}
    argv = [sys.executable, __file__, "--measure-one", str(n_events), *([] if payload else ["--no-payload"])]
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, text=True, check=True)
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


def baseline_tree(ref: str, into: str) -> Path:
    """The ``agentnb`` package of git commit ``ref`` of this repository, extracted under ``into``."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(["git", "-C", str(root), "archive", ref, "agentnb"], stdout=subprocess.PIPE, check=True)
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    return Path(into)


def curve(n_events: int) -> list[int]:
    sizes, size = [], CHUNK
    while size < n_events:
        sizes.append(size)
        size *= 10
    return [*sizes, n_events]


def dataset(n_events: int, payload: bool, baseline: Path | None, ref: str | None) -> int:
    sides: dict[str, Path | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if ref is not None:
            baseline = baseline_tree(ref, tmp)
        if baseline is not None:
            sides["before"] = baseline
        sides["after"] = None
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for size in curve(n_events):
            for side, tree in sides.items():
                print(f"{size:,} events, {side}:", file=sys.stderr, flush=True)
                results[(side, size)] = run_one(size, payload, tree)
    report(results, list(sides), curve(n_events), payload, ref or (str(baseline) if baseline else None))
    return 0


def _figures(r: dict[str, Any]) -> dict[str, float]:
    m = r["events"] / 1e6
    out = {"frames_s": sum(r["frames_batches"])}
    out["frames_s_per_m_total"] = out["frames_s"] / m
    if "payload_batches" in r:
        out["payload_s"] = sum(r["payload_batches"])
        out["payload_s_per_m_total"] = out["payload_s"] / m
    for name, sec in r["queries"].items():
        out[name] = sec
    out["open_s"], out["peak_mb"] = r["open_s"], r["peak_mb"]
    return out


def report(results: dict[tuple[str, int], dict[str, Any]], sides: list[str], sizes: list[int], payload: bool,
           baseline: str | None) -> None:
    fig = {k: _figures(v) for k, v in results.items()}
    head = max(sizes)
    rows: list[tuple[str, str, str]] = [
        ("write, frames only (s)", "frames_s", f"<= {TARGETS['frames_s_per_m'] * head / 1e6:g}"),
        ("write, frames only (s per million)", "frames_s_per_m_total", f"<= {TARGETS['frames_s_per_m']:g}"),
    ]
    if payload:
        rows += [("write, with payload (s)", "payload_s", f"<= {TARGETS['payload_s_per_m'] * head / 1e6:g}"),
                 ("write, with payload (s per million)", "payload_s_per_m_total", f"<= {TARGETS['payload_s_per_m']:g}")]
    rows += [(f"DuckDB: {name} (s, median of 5)", name, f"<= {TARGETS['query_s']:g}") for name in QUERIES]
    rows += [("open the dataset (s)", "open_s", ""), ("peak RSS of the process (MB)", "peak_mb",
                                                       f"<= {TARGETS['peak_mb']:,.0f}")]
    before = "before" in sides
    print(f"\nDataset of {head:,} events ({results[('after', head)]['runs']:,} runs, partitioned by run_date, written "
          f"in batches of {CHUNK:,}); before = {baseline or '(not measured)'}, after = this checkout, same session")
    print("\n| figure | target | " + ("before | " if before else "") + "after | " + ("ratio |" if before else "")
          + "\n|---|---|" + ("---:|" if before else "") + "---:|" + ("---:|" if before else ""))
    for label, key, target in rows:
        a = fig[("after", head)][key]
        if before:
            b = fig[("before", head)][key]
            print(f"| {label} | {target} | {b:,.2f} | {a:,.2f} | {b / a if a else 0:.2f}x |")
        else:
            print(f"| {label} | {target} | {a:,.2f} |")
    print("\nCurve (s; per million in brackets; queries in s; ratio = before / after)\n")
    cols = ["frames-only write"] + (["payload write"] if payload else []) + list(QUERIES) + ["peak RSS MB"]
    print("| events | side | " + " | ".join(cols) + " |\n|---:|---|" + "---:|" * len(cols))
    for size in sizes:
        for side in sides:
            f = fig[(side, size)]
            cells = [f"{f['frames_s']:.1f} ({f['frames_s_per_m_total']:.2f})"]
            if payload:
                cells.append(f"{f['payload_s']:.1f} ({f['payload_s_per_m_total']:.2f})")
            cells += [f"{f[name]:.3f}" for name in QUERIES] + [f"{f['peak_mb']:,.0f}"]
            print(f"| {size:,} | {side} | " + " | ".join(cells) + " |")
        if before:
            b, a = fig[("before", size)], fig[("after", size)]
            cells = [f"{b['frames_s'] / a['frames_s']:.2f}x"]
            if payload:
                cells.append(f"{b['payload_s'] / a['payload_s']:.2f}x")
            cells += [f"{b[name] / a[name]:.2f}x" for name in QUERIES] + [f"{b['peak_mb'] / a['peak_mb']:.2f}x"]
            print(f"| {size:,} | ratio | " + " | ".join(cells) + " |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--dataset", type=int, default=0, help="write and query a Parquet dataset of this many events")
    ap.add_argument("--no-payload", action="store_true", help="--dataset: the frames-only write only")
    ap.add_argument("--baseline", type=Path, help="--dataset: a checkout of agentnb to measure as 'before'")
    ap.add_argument("--baseline-ref", help="--dataset: a git commit of this repository to measure as 'before'")
    ap.add_argument("--measure-one", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_one:
        print(json.dumps(measure_one(args.measure_one, not args.no_payload)))
        return 0
    if args.dataset:
        return dataset(args.dataset, not args.no_payload, args.baseline, args.baseline_ref)

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
