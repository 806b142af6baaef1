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
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb

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
