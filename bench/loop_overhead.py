"""Engine overhead per tool round trip, against a plain hand-written loop measured in the same run.

Workload: one conversation of N round trips (model asks for a trivial tool, the tool echoes its argument),
then a final text turn; ScriptedModel, no streaming, no store, every guard on (the argument differs per call,
so repetition and no-progress detection run without tripping). The baseline is the least a loop can do: a
list of message dicts, a dict lookup for dispatch, ``json.dumps`` of each message. Medians of several
repeats; the ratio is what matters on a shared, noisy machine.

``--baseline PATH`` measures another checkout of agentnb (the code before a change) in the same session:
each round runs one child process per checkout, alternating, so before and after share the machine's moods;
the table gives both medians side by side. ``--clock cpu`` counts the driving thread's CPU time instead of
the wall clock (on a machine shared with other work, the wall clock mostly measures the others).

    python bench/loop_overhead.py [--repeats 5]
    python bench/loop_overhead.py --baseline ../main --rounds 5 --clock cpu
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import agentnb as anb

NS = (10, 100, 300, 1000)
TARGET_US = 50.0
"""The most a tool round trip may cost the engine (issue #24), at every N."""
FLAT = 1.1
"""N=1000 within this factor of N=10: no cost that grows with the run's length."""
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
clock = time.perf_counter


@anb.tool
def noop(x: int) -> str:
    """Echo the argument."""
    return str(x)


def agentnb_loop(n: int) -> float:
    script: list[Any] = [{"tool_calls": [{"name": "noop", "arguments": {"x": i}}]} for i in range(n)]
    script.append({"text": "done"})
    loop = anb.Loop(model=anb.ScriptedModel(script), tools=[noop], max_turns=n + 1)
    run = loop.start("go")
    t0 = clock()
    run.run()
    elapsed = clock() - t0
    assert run.state is anb.LoopState.COMPLETED and run.view.tool_calls == n, run
    return elapsed


def plain_loop(n: int) -> float:
    tools = {"noop": lambda x: str(x)}
    script = [{"tool_calls": [{"id": f"c{i}", "name": "noop", "arguments": f'{{"x": {i}}}'}]} for i in range(n)]
    script.append({"text": "done"})
    t0 = clock()
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
    return clock() - t0


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


def sample(repeats: int) -> dict[str, list[float]]:
    """One session's medians: agentnb's and the plain loop's microseconds per round trip, per N."""
    agentnb_loop(10)  # warm up imports and pydantic validators
    ours = [measure(agentnb_loop, n, repeats) for n in NS]
    plain = [measure(plain_loop, n, repeats) for n in NS]
    return {"ours": ours, "plain": plain}


def child(checkout: Path, repeats: int, clock_name: str) -> dict[str, list[float]]:
    """:func:`sample` in a fresh process importing agentnb from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, __file__, "--child", "--repeats", str(repeats), "--clock", clock_name],
                         env=env, cwd=checkout, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    where = Path(result.pop("agentnb")).resolve()
    assert where.is_relative_to(checkout.resolve()), f"the child imported agentnb from {where}, not {checkout}"
    return {k: list(v) for k, v in result.items()}


def verdict(ours: list[float]) -> str:
    worst, flat = max(ours), ours[-1] / ours[0]
    ok = "met" if worst <= TARGET_US and flat <= FLAT else "not met"
    return (f"target: <= {TARGET_US:.0f} us at every N (worst {worst:.1f}), N=1000 within {FLAT}x of N=10 "
            f"({flat:.2f}x): {ok}")


def main() -> None:
    global clock
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--baseline", type=Path, help="another agentnb checkout, measured alternately as 'before'")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds with --baseline")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    clock = CLOCKS[args.clock]
    if args.child:
        print(json.dumps({**sample(args.repeats), "agentnb": anb.__file__}))
        return
    if args.baseline is None:
        got = sample(args.repeats)
        ours, plain = got["ours"], got["plain"]
        base = ours[0]
        print(f"engine overhead per tool round trip ({args.clock} clock, median of {args.repeats})")
        print(f"{'N':>6} {'agentnb us':>11} {'plain us':>9} {'ratio':>7} {'vs N=10':>8}")
        for n, o, p in zip(NS, ours, plain, strict=True):
            print(f"{n:>6} {o:>11.1f} {p:>9.1f} {o / p:>6.1f}x {o / base:>7.2f}x")
        print(verdict(ours))
        return
    here = Path(__file__).resolve().parent.parent
    runs: dict[str, list[dict[str, list[float]]]] = {"before": [], "after": []}
    for _ in range(args.rounds):  # rounds outermost, so before and after share the machine's moods
        runs["before"].append(child(args.baseline.resolve(), args.repeats, args.clock))
        runs["after"].append(child(here, args.repeats, args.clock))
    med = {side: [statistics.median(r["ours"][i] for r in rs) for i in range(len(NS))] for side, rs in runs.items()}
    plain = [statistics.median(r["plain"][i] for rs in runs.values() for r in rs) for i in range(len(NS))]
    print(f"engine overhead per tool round trip, us ({args.clock} clock; medians of {args.rounds} alternating rounds "
          f"of {args.repeats} repeats)")
    print(f"{'N':>6} {'before':>9} {'after':>9} {'after/before':>13} {'plain':>7} {'after vs N=10':>14}")
    for i, n in enumerate(NS):
        b, a = med["before"][i], med["after"][i]
        print(f"{n:>6} {b:>9.1f} {a:>9.1f} {a / b:>12.2f}x {plain[i]:>7.1f} {a / med['after'][0]:>13.2f}x")
    print("before: " + verdict(med["before"]))
    print("after:  " + verdict(med["after"]))


if __name__ == "__main__":
    main()
