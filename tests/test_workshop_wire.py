"""The wire exercise of notebook 05: its generated streams are real Chat Completions streams (agentnb's parser,
the openai SDK and the emulator agree with the expected answers), and the solution handed out passes."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

import agentnb as anb
from agentnb import workshop
from agentnb._engine import classify
from agentnb.emulator import Emulator
from agentnb.providers import openai_chat
from agentnb.workshop._wire_exercise import make_streams

SOLUTION = Path(__file__).parent.parent / "notebooks" / "solutions" / "05_the_wire.ipynb"


def _solution() -> Callable[[list[dict[str, Any]]], tuple[list[dict[str, Any]], bool]]:
    """The solution cell of notebooks/solutions/05_the_wire.ipynb, so the tests check what students are given."""
    cell = next(c for c in json.loads(SOLUTION.read_text())["cells"] if c.get("id") == "s05-solution")
    namespace: dict[str, Any] = {}
    exec("".join(cell["source"]), namespace)  # noqa: S102 - the project's own notebook
    return namespace["read_stream"]  # type: ignore[no-any-return]


read_stream = _solution()


@pytest.mark.parametrize("seed", [1, 2, 3, 99, 12345])
def test_generated_streams_read_as_agentnb_reads_them(seed: int) -> None:
    for s in make_streams(random.Random(seed)):
        items = list(openai_chat.parse_stream(s.chunks))
        turn = items[-1]
        assert isinstance(turn, anb.ModelTurn)
        got = [{"id": c.call_id, "name": c.name, "arguments": c.arguments_raw} for c in turn.message.tool_calls]
        assert got == s.calls, (s.what, s.how)
        runs = classify(turn) is None  # None: the engine goes on to run the calls
        assert runs == s.may_run, (s.what, s.how, turn.finish_reason, turn.complete)


def _subset(mine: Any, sdk: Any) -> bool:
    """Every field of ours is in the SDK's dump with the same value (newer SDKs add fields of their own)."""
    if isinstance(mine, dict):
        return isinstance(sdk, dict) and all(k in sdk and _subset(v, sdk[k]) for k, v in mine.items())
    if isinstance(mine, list):
        return isinstance(sdk, list) and len(mine) == len(sdk) and all(map(_subset, mine, sdk))
    return bool(mine == sdk)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_the_sdk_form_is_what_the_openai_sdk_gives(seed: int) -> None:
    from openai.types.chat import ChatCompletionChunk

    from agentnb.workshop._wire_exercise import _sdk_form

    raw_streams = [s for s in make_streams(random.Random(seed)) if "service_tier" not in s.chunks[0]]
    assert raw_streams
    for s in raw_streams:
        for chunk in s.chunks:
            sdk = ChatCompletionChunk.model_validate(chunk).model_dump()
            assert _subset(_sdk_form(chunk), sdk), (chunk, sdk)
            assert {k for k, v in sdk.items() if v is not None} <= set(_sdk_form(chunk))


def test_the_solution_reads_a_real_stream_from_the_emulator() -> None:
    script = [{"text": "Checking both.", "tool_calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_weather", "arguments": {"city": "Oslo", "note": "a } inside"}}]}]
    with Emulator(script, chunk_size=3) as emu:
        client = openai.OpenAI(base_url=emu.url("openai"), api_key="test", max_retries=0)
        stream = client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "?"}],
                                                stream=True, stream_options={"include_usage": True})
        chunks = [c.model_dump() for c in stream]
        emu.play([{"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Pa'}], "finish": "length"}])
        cut = [c.model_dump() for c in client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "?"}], stream=True)]
    calls, may_run = read_stream(chunks)
    assert [c["name"] for c in calls] == ["get_weather", "get_weather"] and may_run
    assert [c["arguments"] for c in calls] == ['{"city": "Paris"}', '{"city": "Oslo", "note": "a } inside"}']
    assert all(c["id"].startswith("call_") for c in calls) and calls[0]["id"] != calls[1]["id"]
    calls, may_run = read_stream(cut)
    assert calls[0]["arguments"] == '{"city": "Pa' and may_run is False


def test_the_right_answer_passes_with_a_line_per_property() -> None:
    report = workshop.check("wire", read_stream, seed=7)
    assert report.passed, str(report)
    assert len(report.lines) == 13
    assert all(line.detail.endswith(("stream", "streams")) for line in report.lines)


def test_a_starter_that_returns_nothing_is_told_the_shape() -> None:
    report = workshop.check("wire", lambda chunks: ([], False), seed=3)
    assert not report.passed and report.kinds[0] == "lost"
    report = workshop.check("wire", lambda chunks: None, seed=3)
    assert report.kinds == ["shape"] and len(report.failures) == 13
