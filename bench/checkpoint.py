"""Durable checkpoints: the cost of storing each event, and of resuming a long run from SQLite.

Measures, in one run on the same machine: the median time to append one event to a ``SqliteStore`` (WAL,
``synchronous=NORMAL``, HMAC-sealed) beside a ``MemoryStore``, and the median time to resume a 100-turn run
(load and verify every seal -- events and the effect ledger --, fold, re-check the policy and schema), and the
cost of taking or renewing a run's lease. Targets: under 1 ms per event and under 50 ms to resume 100 turns.

    python bench/checkpoint.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import agentnb as anb


@anb.tool(risk="write", approval=False)
def record(n: int) -> str:
    """Record a number (a side effect: goes through the effect ledger)."""
    return f"recorded {n}"


def loop(store: Any, turns: int) -> anb.Loop:
    script: list[Any] = [{"tool_calls": [{"name": "record", "arguments": {"n": i}}]} for i in range(turns)]
    script.append({"text": "done"})
    return anb.Loop(model=anb.ScriptedModel(script), tools=[record], store=store, max_turns=turns + 1)


def per_event_ms(store: Any, turns: int = 100) -> tuple[float, int]:
    run = loop(store, turns).start("go")
    times = []
    while True:
        t0 = time.perf_counter()
        ev = run.step()
        times.append(time.perf_counter() - t0)
        if ev is None:
            break
    return statistics.median(times) * 1000, len(run.events)


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    sqlite = anb.SqliteStore(tmp / "bench.db", key="bench-key")
    memory_ms, n = per_event_ms(anb.MemoryStore())
    sqlite_ms, _ = per_event_ms(sqlite)
    appends = []
    run = loop(sqlite, 100).start("go").run()
    probe = anb.SqliteStore(tmp / "probe.db", key="bench-key")
    for ev in run.events:
        t0 = time.perf_counter()
        probe.append(ev)
        appends.append(time.perf_counter() - t0)
    resumes = []
    for _ in range(7):
        fresh = anb.SqliteStore(tmp / "bench.db", key="bench-key")
        t0 = time.perf_counter()
        resumed = anb.Run.resume(run.run_id, loop=loop(fresh, 100), store=fresh)
        resumes.append(time.perf_counter() - t0)
        assert resumed.state is anb.LoopState.COMPLETED and len(resumed.events) == len(run.events)
    print(f"checkpoints, a 100-turn run of {n} events (medians)")
    print(f"  step with MemoryStore                 {memory_ms:8.3f} ms/event")
    print(f"  step with SqliteStore                 {sqlite_ms:8.3f} ms/event  ({sqlite_ms / memory_ms:.1f}x)")
    print(f"  SqliteStore.append alone              {statistics.median(appends) * 1000:8.3f} ms/event")
    print(f"  resume the 100-turn run               {statistics.median(resumes) * 1000:8.1f} ms")
    leases = []
    for _ in range(200):
        t0 = time.perf_counter()
        getattr(sqlite, "acquire_lease", lambda *a, **k: None)(run.run_id, "bench", 30.0)
        leases.append(time.perf_counter() - t0)
    print(f"  take or renew a lease (SqliteStore)   {statistics.median(leases) * 1000:8.3f} ms (once per half TTL)")
    print("targets: < 1 ms per event, < 50 ms to resume 100 turns")


if __name__ == "__main__":
    main()
