"""The debugger's headless controller: stepping, threads, breakpoints, approvals and forks, with no widget."""

from __future__ import annotations

import threading

import pytest

import agentnb as anb
from agentnb._debugger import Controller
from agentnb._states import TERMINAL
from agentnb.exceptions import AgentnbError


def refund_run() -> anb.Run:
    loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
    return loop.start("Refund order 42")


def test_the_controller_steps_a_run_without_any_widget() -> None:
    ctl = Controller(refund_run())
    assert not hasattr(ctl, "view") and not hasattr(ctl, "widget")
    first = ctl.step()
    assert first is not None and first.type == "RunStarted" and ctl.selected == 0
    ctl.next_turn()
    assert ctl.events[-1].type == "ModelRequested"
    assert ctl.cont().state is anb.LoopState.WAITING_APPROVAL and ctl.message == "waiting for approval"
    assert ctl.approve(ctl.pending()[0]).state is anb.LoopState.COMPLETED
    assert ctl.run is not None and len(ctl.timeline) == len(ctl.run.events)


def test_a_tool_breakpoint_stops_right_after_the_tool_started() -> None:
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    ctl = Controller(loop.start("Paris?"))
    bp = ctl.add_breakpoint(tool="get_weather")
    ctl.cont()
    assert ctl.events[-1].type == "ToolStarted" and ctl.message.startswith("breakpoint: tool = get_weather")
    ctl.remove_breakpoint(bp)
    assert ctl.cont().state is anb.LoopState.COMPLETED and ctl.breakpoints == []


def test_background_continue_runs_in_a_thread_and_pause_stops_it() -> None:
    gate = threading.Event()
    model = anb.ScriptedModel([{"tool_calls": [{"name": "get_weather", "arguments": {"city": f"c{i}"}}]}
                               for i in range(50)] + [{"text": "done"}], latency=0.01)
    loop = anb.Loop(model=model, tools=anb.stories.tools("weather"), max_turns=60)
    ctl = Controller(loop.start("go"))

    def stop_after_first(ev: anb.events.BaseEvent) -> bool:
        gate.set()
        return False

    ctl.add_breakpoint(when=stop_after_first)
    ctl.cont(background=True)
    assert gate.wait(10)
    ctl.pause()
    assert not ctl.running and ctl.message == "paused" and ctl.state not in TERMINAL


def test_a_replayed_transcript_is_read_only_and_steps_to_its_end() -> None:
    run = refund_run().run()
    ctl = Controller(run.transcript)
    assert len(ctl.timeline) == 1
    while ctl.step() is not None:
        pass
    assert len(ctl.timeline) == len(run.events) and ctl.message == "waiting for approval"
    with pytest.raises(AgentnbError, match="read-only"):
        ctl.approve("anything")
    assert ctl.select(2).selected == 2 and not ctl.follow


def test_a_fork_is_a_controller_of_the_same_kind_on_a_new_run() -> None:
    run = refund_run()
    ctl = Controller(run)
    ctl.cont()
    ctl.deny(ctl.pending()[0], "no")
    seq = next(e.seq for e in ctl.events if e.type == "ResultsBound")
    child = ctl.fork(seq)
    assert type(child) is Controller and child.run is not None and child.run.run_id != run.run_id
    assert child.cont().state is not anb.LoopState.NEW
    assert isinstance(anb.Debugger(refund_run()), Controller)  # the widget is this controller plus a view
