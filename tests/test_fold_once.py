"""Fold once: a live run folds each event exactly once, whatever listens to it.

The debugger's timeline and the OpenTelemetry writer are listeners (``Run.on_event``); they get each event with
the run's own state after it, so they read the run's fold instead of folding the log again. The count is of
``RunState.apply`` calls, the fold's one door, over real runs with every kind of listener attached.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentnb as anb
from agentnb._engine import RunState


@pytest.fixture
def folds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``RunState.apply`` call, as the seq of the event it folded."""
    seen: list[int] = []
    apply = RunState.apply

    def counted(self: RunState, event: Any, *, checked: bool = False) -> None:
        seen.append(event.seq)
        apply(self, event, checked=checked)

    monkeypatch.setattr(RunState, "apply", counted)
    return seen


@pytest.mark.parametrize("plain", [0, 1, 5])
@pytest.mark.parametrize("debugger", [False, True])
@pytest.mark.parametrize("tracing", [False, True])
def test_each_event_is_folded_once_whatever_listens(folds: list[int], plain: int, debugger: bool,
                                                    tracing: bool) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"),
                    tracer_provider=provider if tracing else None)
    run = loop.start("What's the weather in Paris?")
    states: list[list[RunState]] = [[] for _ in range(plain)]
    for got in states:
        run.on_event(lambda _ev, state, got=got: got.append(state))
    dbg = anb.Debugger(run) if debugger else None
    run.run()
    n = len(run.events)
    assert n > 5 and run.state is anb.LoopState.COMPLETED
    assert folds == list(range(n)), f"{len(folds)} folds for {n} events"
    for got in states:  # every listener was handed the one state the run folds, not a copy
        assert len(got) == n and {id(s) for s in got} == {id(states[0][0])}
        assert got[-1].state is run.state and got[-1].messages == run.messages
    if dbg is not None:
        assert len(dbg.timeline) == n and dbg.timeline.state.messages == run.messages
    if tracing:
        assert any(s.name.startswith("invoke_agent") for s in spans.get_finished_spans())


def test_the_counter_sees_a_second_fold(folds: list[int]) -> None:
    """The count can fail: a reader that folds the log again (a saved transcript's) shows up in it."""
    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("hi").run()
    n = len(run.events)
    assert folds == list(range(n))
    run.transcript.fold()
    assert len(folds) == 2 * n
