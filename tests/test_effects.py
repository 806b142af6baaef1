"""Exactly-once effects, tried the way a payments engineer would: a downstream that counts executions.

The matrix: {duplicate in one turn, an identical call in a later turn (default key, declared key,
``idempotency="call"``), a timeout while queued, a timeout while a write runs, the database locked, the disk full}
x {``step()``, ``run()``} x {MemoryStore, SqliteStore where it applies}. Each cell asserts how many times the
downstream ran, the result status the model saw, and that the stored transcript equals the one in memory. The
cross-process cells (a resume during a running write, two processes resuming one run, two approvals racing, a
deleted ledger row) use real subprocesses and a real SQLite file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

import agentnb as anb
from agentnb._states import LoopState as S
from agentnb.events import event_to_json

KEY = "effects-test-key-01"
MODES = ["step", "run"]
STORES = ["memory", "sqlite"]


class Downstream:
    """A payment system that counts every execution, and how many distinct charges it holds by key."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, str, int]] = []
        self.lock = threading.Lock()

    def charge(self, key: str | None, order_id: str, cents: int) -> None:
        with self.lock:
            self.calls.append((key, order_id, cents))

    @property
    def executions(self) -> int:
        return len(self.calls)


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[Callable[[str], anb.Store]]:
    opened: list[Any] = []

    def make(kind: str) -> anb.Store:
        store: anb.Store = anb.MemoryStore() if kind == "memory" else anb.SqliteStore(tmp_path / "e.db", key=KEY)
        opened.append(store)
        return store

    yield make
    for s in opened:
        if hasattr(s, "close"):
            s.close()


def drive(run: anb.Run, mode: str) -> anb.Run:
    if mode == "run":
        return run.run()
    while run.step() is not None:
        pass
    return run


def same_as_stored(run: anb.Run) -> None:
    stored = run.store.load(run.run_id)
    assert [event_to_json(e) for e in stored] == [event_to_json(e) for e in run.events]


def charge_tool(down: Downstream, **options: Any) -> anb.Tool:
    @anb.tool(risk="write", approval=False, **options)
    def charge(ctx: anb.ToolContext, order_id: str, cents: int) -> str:
        """Charge a card."""
        down.charge(ctx.idempotency_key, order_id, cents)
        return f"charged {cents} cents for order {order_id}"

    return charge


CHARGE = {"name": "charge", "arguments": {"order_id": "42", "cents": 1999}}


def statuses(run: anb.Run) -> list[str]:
    return [e.status for e in run.events if e.type == "ToolFinished"]


# -- duplicates ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("mode", MODES)
def test_the_same_write_twice_in_one_turn_runs_once(mode: str, kind: str, make_store: Any) -> None:
    down = Downstream()
    model = anb.ScriptedModel([{"tool_calls": [CHARGE, CHARGE]}, {"text": "done"}])
    run = drive(anb.Loop(model=model, tools=[charge_tool(down)], store=make_store(kind)).start("charge"), mode)
    assert run.state is S.COMPLETED and down.executions == 1
    first, second = [e for e in run.events if e.type == "ToolFinished"]
    assert (first.status, second.status) == ("ok", "duplicate") and not first.reused and not second.reused
    assert second.duplicate_of == first.call_id and first.idempotency_key == second.idempotency_key
    sent = run.messages[-2].tool_results  # what the model read
    assert "was not run again" in sent[1].content and first.call_id in sent[1].content
    same_as_stored(run)


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("options", "second", "executions", "seen"), [
    ({}, CHARGE, 1, ["ok", "duplicate"]),  # default key: operation + tool + canonical arguments
    ({"idempotency_key": lambda args: f"order-{args['order_id']}"},  # a declared business key
     {"name": "charge", "arguments": {"order_id": "42", "cents": 2500}}, 1, ["ok", "duplicate"]),
    ({"idempotency": "call"}, CHARGE, 2, ["ok", "ok"]),  # identical calls are distinct effects
])
def test_an_identical_call_in_a_later_turn(
    mode: str, kind: str, options: dict[str, Any], second: dict[str, Any], executions: int, seen: list[str],
    make_store: Any,
) -> None:
    down = Downstream()
    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"tool_calls": [second]}, {"text": "done"}])
    run = drive(anb.Loop(model=model, tools=[charge_tool(down, **options)], store=make_store(kind)).start("go"), mode)
    assert run.state is S.COMPLETED and down.executions == executions and statuses(run) == seen
    same_as_stored(run)


@pytest.mark.parametrize("mode", MODES)
def test_duplicates_across_runs_of_one_operation(mode: str, make_store: Any) -> None:
    down = Downstream()
    store = make_store("sqlite")
    tool = charge_tool(down)
    for _ in range(2):
        model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "done"}])
        run = drive(anb.Loop(model=model, tools=[tool], store=store).start("go", operation_id="order-42"), mode)
    assert down.executions == 1 and statuses(run) == ["duplicate"]


@pytest.mark.parametrize("mode", MODES)
def test_parallel_duplicates_with_a_slow_write(mode: str) -> None:
    down = Downstream()

    @anb.tool(risk="write", approval=False)
    def charge(order_id: str, cents: int) -> str:
        """Charge slowly."""
        time.sleep(0.2)
        down.charge(None, order_id, cents)
        return "charged"

    model = anb.ScriptedModel([{"tool_calls": [CHARGE, CHARGE, CHARGE]}, {"text": "done"}])
    run = drive(anb.Loop(model=model, tools=[charge], budget=anb.Budget(max_parallel=8)).start("go"), mode)
    assert down.executions == 1 and statuses(run) == ["ok", "duplicate", "duplicate"]


# -- time ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_call_waiting_for_a_worker_is_not_timing_out(mode: str) -> None:
    ran: list[float] = []

    @anb.tool(timeout=0.5)
    def lookup(n: int) -> int:
        """Look up slowly."""
        time.sleep(0.15)
        ran.append(time.monotonic())
        return n

    calls = [{"name": "lookup", "arguments": {"n": i}} for i in range(8)]
    model = anb.ScriptedModel([{"tool_calls": calls}, {"text": "done"}])
    run = drive(anb.Loop(model=model, tools=[lookup], budget=anb.Budget(max_parallel=2)).start("go"), mode)
    assert statuses(run) == ["ok"] * 8 and len(ran) == 8  # 8 x 0.15 s on 2 workers: 0.6 s queued at most
    ended = time.monotonic()
    time.sleep(0.3)
    assert max(ran) <= ended  # nothing ran after the run ended


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("mode", MODES)
def test_a_write_past_its_timeout_is_an_unknown_outcome_never_a_timeout(mode: str, kind: str, make_store: Any) -> None:
    down = Downstream()
    release = threading.Event()

    @anb.tool(risk="write", approval=False, timeout=0.2)
    def charge(ctx: anb.ToolContext, order_id: str, cents: int) -> str:
        """Charge, slowly."""
        release.wait(5)
        down.charge(ctx.idempotency_key, order_id, cents)
        return "charged late"

    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "done"}])
    run = drive(anb.Loop(model=model, tools=[charge], store=make_store(kind)).start("go"), mode)
    assert run.state is S.WAITING_APPROVAL and statuses(run) == []
    (call,) = run.pending_approvals()
    assert call.kind == "outcome_unknown"
    request = [e for e in run.events if e.type == "ApprovalRequested"][-1]
    assert "still running when its timeout" in (request.note or "")
    release.set()
    deadline = time.monotonic() + 5
    while getattr(run.store.effect(call.idempotency_key or ""), "status", None) != "done":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    run.approve(call.call_id, by="ops")  # "retry": the ledger now knows the late outcome, so nothing runs again
    drive(run, mode)
    assert run.state is S.COMPLETED and down.executions == 1
    finished = [e for e in run.events if e.type == "ToolFinished"]
    assert [(e.status, e.reused, e.content) for e in finished] == [("ok", True, "charged late")]
    same_as_stored(run)


@pytest.mark.parametrize("mode", MODES)
def test_a_read_past_its_timeout_is_a_timeout_and_the_deadline_bounds_a_running_tool(mode: str) -> None:
    @anb.tool(timeout=5)
    def slow() -> str:
        """Slow."""
        time.sleep(1.5)
        return "late"

    model = anb.ScriptedModel([{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "done"}])
    t0 = time.monotonic()
    run = drive(anb.Loop(model=model, tools=[slow], budget=anb.Budget(deadline_s=0.4)).start("go"), mode)
    assert time.monotonic() - t0 < 1.2  # the deadline (0.4 s), not the tool's 5 s timeout, bounded it
    (finished,) = [e for e in run.events if e.type == "ToolFinished"]
    assert finished.status == "timeout" and "deadline" in finished.content


@pytest.mark.parametrize("mode", MODES)
def test_an_async_tool_that_blocks_its_loop_cannot_time_the_others_out(mode: str) -> None:
    import asyncio

    @anb.tool(timeout=2)
    async def blocker() -> str:
        """Block the event loop (a bug: time.sleep in async code)."""
        time.sleep(0.6)
        return "blocked"

    @anb.tool(timeout=0.4)
    async def quick() -> str:
        """Quick."""
        await asyncio.sleep(0.05)
        return "quick"

    calls = [{"name": "blocker", "arguments": {}}, {"name": "quick", "arguments": {}}]
    model = anb.ScriptedModel([{"tool_calls": calls}, {"text": "done"}])
    run = drive(anb.Loop(model=model, tools=[blocker, quick], budget=anb.Budget(max_parallel=4)).start("go"), "run")
    assert statuses(run) == ["ok", "ok"]


# -- store faults --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_locked_database_leaves_the_run_equal_to_its_checkpoint(mode: str, tmp_path: Path) -> None:
    down = Downstream()
    store = anb.SqliteStore(tmp_path / "e.db", key=KEY, timeout=0.2)
    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "done"}])
    run = anb.Loop(model=model, tools=[charge_tool(down)], store=store).start("go")
    run.run_until(lambda e: e.type == "ToolStarted")
    other = sqlite3.connect(tmp_path / "e.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(anb.CheckpointError, match="database is locked") as err:
            drive(run, mode)
        assert isinstance(err.value.__cause__, sqlite3.OperationalError)
        same_as_stored(run)  # the Run did not move ahead of its checkpoint
        assert run.state is S.EXECUTING
    finally:
        other.execute("ROLLBACK")
        other.close()
    drive(run, mode)  # the fault cleared: it carries on from there
    assert run.state is S.COMPLETED and down.executions == 1 and statuses(run) == ["ok"]
    same_as_stored(run)


@pytest.mark.parametrize("mode", MODES)
def test_a_full_database_names_the_real_cause_and_loses_nothing(mode: str, tmp_path: Path) -> None:
    down = Downstream()
    store = anb.SqliteStore(tmp_path / "e.db", key=KEY)
    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "x" * 20000}])
    run = anb.Loop(model=model, tools=[charge_tool(down)], store=store).start("go")
    run.run_until(lambda e: e.type == "ToolStarted")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 1}")  # SQLite's own "database or disk is full"
    with pytest.raises(anb.CheckpointError, match="full") as err:
        drive(run, mode)
    assert "cannot rollback" not in str(err.value)
    same_as_stored(run)
    store._db.execute("PRAGMA max_page_count = 1073741823")
    drive(run, mode)
    assert run.state is S.COMPLETED and down.executions == 1
    same_as_stored(run)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.decode().strip()}); the max_page_count test "
                    "covers SQLite's full-database path")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk(small_disk: Path) -> None:
    down = Downstream()
    store = anb.SqliteStore(small_disk / "e.db", key=KEY)
    filler = small_disk / "filler"
    big = {"name": "charge", "arguments": {"order_id": "4" * 20000, "cents": 1}}
    model = anb.ScriptedModel([{"tool_calls": [big]}, {"text": "done"}])
    run = anb.Loop(model=model, tools=[charge_tool(down)], store=store).start("go")
    run.run_until(lambda e: e.type == "ToolStarted")
    free = os.statvfs(small_disk)
    filler.write_bytes(b"\0" * max(0, free.f_bavail * free.f_frsize - 4096))
    with pytest.raises(anb.CheckpointError) as err:
        run.run()
    assert "full" in str(err.value) and "cannot rollback" not in str(err.value)
    same_as_stored(run)
    filler.unlink()
    run.run()
    assert run.state is S.COMPLETED and down.executions == 1
    same_as_stored(run)
    store.close()


# -- callbacks, cancel, BaseException ------------------------------------------------------------------------


@pytest.mark.parametrize("headless", [False, True])
def test_a_policy_that_raises_means_a_person_must_decide(headless: bool) -> None:
    def policy(call: Any, state: Any) -> bool:
        raise KeyError("amount_cents")

    model = anb.ScriptedModel([{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                               {"text": "done"}])
    run = anb.Loop(model=model, tools=anb.stories.tools("weather"), approval=policy, headless=headless).start("w").run()
    request = next(e for e in run.events if e.type == "ApprovalRequested")
    assert "loop's approval policy raised KeyError" in (request.note or "")
    if headless:
        resolved = next(e for e in run.events if e.type == "ApprovalResolved")
        assert run.state is S.COMPLETED and resolved.decision == "denied" and "raised KeyError" in (resolved.note or "")
    else:
        assert run.state is S.WAITING_APPROVAL


class Order(pydantic.BaseModel):
    order_id: str

    @pydantic.field_validator("order_id")
    @classmethod
    def check(cls, v: str) -> str:
        raise TypeError("bad validator")


def test_a_key_function_or_a_validator_that_raises_rejects_the_call() -> None:
    down = Downstream()

    @anb.tool
    def lookup(order: Order) -> str:
        """Look up."""
        return "found"

    calls = [{"name": "charge", "arguments": {"order_id": "42", "cents": 1}},
             {"name": "lookup", "arguments": {"order": {"order_id": "1"}}}]
    model = anb.ScriptedModel([{"tool_calls": calls}, {"text": "done"}])
    tool = charge_tool(down, idempotency_key=lambda args: args["missing"])
    run = anb.Loop(model=model, tools=[tool, lookup]).start("go").run()
    rejected = {e.name: e for e in run.events if e.type == "CallRejected"}
    assert run.state is S.COMPLETED and down.executions == 0
    assert rejected["charge"].reason == "idempotency_key" and "KeyError" in rejected["charge"].message
    assert rejected["lookup"].reason == "schema" and "TypeError: bad validator" in rejected["lookup"].message


def test_cancel_from_another_thread_ends_the_run_cleanly() -> None:
    for _ in range(300):  # the race showed in 87 of 300 trials before
        done: list[str] = []
        work = _worker_tool(done)

        turns: list[Any] = [{"tool_calls": [{"name": "work", "arguments": {"n": i}}]} for i in range(60)]
        model = anb.ScriptedModel([*turns, {"text": "done"}])
        run = anb.Loop(model=model, tools=[work], budget=anb.Budget(max_turns=500, max_repeats=1000)).start("go")
        errors: list[BaseException] = []
        driver = threading.Thread(target=_catch, args=(run.run, errors))
        driver.start()
        time.sleep(0.003)
        run.cancel("stop now")
        driver.join(10)
        assert not errors and run.state is S.CANCELLED
        finished = [e for e in run.events if e.type == "ToolFinished" and e.status == "ok"]
        assert len(finished) == len(done)  # every call that ran has its result recorded


def test_cancel_lets_go_of_a_call_in_flight_only_when_its_tool_says_it_can() -> None:
    """``Tool.cancellable`` is the port's one hook: such a call ends with the run; any other is waited for."""
    import asyncio
    import dataclasses
    from typing import ClassVar

    @dataclasses.dataclass(frozen=True)
    class Cancellable(anb.Tool):
        cancellable: ClassVar[bool] = True

    seen: list[str] = []

    @anb.tool
    async def wait_for_ever() -> str:
        """Wait."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "never"

    @anb.tool
    async def nap() -> str:
        """Sleep a little."""
        await asyncio.sleep(0.5)
        return "rested"

    hung = Cancellable(**{f.name: getattr(wait_for_ever, f.name) for f in dataclasses.fields(wait_for_ever) if f.init})
    for tool, name, status in [(hung, "wait_for_ever", "error"), (nap, "nap", "ok")]:
        run = anb.Loop(model=anb.ScriptedModel([{"tool_calls": [{"name": name, "arguments": {}}]}, {"text": "x"}]),
                       tools=[tool]).start("go")
        errors: list[BaseException] = []
        driver = threading.Thread(target=_catch, args=(run.run, errors), daemon=True)
        driver.start()
        deadline = time.monotonic() + 30
        while not any(e.type == "ToolStarted" for e in run.events) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        run.cancel("stop now")
        driver.join(30)
        assert not driver.is_alive() and not errors and run.state is S.CANCELLED
        (finished,) = [e for e in run.events if e.type == "ToolFinished"]
        assert finished.status == status, finished.content
    assert seen == ["cancelled"]  # the cancellable read's task was cancelled, not merely left behind


def _worker_tool(done: list[str]) -> anb.Tool:
    @anb.tool
    def work(n: int) -> int:
        """Work."""
        time.sleep(0.002)
        done.append(str(n))
        return n

    return work


def _catch(fn: Callable[[], Any], errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test asserts there were none
        errors.append(exc)


def test_base_exceptions_from_tools() -> None:
    import asyncio

    @anb.tool
    def exits() -> str:
        """Exit."""
        raise SystemExit(3)

    @anb.tool
    async def cancelled() -> str:
        """Get cancelled."""
        raise asyncio.CancelledError()

    calls = [{"name": "exits", "arguments": {}}, {"name": "cancelled", "arguments": {}}]
    run = anb.Loop(model=anb.ScriptedModel([{"tool_calls": calls}, {"text": "ok"}]), tools=[exits, cancelled])
    done = run.start("go").run()
    assert done.state is S.COMPLETED
    assert [(e.status, e.error_type) for e in done.events if e.type == "ToolFinished"] == [
        ("error", "SystemExit"), ("error", "CancelledError")]


@pytest.mark.parametrize("mode", MODES)
def test_keyboard_interrupt_pauses_cleanly_and_keeps_finished_results(mode: str) -> None:
    down = Downstream()

    @anb.tool
    def read(n: int) -> int:
        """Read."""
        return n

    @anb.tool(risk="write", approval=False)
    def charge(order_id: str, cents: int) -> str:
        """Charge, then the user hits interrupt."""
        down.charge(None, order_id, cents)
        raise KeyboardInterrupt

    calls = [{"name": "read", "arguments": {"n": 1}}, CHARGE]
    run = anb.Loop(model=anb.ScriptedModel([{"tool_calls": calls}, {"text": "ok"}]), tools=[read, charge]).start("go")
    with pytest.raises(KeyboardInterrupt):
        drive(run, mode)
    assert run.state is S.WAITING_APPROVAL and down.executions == 1
    assert statuses(run) == ["ok"]  # the read's result is kept
    (call,) = run.pending_approvals()
    assert call.kind == "outcome_unknown" and call.name == "charge"
    run.submit_result(call.call_id, "charged (reconciled)", by="ops")
    drive(run, mode)
    assert run.state is S.COMPLETED and down.executions == 1


# -- processes -----------------------------------------------------------------------------------------------

WORKER = r'''
import json, os, sys, time, sqlite3
import agentnb as anb
db, down_path, action, run_id = sys.argv[1:5]
down = sqlite3.connect(down_path, isolation_level=None, timeout=10)
down.execute("CREATE TABLE IF NOT EXISTS charges (key TEXT, at REAL)")

@anb.tool(risk="write", approval=True)
def charge(ctx: anb.ToolContext, order_id: str, cents: int) -> str:
    """Charge slowly."""
    print("WRITING", flush=True)
    hold = sys.argv[5] if len(sys.argv) > 5 else "0"
    if hold.startswith("until:"):  # the test says when the write may finish: no race against the clock
        deadline = time.monotonic() + 60
        while not os.path.exists(hold[6:]) and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        time.sleep(float(hold))
    down.execute("INSERT INTO charges VALUES (?, ?)", (ctx.idempotency_key, time.time()))
    return "charged"

store = anb.SqliteStore(db, key="effects-test-key-01")
model = anb.ScriptedModel([{"tool_calls": [{"name": "charge", "arguments": {"order_id": "42", "cents": 1999}}]},
                           {"text": "done"}])
loop = anb.Loop(model=model, tools=[charge], store=store, lease_ttl=2.0)
out = {}
try:
    if action == "start":
        run = loop.start("go", run_id=run_id).run()
    else:
        run = anb.Run.resume(run_id, loop=loop)
        if action in ("approve", "approve_run"):
            print("READY", flush=True)
            sys.stdin.readline()
            run.approve(run.pending_approvals()[0].call_id, by=str(sys.argv[6]))
            run.run()
        elif action == "run":
            run.run()
    out = {"state": run.state.value}
except anb.AgentnbError as exc:
    out = {"error": type(exc).__name__, "message": str(exc), "state": run.state.value if "run" in dir() else None}
out["charges"] = down.execute("SELECT count(*) FROM charges").fetchone()[0]
print(json.dumps(out), flush=True)
'''


def _proc(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / "e.db"), str(tmp_path / "down.db"), *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_two_simultaneous_approvals_have_exactly_one_winner(tmp_path: Path) -> None:
    assert _result(_proc(tmp_path, "start", "run_ap"))["state"] == "WAITING_APPROVAL"
    release = tmp_path / "release"
    procs = [_proc(tmp_path, "approve", "run_ap", f"until:{release}", who) for who in ("alice", "bob")]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "READY"
    for p in procs:  # both press Approve at once
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    # the winner's write holds until the loser has its answer, however slowly either process runs
    deadline = time.monotonic() + 60
    while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.02)
    release.touch()
    results = [_result(p) for p in procs]
    winners = [r for r in results if "error" not in r]
    losers = [r for r in results if "error" in r]
    assert len(winners) == 1 and len(losers) == 1, results
    assert losers[0]["error"] == "ApprovalError" and "another driver" in losers[0]["message"]
    assert losers[0]["state"] in ("EXECUTING", "COMPLETED", "WAITING_APPROVAL")  # reloaded from the store
    assert winners[0]["state"] == "COMPLETED" and winners[0]["charges"] == 1
    events = anb.SqliteStore(tmp_path / "e.db", key=KEY).load("run_ap")
    assert [e.type for e in events].count("ApprovalResolved") == 1


def test_resume_while_another_process_runs_a_write_is_refused(tmp_path: Path) -> None:
    assert _result(_proc(tmp_path, "start", "run_rw"))["state"] == "WAITING_APPROVAL"
    release = tmp_path / "release"
    first = _proc(tmp_path, "approve", "run_rw", f"until:{release}", "alice")  # approves, then runs a write
    assert first.stdout is not None and first.stdout.readline().strip() == "READY"
    assert first.stdin is not None
    first.stdin.write("go\n")
    first.stdin.flush()
    assert first.stdout.readline().strip() == "WRITING"  # alice's write is running now, until released
    second = _result(_proc(tmp_path, "run", "run_rw"))
    release.touch()
    assert second["error"] == "RunLocked" and "is being driven by" in second["message"]
    assert _result(first)["state"] == "COMPLETED"
    assert sqlite3.connect(tmp_path / "down.db").execute("SELECT count(*) FROM charges").fetchone()[0] == 1


def test_a_deleted_ledger_row_is_refused_at_resume(tmp_path: Path) -> None:
    down = Downstream()
    store = anb.SqliteStore(tmp_path / "e.db", key=KEY)
    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "done"}])
    loop = anb.Loop(model=model, tools=[charge_tool(down)], store=store, lease_ttl=0.2)
    run = loop.start("go")
    run.run_until(lambda e: e.type == "ToolFinished")  # charged; the process "dies" here
    time.sleep(0.25)
    raw = sqlite3.connect(tmp_path / "e.db", isolation_level=None)
    assert raw.execute("DELETE FROM ledger WHERE op='done'").rowcount == 1
    raw.close()
    with pytest.raises(anb.CheckpointError, match="effect ledger"):
        anb.Run.resume(run.run_id, loop=loop, store=anb.SqliteStore(tmp_path / "e.db", key=KEY), take_over=True)
    assert down.executions == 1


def test_a_refused_resume_leaves_no_lease_behind(tmp_path: Path) -> None:
    down = Downstream()
    store = anb.SqliteStore(tmp_path / "e.db", key=KEY)
    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "done"}])
    run = anb.Loop(model=model, tools=[charge_tool(down)], store=store, lease_ttl=0.2).start("go")
    run.run_until(lambda e: e.type == "ToolStarted")  # the driver "dies" holding the run
    time.sleep(0.25)

    @anb.tool(risk="write", approval=False)
    def charge(order_id: str, cents: int, note: str = "") -> str:  # another schema: the policy changed
        """Charge."""
        return "x"

    other = anb.Loop(model=anb.ScriptedModel([{"text": "done"}]), tools=[charge], store=store)
    with pytest.raises(anb.ResumeError):
        anb.Run.resume(run.run_id, loop=other, take_over=True)
    assert store.lease(run.run_id).owner == run._leases.owner  # untouched: the refused resume took nothing
    again = anb.Run.resume(run.run_id, loop=anb.Loop(model=model, tools=[charge_tool(down)], store=store),
                           take_over=True)
    assert again.run().state is S.COMPLETED and down.executions == 1
