"""``anb.scan``: inputs, keys that join the frames, the cache, resuming, concurrency, questions to a model."""

from __future__ import annotations

import json
import re
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pydantic
import pytest

import agentnb as anb
from agentnb.emulator import Emulator
from agentnb.exceptions import ScanError
from agentnb.scanners import COLUMNS, ScanWarning
from agentnb.scanners._ask import run_text
from agentnb.scanners._cache import digest


@anb.tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    if order_id.startswith("bad"):
        raise RuntimeError("the order service is down")
    return f"order {order_id}: shipped"


def _run(i: int, *, fail: bool = False, store: anb.Store | None = None) -> anb.Transcript:
    order = f"bad-{i}" if fail else f"A-{i}"
    model = anb.ScriptedModel([
        {"tool_calls": [{"name": "lookup", "arguments": {"order_id": order}}]},
        {"tool_calls": [{"name": "lookup", "arguments": {"order_id": order}}]},
        {"text": f"Order {order} is on its way."},
    ])
    loop = anb.Loop(model=model, tools=[lookup], store=store)
    return loop.start(f"Where is order {order}?", run_id=f"r{i}").run().transcript


@pytest.fixture(scope="module")
def runs() -> anb.TranscriptCollection:
    return anb.TranscriptCollection([_run(i, fail=i % 3 == 0) for i in range(6)])


class Counter:
    """A run-level scanner that counts its calls (and flags runs with an error result)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, t: anb.Transcript) -> Any:
        with self._lock:
            self.calls.append(t.run_id or "")
        calls = t.frames.calls()
        return [anb.Hit(call_id=c, message="error") for c in calls.loc[calls["status"] == "error", "call_id"]]


# -- what a scan reads ------------------------------------------------------------------------------------


def test_every_kind_of_input_gives_the_same_hits(runs: anb.TranscriptCollection, tmp_path: Path) -> None:
    scanner = anb.scanner.repeated_calls()
    expected = anb.scan(runs, scanner)
    assert expected["run_id"].tolist() == ["r1", "r2", "r4", "r5"]  # a repeat after an error is a retry
    runs.save_jsonl(tmp_path / "dir")
    runs.save_jsonl(tmp_path / "one.jsonl")
    store = anb.SqliteStore(tmp_path / "runs.db")
    for i in range(6):
        _run(i, fail=i % 3 == 0, store=store)
    runs.save_parquet(tmp_path / "parquet")
    inputs: list[Any] = [list(runs), tmp_path / "dir", str(tmp_path / "dir" / "*.jsonl"), tmp_path / "one.jsonl",
                         store, tmp_path / "runs.db", tmp_path / "parquet", anb.load_transcripts(tmp_path / "parquet")]
    for source in inputs:
        got = anb.scan(source, scanner).sort_values(["run_id", "call_id"], key=lambda s: s.astype(str))
        assert got["run_id"].astype(str).tolist() == expected["run_id"].astype(str).tolist(), source
        assert got["call_id"].tolist() == expected["call_id"].tolist(), source
        assert got["seq"].tolist() == expected["seq"].tolist(), source
    one = anb.scan(runs[1], scanner)
    assert one["run_id"].tolist() == ["r1"] and list(one["run_id"].cat.categories) == ["r1"]


def test_a_store_run_whose_seals_do_not_verify_is_named(tmp_path: Path) -> None:
    import sqlite3

    store = anb.SqliteStore(tmp_path / "runs.db")
    _run(1, store=store)
    _run(2, store=store)
    with sqlite3.connect(tmp_path / "runs.db") as db:
        db.execute("update events set data = replace(data, 'A-1', 'A-9') where run_id = 'r1'")
    with pytest.raises(ScanError, match="run 'r1' could not be loaded") as info:
        anb.scan(tmp_path / "runs.db", anb.scanner.repeated_calls())
    assert len(info.value.errors) == 1


def test_bad_input_is_a_clear_error(runs: anb.TranscriptCollection, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="anb.scan reads a Transcript"):
        anb.scan(42, anb.scanner.refusals())
    with pytest.raises(TypeError, match="scanner 0 is a int"):
        anb.scan(runs, 42)
    with pytest.raises(ValueError, match="two scanners are named 'refusals'"):
        anb.scan(runs, anb.scanner.refusals(), anb.scanner.refusals())
    with pytest.raises(FileNotFoundError):
        anb.scan(tmp_path / "nothing-here", anb.scanner.refusals())
    with pytest.raises(ValueError, match="concurrency"):
        anb.scan(runs, anb.scanner.refusals(), concurrency=0)
    with pytest.raises(ValueError, match="name"):
        anb.Scanner("two words", lambda t: None)
    with pytest.raises(ValueError, match="over must be"):
        anb.Scanner("x", lambda t: None, over="turn")  # type: ignore[arg-type]
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        anb.scan(runs, anb.scanner.refusals(), cache=tmp_path / "file")


# -- the results join the frames -----------------------------------------------------------------------------


def test_results_have_the_frames_keys_and_dtypes(runs: anb.TranscriptCollection) -> None:
    hits = anb.scan(runs, Counter(), anb.scanner.repeated_calls())
    assert list(hits.columns) == [name for name, _, _ in COLUMNS]
    calls, events = runs.frames.calls(), runs.frames.events()
    for key in ("run_id", "seq", "turn", "call_id"):
        frame = calls if key != "seq" else events
        assert hits[key].dtype == frame[key].dtype, key
    assert list(hits["run_id"].cat.categories) == list(calls["run_id"].cat.categories)
    joined = hits.merge(calls, on=["run_id", "call_id"], suffixes=("", "_call"))
    assert len(joined) == len(hits)
    assert (joined["seq"] == joined["seq_call"]).all() and (joined["turn"] == joined["turn_call"]).all()
    by_scanner = joined.groupby("scanner", observed=True)["status"].agg(lambda s: sorted(set(s)))
    assert by_scanner["Counter"] == ["error"]  # the counter flags exactly the error results
    on_events = hits.merge(events, on=["run_id", "seq"], suffixes=("", "_event"))
    assert len(on_events) == len(hits) and set(on_events["type"]) == {"TurnCompleted"}


def test_call_and_event_scanners_fill_in_where_they_were_called(runs: anb.TranscriptCollection) -> None:
    per_call = anb.Scanner("errors", lambda c: c.status == "error" and f"{c.tool} failed", over="call")
    per_event = anb.Scanner("finished", lambda ev: ev.type == "RunFinished", over="event")
    hits = anb.scan(runs, per_call, per_event)
    errors = hits[hits["scanner"] == "errors"]
    calls = runs.frames.calls()
    failed = calls[calls["status"] == "error"]
    assert sorted(zip(errors["run_id"].astype(str), errors["call_id"], errors["seq"], strict=True)) == sorted(
        zip(failed["run_id"].astype(str), failed["call_id"], failed["seq"], strict=True))
    assert set(errors["message"]) == {"lookup failed"}
    finished = hits[hits["scanner"] == "finished"]
    events = runs.frames.events()
    last = events[events["type"] == "RunFinished"]
    assert finished["seq"].tolist() == last["seq"].tolist() and finished["turn"].tolist() == last["turn"].tolist()


def test_answers_become_hits() -> None:
    from agentnb.scanners._core import normalize

    assert normalize(None) == [] and normalize(False) == []
    assert normalize(True, seq=3) == [anb.Hit(seq=3)]
    assert normalize("found", call_id="c") == [anb.Hit(message="found", call_id="c")]
    assert normalize([anb.Hit(score=2), 7]) == [anb.Hit(score=2.0), anb.Hit(value=7)]
    assert normalize({"k": {1, 2}})[0].value == {"k": [1, 2]}  # JSON-safe, as a cached hit reads back


# -- the cache --------------------------------------------------------------------------------------------------


def test_a_rescan_of_unchanged_runs_calls_no_scanner(runs: anb.TranscriptCollection, tmp_path: Path) -> None:
    counter = Counter()
    scanner = anb.Scanner("counter", counter)
    first = anb.scan(runs, scanner, cache=tmp_path)
    assert sorted(counter.calls) == sorted(runs.run_ids)
    again = anb.scan(runs, scanner, cache=tmp_path)
    assert sorted(counter.calls) == sorted(runs.run_ids)  # not one call more
    pd.testing.assert_frame_equal(first, again)
    runs.save_jsonl(tmp_path / "saved")
    anb.scan(tmp_path / "saved", scanner, cache=tmp_path)  # the same runs read from files: the same digests
    assert len(counter.calls) == 6

    grown = anb.TranscriptCollection([*runs, _run(9, fail=True)])
    anb.scan(grown, scanner, cache=tmp_path)
    assert counter.calls[6:] == ["r9"]  # only what changed
    anb.scan(grown, anb.Scanner("counter", counter, version="2"), cache=tmp_path)
    assert len(counter.calls) == 14  # a new version scans everything again


def test_a_changed_run_is_scanned_again(tmp_path: Path) -> None:
    counter = Counter()
    scanner = anb.Scanner("counter", counter)
    t = _run(1)
    anb.scan(t, scanner, cache=tmp_path)
    longer = anb.Transcript(t.events[:-1])  # the same run id, other events: another digest
    assert digest(longer) != digest(t)
    anb.scan(longer, scanner, cache=tmp_path)
    anb.scan(t, scanner, cache=tmp_path)
    assert counter.calls == ["r1", "r1"]


def test_an_unreadable_cache_file_is_a_miss(tmp_path: Path) -> None:
    counter = Counter()
    scanner = anb.Scanner("counter", counter)
    t = _run(0, fail=True)
    first = anb.scan(t, scanner, cache=tmp_path)
    (file,) = tmp_path.rglob("*.json")
    assert json.loads(file.read_text())["run_id"] == "r0"
    file.write_text(file.read_text()[:20])  # cut short
    again = anb.scan(t, scanner, cache=tmp_path)
    assert len(counter.calls) == 2
    pd.testing.assert_frame_equal(first, again)


def test_a_scan_stopped_half_way_resumes_where_it_stopped(runs: anb.TranscriptCollection, tmp_path: Path) -> None:
    seen: list[str] = []

    def stops_at_r3(t: anb.Transcript) -> bool:
        if t.run_id == "r3" and "r3" not in seen:
            seen.append("r3")
            raise KeyboardInterrupt
        seen.append(t.run_id or "")
        return True

    scanner = anb.Scanner("stops", stops_at_r3)
    with pytest.raises(KeyboardInterrupt):
        anb.scan(runs, scanner, cache=tmp_path, concurrency=1)
    assert seen == ["r0", "r1", "r2", "r3"]
    hits = anb.scan(runs, scanner, cache=tmp_path, concurrency=1)
    assert seen[4:] == ["r3", "r4", "r5"]  # the runs finished before the stop are not scanned again
    assert hits["run_id"].tolist() == runs.run_ids


def test_a_failing_scanner_is_reported_once_the_others_are_cached(runs: anb.TranscriptCollection,
                                                                   tmp_path: Path) -> None:
    broken = {"r2", "r4"}
    counter = Counter()

    def flaky(t: anb.Transcript) -> Any:
        if t.run_id in broken:
            raise ValueError(f"cannot read {t.run_id}")
        return counter(t)

    scanner = anb.Scanner("flaky", flaky)
    with pytest.raises(ScanError, match="2 scanner run") as info:
        anb.scan(runs, scanner, cache=tmp_path)
    assert sorted(info.value.errors) == ["scanner 'flaky' on run 'r2': ValueError: cannot read r2",
                                         "scanner 'flaky' on run 'r4': ValueError: cannot read r4"]
    assert "scan again" in str(info.value)
    broken.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScanWarning)
        hits = anb.scan(runs, scanner, cache=tmp_path)
    assert sorted(counter.calls) == ["r0", "r1", "r2", "r3", "r4", "r5"]  # r2 and r4 only, the second time
    assert set(hits["run_id"].astype(str)) == {"r0", "r3"}
    broken.add("r0")
    with pytest.warns(ScanWarning, match="r0"):
        skipped = anb.scan(runs, anb.Scanner("flaky", flaky, version="2"), on_error="skip")
    assert set(skipped["run_id"].astype(str)) == {"r3"}


# -- concurrency and progress -----------------------------------------------------------------------------------


def test_runs_are_scanned_concurrently(runs: anb.TranscriptCollection) -> None:
    def together(timeout: float) -> anb.Scanner:
        barrier = threading.Barrier(4, timeout=timeout)

        def waits_for_three_others(t: anb.Transcript) -> bool:
            barrier.wait()  # passes only when four runs are being scanned at once
            return True

        return anb.Scanner("together", waits_for_three_others)

    assert len(anb.scan(runs[:4], together(10), concurrency=4)) == 4
    with pytest.raises(ScanError, match="BrokenBarrierError"):
        anb.scan(runs[:4], together(0.3), concurrency=2)


def test_a_progress_bar_counts_runs_and_hits(runs: anb.TranscriptCollection, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    anb.scan(runs, Counter(), progress=True)
    err = capsys.readouterr().err
    assert "scan" in err and "6/6" in err and "hits=4" in err


# -- a question to a model ----------------------------------------------------------------------------------------


def _judge() -> anb.ScriptedModel:
    """A scripted judge: answers from what the run's text shows (an error result or not)."""

    def answer(messages: Any) -> dict[str, Any]:
        return {"tool_calls": [{"name": "final_result", "arguments": {"result": ", error]" in messages[0].text}}]}

    return anb.ScriptedModel([answer])


def test_a_question_is_answered_offline_with_a_typed_answer(runs: anb.TranscriptCollection, tmp_path: Path) -> None:
    question = anb.scanner.ask("Did a tool fail?", model=_judge())
    hits = anb.scan(runs, question, cache=tmp_path)
    assert hits["scanner"].tolist() == ["ask:did_a_tool_fail"] * 6
    assert hits["value"].tolist() == [True, False, False, True, False, False]  # r0 and r3 failed
    assert hits["seq"].isna().all()
    again = anb.scan(runs, question, cache=tmp_path)
    pd.testing.assert_frame_equal(hits, again)
    other = anb.scanner.ask("Did a tool fail at all?", model=_judge())
    assert other.version != question.version and other.name != question.name


class Verdict(pydantic.BaseModel):
    ignored_error: bool
    severity: int = pydantic.Field(ge=1, le=3)


def test_a_pydantic_answer_through_the_official_sdk_and_the_emulator(runs: anb.TranscriptCollection) -> None:
    def answer(messages: Any) -> dict[str, Any]:
        failed = ", error]" in messages[0].text
        return {"text": json.dumps({"ignored_error": failed, "severity": 3 if failed else 1})}

    with Emulator() as emu:
        emu.play([answer] * 6)
        model = anb.OpenAIChatModel(emu.client("openai_chat"), model="gpt-4.1")
        hits = anb.scan(runs, anb.scanner.ask("Did the model ignore a tool error?", model=model, answer=Verdict),
                        concurrency=2)
        assert len(emu.requests) == 6 and all(r.status == 200 for r in emu.requests)
        assert "response_format" in emu.requests[0].body  # asked in the API's structured-output mode
    by_run = dict(zip(hits["run_id"].astype(str), hits["value"], strict=True))
    assert by_run["r0"] == {"ignored_error": True, "severity": 3} and by_run["r1"] == {"ignored_error": False,
                                                                                        "severity": 1}


def test_a_question_without_a_valid_answer_is_a_scanner_error(runs: anb.TranscriptCollection) -> None:
    never = anb.ScriptedModel([{"text": "maybe"}] * 3)
    with pytest.raises(ScanError, match="the question got no answer: the run ended FAILED"):
        anb.scan(runs[:1], anb.scanner.ask("Did a tool fail?", model=never, retries=1))
    with pytest.raises(ValueError, match="needs a question"):
        anb.scanner.ask("  ", model=never)


def test_the_run_text_shows_calls_results_and_the_end() -> None:
    text = run_text(_run(0, fail=True))
    assert text.splitlines()[0] == "[user] Where is order bad-0?"
    assert '[assistant calls lookup (call_1_1)] {"order_id": "bad-0"}' in text
    assert "[result of lookup (call_1_1), error]" in text
    assert text.endswith("[the run ended COMPLETED]") or "[the run ended COMPLETED:" in text


def test_the_docs_list_every_column_and_every_builtin() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "scanners.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", doc, flags=re.MULTILINE)
    assert rows == [(name, dtype) for name, dtype, _ in COLUMNS]
    for s in anb.scanner.builtins():
        assert f"| `{s.name}(" in doc and f"| `{s.name}" in doc.split("Precision and recall")[1], s.name


def _stories() -> list[anb.Transcript]:
    out = []
    for name in ("weather", "parallel", "calculator", "malformed", "looping", "refund"):
        loop = anb.Loop(model=anb.ScriptedModel.story(name), tools=anb.stories.tools(name), max_turns=4)
        run = loop.start("go", run_id=f"story-{name}").run()
        if run.pending_approvals():
            run.approve(run.pending_approvals()[0].call_id)
            run.run()
        out.append(run.transcript)
    return out


def test_frames_built_for_many_runs_at_once_give_the_hits_of_each_run_alone(runs: anb.TranscriptCollection) -> None:
    every = anb.TranscriptCollection([*runs, *_stories()])
    together = anb.scan(every, concurrency=2)
    alone = pd.concat([anb.scan(t) for t in every], ignore_index=True)
    assert len(together) > 10 and set(together["scanner"]) >= {"repeated_calls", "ungrounded_arguments"}
    for df in (together, alone):
        df["run_id"] = df["run_id"].astype(str)
        df["scanner"] = df["scanner"].astype(str)
    order = ["run_id", "scanner", "seq", "call_id", "message"]
    pd.testing.assert_frame_equal(together.sort_values(order).reset_index(drop=True),
                                  alone.sort_values(order).reset_index(drop=True))


def test_nothing_of_a_scan_outlives_it() -> None:
    import gc
    import weakref

    from agentnb.scanners import _views as views

    t = _run(5, fail=True)
    ref = weakref.ref(t)
    anb.scan(anb.TranscriptCollection([t, _run(6)]), concurrency=1)
    assert views._ENTRIES == {}
    del t
    gc.collect()
    assert ref() is None


def test_a_stop_in_one_worker_stops_the_others(tmp_path: Path) -> None:
    many = anb.TranscriptCollection([_run(i) for i in range(40)])
    seen: list[str] = []
    lock = threading.Lock()

    def stops_at_r3(t: anb.Transcript) -> bool:
        with lock:
            first = t.run_id == "r3" and "r3" not in seen
            seen.append(t.run_id or "")
        if first:
            raise KeyboardInterrupt
        time.sleep(0.01)
        return True

    scanner = anb.Scanner("stops", stops_at_r3)
    with pytest.raises(KeyboardInterrupt):
        anb.scan(many, scanner, cache=tmp_path, concurrency=4)
    assert len(seen) < 30  # the workers ended after their run; the chunks not started never ran
    before = len(seen)
    assert len(anb.scan(many, scanner, cache=tmp_path, concurrency=4)) == 40
    assert len(seen) - before == 40 - (before - 1)  # every run but the ones finished, r3 again
