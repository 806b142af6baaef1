"""Every finish-reason rule, through real runs of the ScriptedModel and through ``classify`` directly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import agentnb as anb
from agentnb._engine import classify
from agentnb._messages import Message, ModelTurn, RefusalPart, TextPart, ToolCallPart

S = anb.LoopState


def turn(
    finish: str, *, text: str = "", calls: int = 0, refusal: str | None = None, complete: bool = True
) -> ModelTurn:
    parts: list[Any] = [TextPart(text=text)] if text else []
    if refusal:
        parts.append(RefusalPart(text=refusal))
    parts += [ToolCallPart(call_id=f"c{i}", name="add", arguments_raw="{}", arguments={}) for i in range(calls)]
    return ModelTurn(
        message=Message(role="assistant", parts=tuple(parts)), provider="p", model="m",
        finish_reason_raw=finish, finish_reason=finish,  # type: ignore[arg-type]
        complete=complete,
    )


@pytest.mark.parametrize(
    ("t", "state"),
    [
        (turn("stop", text="hi"), S.COMPLETED),
        (turn("length", text="cut"), S.INCOMPLETE),
        (turn("length", calls=1), S.INCOMPLETE),
        (turn("refusal", refusal="no"), S.REFUSED),
        (turn("stop", refusal="no"), S.REFUSED),
        (turn("content_filter", text=""), S.REFUSED),
        (turn("tool_calls"), S.FAILED),
        (turn("error"), S.FAILED),
        (turn("other", text="?"), S.INCOMPLETE),
        (turn("stop", calls=1, complete=False), S.INCOMPLETE),
        (turn("tool_calls", calls=2), None),
        (turn("stop", calls=1), None),  # Gemini says STOP when it calls functions
    ],
)
def test_classify(t: ModelTurn, state: anb.LoopState | None) -> None:
    verdict = classify(t)
    assert (verdict.state if verdict else None) is state


def test_only_an_explicit_completion_completes(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([{"text": "It is 3."}]).start("q").run()
    assert run.state is S.COMPLETED and run.output == "It is 3."
    assert run.events[-1].type == "RunFinished" and run.events[-1].final is S.COMPLETED


def test_max_tokens_without_calls_is_incomplete(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([{"text": "The answer is", "finish": "length"}]).start("q").run()
    assert run.state is S.INCOMPLETE
    assert "output token limit" in (run.reason or "")


def test_max_tokens_inside_arguments_executes_nothing(make_loop: Callable[..., anb.Loop]) -> None:
    script = [{"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b'}], "finish": "length"}]
    run = make_loop(script).start("q").run()
    assert run.state is S.INCOMPLETE
    assert "ToolStarted" not in [e.type for e in run.events]


@pytest.mark.parametrize("spec", [{"refusal": "I can't help with that."}, {"text": "", "finish": "content_filter"}])
def test_refusal_and_content_filter_are_refused(make_loop: Callable[..., anb.Loop], spec: dict[str, Any]) -> None:
    run = make_loop([spec]).start("q").run()
    assert run.state is S.REFUSED
    if "refusal" in spec:
        assert run.output == spec["refusal"]


def test_tool_calls_finish_without_calls_is_failed(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([{"text": "", "finish": "tool_calls"}]).start("q").run()
    assert run.state is S.FAILED and "sent no tool call" in (run.reason or "")


def test_unknown_finish_reason_is_not_success(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([{"text": "hm", "finish": "pause_turn"}]).start("q").run()
    assert run.state is S.INCOMPLETE and "pause_turn" in (run.reason or "")


def test_retryable_error_is_retried_then_succeeds(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([{"error": {"status": 429}}, {"error": {"status": 503}}, {"text": "ok"}], max_retries=2)
    run = run.start("q").run()
    assert run.state is S.COMPLETED
    retries = [e for e in run.events if e.type == "ModelRetried"]
    assert [(e.attempt, e.status) for e in retries] == [(1, 429), (2, 503)]


def test_retries_that_do_not_cure_end_failed_with_the_message(make_loop: Callable[..., anb.Loop]) -> None:
    script = [{"error": {"status": 500, "message": "upstream overloaded"}}] * 3
    run = make_loop(script, max_retries=2).start("q").run()
    assert run.state is S.FAILED
    assert "HTTP 500" in (run.reason or "") and "upstream overloaded" in (run.reason or "")
    assert "after 3 attempts" in (run.reason or "")


def test_client_error_is_not_retried(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([{"error": {"status": 400, "message": "bad request"}}, {"text": "never"}]).start("q").run()
    assert run.state is S.FAILED and "ModelRetried" not in [e.type for e in run.events]


@pytest.mark.parametrize("stream", [False, True])
def test_interrupted_stream_is_incomplete_and_nothing_runs(make_loop: Callable[..., anb.Loop], stream: bool) -> None:
    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}], "interrupt": True}]
    run = make_loop(script, stream=stream).start("q").run()
    assert run.state is S.INCOMPLETE
    kinds = [e.type for e in run.events]
    assert "TurnCompleted" not in kinds and "ToolStarted" not in kinds
    if stream:
        assert "ArgumentsMerged" in kinds


def test_script_that_runs_out_fails_clearly(make_loop: Callable[..., anb.Loop]) -> None:
    run = make_loop([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}]).start("q").run()
    assert run.state is S.FAILED and "has no turn 2" in (run.reason or "")


def test_a_script_function_that_raises_fails_the_run_with_the_cause(make_loop: Callable[..., anb.Loop]) -> None:
    def broken(messages: Any) -> dict[str, Any]:
        raise KeyError("oops")

    run = make_loop([broken]).start("q").run()
    assert run.state is S.FAILED and "KeyError" in (run.reason or "")


def test_retry_after_sets_the_wait_and_the_total_time_bounds_retries(make_loop: Callable[..., anb.Loop]) -> None:
    class Limited(anb.ModelError):
        def __init__(self) -> None:
            super().__init__("rate limited", status=429)
            self.retry_after = 0.05

    class RateLimitedOnce:
        provider, name = "fake", "fake"

        def __init__(self) -> None:
            self.n = 0

        def respond(self, request: Any) -> Any:
            self.n += 1
            if self.n == 1:
                raise Limited()
            return anb.ScriptedModel([{"text": "ok"}]).respond(request)

    run = anb.Loop(model=RateLimitedOnce(), retry_base_delay=0).start("q").run()
    retried = next(e for e in run.events if e.type == "ModelRetried")
    assert retried.delay_s == 0.05 and run.state is S.COMPLETED
    slow = anb.Loop(model=RateLimitedOnce(), retry_base_delay=0, max_retry_time=0.01).start("q").run()
    assert slow.state is S.FAILED and "max_retry_time" in (slow.reason or "")
