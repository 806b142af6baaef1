"""The cost of the value boundary, against what it replaced, measured in the same run.

Rows: one tool result converted for the model and the audit (``agentnb._values.convert_result``) against the
former pair ``json.dumps(to_jsonable_python(v, fallback=repr))`` + ``to_jsonable_python(v, fallback=repr)``,
which converted nothing it could not print and checked nothing; one event written as a log line
(``event_to_json``) against pydantic's plain ``dump_json`` of the same event; the arguments check
(``check_arguments``) on flat and nested arguments. Medians of several repeats, in microseconds.

    python bench/values.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

import agentnb as anb
from agentnb import _values as values
from agentnb.events import event_to_json


def old_result(value: Any) -> tuple[str, Any]:
    data = to_jsonable_python(value, fallback=repr)
    text = value if isinstance(value, str) else json.dumps(data, ensure_ascii=False)
    return text, data


def timed(fn: Callable[[], Any], repeats: int) -> float:
    """Median microseconds per call."""
    runs = []
    n = 1
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    n = max(1, int(0.05 / max(once, 1e-7)))
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats

    results: dict[str, Any] = {
        "small dict": {"city": "Paris", "temp_c": 18, "sky": "sunny"},
        "text 10 kB": "x" * 10_000,
        "1k rows": [{"id": i, "name": f"item {i}", "price": i * 0.5, "tags": ["a", "b"]} for i in range(1000)],
        "10k floats": [i * 0.1 for i in range(10_000)],
    }
    print(f"tool result -> (content, audit), us per result (median of {repeats})")
    print(f"{'result':>12}  {'boundary':>10}  {'before':>10}  {'ratio':>6}")
    for name, value in results.items():
        new = timed(lambda v=value: values.convert_result(v), repeats)
        old = timed(lambda v=value: old_result(v), repeats)
        print(f"{name:>12}  {new:>10.1f}  {old:>10.1f}  {new / old:>5.2f}x")

    run = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund")).start("go").run()
    events = run.events
    plain = {type(e): TypeAdapter(type(e)) for e in events}
    new = timed(lambda: [event_to_json(e) for e in events], repeats) / len(events)
    old = timed(lambda: [plain[type(e)].dump_json(e) for e in events], repeats) / len(events)
    print()
    print(f"event -> log line, us per event (refund story, {len(events)} events)")
    print(f"{'event_to_json':>14}  {new:>8.2f}   pydantic dump_json  {old:>8.2f}   ratio {new / old:.2f}x")

    print()
    print("arguments check before the schema, us per call")
    for name, args in {"flat (3 keys)": {"order_id": "42", "amount_cents": 1999, "note": "damaged"},
                       "nested (50 items)": {"items": [{"sku": f"s{i}", "qty": i} for i in range(50)]}}.items():
        print(f"{name:>18}  {timed(lambda a=args: values.check_arguments(a), repeats):>8.2f}")


if __name__ == "__main__":
    main()
