"""Hostile histories through the framework importers: findings that name the place, never an exception.

Each framework (``pydantic_ai``, ``langchain``, ``openai_agents``) gets the same hostile inputs -- values that are
no history at all, text that is not JSON, junk items, objects its serializer refuses, items nested too deep or
that contain themselves -- and its own: fields of the wrong type at every level of its format. Every case has
its outcome: the finding codes it must report (and the messages that survive). A property test then drives
arbitrary JSON values, biased towards each format's field names, through ``anb.import_history``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb.importers import FRAMEWORKS


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def self_containing() -> dict[str, Any]:
    d: dict[str, Any] = {"type": "human", "data": {"content": "x"}}
    d["data"]["self"] = d
    return d


# (name, history, the finding codes it must report, how many messages survive)
Case = tuple[str, Any, set[str], int]

COMMON: list[Case] = [
    ("None", None, {"malformed"}, 0),
    ("a number", 5, {"malformed"}, 0),
    ("NaN", float("nan"), {"malformed"}, 0),
    ("text that is not JSON", "garbage", {"malformed"}, 0),
    ("empty text", "", {"malformed"}, 0),
    ("bytes that are not UTF-8", b"\xff\xfe", {"malformed"}, 0),
    ("JSON nested 100 000 deep", "[" * 100_000 + "]" * 100_000, {"malformed"}, 0),
    ("items that are no messages", [1, "x", None, 2.5, [1]], {"not_a_message"}, 0),
    ("an object no serializer takes", [object()], {"not_a_message"}, 0),
    ("an item nested 3000 deep", [nested(3000)], {"malformed"}, 0),
    ("an item that contains itself", [self_containing()], {"malformed"}, 0),
]

LANGCHAIN: list[Case] = [
    ("one message, not a list", {"type": "human", "data": {"content": "hi"}}, {"malformed"}, 1),
    ("JSON text of one message", '{"type": "human", "data": {"content": "hi"}}', {"malformed"}, 1),
    ("fields of the wrong type", [{"type": "ai", "data": {"content": 5, "tool_calls": "x", "invalid_tool_calls": 3,
                                                         "response_metadata": "m"}}], {"malformed"}, 1),
    ("tool calls that are junk", [{"type": "ai", "data": {"content": "", "tool_calls": [
        1, None, {"id": {"a": 1}, "name": ["x"], "args": {"x": 1}}]}}], {"malformed"}, 1),
    ("a tool message of the wrong types", [{"type": "tool", "data": {"content": {"a": 1}, "tool_call_id": {"x": 1},
                                                                     "status": ["error"], "name": 5}}],
     {"malformed", "orphan_result"}, 1),
    ("unhashable types", [{"type": ["human"], "data": {"content": "x"}}, {"type": {"a": 1}}], {"unknown_role"}, 0),
    ("a message object, then junk", [object(), {"type": "human", "data": {"content": "hi"}}], {"not_a_message"}, 1),
    ("arguments JSON cannot write (an int of 5,000 digits)", [{"type": "ai", "data": {"content": "", "tool_calls": [
        {"id": "c", "name": "f", "args": {"n": 10**5000}}]}}], {"invalid_arguments"}, 1),
]

PYDANTIC_AI: list[Case] = [
    ("parts that are not lists", [{"kind": "request", "parts": 5}, {"kind": "response", "parts": "x"}],
     {"malformed"}, 1),
    ("parts that are junk", [{"kind": "request", "parts": [1, None, {"part_kind": ["x"]}]},
                             {"kind": "response", "parts": [5, {"part_kind": {"a": 1}}]}],
     {"malformed", "unsupported_part"}, 1),
    ("a request of the wrong types", [{"kind": "request", "instructions": {"a": 1}, "parts": [
        {"part_kind": "user-prompt", "content": 5},
        {"part_kind": "tool-return", "tool_call_id": {"x": 1}, "content": "r", "outcome": ["failed"],
         "tool_name": 5}]}], {"malformed", "orphan_result"}, 3),
    ("a response of the wrong types", [{"kind": "response", "model_name": {"a": 1}, "parts": [
        {"part_kind": "tool-call", "tool_name": {"x": 1}, "args": "{bad", "tool_call_id": ["c"]},
        {"part_kind": "thinking", "content": {"a": 1}}, {"part_kind": "text", "content": None}]}],
     {"malformed", "invalid_arguments"}, 1),
    ("JSON text that is an object", '{"kind": "request", "parts": []}', {"malformed"}, 0),
    ("a message object, then junk", [{"kind": "request", "parts": []}, object()], {"not_a_message"}, 0),
    ("arguments JSON cannot write (an int of 5,000 digits)", [{"kind": "response", "parts": [
        {"part_kind": "tool-call", "tool_name": "f", "args": {"n": 10**5000}, "tool_call_id": "c"}]}],
     {"invalid_arguments"}, 1),
]

OPENAI_AGENTS: list[Case] = [
    ("items of the wrong types", [{"type": "function_call", "call_id": {"a": 1}, "name": 5, "arguments": 3}],
     {"malformed"}, 1),
    ("arguments nested 3000 deep", [{"type": "function_call", "call_id": "c", "name": "f",
                                     "arguments": nested(3000)}], {"malformed"}, 0),
]

OWN = {"langchain": LANGCHAIN, "pydantic_ai": PYDANTIC_AI, "openai_agents": OPENAI_AGENTS}
CASES = [(fmt, *case) for fmt in FRAMEWORKS for case in [*COMMON, *OWN[fmt]]]
# where the Responses input has a meaning of its own for a value, the Agents SDK's history is read as it
_THE_READERS_WORD = {"openai_agents": {"not_a_message": "malformed"}}
"""The Agents SDK's items are read by the Responses importer, whose word for an item of the wrong type is this."""


def test_every_framework_meets_at_least_seven_hostile_inputs() -> None:
    for fmt in FRAMEWORKS:
        assert len([c for c in CASES if c[0] == fmt]) >= 7, fmt


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("fmt", "name", "history", "codes", "messages"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_every_hostile_history_imports_with_findings(fmt: str, name: str, history: Any, codes: set[str],
                                                     messages: int) -> None:
    imported = anb.import_history(history, fmt)
    found = {f.code for f in imported.findings}
    codes = {_THE_READERS_WORD.get(fmt, {}).get(code, code) for code in codes}
    assert codes <= found, imported.findings
    assert len(imported.messages) == messages, imported.messages
    assert all(f.message for f in imported.findings)
    imported.transcript.frames.calls()  # the transcript it made is usable
    imported.transcript.fold()


def test_framework_objects_are_still_read_one_by_one() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    history = [HumanMessage("Weather in Paris?"),
               AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
               {"type": "tool", "data": {"content": "18 C", "tool_call_id": "c1"}},
               ToolMessage("ignored", tool_call_id="c1")]
    imported = anb.import_history(history, "langchain")
    assert [m.role for m in imported.messages] == ["user", "assistant", "tool"]
    assert {f.code for f in imported.findings} == {"duplicate_result"}


# -- the property: any JSON value, biased towards each format's own field names ---------------------------------

FIELDS = ["type", "data", "content", "tool_calls", "invalid_tool_calls", "id", "name", "args", "tool_call_id",
          "status", "response_metadata", "model_name", "kind", "parts", "part_kind", "instructions", "tool_name",
          "outcome", "role", "call_id", "arguments", "output"]
WORDS = ["human", "ai", "tool", "system", "request", "response", "user-prompt", "tool-call", "tool-return",
         "retry-prompt", "thinking", "text", "function_call", "function_call_output", "error", "failed", "c1", "{}"]
scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.floats() | st.text(max_size=4) | st.sampled_from(WORDS)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(FIELDS) | st.text(max_size=3), children, max_size=5),
    max_leaves=30,
)
histories = st.lists(st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5) | json_values, max_size=5)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("fmt", list(FRAMEWORKS))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values | histories)
def test_any_json_value_imports_with_findings(fmt: str, value: Any) -> None:
    imported = anb.import_history(value, fmt)
    assert not [f for f in imported.findings if f.code == "unreadable"], imported.findings
    imported.transcript.frames.calls()
