"""Bytecodes per tool round trip, by module: a count that a shared, noisy machine cannot blur.

Wall-clock medians on two shared cores move by 30 % from one minute to the next; the number of Python
bytecodes a round trip executes does not (it is counted with ``sys.settrace`` opcode events). It is not a
time -- a bytecode that calls into C (pydantic, json, hashlib) counts once -- but a change that makes the
engine do more per round trip shows here exactly, and the table says where. Same workload as
``bench/loop_overhead.py`` (ScriptedModel, one trivial tool per turn, every guard on, no store).

    python bench/loop_opcodes.py [--top 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loop_overhead  # noqa: E402

ROOT = str(Path(loop_overhead.anb.__file__).resolve().parent)


def count(n: int) -> collections.Counter[str]:
    """Bytecodes executed by ``n`` round trips (and the final answer), by the module that ran them."""
    counts: collections.Counter[str] = collections.Counter()

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        name = frame.f_code.co_filename
        key = os.path.relpath(name, ROOT) if name.startswith(ROOT) else "(outside agentnb)"

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                counts[key] += 1
            return local

        return local

    loop_overhead.agentnb_loop(n)  # warm: imports, caches
    sys.settrace(tracer)
    try:
        loop_overhead.agentnb_loop(n)
    finally:
        sys.settrace(None)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    per: dict[int, float] = {}
    big: collections.Counter[str] = collections.Counter()
    for n in (10, 100, 1000):
        c = count(n)
        per[n] = sum(c.values()) / n
        if n == 100:
            big = c
    print("bytecodes per tool round trip")
    print(f"{'N':>6} {'per round trip':>15} {'vs N=10':>8}")
    for n, v in per.items():
        print(f"{n:>6} {v:>15,.0f} {v / per[10]:>7.2f}x")
    print(f"\nwhere (N=100, per round trip, top {args.top})")
    for module, v in big.most_common(args.top):
        print(f"{v / 100:>8,.0f}  {module}")


if __name__ == "__main__":
    main()
