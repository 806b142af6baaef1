from __future__ import annotations

from datetime import UTC, datetime

import pytest

import agentnb as anb
from agentnb._engine import RunState
from agentnb._states import EVENT_TYPES, PAUSED, TERMINAL, TRANSITIONS, LoopState, check_transition, edges
from agentnb.events import EVENT_CLASSES, RunStarted


def test_every_event_type_has_a_class_and_every_class_is_in_the_table() -> None:
    assert set(EVENT_CLASSES) == EVENT_TYPES


def test_terminal_states_are_explicit_and_have_no_way_out() -> None:
    assert {s.value for s in TERMINAL} == {
        "COMPLETED", "REFUSED", "INCOMPLETE", "FAILED", "BUDGET_EXHAUSTED", "NO_PROGRESS", "CANCELLED"
    }
    for state in TERMINAL:
        assert TRANSITIONS[state] == {}
        assert state.is_terminal
    assert not LoopState.WAITING_APPROVAL.is_terminal and LoopState.WAITING_APPROVAL.is_paused
    assert PAUSED == {LoopState.WAITING_APPROVAL}


def test_every_non_terminal_state_can_reach_a_terminal_state() -> None:
    graph: dict[LoopState, set[LoopState]] = {s: set() for s in LoopState}
    for src, _, dst in edges():
        graph[src].add(dst)
    for start in LoopState:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert seen & TERMINAL or start in TERMINAL, start


@pytest.mark.parametrize("state", list(LoopState))
@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
def test_every_pair_is_either_in_the_table_or_raises(state: LoopState, event_type: str) -> None:
    allowed = TRANSITIONS[state].get(event_type)
    for target in LoopState:
        if allowed is not None and target in allowed:
            check_transition(state, event_type, target)  # legal: no error
        else:
            with pytest.raises(anb.IllegalTransition) as info:
                check_transition(state, event_type, target)
            assert info.value.state is state and info.value.event_type == event_type
            assert state.value in str(info.value) and event_type in str(info.value)


def test_fold_refuses_an_illegal_event() -> None:
    rs = RunState()
    bad = RunStarted(
        seq=0, ts=datetime.now(UTC), run_id="r", turn=0, state=LoopState.COMPLETED, messages=[], model="m", tools=[]
    )
    with pytest.raises(anb.IllegalTransition, match="RunStarted in state NEW -> COMPLETED"):
        rs.apply(bad)
    assert rs.state is LoopState.NEW and rs.seq == 0  # nothing was half-applied
