"""Impossible logs: folding one raises a TranscriptError that names the event at fault, never another error.

Each case below takes the log of a real run (a single call, three parallel calls, a call that waits for
approval), breaks it the way a hand-edited or tampered file would, and checks the error three ways: the fold
(:meth:`RunState.fold`), time travel (:meth:`Transcript.at`) and reading the file back (:meth:`Transcript.load`).
The property tests then break logs at random.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._engine import RunState
from agentnb._states import LoopState, S
from agentnb.events import BaseEvent, GuardTripped, OutputValidated

Log = list[BaseEvent]


@cache
def _run(story: str) -> tuple[BaseEvent, ...]:
    prompts = {"weather": "Paris?", "parallel": "go", "refund": "Refund order 42"}
    run = anb.Loop(model=anb.ScriptedModel.story(story), tools=anb.stories.tools(story)).start(prompts[story]).run()
    while run.state is S.WAITING_APPROVAL:
        run.approve(run.pending_approvals()[0].call_id)
        run.run()
    assert run.state is S.COMPLETED
    return tuple(run.events)


def log(story: str) -> Log:
    """A fresh copy of a finished run's events (weather: one call; parallel: three; refund: an approval)."""
    return [copy.copy(e) for e in _run(story)]


def renumbered(events: Log) -> Log:
    return [replace(e, seq=i) for i, e in enumerate(events)]


def test_the_logs_the_cases_break_are_the_expected_ones() -> None:
    """The events the cases index into, so that a change of the stories shows here first."""
    assert [e.type for e in log("weather")] == [
        "RunStarted", "ModelRequested", "TurnCompleted", "CallParsed", "CallValidated", "ToolStarted",
        "ToolFinished", "ResultsBound", "ModelRequested", "TurnCompleted", "RunFinished"]
    assert [e.type for e in log("parallel")][9:16] == [
        "ToolStarted", "ToolStarted", "ToolStarted", "ToolFinished", "ToolFinished", "ToolFinished", "ResultsBound"]
    assert [e.type for e in log("refund")][12:14] == ["ApprovalRequested", "ApprovalResolved"]
    for story in ("weather", "parallel", "refund"):
        assert RunState.fold(log(story)).state is S.COMPLETED


def _unknown_call(i: int) -> Callable[[], Log]:
    def make() -> Log:
        events = log("weather")
        events[i] = replace(events[i], call_id="call_nope")
        return events
    return make


def _result_before_start_of_one() -> Log:
    w = log("weather")
    return renumbered([*w[:5], w[6], w[5], *w[7:]])


def _result_before_start_in_parallel() -> Log:
    p = log("parallel")  # the third call's result comes before it started, while the other two run
    return renumbered([*p[:11], p[12], p[13], p[14], p[11], *p[15:]])


def _second_result() -> Log:
    w = log("weather")
    return renumbered([*w[:7], w[6], *w[7:]])


def _results_naming_an_unknown_call() -> Log:
    w = log("weather")
    w[7] = replace(w[7], call_ids=["call_nope"])
    return w


def _results_naming_a_call_without_result() -> Log:
    p = log("parallel")  # bound before the third call finished
    return renumbered([*p[:14], p[15], *p[16:]])


def _turn_without_request() -> Log:
    w = log("weather")
    return renumbered([w[0], *w[2:]])


def _second_run_started() -> Log:
    w = log("weather")
    return renumbered([w[0], w[0], *w[1:]])


def _event_after_the_end() -> Log:
    w = log("weather")
    return renumbered([*w, w[9]])


def _event_of_another_run() -> Log:
    w = log("weather")
    w[4] = replace(w[4], run_id="another_run")
    return w


def _gap() -> Log:
    w = log("weather")
    return [*w[:4], *w[5:]]


def _out_of_order() -> Log:
    w = log("weather")
    return [w[0], w[2], w[1], *w[3:]]


def _wrong_next_state() -> Log:
    w = log("weather")
    w[2] = replace(w[2], state=S.COMPLETED)
    return w


def _resolved_twice() -> Log:
    r = log("refund")  # the first resolution says the run goes on waiting: the second finds nothing waiting
    return renumbered([*r[:13], replace(r[13], state=S.WAITING_APPROVAL), r[13], *r[14:]])


def _resolution_of_an_unknown_call() -> Log:
    r = log("refund")
    r[13] = replace(r[13], call_id="call_nope")
    return r


def _override_of_an_unknown_call() -> Log:
    w = log("weather")
    ev = w[4]
    waiver = GuardTripped(seq=5, ts=ev.ts, run_id=ev.run_id, turn=ev.turn, state=S.VALIDATING,
                          guard="approval_override", limit=0, value=0, action="note", message="waived",
                          call_id="call_nope")
    return renumbered([*w[:5], waiver, *w[5:]])


def _output_of_an_unknown_call() -> Log:
    w = log("weather")
    ev = w[4]
    check = OutputValidated(seq=5, ts=ev.ts, run_id=ev.run_id, turn=ev.turn, state=S.VALIDATING, ok=False,
                            call_id="call_nope", errors=[{"loc": "x", "msg": "missing"}])
    return renumbered([*w[:5], check, *w[5:]])


def _field_of_the_wrong_type() -> Log:
    w = log("weather")  # made by hand in Python: nothing validated the fields
    w[2] = replace(w[2], response=None)
    return w


def _missing_field() -> Log:
    w = log("weather")
    del w[5].idempotency_key
    return w


CASES: dict[str, tuple[Callable[[], Log], int, str, str]] = {
    # name: (the broken log, the seq and type of the event the error must name, what it must say)
    "a call of an unknown id is parsed": (_unknown_call(3), 3, "CallParsed", "'call_nope' is not a call of this turn"),
    "a call of an unknown id is validated": (_unknown_call(4), 4, "CallValidated", "not a call of this turn"),
    "a call of an unknown id starts": (_unknown_call(5), 5, "ToolStarted", "not a call of this turn"),
    "a result of an unknown call": (_unknown_call(6), 6, "ToolFinished", "not a call of this turn"),
    "a result before its ToolStarted": (_result_before_start_of_one, 5, "ToolFinished",
                                        "ToolFinished is not allowed in VALIDATING"),
    "a result before its ToolStarted, other calls running": (_result_before_start_in_parallel, 13, "ToolFinished",
                                                             "'call_1_3', which has not started"),
    "a second result": (_second_result, 7, "ToolFinished", "a second result for call 'call_1_1'"),
    "ResultsBound naming an unknown call": (_results_naming_an_unknown_call, 7, "ResultsBound",
                                            "'call_nope', which has no result"),
    "ResultsBound naming a call without result": (_results_naming_a_call_without_result, 14, "ResultsBound",
                                                  "'call_1_3', which has no result"),
    "a TurnCompleted with no request": (_turn_without_request, 1, "TurnCompleted", "not allowed in READY"),
    "a second RunStarted": (_second_run_started, 1, "RunStarted", "RunStarted is not allowed in READY"),
    "an event after RunFinished": (_event_after_the_end, 11, "TurnCompleted", "COMPLETED is terminal"),
    "an event of another run": (_event_of_another_run, 4, "CallValidated", "of run 'another_run'"),
    "a gap in the numbering": (_gap, 5, "ToolStarted", "expected seq 4"),
    "events out of order": (_out_of_order, 2, "TurnCompleted", "expected seq 1"),
    "a next state the event cannot lead to": (_wrong_next_state, 2, "TurnCompleted", "may lead only to RESPONDED"),
    "an approval resolved twice": (_resolved_twice, 14, "ApprovalResolved", "is not waiting for approval"),
    "an approval of an unknown call": (_resolution_of_an_unknown_call, 13, "ApprovalResolved",
                                       "not a call of this turn"),
    "an approval override of an unknown call": (_override_of_an_unknown_call, 5, "GuardTripped",
                                                "not a call of this turn"),
    "an output check of an unknown call": (_output_of_an_unknown_call, 5, "OutputValidated",
                                           "not a call of this turn"),
    "a field of the wrong type": (_field_of_the_wrong_type, 2, "TurnCompleted", "cannot be folded"),
    "a missing field": (_missing_field, 5, "ToolStarted", "cannot be folded"),
}


def _names(exc: anb.TranscriptError, seq: int, event_type: str, says: str) -> None:
    assert (exc.seq, exc.event_type) == (seq, event_type), str(exc)
    assert f"event {seq} ({event_type})" in str(exc)
    assert says in str(exc)


@pytest.mark.parametrize("case", CASES)
def test_an_impossible_log_is_refused_naming_the_event(case: str) -> None:
    make, seq, event_type, says = CASES[case]
    with pytest.raises(anb.TranscriptError) as info:
        RunState.fold(make())
    _names(info.value, seq, event_type, says)

    events = make()
    at = next(i for i, e in enumerate(events) if (e.seq, e.type) == (seq, event_type))  # its place in the log
    transcript = anb.Transcript(events)
    assert transcript.at(at - 1).seq == at  # everything before the event folds
    with pytest.raises(anb.TranscriptError) as info:
        transcript.at(at)
    _names(info.value, seq, event_type, says)


@pytest.mark.parametrize("case", [c for c in CASES if c not in ("a field of the wrong type", "a missing field")])
def test_an_impossible_file_is_refused_naming_the_event(case: str, tmp_path: Path) -> None:
    make, seq, event_type, says = CASES[case]
    path = tmp_path / "run.jsonl"
    anb.Transcript(make()).save(path)
    with pytest.raises(anb.TranscriptError) as info:
        anb.Transcript.load(path)
    _names(info.value, seq, event_type, says)
    assert str(path) in str(info.value)


def test_a_line_missing_a_field_is_refused_naming_the_event(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    anb.Transcript(log("weather")).save(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = json.loads(lines[6])
    del doc["call_id"]
    lines[6] = json.dumps(doc)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(anb.TranscriptError, match=r"run\.jsonl:7: event 6 \(ToolFinished\) is not a valid event "
                                                  r"\(ToolFinished\.call_id: Field required\)") as info:
        anb.Transcript.load(path)
    assert (info.value.seq, info.value.event_type) == (6, "ToolFinished")


def test_an_illegal_transition_is_a_transcript_error_naming_the_event() -> None:
    with pytest.raises(anb.IllegalTransition) as info:
        RunState.fold(_turn_without_request())
    assert isinstance(info.value, anb.TranscriptError)
    assert (info.value.state, info.value.next_state) == (S.READY, S.RESPONDED)


# -- logs broken at random -----------------------------------------------------------------------------------

_CALL_IDS = ["call_1_1", "call_1_2", "call_1_3", "call_2_1", "call_nope", ""]


@st.composite
def broken_logs(draw: st.DrawFn) -> Log:
    events = log(draw(st.sampled_from(["weather", "parallel", "refund"])))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(events) - 1))
        what = draw(st.sampled_from(["drop", "duplicate", "swap", "call_id", "state", "run_id", "call_ids"]))
        if what == "drop" and len(events) > 1:
            del events[i]
        elif what == "duplicate":
            events.insert(i, copy.copy(events[i]))
        elif what == "swap":
            j = draw(st.integers(0, len(events) - 1))
            events[i], events[j] = events[j], events[i]
        elif what == "call_id" and hasattr(events[i], "call_id"):
            events[i] = replace(events[i], call_id=draw(st.sampled_from(_CALL_IDS)))
        elif what == "call_ids" and hasattr(events[i], "call_ids"):
            ids = draw(st.lists(st.sampled_from(_CALL_IDS), max_size=4))
            events[i] = replace(events[i], call_ids=ids)
        elif what == "state":
            events[i] = replace(events[i], state=draw(st.sampled_from(list(LoopState))))
        elif what == "run_id":
            events[i] = replace(events[i], run_id="another_run")
    return renumbered(events) if draw(st.booleans()) else events


def _fold_or_refuse(events: Log) -> None:
    try:
        RunState.fold(events)
    except anb.TranscriptError as exc:  # anything else fails the test
        assert exc.seq is not None and exc.event_type is not None, str(exc)
        assert any((e.seq, e.type) == (exc.seq, exc.event_type) for e in events), str(exc)
        assert str(exc).startswith(f"event {exc.seq} ({exc.event_type}): "), str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_logs())
def test_a_log_broken_at_random_folds_or_is_refused_naming_the_event(events: Log) -> None:
    _fold_or_refuse(events)
    transcript = anb.Transcript(events)
    for k in range(len(events)):
        try:
            transcript.at(k)
        except anb.TranscriptError:
            break


_JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 30), st.sampled_from(["", "x", "READY", "call_1_1"]),
                         st.just([]), st.just({}), st.just([{"x": 1}]))
"""What an edit puts in a field: a value of the right type now and then, mostly not."""


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(story=st.sampled_from(["weather", "parallel", "refund"]), data=st.data())
def test_a_file_edited_at_random_loads_or_is_refused(
    story: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("edited") / "run.jsonl"
    anb.Transcript(log(story)).save(path)
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for _ in range(data.draw(st.integers(1, 3))):
        doc = docs[data.draw(st.integers(0, len(docs) - 1))]
        key = data.draw(st.sampled_from(sorted(doc)))
        if data.draw(st.booleans()):
            del doc[key]
        else:
            doc[key] = data.draw(_JSON_VALUES)
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    try:
        anb.Transcript.load(path)
    except anb.TranscriptError as exc:  # anything else fails the test
        if exc.seq is not None:
            assert f"event {exc.seq} (" in str(exc), str(exc)
