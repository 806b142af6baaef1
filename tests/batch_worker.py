"""Loops for the batch tests, importable by subprocesses and Dask workers.

    python batch_worker.py DB N   # run a batch of N slow prompts on the SQLite store DB (to be killed midway)
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import agentnb as anb

TURNS = 3


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def slow_loop(store: Any = None, latency: float = 0.0, lease_ttl: float = 0.3) -> anb.Loop:
    """Runs of ``TURNS`` tool calls, each model turn ``latency`` seconds late."""
    script: list[Any] = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]} for i in range(TURNS)]
    script.append(lambda m: {"text": f"sum {m[-1].tool_results[0].content}"})
    return anb.Loop(model=anb.ScriptedModel(script, latency=latency), tools=[add], store=store, lease_ttl=lease_ttl,
                    retry_base_delay=0.0)


def story_loop(story: str = "weather", lease_ttl: float = 30.0) -> anb.Loop:
    return anb.Loop(model=anb.ScriptedModel.story(story), tools=anb.stories.tools(story), lease_ttl=lease_ttl)


IN_FLIGHT = {"now": 0, "max": 0}


@anb.tool
async def lookup(city: str) -> str:
    """Look a city up slowly (an async tool: many of them wait together on one event loop)."""
    IN_FLIGHT["now"] += 1
    IN_FLIGHT["max"] = max(IN_FLIGHT["max"], IN_FLIGHT["now"])
    await asyncio.sleep(0.2)
    IN_FLIGHT["now"] -= 1
    return f"{city}: sunny"


def main(argv: list[str]) -> None:
    db, n = argv[0], int(argv[1])
    store = anb.SqliteStore(db)
    anb.batch(slow_loop(store, latency=0.05), [f"sum {i}" for i in range(n)], concurrency=4, name="killed",
              progress=False)


if __name__ == "__main__":
    main(sys.argv[1:])
