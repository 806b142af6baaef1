"""Batch throughput: N conversations of 5 tool turns through the real ``openai`` async client and the emulator.

The emulator runs in its own process (so its CPU is not the library's). For each concurrency (1, 8, 32), in
the same run:

- **raw**: the same conversations sent straight through ``openai.AsyncOpenAI`` with ``asyncio`` (a semaphore of
  that size): the emulator's own time plus the client's, with no agentnb at all;
- **agentnb**: ``anb.batch(loop, prompts, concurrency=c)`` with an ``OpenAIChatModel`` over the same client class
  and a MemoryStore.

Printed: conversations per second for both, and the CPU time this process spends per conversation for both:
their difference is agentnb's overhead per conversation (the emulator's time is in its own process).

    python bench/batch.py            # 1,000 conversations
    python bench/batch.py --n 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agentnb as anb  # noqa: E402

TOOL_TURNS = 5


def turn(messages: list[anb.Message]) -> dict[str, Any]:
    """The emulator's answer: a tool call until the conversation holds five results, then the answer."""
    done = sum(len(m.tool_results) for m in messages)
    if done < TOOL_TURNS:
        return {"tool_calls": [{"name": "lookup", "arguments": {"key": f"k{done}"}}]}
    return {"text": f"looked up {done} keys"}


@anb.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def serve() -> None:
    from http.server import ThreadingHTTPServer

    # 32 clients opening connections at once overflow the default listen backlog of 5 (refused connections
    # would be measured as the emulator's, not the library's, fault)
    ThreadingHTTPServer.request_queue_size = 256
    emu = anb.emulator.Emulator([turn] * 2_000_000)
    emu.start()
    emu.requests = _Discard()  # type: ignore[assignment]  # keep memory flat over many thousand requests
    print(emu.url("openai"), flush=True)
    sys.stdin.read()  # until the parent closes our stdin


class _Discard(list[Any]):
    def append(self, item: Any) -> None:
        pass


async def raw(url: str, n: int, concurrency: int) -> tuple[float, float]:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)
    gate = asyncio.Semaphore(concurrency)
    tool = {"type": "function", "function": {"name": "lookup", "description": "Look a key up.", "parameters": {
        "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}}

    async def conversation(i: int) -> None:
        async with gate:
            messages: list[dict[str, Any]] = [{"role": "user", "content": f"look up things {i}"}]
            while True:
                reply = await client.chat.completions.create(model="gpt-4.1", messages=messages,  # type: ignore
                                                             tools=[tool])
                msg = reply.choices[0].message
                if not msg.tool_calls:
                    return
                messages.append(msg.model_dump(exclude_none=True))
                for call in msg.tool_calls:
                    key = json.loads(call.function.arguments)["key"]
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": f"value of {key}"})

    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(conversation(i) for i in range(n)))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    await client.close()
    return elapsed, cpu


def with_agentnb(url: str, n: int, concurrency: int, tag: str) -> tuple[float, float]:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="bench")
    loop = anb.Loop(model=anb.OpenAIChatModel(client, model="gpt-4.1"), tools=[lookup], max_turns=TOOL_TURNS + 2)
    t0, c0 = time.perf_counter(), time.process_time()
    result = anb.batch(loop, [f"look up things {i}" for i in range(n)], concurrency=concurrency, progress=False,
                       name=tag)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    counts = result.counts()
    assert counts["done"] == n, (counts, result.errors)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    rows = []
    try:
        for c in (1, 8, 32):
            t_raw = asyncio.run(raw(url, args.n, c))
            t_anb = with_agentnb(url, args.n, c, f"c{c}")
            rows.append((c, t_raw, t_anb))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait()
    n = args.n
    print(f"batch: {n} conversations x {TOOL_TURNS} tool turns, openai.AsyncOpenAI -> emulator (its own process)")
    print(f"  {'concurrency':>11s} {'raw conv/s':>11s} {'agentnb conv/s':>15s} {'ratio':>6s} "
          f"{'raw cpu ms/conv':>16s} {'agentnb cpu ms/conv':>20s} {'overhead ms/conv':>17s}")
    for c, (t_raw, cpu_raw), (t_anb, cpu_anb) in rows:
        print(f"  {c:11d} {n / t_raw:11.1f} {n / t_anb:15.1f} {t_anb / t_raw:6.2f} {cpu_raw / n * 1000:16.2f} "
              f"{cpu_anb / n * 1000:20.2f} {(cpu_anb - cpu_raw) / n * 1000:17.2f}")
    print("raw = the same requests through the same client with asyncio and no agentnb; cpu = this process's CPU")
    print("time (the client's and the library's; the emulator has its own process), so overhead = agentnb - raw")


if __name__ == "__main__":
    main()
