"""Loading a long run: ``Transcript.load`` (read, validate and fold) and a SQLite checkpoint's load (seals
verified), over 10k, 100k and 1M events, beside a previous version of agentnb measured in the same session.

The transcript is a scripted run of streamed tool round trips (``bench/debugger.py``'s ``long_run``: text and
argument fragments, calls, results), written once per size. Every measurement runs in a fresh child process
(the package imported first, not timed), alternating between this tree and the ``--before`` tree, so a
machine's changing load falls on both. Wall and CPU time are medians; on a shared machine the CPU time is the
steadier figure. Memory held is what ``tracemalloc`` counts as still allocated once the transcript is loaded,
per event (a separate child: tracing slows the run).

Targets (issue 30, item 1): 100k events loaded and folded in at most 0.3 s, 1M in at most 3 s, at most 1 KB of
memory held per event; a checkpoint's seals still verified.

    python bench/transcripts.py --before /path/to/a/checkout/of/main [--sizes 10000 100000 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {100_000: 0.3, 1_000_000: 3.0}
"""Seconds to load and fold, by size."""
STORE_SIZES = (10_000, 100_000)
"""Sizes also written to a SQLite checkpoint (appending a million events one by one takes minutes)."""


def child(mode: str, target: str, run_id: str) -> None:
    """Measure one load in this process and print it as JSON."""
    import gc
    import time
    import tracemalloc

    import agentnb as anb

    def load() -> int:
        if mode == "store":
            return len(anb.SqliteStore(target, key="bench-key").load(run_id))
        return len(anb.Transcript.load(target))

    if mode == "json":
        t0, c0 = time.perf_counter(), time.process_time()
        n = len([json.loads(line) for line in Path(target).read_bytes().splitlines()])
        print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "n": n}))
        return
    if mode == "memory":
        tracemalloc.start()
        transcript = anb.Transcript.load(target)
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
        print(json.dumps({"held": held / len(transcript), "n": len(transcript)}))
        return
    t0, c0 = time.perf_counter(), time.process_time()
    n = load()
    print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "n": n}))


def measure(tree: Path, mode: str, target: Path, run_id: str = "") -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(target), run_id], env=env, check=True,
                         capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def build(size: int, folder: Path) -> tuple[Path, Path | None, str]:
    """A transcript file of about ``size`` events, and (for the smaller sizes) the same run in a SQLite store."""
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    from debugger import long_run

    import agentnb as anb

    run = long_run(size)
    path = folder / f"run-{size}.jsonl"
    run.transcript.save(path)
    db: Path | None = None
    if size in STORE_SIZES:
        db = folder / f"run-{size}.db"
        store = anb.SqliteStore(db, key="bench-key")
        for ev in run.events:
            store.append(ev)
    return path, db, run.run_id


def row(label: str, before: list[float], after: list[float], target: float | None, unit: str = "s") -> str:
    b, a = statistics.median(before), statistics.median(after)
    goal = f"<= {target:g} {unit}" if target is not None else ""
    return f"  {label:<34} {b:9.3f} {a:9.3f} {unit:<6} {b / a:6.1f}x  {goal}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the version to compare with")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agentnb-bench-"))
    trees = {"before": args.before.resolve(), "after": ROOT}
    print(f"loading a long run: before = {trees['before']}, after = {ROOT}; medians of {args.repeats}, "
          "alternating, each in a fresh process (a shared, busy machine: compare the columns, not the absolutes)")
    print(f"  {'':<34} {'before':>9} {'after':>9} {'':<6} {'gain':>7}  target")
    for size in args.sizes:
        path, db, run_id = build(size, folder)
        times: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": [], "swall": [], "scpu": []} for k in trees}
        plain = []
        for _ in range(args.repeats):
            for name, tree in trees.items():
                got = measure(tree, "load", path)
                times[name]["wall"].append(got["wall"])
                times[name]["cpu"].append(got["cpu"])
                if db is not None:
                    got = measure(tree, "store", db, run_id)
                    times[name]["swall"].append(got["wall"])
                    times[name]["scpu"].append(got["cpu"])
            plain.append(measure(ROOT, "json", path)["wall"])
        held = {name: measure(tree, "memory", path)["held"] / 1024 for name, tree in trees.items()}
        n = measure(ROOT, "json", path)["n"]
        print(f"{n:,} events ({path.stat().st_size / n:.0f} bytes per line; plain json.loads of the lines "
              f"{statistics.median(plain):.3f} s)")
        b, a = times["before"], times["after"]
        print(row("Transcript.load + fold, wall", b["wall"], a["wall"], TARGETS.get(size)))
        print(row("Transcript.load + fold, CPU", b["cpu"], a["cpu"], TARGETS.get(size)))
        print(row("memory held per event", [held["before"]], [held["after"]], 1.0, "KB"))
        if db is not None:
            print(row("SqliteStore.load (seals), wall", b["swall"], a["swall"], None))
            print(row("SqliteStore.load (seals), CPU", b["scpu"], a["scpu"], None))
        for p in folder.iterdir():  # the transcript, the database and its -wal and -shm files
            p.unlink()
    folder.rmdir()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
    else:
        main()
