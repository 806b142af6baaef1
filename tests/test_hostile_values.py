"""Hostile values through complete runs, on both stores: run, save, load, resume, frames, Parquet.

Every value either round-trips exactly (the saved, loaded and resumed run holds the same events, byte for
byte) or ends in its documented error state: an ``invalid_arguments`` result for arguments, an error result
(``ValueConversionError``) for a tool's return value, a ``ValueConversionError`` raised to the caller for an
approver's edit or a client's result (nothing recorded). Never an unhandled exception, and never a second
execution of a tool: each tool counts its executions.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import math
import os
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

import agentnb as anb
from agentnb._values import MAX_DEPTH
from agentnb.events import event_to_json
from tests.test_values import same  # equality where NaN equals NaN and types must match

S = anb.LoopState
KEY = "hostile-values-test-key-0123456789"
ERROR = object()
"""Expected outcome: the value cannot enter a run."""


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def self_list() -> list[Any]:
    x: list[Any] = ["a"]
    x.append(x)
    return x


def self_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"k": 1}
    d["self"] = d
    return d


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


@dataclasses.dataclass
class Parcel:
    weight: float
    label: str


class Customer(pydantic.BaseModel):
    name: str
    since: dt.date


STAMP = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
UID = uuid.UUID(int=42)

# (name, factory, what it must become) -- the expected forms are written out by hand from the documented table.
VALUES: list[tuple[str, Callable[[], Any], Any]] = [
    ("lone surrogate", lambda: "half an emoji \ud83d", ERROR),
    ("surrogateescape file name", lambda: sorted([os.fsdecode(b"report-\xff.txt"), "ok.txt"]), ERROR),
    ("non-UTF-8 bytes", lambda: b"\x80\xff", ERROR),
    ("list containing itself", self_list, ERROR),
    ("dict containing itself", self_dict, ERROR),
    ("repr raises", BadRepr, ERROR),
    ("900 levels deep", lambda: nested(900), ERROR),
    ("NaN", lambda: math.nan, math.nan),
    ("±Infinity", lambda: {"hi": math.inf, "lo": [-math.inf]}, {"hi": math.inf, "lo": [-math.inf]}),
    ("numpy scalar", lambda: np.float32(1.5), 1.5),
    ("numpy array", lambda: np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]),
    ("numpy NaN array", lambda: np.array([np.nan, 1.0]), [math.nan, 1.0]),
    ("pandas frame", lambda: pd.DataFrame({"a": [1, 2]}), [{"a": 1}, {"a": 2}]),
    ("pandas series", lambda: pd.Series([0.5, 1.5]), [0.5, 1.5]),
    ("pandas timestamp", lambda: pd.Timestamp(STAMP), "2024-05-06T07:08:09Z"),
    ("datetime", lambda: {"at": STAMP}, {"at": "2024-05-06T07:08:09Z"}),
    ("Decimal", lambda: decimal.Decimal("19.990"), "19.990"),
    ("UUID", lambda: UID, str(UID)),
    ("set", lambda: {"b", "a", "c"}, ["a", "b", "c"]),
    ("dataclass", lambda: Parcel(2.5, "fragile"), {"weight": 2.5, "label": "fragile"}),
    ("pydantic model", lambda: Customer(name="Ana", since=dt.date(2020, 1, 2)), {"name": "Ana", "since": "2020-01-02"}),
    ("generator", lambda: (n * n for n in range(4)), [0, 1, 4, 9]),
    ("plain text", lambda: "é ok 😀", "é ok 😀"),
]


def levels(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((levels(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((levels(v) for v in value), default=0)
    return 0


def has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    return False


def in_fresh_stack(fn: Callable[[], None]) -> None:
    """Run ``fn`` on a new thread: JSON of 900 levels needs the stack depth a program has, not pytest's."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


class Scenario:
    """One run of the hostile script on one store: the tools count their executions."""

    def __init__(self, folder: Path, store_kind: str, produce: Callable[[], Any], arguments_raw: str,
                 tool: str = "probe", risk: str = "read") -> None:
        self.folder = folder
        self.store_kind = store_kind
        self.produce = produce
        self.arguments_raw = arguments_raw
        self.tool = tool
        self.risk = risk
        self.executions = 0
        self.memory = anb.MemoryStore()

    def store(self) -> anb.Store:
        if self.store_kind == "memory":
            return self.memory
        return anb.SqliteStore(self.folder / "runs.db", key=KEY)

    def loop(self) -> anb.Loop:
        produce = self.produce

        @anb.tool(approval=True, risk=self.risk)  # type: ignore[arg-type]
        def probe(x: Any = None) -> Any:
            """Return the hostile value."""
            self.executions += 1
            return produce()

        @anb.tool(client=True)
        def on_client(x: Any = None) -> Any:
            """The client computes this."""
            raise AssertionError("a client tool never runs here")

        model = anb.ScriptedModel([
            {"tool_calls": [{"name": self.tool, "arguments": self.arguments_raw}]},
            {"text": "done"},
        ])
        return anb.Loop(model=model, tools=[probe, on_client], store=self.store())

    def resume(self, run: anb.Run) -> anb.Run:
        return anb.Run.resume(run.run_id, loop=self.loop())

    def check_round_trips(self, run: anb.Run, *, parquet: bool = False) -> None:
        """Transcript file, store, frames (and Parquet files) give back exactly what the run holds."""
        texts = [event_to_json(e) for e in run.events]
        path = self.folder / "run.jsonl"
        run.transcript.save(path)
        loaded = anb.Transcript.load(path)
        assert [event_to_json(e) for e in loaded] == texts
        stored = self.store().load(run.run_id)
        assert [event_to_json(e) for e in stored] == texts
        for frame in ("calls", "messages", "approvals"):
            assert_frame_equal(getattr(run.transcript.frames, frame)(), getattr(loaded.frames, frame)())
        assert_frame_equal(run.transcript.to_pandas(), loaded.to_pandas())
        if parquet:
            anb.TranscriptCollection([run.transcript]).save_parquet(self.folder / "parquet")
            [back] = anb.load_transcripts(self.folder / "parquet").transcripts
            assert [event_to_json(e) for e in back] == texts


def finished(run: anb.Run) -> list[Any]:
    return [e for e in run.events if e.type == "ToolFinished"]


def expect_result(run: anb.Run, expected: Any) -> None:
    [done] = finished(run)
    if expected is ERROR:
        assert done.status == "error" and done.error_type == "ValueConversionError", done
        assert "cannot be recorded" in done.content
    else:
        assert done.status == "ok", done
        assert same(done.value, expected), (done.value, expected)
        assert done.content == (expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False))


def drive_approval(sc: Scenario, expected_result: Any, edit: tuple[Any, Any] | None, parquet: bool = False) -> anb.Run:
    """Run until approval, save/load/resume, approve (maybe with an edit), finish; then resume once more."""
    run = sc.loop().start("go").run()
    assert run.state is S.WAITING_APPROVAL and sc.executions == 0
    sc.check_round_trips(run)
    run = sc.resume(run)
    [call] = run.pending_approvals()
    if edit is not None:
        value, converted = edit
        before = len(run.events)
        if converted is ERROR:
            with pytest.raises(anb.ValueConversionError):
                run.approve(call.call_id, arguments={"x": value})
            assert len(run.events) == before  # nothing was recorded
            run.approve(call.call_id)
        else:
            run.approve(call.call_id, arguments={"x": value})
            resolved = run.events[-1]
            assert resolved.type == "ApprovalResolved" and same(resolved.arguments, {"x": converted})
    else:
        run.approve(call.call_id)
    run.run()
    assert run.state is S.COMPLETED and sc.executions == 1
    expect_result(run, expected_result)
    sc.check_round_trips(run, parquet=parquet)
    again = sc.resume(run).run()
    assert again.state is S.COMPLETED and sc.executions == 1  # a resumed finished run runs nothing again
    return again


def drive_client(sc: Scenario, value: Any, expected: Any) -> None:
    """A client submits the hostile value as the result of a client-side call (after save/load/resume)."""
    run = sc.loop().start("go").run()
    assert run.state is S.WAITING_APPROVAL
    sc.check_round_trips(run)
    run = sc.resume(run)
    [call] = run.pending_approvals()
    before = len(run.events)
    if expected is ERROR:
        with pytest.raises(anb.ValueConversionError):
            run.submit_result(call.call_id, value)
        assert len(run.events) == before and run.state is S.WAITING_APPROVAL
        run.submit_result(call.call_id, "the client could not send its value")
    else:
        event = run.submit_result(call.call_id, value)
        assert same(event.value, expected)  # type: ignore[attr-defined]
    run.run()
    assert run.state is S.COMPLETED and sc.executions == 0
    sc.check_round_trips(run)


STORES = ["memory", "sqlite"]
NAMES = [name for name, _, _ in VALUES]


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("risk", ["read", "write"])
@pytest.mark.parametrize("case", NAMES)
def test_every_hostile_result_round_trips_or_is_an_error_result_and_runs_once(
    tmp_path: Path, store_kind: str, risk: str, case: str
) -> None:
    _, produce, expected = VALUES[NAMES.index(case)]
    sc = Scenario(tmp_path, store_kind, produce, '{"x": 1}', risk=risk)
    in_fresh_stack(lambda: drive_approval(sc, expected, None))


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("case", NAMES)
def test_every_hostile_value_as_an_approval_edit_or_a_client_result(
    tmp_path: Path, store_kind: str, case: str
) -> None:
    _, produce, expected = VALUES[NAMES.index(case)]
    sc = Scenario(tmp_path / "edit", store_kind, lambda: "fine", '{"x": 1}')
    (tmp_path / "edit").mkdir()
    in_fresh_stack(lambda: drive_approval(sc, "fine", (produce(), expected)))
    client = Scenario(tmp_path / "client", store_kind, lambda: "unused", '{"x": 1}', tool="on_client")
    (tmp_path / "client").mkdir()
    in_fresh_stack(lambda: drive_client(client, produce(), expected))


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize(("raw", "why"), [
    ('{"x": "half an emoji \\ud83d"}', "lone surrogate U+D83D"),
    ('{"\\udcff": 1}', "lone surrogate U+DCFF"),
    ('{"x": ' + "[" * 900 + "]" * 900 + "}", "nested deeper than 64 levels"),
    ('{"x": ' + "[" * 70 + "]" * 70 + "}", "nested deeper than 64 levels"),
])
def test_arguments_that_cannot_enter_a_run_get_an_invalid_arguments_result(
    tmp_path: Path, store_kind: str, raw: str, why: str
) -> None:
    sc = Scenario(tmp_path, store_kind, lambda: "never", raw)

    def drive() -> None:
        run = sc.loop().start("go").run()
        assert run.state is S.COMPLETED and sc.executions == 0
        [rejected] = [e for e in run.events if e.type == "CallRejected"]
        assert rejected.reason == "invalid_arguments" and why in rejected.message
        sc.check_round_trips(run, parquet=True)

    in_fresh_stack(drive)


def test_a_float_parameter_refuses_nan_unless_the_schema_allows_it(tmp_path: Path) -> None:
    @anb.tool
    def strict(x: float) -> float:
        """Strict."""
        return x

    @anb.tool
    def lenient(x: Annotated[float, pydantic.Field(allow_inf_nan=True)]) -> float:
        """Lenient."""
        return x

    model = anb.ScriptedModel([
        {"tool_calls": [{"name": "strict", "arguments": '{"x": NaN}'},
                        {"name": "lenient", "arguments": '{"x": -Infinity}'}]},
        {"text": "done"},
    ])
    run = anb.Loop(model=model, tools=[strict, lenient], store=anb.SqliteStore(tmp_path / "s.db", key=KEY))
    run = run.start("go").run()
    [rejected] = [e for e in run.events if e.type == "CallRejected"]
    assert rejected.name == "strict" and rejected.reason == "invalid_arguments"
    assert "NaN and Infinity are not allowed here" in rejected.message
    [done] = finished(run)
    assert done.name == "lenient" and done.value == -math.inf and done.content == "-Infinity"


json_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2)
)
json_values = st.recursive(
    json_leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    argument=json_values | st.integers(60, 70).map(nested),
    result=json_values | st.sampled_from(range(len(VALUES))),
    store_kind=st.sampled_from(STORES),
    risk=st.sampled_from(["read", "write"]),
)
def test_random_hostile_arguments_and_results_through_complete_runs(
    argument: Any, result: Any, store_kind: str, risk: str
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="hostile-"))
    raw = json.dumps({"x": argument})  # Python's json writes NaN/Infinity and \\ud83d escapes, as a model may
    argument = json.loads(raw)["x"]  # what the text says: an escaped surrogate *pair* is one character
    if isinstance(result, int) and not isinstance(result, bool) and 0 <= result < len(VALUES):
        _, produce, expected_result = VALUES[result]
    else:
        produce = lambda: result  # noqa: E731
        expected_result = ERROR if has_lone_surrogate(result) else result
    sc = Scenario(folder, store_kind, produce, raw, risk=risk)
    refused = has_lone_surrogate(argument) or levels({"x": argument}) > MAX_DEPTH

    def drive() -> None:
        if refused:
            run = sc.loop().start("go").run()
            assert run.state is S.COMPLETED and sc.executions == 0
            [rejected] = [e for e in run.events if e.type == "CallRejected"]
            assert rejected.reason == "invalid_arguments"
            sc.check_round_trips(run, parquet=True)
            return
        resumed = drive_approval(sc, expected_result, None, parquet=True)
        [validated] = [e for e in resumed.events if e.type == "CallValidated"]
        assert same(validated.arguments, {"x": argument})  # NaN and ±Infinity survived save, load and resume

    in_fresh_stack(drive)



@pytest.mark.parametrize("store_kind", STORES)
def test_an_imported_history_with_hostile_values_enters_a_run_and_round_trips(tmp_path: Path, store_kind: str) -> None:
    deep = "[" * 900 + "]" * 900
    history = [
        {"role": "user", "content": "half an emoji \ud83d"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "probe", "arguments": '{"x": "\\ud83d", "n": NaN}'}},
            {"id": "c2", "type": "function", "function": {"name": "probe", "arguments": '{"x": ' + deep + "}"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok \udcff"},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        {"role": "user", "content": "again"},
    ]
    sc = Scenario(tmp_path, store_kind, lambda: "unused", "{}")

    def drive() -> None:
        imported = anb.import_history(history, "openai_chat")
        path = tmp_path / "imported.jsonl"
        imported.transcript.save(path)
        texts = [event_to_json(e) for e in imported.transcript]
        assert [event_to_json(e) for e in anb.Transcript.load(path)] == texts
        deep_call = imported.messages[1].parts[1]
        assert deep_call.arguments is None and deep_call.arguments_raw.count("[") == 900  # type: ignore[union-attr]
        model = anb.ScriptedModel([{"text": "done"}])
        run = anb.Loop(model=model, store=sc.store()).start(imported.messages).run()
        assert run.state is S.COMPLETED
        sc.check_round_trips(run, parquet=True)

    in_fresh_stack(drive)


@pytest.mark.parametrize("stream", [True, False])
def test_a_lone_surrogate_in_arguments_is_an_invalid_arguments_result_streamed_or_whole(stream: bool) -> None:
    """A lone surrogate (JSON's ``\\ud800``, decoded) has no UTF-8 form: the call is refused with a message the
    model reads, the same streamed as whole, and the run goes on (counting a fragment's bytes raised before)."""

    @anb.tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    script = [{"tool_calls": [{"name": "echo", "arguments": '{"text": "a\ud800b"}'}]}, {"text": "done"}]
    run = anb.Loop(model=anb.ScriptedModel(script, stream=stream, chunk_size=3), tools=[echo]).start("go").run()
    assert run.state is anb.LoopState.COMPLETED
    (rejected,) = [e for e in run.events if e.type == "CallRejected"]
    assert rejected.reason == "invalid_arguments" and "lone surrogate U+D800" in rejected.message
    assert not any(e.type == "ToolStarted" for e in run.events)
