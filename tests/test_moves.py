"""Once per operation across stores: a run moved to another store never repeats an effect its operation made.

Run A of operation ``refund-42`` refunds in one store; run B of the same operation waits for approval. Moving
only B (its rows copied by hand: the seals are the same), or moving both and deleting A's ledger rows, then
approving B must not refund again: the destination refuses the new effect, saying why. ``anb.move_run`` moves the
operation whole (every run and its ledger) and the source refuses new effects for it afterwards.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._states import LoopState as S
from agentnb.events import ToolFinished
from agentnb.store._moves import Mark

KEY = "move-test-key-0123"
OP = "refund-42"


class Bank:
    """The downstream: every executed refund, in order."""

    def __init__(self) -> None:
        self.refunds: list[str] = []

    def loop(self, store: anb.Store, order: str = "42") -> anb.Loop:
        bank = self

        @anb.tool(risk="write", approval=True)
        def refund(order_id: str, cents: int) -> str:
            """Refund an order."""
            bank.refunds.append(order_id)
            return f"refunded {cents} cents for order {order_id}"

        script = [{"tool_calls": [{"name": "refund", "arguments": {"order_id": order, "cents": 1999}}]},
                  {"text": "done"}]
        return anb.Loop(model=anb.ScriptedModel(script), tools=[refund], store=store)


@pytest.fixture
def stores(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str, str], Any]]:
    opened: list[Any] = []

    def make(kind: str, name: str, key: str = KEY) -> Any:
        store: Any
        if kind == "sqlite":
            store = anb.SqliteStore(tmp_path / f"{name}.db", key=key)
        else:
            store = anb.PostgresStore(request.getfixturevalue("pg_dsn"), key=key,
                                      schema=f"{request.getfixturevalue('pg_schema')}_{name}")
        opened.append(store)
        return store

    yield make
    for s in opened:
        s.close()


def refunded_then_waiting(bank: Bank, src: anb.Store) -> tuple[anb.Run, anb.Run]:
    a = bank.loop(src).start("Refund order 42", operation_id=OP).run()
    a.approve(a.pending_approvals()[0].call_id)
    assert a.run().state is S.COMPLETED and bank.refunds == ["42"]
    b = bank.loop(src).start("Refund order 42, please", operation_id=OP).run()
    assert b.state is S.WAITING_APPROVAL
    return a, b


def copy_by_hand(src: Any, dst: Any, run_ids: list[str], *, ledger: bool = True) -> None:
    """What a user does without move_run: the rows of some runs, copied as they are (the seals are the same)."""
    for rid in run_ids:
        rows = src._export(rid)
        if not ledger:
            rows = type(rows)(rows.run_id, rows.events, [], rows.head)
        dst._import([rows], "-", Mark())  # the rows only: the mark goes to an operation named "-", not this one


def approve_in(bank: Bank, store: anb.Store, run_id: str) -> anb.Run:
    run = anb.Run.resume(run_id, loop=bank.loop(store))
    run.approve(run.pending_approvals()[0].call_id)
    return run


@pytest.mark.parametrize("dst_kind", ["sqlite", "postgres"])
def test_a_run_copied_alone_never_refunds_again(stores: Any, dst_kind: str) -> None:
    bank = Bank()
    src, dst = stores("sqlite", "src"), stores(dst_kind, "dst")
    _, b = refunded_then_waiting(bank, src)
    copy_by_hand(src, dst, [b.run_id])
    moved = approve_in(bank, dst, b.run_id)
    with pytest.raises(anb.CheckpointError, match="without its operation's effect ledger") as err:
        moved.run()
    assert "agentnb.move_run" in str(err.value) and "did not run" in str(err.value)
    assert bank.refunds == ["42"]
    with pytest.raises(anb.CheckpointError, match="effect ledger"):  # asked again: the same answer
        moved.run()
    assert bank.refunds == ["42"] and len(dst.load(b.run_id)) == len(moved.events)  # nothing lost or half-written


@pytest.mark.parametrize("dst_kind", ["sqlite", "postgres"])
def test_move_run_carries_the_operation_and_its_ledger(stores: Any, dst_kind: str) -> None:
    bank = Bank()
    src, dst = stores("sqlite", "src"), stores(dst_kind, "dst")
    a, b = refunded_then_waiting(bank, src)
    assert sorted(anb.move_run(b.run_id, src, dst)) == sorted([a.run_id, b.run_id])
    moved = approve_in(bank, dst, b.run_id)
    assert moved.run().state is S.COMPLETED
    done = [e for e in moved.events if isinstance(e, ToolFinished)][-1]
    assert done.status == "duplicate" and done.effect == "inherited" and done.effect_run == a.run_id
    assert bank.refunds == ["42"]
    # the source keeps its rows to read, and starts no new effect for the operation any more
    assert len(anb.Run.resume(a.run_id, loop=bank.loop(src)).events) == len(a.events)
    same = bank.loop(src).start("Refund order 42, third time", operation_id=OP).run()
    same.approve(same.pending_approvals()[0].call_id)
    assert same.run().state is S.COMPLETED and bank.refunds == ["42"]  # its own ledger still answers there
    late = bank.loop(src, order="43").start("And order 43", operation_id=OP).run()
    late.approve(late.pending_approvals()[0].call_id)
    with pytest.raises(anb.CheckpointError, match="was moved to store"):
        late.run()
    assert bank.refunds == ["42"]
    # a run of another operation is not concerned
    other = bank.loop(src).start("Refund order 42 for another customer", operation_id="refund-43").run()
    other.approve(other.pending_approvals()[0].call_id)
    assert other.run().state is S.COMPLETED and bank.refunds == ["42", "42"]


def test_a_ledger_row_deleted_after_a_move_is_detected(stores: Any) -> None:
    bank = Bank()
    src, dst = stores("sqlite", "src"), stores("sqlite", "dst")
    a, b = refunded_then_waiting(bank, src)
    anb.move_run(b.run_id, src, dst)
    with sqlite3.connect(dst.path) as db:
        db.execute("DELETE FROM ledger WHERE run_id = ?", (a.run_id,))
    moved = approve_in(bank, dst, b.run_id)
    with pytest.raises(anb.CheckpointError, match="missing its record") as err:
        moved.run()
    assert "never happened" in str(err.value) and bank.refunds == ["42"]
    with pytest.raises(anb.CheckpointError, match="truncated"):  # and A itself no longer loads
        dst.load(a.run_id)


def test_copying_every_run_by_hand_but_not_the_ledger_is_refused(stores: Any) -> None:
    bank = Bank()
    src, dst = stores("sqlite", "src"), stores("sqlite", "dst")
    a, b = refunded_then_waiting(bank, src)
    copy_by_hand(src, dst, [a.run_id, b.run_id], ledger=False)
    moved = approve_in(bank, dst, b.run_id)
    with pytest.raises(anb.CheckpointError, match="without its operation's effect ledger"):
        moved.run()
    assert bank.refunds == ["42"]


def test_a_move_interrupted_between_the_stores_is_finished_by_calling_it_again(stores: Any,
                                                                               monkeypatch: Any) -> None:
    bank = Bank()
    src, dst = stores("sqlite", "src"), stores("sqlite", "dst")
    a, b = refunded_then_waiting(bank, src)

    def lost(operation: str, mark: Any) -> None:
        raise anb.CheckpointError("the source went away")

    monkeypatch.setattr(src, "_put_mark", lost)
    with pytest.raises(anb.CheckpointError, match="went away"):
        anb.move_run(b.run_id, src, dst)
    monkeypatch.undo()
    assert sorted(anb.move_run(b.run_id, src, dst)) == sorted([a.run_id, b.run_id])
    assert approve_in(bank, dst, b.run_id).run().state is S.COMPLETED and bank.refunds == ["42"]


def test_what_move_run_refuses_before_it_writes_anything(stores: Any) -> None:
    bank = Bank()
    src, dst = stores("sqlite", "src"), stores("sqlite", "dst")
    _, b = refunded_then_waiting(bank, src)
    other_key = stores("sqlite", "other", key="another-key-4567")
    with pytest.raises(anb.CheckpointError, match="different checkpoint keys"):
        anb.move_run(b.run_id, src, other_key)
    with pytest.raises(anb.CheckpointError, match="not a durable store"):
        anb.move_run(b.run_id, src, anb.MemoryStore())
    with pytest.raises(anb.CheckpointError, match="same store"):
        anb.move_run(b.run_id, src, anb.SqliteStore(src.path, key=KEY))
    with pytest.raises(anb.RunNotFound):
        anb.move_run("no-such-run", src, dst)
    with pytest.raises(anb.CheckpointError, match="needs a run id"):
        anb.move_run("  ", src, dst)
    src.acquire_lease(b.run_id, "worker-7")
    with pytest.raises(anb.CheckpointError, match="being driven by worker-7"):
        anb.move_run(b.run_id, src, dst)
    assert dst.runs() == [] and other_key.runs() == []


def test_a_changed_move_record_is_detected(stores: Any) -> None:
    bank = Bank()
    src, dst = stores("sqlite", "src"), stores("sqlite", "dst")
    _, b = refunded_then_waiting(bank, src)
    anb.move_run(b.run_id, src, dst)
    with sqlite3.connect(src.path) as db:  # lift the "moved out" refusal by editing the record
        raw = db.execute("SELECT value FROM meta WHERE name = ?", (f"move:{OP}",)).fetchone()[0]
        db.execute("UPDATE meta SET value = ? WHERE name = ?", (raw.replace('\\"to\\": \\"', '\\"to\\": \\"x'),
                                                                f"move:{OP}"))
    late = bank.loop(src, order="43").start("And order 43", operation_id=OP).run()
    late.approve(late.pending_approvals()[0].call_id)
    with pytest.raises(anb.CheckpointError, match="seal mismatch"):
        late.run()
    assert bank.refunds == ["42"]


def test_a_run_with_no_recorded_home_is_not_checked(stores: Any) -> None:
    """Runs written before stores recorded their id: nothing is known of them, so they go on as before."""
    bank = Bank()
    dst = stores("sqlite", "dst")
    mem = bank.loop(anb.MemoryStore()).start("Refund order 42", operation_id=OP).run()  # no home recorded
    assert "store" not in mem.events[0].settings
    for event in mem.events:
        dst.append(event)
    moved = approve_in(bank, dst, mem.run_id)
    assert moved.run().state is S.COMPLETED and bank.refunds == ["42"]
