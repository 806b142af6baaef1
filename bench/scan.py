"""Scanning many runs: what the cache saves on a second scan, and what concurrency saves on questions to a model.

A handful of scripted runs of every kind are cloned, with new run ids, into a collection of ``--runs`` runs.
Then, in the same process, each measured ``--repeat`` times (medians):

- every built-in scanner with no cache (the work itself); the same with each run's frames built alone (a tenth
  of the runs, times ten), as scanning one run at a time does, where a scan builds those of a block of runs
  in one pass (:mod:`agentnb.scanners._views`); into a cold cache (the work plus writing a file per
  scanner and run), again from the warm cache (no scanner runs), and again after 1% of the runs changed;
- a question to a model (``anb.scanner.ask`` with a ``ScriptedModel`` that waits ``--latency`` seconds before
  each answer, as a provider would) over ``--questions`` runs, one at a time and eight at a time.

    python bench/scan.py
    python bench/scan.py --runs 5000 --repeat 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import agentnb as anb
from agentnb.events import BaseEvent


def templates() -> list[list[BaseEvent]]:
    def story(name: str, **opts: Any) -> anb.Run:
        loop = anb.Loop(model=anb.ScriptedModel.story(name), tools=anb.stories.tools(name), **opts)
        return loop.start("go").run()

    runs = [story("weather"), story("parallel"), story("calculator"), story("malformed"),
            story("looping", max_turns=4)]
    r = story("refund")
    r.approve(r.pending_approvals()[0].call_id)
    runs.append(r.run())
    return [list(r.events) for r in runs]


def collection(n: int, tag: str = "") -> anb.TranscriptCollection:
    base = templates()
    return anb.TranscriptCollection(
        anb.Transcript([replace(ev, run_id=f"run-{tag}{i}") for ev in base[i % len(base)]]) for i in range(n))


def timed(fn: Callable[[], Any], repeat: int, before: Callable[[], None] = lambda: None) -> float:
    times = []
    for _ in range(repeat):
        before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--questions", type=int, default=80)
    ap.add_argument("--latency", type=float, default=0.02)
    args = ap.parse_args()

    runs = collection(args.runs)
    changed = anb.TranscriptCollection([*runs.transcripts[: args.runs * 99 // 100],
                                        *collection(args.runs - args.runs * 99 // 100, tag="new-").transcripts])
    root = Path(tempfile.mkdtemp())
    cold, warm = root / "cold", root / "warm"
    anb.scan(runs, cache=warm)

    def wipe() -> None:
        shutil.rmtree(cold, ignore_errors=True)

    def refill() -> None:
        shutil.rmtree(warm, ignore_errors=True)
        anb.scan(runs, cache=warm)

    few = runs[: max(1, args.runs // 10)]
    rows = [
        ("built-ins, no cache (the work)", timed(lambda: anb.scan(runs), args.repeat)),
        ("built-ins, each run's frames built alone", 10 * timed(lambda: [anb.scan(t) for t in few], args.repeat)),
        ("built-ins, into a cold cache", timed(lambda: anb.scan(runs, cache=cold), args.repeat, wipe)),
        ("built-ins, from a warm cache", timed(lambda: anb.scan(runs, cache=warm), args.repeat)),
        ("built-ins, warm cache, 1% of runs changed", timed(lambda: anb.scan(changed, cache=warm), args.repeat,
                                                             refill)),
    ]
    judge = anb.ScriptedModel([{"tool_calls": [{"name": "final_result", "arguments": {"result": True}}]}],
                              latency=args.latency)
    question = anb.scanner.ask("Did the model finish the task?", model=judge)
    few = runs[: args.questions]
    asked = [(f"ask, {args.questions} runs, concurrency {c}", timed(lambda c=c: anb.scan(few, question,
                                                                                          concurrency=c),
                                                                     max(1, args.repeat // 2))) for c in (1, 8)]
    shutil.rmtree(root, ignore_errors=True)

    base = rows[0][1]
    print(f"\n{args.runs} runs, {sum(len(t) for t in runs)} events; medians of {args.repeat}\n")
    print(f"{'scan':<46} {'median s':>9} {'vs no cache':>12}")
    for name, s in rows:
        print(f"{name:<46} {s:>9.3f} {base / s:>11.1f}x")
    print(f"\n{'question to a model (' + format(args.latency, 'g') + ' s per answer)':<46} {'median s':>9} "
          f"{'vs one at a time':>17}")
    for name, s in asked:
        print(f"{name:<46} {s:>9.3f} {asked[0][1] / s:>16.1f}x")


if __name__ == "__main__":
    main()
