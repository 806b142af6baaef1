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


def synthetic(n_events: int) -> list[list[BaseEvent]]:
    tpls = templates()
    out: list[list[BaseEvent]] = []
    total = 0
    i = 0
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--skip-naive", action="store_true")
    args = ap.parse_args()

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
