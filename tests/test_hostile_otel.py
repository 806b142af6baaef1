"""Hostile OTLP/JSON through ``anb.import_trace``: transcripts that say what was dropped, or a TranscriptError.

The corpus (``tests/otel_corpus.py``) breaks a valid document one way per case, each with its outcome. A
property test then mutates the valid document at random (a field replaced by a value of another type, removed,
or made huge, at any depth) and holds every outcome to the same rule: never another exception. The two walks of
the reader (the text span by span, and the parsed objects) must read every document alike.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb.otel._spans import read
from tests.otel_corpus import _VALID, CASES, Case, Imports, Refused, build


def lacks(t: anb.Transcript) -> list[str]:
    said: list[str] = t.events[0].settings["lacks"]
    return said


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 29 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_hostile_document_has_its_outcome(case: Case, tmp_path: Path) -> None:
    doc = build(case)
    if isinstance(case.outcome, Refused):
        with pytest.raises(anb.TranscriptError, match=case.outcome.match):
            anb.import_trace(doc)
        return
    out = anb.import_trace(doc)
    assert isinstance(case.outcome, Imports)
    if case.outcome.transcripts is not None:
        assert len(out) == case.outcome.transcripts, [lacks(t) for t in out]
    if case.outcome.said is not None:
        assert any(re.search(case.outcome.said, line) for line in lacks(out[0])), lacks(out[0])
    for t in out:  # what comes back is a real transcript: it folds, shows its frames, saves and loads
        t.fold()
        t.frames.calls()
        t.save(tmp_path / "t.jsonl")
        assert [e.type for e in anb.Transcript.load(tmp_path / "t.jsonl").events] == [e.type for e in t.events]


def test_the_valid_document_imports_with_nothing_said_about_reading() -> None:
    [t] = anb.import_trace(copy.deepcopy(_VALID))
    assert t.state is anb.LoopState.COMPLETED and t.fold().tool_calls == 1
    assert not [line for line in lacks(t) if "left out" in line or "read as" in line], lacks(t)


_NOT_AS_TEXT = ("gigantic strings", "attribute nested 5000 deep")
"""Cases json.dumps cannot write back as text (the text form is its own case there)."""


@pytest.mark.parametrize("case", [c for c in CASES if isinstance(c.outcome, Imports) and c.name not in _NOT_AS_TEXT
                                  and isinstance(build(c), dict)], ids=lambda c: c.name)
def test_the_text_and_its_objects_read_alike(case: Case) -> None:
    doc = build(case)
    as_text, as_objects = read(json.dumps(doc)), read(doc)
    assert as_text.spans == as_objects.spans
    assert as_text.notes.items == as_objects.notes.items


def test_a_missing_file_and_a_directory_are_named(tmp_path: Path) -> None:
    with pytest.raises(anb.TranscriptError, match="no such file.*missing.json"):
        anb.import_trace(tmp_path / "missing.json")
    with pytest.raises(anb.TranscriptError, match="cannot read the trace file"):
        anb.import_trace(tmp_path)
    with pytest.raises(anb.TranscriptError, match="cannot read spans from a int"):
        anb.import_trace(5)
    (tmp_path / "bad.json").write_bytes(b'{"resourceSpans": [\xff]}')
    with pytest.raises(anb.TranscriptError, match="not UTF-8"):
        anb.import_trace(tmp_path / "bad.json")


def test_things_that_are_not_spans_in_a_list_are_noted() -> None:
    with pytest.raises(anb.TranscriptError, match="item 0 is a int, not a span"):
        anb.import_trace([1, object()])


# -- the property: any mutation of a valid document -----------------------------------------------------------

HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.sampled_from(["", "0", "-1", "1e30", "NaN", "chat", "invoke_agent", "\ud800", "{}",
                                          '[{"role": 1}]', "x" * 10_000]),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.sampled_from(["key", "value", "stringValue",
                                                                         "intValue", "values"]),
                                                        st.integers() | st.text(max_size=3), max_size=3),
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


PATHS = _paths(_VALID)[1:]


def _mutate(doc: Any, path: tuple[Any, ...], how: str, value: Any) -> Any:
    *head, last = path
    holder = doc
    for k in head:
        holder = holder[k]
    if how == "delete":
        del holder[last]
    elif how == "wrap":
        holder[last] = [holder[last]]
    else:
        holder[last] = value
    return doc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(st.tuples(st.sampled_from(PATHS), st.sampled_from(["replace", "delete", "wrap"]), HOSTILE),
                          min_size=1, max_size=4),
       as_text=st.booleans())
def test_any_mutation_of_a_valid_trace_imports_or_is_refused_by_name(
        mutations: list[tuple[tuple[Any, ...], str, Any]], as_text: bool) -> None:
    doc = copy.deepcopy(_VALID)
    for path, how, value in mutations:
        try:
            doc = _mutate(doc, path, how, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the place
    source = json.dumps(doc) if as_text else doc
    try:
        out = anb.import_trace(source)
    except anb.TranscriptError as exc:
        assert str(exc)
        return
    for t in out:
        t.fold()
        assert isinstance(lacks(t), list)
