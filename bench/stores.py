"""The stores side by side: append per event, step per event, and resume of a 100-turn run.

Memory / SQLite / PostgreSQL, in one run on this machine. PostgreSQL is a throw-away cluster started here from
Debian's server binaries with ``fsync=on`` (the durable default) on 127.0.0.1, unless ``AGENTNB_PG_DSN``
names a server; its store is measured with ``synchronous_commit`` off (the default, like SQLite's ``NORMAL``)
and on (every event waits for the disk flush; effect claims always do). Targets: PostgreSQL append under
1 ms per event on loopback; resume of a 100-turn run under 50 ms. Each append is one sealed event (and its
effect outcome when it reports one) committed on its own.

    python bench/stores.py
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agentnb as anb  # noqa: E402

KEY = "bench-key-0001"
TURNS = 100


@anb.tool(risk="write", approval=False)
def record(n: int) -> str:
    """Record a number (a side effect: goes through the effect ledger)."""
    return f"recorded {n}"


def loop(store: Any) -> anb.Loop:
    script: list[Any] = [{"tool_calls": [{"name": "record", "arguments": {"n": i}}]} for i in range(TURNS)]
    script.append({"text": "done"})
    return anb.Loop(model=anb.ScriptedModel(script), tools=[record], store=store, max_turns=TURNS + 1)


def measure(make: Callable[[], Any]) -> dict[str, float]:
    store = make()
    run = loop(store).start("go")
    steps = []
    while True:
        t0 = time.perf_counter()
        if run.step() is None:
            break
        steps.append(time.perf_counter() - t0)
    probe = make()
    appends = []
    for ev in run.events:  # the same events again, under new run ids: the store's own cost
        ev = dataclasses.replace(ev, run_id="probe_" + run.run_id)
        t0 = time.perf_counter()
        probe.append(ev)
        appends.append(time.perf_counter() - t0)
    resumes = []
    for _ in range(7):
        t0 = time.perf_counter()
        resumed = anb.Run.resume(run.run_id, loop=loop(store), store=store)
        resumes.append(time.perf_counter() - t0)
        assert resumed.state is anb.LoopState.COMPLETED and len(resumed.events) == len(run.events)
    return {"events": len(run.events), "append": statistics.median(appends) * 1000,
            "step": statistics.median(steps) * 1000, "resume": statistics.median(resumes) * 1000}


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    rows: dict[str, dict[str, float]] = {}
    memory = anb.MemoryStore()
    rows["MemoryStore"] = measure(lambda: memory)
    rows["SqliteStore (WAL, NORMAL)"] = measure(lambda: anb.SqliteStore(tmp / "bench.db", key=KEY))
    dsn, cluster = os.environ.get("AGENTNB_PG_DSN"), None
    if not dsn:
        from tests.pgserver import start_cluster

        cluster = start_cluster(fsync=True)
        dsn = cluster.dsn
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    try:
        rows["PostgresStore (synchronous_commit=off)"] = measure(
            lambda: anb.PostgresStore(dsn, key=KEY, schema=schema))
        rows["PostgresStore (synchronous_commit=on)"] = measure(
            lambda: anb.PostgresStore(dsn, key=KEY, schema=schema + "_sync", synchronous_commit="on"))
    finally:
        if cluster is not None:
            cluster.stop()
    base = rows["MemoryStore"]
    print(f"stores, a {TURNS}-turn run of {int(base['events'])} events (medians)")
    print(f"  {'store':38s} {'append ms/ev':>12s} {'step ms/ev':>11s} {'(x memory)':>10s} {'resume ms':>10s}")
    for name, r in rows.items():
        print(f"  {name:38s} {r['append']:12.3f} {r['step']:11.3f} {r['step'] / base['step']:10.1f} "
              f"{r['resume']:10.1f}")
    print("targets: PostgreSQL append < 1 ms per event; resume of 100 turns < 50 ms")


if __name__ == "__main__":
    main()
