"""Durable checkpoints: seals, truncation, resume in another process, and crashes around a write's effect."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb.events import ApprovalRequested, ApprovalResolved, BaseEvent, CallValidated, RunStarted, ToolStarted

S = anb.LoopState
WORKER = Path(__file__).with_name("durable_worker.py")
KEY = "test-checkpoint-key"


def refund_loop(store: Any, **options: Any) -> anb.Loop:
    return anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store, **options)


def test_every_event_is_stored_as_it_happens_and_loads_back(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "c.db", key=KEY)
    run = refund_loop(store).start("Refund order 42")
    for _ in range(4):
        run.step()
        assert len(store.load(run.run_id)) == len(run.events)
    run.run()
    loaded = store.load(run.run_id)
    assert [e.seq for e in loaded] == list(range(len(run.events)))
    assert anb.Transcript(loaded).messages == run.messages
    assert store.runs()[0] == (run.run_id, "WAITING_APPROVAL")
    assert sqlite3.connect(tmp_path / "c.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _paused_db(tmp_path: Path) -> tuple[Path, str]:
    store = anb.SqliteStore(tmp_path / "c.db", key=KEY)
    run = refund_loop(store).start("Refund order 42").run()
    store.close()
    return tmp_path / "c.db", run.run_id


def test_a_tampered_checkpoint_is_refused(tmp_path: Path) -> None:
    db, run_id = _paused_db(tmp_path)
    con = sqlite3.connect(db)
    data = con.execute("SELECT data FROM events WHERE run_id=? AND seq=0", (run_id,)).fetchone()[0]
    assert "order 42" in data
    con.execute("UPDATE events SET data=? WHERE run_id=? AND seq=0", (data.replace("order 42", "order 43"), run_id))
    con.commit()
    with pytest.raises(anb.CheckpointError, match="event 0 was changed"):
        anb.Run.resume(run_id, loop=refund_loop(anb.SqliteStore(db, key=KEY)))


def test_a_truncated_checkpoint_is_refused(tmp_path: Path) -> None:
    db, run_id = _paused_db(tmp_path)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM events WHERE run_id=? AND seq=(SELECT MAX(seq) FROM events WHERE run_id=?)",
                (run_id, run_id))
    con.commit()
    with pytest.raises(anb.CheckpointError, match="truncated"):
        anb.SqliteStore(db, key=KEY).load(run_id)
    con.execute("DELETE FROM events WHERE run_id=? AND seq=3", (run_id,))
    con.commit()
    with pytest.raises(anb.CheckpointError, match="event 3 is missing"):
        anb.SqliteStore(db, key=KEY).load(run_id)


def test_the_wrong_key_is_refused(tmp_path: Path) -> None:
    db, run_id = _paused_db(tmp_path)
    with pytest.raises(anb.CheckpointError, match="seal"):
        anb.SqliteStore(db, key="another key").load(run_id)


def test_key_file_is_created_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTNB_CHECKPOINT_KEY", raising=False)
    key_file = tmp_path / "keys" / "checkpoint.key"
    anb.SqliteStore(tmp_path / "a.db", key_file=key_file)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and len(key_file.read_bytes()) == 64
    os.chmod(key_file, 0o644)
    with pytest.raises(anb.CheckpointError, match="readable by others"):
        anb.SqliteStore(tmp_path / "b.db", key_file=key_file)


def test_resume_rechecks_the_policy_and_the_schema(tmp_path: Path) -> None:
    db, run_id = _paused_db(tmp_path)

    @anb.tool(name="create_refund", approval=True, risk="write")
    def create_refund_v2(order_id: str, amount_cents: int, reason: str) -> dict[str, Any]:
        """Refund, now with a mandatory reason."""
        return {}

    changed = anb.Loop(model=anb.ScriptedModel.story("refund"),
                       tools=[anb.stories.tools("refund")[0], create_refund_v2], store=anb.SqliteStore(db, key=KEY))
    with pytest.raises(anb.ResumeError, match="the schema of 'create_refund' changed"):
        anb.Run.resume(run_id, loop=changed)
    with pytest.raises(anb.ResumeError, match="no longer fits the schema"):
        anb.Run.resume(run_id, loop=changed, allow_policy_change=True)
    headless = refund_loop(anb.SqliteStore(db, key=KEY), headless=True)
    with pytest.raises(anb.ResumeError, match="approval rules or headless mode"):
        anb.Run.resume(run_id, loop=headless)


def test_resume_mid_model_call_asks_again(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "c.db", key=KEY)
    first = refund_loop(store)
    first.lease_ttl = 0.3
    run = first.start("Refund order 42")
    run.run_until(lambda e: e.type == "ModelRequested" and e.turn == 2)
    with pytest.raises(anb.RunLocked, match="is being driven by"):  # the first driver's lease is live
        anb.Run.resume(run.run_id, loop=refund_loop(anb.SqliteStore(tmp_path / "c.db", key=KEY)))
    time.sleep(0.35)  # the first driver is gone (as after a crash) and its lease expired
    with pytest.raises(anb.RunLocked, match="take_over=True"):
        anb.Run.resume(run.run_id, loop=refund_loop(anb.SqliteStore(tmp_path / "c.db", key=KEY)))
    again = anb.Run.resume(run.run_id, loop=refund_loop(anb.SqliteStore(tmp_path / "c.db", key=KEY)), take_over=True)
    assert again.events[-1].type == "ModelRetried" and "process stopped" in again.events[-1].error
    assert again.run().state is S.WAITING_APPROVAL
    create = [e for e in again.events if e.type == "CallValidated"]
    assert [e.name for e in create] == ["get_order", "create_refund"]  # the script went on where it was


def worker(*args: str) -> dict[str, Any]:
    env = {**os.environ, "AGENTNB_CHECKPOINT_KEY": KEY}
    proc = subprocess.run([sys.executable, str(WORKER), *args], capture_output=True, text=True, timeout=120, env=env)
    if proc.returncode == -signal.SIGKILL:
        return {"killed": True}
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_resume_in_another_process_after_the_first_exited(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    first = subprocess.run(
        [sys.executable, "-c", (
            "import agentnb as anb, sys\n"
            f"store = anb.SqliteStore({str(db)!r})\n"
            "loop = anb.Loop(model=anb.ScriptedModel.story('refund'), tools=anb.stories.tools('refund'), store=store)\n"
            "run = loop.start('Refund order 42', run_id='run_durable').run()\n"
            "print(run.state.value)\n"
        )], capture_output=True, text=True, timeout=120, env={**os.environ, "AGENTNB_CHECKPOINT_KEY": KEY},
    )
    assert first.returncode == 0 and first.stdout.strip() == "WAITING_APPROVAL", first.stderr
    second = subprocess.run(
        [sys.executable, "-c", (
            "import agentnb as anb\n"
            f"store = anb.SqliteStore({str(db)!r})\n"
            "loop = anb.Loop(model=anb.ScriptedModel.story('refund'), tools=anb.stories.tools('refund'), store=store)\n"
            "run = anb.Run.resume('run_durable', loop=loop)\n"
            "run.approve(run.pending_approvals()[0].call_id, by='second process')\n"
            "print(run.run().output)\n"
        )], capture_output=True, text=True, timeout=120, env={**os.environ, "AGENTNB_CHECKPOINT_KEY": KEY},
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "Done: refund rf_42_1999 of $19.99 for order 42."
    events = anb.SqliteStore(db, key=KEY).load("run_durable")
    assert events[-1].type == "RunFinished" and events[-1].final is S.COMPLETED
    resolved = next(e for e in events if e.type == "ApprovalResolved")
    assert resolved.by == "second process"


@pytest.mark.parametrize("crash", ["before_effect", "after_effect", "after_outcome", "after_finished"])
def test_a_deduplicating_downstream_sees_exactly_one_effect_after_a_crash(tmp_path: Path, crash: str) -> None:
    db, down = str(tmp_path / "c.db"), str(tmp_path / "payments.db")
    assert worker("start", db, down, "dedupe", crash, "run_c").get("killed")
    out = worker("resume", db, down, "dedupe", crash, "run_c")
    assert out["state"] == "COMPLETED" and "Charged" in out["output"]
    assert list(out["effects"].values()) == [1]  # exactly one effect per idempotency key


@pytest.mark.parametrize(
    ("crash", "expected"),
    [
        ("before_effect", "outcome_unknown"),  # the intent was recorded; the effect may or may not have happened
        ("after_effect", "outcome_unknown"),
        ("after_outcome", "done"),  # outcome and ToolFinished are one transaction: stored, never re-run
        ("after_finished", "done"),
    ],
)
def test_a_plain_downstream_is_never_charged_twice(tmp_path: Path, crash: str, expected: str) -> None:
    db, down = str(tmp_path / "c.db"), str(tmp_path / "payments.db")
    assert worker("start", db, down, "plain", crash, "run_p").get("killed")
    out = worker("resume", db, down, "plain", crash, "run_p")
    if expected == "outcome_unknown":
        assert out["state"] == "WAITING_APPROVAL" and out["kinds"] == ["outcome_unknown"]
        assert sum(out["effects"].values()) == (0 if crash == "before_effect" else 1)  # no second effect
        reconciled = worker("resume", db, down, "plain", crash, "run_p", "reconcile")
        assert reconciled["state"] == "COMPLETED" and "reconciled" in reconciled["output"]
        assert sum(reconciled["effects"].values()) == (0 if crash == "before_effect" else 1)
    else:
        assert out["state"] == "COMPLETED" and sum(out["effects"].values()) == 1
        assert out["reused"] == [False]  # the stored result goes on; nothing is re-run or re-reported


def test_retrying_an_unknown_outcome_is_a_person_s_decision(tmp_path: Path) -> None:
    db, down = str(tmp_path / "c.db"), str(tmp_path / "payments.db")
    assert worker("start", db, down, "plain", "before_effect", "run_r").get("killed")
    out = worker("resume", db, down, "plain", "before_effect", "run_r", "retry")
    assert out["state"] == "COMPLETED" and sum(out["effects"].values()) == 1


@pytest.mark.parametrize("where", ["tool", "model"])
def test_a_driver_waiting_on_a_long_call_keeps_its_lease(tmp_path: Path, where: str) -> None:
    """A tool (or a model) that takes many lease lengths must not make its live driver look gone."""
    import threading

    started = threading.Event()

    @anb.tool
    def slow(n: int) -> int:
        """Take a while."""
        started.set()
        time.sleep(1.2)
        return n

    class SlowModel(anb.ScriptedModel):
        def respond(self, request: Any) -> Any:
            if request.turn == 1 and where == "model":
                started.set()
                time.sleep(1.2)
            return super().respond(request)

    script = [{"tool_calls": [{"name": "slow", "arguments": {"n": 1}}]}, {"text": "done"}]
    store = anb.SqliteStore(tmp_path / "r.db", key=b"k" * 32)
    run = anb.Loop(model=SlowModel(script), tools=[slow], store=store, lease_ttl=0.3).start("go")
    run.step()  # RunStarted: the run exists and holds its lease
    driver = threading.Thread(target=run.run)
    driver.start()
    assert started.wait(10)
    time.sleep(0.8)  # well past the lease's 0.3 s: without a heartbeat it would have lapsed
    other = anb.Loop(model=anb.ScriptedModel(script), tools=[slow], store=anb.SqliteStore(tmp_path / "r.db",
                                                                                           key=b"k" * 32))
    with pytest.raises(anb.RunLocked, match="is being driven by"):
        anb.Run.resume(run.run_id, loop=other, take_over=True)  # even take_over: the lease is live
    driver.join(20)
    assert run.state is anb.LoopState.COMPLETED


# -- a log sealed again by whoever holds the key: resume trusts the seals, not the decisions in the log --------


def _resealed(tmp_path: Path, edit: Callable[[list[BaseEvent]], list[BaseEvent]]) -> tuple[Path, str]:
    """A paused refund run, edited and written again with the key through the store's own API: every seal holds."""
    db, run_id = _paused_db(tmp_path)
    events = edit(anb.SqliteStore(db, key=KEY).load(run_id))
    forged = tmp_path / "forged.db"
    store = anb.SqliteStore(forged, key=KEY)
    for seq, event in enumerate(_rehomed(events, store)):
        store.append(replace(event, seq=seq))
    store.close()
    return forged, run_id


def _rehomed(events: list[BaseEvent], store: anb.SqliteStore) -> list[BaseEvent]:
    """The forgery names the new store as the run's home (the key holder can): else it starts no effect there."""
    first = events[0]
    assert isinstance(first, RunStarted)
    return [replace(first, settings={**first.settings, "store": store.store_id}), *events[1:]]


def _without_the_approval(events: list[BaseEvent]) -> list[BaseEvent]:
    validated = events[11]
    assert isinstance(validated, CallValidated) and validated.name == "create_refund" and validated.needs_approval
    assert isinstance(events[12], ApprovalRequested)
    return [*events[:11], replace(validated, needs_approval=False)]  # the requirement dropped, nobody asked


def test_resume_asks_for_the_approval_a_resealed_log_dropped(tmp_path: Path) -> None:
    db, run_id = _resealed(tmp_path, _without_the_approval)
    assert anb.SqliteStore(db, key=KEY).load(run_id)[-1].state is S.VALIDATING  # the seals hold: it loads
    run = anb.Run.resume(run_id, loop=refund_loop(anb.SqliteStore(db, key=KEY)))
    assert run.state is S.WAITING_APPROVAL and [c.name for c in run.pending_approvals()] == ["create_refund"]
    asked = run.events[-1]
    assert isinstance(asked, ApprovalRequested) and asked.name == "create_refund" and asked.kind == "approval"
    assert "recorded no approval" in (asked.note or "")
    assert anb.SqliteStore(db, key=KEY).load(run_id)[-1] == asked  # in the store before anything else happens
    assert run.run().state is S.WAITING_APPROVAL
    assert not any(isinstance(e, ToolStarted) and e.name == "create_refund" for e in run.events)  # the charge waits
    again = anb.Run.resume(run_id, loop=refund_loop(anb.SqliteStore(db, key=KEY)))  # a second resume asks no more
    assert len(again.events) == len(run.events) and again.paused
    again.approve(again.pending_approvals()[0].call_id, by="lead")
    assert again.run().state is S.COMPLETED
    assert [e.name for e in again.events if isinstance(e, ToolStarted)] == ["get_order", "create_refund"]


def test_resume_asks_when_the_policy_now_requires_approval(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "c.db", key=KEY)
    run = refund_loop(store).start("Refund order 42")
    run.run_until(lambda e: isinstance(e, CallValidated))  # get_order: a read, no approval needed when validated
    assert run.state is S.VALIDATING and not run.view.calls[run.events[-1].call_id].needs_approval
    run._leases.let_go()  # the first driver stops here
    strict = refund_loop(anb.SqliteStore(tmp_path / "c.db", key=KEY), approval=lambda call, rs: True)
    resumed = anb.Run.resume(run.run_id, loop=strict, allow_policy_change=True)
    assert resumed.paused and [c.name for c in resumed.pending_approvals()] == ["get_order"]
    assert not any(isinstance(e, ToolStarted) for e in resumed.events)


def _a_resolution_never_asked_for(call_id: str | None) -> Callable[[list[BaseEvent]], list[BaseEvent]]:
    def edit(events: list[BaseEvent]) -> list[BaseEvent]:
        asked = events[12]
        assert isinstance(asked, ApprovalRequested)
        head = _without_the_approval(events) if call_id is None else events[:13]
        resolved = ApprovalResolved(seq=len(head), ts=asked.ts, run_id=asked.run_id, turn=asked.turn,
                                    state=S.EXECUTING, approval_id=asked.approval_id,
                                    call_id=call_id or asked.call_id, decision="approved", by="nobody")
        return [*head, resolved]
    return edit


@pytest.mark.parametrize(("call_id", "says"), [(None, "not allowed in VALIDATING"),
                                               ("call_nope", "'call_nope' is not a call of this turn")])
def test_resume_refuses_a_resolution_never_asked_for_naming_the_event(tmp_path: Path, call_id: str | None,
                                                                      says: str) -> None:
    db, run_id = _resealed(tmp_path, _a_resolution_never_asked_for(call_id))
    seq = len(anb.SqliteStore(db, key=KEY).load(run_id)) - 1
    with pytest.raises(anb.CheckpointError, match=rf"event {seq} \(ApprovalResolved\)") as caught:
        anb.Run.resume(run_id, loop=refund_loop(anb.SqliteStore(db, key=KEY)))
    assert says in str(caught.value) and isinstance(caught.value.__cause__, anb.TranscriptError)


def test_resume_asks_first_and_the_turn_s_other_calls_wait_for_the_answer(tmp_path: Path) -> None:
    refund = {"name": "create_refund", "arguments": {"order_id": "42", "amount_cents": 500}}
    script = [{"tool_calls": [{"name": "get_order", "arguments": {"order_id": "42"}}, refund]}, {"text": "done"}]
    store = anb.SqliteStore(tmp_path / "c.db", key=KEY)
    loop = anb.Loop(model=anb.ScriptedModel(script), tools=anb.stories.tools("refund"), store=store)
    first = loop.start("Refund order 42")
    first.run_until(lambda e: isinstance(e, CallValidated) and e.name == "create_refund")  # nothing started yet
    events = [replace(e, needs_approval=False) if isinstance(e, CallValidated) else e for e in first.events]
    forged = anb.SqliteStore(tmp_path / "forged.db", key=KEY)
    for event in _rehomed(events, forged):
        forged.append(event)
    resumed = anb.Run.resume(first.run_id, loop=anb.Loop(model=anb.ScriptedModel(script), store=forged,
                                                         tools=anb.stories.tools("refund")))
    assert [c.name for c in resumed.pending_approvals()] == ["create_refund"]
    assert resumed.run().state is S.WAITING_APPROVAL and not any(isinstance(e, ToolStarted) for e in resumed.events)
    resumed.approve(resumed.pending_approvals()[0].call_id)
    assert resumed.run().state is S.COMPLETED
    assert sorted(e.name for e in resumed.events if isinstance(e, ToolStarted)) == ["create_refund", "get_order"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_worker_starts_its_own_lease_heartbeat() -> None:
    """A child has none of its parent's threads: its first busy run must start a heartbeat of its own."""
    from agentnb._driver.lease import HEARTBEAT

    class Keeper:
        ttl = 0.2

        def __init__(self) -> None:
            self.beats = 0

        def beat(self) -> None:
            self.beats += 1

    def beaten(keeper: Keeper) -> bool:  # a beat within 10 s, however slowly a loaded machine runs the thread
        deadline = time.monotonic() + 10
        while not keeper.beats and time.monotonic() < deadline:
            time.sleep(0.01)
        return keeper.beats > 0

    parent = Keeper()
    HEARTBEAT.enter(parent)  # type: ignore[arg-type]
    assert beaten(parent)
    HEARTBEAT.busy.pop(id(parent), None)
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if its heartbeat beat
        child = Keeper()
        HEARTBEAT.enter(child)  # type: ignore[arg-type]
        os._exit(0 if beaten(child) else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
