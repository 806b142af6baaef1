"""PostgresStore on a real server: crashes of workers mid-write, races between workers, LISTEN/NOTIFY, migrations.

The store's contract itself is tested by ``tests/test_store_conformance.py`` (the same tests as SQLite); this
file tries to break what only a shared server makes possible: several processes on one run.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import agentnb as anb
from tests.pg_worker import TURNS, long_loop, refund_loop

S = anb.LoopState
KEY = "pg-test-key-0001"
HERE = Path(__file__).parent
ENV = {**os.environ, "AGENTNB_CHECKPOINT_KEY": KEY, "PYTHONPATH": str(HERE.parent)}


def spawn(*args: str, script: str = "pg_worker.py", **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(HERE / script), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**ENV, **env})


def result(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


@pytest.fixture
def store(pg_dsn: str, pg_schema: str) -> Any:
    opened = anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema)
    yield opened
    opened.close()


# -- crashes -----------------------------------------------------------------------------------------------------


def test_a_worker_killed_mid_write_leaves_every_run_loadable_and_resumable(
    store: anb.PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    rng = random.Random(7)
    for round_ in range(3):
        prefix = f"kill{round_}"
        proc = spawn("drive", pg_dsn, pg_schema, prefix, "4")
        # kill it at a random moment once it is busy writing (every step is a commit)
        while len([r for r, _ in store.runs() if r.startswith(prefix)]) < 4:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""  # it died first: why
        unfinished = 0
        for i in range(4):
            run_id = f"{prefix}-{i}"
            events = store.load(run_id)  # every seal checks out: no torn or half-committed write
            assert [e.seq for e in events] == list(range(len(events)))
            unfinished += events[-1].type != "RunFinished"
        assert unfinished == 4  # the kill landed in the middle of every run
        # a run the killed worker was in the middle of is taken over by another process and finished
        done = result(spawn("resume", pg_dsn, pg_schema, f"{prefix}-{round_}"))
        assert done["state"] == "COMPLETED" and done["output"] == "all added"
        finished = store.load(f"{prefix}-{round_}")
        assert sum(e.type == "ToolFinished" for e in finished) == TURNS  # each call ran (and was stored) once


@pytest.mark.parametrize("crash", ["before_effect", "after_effect", "after_outcome", "after_finished"])
def test_a_side_effect_happens_once_across_a_crash(tmp_path: Path, pg_dsn: str, pg_schema: str, crash: str) -> None:
    down = str(tmp_path / "payments.db")

    def worker(*args: str) -> dict[str, Any]:
        proc = spawn(*args, script="durable_worker.py", AGENTNB_PG_SCHEMA=pg_schema)
        out, err = proc.communicate(timeout=120)
        if proc.returncode == -signal.SIGKILL:
            return {"killed": True}
        assert proc.returncode == 0, err
        return dict(json.loads(out.strip().splitlines()[-1]))

    assert worker("start", pg_dsn, down, "plain", crash, "run_p").get("killed")
    out = worker("resume", pg_dsn, down, "plain", crash, "run_p")
    if crash in ("before_effect", "after_effect"):  # the claim is stored, the outcome is not: a person decides
        assert out["state"] == "WAITING_APPROVAL" and out["kinds"] == ["outcome_unknown"]
        out = worker("resume", pg_dsn, down, "plain", crash, "run_p", "reconcile")
        assert out["state"] == "COMPLETED" and "reconciled" in out["output"]
    else:
        assert out["state"] == "COMPLETED" and out["reused"] == [False]
    charged = sqlite3.connect(down).execute("SELECT COUNT(*) FROM charges").fetchone()[0]
    assert charged == (0 if crash == "before_effect" else 1)


# -- races -------------------------------------------------------------------------------------------------------


def test_two_workers_approving_one_run_resolve_it_once(
    tmp_path: Path, store: anb.PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    run = refund_loop(store).start("Refund order 42").run()
    assert run.state is S.WAITING_APPROVAL
    go = tmp_path / "go"
    procs = [spawn("approve", pg_dsn, pg_schema, run.run_id, str(go)) for _ in range(2)]
    time.sleep(1.5)  # both have imported agentnb and wait for the signal
    go.touch()
    outs = [result(p) for p in procs]
    assert sorted(o["won"] for o in outs) == [False, True], outs
    loser = next(o for o in outs if not o["won"])
    # it lost at the lease (RunLocked), at the approval (ApprovalError; RunNotPaused when it loaded the run after
    # the winner had resolved it), or at resume, when the winner wrote between its load and its lease ("moved
    # on"): never by a second resolution
    assert loser["error"] in ("ApprovalError", "RunNotPaused", "RunLocked") or "moved on" in loser["message"], loser
    events = store.load(run.run_id)
    assert sum(e.type == "ApprovalResolved" for e in events) == 1
    assert sum(e.type == "ToolFinished" and e.name == "create_refund" for e in events) == 1
    assert events[-1].type == "RunFinished" and events[-1].final is S.COMPLETED


def test_two_workers_taking_over_one_abandoned_run_drive_it_once(
    tmp_path: Path, store: anb.PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    run = refund_loop(store).start("Refund order 42")
    run.step()
    run.step()  # a driver that stopped mid-run (its lease runs out in 0.5 s)
    go = tmp_path / "go"
    procs = [spawn("take", pg_dsn, pg_schema, run.run_id, str(go)) for _ in range(2)]
    time.sleep(1.5)
    go.touch()
    outs = [result(p) for p in procs]
    assert any(o["won"] for o in outs), outs
    events = store.load(run.run_id)
    assert [e.seq for e in events] == list(range(len(events)))
    validated = [e.name for e in events if e.type == "CallValidated"]
    assert validated == ["get_order", "create_refund"]  # the run went on once, not twice
    assert events[-1].state is S.WAITING_APPROVAL


def test_claims_racing_from_many_processes_have_one_winner(store: anb.PostgresStore, pg_dsn: str,
                                                           pg_schema: str) -> None:
    for i in range(6):
        store.append(_started(f"r{i}"))
    code = (
        "import agentnb as anb, sys, time\n"
        f"store = anb.PostgresStore({pg_dsn!r}, schema={pg_schema!r})\n"
        "i = int(sys.argv[1])\n"
        "while time.time() < float(sys.argv[2]): pass\n"
        "print('won' if store.claim_effect('charge-42', f'r{i}', f'c{i}', 'charge') is None else 'lost')\n"
    )
    at = str(time.time() + 3.0)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i), at], stdout=subprocess.PIPE, text=True, env=ENV)
             for i in range(6)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert sorted(outs) == ["lost"] * 5 + ["won"]
    effect = store.effect("charge-42")
    assert effect is not None and effect.run_id == f"r{outs.index('won')}"


def _started(run_id: str) -> Any:
    from datetime import UTC, datetime

    from agentnb.events import RunStarted

    return RunStarted(seq=0, ts=datetime.now(UTC), run_id=run_id, turn=0, state=S.READY, messages=[], model="m",
                      tools=[])


# -- LISTEN/NOTIFY -----------------------------------------------------------------------------------------------


def test_a_watcher_sees_an_approval_made_in_another_process(tmp_path: Path, store: anb.PostgresStore,
                                                           pg_dsn: str, pg_schema: str) -> None:
    run = refund_loop(store).start("Refund order 42").run()
    seen = len(run.events)
    assert store.wait_for_change(run.run_id, seen=seen, timeout=0.2) is None  # nothing happened: a timeout
    go = tmp_path / "go"
    proc = spawn("approve", pg_dsn, pg_schema, run.run_id, str(go))
    got: list[tuple[str, str] | None] = []
    watcher = threading.Thread(target=lambda: got.append(store.wait_for_change(run.run_id, seen=seen, timeout=60)))
    watcher.start()
    time.sleep(1.0)
    go.touch()
    t0 = time.monotonic()
    watcher.join(70)
    waited = time.monotonic() - t0
    assert result(proc)["won"]
    assert got and got[0] is not None and got[0][0] == run.run_id
    assert waited < 30  # woken by the notification, not by the timeout
    # the change is already stored: a second wait with the old count returns at once (no lost wake-up)
    assert store.wait_for_change(run.run_id, seen=seen, timeout=5) == (run.run_id, "COMPLETED")
    again = anb.Run.resume(run.run_id, loop=refund_loop(store))
    assert again.state is S.COMPLETED


def test_an_inbox_wakes_for_any_run(store: anb.PostgresStore) -> None:
    got: list[tuple[str, str] | None] = []
    watcher = threading.Thread(target=lambda: got.append(store.wait_for_change(timeout=30)))
    watcher.start()
    time.sleep(0.3)
    store.append(_started("fresh"))
    watcher.join(40)
    assert got == [("fresh", "READY")]


# -- schema, keys, moving runs -----------------------------------------------------------------------------------


def test_the_schema_is_versioned_and_a_newer_one_is_refused(store: anb.PostgresStore, pg_dsn: str,
                                                           pg_schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        versions = conn.execute(f"SELECT version FROM {pg_schema}.schema_version").fetchall()
        assert versions == [(1,)]
        conn.execute(f"INSERT INTO {pg_schema}.schema_version (version) VALUES (99)")
    with pytest.raises(anb.CheckpointError, match="newer agentnb"):
        anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema)


def test_workers_opening_a_new_schema_together_migrate_it_once(pg_dsn: str, pg_schema: str) -> None:
    errors: list[BaseException] = []
    stores: list[anb.PostgresStore] = []

    def open_one() -> None:
        try:
            stores.append(anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema))
        except BaseException as exc:  # noqa: B036 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == 6
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(f"SELECT count(*) FROM {pg_schema}.schema_version").fetchone() == (1,)
    for s in stores:
        s.close()


def test_the_wrong_key_is_named_as_such(store: anb.PostgresStore, pg_dsn: str, pg_schema: str) -> None:
    with pytest.raises(anb.CheckpointError, match="different key"):
        anb.PostgresStore(pg_dsn, key="another-key-123", schema=pg_schema)


def test_a_run_moves_from_sqlite_to_postgres_with_its_seals(tmp_path: Path, store: anb.PostgresStore,
                                                           pg_dsn: str, pg_schema: str) -> None:
    lite = anb.SqliteStore(tmp_path / "c.db", key=KEY)
    run = refund_loop(lite).start("Refund order 42").run()
    db = sqlite3.connect(tmp_path / "c.db")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {pg_schema}")
        for table, cols in [("events", 5), ("runs", 8), ("leases", 3)]:
            for row in db.execute(f"SELECT * FROM {table}"):
                conn.execute(f"INSERT INTO {table} VALUES ({', '.join(['%s'] * cols)})", row)
        for row in db.execute("SELECT * FROM ledger"):
            conn.execute("INSERT INTO ledger (run_id, lseq, op, key, call_id, tool, content, value, result_status, "
                         "ts, prev, mac) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", row)
    moved = anb.Run.resume(run.run_id, loop=refund_loop(store))
    assert moved.state is S.WAITING_APPROVAL and len(moved.events) == len(run.events)
    moved.approve(moved.pending_approvals()[0].call_id)
    # its operation's ledger stayed behind: the refund is not started here (anb.move_run carries it, test_moves.py)
    with pytest.raises(anb.CheckpointError, match="without its operation's effect ledger"):
        moved.run()


def test_a_store_travels_to_another_process_without_its_connections(store: anb.PostgresStore) -> None:
    store.append(_started("p1"))
    copy = pickle.loads(pickle.dumps(store))
    assert copy is not store and copy.load("p1")[0].run_id == "p1"
    assert "***" in repr(store) and store.dsn.split("@")[0].split(":")[-1] not in repr(store)
    copy.close()


def test_a_whole_loop_runs_on_postgres(store: anb.PostgresStore) -> None:
    run = long_loop(store).start("add")
    run.run()
    assert run.output == "all added"
    assert store.runs(state="COMPLETED") == [(run.run_id, "COMPLETED")]
    assert len(store.load(run.run_id)) == len(run.events)
