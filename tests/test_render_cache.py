"""The render cache: a conversation rendered through a run's cache is the conversation rendered afresh.

Two ways to break it. Hypothesis drives histories through every adapter the way a run changes them -- appended
turns, interjected messages, compression and forks (a new list, part of the old one kept), edited arguments (a
message replaced by an edited copy), masked secrets, options that change -- and each request rendered through
one cache must equal a fresh rendering, byte for byte. Then real runs, through each official SDK client against
the emulator on 127.0.0.1, with compression, an interjection, an approval with edited arguments, a secret
argument and a fork: every body the model sends equals a fresh rendering of that request, and no real secret
is in the cache.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentnb as anb
from agentnb._messages import Message, ReasoningPart, RefusalPart, TextPart, ToolCallPart, ToolResultPart
from agentnb._redact import MASK
from agentnb._request import HistoryView, ModelRequest
from agentnb.emulator import Emulator
from agentnb.providers._registry import WIRE_APIS
from agentnb.providers._render import Renders

APIS = list(WIRE_APIS)
PROVIDERS = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama"]

# -- histories, changed the ways a run changes them -------------------------------------------------------

_texts = st.sampled_from(["", "ok", "Let me look.", "zq9-" + MASK, "é ünïcode"])


@st.composite
def _assistant(draw: st.DrawFn, turn: int) -> Message:
    parts: list[Any] = []
    if draw(st.booleans()):
        provider = draw(st.sampled_from(APIS))
        parts.append(ReasoningPart(provider=provider, text="think", data=draw(st.sampled_from([
            {}, {"type": "thinking", "thinking": "t", "signature": "s"}, {"field": "reasoning_content"},
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "e"}]))))
    if draw(st.booleans()):
        data = draw(st.sampled_from([None, {"gemini": {"thoughtSignature": "c2ln"}},
                                     {"openai_responses": {"id": "m1"}}]))
        parts.append(TextPart(text=draw(_texts), provider_data=data))
    if draw(st.integers(0, 9)) == 0:
        parts.append(RefusalPart(text="no"))
    for c in range(draw(st.integers(0, 3))):
        raw = draw(st.sampled_from(['{"a":1}', '{"a":', "[]", "{}", '{"pin":"' + MASK + '"}']))
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        parts.append(ToolCallPart(
            call_id=f"c{turn}_{c}", name="f", arguments_raw=raw, arguments=parsed if isinstance(parsed, dict) else None,
            provider_id=draw(st.sampled_from([None, f"fc_{turn}_{c}"])),
            provider_data=draw(st.sampled_from([None, {"gemini": {"id": f"g{turn}_{c}"}}]))))
    return Message(role="assistant", parts=tuple(parts))


def _results(draw: st.DrawFn, calls: list[str]) -> Message:
    answered = draw(st.permutations(calls))
    parts: list[Any] = [ToolResultPart(call_id=c, name="f", status=draw(st.sampled_from(["ok", "error", "denied"])),
                                       content=draw(_texts)) for c in answered]
    if draw(st.booleans()):
        parts.append(TextPart(text=draw(_texts)))
    return Message(role="tool", parts=tuple(parts))


def _edited(m: Message) -> Message:
    """``m`` with its first call's arguments edited (what an approval or a fork with new arguments makes)."""
    parts = list(m.parts)
    for i, p in enumerate(parts):
        if isinstance(p, ToolCallPart):
            parts[i] = dataclasses.replace(p, arguments_raw='{"a":2}', arguments={"a": 2})
            break
    return Message(role=m.role, parts=tuple(parts))


@st.composite
def _runs(draw: st.DrawFn) -> list[tuple[list[Message], int]]:
    """The requests of one run: (the history list, how many of its messages the request sends), in order."""
    history: list[Message] = [Message.system("Be brief.")] if draw(st.booleans()) else []
    history.append(Message.user("Go."))
    requests: list[tuple[list[Message], int]] = [(history, len(history))]
    calls: list[str] = []
    for turn in range(draw(st.integers(1, 14))):
        change = draw(st.sampled_from(["turn", "turn", "interject", "compress", "fork", "rewind", "edit", "system"]))
        if change == "interject":
            history.append(Message.user(draw(_texts)))
        elif change == "compress" and len(history) > 3:  # a new list: the start (its prompt changed) and the tail
            keep = draw(st.integers(1, len(history) - 1))
            head = [m for m in history[:2] if m.role == "system"]
            first = Message(role="user", parts=(*Message.user("Go.").parts, TextPart(text="[Summary] so far")))
            history = [*head, first, *history[len(history) - keep:]]
        elif change == "fork":  # a new list: a prefix of the old one
            history = history[:draw(st.integers(1, len(history)))]
        elif change == "rewind":  # a fork of the last turn: often cut inside one wire message of merged ones
            history = history[:-1] if len(history) > 1 else history
        elif change == "edit":
            at = [i for i, m in enumerate(history) if m.tool_calls]
            if at:
                i = draw(st.sampled_from(at))
                history = [*history[:i], _edited(history[i]), *history[i + 1:]]
        elif change == "system":
            history.append(Message.system("Late system text."))  # refused where the API takes it apart
        message = draw(_assistant(turn))
        history.append(message)
        calls = [c.call_id for c in message.tool_calls] or calls
        if message.tool_calls or draw(st.booleans()):
            history.append(_results(draw, calls))
        requests.append((history, len(history)))
        if draw(st.booleans()):
            requests.append((history, len(history)))  # the same request again (a retry)
        if draw(st.integers(0, 3)) == 0:
            history.append(Message.user(draw(_texts)))  # interjected after the results: merged with them
            requests.append((history, len(history)))
    return requests


def _render(api: str, messages: Any, renders: dict[str, Any] | None, **settings: Any) -> Any:
    try:
        return WIRE_APIS[api].render_request(messages, renders=renders, model="m", **settings)
    except ValueError as exc:
        return f"ValueError: {exc}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_runs(), st.sampled_from(["system", "developer"]), st.data())
def test_a_cached_rendering_is_a_fresh_rendering(requests: list[tuple[list[Message], int]], role: str,
                                                   data: st.DataObject) -> None:
    caches: dict[str, dict[str, Any]] = {api: {} for api in APIS}
    for history, n in requests:
        viewed = data.draw(st.booleans())  # a run's HistoryView, or a plain list (a model wrapper's own)
        for api in APIS:
            options = {"system_role": role} if api == "openai_chat" and data.draw(st.booleans()) else {}
            sent = HistoryView(history, n) if viewed else list(history[:n])
            cached = _render(api, sent, caches[api], **options)
            assert cached == _render(api, list(history[:n]), None, **options), api
            assert json.dumps(cached) == json.dumps(_render(api, list(history[:n]), None, **options))


@pytest.mark.parametrize("api", APIS)
def test_a_fork_cut_inside_merged_messages_renders_the_merged_message_again(api: str) -> None:
    call = ToolCallPart(call_id="c1", name="f", arguments_raw="{}", arguments={},
                        provider_data={"gemini": {"id": "g1"}})
    result = Message(role="tool", parts=(ToolResultPart(call_id="c1", name="f", status="ok", content="1"),))
    history = [Message.user("Go."), Message(role="assistant", parts=(call,)), result, Message.user("Note.")]
    renders: dict[str, Any] = {}
    _render(api, HistoryView(history), renders)  # the results and the note: one user message on two APIs
    forked = [*history[:3], Message.assistant("Done.")]  # forked before the note
    assert _render(api, HistoryView(forked), renders) == _render(api, forked, None)
    edited = [*history[:1], Message(role="assistant", parts=(dataclasses.replace(call, provider_data=None),)),
              result, Message.user("Note.")]  # the call's wire id is gone: its result renders without it
    assert _render(api, HistoryView(edited), renders) == _render(api, edited, None)


def test_the_cache_holds_the_history_it_rendered_last_not_every_history() -> None:
    history = [Message.user("Go.")]
    renders: dict[str, Any] = {}
    for turn in range(200):
        call = ToolCallPart(call_id=f"c{turn}", name="f", arguments_raw="{}", arguments={})
        result = ToolResultPart(call_id=f"c{turn}", name="f", status="ok", content="1")
        history += [Message(role="assistant", parts=(call,)), Message(role="tool", parts=(result,))]
        WIRE_APIS["anthropic"].render_request(HistoryView(history), renders=renders)
    cache = renders["anthropic"]
    assert isinstance(cache, Renders) and len(cache) == len(history) == 401
    history = [history[0], *history[-2:]]  # compressed: the cache shrinks with the history
    WIRE_APIS["anthropic"].render_request(HistoryView(history), renders=renders)
    assert len(cache) == 3 and len(cache.out) == 3


def test_a_turn_renders_only_its_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentnb.providers.openai_chat import _adapter as adapter

    rendered: list[Message] = []
    real = adapter._assistant
    monkeypatch.setattr(adapter, "_assistant", lambda m, r: rendered.append(m) or real(m, r))
    history, renders = [Message.user("Go.")], {}
    for turn in range(50):
        history += [Message.assistant(f"turn {turn}"), Message.user("more")]
        adapter.render_request(HistoryView(history), renders=renders)
    assert len(rendered) == 50 and len(set(map(id, rendered))) == 50  # each assistant message once
    adapter.render_request(list(history), renders=renders)  # another list, the same messages: none again
    assert len(rendered) == 50


def test_gemini_contents_are_converted_once_per_run() -> None:
    from google.genai import types

    from agentnb.providers.gemini import _model as gemini

    history, renders = [Message.user("Go.")], {}
    body = WIRE_APIS["gemini"].render_request(HistoryView(history), renders=renders)
    first = gemini._contents(types, body["contents"], renders)
    history += [Message.assistant("Hi."), Message.user("More.")]
    body = WIRE_APIS["gemini"].render_request(HistoryView(history), renders=renders)
    second = gemini._contents(types, body["contents"], renders)
    assert second[0] is first[0] and len(second) == 3
    assert [c.model_dump() for c in second] == [types.Content.model_validate(c).model_dump() for c in body["contents"]]
    assert gemini._contents(types, body["contents"][:1], None)[0] is not first[0]  # no cache: made afresh


# -- real runs through the official SDKs -------------------------------------------------------------------

PIN = "zq9-pin-7731-0042-9918"
OPTIONS: dict[str, dict[str, Any]] = {"openai_chat": {"model": "gpt-4.1"}, "openai_responses": {"model": "gpt-5"},
                                      "anthropic": {"model": "claude-sonnet-4-6"},
                                      "gemini": {"model": "gemini-2.5-flash"}, "ollama": {"model": "qwen3"}}


@anb.tool
def lookup(n: int) -> str:
    """Look a number up."""
    return f"entry {n}: " + "x" * 40


@anb.tool(secret=["pin"], approval=True)
def unlock(door: str, pin: str) -> str:
    """Unlock a door."""
    return f"{door} open"


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


def _checked(model: Any, seen: list[dict[str, Any]], bodies: list[dict[str, Any]] | None = None) -> Any:
    """``model`` with every body it renders checked against a fresh rendering of the same request."""
    render = model.render

    def checking(request: ModelRequest) -> dict[str, Any]:
        body = render(request)
        assert request.renders is not None
        assert body == render(dataclasses.replace(request, renders=None))
        assert PIN not in repr(request.renders)  # the cache holds the history as masked
        seen.append(request.renders)
        if bodies is not None:
            bodies.append(body)
        return body

    model.render = checking
    return model


def _script() -> list[Any]:
    steps: list[Any] = [{"tool_calls": [{"name": "lookup", "arguments": {"n": n}}]} for n in range(4)]
    steps.append({"text": "Unlocking.", "tool_calls": [{"name": "unlock", "arguments": {"door": "a", "pin": PIN}}]})
    steps += [{"tool_calls": [{"name": "lookup", "arguments": {"n": n}}, {"name": "lookup", "arguments": {"n": -n}}]}
              for n in range(4, 8)]
    return [*steps, {"text": "Done."}]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_real_runs_send_what_a_fresh_rendering_sends(emu: Emulator, provider: str) -> None:
    seen: list[dict[str, Any]] = []
    bodies: list[dict[str, Any]] = []
    model = _checked(WIRE_APIS[provider].model_class(emu.client(provider), **OPTIONS[provider]), seen, bodies)
    budget = anb.Budget(context_window=600, compress_at=0.6, keep_pairs=2, max_no_progress=None)
    loop = anb.Loop(model=model, tools=[lookup, unlock], system="Be brief.", budget=budget, retry_base_delay=0.0)
    emu.play(_script())
    run = loop.start("Look things up, then unlock door a.").run()
    assert run.state is anb.LoopState.WAITING_APPROVAL, run.reason
    call = run.pending_approvals()[0]
    run.interject("Use door a, and be quick.")
    run.approve(call.call_id, arguments={"door": "a2", "pin": PIN})  # edited arguments, the secret kept
    run.run()
    assert run.state is anb.LoopState.COMPLETED, run.reason
    assert any(e.type == "CompressionApplied" for e in run.events)
    key = WIRE_APIS[provider].list_key  # what reached the wire is the history the adapter rendered
    if provider != "ollama":  # (the ollama client copies each message through its own model, empty fields dropped)
        assert emu.requests[-1].body[key] == json.loads(json.dumps(bodies[-1][key]))
    assert len(seen) == 10 and all(r is seen[0] for r in seen)  # one cache, the run's, for all of its requests
    assert run._model.renders == {}  # the run is over: its renderings are gone

    if provider == "gemini":  # the SDK's Content objects, made once per run, are still what their dicts say
        from google.genai import types

        items, made = seen[-1]["gemini.sdk_contents"]
        assert len(made) == len(items) > 4
        assert [c.model_dump() for c in made] == [types.Content.model_validate_json(json.dumps(c)).model_dump()
                                                  for c in items]

    at = next(e.seq for e in run.events if e.type == "ApprovalRequested")
    emu.play(_script()[5:])
    forked = run.fork(at, arguments={call.call_id: {"door": "b", "pin": PIN}}, effects="run")
    forked.run()
    for waiting in forked.pending_approvals():
        forked.approve(waiting.call_id)
    forked.run()
    assert forked.state is anb.LoopState.COMPLETED, forked.reason
    assert len(seen) > 10 and seen[-1] is not seen[0]  # the fork renders through its own cache


def test_a_wire_callback_that_changes_the_body_changes_neither_this_request_nor_a_later_one(emu: Emulator) -> None:
    """The body's items are the run's render cache: a callback gets a copy, so what it does stays its own."""
    model = WIRE_APIS["openai_chat"].model_class(emu.client("openai_chat"), **OPTIONS["openai_chat"])

    def vandal(kind: str, payload: Any) -> None:
        if kind == "request":
            for m in payload["messages"]:
                m["content"] = "changed by a callback"
            payload["messages"].append({"role": "user", "content": "injected"})

    model.on_wire(vandal)
    emu.play([{"tool_calls": [{"name": "lookup", "arguments": {"n": 1}}]}, {"text": "Done."}])
    run = anb.Loop(model=model, tools=[lookup], retry_base_delay=0.0).start("Look 1 up.").run()
    assert run.state is anb.LoopState.COMPLETED, run.reason
    sent = [r.body["messages"] for r in emu.requests[-2:]]
    assert [m["content"] for m in sent[0]] == ["Look 1 up."]
    assert sent[1][0]["content"] == "Look 1 up." and "injected" not in json.dumps(sent)
