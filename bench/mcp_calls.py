"""MCP tool calls: what agentnb adds to a call of the official SDK, over stdio and streamable HTTP.

Measures, in one run against the demo shop server (``python -m agentnb.mcp_demo``): the median time of one
``lookup_order`` call made with the SDK's own ``Client`` on an event loop it keeps open (the baseline), the same call
through ``MCPServer.call`` (a hop onto agentnb's background loop from synchronous code), through the tool object
(plus JSON-schema validation), and one whole tool round trip of a ``Loop`` run (validation, events, a worker
thread, binding hashes) beside the same round trip with a local Python tool. Also the time to start the server and
list its tools. Target: agentnb's hop adds under 1 ms to a call.

    python bench/mcp_calls.py
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentnb as anb

ROOT = str(Path(__file__).resolve().parents[1])
BATCH = 40
ROUNDS = 7


def batch_ms(fn: Callable[[], Any], n: int = BATCH) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return times


class SdkSession:
    """The baseline: the SDK's own Client, kept open on an event loop of its own thread."""

    def __init__(self, target: Any) -> None:
        import threading

        from mcp import Client

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.client = Client(target)
        self.stop = asyncio.Event()
        self.ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.owner = asyncio.run_coroutine_threadsafe(self._own(), self.loop)
        self.ready.result(60)

    async def _own(self) -> None:
        async with self.client:
            self.ready.set_result(None)
            await self.stop.wait()

    def batch_ms(self, n: int = BATCH) -> list[float]:
        async def go() -> list[float]:
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                await self.client.call_tool("lookup_order", {"order_id": "42"})
                times.append((time.perf_counter() - t0) * 1000)
            return times

        return asyncio.run_coroutine_threadsafe(go(), self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.owner.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)


def loop_round_trip_ms(tools: list[Any], name: str, turns: int = BATCH) -> list[float]:
    script: list[Any] = [{"tool_calls": [{"name": name, "arguments": {"order_id": "42"}}]} for _ in range(turns)]
    script.append({"text": "done"})
    # the same call on purpose, every turn
    budget = anb.Budget(max_turns=turns + 1, max_repeats=turns + 1, max_no_progress=None)
    loop = anb.Loop(model=anb.ScriptedModel(script), tools=tools, budget=budget)
    t0 = time.perf_counter()
    run = loop.start("go").run()
    assert run.state is anb.LoopState.COMPLETED, run.state
    return [(time.perf_counter() - t0) / turns * 1000]


@anb.tool
def local_lookup(order_id: str) -> dict[str, Any]:
    """A local stand-in for lookup_order."""
    return {"order_id": order_id, "item": "Blue kettle"}


def row(name: str, samples: list[float], base: float | None) -> str:
    ms = statistics.median(samples)
    extra = f"{ms - base:+8.3f}" if base is not None else "        "
    return f"| {name:<44} | {ms:9.3f} | {extra} |"


def main() -> None:
    from mcp import StdioServerParameters

    env = {"PYTHONPATH": ROOT}
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentnb.mcp_demo"], env=env)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "agentnb.mcp_demo", "--http", "--port", str(port)],
                            env={**os.environ, **env}, stderr=subprocess.DEVNULL)
    try:
        t0 = time.perf_counter()
        shop = anb.MCPServer.stdio(params.command, params.args, env=env).connect()
        start_s = time.perf_counter() - t0
        for _ in range(600):  # wait until the HTTP server listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        web = anb.MCPServer.http(url).connect()
        print(f"stdio server started and its tools listed in {start_s:.2f} s")
        print(f"medians of {ROUNDS} interleaved rounds of {BATCH} calls (or Loop turns) each\n")
        print("| per call                                     | median ms | vs SDK   |")
        print("|----------------------------------------------|-----------|----------|")
        for label, server, target in (("stdio", shop, params), ("http", web, url)):
            sdk = SdkSession(target)
            lookup = server.tools(include=["lookup_order"])[0]
            variants: dict[str, Callable[[], list[float]]] = {
                "SDK Client.call_tool (baseline)": sdk.batch_ms,
                "MCPServer.call": lambda s=server: batch_ms(lambda: s.call("lookup_order", {"order_id": "42"})),
                "tool(order_id=...) (validated)": lambda t=lookup: batch_ms(lambda: t(order_id="42")),
                "Loop round trip (one call per turn)": lambda s=server: loop_round_trip_ms([s], "lookup_order"),
            }
            samples: dict[str, list[float]] = {k: [] for k in variants}
            for _ in range(ROUNDS):  # interleaved: a busy moment of the machine hits every variant alike
                for k, fn in variants.items():
                    samples[k].extend(fn())
            base = statistics.median(samples["SDK Client.call_tool (baseline)"])
            for k, v in samples.items():
                print(row(f"{label}: {k}", v, None if k.startswith("SDK") else base))
            sdk.close()
        local = [x for _ in range(ROUNDS) for x in loop_round_trip_ms([local_lookup], "local_lookup")]
        print(row("local tool: Loop round trip", local, None))
        shop.close()
        web.close()
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
