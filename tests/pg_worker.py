"""A worker process for the PostgreSQL tests: drives runs against a shared PostgresStore, to be killed or raced.

    python pg_worker.py drive DSN SCHEMA PREFIX N      # start N long runs (PREFIX-0 ...), forever busy writing
    python pg_worker.py resume DSN SCHEMA RUN_ID       # take an abandoned run over and finish it
    python pg_worker.py approve DSN SCHEMA RUN_ID GO   # wait for the file GO, then approve the paused run and run it
    python pg_worker.py take DSN SCHEMA RUN_ID GO      # wait for GO, then take an expired run over and drive it

Prints one JSON line. The key comes from AGENTNB_CHECKPOINT_KEY.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import agentnb as anb

TURNS = 25


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def long_loop(store: Any, lease_ttl: float = 0.5, latency: float = 0.0) -> anb.Loop:
    """A loop whose runs make ``TURNS`` tool calls before answering (a run with many events to kill mid-write)."""
    script: list[Any] = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]} for i in range(TURNS)]
    script.append({"text": "all added"})
    return anb.Loop(model=anb.ScriptedModel(script, latency=latency), tools=[add], store=store, lease_ttl=lease_ttl,
                    retry_base_delay=0.0)


def refund_loop(store: Any) -> anb.Loop:
    return anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store,
                    lease_ttl=0.5)


def _wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.001)


def main(argv: list[str]) -> None:
    action, dsn, schema = argv[:3]
    store = anb.PostgresStore(dsn, schema=schema)
    out: dict[str, Any] = {}
    if action == "drive":
        prefix, n = argv[3], int(argv[4])
        # a little model latency keeps the runs busy for a few seconds, whatever the machine's speed
        runs = [long_loop(store, latency=0.01).start(f"add things {i}", run_id=f"{prefix}-{i}") for i in range(n)]
        while not all(r.done for r in runs):  # interleave the runs: the kill lands in the middle of one of them
            for r in runs:
                r.step()
        out = {"states": [r.state.value for r in runs]}
    elif action == "resume":
        run_id = argv[3]
        lease = store.lease(run_id)
        if lease is not None and lease.live:  # the killed driver never released it
            time.sleep(lease.expires - time.time() + 0.05)
        run = anb.Run.resume(run_id, loop=long_loop(store), take_over=True).run()
        out = {"state": run.state.value, "output": run.output, "events": len(run.events)}
    elif action in ("approve", "take"):
        run_id, go = argv[3], argv[4]
        _wait_for(go)
        try:
            if action == "approve":
                run = anb.Run.resume(run_id, loop=refund_loop(store))
                # the call the person was asked about: when the other worker resolved it before this one loaded
                # the run, approving it again must be refused (ApprovalError), not skipped by this worker
                asked = next(e.call_id for e in run.events if e.type == "ApprovalRequested")
                run.approve(asked, by=f"worker {os.getpid()}")
            else:
                run = anb.Run.resume(run_id, loop=refund_loop(store), take_over=True)
            run.run()
            out = {"won": True, "state": run.state.value}
        except (anb.RunLocked, anb.ApprovalError, anb.RunNotPaused, anb.CheckpointError) as exc:
            out = {"won": False, "error": type(exc).__name__, "message": str(exc)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
