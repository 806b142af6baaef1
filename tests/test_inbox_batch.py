"""Batches meet the inbox, and two processes decide on one PostgreSQL inbox.

A batch's paused runs are listed tagged with their batch and counted as waiting by the progress bar; a
selection decided from the inbox -- in another process, after the kernel that listed them went away -- is
carried on by running the batch again. On PostgreSQL, two processes deciding on the same calls apply exactly
one decision per call, and the other is refused with who decided.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._states import LoopState as S

from .test_inbox import refund

KEY = "inbox-batch-test-key-1"
HERE = Path(__file__).parent
N, EVERY = 1_000, 20  # 1,000 runs, every 20th asks for a refund: 50 wait for a person


@anb.tool
def lookup(order_id: str) -> str:
    """Look an order up (no approval)."""
    return f"order {order_id}: paid"


def batch_loop(store: Any) -> anb.Loop:
    def ask(messages: Any) -> dict[str, Any]:
        n = int(messages[0].text.split()[-1])
        call = ({"name": "refund", "arguments": {"order_id": str(n), "cents": n}} if n % EVERY == 0 else
                {"name": "lookup", "arguments": {"order_id": str(n)}})
        return {"text": f"Order {n}.", "tool_calls": [call]}

    def answer(messages: Any) -> dict[str, Any]:
        return {"text": f"done: {messages[-1].tool_results[0].content}"}

    return anb.Loop(model=anb.ScriptedModel([ask, answer]), tools=[refund, lookup], store=store)


PROMPTS = [f"help with order {i}" for i in range(N)]

DECIDE = """
import json, sys
sys.path.insert(0, sys.argv[3])
import agentnb as anb
from tests.test_inbox_batch import KEY, batch_loop
store = anb.SqliteStore(sys.argv[1], key=KEY)
seen = {(r, c, d) for r, c, d in json.loads(open(sys.argv[2]).read())}
inbox = anb.Inbox(store, loop=batch_loop(store), by="ana")
chosen = [p for p in inbox.items(batch="orders") if (p.run_id, p.call_id, p.digest) in seen]
done = inbox.approve(chosen, note="under $10")
print(json.dumps([len(chosen), len(done.applied), [o.reason for o in done.refused]]))
"""


def test_a_batchs_paused_runs_are_resolved_in_one_selection_after_a_restart_and_the_batch_carries_them_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "batch.db"
    store = anb.SqliteStore(db, key=KEY)
    first = anb.batch(batch_loop(store), PROMPTS, name="orders", concurrency=8, progress=True)
    assert first.counts() == {"done": N - N // EVERY, "failed": 0, "paused": N // EVERY}
    assert "paused=50" in capsys.readouterr().err  # the progress bar counts the runs waiting for a person
    listed = anb.Inbox(store).items()  # the person's view, in the kernel that is about to go away
    assert len(listed) == N // EVERY and {p.batch for p in listed} == {"orders"}
    assert {p.run_id for p in listed} == {f"orders-{i}" for i in range(0, N, EVERY)}
    seen = tmp_path / "seen.json"
    seen.write_text(json.dumps([[p.run_id, p.call_id, p.digest] for p in listed]))
    del store, listed  # a kernel restart: a new process decides from the store
    done = subprocess.run([sys.executable, "-c", DECIDE, str(db), str(seen), str(HERE.parent)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    chosen, applied, refused = json.loads(done.stdout.strip().splitlines()[-1])
    assert (chosen, applied, refused) == (N // EVERY, N // EVERY, [])
    store = anb.SqliteStore(db, key=KEY)
    assert anb.Inbox(store).items() == []
    again = anb.batch(batch_loop(store), PROMPTS, name="orders", concurrency=8, progress=False)
    assert again.counts() == {"done": N, "failed": 0, "paused": 0}
    actions = again.table.set_index("operation_id")["action"]
    assert set(actions[[f"orders-{i}" for i in range(0, N, EVERY)]]) == {"resumed"}
    assert set(actions[[f"orders-{i}" for i in range(1, N, EVERY)]]) == {"skipped"}
    run = anb.Run.resume("orders-40", loop=batch_loop(store))
    assert run.state is S.COMPLETED and run.output == "done: refunded 40 cents on order 40"
    decided = anb.Inbox(store).decisions()
    decided = decided[decided["decision"].notna()]
    assert len(decided) == N // EVERY and set(decided["decided_by"]) == {"ana"}


PG_DECIDE = """
import json, sys
sys.path.insert(0, sys.argv[4])
import agentnb as anb
from tests.test_inbox_batch import KEY, batch_loop
store = anb.PostgresStore(sys.argv[1], key=KEY, schema=sys.argv[2])
who = sys.argv[3]
inbox = anb.Inbox(store, loop=batch_loop(store), by=who)
items = inbox.items()
open(sys.argv[5] + "." + who, "w").close()  # listed: wait for the other to list too, then decide
import os, time
while not os.path.exists(sys.argv[5] + "." + ("ben" if who == "ana" else "ana")):
    time.sleep(0.01)
done = inbox.approve(items) if who == "ana" else inbox.deny(items, reason="not today")
print(json.dumps([[o.run_id, o.applied, o.reason] for o in done.outcomes]))
"""


def test_two_processes_deciding_on_one_postgresql_inbox_apply_exactly_one_per_call(
        pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    store = anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema)
    try:
        prompts = [f"help with order {i * EVERY}" for i in range(6)]
        anb.batch(batch_loop(store), prompts, name="pg", progress=False)
        assert len(anb.Inbox(store).items()) == 6
        flag = str(tmp_path / "listed")
        procs = [subprocess.Popen([sys.executable, "-c", PG_DECIDE, pg_dsn, pg_schema, who, str(HERE.parent), flag],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for who in ("ana", "ben")]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err
            outs.append(json.loads(out.strip().splitlines()[-1]))
        for i in range(6):
            rows = [row for out in outs for row in out if row[0] == f"pg-{i}"]
            assert len(rows) == 2, rows  # both saw the call and both tried
            applied = [r for r in rows if r[1]]
            assert len(applied) == 1, rows  # exactly one decision applied
            (refused,) = [r for r in rows if not r[1]]
            assert refused[2] and ("already" in refused[2] or "not applied" in refused[2]), refused  # with why
            resolved = [e for e in store.load(f"pg-{i}") if e.type == "ApprovalResolved"]
            assert len(resolved) == 1
            assert resolved[0].by == ("ana" if applied[0] in outs[0] else "ben")  # type: ignore[attr-defined]
        assert anb.Inbox(store).items() == []
    finally:
        store.close()


PG_PAUSE = """
import sys
import time
sys.path.insert(0, sys.argv[3])
import agentnb as anb
from tests.test_inbox_batch import KEY, batch_loop
store = anb.PostgresStore(sys.argv[1], key=KEY, schema=sys.argv[2])
batch_loop(store).start("help with order 60", run_id="late").run()
"""


def test_the_widget_updates_live_when_another_process_pauses_a_run_in_postgresql(pg_dsn: str, pg_schema: str) -> None:
    store = anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema)
    widget = anb.Inbox(store, loop=batch_loop(store), by="ana").widget(interval=0.05)
    widget.watch()
    try:
        assert widget.view.rows == []
        done = subprocess.run([sys.executable, "-c", PG_PAUSE, pg_dsn, pg_schema, str(HERE.parent)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not widget.view.rows:
            time.sleep(0.02)
        assert [r["run_id"] for r in widget.view.rows] == ["late"]
    finally:
        widget.close()
        store.close()


def test_a_change_between_two_waits_on_postgresql_is_not_missed(pg_dsn: str, pg_schema: str) -> None:
    store = anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema)
    try:
        assert store.wait_for_change(timeout=0.05) is None  # listening, nothing happened
        batch_loop(store).start("help with order 80", run_id="between").run()  # while nobody waits
        assert store.wait_for_change(timeout=5) is not None  # the next wait sees it (a live inbox relists)
    finally:
        store.close()
