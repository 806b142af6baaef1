"""The approvals inbox, worked as a support team would: many paused runs, selections, two people, stale views.

Every decision names what the person saw; each is applied once, or refused with its reason (someone else
decided, the arguments changed, the request expired, the store could not record it); the inbox's state is the
store, so a second Inbox -- another person, another process, a restarted kernel -- sees the same calls.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._inbox import Pending
from agentnb._states import LoopState as S
from agentnb.exceptions import AgentnbError, CheckpointError

KEY = "inbox-test-key-0001"
HERE = Path(__file__).parent


@anb.tool(risk="write")
def refund(order_id: str, cents: int) -> str:
    """Refund an order (a person approves each)."""
    return f"refunded {cents} cents on order {order_id}"


@anb.tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid"


def make_loop(store: Any, ttl: float | None = None) -> anb.Loop:
    def answer(messages: Any) -> dict[str, Any]:
        return {"text": f"done: {messages[-1].tool_results[0].content}"}

    def ask(messages: Any) -> dict[str, Any]:
        n = int(messages[0].text.split()[-1])
        return {"text": f"I will refund order {n}.",
                "tool_calls": [{"name": "refund", "arguments": {"order_id": str(n), "cents": 100 * n}}]}

    return anb.Loop(model=anb.ScriptedModel([ask, answer]), tools=[refund, lookup], store=store,
                    approval_ttl=ttl)


def paused(tmp_path: Path, n: int, **options: Any) -> tuple[anb.SqliteStore, anb.Loop]:
    store = anb.SqliteStore(tmp_path / "inbox.db", key=KEY)
    loop = make_loop(store, **options)
    result = anb.batch(loop, [f"refund order {i}" for i in range(n)], name="support", progress=False)
    assert result.counts()["paused"] == n
    return store, loop


def test_every_waiting_call_of_a_store_is_one_row(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 6)
    inbox = anb.Inbox(store, loop=loop)
    items = inbox.items()
    assert sorted(p.run_id for p in items) == [f"support-{i}" for i in range(6)]
    first = next(p for p in items if p.run_id == "support-3")
    assert (first.tool, first.risk, first.kind, first.batch) == ("refund", "write", "approval", "support")
    assert first.arguments == {"order_id": "3", "cents": 300} and first.reasoning == "I will refund order 3."
    assert first.age_s() >= 0 and first.digest
    cheap = inbox.items(where=lambda p: p.arguments["cents"] < 200)
    assert sorted(p.run_id for p in cheap) == ["support-0", "support-1"]
    assert inbox.items(tool="lookup") == [] and len(inbox.items(tool=["refund", "lookup"], risk="write")) == 6
    table = inbox.table(batch="support")
    assert len(table) == 6 and {"run_id", "tool", "arguments", "reasoning", "age_s", "expires_at"} <= set(table)


def test_a_selection_is_approved_in_one_go_and_the_runs_carry_on(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 8)
    inbox = anb.Inbox(store, loop=loop)
    cheap = inbox.items(where=lambda p: p.arguments["cents"] < 500)
    done = inbox.approve(cheap, by="ana", note="under $5", then_run=True)
    assert len(done.applied) == 5 and done.refused == []
    assert sorted(p.run_id for p in inbox.items()) == ["support-5", "support-6", "support-7"]
    run = anb.Run.resume("support-2", loop=loop)
    assert run.state is S.COMPLETED and run.output == "done: refunded 200 cents on order 2"
    decisions = inbox.decisions()
    approved = decisions[decisions["decision"] == "approved"]
    assert len(approved) == 5 and set(approved["decided_by"]) == {"ana"} and set(approved["note"]) == {"under $5"}
    assert (approved["wait_s"] >= 0).all()


def test_a_second_decision_on_a_call_is_refused_saying_who_decided(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 1)
    ana, ben = anb.Inbox(store, loop=loop), anb.Inbox(anb.SqliteStore(tmp_path / "inbox.db", key=KEY), loop=loop)
    (seen_by_ana,), (seen_by_ben,) = ana.items(), ben.items()  # both looked before either decided
    assert ana.approve(seen_by_ana, by="ana").applied
    refused = ben.deny(seen_by_ben, by="ben", reason="too much").refused
    assert len(refused) == 1 and refused[0].reason is not None
    assert refused[0].reason.startswith("already approved by ana at ")
    events = anb.SqliteStore(tmp_path / "inbox.db", key=KEY).load("support-0")
    assert [e.decision for e in events if e.type == "ApprovalResolved"] == ["approved"]  # type: ignore[attr-defined]


def test_two_processes_deciding_on_one_inbox_apply_exactly_one(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 4)
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[3]); import agentnb as anb; "
        "from tests.test_inbox import make_loop; "
        "store = anb.SqliteStore(sys.argv[1], key='inbox-test-key-0001'); "
        "inbox = anb.Inbox(store, loop=make_loop(store)); "
        "items = inbox.items(); d = inbox.approve(items, by=sys.argv[2]) if sys.argv[2] == 'ana' else "
        "inbox.deny(items, by=sys.argv[2], reason='no'); "
        "print(json.dumps([[o.run_id, o.applied, o.reason] for o in d.outcomes]))"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "inbox.db"), who, str(HERE.parent)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for who in ("ana", "ben")]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    for i in range(4):
        rows = [row for out in outs for row in out if row[0] == f"support-{i}"]
        applied = [r for r in rows if r[1]]
        assert len(applied) <= 1, rows  # never both
        events = store.load(f"support-{i}")
        resolved = [e for e in events if e.type == "ApprovalResolved"]
        assert len(resolved) == len(applied) <= 1
        for r in rows:
            if not r[1]:
                assert r[2], r  # a refusal says why
    assert sum(len([r for r in out if r[1]]) for out in outs) >= 1


def test_changed_arguments_and_expired_requests_are_refused(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 2, ttl=0.05)
    inbox = anb.Inbox(store, loop=loop)
    a, b = inbox.items()
    import time

    time.sleep(0.1)
    expired = inbox.approve(a, by="ana").refused
    assert expired and "expired" in (expired[0].reason or "")
    assert inbox.deny(a, by="ana", reason="late").applied  # an expired request can still be denied
    stale = Pending(**{**b.__dict__, "digest": "0" * 64})
    refused = inbox.deny(stale, by="ana").refused
    assert refused and "arguments changed" in (refused[0].reason or "")


def test_a_runs_decisions_are_all_or_nothing(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "inbox.db", key=KEY)
    calls = [{"name": "refund", "arguments": {"order_id": str(i), "cents": i}} for i in (1, 2)]
    loop = anb.Loop(model=anb.ScriptedModel([{"tool_calls": calls}, {"text": "ok"}]), tools=[refund], store=store)
    loop.start("refund two").run()
    inbox = anb.Inbox(store, loop=loop)
    one, two = inbox.items()
    stale = Pending(**{**two.__dict__, "digest": "f" * 64})
    decided = inbox.approve([one, stale], by="ana")
    assert decided.applied == [] and len(decided.refused) == 2
    assert "another decision of this run was refused" in (decided.refused[0].reason or "")
    assert len(inbox.items()) == 2  # nothing was applied


def test_a_log_that_says_otherwise_is_not_listed(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 1)
    done = make_loop(store)
    run = anb.Loop(model=anb.ScriptedModel([{"text": "hi"}]), store=store).start("hello").run()
    assert run.state is S.COMPLETED
    with sqlite3.connect(tmp_path / "inbox.db") as db:  # a hand-edited index: not sealed, so not trusted
        db.execute("UPDATE runs SET state='WAITING_APPROVAL' WHERE run_id=?", (run.run_id,))
    inbox = anb.Inbox(store, loop=done)
    assert [p.run_id for p in inbox.items()] == ["support-0"]
    assert "sealed log says COMPLETED" in inbox.problems[run.run_id]


def test_a_hand_edited_index_of_a_postgres_store_lists_no_finished_run(pg_dsn: str, pg_schema: str) -> None:
    import psycopg

    store = anb.PostgresStore(pg_dsn, key=KEY, schema=pg_schema)
    loop = make_loop(store)
    waiting = loop.start("refund order 3").run()
    done = anb.Loop(model=anb.ScriptedModel([{"text": "hi"}]), store=store).start("hello").run()
    assert waiting.state is S.WAITING_APPROVAL and done.state is S.COMPLETED
    with psycopg.connect(pg_dsn) as db:  # the index is a column anyone with the password can write; not sealed
        db.execute(f"UPDATE {pg_schema}.runs SET state='WAITING_APPROVAL' WHERE run_id=%s", (done.run_id,))
    assert (done.run_id, "WAITING_APPROVAL") in store.runs()  # the index says so ...
    inbox = anb.Inbox(store, loop=loop)
    assert [p.run_id for p in inbox.items()] == [waiting.run_id]  # ... the sealed log does not
    assert "sealed log says COMPLETED" in inbox.problems[done.run_id]
    store.close()


def test_the_inbox_shows_what_runs_with_invisible_characters_written_out_and_flagged(tmp_path: Path) -> None:
    from agentnb._visible import FLAG

    hidden = "\u202e0987654321\u202c"  # drawn as 1234567890; the tool would get 0987654321
    store = anb.SqliteStore(tmp_path / "inbox.db", key=KEY)
    calls = [{"name": "refund", "arguments": {"order_id": hidden, "cents": 5}},
             {"name": "refund", "arguments": {"order_id": "7", "cents": 5}}]
    loop = anb.Loop(model=anb.ScriptedModel([{"tool_calls": calls}, {"text": "ok"}]), tools=[refund], store=store)
    loop.start("refund").run()
    page = anb.Inbox(store, loop=loop)._repr_html_()
    assert "\u202e" not in page and "\u202c" not in page
    rows = page.split("<tr>")[2:]
    shown = next(r for r in rows if "0987654321" in r)
    assert "⟨U+202E⟩0987654321⟨U+202C⟩" in shown or "\\u202e0987654321\\u202c" in shown, shown
    assert FLAG in shown and FLAG not in next(r for r in rows if "0987654321" not in r)
    store.close()


class Refusing:
    """A store that stops accepting writes (the disk filled, the server went away) after listing worked."""

    def __init__(self, inner: anb.SqliteStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, *args: Any, **kwargs: Any) -> None:
        raise CheckpointError("the store is unreachable (simulated: connection lost)")


def test_a_store_that_goes_away_mid_decision_loses_nothing(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 1)
    broken = Refusing(store)
    inbox = anb.Inbox(broken, loop=make_loop(broken))
    (item,) = inbox.items()
    decided = inbox.approve(item, by="ana")
    assert decided.applied == [] and "not applied" in (decided.refused[0].reason or "")
    assert len(anb.Inbox(store).items()) == 1  # still waiting, for the next try
    assert anb.Inbox(store, loop=loop).approve(item, by="ana").applied


class Unreachable:
    """A store whose loads fail with ``StoreUnavailable`` for one run (a connection lost mid-listing)."""

    def __init__(self, inner: anb.SqliteStore, run_id: str) -> None:
        self.inner, self.run_id, self.down = inner, run_id, True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def load(self, run_id: str) -> Any:
        if self.down and run_id == self.run_id:
            raise anb.StoreUnavailable(f"could not load run {run_id!r}: connection lost (simulated)")
        return self.inner.load(run_id)


def test_a_store_fault_while_listing_leaves_no_run_out_and_the_widget_keeps_its_rows(tmp_path: Path) -> None:
    """A run whose log cannot be *trusted* is a problem of that run; one the store could not *read now* is not:
    the listing fails as a whole (never a shorter list that looks complete), and the widget says so."""
    store, loop = paused(tmp_path, 2)
    ids = sorted(p.run_id for p in anb.Inbox(store).items())
    flaky = Unreachable(store, ids[1])
    flaky.down = False
    widget = anb.Inbox(flaky, loop=loop, by="ana").widget()
    assert sorted(r["run_id"] for r in widget.view.rows) == ids
    flaky.down = True
    with pytest.raises(anb.StoreUnavailable):
        anb.Inbox(flaky).items()
    assert sorted(p.run_id for p in widget.refresh()) == ids  # the rows as listed before, and why
    assert sorted(r["run_id"] for r in widget.view.rows) == ids
    assert widget.view.message.startswith("could not list the inbox again") and "connection lost" in widget.view.message
    flaky.down = False
    assert sorted(p.run_id for p in widget.refresh()) == ids and widget.inbox.problems == {}


def test_deciding_needs_a_loop_and_a_person() -> None:
    store = anb.MemoryStore()
    loop = make_loop(store)
    loop.start("refund order 1").run()
    (item,) = anb.Inbox(store).items()
    with pytest.raises(AgentnbError, match="needs loop="):
        anb.Inbox(store).approve(item, by="ana")
    with pytest.raises(AgentnbError, match="needs by="):
        anb.Inbox(store, loop=loop).approve(item, by=" ")
    with pytest.raises(AgentnbError, match="one item at a time"):
        anb.Inbox(store, loop=loop).approve([item, item], by="ana", arguments={"order_id": "1", "cents": 1})


def test_edited_arguments_are_schema_checked_and_recorded(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 1)
    inbox = anb.Inbox(store, loop=loop)
    (item,) = inbox.items()
    bad = inbox.approve(item, by="ana", arguments={"order_id": "0", "cents": "lots"})
    assert bad.applied == [] and bad.refused  # the edit does not fit the schema: nothing recorded
    good = inbox.approve(item, by="ana", arguments={"order_id": "0", "cents": 50}, then_run=True)
    assert good.applied
    assert anb.Run.resume("support-0", loop=loop).output == "done: refunded 50 cents on order 0"


def test_a_refused_decision_on_a_run_that_moved_on_lets_go_of_it(tmp_path: Path) -> None:
    store, loop = paused(tmp_path, 1)
    inbox = anb.Inbox(store, loop=loop)
    seen = inbox.items()
    assert inbox.approve(seen, by="ana").applied  # not carried on: the run waits to execute, nobody drives it
    assert inbox.approve(seen, by="ben").refused  # resumed to check, refused ...
    assert store.lease("support-0") is None or not store.lease("support-0").live  # ... and let go of
    assert anb.Run.resume("support-0", loop=loop).run().state is S.COMPLETED
