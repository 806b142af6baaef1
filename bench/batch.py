"""Batch throughput: N conversations of 5 tool turns through the real ``openai`` async client and the emulator.

The emulator runs in its own process (so its CPU is not the library's), each turn taking the script's
``latency`` (``--latency``, 20 ms by default: a service's time to answer, spent by the emulator without using
CPU). For each concurrency (1, 8, 32, 64), in the same run:

- **raw**: the same conversations sent straight through ``openai.AsyncOpenAI`` with ``asyncio`` (a semaphore of
  that size): the emulator's own time plus the client's, with no agentnb at all;
- **agentnb**: ``anb.batch(loop, prompts, concurrency=c)`` with an ``OpenAIChatModel`` over the same client class
  and a MemoryStore.

Printed, as medians of ``--repeat`` rounds: conversations per second for both; the emulator's CPU time per
conversation (read from its process) and the time its requests spent being answered (``Emulator.answer``,
the script's latency included); the CPU this process spends per conversation for both, whose difference is
agentnb's own CPU per conversation; and that overhead as a share of the emulator's time (the target: at most
10 %) and of its CPU.

``--baseline PATH`` serves a second emulator from another checkout of agentnb (the code before a change) and
measures it in the same rounds, interleaved with this one, so the table holds before and after side by side:

    python bench/batch.py                              # 200 conversations per cell, 3 rounds
    python bench/batch.py --n 100 --repeat 5
    python bench/batch.py --baseline ../main --latency 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _tree() -> Path:
    """The agentnb checkout to import: ``--tree PATH`` (an emulator served from another one), else this one."""
    if "--tree" in sys.argv:
        return Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()
    return Path(__file__).resolve().parent.parent


sys.path.insert(0, str(_tree()))

import agentnb as anb  # noqa: E402

TOOL_TURNS = 5
CONCURRENCY = (1, 8, 32, 64)
REQUEST_TIMEOUT = 20.0
"""Seconds a client waits for an answer (the SDK's default is 600): a stalled request is retried, and counted."""


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


def serve(latency: float) -> None:
    """Serve an emulator; print its URL, then for each ``stats`` line read its CPU seconds and the seconds its
    requests spent being answered (summed over requests), until stdin closes."""
    emu = anb.emulator.Emulator(anb.ScriptedModel([turn] * 2_000_000, latency=latency))
    emu.start()
    emu.requests = _Discard()  # type: ignore[assignment]  # keep memory flat over many thousand requests
    answering = [0.0]
    lock = threading.Lock()
    answer = emu.answer

    def timed(*args: Any) -> Any:  # the handler asks emu.answer for every request: time each answer
        t0 = time.perf_counter()
        try:
            return answer(*args)
        finally:
            with lock:
                answering[0] += time.perf_counter() - t0

    emu.answer = timed  # type: ignore[method-assign,assignment]
    print(emu.url("openai"), flush=True)
    for line in sys.stdin:
        if line.strip() == "stats":
            with lock:
                print(f"{time.process_time():.6f} {answering[0]:.6f}", flush=True)


class _Discard(list[Any]):
    def append(self, item: Any) -> None:
        pass


class Served:
    """An emulator in its own process, from a checkout of agentnb."""

    def __init__(self, tree: Path, latency: float) -> None:
        self.tree = tree
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", "--tree", str(tree), "--latency",
                                         str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise SystemExit(f"the emulator from {tree} did not start")

    def stats(self) -> tuple[float, float]:
        """The emulator process's CPU seconds so far, and the seconds spent answering requests (summed)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("stats\n")
        self.process.stdin.flush()
        cpu, answering = self.process.stdout.readline().split()
        return float(cpu), float(answering)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


async def raw(url: str, n: int, concurrency: int) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0, timeout=REQUEST_TIMEOUT)
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
                    key = json.loads(call.function.arguments)["key"]  # type: ignore[union-attr]
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": f"value of {key}"})

    await asyncio.gather(*(conversation(i) for i in range(n)))
    await client.close()


def with_agentnb(url: str, n: int, concurrency: int, tag: str) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="bench", timeout=REQUEST_TIMEOUT)
    loop = anb.Loop(model=anb.OpenAIChatModel(client, model="gpt-4.1"), tools=[lookup], max_turns=TOOL_TURNS + 2)
    result = anb.batch(loop, [f"look up things {i}" for i in range(n)], concurrency=concurrency, progress=False,
                       name=tag)
    counts = result.counts()
    retried = sum(e.type == "ModelRetried" for t in result for e in t.events)
    if retried:
        print(f"{tag}: {retried} requests retried", file=sys.stderr, flush=True)
    if counts["done"] != n:
        why = {str(getattr(t.events[-1], "reason", "")) for t in result if t.state is not anb.LoopState.COMPLETED}
        raise SystemExit(f"{tag}: {counts}, {result.errors or sorted(why)[:3]}")


@dataclass
class Measured:
    """One round of one cell, for n conversations: wall seconds, this process's CPU seconds, the emulator's CPU
    seconds and the seconds its requests spent being answered (the script's latency included)."""

    wall: float
    cpu: float
    emulator_cpu: float
    emulator_time: float


def measure(served: Served, work: Any) -> Measured:
    (e0, a0), t0, c0 = served.stats(), time.perf_counter(), time.process_time()
    work()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    e1, a1 = served.stats()
    return Measured(wall, cpu, e1 - e0, a1 - a0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200, help="conversations per cell and round")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (the table shows medians)")
    parser.add_argument("--latency", type=float, default=0.02, help="the script's seconds per answer")
    parser.add_argument("--baseline", type=Path, help="another agentnb checkout to serve the 'before' emulator")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--tree", type=Path)
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: every thread's stack, if a round seems stuck
    if args.serve:
        serve(args.latency)
        return
    n = args.n
    emulators = {"after": Served(_tree(), args.latency)}
    if args.baseline is not None:
        emulators = {"before": Served(args.baseline.resolve(), args.latency), **emulators}
    cells: dict[tuple[str, int, str], list[Measured]] = {}
    try:
        for label, served in emulators.items():  # warm up: imports, connections, the first requests' caches
            asyncio.run(raw(served.url, 8, 8))
            with_agentnb(served.url, 8, 8, f"{label}-warm-up")
        for r in range(args.repeat):  # rounds outermost, so before and after share the machine's moods
            for c in CONCURRENCY:
                for label, served in emulators.items():
                    cells.setdefault((label, c, "raw"), []).append(
                        measure(served, lambda: asyncio.run(raw(served.url, n, c))))  # noqa: B023
                    cells.setdefault((label, c, "agentnb"), []).append(
                        measure(served, lambda: with_agentnb(served.url, n, c, f"{label}-c{c}-r{r}")))  # noqa: B023
                    print(f"round {r + 1}, concurrency {c}, {label}: done", file=sys.stderr, flush=True)
    finally:
        for served in emulators.values():
            served.close()
    print(f"batch: {n} conversations x {TOOL_TURNS} tool turns, openai.AsyncOpenAI -> emulator (its own process), "
          f"{args.latency * 1000:g} ms script latency per answer, medians of {args.repeat} rounds (ms are per "
          "conversation)")
    print(f"  {'emulator':>8s} {'conc.':>5s} {'raw conv/s':>10s} {'agentnb conv/s':>14s} {'emu cpu ms':>10s} "
          f"{'emu time ms':>11s} {'raw cpu ms':>10s} {'agentnb cpu ms':>14s} {'overhead ms':>11s} "
          f"{'of emu time':>11s} {'of emu cpu':>10s}")
    for c in CONCURRENCY:
        for label in emulators:
            def med(kind: str, field: str, label: str = label, c: int = c) -> float:
                values: list[float] = [getattr(m, field) for m in cells[(label, c, kind)]]
                return statistics.median(values) / n

            both = [m for k in ("raw", "agentnb") for m in cells[(label, c, k)]]
            emu_cpu = statistics.median(m.emulator_cpu for m in both) / n
            emu_time = statistics.median(m.emulator_time for m in both) / n
            cpu_raw, cpu_anb = med("raw", "cpu"), med("agentnb", "cpu")
            overhead = cpu_anb - cpu_raw
            print(f"  {label:>8s} {c:5d} {1 / med('raw', 'wall'):10.1f} {1 / med('agentnb', 'wall'):14.1f} "
                  f"{emu_cpu * 1000:10.2f} {emu_time * 1000:11.1f} {cpu_raw * 1000:10.2f} {cpu_anb * 1000:14.2f} "
                  f"{overhead * 1000:11.2f} {overhead / emu_time:11.1%} {overhead / emu_cpu:10.1%}")
    print("raw = the same requests through the same client with asyncio and no agentnb. cpu = this process's CPU")
    print("(the client's and the library's); emu cpu = the emulator process's CPU; emu time = the time its requests")
    print("spent being answered (the script's latency included, summed over a conversation's six requests).")
    print("overhead = agentnb cpu - raw cpu: the library's own CPU per conversation, as a share of each.")


if __name__ == "__main__":
    main()
