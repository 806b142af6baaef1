"""Transcripts: lossless JSONL round trips, folding, time travel, refusing broken files; plus a property test."""

from __future__ import annotations

import codecs
import dataclasses
import gc
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._transcript import TranscriptRecovered
from agentnb.events import event_to_dict, event_to_json

S = anb.LoopState


def finished_run(name: str = "malformed", **options: Any) -> anb.Run:
    loop = anb.Loop(model=anb.ScriptedModel.story(name, stream=True), tools=anb.stories.tools(name), **options)
    return loop.start("go").run()


def test_save_load_round_trip_is_lossless(tmp_path: Path) -> None:
    run = finished_run()
    path = tmp_path / "run.jsonl"
    run.transcript.save(path)
    loaded = anb.Transcript.load(path)
    assert [event_to_dict(e) for e in loaded] == [event_to_dict(e) for e in run.events]
    assert loaded.messages == run.messages and loaded.state is run.state is S.COMPLETED
    folded = loaded.fold()
    assert folded.output == run.output and folded.tool_calls == run.view.tool_calls == 3
    assert folded.input_tokens == run.view.input_tokens
    assert path.read_text(encoding="utf-8").count("\n") == len(run.events)


def test_paused_run_round_trips_and_keeps_the_pending_call(tmp_path: Path) -> None:
    run = finished_run("refund")
    run.transcript.save(tmp_path / "p.jsonl")
    folded = anb.Transcript.load(tmp_path / "p.jsonl").fold()
    assert folded.state is S.WAITING_APPROVAL
    assert [c.name for c in folded.pending_approvals()] == ["create_refund"]


def test_time_travel_folds_a_prefix() -> None:
    run = finished_run("weather")
    first_tool = next(e for e in run.events if e.type == "ToolFinished")
    before = run.transcript.at(first_tool.seq)
    assert before.state is S.EXECUTING and [m.role for m in before.messages] == ["user", "assistant"]
    assert run.transcript.at(len(run.events) - 1).messages == run.messages


def test_broken_files_are_refused_naming_the_line(tmp_path: Path) -> None:
    run = finished_run("weather")
    path = tmp_path / "t.jsonl"
    run.transcript.save(path)
    lines = path.read_text(encoding="utf-8").splitlines()

    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:3], '{"type": "ToolStarted", "seq": 3}', *lines[4:]]), encoding="utf-8")
    with pytest.raises(anb.TranscriptError, match=r"bad\.jsonl:4: event 3 \(ToolStarted\) is not a valid") as info:
        anb.Transcript.load(bad)
    assert (info.value.seq, info.value.event_type) == (3, "ToolStarted")

    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text("\n".join([lines[0], lines[2], lines[1], *lines[3:]]), encoding="utf-8")
    with pytest.raises(anb.TranscriptError, match="do not form a valid run"):
        anb.Transcript.load(swapped)

    tampered = tmp_path / "tampered.jsonl"
    doc = json.loads(lines[2])
    doc["state"] = "COMPLETED"
    tampered.write_text("\n".join([*lines[:2], json.dumps(doc), *lines[3:]]), encoding="utf-8")
    with pytest.raises(anb.TranscriptError, match="illegal transition"):
        anb.Transcript.load(tampered)


def test_events_frame_has_one_row_per_event() -> None:
    run = finished_run("parallel")
    df = run.transcript.to_pandas()
    assert len(df) == len(run.events) and list(df["seq"]) == list(range(len(run.events)))
    assert str(df["ts"].dtype) == "datetime64[ns, UTC]" or str(df["ts"].dtype).startswith("datetime64")
    assert df["type"].dtype == "category" and str(df["turn"].dtype) == "Int64"
    tools = df[df["type"] == "ToolFinished"]
    assert list(tools["name"]) == ["get_weather"] * 3
    assert json.loads(tools["payload"].iloc[0])["status"] == "ok"


# -- property: any script ends in a terminal state or a pause, answers every call once, and round-trips --

call = st.fixed_dictionaries({
    "name": st.sampled_from(["add", "boom", "missing"]),
    "arguments": st.one_of(
        st.fixed_dictionaries({"a": st.integers(-5, 5), "b": st.integers(-5, 5)}),
        st.just({"message": "x"}),
        st.just('{"a": 1,'),
    ),
})
turn_spec = st.one_of(
    st.fixed_dictionaries({"tool_calls": st.lists(call, min_size=1, max_size=4)}),
    st.just({"text": "done"}),
    st.just({"text": "cut", "finish": "length"}),
    st.just({"refusal": "no"}),
    st.just({"error": {"status": 500}}),
    st.just({"error": {"status": 400}}),
    st.just({"text": "partial", "interrupt": True}),
)


@anb.tool(name="add")
def _add(a: int, b: int) -> int:
    """Add."""
    return a + b


@anb.tool(name="boom")
def _boom(message: str) -> str:
    """Fail."""
    raise ValueError(message)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(turn_spec, min_size=1, max_size=8), stream=st.booleans(), max_turns=st.integers(1, 6),
       policy=st.sampled_from(["finalize", "stop"]))
def test_any_script_ends_well_and_round_trips(
    tmp_path: Path, script: list[dict[str, Any]], stream: bool, max_turns: int, policy: Any
) -> None:
    model = anb.ScriptedModel(script, stream=stream, chunk_size=3)
    loop = anb.Loop(model=model, tools=[_add, _boom], max_turns=max_turns, on_max_turns=policy,
                    max_retries=1, retry_base_delay=0)
    run = loop.start("q").run()
    assert run.state.is_terminal
    # every call answered exactly once, in order, right after the assistant message that made it
    msgs = run.messages
    for i, m in enumerate(msgs):
        if m.role == "assistant" and m.tool_calls and i + 1 < len(msgs):
            nxt = msgs[i + 1]
            if nxt.role == "tool":
                assert [r.call_id for r in nxt.tool_results] == [c.call_id for c in m.tool_calls]
    answered = [r.call_id for m in msgs if m.role == "tool" for r in m.tool_results]
    assert len(answered) == len(set(answered))
    assert run.view.turns_completed <= max_turns + 1
    path = tmp_path / f"{run.run_id}.jsonl"
    run.transcript.save(path)
    loaded = anb.Transcript.load(path)
    assert loaded.messages == run.messages and loaded.state is run.state


# -- transcript files under crashes and foreign editors -----------------------------------------------------


def test_a_failed_save_leaves_the_previous_file_and_no_temporary_file(tmp_path: Path) -> None:
    run = finished_run()
    path = tmp_path / "run.jsonl"
    run.transcript.save(path)
    before = path.read_bytes()
    broken = list(run.events)
    cycle: list[Any] = []
    cycle.append(cycle)
    finished = next(e for e in broken if e.type == "ToolFinished")
    index = broken.index(finished)
    broken[index] = dataclasses.replace(finished, value=cycle)
    with pytest.raises(anb.TranscriptError, match=rf"event {finished.seq} \(ToolFinished\) cannot be written"):
        anb.Transcript(broken).save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]


def test_save_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("old\n", encoding="utf-8")
    path.chmod(0o640)
    finished_run().transcript.save(path)
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    run = finished_run()
    path = tmp_path / "bom.jsonl"
    run.transcript.save(path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as some Windows editors save UTF-8
    assert [event_to_dict(e) for e in anb.Transcript.load(path)] == [event_to_dict(e) for e in run.events]


def test_a_decoding_error_names_the_line_and_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    finished_run().transcript.save(path)
    lines = path.read_bytes().split(b"\n")
    at = lines[2].index(b"go") if b"go" in lines[2] else 10
    lines[2] = lines[2][:at] + b"\xe9" + lines[2][at + 1:]
    path.write_bytes(b"\n".join(lines))
    offset = len(lines[0]) + len(lines[1]) + 2 + at
    with pytest.raises(anb.TranscriptError) as info:
        anb.Transcript.load(path)
    message = str(info.value)
    assert (f"latin1.jsonl:3: not UTF-8 text: byte 0xe9 at byte {at + 1} of the line (byte {offset} of the file"
            in message)


def test_a_truncated_last_line_is_refused_unless_recovering(tmp_path: Path) -> None:
    run = finished_run()
    path = tmp_path / "crash.jsonl"
    run.transcript.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 30])  # a crash while the last event was written
    with pytest.raises(anb.TranscriptError, match=r"load\(path, recover=True\) keeps the events before it"):
        anb.Transcript.load(path)
    with pytest.warns(TranscriptRecovered, match=rf"kept {len(run.events) - 1} events"):
        recovered = anb.Transcript.load(path, recover=True)
    assert [event_to_dict(e) for e in recovered] == [event_to_dict(e) for e in run.events[:-1]]
    assert recovered.dropped is not None and recovered.dropped.startswith(f"line {len(run.events)} (")
    path.write_bytes(data)
    assert anb.Transcript.load(path, recover=True).dropped is None


def test_recover_does_not_hide_a_broken_line_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "middle.jsonl"
    finished_run().transcript.save(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[3] = lines[3][:20]
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(anb.TranscriptError, match=r"middle.jsonl:4: not a valid event"):
        anb.Transcript.load(path, recover=True)


# -- the one-pass read of a whole file ----------------------------------------------------------------------


@anb.tool
def _odd(x: int) -> dict[str, Any]:
    """Answer with values JSON writes in its own ways: NaN, infinity, text beyond ASCII."""
    return {"nan": float("nan"), "inf": float("-inf"), "x": x, "ü": "日本"}


def test_the_one_pass_read_gives_the_events_the_line_by_line_read_gives(tmp_path: Path) -> None:
    from agentnb._transcript import _careful_read, _quick_read

    script: list[Any] = [{"text": "half \ud83d", "tool_calls": [{"name": "_odd", "arguments": {"x": 1}}]},
                         {"text": "done"}]
    run = anb.Loop(model=anb.ScriptedModel(script, stream=True, chunk_size=2), tools=[_odd]).start("go").run()
    path = tmp_path / "odd.jsonl"
    run.transcript.save(path)
    lines = path.read_bytes().split(b"\n")
    assert any(b"\\ud83d" in line for line in lines) and any(b"NaN" in line for line in lines)
    # a byte order mark, CRLF endings, blank lines and no newline at the end: all read as before
    data = codecs.BOM_UTF8 + b"\r\n\n".join(lines).rstrip(b"\n")
    quick = _quick_read(data)
    careful, dropped = _careful_read(data, path, recover=False)
    assert quick is not None and dropped is None
    assert [event_to_json(e) for e in quick] == [event_to_json(e) for e in careful] == [
        event_to_json(e) for e in run.events]  # as text: NaN is not equal to itself
    assert '"half \\ud83d"' in event_to_json(next(e for e in quick if e.type == "TurnCompleted"))
    # one bad line anywhere: the one-pass read gives up, so load reads line by line and names it
    for i in (0, len(lines) // 2, len(lines) - 2):
        broken = b"\n".join([*lines[:i], lines[i][:-3], *lines[i + 1:]])
        assert _quick_read(broken) is None
        bad = tmp_path / f"bad{i}.jsonl"
        bad.write_bytes(broken)
        with pytest.raises(anb.TranscriptError, match=rf"bad{i}\.jsonl:{i + 1}: "):
            anb.Transcript.load(bad)


@pytest.mark.parametrize("enabled", [True, False])
def test_loading_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path, enabled: bool) -> None:
    run = finished_run("weather")
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    run.transcript.save(good)
    bad.write_text(good.read_text(encoding="utf-8").replace('"state":"COMPLETED"', '"state":"NEW"'),
                   encoding="utf-8")
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert len(anb.Transcript.load(good)) == len(run.events)
        assert gc.isenabled() is enabled
        with pytest.raises(anb.TranscriptError):
            anb.Transcript.load(bad)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_only_a_big_paused_build_ages_what_it_built() -> None:
    """A long load's objects go to the oldest generation (no walk of them later); a small build's stay young,
    so the process's own young garbage is not made old by every small load."""
    from agentnb._gc import AGE_AFTER, gc_paused

    def oldest(obj: object) -> bool:
        return any(o is obj for o in gc.get_objects(generation=2))

    gc.collect()
    with gc_paused():
        small = [[] for _ in range(1000)]
    assert not oldest(small[-1])
    with gc_paused():  # a margin over the threshold: the count is the process's, and another thread may free a few
        big = [[] for _ in range(AGE_AFTER + AGE_AFTER // 10)]
    assert oldest(big[-1])


def test_a_pause_ending_in_another_thread_leaves_the_collector_off_under_this_one() -> None:
    """The collector is one per process: a debugger's background index ending its pause must not turn it on
    while a load in the cell's thread is still building (it would walk the growing heap again and again)."""
    import threading

    from agentnb._gc import gc_paused

    was = gc.isenabled()
    gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def background() -> None:
        with gc_paused():
            inside.set()
            leave.wait(10)

    try:
        worker = threading.Thread(target=background)
        worker.start()
        assert inside.wait(10)
        with gc_paused():  # this thread's build begins while the other one's pause is open
            leave.set()
            worker.join(10)  # ...and the other one's ends first
            assert not gc.isenabled()
        assert gc.isenabled()  # the last pause to end turns it back on
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that disabled it keeps it disabled
    finally:
        leave.set()
        gc.enable() if was else gc.disable()
