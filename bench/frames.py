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
    python bench/frames.py --dataset 100000000 --no-payload --sizes 100000000   # 100 M events, frames only
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


def worker(n_events: int, payload: bool) -> None:
    """One side of the measurement, step by step in lockstep with the other (see :func:`lockstep`).

    Before each step the worker waits for ``prep`` (it prepares what the step needs: a batch's synthetic runs,
    untimed), says ``ready``, waits for ``go``, runs the step alone on the machine and says what it took.
    """
    tpls = templates()

    def step(label: str | None, prepare: Any = lambda: None, run: Any = lambda _: None) -> None:
        assert sys.stdin.readline().strip() == "prep"
        thing = prepare()
        gc.collect()
        print(json.dumps({"ready": label}), flush=True)
        if label is None:
            return
        assert sys.stdin.readline().strip() == "go"
        t, c = time.perf_counter(), time.process_time()
        run(thing)
        print(json.dumps({"done": label, "wall": time.perf_counter() - t, "cpu": time.process_time() - c,
                          "rss": peak_mb()}), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("frames", "payload") if payload else ("frames",):
            written, start, root = 0, 0, f"{tmp}/{kind}"
            while written < n_events:
                runs = synthetic(min(CHUNK, n_events - written), start, tpls)
                start, append, written = start + len(runs), written > 0, written + sum(len(r) for r in runs)
                step(f"{kind} {written}", lambda r=runs: anb.TranscriptCollection(anb.Transcript(x) for x in r),
                     lambda c, a=append, p=kind == "payload", d=root: c.save_parquet(d, partition_by="run_date",
                                                                                     payload=p, append=a))
                del runs
            if kind == "frames":
                step("open", run=lambda _, d=root: anb.load_transcripts(d))
                big = anb.load_transcripts(root)
                print(json.dumps({"runs": len(big)}), flush=True)
                for name, query in QUERIES.items():
                    for k in range(5):
                        step(f"query {name} {k}", run=lambda _, q=query, b=big: b.sql(q))
            shutil.rmtree(root)
    step(None)  # the end


class Side:
    """A worker process on the agentnb of ``tree`` (None: this checkout)."""

    def __init__(self, n_events: int, payload: bool, tree: Path | None) -> None:
        root = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": str(tree if tree is not None else root)}
        argv = [sys.executable, __file__, "--worker", str(n_events), *([] if payload else ["--no-payload"])]
        self.process = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.steps: dict[str, dict[str, float]] = {}
        self.runs = 0

    def say(self, word: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()

    def hear(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"a worker stopped (exit {self.process.wait()})")
        said: dict[str, Any] = json.loads(line)
        if "runs" in said:
            self.runs = said["runs"]
            return self.hear()
        return said

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def lockstep(n_events: int, payload: bool, trees: dict[str, Path | None]) -> dict[str, Side]:
    """Every step of the sides in turn, each alone on the machine (their order alternates step by step), so
    before and after share the machine's moods batch by batch and query by query."""
    sides = {label: Side(n_events, payload, tree) for label, tree in trees.items()}
    order = list(sides)
    try:
        while True:
            for side in sides.values():
                side.say("prep")
            labels = {side.hear()["ready"] for side in sides.values()}
            if len(labels) != 1:
                raise SystemExit(f"the sides are not in step: {labels}")
            step = labels.pop()
            if step is None:
                break
            for label in order:
                sides[label].say("go")
                done = sides[label].hear()
                sides[label].steps[done["done"]] = done
            order.reverse()
            if not step.startswith("query"):
                print(f"  {step}: " + ", ".join(f"{k} {sides[k].steps[step]['wall']:.2f} s" for k in sides),
                      file=sys.stderr, flush=True)
    finally:
        for side in sides.values():
            side.close()
    return sides


def figures(side: Side, n_events: int) -> dict[str, float]:
    def total(kind: str, what: str) -> float:
        return sum(v[what] for k, v in side.steps.items() if k.startswith(kind + " "))

    out = {"frames_s": total("frames", "wall"), "frames_cpu": total("frames", "cpu"),
           "open_s": side.steps["open"]["wall"], "peak_mb": max(v["rss"] for v in side.steps.values())}
    if any(k.startswith("payload ") for k in side.steps):
        out["payload_s"], out["payload_cpu"] = total("payload", "wall"), total("payload", "cpu")
    for name in QUERIES:
        out[name] = statistics.median(v["wall"] for k, v in side.steps.items() if k.startswith(f"query {name} "))
    for key in ("frames_s", "frames_cpu", "payload_s", "payload_cpu"):
        if key in out:
            out[key + "_per_m"] = out[key] / (n_events / 1e6)
    return out


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


def dataset(n_events: int, payload: bool, baseline: Path | None, ref: str | None, sizes: list[int] | None) -> int:
    trees: dict[str, Path | None] = {}
    fig: dict[tuple[str, int], dict[str, float]] = {}
    runs: dict[int, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if ref is not None:
            baseline = baseline_tree(ref, tmp)
        if baseline is not None:
            trees["before"] = baseline
        trees["after"] = None
        sizes = sizes or curve(n_events)
        for size in sizes:
            print(f"{size:,} events ({', '.join(trees)} in lockstep):", file=sys.stderr, flush=True)
            sides = lockstep(size, payload, trees)
            for label, side in sides.items():
                fig[(label, size)] = figures(side, size)
                runs[size] = side.runs
    report(fig, list(trees), sizes, payload, runs, ref or (str(baseline) if baseline else None))
    return 0


def report(fig: dict[tuple[str, int], dict[str, float]], sides: list[str], sizes: list[int], payload: bool,
           runs: dict[int, int], baseline: str | None) -> None:
    head = max(sizes)
    scale = head / 1e6
    rows: list[tuple[str, str, str]] = [
        ("write, frames only (s)", "frames_s", f"<= {TARGETS['frames_s_per_m'] * scale:g}"),
        ("write, frames only (s per million events)", "frames_s_per_m", f"<= {TARGETS['frames_s_per_m']:g}"),
        ("  its process CPU (s, both threads)", "frames_cpu", ""),
    ]
    if payload:
        per_m = TARGETS["payload_s_per_m"]
        rows += [("write, with payload (s)", "payload_s", f"<= {per_m * scale:g}"),
                 ("write, with payload (s per million events)", "payload_s_per_m", f"<= {per_m:g}"),
                 ("  its process CPU (s, both threads)", "payload_cpu", "")]
    rows += [(f"DuckDB: {name} (s, median of 5)", name, f"<= {TARGETS['query_s']:g}") for name in QUERIES]
    rows += [("open the dataset (s)", "open_s", ""),
             ("peak RSS of the process (MB)", "peak_mb", f"<= {TARGETS['peak_mb']:,.0f}")]
    before = "before" in sides
    print(f"\nDataset of {head:,} events ({runs[head]:,} runs, partitioned by run_date, written in batches of "
          f"{CHUNK:,}); before = {baseline or '(not measured)'}, after = this checkout; both sides in lockstep "
          "(each batch and query of one, then of the other), in one session")
    print("\n| figure | target | " + ("before | " if before else "") + "after |" + (" ratio |" if before else "")
          + "\n|---|---|" + ("---:|" if before else "") + "---:|" + ("---:|" if before else ""))
    for label, key, target in rows:
        a = fig[("after", head)][key]
        if before:
            b = fig[("before", head)][key]
            print(f"| {label} | {target} | {b:,.2f} | {a:,.2f} | {b / a if a else 0:.2f}x |")
        else:
            print(f"| {label} | {target} | {a:,.2f} |")
    print("\nCurve (write: s, and s per million events in brackets; queries: s; ratio: before / after)\n")
    cols = ["frames-only write"] + (["payload write"] if payload else []) + list(QUERIES) + ["peak RSS MB"]
    print("| events | side | " + " | ".join(cols) + " |\n|---:|---|" + "---:|" * len(cols))
    keys = ["frames_s"] + (["payload_s"] if payload else []) + list(QUERIES) + ["peak_mb"]
    for size in sizes:
        for side in sides:
            f = fig[(side, size)]
            cells = [f"{f['frames_s']:.1f} ({f['frames_s_per_m']:.2f})"]
            if payload:
                cells.append(f"{f['payload_s']:.1f} ({f['payload_s_per_m']:.2f})")
            cells += [f"{f[name]:.3f}" for name in QUERIES] + [f"{f['peak_mb']:,.0f}"]
            print(f"| {size:,} | {side} | " + " | ".join(cells) + " |")
        if before:
            b, a = fig[("before", size)], fig[("after", size)]
            print(f"| {size:,} | ratio | " + " | ".join(f"{b[k] / a[k]:.2f}x" for k in keys) + " |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--dataset", type=int, default=0, help="write and query a Parquet dataset of this many events")
    ap.add_argument("--no-payload", action="store_true", help="--dataset: the frames-only write only")
    ap.add_argument("--baseline", type=Path, help="--dataset: a checkout of agentnb to measure as 'before'")
    ap.add_argument("--baseline-ref", help="--dataset: a git commit of this repository to measure as 'before'")
    ap.add_argument("--sizes", type=int, nargs="+", help="--dataset: these sizes instead of 1 M, 10 M, ... N")
    ap.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, not args.no_payload)
        return 0
    if args.dataset:
        return dataset(args.dataset, not args.no_payload, args.baseline, args.baseline_ref, args.sizes)

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
