"""The four provider models through their real SDK clients against the local emulator, streaming and not."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import agentnb as anb
from agentnb.emulator import Emulator
from tests.conftest import add

PROVIDERS = ["openai_chat", "openai_responses", "anthropic", "gemini"]
OPTIONS: dict[str, dict[str, Any]] = {
    "openai_chat": {"model": "gpt-4.1"},
    "openai_responses": {"model": "gpt-5", "store": False, "include": ["reasoning.encrypted_content"]},
    "anthropic": {"model": "claude-sonnet-4-6"},
    "gemini": {"model": "gemini-3-pro-preview"},
}
CLASSES = {"openai_chat": anb.OpenAIChatModel, "openai_responses": anb.OpenAIResponsesModel,
           "anthropic": anb.AnthropicModel, "gemini": anb.GeminiModel}


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator() as e:
        yield e


_CLIENTS: dict[tuple[int, str, bool], Any] = {}


def make(emu: Emulator, provider: str, stream: bool, *, async_: bool = False, **extra: Any) -> Any:
    key = (emu.port, provider.split("_")[0], async_)
    if key not in _CLIENTS:  # one client per API and module: SDK clients are slow to make
        _CLIENTS[key] = emu.client(provider, async_=async_)
    client = _CLIENTS[key]
    return CLASSES[provider](client, stream=stream, **{**OPTIONS[provider], **extra})


def loop(model: Any, **options: Any) -> anb.Loop:
    options.setdefault("retry_base_delay", 0.0)
    return anb.Loop(model=model, tools=[add], **options)


def answer(messages: list[anb.Message]) -> dict[str, Any]:
    return {"text": "Results: " + ", ".join(r.content for r in messages[-1].tool_results)}


CALL = {"name": "add", "arguments": {"a": 1, "b": 2}}
CALL2 = {"name": "add", "arguments": {"a": 3, "b": 4}}

SCENARIOS: dict[str, tuple[list[Any], str, str | None]] = {
    "one_call": ([{"tool_calls": [CALL]}, answer], "COMPLETED", "Results: 3"),
    "parallel_calls": ([{"tool_calls": [CALL, CALL2]}, answer], "COMPLETED", "Results: 3, 7"),
    "text_and_calls": ([{"text": "Let me add.", "tool_calls": [CALL, CALL2]}, answer], "COMPLETED", "Results: 3, 7"),
    "refusal": ([{"refusal": "I can't help with that."}], "REFUSED", None),
    "reasoning_continuation": ([{"reasoning": "Add them.", "tool_calls": [CALL, CALL2]},
                                {"reasoning": "Now answer.", "tool_calls": [CALL]}, answer], "COMPLETED", "Results: 3"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenarios(emu: Emulator, provider: str, stream: bool, scenario: str) -> None:
    script, state, output = SCENARIOS[scenario]
    emu.play(script)
    start = len(emu.requests)
    thinking = provider == "anthropic" and "reason" in scenario
    extra = {"thinking": {"type": "enabled", "budget_tokens": 1024}} if thinking else {}
    run = loop(make(emu, provider, stream, **extra)).start("Add 1 and 2, and 3 and 4.").run()
    assert run.state.value == state, (run.reason, [r.error for r in emu.requests[start:]])
    if output is not None:
        assert run.output == output
    assert all(r.status == 200 for r in emu.requests[start:])
    turns = [e.response for e in run.events if e.type == "TurnCompleted"]
    assert {t.provider for t in turns} == {provider}
    if stream and scenario != "refusal":
        assert any(e.type == "ArgumentsMerged" for e in run.events)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_max_tokens_cut_inside_arguments(emu: Emulator, provider: str, stream: bool) -> None:
    emu.play([{"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b'}], "finish": "length"}])
    run = loop(make(emu, provider, stream)).start("Add.").run()
    assert run.state is anb.LoopState.INCOMPLETE, run.reason
    assert "token limit" in (run.reason or "")
    assert not any(e.type == "ToolStarted" for e in run.events)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limit_then_success_honours_retry_after(emu: Emulator, provider: str, stream: bool) -> None:
    emu.play([{"text": "Fine."}]).fail(429, retry_after=0.2)
    t0 = time.monotonic()
    run = loop(make(emu, provider, stream)).start("Hi").run()
    assert run.state is anb.LoopState.COMPLETED and run.output == "Fine."
    assert time.monotonic() - t0 >= 0.2
    retried = [e for e in run.events if e.type == "ModelRetried"]
    assert len(retried) == 1 and retried[0].status == 429


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_server_errors_exhaust_retries(emu: Emulator, provider: str, stream: bool) -> None:
    emu.play([{"text": "never"}]).fail(500, message="The shard is on fire.", times=5)
    run = loop(make(emu, provider, stream), max_retries=2).start("Hi").run()
    assert run.state is anb.LoopState.FAILED
    assert [e.status for e in run.events if e.type == "ModelRetried"] == [500, 500]
    assert "The shard is on fire." in (run.reason or "") and "HTTP 500" in (run.reason or "")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_client_errors_fail_at_once_with_the_providers_message(emu: Emulator, provider: str) -> None:
    emu.play([{"text": "never"}]).fail(400, message="Unsupported parameter: 'frobnicate'.")
    run = loop(make(emu, provider, False)).start("Hi").run()
    assert run.state is anb.LoopState.FAILED
    assert not any(e.type == "ModelRetried" for e in run.events)
    assert "Unsupported parameter: 'frobnicate'." in (run.reason or "")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stream_cut_mid_arguments_is_incomplete(emu: Emulator, provider: str) -> None:
    big = {"name": "add", "arguments": {"a": 123456789, "b": 987654321}}
    emu.play([{"text": "Adding.", "tool_calls": [big], "interrupt": True}, {"text": "never asked"}])
    run = loop(make(emu, provider, True)).start("Add.").run()
    assert run.state is anb.LoopState.INCOMPLETE, run.reason
    assert not any(e.type in ("ToolStarted", "ModelRetried") for e in run.events)
    assert "nothing in the turn was executed" in (run.reason or "")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_async_clients(emu: Emulator, provider: str, stream: bool) -> None:
    emu.play([{"tool_calls": [CALL]}, answer])
    model = make(emu, provider, stream, async_=True)
    assert model.is_async
    run = loop(model).start("Add.").run()
    assert run.state is anb.LoopState.COMPLETED and run.output == "Results: 3", run.reason


@pytest.mark.parametrize("provider", PROVIDERS)
def test_settings_apply_on_every_turn(emu: Emulator, provider: str) -> None:
    emu.play([{"tool_calls": [CALL]}, answer])
    start = len(emu.requests)
    parallel = {} if provider == "gemini" else {"parallel_tool_calls": False}  # Gemini cannot express it
    run = loop(make(emu, provider, False, temperature=0.25),
               settings={"max_tokens": 321, "tool_choice": "auto", **parallel}).start("Add.").run()
    assert run.state is anb.LoopState.COMPLETED
    bodies = [r.body for r in emu.requests[start:]]
    assert len(bodies) == 2
    for body in bodies:
        flat = str(body)
        assert "0.25" in flat and "321" in flat


@pytest.mark.parametrize("provider", PROVIDERS)
def test_finalization_turn_is_accepted(emu: Emulator, provider: str) -> None:
    emu.play([{"tool_calls": [CALL]}, {"text": "Final answer: 3."}])
    start = len(emu.requests)
    run = loop(make(emu, provider, False), max_turns=1).start("Add.").run()
    assert run.state is anb.LoopState.COMPLETED, (run.reason, [r.error for r in emu.requests[start:]])
    last = emu.requests[-1].body
    if provider == "anthropic":  # the API wants tool definitions beside tool blocks: sent with choice none
        assert last["tool_choice"] == {"type": "none"} and last["tools"]


def test_argument_cap_ends_the_run_incomplete(emu: Emulator) -> None:
    emu.play([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2, "pad": "x" * 400}}]}])
    run = loop(make(emu, "openai_chat", True, max_argument_bytes=64)).start("Add.").run()
    assert run.state is anb.LoopState.INCOMPLETE
    assert "passed 64 bytes" in (run.reason or "")


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real: Callable[..., Any] = builtins.__import__

    def fake(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] == "anthropic":
            raise ImportError("No module named 'anthropic'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    import importlib

    monkeypatch.setattr(importlib, "import_module", lambda n: fake(n))
    with pytest.raises(ImportError, match=r"agentnb\[anthropic\]"):
        anb.AnthropicModel(object(), model="claude")


def test_factory_reads_the_key_from_the_environment(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    emu.play([{"text": "From the factory."}])
    model = anb.model("openai-responses:gpt-5", base_url=emu.url("openai"))
    assert isinstance(model, anb.OpenAIResponsesModel)
    assert anb.Loop(model=model).start("Hi").run().output == "From the factory."
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        anb.model("openai:gpt-4.1")
    with pytest.raises(ValueError, match="provider:model-name"):
        anb.model("gpt-4.1")


def test_importing_agentnb_imports_no_sdk() -> None:
    import subprocess
    import sys

    code = ("import sys, agentnb; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('openai', 'anthropic', 'google')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
