"""Forks never repeat an effect: "what if" on a run that already charged a card, tried as a payments engineer would.

A downstream counts every execution of ``charge``. The parent charges once; forks of it -- at any point, under
every effect policy, on every store, racing each other, killed mid-write -- must never charge that order again,
and say so on the event (``ToolFinished.effect``), in ``frames.calls()`` and on the debugger's card. A write the
parent never made follows the fork's policy: ``ask`` pauses for a person, ``simulate`` runs the tool's fake (or
refuses), ``run`` runs it -- once, across every fork of the operation.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger.cards import CARDS
from agentnb._states import LoopState as S
from agentnb.events import ApprovalRequested, ToolFinished
from agentnb.exceptions import AgentnbError

KEY = "fork-effects-test-key-01"
HERE = Path(__file__).parent
CHARGE = {"name": "charge", "arguments": {"order_id": "42", "cents": 1999}}
POLICIES = ["ask", "simulate", "run"]
STORES = ["memory", "sqlite", "postgres"]


class Downstream:
    """A payment system that counts every execution (and every simulated one, apart)."""

    def __init__(self) -> None:
        self.charges: list[tuple[str, int]] = []
        self.simulated: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def tool(self, *, simulator: bool = True) -> anb.Tool:
        def fake(order_id: str, cents: int) -> str:
            self.simulated.append((order_id, cents))
            return f"(simulated) would charge {cents} cents for order {order_id}"

        @anb.tool(risk="write", approval=False, simulate=fake if simulator else None)
        def charge(order_id: str, cents: int) -> str:
            """Charge a card."""
            with self.lock:
                self.charges.append((order_id, cents))
            return f"charged {cents} cents for order {order_id}"

        return charge


@pytest.fixture
def make_store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], anb.Store]]:
    opened: list[Any] = []

    def make(kind: str) -> anb.Store:
        store: anb.Store
        if kind == "memory":
            store = anb.MemoryStore()
        elif kind == "sqlite":
            store = anb.SqliteStore(tmp_path / "f.db", key=KEY)
        else:
            store = anb.PostgresStore(request.getfixturevalue("pg_dsn"), key=KEY,
                                      schema=request.getfixturevalue("pg_schema"))
        opened.append(store)
        return store

    yield make
    for s in opened:
        if hasattr(s, "close"):
            s.close()


def parent_run(down: Downstream, store: anb.Store, **tool: Any) -> anb.Run:
    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "done"}])
    run = anb.Loop(model=model, tools=[down.tool(**tool)], store=store).start("charge order 42").run()
    assert run.state is S.COMPLETED and down.charges == [("42", 1999)]
    return run


def finished(run: anb.Run) -> list[ToolFinished]:
    return [e for e in run.events if isinstance(e, ToolFinished)]


def first_call(run: anb.Run) -> str:
    return finished(run)[0].call_id


# -- the example: the charge runs once across the parent and any number of forks ----------------------


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("effects", POLICIES)
def test_a_fork_never_charges_again_what_its_parent_charged(effects: str, kind: str, make_store: Any) -> None:
    down = Downstream()
    parent = parent_run(down, make_store(kind))
    forks = [parent.fork(at=1, effects=effects).run() for _ in range(3)]
    forks.append(forks[0].fork(at=1, effects=effects).run())  # a fork of a fork: still the same operation
    assert down.charges == [("42", 1999)] and down.simulated == []
    for fork in forks:
        assert fork.state is S.COMPLETED and fork.operation_id == parent.operation_id
        (ev,) = finished(fork)
        assert (ev.status, ev.effect, ev.effect_run, ev.effect_call) == (
            "duplicate", "inherited", parent.run_id, first_call(parent))
        seen = fork.messages[-2].tool_results[0].content  # what the model read
        assert seen.startswith(f"Already done in run {parent.run_id} by call {first_call(parent)}")
        assert "charged 1999 cents for order 42" in seen
        calls = fork.transcript.frames.calls()
        assert calls["effect"].tolist() == ["inherited"] and calls["effect_run"].tolist() == [parent.run_id]
        assert "inherited" in CARDS[ToolFinished].summary(ev)
    assert finished(parent)[0].effect == "happened"


def test_the_fork_is_stored_with_its_lineage(tmp_path: Path) -> None:
    down = Downstream()
    store = anb.SqliteStore(tmp_path / "f.db", key=KEY)
    parent = parent_run(down, store)
    fork = parent.fork(at=1, effects="simulate", reads="reuse").run()
    first = store.load(fork.run_id)[0]
    lineage = first.settings["fork"]  # type: ignore[attr-defined]
    assert lineage == {"parent": parent.run_id, "at": 1, "effects": "simulate", "reads": "reuse", "rerun": [],
                       "results": []}
    assert first.settings["operation_id"] == parent.operation_id  # type: ignore[attr-defined]
    assert f"fork of {parent.run_id}" in CARDS[type(first)].summary(first)


# -- a write the parent never made ------------------------------------------------------------------------


def edited_fork(parent: anb.Run, **options: Any) -> anb.Run:
    return parent.fork(arguments={first_call(parent): {"order_id": "42", "cents": 500}}, **options).run()


@pytest.mark.parametrize("kind", STORES)
def test_ask_pauses_a_new_write_for_a_person_and_runs_it_once_approved(kind: str, make_store: Any) -> None:
    down = Downstream()
    parent = parent_run(down, make_store(kind))
    fork = edited_fork(parent)  # ask is the default for forks
    assert fork.state is S.WAITING_APPROVAL and down.charges == [("42", 1999)]
    asked = [e for e in fork.events if isinstance(e, ApprovalRequested)][-1]
    assert asked.kind == "fork_effect" and asked.note is not None and parent.run_id in asked.note
    fork.approve(asked.call_id, by="ana")
    fork.run()
    assert fork.state is S.COMPLETED and down.charges == [("42", 1999), ("42", 500)]
    assert [e.effect for e in finished(fork)] == ["happened"]
    other = edited_fork(parent, effects="run")  # the same new intent, in another fork: done already
    assert other.state is S.COMPLETED and down.charges == [("42", 1999), ("42", 500)]
    assert [(e.effect, e.effect_run) for e in finished(other)] == [("inherited", fork.run_id)]


def test_ask_denied_runs_nothing() -> None:
    down = Downstream()
    parent = parent_run(down, anb.MemoryStore())
    fork = edited_fork(parent)
    (call,) = fork.pending_approvals()
    fork.deny(call.call_id, "not in a what-if")
    fork.run()
    assert fork.state is S.COMPLETED and down.charges == [("42", 1999)]
    assert "not in a what-if" in fork.messages[-2].tool_results[0].content


def test_a_headless_fork_that_asks_is_denied_saying_why() -> None:
    down = Downstream()
    model = anb.ScriptedModel([{"tool_calls": [CHARGE]}, {"text": "done"}])
    loop = anb.Loop(model=model, tools=[down.tool()], headless=True)
    parent = loop.start("charge").run()
    fork = edited_fork(parent)
    assert fork.state is S.COMPLETED and down.charges == [("42", 1999)]
    assert "nobody is available to approve a new effect in this fork" in fork.messages[-2].tool_results[0].content


@pytest.mark.parametrize("kind", STORES)
def test_simulate_runs_the_tools_fake_and_never_the_tool(kind: str, make_store: Any) -> None:
    down = Downstream()
    parent = parent_run(down, make_store(kind))
    fork = edited_fork(parent, effects="simulate")
    assert fork.state is S.COMPLETED and down.charges == [("42", 1999)] and down.simulated == [("42", 500)]
    (ev,) = finished(fork)
    assert (ev.status, ev.effect) == ("ok", "simulated") and ev.content.startswith("(simulated)")
    assert fork.store.effect(ev.idempotency_key or "") is None  # nothing claimed: a real fork may still do it
    assert edited_fork(parent, effects="run").state is S.COMPLETED and down.charges[-1] == ("42", 500)


def test_simulate_without_a_simulator_refuses_the_write() -> None:
    down = Downstream()
    parent = parent_run(down, anb.MemoryStore(), simulator=False)
    fork = edited_fork(parent, effects="simulate")
    (ev,) = finished(fork)
    assert (ev.status, ev.effect, ev.error_type) == ("error", "simulated", "NotSimulated")
    assert "has no simulator" in ev.content and down.charges == [("42", 1999)]


@pytest.mark.parametrize("kind", STORES)
def test_run_runs_a_new_write_once_across_every_fork(kind: str, make_store: Any) -> None:
    down = Downstream()
    parent = parent_run(down, make_store(kind))
    forks = [edited_fork(parent, effects="run") for _ in range(3)]
    assert down.charges == [("42", 1999), ("42", 500)]
    assert [[e.effect for e in finished(f)] for f in forks] == [["happened"], ["inherited"], ["inherited"]]


def test_rerun_repeats_a_tools_effect_only_when_told() -> None:
    down = Downstream()
    parent = parent_run(down, anb.MemoryStore())
    fork = parent.fork(at=1, effects="run", rerun=["charge"]).run()
    assert down.charges == [("42", 1999), ("42", 1999)]
    (ev,) = finished(fork)
    assert ev.effect == "rerun" and ev.idempotency_key != finished(parent)[0].idempotency_key
    again = fork.fork(at=1, effects="run").run()  # a fork of it without rerun: both effects exist, none again
    assert len(down.charges) == 2 and [e.effect for e in finished(again)] == ["inherited"]


def test_reads_are_reused_from_the_parent_when_asked() -> None:
    looked: list[str] = []

    @anb.tool
    def lookup(city: str) -> str:
        """Look up the weather."""
        looked.append(city)
        return f"sunny in {city}"

    model = anb.ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"city": "Paris"}}]}, {"text": "ok"}])
    parent = anb.Loop(model=model, tools=[lookup]).start("weather?").run()
    again = parent.fork(at=1).run()  # reads run again by default
    reused = parent.fork(at=1, reads="reuse").run()
    assert looked == ["Paris", "Paris"]
    (ev,) = finished(reused)
    assert (ev.content, ev.effect, ev.effect_run) == ("sunny in Paris", "reused", parent.run_id)
    assert finished(again)[0].effect is None


@pytest.mark.parametrize(("options", "message"), [
    ({"effects": "maybe"}, "effect policy is one of ask, simulate, run"),
    ({"reads": "sometimes"}, "read policy is one of rerun, reuse"),
    ({"rerun": "charge"}, "list of tool names"),
    ({"rerun": [""]}, "list of tool names"),
])
def test_a_policy_that_does_not_exist_is_refused_before_anything_starts(options: dict[str, Any], message: str) -> None:
    down = Downstream()
    store = anb.MemoryStore()
    parent = parent_run(down, store)
    with pytest.raises(AgentnbError, match=message):
        parent.fork(at=1, **options)
    assert [r for r, _ in store.runs()] == [parent.run_id]  # nothing was started


def test_a_simulator_must_be_a_function() -> None:
    with pytest.raises(anb.ToolDefinitionError, match="simulate= needs a function"):
        anb.tool(risk="write", simulate="nope")(lambda order_id: order_id)  # type: ignore[call-overload]


# -- races and crashes, across processes --------------------------------------------------------------------


def test_two_forks_racing_for_one_new_effect_run_it_once(tmp_path: Path) -> None:
    down = Downstream()
    store = anb.SqliteStore(tmp_path / "f.db", key=KEY)
    parent = parent_run(down, store)
    barrier = threading.Barrier(4)
    forks = [parent.fork(arguments={first_call(parent): {"order_id": "42", "cents": 500}}, effects="run")
             for _ in range(4)]

    def go(f: anb.Run) -> None:
        barrier.wait()
        f.run()

    threads = [threading.Thread(target=go, args=(f,)) for f in forks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert down.charges.count(("42", 500)) == 1
    marks = sorted(str(e.effect) for f in forks for e in finished(f))
    assert marks.count("happened") == 1 and len(marks) == 4  # the others: inherited, or in flight ("not known yet")


def worker(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(HERE / "fork_worker.py"), *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})
    if proc.returncode == -signal.SIGKILL:
        return {"killed": True}
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def executions(downstream: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(downstream) as db:
        return [(o, c) for o, c in db.execute("SELECT order_id, cents FROM charges")]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_fork_killed_mid_write_is_never_run_again_by_any_fork(kind: str, tmp_path: Path,
                                                                request: pytest.FixtureRequest) -> None:
    down = tmp_path / "down.db"
    env: dict[str, str] = {}
    if kind == "sqlite":
        where = str(tmp_path / "f.db")
    else:
        where = request.getfixturevalue("pg_dsn")
        env["AGENTNB_PG_SCHEMA"] = request.getfixturevalue("pg_schema")
    parent = worker(where, str(down), "parent", "run_parent", env=env)
    assert parent["state"] == "COMPLETED" and parent["marks"] == ["happened"]
    assert worker(where, str(down), "fork", "run_parent", "run", "in_write", env=env) == {"killed": True}
    assert executions(down) == [("42", 1999), ("42", 500)]  # the killed fork did it; its outcome was never stored
    for effects in POLICIES:  # every other fork finds the claim: never again, whatever its policy
        other = worker(where, str(down), "fork", "run_parent", effects, env=env)
        assert other["state"] == "COMPLETED" and other["statuses"] == ["duplicate"], other
        assert other["fork"]["parent"] == "run_parent" and other["operation"] == "run_parent"
    assert executions(down) == [("42", 1999), ("42", 500)]
    store: Any = (anb.SqliteStore(where, key="fork-worker-key-0001") if kind == "sqlite" else
                  anb.PostgresStore(where, key="fork-worker-key-0001", schema=env["AGENTNB_PG_SCHEMA"]))
    runs = dict(store.runs())
    store.close()
    assert len(runs) == 5 and sorted(runs.values()).count("COMPLETED") == 4
    (killed_fork,) = [r for r, state in runs.items() if state != "COMPLETED"]
    resumed = worker(where, str(down), "resume", killed_fork, env=env)
    assert (resumed["state"], resumed["kinds"]) == ("WAITING_APPROVAL", ["outcome_unknown"])  # a person reconciles
    assert executions(down) == [("42", 1999), ("42", 500)]


# -- counterfactuals over many runs -------------------------------------------------------------------------


def test_a_killed_batch_of_forks_resumes_and_runs_no_effect_twice(tmp_path: Path) -> None:
    from tests.fork_worker import fork_rows, make_loop, open_store

    n = 120
    where, down = str(tmp_path / "f.db"), str(tmp_path / "down.db")
    store = open_store(where)
    loop = make_loop(store, down)
    for i in range(n):  # the parents: one charge each
        loop.start(f"charge order 42 (#{i})", run_id=f"parent-{i}").run()
    assert len(executions(Path(down))) == n
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.Popen([sys.executable, str(HERE / "fork_worker.py"), where, down, "batch", str(n)], env=env,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:  # kill it once some forks finished and others are in the middle
        time.sleep(0.05)
        states = [s for r, s in store.runs() if r.startswith("forks-")]
        if states.count("COMPLETED") >= 10 and len(states) > states.count("COMPLETED"):
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(1.1)  # the killed batch's leases expire
    result = anb.batch(make_loop(store, down), fork_rows(n), concurrency=4, name="forks", progress=False)
    counts = result.counts()
    assert counts["failed"] == 0 and counts["done"] + counts["paused"] == n, result.table
    assert set(result.table["action"]) >= {"skipped", "started"}
    rows = executions(Path(down))
    assert rows.count(("42", 1999)) == n  # no parent's charge was repeated by any fork
    # each fork's new charge ran once at most: a fork killed between its claim and its outcome waits for a person
    assert counts["done"] <= rows.count(("42", 500)) <= n
    with sqlite3.connect(down) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM charges")]
    assert len(keys) == len(set(keys))  # no effect ran twice, whatever the kill interrupted
    table = result.table.set_index("operation_id")
    assert table["forked_from"].tolist() == [f"parent-{i}" for i in range(n)]
    done = table[table["state"] == "COMPLETED"]
    assert (done["new_effects"] == 1).all() and (done["inherited"] == 0).all()
    finished = [e for t in result if t.state is S.COMPLETED for e in t.events if isinstance(e, ToolFinished)]
    assert {e.status for e in finished} == {"ok"}, [e.content for e in finished if e.status != "ok"][:3]
    again = anb.batch(make_loop(store, down), fork_rows(n), concurrency=4, name="forks", progress=False)
    assert set(again.table["action"]) <= {"skipped", "paused"} and executions(Path(down)) == rows  # nothing ran


@pytest.mark.parametrize(("row", "message"), [
    (anb.Fork("parent-0", effects="maybe"), "effect policy is one of ask, simulate, run"),
    (anb.Fork("parent-0", reads="sometimes"), "read policy is one of rerun, reuse"),
    (anb.Fork("parent-0", rerun="charge"), "list of tool names"),
    (anb.Fork(" parent-0"), "whitespace"),
])
def test_a_batch_fork_row_with_no_such_policy_is_refused_before_anything_runs(row: anb.Fork, message: str) -> None:
    store = anb.MemoryStore()
    down = Downstream()
    loop = anb.Loop(model=anb.ScriptedModel([{"text": "ok"}]), tools=[down.tool()], store=store)
    with pytest.raises(AgentnbError, match=message):
        anb.batch(loop, [row], progress=False)
    assert store.runs() == []
