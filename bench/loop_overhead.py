"""Engine overhead per tool round trip, against a plain hand-written loop measured in the same run.

Workload: one conversation of N round trips (model asks for a trivial tool, the tool echoes its argument),
then a final text turn; ScriptedModel, no streaming, no store, every guard on (the argument differs per call,
so repetition and no-progress detection run without tripping). The baseline is the least a loop can do: a
list of message dicts, a dict lookup for dispatch, ``json.dumps`` of each message. Medians of several
repeats; the ratio is what matters on a shared, noisy machine.

    python bench/loop_overhead.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from typing import Any

import agentnb as anb

NS = (10, 100, 300, 1000)


@anb.tool
def noop(x: int) -> str:
    """Echo the argument."""
    return str(x)


def agentnb_loop(n: int) -> float:
    script: list[Any] = [{"tool_calls": [{"name": "noop", "arguments": {"x": i}}]} for i in range(n)]
    script.append({"text": "done"})
    loop = anb.Loop(model=anb.ScriptedModel(script), tools=[noop], max_turns=n + 1)
    run = loop.start("go")
    t0 = time.perf_counter()
    run.run()
    elapsed = time.perf_counter() - t0
    assert run.state is anb.LoopState.COMPLETED and run.view.tool_calls == n, run
    return elapsed


def plain_loop(n: int) -> float:
    tools = {"noop": lambda x: str(x)}
    script = [{"tool_calls": [{"id": f"c{i}", "name": "noop", "arguments": f'{{"x": {i}}}'}]} for i in range(n)]
    script.append({"text": "done"})
    t0 = time.perf_counter()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    wire: list[str] = [json.dumps(messages[0])]
    for turn in script:
        msg = {"role": "assistant", "content": turn.get("text"), "tool_calls": turn.get("tool_calls", [])}
        messages.append(msg)
        wire.append(json.dumps(msg))
        if not msg["tool_calls"]:
            break
        for call in msg["tool_calls"]:
            args = json.loads(call["arguments"])
            result = {"role": "tool", "tool_call_id": call["id"], "content": tools[call["name"]](**args)}
            messages.append(result)
            wire.append(json.dumps(result))
    return time.perf_counter() - t0


def measure(fn: Any, n: int, repeats: int) -> float:
    """Median over ``repeats`` samples of microseconds per round trip.

    Each sample runs enough whole conversations (each from its start to its final answer) to cover about
    1000 round trips, so small N is not measured on a one-millisecond timer window.
    """
    runs = max(1, 1000 // n)
    times = []
    for _ in range(repeats):
        gc.collect()
        times.append(sum(fn(n) for _ in range(runs)) / runs)
    return statistics.median(times) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    agentnb_loop(10)  # warm up imports and pydantic validators
    rows = []
    for n in NS:
        ours = measure(agentnb_loop, n, args.repeats)
        plain = measure(plain_loop, n, args.repeats)
        rows.append((n, ours, plain))
    base = rows[0][1]
    print(f"engine overhead per tool round trip (median of {args.repeats})")
    print(f"{'N':>6} {'agentnb us':>11} {'plain us':>9} {'ratio':>7} {'vs N=10':>8}")
    for n, ours, plain in rows:
        print(f"{n:>6} {ours:>11.1f} {plain:>9.1f} {ours / plain:>6.1f}x {ours / base:>7.2f}x")
    worst = max(r[1] for r in rows)
    flat = rows[-1][1] / base
    print(f"target: <= 100 us at every N (worst {worst:.1f}), N=1000 within 1.5x of N=10 ({flat:.2f}x)")


if __name__ == "__main__":
    main()
