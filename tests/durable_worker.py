"""A separate process for the durability tests: run a loop on a SQLite or PostgreSQL checkpoint, maybe die.

    python durable_worker.py start|resume DB DOWNSTREAM MODE CRASH [RUN_ID] [ACTION]

MODE is ``dedupe`` (the downstream keeps one row per idempotency key) or ``plain`` (it appends every call).
CRASH names the point where the process kills itself with SIGKILL: ``none``, ``before_effect`` (in the
tool, before the downstream write), ``after_effect`` (in the tool, after it), ``after_outcome`` (right after
the store committed the outcome with its ToolFinished event, before the Run applied it), ``after_finished``
(right after the
ToolFinished event was stored). ACTION after a resume: ``run`` (default), ``retry`` or ``reconcile`` an
outcome-unknown pause. Prints one JSON line with the state and the downstream effect counts.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from typing import Any

import agentnb as anb


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> None:
    phase, db, downstream, mode, crash = argv[:5]
    run_id = argv[5] if len(argv) > 5 else None
    action = argv[6] if len(argv) > 6 else "run"
    down = sqlite3.connect(downstream, isolation_level=None)
    down.execute("CREATE TABLE IF NOT EXISTS charges (key TEXT, order_id TEXT, cents INTEGER)")
    if mode == "dedupe":
        down.execute("CREATE UNIQUE INDEX IF NOT EXISTS charges_key ON charges (key)")

    @anb.tool(risk="write", approval=False, idempotent=(mode == "dedupe"))
    def charge(ctx: anb.ToolContext, order_id: str, cents: int) -> dict[str, Any]:
        """Charge a card; the payment system dedupes by key in ``dedupe`` mode."""
        if crash == "before_effect" and phase == "start":
            die()
        verb = "INSERT OR IGNORE" if mode == "dedupe" else "INSERT"
        down.execute(f"{verb} INTO charges VALUES (?, ?, ?)", (ctx.idempotency_key, order_id, cents))
        if crash == "after_effect" and phase == "start":
            die()
        return {"charged": cents, "order_id": order_id}

    # DB is a SQLite file, or a PostgreSQL DSN (the schema in AGENTNB_PG_SCHEMA): the same crashes on both
    store: Any = (anb.PostgresStore(db, schema=os.environ["AGENTNB_PG_SCHEMA"]) if db.startswith("postgresql://")
                  else anb.SqliteStore(db))
    if crash == "after_outcome" and phase == "start":
        append = store.append

        def append_then_die(event: Any, **kwargs: Any) -> None:
            append(event, **kwargs)
            if event.type == "ToolFinished":
                die()  # committed (outcome + event in one transaction), not yet applied by the Run

        store.append = append_then_die  # type: ignore[method-assign]
    model = anb.ScriptedModel([
        {"tool_calls": [{"name": "charge", "arguments": {"order_id": "42", "cents": 1999}}]},
        lambda m: {"text": f"Charged: {m[-1].tool_results[0].content}"},
    ])
    loop = anb.Loop(model=model, tools=[charge], store=store, lease_ttl=0.5)
    if phase == "start":
        run = loop.start("Charge order 42", run_id=run_id)
        if crash == "after_finished":
            run.on_event(lambda ev, _state: die() if ev.type == "ToolFinished" else None)
        run.run()
    else:
        assert run_id is not None
        lease = store.lease(run_id)
        if lease is not None and lease.live:  # the killed driver never released it: wait for it to expire
            time.sleep(lease.expires - time.time() + 0.05)
        run = anb.Run.resume(run_id, loop=loop, store=store, take_over=True)
        run.run()
        if run.state is anb.LoopState.WAITING_APPROVAL and action != "run":
            (call,) = run.pending_approvals()
            if action == "retry":
                run.approve(call.call_id, by="ops")
            else:
                run.submit_result(call.call_id, {"charged": 1999, "order_id": "42", "reconciled": True}, by="ops")
            run.run()
    counts = dict(down.execute("SELECT key, COUNT(*) FROM charges GROUP BY key").fetchall())
    kinds = [e.kind for e in run.events if e.type == "ApprovalRequested"]
    reused = [e.reused for e in run.events if e.type == "ToolFinished"]
    print(json.dumps({"state": run.state.value, "run_id": run.run_id, "effects": counts, "kinds": kinds,
                      "reused": reused, "output": run.output, "events": len(run.events)}))


if __name__ == "__main__":
    main(sys.argv[1:])
