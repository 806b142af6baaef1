"""``anb.iter_trace``: the transcripts of ``anb.import_trace``, yielded as each invocation is done.

Every trace the otel tests import is read both ways (as it is, and written as JSON Lines a span or a batch to a
line) and must give the same transcripts; the window rule of :mod:`agentnb.otel._stream` is checked on both of
its sides (a span just inside the window joins its invocation, one past it does not); the spans held stay those
of the invocations going on; and hostile lines keep the notes and errors of ``import_trace``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import agentnb as anb
from agentnb.otel._spans import Notes, chunks
from agentnb.otel._stream import WINDOW, _Stream
from tests.otel_corpus import _VALID, CASES, Case, Refused, build
from tests.test_otel import TOOLS, provider, run_script, scripts

WINDOWS = (0, 1, 3, WINDOW, None)


def lacks(t: anb.Transcript) -> list[str]:
    said: list[str] = t.events[0].settings["lacks"]
    return said


def canonical(ts: list[anb.Transcript]) -> list[str]:
    """The transcripts whatever their order (the stream yields them as they are done)."""
    return sorted(repr(t.events) for t in ts)


def without_lacks(ts: list[anb.Transcript]) -> list[str]:
    out = []
    for t in ts:
        events = copy.copy(t.events)
        events[0] = copy.copy(events[0])
        events[0].settings = {k: v for k, v in events[0].settings.items() if k != "lacks"}
        out.append(repr(events))
    return sorted(out)


def spans_of(doc: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """Each span of a document with its resource and scope."""
    return [(rs, ss, s) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def as_lines(doc: dict[str, Any], per_line: int) -> str:
    """The document as the Collector's file exporter writes it: ``per_line`` spans to a document, one a line."""
    items = spans_of(doc)
    lines = []
    for i in range(0, len(items), per_line):
        part = items[i:i + per_line]
        lines.append(json.dumps({"resourceSpans": [
            {**{k: v for k, v in rs.items() if k != "scopeSpans"}, "scopeSpans": [
                {**{k: v for k, v in ss.items() if k != "spans"}, "spans": [s]}]} for rs, ss, s in part]}))
    return "\n".join(lines) + "\n"


def same(source: Any, *, exact: bool = True, windows: tuple[int | None, ...] = WINDOWS) -> list[anb.Transcript]:
    """``source`` through both: for each window, the same transcripts as ``import_trace`` (at the end, also
    in its order); ``exact=False``: notes read after a transcript was yielded may be missing from its lacks."""
    whole = anb.import_trace(source)
    for window in windows:
        streamed = list(anb.iter_trace(source, window=window))
        if window is None:
            assert [t.events for t in streamed] == [t.events for t in whole]
        elif exact:
            assert canonical(streamed) == canonical(whole), window
        else:
            assert without_lacks(streamed) == without_lacks(whole), window
            wanted = {t.run_id: set(lacks(t)) for t in whole}
            assert all(set(lacks(t)) <= wanted[t.run_id] for t in streamed), window
    return whole


def write(tmp_path: Path, text: str, name: str = "trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- the same transcripts ----------------------------------------------------------------------------------------


def test_the_valid_document_and_its_json_lines_give_the_same_transcripts(tmp_path: Path) -> None:
    doc = copy.deepcopy(_VALID)
    [t] = same(doc)
    assert t.state is anb.LoopState.COMPLETED
    for per_line in (1, 2, 100):
        text = as_lines(doc, per_line)
        assert canonical(same(text)) == canonical(same(write(tmp_path, text))) == canonical([t])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_hostile_document_streams_as_it_imports(case: Case, tmp_path: Path) -> None:
    doc = build(case)
    if isinstance(case.outcome, Refused):
        with pytest.raises(anb.TranscriptError, match=case.outcome.match) as whole:
            anb.import_trace(doc)
        for window in WINDOWS:
            with pytest.raises(anb.TranscriptError) as streamed:
                list(anb.iter_trace(doc, window=window))
            assert str(streamed.value) == str(whole.value)
        return
    same(doc, exact=not isinstance(doc, str | bytes))  # text may be JSON Lines: a later line's note comes later
    if isinstance(doc, dict) and case.name not in ("gigantic strings", "attribute nested 5000 deep"):
        try:
            text = as_lines(doc, 1)
        except (TypeError, KeyError, AttributeError):  # broken above its spans: no spans to write a line each
            return
        if not text.strip():
            return
        path = write(tmp_path, text)
        if case.name != "every span its own parent":
            same(path, exact=False)
            return
        # no span has an agent above it, and none waits for a parent: with window 0, each is its trace's
        # spans with no agent above them as soon as it is read (a transcript each, not one)
        same(path, exact=False, windows=(1, 3, WINDOW, None))
        assert len(list(anb.iter_trace(path, window=0))) > len(anb.import_trace(path))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_exported_runs_stream_as_they_import(case: Any) -> None:
    script, options = case
    tp, spans = provider()
    tracing = anb.otel.Tracing(tp, include_content=True)
    for _ in range(3):
        run_script(script, tracer_provider=tracing, **options)
    doc = anb.otel.to_otlp_json(spans.get_finished_spans())
    assert len(same(doc)) == 3
    for per_line in (1, 4):
        assert len(same(as_lines(doc, per_line))) == 3


def test_paused_compressed_and_every_outcome_runs_stream_as_they_import() -> None:
    tp, spans = provider()
    paused = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund")).start("42").run()
    anb.otel.export(paused.transcript, tp, include_content=True)
    budget = anb.Budget(context_window=400, compress_at=0.5, keep_pairs=1, max_no_progress=None, max_turns=12)
    long = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]} for i in range(8)]
    anb.Loop(model=anb.ScriptedModel([*long, {"text": "Done."}]), tools=TOOLS, system="Be brief.", budget=budget,
             tracer_provider=anb.otel.Tracing(tp, include_content=True)).start("Help me.").run()
    every = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "nope", "arguments": {}},
                             {"name": "boom", "arguments": {"x": "y"}},
                             {"name": "refund", "arguments": {"order_id": "42"}}]}, {"text": "5."}]
    run_script(every, tracer_provider=anb.otel.Tracing(tp, include_content=True))
    run_script(every, tracer_provider=tp)  # content off
    doc = anb.otel.to_otlp_json(spans.get_finished_spans())
    assert len(same(spans)) == len(same(doc)) == len(same(as_lines(doc, 1))) == 4


def test_a_real_pydantic_ai_trace_streams_as_it_imports() -> None:
    pydantic_ai = pytest.importorskip("pydantic_ai")
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    tp, spans = provider()
    agent = pydantic_ai.Agent(TestModel(), instructions="Be brief.")
    agent.instrument = InstrumentationSettings(tracer_provider=tp)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: 18 C"

    for _ in range(2):
        agent.run_sync("Weather?")
    doc = anb.otel.to_otlp_json(spans.get_finished_spans())
    assert len(same(doc)) == len(same(as_lines(doc, 1))) == 2


# -- early, and bounded ------------------------------------------------------------------------------------------


def many_runs(n: int, tp: Any = None) -> dict[str, Any]:
    """``n`` runs of one call and an answer, exported with content, as one document (spans in the order they
    ended, as an SDK exports them)."""
    own, spans = provider()
    tracing = anb.otel.Tracing(tp or own, include_content=True)
    for i in range(n):
        run_script([{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]}, {"text": f"{i + 1}"}],
                   tracer_provider=tracing)
    return anb.otel.to_otlp_json(spans.get_finished_spans())


def test_invocations_are_yielded_before_the_end_and_the_spans_held_stay_few(tmp_path: Path) -> None:
    doc = many_runs(40)
    per_run = len(spans_of(doc)) // 40
    text = as_lines(doc, 3)
    broken = f"line {len(text.splitlines()) + 1} is not JSON"
    path = write(tmp_path, text + "{cut off\n")
    whole = anb.import_trace(path)
    for window in (0, 2 * per_run):
        stream = _Stream(window)
        held, out = [], []
        for t in stream.run(chunks(path, stream.read)):
            held.append(len(stream.live))
            out.append(t)
        assert without_lacks(out) == without_lacks(whole)
        assert max(held) <= window + per_run + 3  # an invocation, the window, a line: not the file
        # the broken last line is read after the first transcripts were yielded: they do not say so (the last
        # ones do: a line is read before the groups are judged)
        said = [any(broken in x for x in lacks(t)) for t in out]
        assert not said[0] and said[-1], said
    assert all(any(broken in x for x in lacks(t)) for t in whole)


def test_runs_written_at_once_interleaved_are_done_each_at_its_agent_span(tmp_path: Path) -> None:
    """Concurrent runs of one process, one starting every two spans: their spans interleave, each run's own in
    the order they ended; with window 0 what is held is the runs going on (about two), not the file."""
    doc = many_runs(30)
    by_trace: dict[str, list[Any]] = {}
    for item in spans_of(doc):
        by_trace.setdefault(item[2]["traceId"], []).append(item)
    timed = [(2 * k + j, k, item) for k, run in enumerate(by_trace.values()) for j, item in enumerate(run)]
    mixed = [item for _, _, item in sorted(timed, key=lambda t: t[:2])]
    doc["resourceSpans"] = [{**rs, "scopeSpans": [{**ss, "spans": [s]}]} for rs, ss, s in mixed]
    path = write(tmp_path, as_lines(doc, 3))
    assert len(same(path)) == 30
    stream = _Stream(0)
    held = [len(stream.live) for _ in stream.run(chunks(path, stream.read))]
    per_run = len(mixed) // 30
    assert len(held) == 30 and max(held) <= 3 * per_run + 2 * 3, held  # three runs going on, two lines


def test_a_span_inside_the_window_joins_its_invocation_and_one_past_it_does_not(tmp_path: Path) -> None:
    doc = many_runs(6)
    items = spans_of(doc)
    first_trace = items[0][2]["traceId"]
    tool = next(i for i, (_, _, s) in enumerate(items) if s["traceId"] == first_trace and s["name"].startswith("exec"))
    late = items.pop(tool)  # the first run's tool span, written after the others
    items.append(late)
    agent = next(i for i, (_, _, s) in enumerate(items) if s["traceId"] == first_trace and s["name"].startswith("inv"))
    distance = len(items) - 1 - agent  # the late span is the distance-th read after its agent span
    doc["resourceSpans"] = [{**rs, "scopeSpans": [{**ss, "spans": [s]}]} for rs, ss, s in items]
    path = write(tmp_path, as_lines(doc, 1))
    whole = anb.import_trace(path)
    assert len(whole) == 6 and distance > 10
    inside = list(anb.iter_trace(path, window=distance))
    assert canonical(inside) == canonical(whole)
    past = list(anb.iter_trace(path, window=distance - 1))
    assert len(past) == 7  # the late tool span comes back as its trace's spans with no agent above them
    alone = [t for t in past if t.events[0].settings.get("trace_id") is None]
    assert len(alone) == 1 and [e.type for e in alone[0].events] == ["RunStarted"]
    mine = next(t for t in past if t.run_id == whole[0].run_id)
    assert mine.events != whole[0].events  # its call has no tool span now: its timing is not known
    assert any("tool timings" in x for x in lacks(mine))


def test_spans_waiting_for_a_parent_that_never_comes_are_rebuilt_at_the_end(tmp_path: Path) -> None:
    doc = many_runs(3)
    items = spans_of(doc)
    agents = [s for _, _, s in items if s["name"].startswith("invoke_agent")]
    doc["resourceSpans"] = [{**rs, "scopeSpans": [{**ss, "spans": [s]}]} for rs, ss, s in items if s is not agents[0]]
    path = write(tmp_path, as_lines(doc, 1))
    out = same(path)
    assert len(out) == 3 and sum(t.events[0].settings.get("trace_id") is None for t in out) == 1


def test_a_repeated_span_id_within_the_window_is_left_out_with_a_note(tmp_path: Path) -> None:
    doc = many_runs(2)
    items = spans_of(doc)
    at, (rs, ss, chat) = next((i, item) for i, item in enumerate(items) if item[2]["name"].startswith("chat"))
    items.insert(at + 1, (rs, ss, {**chat, "name": "chat again"}))  # before its agent span: inside any window
    doc["resourceSpans"] = [{**r, "scopeSpans": [{**s, "spans": [x]}]} for r, s, x in items]
    out = same(write(tmp_path, as_lines(doc, 1)))
    assert any(re.search(r"span id .* appears twice: the second, 'chat again'", x) for t in out for x in lacks(t))


# -- hostile lines ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line, said", [
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab', "is not JSON"),  # a line cut short
    ("not json at all", "is not JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"resource_logs": []}', "no 'resourceSpans'"),
])
def test_a_hostile_line_is_a_note_and_the_rest_is_read(line: str, said: str, tmp_path: Path) -> None:
    good = as_lines(many_runs(3), 2).splitlines()
    path = write(tmp_path, "\n".join([*good[:2], line, *good[2:]]) + "\n")
    for window in WINDOWS:
        out = list(anb.iter_trace(path, window=window))
        assert len(out) == 3
        assert any(f"line 3 {said}" in x or ("line 3" in x and said in x) for t in out for x in lacks(t)), window
    same(path, exact=False)


def test_nothing_readable_is_a_transcript_error(tmp_path: Path) -> None:
    path = write(tmp_path, '{"resource_logs": []}\n{cut\nnot json\n' + "[" * 100_000 + "\n")
    with pytest.raises(anb.TranscriptError, match="no span could be read: line 1 has no 'resourceSpans'") as whole:
        anb.import_trace(path)
    for window in WINDOWS:
        with pytest.raises(anb.TranscriptError) as streamed:
            list(anb.iter_trace(path, window=window))
        assert str(streamed.value) == str(whole.value)


def test_errors_of_the_source_are_raised_on_the_call_and_a_bad_byte_when_it_is_read(tmp_path: Path) -> None:
    with pytest.raises(anb.TranscriptError, match="no such file"):
        anb.iter_trace(tmp_path / "missing.jsonl")
    with pytest.raises(anb.TranscriptError, match="cannot read spans from a int"):
        anb.iter_trace(5)
    with pytest.raises(anb.TranscriptError, match="empty"):
        anb.iter_trace("  ")
    with pytest.raises(ValueError, match="window"):
        anb.iter_trace(_VALID, window=-1)
    lines = as_lines(many_runs(3), 4).encode()
    path = tmp_path / "bad.jsonl"
    path.write_bytes(lines + b'{"resourceSpans": [\xff]}\n')
    with pytest.raises(anb.TranscriptError, match="not UTF-8") as whole:
        anb.import_trace(path)
    assert f"at offset {len(lines) + 19}" in str(whole.value)
    got = []
    with pytest.raises(anb.TranscriptError) as streamed:
        for t in anb.iter_trace(path, window=0):
            got.append(t)
    # the runs before were yielded: all but the last (the next line is read before a run is judged)
    assert str(streamed.value) == str(whole.value) and len(got) == 2


# -- a file is read as its text is ------------------------------------------------------------------------------


def _texts() -> list[tuple[str, bool]]:
    """Texts, each with whether it is JSON Lines (read a line at a time from a file)."""
    doc = json.dumps(_VALID)
    lines = as_lines(copy.deepcopy(_VALID), 2)
    return [(lines, True), ("\n\n  \n" + lines, True), (lines.replace("\n", "\r\n"), True), (lines.rstrip("\n"), True),
            (lines + "\n \n\n", True), (lines.replace("\n", "\n\n", 1), True), (doc, False), (doc + "\n", False),
            ("\n" + doc + "\n\n", False), (json.dumps(_VALID, indent=1), False), ("\ufeff" + lines, False),
            ("[1]\n" + doc, True), ("{\n" + lines, False), (lines + "{not json", True), ("\u00a0\n" + lines, False),
            (lines.replace("\n", "\n\u00a0\n", 1), True), ("", False)]


@pytest.mark.parametrize("text, is_lines", _texts(), ids=lambda t: repr(t[:12]) + f"..{len(t)}" if isinstance(t, str)
                         else str(t))
def test_a_file_is_read_line_by_line_as_its_text_is_read(text: str, is_lines: bool, tmp_path: Path) -> None:
    from agentnb.otel._spans import read

    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8", newline="")
    try:
        as_text = read(text.encode())  # bytes: always a document, never a path
    except anb.TranscriptError as exc:
        with pytest.raises(anb.TranscriptError) as raised:
            read(path)
        assert str(raised.value) == str(exc)
        return
    as_file = read(path)
    assert as_file.spans == as_text.spans and as_file.notes.items == as_text.notes.items
    assert (len(list(chunks(path, Notes()))) > 1) is is_lines
