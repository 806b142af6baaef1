"""A batch of 1,000 runs with 50 paused, worked from the inbox: listing, one selection decided, the audit trail.

What the issue's acceptance asks of the inbox at scale (the suite's test takes the same path with 200 runs and
50 paused: ``tests/test_inbox_batch.py``). Each checkout -- this one and a baseline (``--baseline PATH``,
default the main checkout next to this worktree) -- runs in its own process on its own SQLite file, in
alternating rounds; the table gives the medians of each step:

- the batch of 1,000 runs (every 20th asks for a refund and pauses);
- one listing of the inbox (each paused run's sealed log read and checked);
- the 50 approved in one selection (each run resumed, its decision checked and written, its lease let go);
- ``inbox.decisions()`` over the 1,000 runs (the approvals frame across runs: the audit trail).

    python bench/inbox_decisions.py [--baseline PATH] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, sys, tempfile, time
from pathlib import Path
import agentnb as anb

@anb.tool(risk="write")
def refund(order_id: str, cents: int) -> str:
    "Refund an order (a person approves each)."
    return f"refunded {cents}"

@anb.tool
def lookup(order_id: str) -> str:
    "Look an order up."
    return f"order {order_id}: paid"

def ask(messages):
    n = int(messages[0].text.split()[-1])
    call = ({"name": "refund", "arguments": {"order_id": str(n), "cents": n}} if n % 20 == 0 else
            {"name": "lookup", "arguments": {"order_id": str(n)}})
    return {"text": f"Order {n}.", "tool_calls": [call]}

def answer(messages):
    return {"text": "done"}

store = anb.SqliteStore(Path(tempfile.mkdtemp()) / "b.db", key="bench-inbox-key-1")
loop = anb.Loop(model=anb.ScriptedModel([ask, answer]), tools=[refund, lookup], store=store)
out = {}
t0 = time.perf_counter()
result = anb.batch(loop, [f"help with order {i}" for i in range(1000)], name="orders", concurrency=8, progress=False)
out["batch"] = time.perf_counter() - t0
assert result.counts()["paused"] == 50, result.counts()
inbox = anb.Inbox(store, loop=loop, by="ana")
t0 = time.perf_counter()
items = inbox.items()
out["list"] = time.perf_counter() - t0
t0 = time.perf_counter()
done = inbox.approve(items, note="under $1")
out["decide"] = time.perf_counter() - t0
assert len(done.applied) == 50 and inbox.items() == []
t0 = time.perf_counter()
decisions = inbox.decisions()
out["audit"] = time.perf_counter() - t0
assert int(decisions["decision"].notna().sum()) == 50
print(json.dumps(out))
"""

STEPS = [("batch", "batch of 1,000 runs (50 pause)"), ("list", "one listing of the inbox (50 waiting)"),
         ("decide", "50 approved in one selection"), ("audit", "inbox.decisions() over 1,000 runs")]


def once(path: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"})
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    default = HERE.parent / "main"
    parser.add_argument("--baseline", type=Path, default=default if (default / "agentnb").is_dir() else None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    got: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
    for _ in range(args.rounds):  # alternating: a busy moment of a shared machine falls on both alike
        got["this"].append(once(HERE))
        if args.baseline is not None:
            got["baseline"].append(once(args.baseline))
    print(f"{'step':<42} {'baseline':>12} {'this':>12}")
    for key, what in STEPS:
        this = statistics.median(r[key] for r in got["this"])
        base = f"{statistics.median(r[key] for r in got['baseline']):>10.3f} s" if got["baseline"] else "-"
        print(f"{what:<42} {base:>12} {this:>10.3f} s")


if __name__ == "__main__":
    main()
