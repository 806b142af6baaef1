"""One suite for every store: events, the effect ledger, leases, and (for durable stores) the seals.

Each test takes a ``kind`` and builds stores through ``open_store(kind)``; durable stores also get a ``tamper``
hook that edits their raw storage as an attacker (or a careless admin) would. A new store joins by adding its
kind to ``KINDS`` / ``SEALED`` and a branch to the two helpers.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._states import LoopState as S
from agentnb.events import RunStarted, ToolFinished
from agentnb.store import EffectDone

KINDS = ["memory", "sqlite", "postgres"]
SEALED = ["sqlite", "postgres"]
KEY = "conformance-key-0001"

Tamper = Callable[[str, tuple[Any, ...]], int]


@pytest.fixture
def open_store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], anb.Store]]:
    opened: list[Any] = []

    def make(kind: str) -> anb.Store:
        store: Any
        if kind == "memory":
            store = anb.MemoryStore()
        elif kind == "sqlite":
            store = anb.SqliteStore(tmp_path / "conf.db", key=KEY)
        elif kind == "postgres":  # the session's server (started on first use), a schema of this test's own
            store = anb.PostgresStore(request.getfixturevalue("pg_dsn"), key=KEY,
                                      schema=request.getfixturevalue("pg_schema"))
        else:  # pragma: no cover - a kind without a branch
            raise AssertionError(kind)
        opened.append(store)
        return store

    yield make
    for store in opened:
        close = getattr(store, "close", None)
        if close is not None:
            close()


@pytest.fixture
def tamper(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[str], Tamper]:
    def make(kind: str) -> Tamper:
        if kind == "postgres":
            import psycopg

            dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")

            def run_pg(sql: str, params: tuple[Any, ...] = ()) -> int:
                with psycopg.connect(dsn, autocommit=True) as db:
                    db.execute(f"SET search_path TO {schema}")
                    return sum(db.execute(q.replace("?", "%s").encode(), params if "?" in q else ()).rowcount
                               for q in sql.split(";"))

            return run_pg
        assert kind == "sqlite"

        def run(sql: str, params: tuple[Any, ...] = ()) -> int:
            db = sqlite3.connect(tmp_path / "conf.db", isolation_level=None)
            try:  # statements separated by ";" run in turn (params go to each that has a "?")
                return sum(db.execute(q, params if "?" in q else ()).rowcount for q in sql.split(";"))
            finally:
                db.close()

        return run

    return make


def started(run_id: str) -> RunStarted:
    return RunStarted(seq=0, ts=datetime.now(UTC), run_id=run_id, turn=0, state=S.READY, messages=[], model="m",
                      tools=[])


def finished(run_id: str, seq: int, call_id: str, content: str = "done") -> ToolFinished:
    return ToolFinished(seq=seq, ts=datetime.now(UTC), run_id=run_id, turn=1, state=S.EXECUTING, call_id=call_id,
                        name="charge", status="ok", content=content, duration_s=0.0, idempotency_key="k1")


# -- events --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_events_round_trip_in_order_and_refuse_gaps(kind: str, open_store: Callable[[str], anb.Store]) -> None:
    store = open_store(kind)
    store.append(started("r1"))
    store.append(finished("r1", 1, "c1"))
    assert [e.seq for e in store.load("r1")] == [0, 1]
    with pytest.raises(anb.CheckpointError, match="does not follow"):
        store.append(finished("r1", 3, "c2"))
    with pytest.raises(anb.CheckpointError, match="does not follow"):
        store.append(finished("r1", 1, "c2"))  # a second event at a taken seq
    assert [e.seq for e in store.load("r1")] == [0, 1]
    with pytest.raises(anb.CheckpointError, match="no run"):
        store.load("nope")


@pytest.mark.parametrize("kind", KINDS)
def test_runs_are_listed_by_state(kind: str, open_store: Callable[[str], anb.Store]) -> None:
    store = open_store(kind)
    store.append(started("a"))
    store.append(started("b"))
    store.append(finished("b", 1, "c1"))
    assert set(store.runs()) == {("a", "READY"), ("b", "EXECUTING")}
    assert store.runs(state="EXECUTING") == [("b", "EXECUTING")]


@pytest.mark.parametrize("kind", KINDS)
def test_waiting_for_a_change_is_part_of_every_store(kind: str, open_store: Callable[[str], anb.Store]) -> None:
    store = open_store(kind)  # typed as the protocol: a store without wait_for_change fails mypy and this test
    store.append(started("w"))
    assert store.wait_for_change("w", seen=1, timeout=0.05) is None  # it has what the store holds
    store.wait_for_change(timeout=0.05)  # the first wait for any run sets where this store object listens from
    assert store.wait_for_change(timeout=0.05) is None  # nothing new since the last wait
    store.append(finished("w", 1, "c1"))  # between two waits: news for the next one, for any run and for "w"
    assert store.wait_for_change(timeout=5) == ("w", "EXECUTING")
    assert store.wait_for_change("w", seen=1, timeout=5) == ("w", "EXECUTING")


# -- the effect ledger ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_claim_is_atomic_and_an_outcome_is_recorded_with_its_event(
    kind: str, open_store: Callable[[str], anb.Store]
) -> None:
    store = open_store(kind)
    store.append(started("r1"))
    assert store.effect("k1") is None
    assert store.claim_effect("k1", "r1", "c1", "charge") is None  # claimed now
    again = store.claim_effect("k1", "r1", "c2", "charge")
    assert again is not None and (again.call_id, again.status) == ("c1", "started")
    store.append(finished("r1", 1, "c1", "charged 5"), effect=EffectDone("k1", "charged 5", {"cents": 5}, "ok"))
    done = store.effect("k1")
    assert done is not None and (done.status, done.content, done.value, done.result_status) == (
        "done", "charged 5", {"cents": 5}, "ok")
    assert done.call_id == "c1" and done.run_id == "r1"
    assert store.claim_effect("k1", "r2", "c9", "charge") == done  # another run: the existing effect, not a claim


@pytest.mark.parametrize("kind", KINDS)
def test_racing_claims_have_exactly_one_winner(kind: str, open_store: Callable[[str], anb.Store]) -> None:
    store = open_store(kind)
    store.append(started("r1"))
    wins: list[str] = []
    barrier = threading.Barrier(16)

    def claim(i: int) -> None:
        barrier.wait()
        if store.claim_effect("k-race", "r1", f"c{i}", "charge") is None:
            wins.append(f"c{i}")

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    effect = store.effect("k-race")
    assert effect is not None and effect.call_id == wins[0]


@pytest.mark.parametrize("kind", KINDS)
def test_retries_and_late_outcomes(kind: str, open_store: Callable[[str], anb.Store]) -> None:
    store = open_store(kind)
    store.append(started("r1"))
    store.claim_effect("k1", "r1", "c1", "charge")
    store.retry_effect("k1", "r1", "c1")
    effect = store.effect("k1")
    assert effect is not None and (effect.status, effect.attempts) == ("started", 2)
    store.finish_effect("k1", "r1", "c1", "late", None, "ok")
    effect = store.effect("k1")
    assert effect is not None and (effect.status, effect.content, effect.attempts) == ("done", "late", 2)


# -- leases --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_one_driver_at_a_time(kind: str, open_store: Callable[[str], anb.Store]) -> None:
    store = open_store(kind)
    store.append(started("r1"))
    lease = store.acquire_lease("r1", "A", 5.0)
    assert lease.owner == "A" and lease.live
    assert store.acquire_lease("r1", "A", 5.0).owner == "A"  # a renewal
    with pytest.raises(anb.RunLocked, match="is being driven by A") as live:
        store.acquire_lease("r1", "B", 5.0, take_over=True)  # a live lease is never taken over
    assert live.value.owner == "A" and not live.value.expired
    store.release_lease("r1", "B")  # not B's: nothing happens
    assert (got := store.lease("r1")) is not None and got.owner == "A"
    store.release_lease("r1", "A")
    assert store.lease("r1") is None
    assert store.acquire_lease("r1", "B", 0.05).owner == "B"
    time.sleep(0.1)
    with pytest.raises(anb.RunLocked, match="take_over=True") as expired:
        store.acquire_lease("r1", "C", 5.0)
    assert expired.value.expired
    assert store.acquire_lease("r1", "C", 5.0, take_over=True).owner == "C"


@pytest.mark.parametrize("kind", KINDS)
def test_a_lease_says_when_the_run_moved_on(kind: str, open_store: Callable[[str], anb.Store]) -> None:
    store = open_store(kind)
    store.append(started("r1"))
    store.append(finished("r1", 1, "c1"))
    with pytest.raises(anb.CheckpointError, match="moved on"):
        store.acquire_lease("r1", "A", 5.0, seq=1)  # this driver thinks the next seq is 1; the store has 2 events
    assert store.acquire_lease("r1", "A", 5.0, seq=2).owner == "A"


# -- seals (durable stores) ----------------------------------------------------------------------------------


def sealed_run(store: anb.Store) -> None:
    store.append(started("r1"))
    store.claim_effect("k1", "r1", "c1", "charge")
    store.append(finished("r1", 1, "c1", "charged"), effect=EffectDone("k1", "charged", {"n": 1}, "ok"))
    store.claim_effect("k2", "r1", "c2", "charge")
    assert len(store.load("r1")) == 2


@pytest.mark.parametrize("kind", SEALED)
@pytest.mark.parametrize(("sql", "params"), [
    ("DELETE FROM ledger WHERE key=? AND op='done'", ("k1",)),  # the record of a done charge
    ("DELETE FROM ledger WHERE key=?", ("k2",)),  # a claim (the last entry)
    ("UPDATE ledger SET result_status='error' WHERE key=? AND op='done'", ("k1",)),
    ("UPDATE ledger SET tool='refund' WHERE key=? AND op='claim'", ("k1",)),
    ("UPDATE ledger SET call_id='c9' WHERE key=? AND op='claim'", ("k1",)),
    ("UPDATE ledger SET content='other' WHERE key=? AND op='done'", ("k1",)),
    ("UPDATE ledger SET key='k3' WHERE key=? AND op='claim'", ("k2",)),
    ("UPDATE ledger SET lseq=99 WHERE lseq=0;UPDATE ledger SET lseq=0 WHERE lseq=?;UPDATE ledger SET lseq=1 "
     "WHERE lseq=99", (1,)),  # two entries swapped
    ("UPDATE events SET data = replace(data, 'charged', 'refunded') WHERE seq=?", (1,)),
    ("DELETE FROM events WHERE seq=?", (1,)),
])
def test_an_edited_deleted_or_reordered_record_is_refused_at_load(
    kind: str, sql: str, params: tuple[Any, ...], open_store: Callable[[str], anb.Store],
    tamper: Callable[[str], Tamper],
) -> None:
    sealed_run(open_store(kind))
    assert tamper(kind)(sql, params) >= 1
    with pytest.raises(anb.CheckpointError):
        open_store(kind).load("r1")


@pytest.mark.parametrize("kind", SEALED)
def test_a_ledger_row_moved_to_another_run_is_refused(
    kind: str, open_store: Callable[[str], anb.Store], tamper: Callable[[str], Tamper]
) -> None:
    sealed_run(open_store(kind))
    assert tamper(kind)("UPDATE ledger SET run_id='r2' WHERE key=? AND op='done'", ("k1",)) == 1
    with pytest.raises(anb.CheckpointError):
        open_store(kind).load("r1")
    with pytest.raises(anb.CheckpointError, match="changed after it was written"):
        open_store(kind).effect("k1")  # every row is sealed on its own too


@pytest.mark.parametrize("kind", KINDS)
def test_an_expired_lease_of_a_run_with_no_event_protects_nothing(
    kind: str, open_store: Callable[[str], anb.Store]
) -> None:
    store = open_store(kind)
    store.acquire_lease("fresh", "dead-driver", 0.05, seq=0)  # it took the run, then died before its first event
    time.sleep(0.1)
    assert store.acquire_lease("fresh", "B", 5.0, seq=0).owner == "B"  # no take_over needed: nothing to protect
    with pytest.raises(anb.RunLocked, match="is being driven by B"):
        store.acquire_lease("fresh", "C", 5.0, seq=0)  # a live lease still is one
