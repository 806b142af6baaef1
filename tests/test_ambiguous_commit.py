"""A write the store kept though its reply was lost: the driver asks the store and goes on, never writing twice.

"Once the fault clears, step()/run() go on" must hold for the worst fault a store has: the commit happened and
the reply did not arrive (a connection dropped after COMMIT). The SQLite and memory cases inject exactly that
(the real write, then the error); the PostgreSQL case is a real server behind a TCP proxy that drops the
connection after the server received the write.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._states import LoopState as S
from agentnb.exceptions import CheckpointError
from agentnb.store import MemoryStore, SqliteStore

KEY = b"k" * 32


class Downstream:
    def __init__(self) -> None:
        self.charges = 0


def tools(down: Downstream) -> list[Any]:
    @anb.tool(risk="write", approval=False)
    def charge(order_id: str, cents: int) -> str:
        """Charge an order."""
        down.charges += 1
        return f"charged {cents}"

    @anb.tool
    def lookup(order_id: str) -> str:
        """Read an order."""
        return "42 cents"

    return [lookup, charge]


SCRIPT = [
    {"tool_calls": [{"name": "lookup", "arguments": {"order_id": "o1"}}]},
    {"tool_calls": [{"name": "charge", "arguments": {"order_id": "o1", "cents": 42}}]},
    {"text": "done"},
]


def lost_reply(base: type, *, on: str | None = None, claim: bool = False) -> Any:
    """A real store of class ``base`` that keeps one write (an event of type ``on``, or a claim) and then fails."""

    class LostReply(base):  # type: ignore[misc, valid-type]
        armed = True

        def append(self, event: Any, *, effect: Any = None) -> None:
            super().append(event, effect=effect)
            if self.armed and event.type == on:
                type(self).armed = False
                raise CheckpointError("the connection dropped after the commit (the reply was lost)")

        def claim_effect(self, key: str, run_id: str, call_id: str, tool: str) -> Any:
            found = super().claim_effect(key, run_id, call_id, tool)
            if self.armed and claim:
                type(self).armed = False
                raise CheckpointError("the connection dropped after the claim (the reply was lost)")
            return found

    return LostReply


def drive(run: anb.Run) -> int:
    """Run to the end through store faults, as a user retrying would; the number of faults seen."""
    faults = 0
    for _ in range(10):
        try:
            run.run()
            return faults
        except CheckpointError:
            faults += 1
    raise AssertionError("the run never went on after the fault")


@pytest.mark.parametrize("on", ["RunStarted", "ModelRequested", "TurnCompleted", "CallValidated", "ToolStarted",
                                "ToolFinished", "ResultsBound", "RunFinished"])
@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_kept_write_whose_reply_was_lost_is_adopted_not_written_again(tmp_path: Path, on: str, kind: str) -> None:
    down = Downstream()
    cls = lost_reply(SqliteStore if kind == "sqlite" else MemoryStore, on=on)
    store = cls(tmp_path / "r.db", key=KEY) if kind == "sqlite" else cls()
    run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=tools(down), store=store).start("charge o1")
    assert drive(run) == 1 and not cls.armed  # the fault happened, once
    assert run.state is S.COMPLETED and down.charges == 1
    stored = store.load(run.run_id)
    assert [e.seq for e in stored] == list(range(len(stored))) == [e.seq for e in run.events]
    assert [e.type for e in stored] == [e.type for e in run.events]
    assert sum(e.type == on for e in stored) == sum(e.type == on for e in anb.Loop(
        model=anb.ScriptedModel(SCRIPT), tools=tools(Downstream())).start("charge o1").run().events)


def test_a_claim_whose_reply_was_lost_runs_the_tool_once_without_asking_anyone(tmp_path: Path) -> None:
    down = Downstream()
    cls = lost_reply(SqliteStore, claim=True)
    store = cls(tmp_path / "r.db", key=KEY)
    run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=tools(down), store=store).start("charge o1")
    assert drive(run) == 1
    assert run.state is S.COMPLETED and down.charges == 1  # not an "outcome unknown" pause: it never ran
    assert not any(e.type == "ApprovalRequested" for e in run.events)


def test_in_another_process_a_lost_claim_is_unknown_and_says_what_is_known(tmp_path: Path) -> None:
    down = Downstream()
    cls = lost_reply(SqliteStore, claim=True)
    store = cls(tmp_path / "r.db", key=KEY)
    loop = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=tools(down), store=store, lease_ttl=0.2)
    run = loop.start("charge o1")
    with pytest.raises(CheckpointError):
        run.run()
    time.sleep(0.25)  # the driver is gone; its lease expired
    again = anb.Run.resume(run.run_id, loop=anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=tools(down),
                                                     store=SqliteStore(tmp_path / "r.db", key=KEY)), take_over=True)
    again.run()
    assert again.state is S.WAITING_APPROVAL and down.charges == 0
    (call,) = again.pending_approvals()
    assert call.kind == "outcome_unknown"
    note = next(e.note for e in again.events if e.type == "ApprovalRequested")
    assert note is not None and "claimed before and no outcome was recorded" in note and "it may have run" in note


def test_an_answer_kept_though_its_reply_was_lost_is_not_given_twice(tmp_path: Path) -> None:
    down = Downstream()
    cls = lost_reply(SqliteStore, on="ApprovalResolved")
    store = cls(tmp_path / "r.db", key=KEY)

    @anb.tool(risk="write")
    def refund(order_id: str) -> str:
        """Refund."""
        down.charges += 1
        return "ok"

    script = [{"tool_calls": [{"name": "refund", "arguments": {"order_id": "o1"}}]}, {"text": "done"}]
    run = anb.Loop(model=anb.ScriptedModel(script), tools=[refund], store=store).start("refund o1").run()
    (call,) = run.pending_approvals()
    with pytest.raises(CheckpointError):
        run.approve(call.call_id, by="ana")
    with pytest.raises(anb.RunNotPaused, match="EXECUTING"):
        run.approve(call.call_id, by="ana")  # the first answer was kept: this Run knows it now
    run.run()
    assert run.state is S.COMPLETED and down.charges == 1
    assert sum(e.type == "ApprovalResolved" for e in store.load(run.run_id)) == 1


# -- a real PostgreSQL server behind a proxy that loses the reply ----------------------------------------------


class DropAfterWrite:
    """A TCP proxy to PostgreSQL that, when armed, passes the next client message on and never returns the reply."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.dropped = threading.Event()
        self.cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        try:
            while data := src.recv(65536):
                if not upstream and self.cut.is_set():
                    continue  # the server's reply to the cut write: lost
                cutting = upstream and self.armed.is_set()
                if cutting:
                    self.armed.clear()
                    self.cut.set()
                dst.sendall(data)
                if cutting:
                    time.sleep(0.5)  # the server executes and commits (autocommit) meanwhile
                    self.dropped.set()
                    for s in (src, dst):
                        s.close()
                    self.cut.clear()
                    return
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


def test_postgres_a_commit_whose_reply_was_lost_does_not_wedge_the_run(pg_dsn: str, pg_schema: str) -> None:
    import psycopg

    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    proxy = DropAfterWrite(str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432))
    info.update(host="127.0.0.1", port=str(proxy.port))
    dsn = psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]
    store = anb.PostgresStore(dsn, key=KEY, schema=pg_schema, pool_size=1)
    try:
        down = Downstream()
        run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=tools(down), store=store).start("charge o1")
        run.run_until(lambda e: e.type == "CallValidated" and e.name == "charge")
        before = len(run.events)
        proxy.armed.set()  # the next write (the charge's ToolStarted) is committed; its reply never arrives
        with pytest.raises(CheckpointError):
            run.step()
        assert proxy.dropped.is_set() and len(run.events) == before
        assert drive(run) == 0
        assert run.state is S.COMPLETED and down.charges == 1
        stored = store.load(run.run_id)
        assert [e.seq for e in stored] == list(range(len(run.events)))
        assert [e.type for e in stored] == [e.type for e in run.events]
        assert store.lease(run.run_id) is None  # finished: the lease was let go
    finally:
        store.close()
        proxy.close()


def test_cancelling_a_run_whose_end_was_kept_though_its_reply_was_lost_changes_nothing(tmp_path: Path) -> None:
    cls = lost_reply(SqliteStore, on="RunFinished")
    store = cls(tmp_path / "r.db", key=KEY)
    run = anb.Loop(model=anb.ScriptedModel(SCRIPT), tools=tools(Downstream()), store=store).start("charge o1")
    with pytest.raises(CheckpointError):
        run.run()
    assert run.cancel() is None  # the stored end is adopted: the run is over, nothing more is written
    assert run.state is S.COMPLETED and [e.type for e in store.load(run.run_id)][-1] == "RunFinished"
