"""The frames' builders against the first, one-walk-per-event ones (``tests/frames_reference.py``).

``agentnb.frames._rows`` finds the events each frame reads by class across all runs at once and attaches them to
their rows with sorted searches, the columns read shared attribute paths once, and the payloads are serialized
a batch of one event type at a time; the reference walks every event of every run and serializes one event at
a time. On varied runs -- every kind of scripted run, random ones (``tests/test_projection.py``'s scenarios),
interjections, cancellations, a prompt with history, JSON seams and lone surrogates in texts, and cut anywhere
(a run's prefix, its middle, nothing), in any order -- every frame must be the same, column for column, value
for value, and every payload the same text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

import agentnb as anb
from agentnb.events import BaseEvent
from agentnb.frames import FRAMES, build
from agentnb.frames._builder import _run_ids, payloads
from agentnb.frames._rows import Log
from tests import frames_reference as reference
from tests.test_collection import collection  # noqa: F401 - the fixture
from tests.test_frames import story
from tests.test_projection import make_run, scenarios

Runs = Sequence[Sequence[BaseEvent]]


def reference_frame(name: str, runs: Runs, run_ids: Sequence[str]) -> pd.DataFrame:
    """Frame ``name`` built by the reference rows and conversions from the same column declarations."""
    rows = reference.ROW_BUILDERS[name](runs)
    data = {col.name: _run_ids(rows.run_index, run_ids) if col.name == "run_id"
            else reference.to_array(col, reference.values(col, rows)) for col in FRAMES[name]}
    return pd.DataFrame(data)


def assert_same_frames(runs: Runs) -> None:
    ids = [f"r{i}" for i in range(len(runs))]  # cut runs may not start with their run id: name them here
    log = Log(runs)
    for name in FRAMES:
        try:
            expected = reference_frame(name, runs, ids)
        except anb.TranscriptError as exc:  # a cut that sends back a result it no longer holds: refused alike
            with pytest.raises(anb.TranscriptError, match=re.escape(str(exc))):
                build(name, runs, run_ids=ids, log=log)
            continue
        got = build(name, runs, run_ids=ids, log=log)
        assert_frame_equal(got, expected, obj=name)
        assert_frame_equal(build(name, runs, run_ids=ids), got, obj=name)  # a log of its own: the same
    flat = [e for r in runs for e in r]
    for wire in (False, True):
        assert payloads(flat, wire=wire, log=log) == reference.payloads(flat, wire=wire), wire


def interjected() -> anb.Run:
    script: list[Any] = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "a"},
                         {"text": "b"}]
    from tests.conftest import add

    run = anb.Loop(model=anb.ScriptedModel(script), tools=[add]).start("go", run_id="i")
    run.step()
    run.interject("before the first request")
    run.run_until(lambda e: e.type == "TurnCompleted")
    run.interject("be quick")  # goes with the next request, after the results
    run.interject("and polite")
    return run.run()


def cancelled() -> anb.Run:
    run = story("refund", "c")
    run.cancel_call(run.pending_approvals()[0].call_id, "store credit instead", by="ana")
    return run.run()


def with_history() -> anb.Run:
    prior = anb.Transcript(story("weather", "w").events).messages
    model = anb.ScriptedModel([{"text": "done"}])
    return anb.Loop(model=model, tools=anb.stories.tools("weather")).start(prior, run_id="h").run()


@anb.tool
def seams(n: int) -> dict[str, Any]:
    """Results whose JSON holds the seams a batch of payloads is cut at."""
    return {"text": 'a},{"b": 1},{c' * n, "nan": float("nan"), "inf": float("-inf"), "empty": {}}


def hostile() -> anb.Run:
    script: list[Any] = [
        {"tool_calls": [{"name": "seams", "arguments": {"n": 1}}, {"name": "seams", "arguments": {"n": 2}}]},
        {"text": "half an emoji \ud83d, then },{ and {}"},
    ]
    return anb.Loop(model=anb.ScriptedModel(script), tools=[seams]).start("},{", run_id="x").run()


@pytest.fixture(scope="module")
def varied(collection: anb.TranscriptCollection) -> list[list[BaseEvent]]:  # noqa: F811
    extra = [interjected(), cancelled(), with_history(), story("parallel", "p", stream=True),
             story("looping", "l", max_turns=3), hostile()]
    return [list(t.events) for t in collection] + [list(r.events) for r in extra]


def test_every_frame_equals_the_reference_on_varied_runs(varied: list[list[BaseEvent]]) -> None:
    seamed = [p for p in payloads(varied[-1]) if "},{" in p]
    assert len(seamed) >= 3 and any("\\ud83d" in p for p in payloads(varied[-1]))  # both batch fallbacks
    assert_same_frames(varied)
    assert_same_frames(varied[::-1])
    assert_same_frames([[], *varied, []])
    assert_same_frames([])


def test_every_frame_equals_the_reference_on_runs_cut_anywhere(varied: list[list[BaseEvent]]) -> None:
    for events in varied:
        n = len(events)
        cuts = [events[:k] for k in range(0, n + 1, max(1, n // 12))]  # prefixes: a turn open, a call waiting
        cuts += [events[k:] for k in range(1, n, max(1, n // 6))]  # no prompt; fragments before any request
        cuts += [events[k: k + 5] for k in range(0, n, 4)]
        assert_same_frames(cuts)


@st.composite
def cut_runs(draw: st.DrawFn) -> list[list[BaseEvent]]:
    out: list[list[BaseEvent]] = []
    for sc in draw(st.lists(scenarios(), min_size=1, max_size=3)):
        events = list(make_run(sc).events)
        start = draw(st.integers(0, len(events)))
        end = draw(st.integers(start, len(events)))
        out += [events, events[start:end]]
    return out


@given(cut_runs())
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_frame_equals_the_reference_on_random_runs(runs: list[list[BaseEvent]]) -> None:
    assert_same_frames(runs)
