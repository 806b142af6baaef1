"""Python-side cost of the debugger on a long transcript: open, step, select (time travel).

Builds a 10,000-event transcript (a scripted run with many streamed tool round trips), then measures the
median time to open it in the debugger (at its first and at its last event), to select an event (time
travel), and to step a live run. Targets: open < 1 s, each step or selection < 100 ms.

    python bench/debugger.py [--events 10000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import agentnb as anb


@anb.tool
def lookup(key: str) -> dict[str, Any]:
    """Look a key up."""
    return {"key": key, "value": key.upper() * 3}


def long_run(target_events: int) -> anb.Run:
    # each round trip: ModelRequested, ~6 text/argument fragments, TurnCompleted, 5 call events, ResultsBound
    trips = target_events // 14 + 1
    turns: list[Any] = [
        {"text": "Looking it up.", "tool_calls": [{"name": "lookup", "arguments": {"key": f"alpha-{i}"}}]}
        for i in range(trips)
    ]
    model = anb.ScriptedModel([*turns, {"text": "done"}], stream=True, chunk_size=6)
    run = anb.Loop(model=model, tools=[lookup], max_turns=trips + 1).start("go")
    while len(run.events) < target_events and run.step() is not None:
        pass
    return run


def median_ms(fn: Any, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    args = parser.parse_args()
    run = long_run(args.events)
    transcript = anb.Transcript(list(run.events))
    n = len(transcript)
    anb.Debugger(anb.Transcript(transcript.events[:50]))  # warm imports and widget classes

    rows = [
        ("open transcript at first event", median_ms(lambda: anb.Debugger(transcript), 5)),
        ("open transcript at last event", median_ms(lambda: anb.Debugger(transcript, start="end"), 5)),
    ]
    dbg = anb.Debugger(transcript, start="end")
    seqs = iter(range(0, n, max(1, n // 50)))
    rows.append(("select an event (time travel)", median_ms(lambda: dbg.select(next(seqs)), 21)))
    replay = anb.Debugger(transcript)
    rows.append(("step a replay", median_ms(replay.step, 21)))
    live = anb.Debugger(long_run(n - 200))
    rows.append(("step a live run of the same length", median_ms(live.step, 21)))
    print(f"debugger, Python side, {n} events (median ms)")
    for label, ms in rows:
        print(f"  {label:<38} {ms:8.1f}")
    print("targets: open < 1000 ms; step or select < 100 ms")


if __name__ == "__main__":
    main()
