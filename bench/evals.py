"""Evaluating many cases: what reading every run's calls from one build of the frames saves.

``--cases`` cases (``Add i and j``), each run by a scripted model that calls ``add`` and answers, are evaluated
with an exact-match and a trajectory scorer, ``--repeat`` times (medians), in the same process:

- *before*: each run's calls read from its own frames (what ``anb.scanners.view(t)`` builds for a run alone),
  as a first version of ``evaluate`` did;
- *after*: the calls of every run of a target read from one build of the frames for all of them
  (``scanners.views.prime``), as ``evaluate`` does.

    python bench/evals.py
    python bench/evals.py --cases 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import agentnb as anb
from agentnb._messages import ToolResultPart

evaluate_module = importlib.import_module("agentnb.evals._evaluate")  # the package binds the function


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def model(messages: Any) -> dict[str, Any]:
    a, b = map(int, re.findall(r"\d+", messages[0].text)[:2])
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    if not results:
        return {"tool_calls": [{"name": "add", "arguments": {"a": a, "b": b}}]}
    return {"text": results[-1].content}


def once(cases: list[dict[str, Any]]) -> None:
    loop = anb.Loop(model=anb.ScriptedModel([model] * 3), tools=[add])
    result = anb.evaluate(loop, cases, [anb.scorers.exact(), anb.scorers.calls()], progress=False)
    assert result.table["passed"].all()


def timed(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cases = [{"id": f"c{i}", "prompt": f"Add {i} and {i + 1}", "expected": str(2 * i + 1),
              "calls": [{"tool": "add", "arguments": {"a": i, "b": i + 1}}]} for i in range(args.cases)]
    with mock.patch.object(evaluate_module, "prime", lambda runs: None):  # each run's frames built alone
        before = timed(lambda: once(cases), args.repeat)
    after = timed(lambda: once(cases), args.repeat)
    print(f"evaluate(): {args.cases} cases, 2 scorers, median of {args.repeat}")
    print(f"{'':<44}{'seconds':>10}{'ms/case':>10}")
    for label, t in (("before: each run's frames built alone", before),
                     ("after: one build of the frames per target", after)):
        print(f"{label:<44}{t:>10.3f}{1000 * t / args.cases:>10.2f}")
    print(f"{'speed-up':<44}{before / after:>10.1f}x")


if __name__ == "__main__":
    main()
