"""A separate process for the fork tests: a parent that charges once, forks of it, and a fork that dies mid-write.

    python fork_worker.py STORE DOWNSTREAM PHASE RUN_ID [EFFECTS] [CRASH]

STORE is a SQLite file or a PostgreSQL DSN (``AGENTNB_PG_SCHEMA`` names the schema). DOWNSTREAM is a SQLite file
with one row per execution of the ``charge`` tool. PHASE: ``parent`` runs a run that charges order 42 once;
``fork`` forks the stored parent RUN_ID with its charge edited to 500 cents (a write the parent never made) under
EFFECTS (default ``run``); ``resume`` resumes the fork RUN_ID. CRASH ``in_write`` kills the process with SIGKILL
inside the tool, after the downstream row is written and before its outcome is stored. Prints one JSON line.
``batch`` (RUN_ID: a count N) runs the batch of forks :func:`fork_rows` of the parents ``parent-0..N-1`` slowly,
to be killed midway.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import threading
import time
from typing import Any

import agentnb as anb

CHARGE = {"name": "charge", "arguments": {"order_id": "42", "cents": 1999}}


KEY = "fork-worker-key-0001"


def open_store(where: str) -> Any:
    return (anb.PostgresStore(where, key=KEY, schema=os.environ["AGENTNB_PG_SCHEMA"])
            if where.startswith("postgresql") else anb.SqliteStore(where, key=KEY))


def make_loop(store: Any, downstream: str, crash: str = "none", latency: float = 0.0) -> anb.Loop:
    """The loop every phase uses: a ``charge`` tool that appends a row downstream for every execution."""
    down = sqlite3.connect(downstream, isolation_level=None, timeout=30, check_same_thread=False)
    down.execute("CREATE TABLE IF NOT EXISTS charges (key TEXT, order_id TEXT, cents INTEGER, pid INTEGER)")
    lock = threading.Lock()  # one connection, several batch threads: sqlite3 lets one use it at a time

    @anb.tool(risk="write", approval=False, simulate=lambda order_id, cents: f"would charge {cents}")
    def charge(ctx: anb.ToolContext, order_id: str, cents: int) -> str:
        """Charge a card."""
        with lock:
            down.execute("INSERT INTO charges VALUES (?, ?, ?, ?)",
                         (ctx.idempotency_key, order_id, cents, os.getpid()))
        if crash == "in_write":
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return f"charged {cents} cents for order {order_id}"

    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "done"}], latency=latency)
    return anb.Loop(model=model, tools=[charge], store=store, lease_ttl=1.0)  # a killed driver's lease soon expires


def edited(events: list[Any]) -> dict[str, dict[str, Any]]:
    """The counterfactual of a batch of forks: the parent's charge, for 500 cents (a write it never made)."""
    call = next(e.call_id for e in events if e.type == "ToolFinished")
    return {call: {"order_id": "42", "cents": 500}}


def fork_rows(n: int) -> list[anb.Fork]:
    return [anb.Fork(f"parent-{i}", arguments=edited, effects="run") for i in range(n)]


def main(argv: list[str]) -> None:
    where, downstream, phase, run_id = argv[:4]
    effects = argv[4] if len(argv) > 4 else "run"
    crash = argv[5] if len(argv) > 5 else "none"
    store = open_store(where)
    if phase == "batch":
        anb.batch(make_loop(store, downstream, latency=0.02), fork_rows(int(run_id)), concurrency=4, name="forks",
                  progress=False)
        return
    loop = make_loop(store, downstream, crash)
    if phase == "parent":
        run = loop.start("charge order 42", run_id=run_id).run()
    elif phase == "fork":
        parent = anb.Run.resume(run_id, loop=loop)
        call = next(e.call_id for e in parent.events if e.type == "ToolFinished")
        run = parent.fork(arguments={call: {"order_id": "42", "cents": 500}}, effects=effects).run()
    else:
        time.sleep(1.1)
        run = anb.Run.resume(run_id, loop=loop, take_over=True).run()
    finished = [e for e in run.events if e.type == "ToolFinished"]
    print(json.dumps({"run_id": run.run_id, "state": run.state.value, "marks": [e.effect for e in finished],
                      "statuses": [e.status for e in finished], "kinds": [c.kind for c in run.pending_approvals()],
                      "fork": run.events[0].settings.get("fork"), "operation": run.operation_id}))


if __name__ == "__main__":
    main(sys.argv[1:])
