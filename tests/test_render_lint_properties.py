"""Every request the loop renders, for every provider, passes the linter; every call is answered once.

Random scripts mix parallel calls, tool errors, timeouts, unknown tools, malformed arguments, approvals
denied (headless), repeats, compressions and budget trips, streamed or not, and the conversation goes on with a
follow-up run; a call whose arguments are not a JSON object must reach every wire API as an object.
"""

from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._debugger.timeline import Timeline
from agentnb._lint import validate
from agentnb._request import split_options
from agentnb.providers import anthropic, gemini, openai_chat, openai_responses

ADAPTERS = {"openai_chat": openai_chat, "openai_responses": openai_responses, "anthropic": anthropic,
            "gemini": gemini}


@anb.tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@anb.tool
def fail(msg: str) -> str:
    """Always fails."""
    raise ValueError(msg)


@anb.tool(timeout=0.01)
def slow(n: int) -> int:
    """Too slow."""
    time.sleep(0.05)
    return n


@anb.tool(approval=True, risk="write")
def pay(cents: int) -> str:
    """Needs a person (denied in headless mode)."""
    return "paid"


call = st.one_of(
    st.fixed_dictionaries({"name": st.just("add"), "arguments": st.fixed_dictionaries(
        {"a": st.integers(0, 3), "b": st.integers(0, 3)})}),
    st.just({"name": "fail", "arguments": {"msg": "boom"}}),
    st.just({"name": "slow", "arguments": {"n": 1}}),
    st.just({"name": "pay", "arguments": {"cents": 5}}),
    st.just({"name": "nope", "arguments": {}}),
    st.just({"name": "add", "arguments": '{"a": 1,'}),
)
turn = st.one_of(
    st.fixed_dictionaries({"tool_calls": st.lists(call, min_size=1, max_size=3)}),
    st.fixed_dictionaries({"text": st.just("thinking out loud"), "tool_calls": st.lists(call, min_size=1, max_size=2)}),
    st.just({"text": "final answer"}),
    st.just({"error": {"status": 503}}),
)
budgets = st.builds(
    anb.Budget,
    max_turns=st.integers(1, 6),
    max_tool_calls=st.one_of(st.none(), st.integers(1, 6)),
    on_exhausted=st.sampled_from(["finalize", "stop"]),
    context_window=st.one_of(st.none(), st.integers(150, 600)),
    keep_pairs=st.integers(0, 2),
    max_repeats=st.integers(2, 3),
    on_repeat=st.sampled_from(["stop", "note"]),
)


def requests(run: anb.Run) -> list[tuple[list[Any], list[Any], dict[str, Any]]]:
    tl = Timeline(run.events)
    out = []
    for ev in run.events:
        if ev.type == "ModelRequested":
            messages = tl.messages_at(ev.seq)[: ev.message_count]
            tools = [t for t in tl.state.tools if t.name in set(ev.tools)]
            out.append((messages, tools, ev.settings))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(turn, min_size=1, max_size=7), budget=budgets, stream=st.booleans())
def test_every_rendered_request_is_valid_for_every_provider(
    script: list[dict[str, Any]], budget: anb.Budget, stream: bool
) -> None:
    model = anb.ScriptedModel(script + [{"text": "done"}] + script + [{"text": "done again"}], stream=stream,
                              chunk_size=5)
    loop = anb.Loop(model=model, tools=[add, fail, slow, pay], budget=budget, headless=True, retry_base_delay=0,
                    max_retries=1, system="Be brief.")
    run = loop.start("go").run()
    assert run.state.is_terminal  # headless: nothing waits for a person
    assert run.view.turns_completed <= budget.max_turns + 1
    after = run.follow_up("And now?").run()  # the conversation goes on: its history is sent again, whole
    assert after.state.is_terminal
    ids = [c.call_id for m in after.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids))  # call ids stay unique across the follow-up
    for messages, tools, request_settings in requests(run) + requests(after):
        for provider, adapter in ADAPTERS.items():
            options, _ = split_options({k: v for k, v in request_settings.items() if k in ("tool_choice",)})
            body = adapter.render_request(messages, tools, model="m", request_options=options)
            errors = [f for f in validate(provider, body) if f.severity == "error"]
            assert not errors, (provider, [str(f) for f in errors])
    calls = [c.call_id for m in run.messages for c in m.tool_calls]
    results = [r.call_id for m in run.messages for r in m.tool_results]
    assert len(results) == len(set(results))
    assert set(results) <= set(calls)
