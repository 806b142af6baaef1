"""PostgreSQL going away mid-decision: the decision is not applied, the inbox says so, and once the server is
back the same decision applies exactly once (``tests/test_inbox.py`` has SQLite's version).

Both faults are real: the test's own server (``tests/pgserver.py``) is stopped between listing and deciding
and started again on its port; and the store's connections are killed (``pg_terminate_backend``) between the
run's load and the write of the decision, the moment a network cut hurts most.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import agentnb as anb
from agentnb.events import ApprovalResolved, BaseEvent

from .test_inbox import KEY, make_loop
from .test_inbox_widget import click


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A server of this module's own: stopping it must not take the session's server with it."""
    from tests.pgserver import start_cluster

    try:
        own = start_cluster(fsync=True)  # stopped at once and started again: what it flushed must last
    except Exception as exc:
        pytest.skip(f"PostgreSQL cannot run here: {exc}")
    try:
        yield own
    finally:
        own.stop()


def resolved(store: Any, run_id: str) -> list[ApprovalResolved]:
    return [e for e in store.load(run_id) if isinstance(e, ApprovalResolved)]


def test_a_server_stopped_between_listing_and_deciding_applies_nothing_then_exactly_once(
        cluster: Any, pg_schema: str) -> None:
    # the server is stopped as by a crash: events committed with the default synchronous_commit=off may be lost
    # with it (the store's documented trade-off; the ledger's claims always commit synchronously), which is not
    # what this test is about, so they commit synchronously here
    store = anb.PostgresStore(cluster.dsn, key=KEY, schema=pg_schema, timeout=2.0, synchronous_commit="on")
    try:
        loop = make_loop(store)
        anb.batch(loop, ["refund order 1", "refund order 2"], name="out", progress=False)
        w = anb.Inbox(store, loop=loop, by="ana").widget()
        stale = anb.Inbox(store, loop=loop, by="ben").items()  # another person's view, listed now too
        key = next(r["key"] for r in w.view.rows if r["run_id"] == "out-0")
        cluster.stop(remove=False)
        try:
            click(w, "approve", keys=[key], note="under $20")
            assert w.view.message.startswith("0 applied, 1 refused") and "not applied" in w.view.message, \
                w.view.message
            (refused,) = w.view.outcomes
            assert not refused["applied"] and "not applied" in refused["reason"]
        finally:
            cluster.start()
        assert len(back(lambda: resolved(store, "out-0"))) == 0  # nothing was applied while it was away
        listed = sorted(r["run_id"] for r in w.refresh() and w.view.rows)
        assert listed == ["out-0", "out-1"], (w.inbox.problems, w.view.message)  # still waiting
        click(w, "approve", keys=[key], note="under $20")  # the same decision, once the server is back
        assert w.view.message.startswith("1 applied"), w.view.message
        again = anb.Inbox(store, loop=loop, by="ben").approve([p for p in stale if p.run_id == "out-0"])
        assert again.applied == [] and "already approved by ana" in (again.refused[0].reason or "")
        (only,) = resolved(store, "out-0")
        assert only.by == "ana" and only.note == "under $20"
    finally:
        store.close()


def back(read: Any, within: float = 60.0) -> Any:
    """``read()`` once the store reaches the restarted server: its pool reconnects with a backoff, so on a busy
    machine the first requests after a restart can still say the store is unavailable (a clear error, nothing
    lost), which is not what these tests are about."""
    deadline = time.monotonic() + within
    while True:
        try:
            return read()
        except anb.StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class KilledMidDecision:
    """A PostgresStore whose connections are killed just before the first decision is written."""

    def __init__(self, inner: anb.PostgresStore, dsn: str) -> None:
        self.inner, self.dsn, self.kills = inner, dsn, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, ApprovalResolved) and self.kills == 0:
            import psycopg

            self.kills += 1
            with psycopg.connect(self.dsn, autocommit=True) as admin:  # every other backend: the store's pool
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE pid <> pg_backend_pid() AND datname = current_database()")
        self.inner.append(event, **kwargs)


def test_connections_killed_between_the_load_and_the_write_apply_nothing_then_exactly_once(
        cluster: Any, pg_schema: str) -> None:
    inner = anb.PostgresStore(cluster.dsn, key=KEY, schema=pg_schema, timeout=2.0)
    store = KilledMidDecision(inner, cluster.dsn)
    try:
        loop = make_loop(store)
        anb.batch(loop, ["refund order 7"], name="cut", progress=False)
        inbox = anb.Inbox(store, loop=loop, by="ana")
        (item,) = inbox.items()
        first = inbox.approve(item, note="ok")
        assert store.kills == 1 and first.applied == []
        assert "not applied" in (first.refused[0].reason or ""), first.refused
        assert resolved(inner, "cut-0") == [] and [p.key for p in inbox.items()] == [item.key]
        second = inbox.approve(item, note="ok", then_run=True)  # the same decision: the pool reconnects
        assert len(second.applied) == 1 and second.refused == []
        assert len(resolved(inner, "cut-0")) == 1 and inbox.items() == []
        assert anb.Run.resume("cut-0", loop=make_loop(inner)).output == "done: refunded 700 cents on order 7"
    finally:
        inner.close()
