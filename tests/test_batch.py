"""Batches: many runs at once, failures recorded, resumed after a kill, paused runs, async models, a Dask cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import agentnb as anb
from tests.batch_worker import IN_FLIGHT, TURNS, lookup, slow_loop, story_loop

S = anb.LoopState
HERE = Path(__file__).parent
KEY = "batch-test-key-01"


def test_a_batch_runs_every_prompt_and_keeps_their_order() -> None:
    result = anb.batch(slow_loop(), [f"sum {i}" for i in range(20)], concurrency=4, progress=False, name="order")
    assert result.counts() == {"done": 20, "failed": 0, "paused": 0}
    assert result.run_ids == [f"order-{i}" for i in range(20)]
    assert [t.messages[0].text for t in result] == [f"sum {i}" for i in range(20)]  # run i answers prompt i
    assert result.frames.calls().groupby("run_id", observed=True).size().tolist() == [TURNS] * 20
    assert result.table["state"].eq("COMPLETED").all() and result.table["action"].eq("started").all()


def test_the_same_prompts_name_the_same_runs() -> None:
    a = anb.batch(slow_loop(), ["x", "y"], progress=False)
    b = anb.batch(slow_loop(), ["x", "y"], progress=False)
    c = anb.batch(slow_loop(), ["x", "z"], progress=False)
    assert a.run_ids == b.run_ids and a.run_ids != c.run_ids


def test_a_failing_run_is_recorded_and_the_others_go_on() -> None:
    def make(kind: str) -> anb.Loop:
        if kind == "broken":
            raise RuntimeError("no model for this row")
        if kind == "model_error":
            return anb.Loop(model=anb.ScriptedModel([{"error": {"status": 400, "message": "bad request"}}]),
                            retry_base_delay=0.0)
        return slow_loop()

    table = pd.DataFrame({"prompt": ["a", "b", "c", "d"], "kind": ["ok", "broken", "model_error", "ok"]})
    result = anb.batch(make, table, concurrency=2, progress=False, name="fail")
    assert result.counts() == {"done": 2, "failed": 2, "paused": 0}
    assert list(result.errors) == ["fail-1"] and "no model for this row" in result.errors["fail-1"]
    assert result.table.set_index("operation_id").loc["fail-2", "state"] == "FAILED"
    assert result.table["kind"].tolist() == ["ok", "broken", "model_error", "ok"]  # the row's columns are kept
    assert result.run_ids == ["fail-0", "fail-2", "fail-3"]  # the broken row never started a run


def test_a_killed_batch_resumes_where_it_stopped(tmp_path: Path) -> None:
    db = tmp_path / "batch.db"
    env = {**os.environ, "AGENTNB_CHECKPOINT_KEY": KEY, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.Popen([sys.executable, str(HERE / "batch_worker.py"), str(db), "12"], env=env,
                            stderr=subprocess.PIPE, text=True)
    store = None
    deadline = time.time() + 60
    while time.time() < deadline:  # kill it once some runs finished and others are in the middle
        time.sleep(0.05)
        if db.exists():
            store = store or anb.SqliteStore(db, key=KEY)
            states = [s for _, s in store.runs()]
            if states.count("COMPLETED") >= 2 and len(states) > states.count("COMPLETED"):
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert store is not None
    before = dict(store.runs())
    time.sleep(0.35)  # the killed batch's leases expire
    result = anb.batch(slow_loop(store), [f"sum {i}" for i in range(12)], concurrency=4, name="killed",
                       progress=False)
    assert result.counts() == {"done": 12, "failed": 0, "paused": 0}, result.table
    actions = result.table.set_index("operation_id")["action"]
    for run_id, state in before.items():
        assert actions[run_id] == ("skipped" if state == "COMPLETED" else "resumed")
    assert (actions == "started").sum() == 12 - len(before)
    assert {"skipped", "resumed"} <= set(actions)
    for t in result:  # every call ran once: a resumed run never repeats a stored call
        assert sum(e.type == "ToolFinished" for e in t.events) == TURNS


def test_a_paused_run_waits_in_the_inbox_and_blocks_no_other(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "b.db", key=KEY)
    table = pd.DataFrame({"prompt": ["Refund order 42", "Paris?", "Rome?"],
                          "story": ["refund", "weather", "weather"]})

    def make(story: str) -> anb.Loop:
        return story_loop(story)

    first = anb.batch(make, table, store=store, progress=False, name="inbox")
    assert first.counts() == {"done": 2, "failed": 0, "paused": 1}
    assert store.runs(state="WAITING_APPROVAL") == [("inbox-0", "WAITING_APPROVAL")]
    # a person approves it from the inbox; their Run holds the run's lease while it lives
    run = anb.Run.resume("inbox-0", loop=story_loop("refund", lease_ttl=0.3), store=store)
    run.approve(run.pending_approvals()[0].call_id, by="ops")
    locked = anb.batch(make, table, store=store, progress=False, name="inbox")
    assert locked.counts()["failed"] == 1 and "RunLocked" in locked.errors["inbox-0"]  # never driven twice
    time.sleep(0.35)  # the approver walked away; its lease expired, so the batch takes the run over
    again = anb.batch(make, table, store=store, progress=False, name="inbox")
    assert again.counts() == {"done": 3, "failed": 0, "paused": 0}
    assert again.table["action"].tolist() == ["resumed", "skipped", "skipped"]


def test_async_models_run_together_on_one_event_loop() -> None:
    openai = pytest.importorskip("openai")
    n = 8

    def turn(messages: list[anb.Message]) -> dict[str, Any]:
        last = messages[-1]
        if last.tool_results:
            return {"text": f"done: {last.tool_results[0].content}"}
        return {"tool_calls": [{"name": "lookup", "arguments": {"city": last.text}}]}

    with anb.emulator.Emulator([turn] * (2 * n)) as emu:
        client = openai.AsyncOpenAI(base_url=emu.url("openai"), api_key="test")
        loop = anb.Loop(model=anb.OpenAIChatModel(client, model="gpt-4.1"), tools=[lookup])
        IN_FLIGHT["max"] = 0
        result = anb.batch(loop, [f"city {i}" for i in range(n)], concurrency=n, progress=False)
    assert result.counts()["done"] == n
    assert sorted(t.events[-1].output for t in result) == sorted(f"done: city {i}: sunny" for i in range(n))
    assert IN_FLIGHT["max"] > 1  # the async tools of several runs were awaited at the same time


def test_progress_shows_done_failed_paused_and_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    anb.batch(story_loop("refund"), ["Refund order 42"], progress=True)
    err = capsys.readouterr().err
    assert "1/1" in err and "paused=1" in err and "tokens=" in err


def test_a_batch_on_a_dask_cluster_writes_to_postgres(pg_dsn: str, pg_schema: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    # the worker processes import this test package and need the key, as a real worker machine would
    monkeypatch.setenv("PYTHONPATH", str(HERE.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("AGENTNB_CHECKPOINT_KEY", KEY)
    store = anb.PostgresStore(pg_dsn, schema=pg_schema)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as cluster, distributed.Client(cluster) as client:
        with pytest.raises(anb.AgentnbError, match="function that builds the Loop"):
            anb.batch(slow_loop(), ["x"], executor=client, store=store)
        result = anb.batch(slow_loop, [f"sum {i}" for i in range(10)], executor=client, store=store,
                           progress=False, name="dask")
        pids = set(client.run(os.getpid).values())
    assert result.counts() == {"done": 10, "failed": 0, "paused": 0}, result.table
    assert os.getpid() not in pids and len(pids) == 2
    assert {r for r, _ in store.runs(state="COMPLETED")} == {f"dask-{i}" for i in range(10)}
    assert [len(t.events) for t in result] == [len(store.load(f"dask-{i}")) for i in range(10)]
    store.close()


# -- ids, prompts and stores refused before anything runs --------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[anb.SqliteStore | anb.PostgresStore]:
    """A real durable store: a SQLite file, or a schema of the throw-away PostgreSQL server."""
    store: anb.SqliteStore | anb.PostgresStore
    if request.param == "sqlite":
        store = anb.SqliteStore(tmp_path / "batch.db", key=KEY)
    else:
        store = anb.PostgresStore(request.getfixturevalue("pg_dsn"), key=KEY,
                                  schema=request.getfixturevalue("pg_schema"))
    yield store
    store.close()


def counted_loop(calls: list[str]) -> anb.Loop:
    """A one-turn loop whose model notes each prompt it is asked about in ``calls``."""

    def answer(messages: list[anb.Message]) -> dict[str, Any]:
        calls.append(messages[-1].text)
        return {"text": f"answered {messages[-1].text}"}

    return anb.Loop(model=anb.ScriptedModel([answer] * 10), retry_base_delay=0.0)


@pytest.mark.parametrize(("bad", "says"), [
    (float("nan"), "is empty (NaN)"), (None, "is empty (None)"), ("", "is blank"), ("   ", "is blank"),
    (" b", "leading or trailing whitespace"), (7, "is int 7, not a string"), (7.0, "is float 7.0, not a string"),
    ("a\x00", "control character"), ("a\u200b", "invisible or direction-changing character (a⟨U+200B⟩)"),
    ("\u202ea", "invisible or direction-changing character (⟨U+202E⟩a)"),
    ("a", "'a' is also the id of row 0"),
])
def test_an_operation_id_that_names_no_run_is_refused_naming_its_row(bad: Any, says: str, tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "ids.db", key=KEY)
    calls: list[str] = []
    table = pd.DataFrame({"prompt": ["p0", "p1", "p2"], "operation_id": pd.Series(["a", bad, "c"], dtype=object)})
    table.index = pd.Index(["x", "y", "z"])
    with pytest.raises(anb.AgentnbError) as err:
        anb.batch(counted_loop(calls), table, store=store, progress=False)
    assert "row 1 (index 'y')" in str(err.value) and says in str(err.value), err.value
    assert calls == [] and store.runs() == []  # refused before anything ran or was written
    store.close()


def test_a_refusal_names_the_first_bad_rows_and_counts_the_rest() -> None:
    table = pd.DataFrame({"prompt": [f"p{i}" for i in range(10)], "operation_id": [None] * 8 + ["a", "b"]})
    with pytest.raises(anb.AgentnbError) as err:
        anb.batch(counted_loop([]), table, progress=False)
    lines = str(err.value).splitlines()
    assert lines[0] == "the batch was refused before anything ran (8 problem(s)):"
    assert [line.split(":")[0] for line in lines[1:]] == [f"- row {i}" for i in range(5)] + ["- and 3 more"]


@pytest.mark.parametrize("name", ["", " x", 5])
def test_a_batch_name_that_names_no_run_is_refused(name: Any) -> None:
    with pytest.raises(anb.AgentnbError, match="the batch's name .*prefix of every run id"):
        anb.batch(counted_loop([]), ["p0"], progress=False, name=name)


def test_a_blank_operation_id_never_hands_back_another_prompts_transcript(tmp_path: Path) -> None:
    store = anb.SqliteStore(tmp_path / "nan.db", key=KEY)
    calls: list[str] = []
    for prompt in ("first", "second"):  # the bug: both rows named "nan"; the second got the first's answer
        table = pd.DataFrame({"prompt": ["p0", prompt], "operation_id": ["a", float("nan")]})
        with pytest.raises(anb.AgentnbError, match="row 1"):
            anb.batch(counted_loop(calls), table, store=store, progress=False)
    assert calls == [] and store.runs() == []
    store.close()


def test_a_run_id_column_is_refused_the_run_id_is_the_operation_id() -> None:
    table = pd.DataFrame({"prompt": ["p0"], "run_id": ["r0"]})
    with pytest.raises(anb.AgentnbError, match="run_id.*operation_id"):
        anb.batch(counted_loop([]), table, progress=False)


@pytest.mark.parametrize(("bad", "says"), [
    (None, "None"), (float("nan"), "NaN"), (3, "int 3"), ("", "blank"), (" \n", "blank"), ([], "no message"),
    ([{"role": "user"}], "message 0 ({'role': 'user'}) has no content"), ({"role": "user", "content": "hi"}, "dict"),
    (anb.Message(role="user"), "has no content"),
])
def test_a_prompt_that_is_no_prompt_is_refused_naming_its_row(bad: Any, says: str) -> None:
    calls: list[str] = []
    for prompts in (["p0", bad], pd.DataFrame({"prompt": pd.Series(["p0", bad], dtype=object)})):
        with pytest.raises(anb.AgentnbError) as err:
            anb.batch(counted_loop(calls), prompts, progress=False, name="bad")
        assert "row 1" in str(err.value) and says in str(err.value), err.value
    assert calls == []


def test_prompts_as_strings_messages_and_message_lists_still_run() -> None:
    prompts: list[Any] = ["p0", anb.Message.user("p1"), [{"role": "user", "content": "p2"}], [anb.Message.user("p3")]]
    calls: list[str] = []
    result = anb.batch(counted_loop(calls), prompts, progress=False)
    assert result.counts()["done"] == 4 and sorted(calls) == ["p0", "p1", "p2", "p3"]


def test_a_stored_run_of_another_prompt_is_refused_not_handed_back(durable: anb.Store) -> None:
    calls: list[str] = []
    loop = counted_loop(calls)
    first = pd.DataFrame({"prompt": ["p0", "p1"], "operation_id": ["a", "b"]})
    assert anb.batch(loop, first, store=durable, progress=False).counts()["done"] == 2
    before = {run_id: len(durable.load(run_id)) for run_id, _ in durable.runs()}
    other = pd.DataFrame({"prompt": ["p0", "another question"], "operation_id": ["a", "b"]})
    with pytest.raises(anb.AgentnbError) as err:
        anb.batch(loop, other, store=durable, progress=False)
    text = str(err.value)
    assert "row 1" in text and "'b'" in text and "'p1'" in text and "'another question'" in text, text
    assert sorted(calls) == ["p0", "p1"]  # nothing ran again, and nothing was written
    assert {run_id: len(durable.load(run_id)) for run_id, _ in durable.runs()} == before
    # the same with the derived ids of a named batch: its row 0 is another prompt now
    anb.batch(loop, ["q0"], store=durable, progress=False, name="named")
    with pytest.raises(anb.AgentnbError, match=r"row 0.*'named-0'"):
        anb.batch(loop, ["q1"], store=durable, progress=False, name="named")
    # the same prompts again are read back, also under a loop with a system prompt
    again = anb.batch(loop, first, store=durable, progress=False)
    assert again.table["action"].tolist() == ["skipped", "skipped"] and sorted(calls) == ["p0", "p1", "q0"]
    system = anb.Loop(model=anb.ScriptedModel([{"text": "ok"}] * 4), system="Be brief.")
    anb.batch(system, ["s0"], store=durable, progress=False, name="sys")
    assert anb.batch(system, ["s0"], store=durable, progress=False, name="sys").table["action"].tolist() == [
        "skipped"]


def test_one_loop_runs_a_batch_in_memory_then_on_a_durable_store(durable: anb.Store) -> None:
    sent: list[str] = []

    @anb.tool(risk="write", approval=False)
    def send(to: str) -> str:
        """Send a note (a write: its effect goes through the store's ledger)."""
        sent.append(to)
        return f"sent to {to}"

    turn = [{"tool_calls": [{"name": "send", "arguments": {"to": "ops"}}]}, {"text": "done"}]
    loop = anb.Loop(model=anb.ScriptedModel(turn * 2), tools=[send], retry_base_delay=0.0)  # two runs per id
    in_memory = anb.batch(loop, ["notify 1", "notify 2"], progress=False, name="moved")
    assert in_memory.counts()["done"] == 2 and sent == ["ops", "ops"]
    kept = {run_id: len(loop.store.load(run_id)) for run_id, _ in loop.store.runs()}
    result = anb.batch(loop, ["notify 1", "notify 2"], store=durable, progress=False, name="moved")
    assert result.counts() == {"done": 2, "failed": 0, "paused": 0}, result.table
    assert sorted(durable.runs()) == [("moved-0", "COMPLETED"), ("moved-1", "COMPLETED")]
    assert [len(durable.load(r)) for r in ("moved-0", "moved-1")] == [len(t.events) for t in result]
    keys = [e.idempotency_key for t in result for e in t.events if e.type == "ToolStarted"]
    assert len(keys) == 2 and all(durable.effect(k) is not None for k in keys)  # its ledger went there too
    assert {run_id: len(loop.store.load(run_id)) for run_id, _ in loop.store.runs()} == kept  # untouched
