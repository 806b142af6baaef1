"""The recorded corpus (tests/fixtures/wire, described in its README.md): every file parses to its outcome.

Each case is parsed from its bytes (SSE framing included), checked field by field against expected.json,
then parsed again from the provider SDK's own objects, which must give the same turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentnb._engine import classify
from agentnb._messages import ModelTurn, ReasoningPart, TextPart
from agentnb.providers import WIRE_APIS
from agentnb.providers._sse import iter_json_array, iter_sse, iter_sse_json

WIRE = Path(__file__).parent / "fixtures" / "wire"
EXPECTED: dict[str, Any] = json.loads((WIRE / "expected.json").read_text(encoding="utf-8"))["files"]
ADAPTERS: dict[str, Any] = {key: api for api in WIRE_APIS.values() for key in (api.name, *api.prefixes)}
"""Each corpus folder (``openai-chat``, ``anthropic``, ...) names its wire API in the registry, by name or prefix."""
CASES = sorted(EXPECTED)


def events(path: str) -> list[dict[str, Any]]:
    data = (WIRE / path).read_bytes()
    fmt = EXPECTED[path]["format"]
    if fmt == "sse":
        return list(iter_sse_json([data]))
    if fmt == "json-array-stream":
        return list(iter_json_array([data]))
    return [json.loads(data)]


def parse(path: str, items: list[Any]) -> ModelTurn:
    adapter = ADAPTERS[path.split("/")[0]]
    if EXPECTED[path]["format"] == "json":
        return adapter.parse_response(items[0])  # type: ignore[no-any-return]
    out = list(adapter.parse_stream(items))
    assert all(not isinstance(i, ModelTurn) for i in out[:-1])
    assert isinstance(out[-1], ModelTurn)
    return out[-1]


def test_the_corpus_is_complete() -> None:
    assert len(CASES) == 24
    assert all((WIRE / p).is_file() for p in CASES)
    assert {p.split("/")[0] for p in CASES} <= set(ADAPTERS)  # every folder is a registered wire API


def _check_call(provider: str, call: Any, exp: dict[str, Any]) -> None:
    assert call.name == exp["name"]
    assert call.arguments == exp["arguments"]
    if exp.get("arguments_raw") is not None:
        assert call.arguments_raw == exp["arguments_raw"]
    if provider == "openai-chat":
        assert (call.call_id, call.index) == (exp["id"], exp["index"])
    elif provider == "openai-responses":
        assert (call.call_id, call.provider_id, call.index) == (exp["call_id"], exp["item_id"], exp["output_index"])
    elif provider == "anthropic":
        assert (call.call_id, call.index) == (exp["id"], exp["block_index"])
        assert (call.arguments is not None) == exp["complete"]
    else:
        assert exp["id"] is None and call.call_id == ""
        assert call.index == exp["position"]
        signature = (call.provider_data or {}).get("gemini", {}).get("thoughtSignature")
        assert signature == exp["thought_signature"]


def _check_provider_extras(provider: str, turn: ModelTurn, exp: dict[str, Any]) -> None:
    parts = turn.message.parts
    reasoning = [p for p in parts if isinstance(p, ReasoningPart)]
    if provider == "openai-chat":
        assert turn.message.refusal == exp["refusal"]
        assert turn.usage.input_tokens == exp["usage"]["prompt_tokens"]
        assert turn.usage.output_tokens == exp["usage"]["completion_tokens"]
    elif provider == "anthropic":
        assert turn.response_id == exp["message_id"]
        thinking = [{"block_index": i, "text": p.text, "signature": p.data["signature"]}
                    for i, p in enumerate(parts) if isinstance(p, ReasoningPart)]
        assert thinking == exp["thinking"]
    elif provider == "openai-responses":
        items = [{"id": p.data["id"], "has_encrypted_content": bool(p.data.get("encrypted_content"))}
                 for p in reasoning]
        assert items == [{k: r[k] for k in ("id", "has_encrypted_content")} for r in exp["reasoning_items"]]
        for p, r in zip(reasoning, exp["reasoning_items"], strict=True):
            if "summary_text_count" in r:
                assert len(p.data["summary"]) == r["summary_text_count"]
    else:
        thought = "".join(p.text or "" for p in reasoning) or None
        assert thought == exp["thought_text"]


@pytest.mark.parametrize("path", CASES)
def test_recorded_case(path: str) -> None:
    provider = path.split("/")[0]
    exp = EXPECTED[path]["expected"]
    turn = parse(path, events(path))
    assert turn.complete
    assert turn.finish_reason_raw == exp["finish_reason"]
    assert turn.model == exp["model"]
    assert (turn.message.text or None) == exp["text"]
    calls = turn.message.tool_calls
    assert len(calls) == len(exp["tool_calls"])
    for call, exp_call in zip(calls, exp["tool_calls"], strict=True):
        _check_call(provider, call, exp_call)
    _check_provider_extras(provider, turn, exp)
    # thought text is never answer text
    assert all(not (isinstance(p, TextPart) and "Pelican Names" in p.text) for p in turn.message.parts)
    # the finish rules: calls run unless the turn was cut; a cut call is never executable
    verdict = classify(turn)
    if exp["finish_reason"] in ("length", "max_tokens"):
        assert verdict is not None and verdict.state.value == "INCOMPLETE"
    elif calls:
        assert verdict is None
        assert all(c.arguments is not None for c in calls)
    else:
        assert verdict is not None


@pytest.mark.parametrize("path", [p for p in CASES if EXPECTED[p]["format"] == "sse"])
def test_sse_framing_facts(path: str) -> None:
    facts = EXPECTED[path]["stream"]
    data = (WIRE / path).read_bytes()
    evs = list(iter_sse([data]))
    assert len(evs) == facts["event_count"]
    assert any(e.event is not None for e in evs) == facts["has_event_field"]
    assert (evs[-1].data == "[DONE]") == facts["done_sentinel"]
    assert (not evs[-1].terminated) == facts["final_event_unterminated"]
    assert (b"\r\n" in data) == (facts["line_endings"] == "CRLF")


# -- the same cases read from the providers' SDK objects ------------------------------------------------


def _sdk_objects(path: str, items: list[dict[str, Any]]) -> list[Any]:
    """The objects each SDK builds from these bodies (through the SDK's own, lenient, wire-to-object path)."""
    provider, streaming = path.split("/")[0], EXPECTED[path]["streaming"]
    if provider == "openai-chat":
        from openai._models import construct_type
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        return [construct_type(type_=ChatCompletionChunk if streaming else ChatCompletion, value=i) for i in items]
    if provider == "openai-responses":
        from openai._models import construct_type
        from openai.types.responses import Response, ResponseStreamEvent

        return [construct_type(type_=ResponseStreamEvent if streaming else Response, value=i) for i in items]
    if provider == "anthropic":
        from anthropic._models import construct_type as construct
        from anthropic.types import Message, RawMessageStreamEvent

        return [construct(type_=RawMessageStreamEvent if streaming else Message, value=i) for i in items]
    from google.genai.types import GenerateContentResponse

    return [GenerateContentResponse._from_response(response=i, kwargs={}) for i in items]


@pytest.mark.parametrize("path", CASES)
def test_recorded_case_from_sdk_objects(path: str) -> None:
    items = events(path)
    if path.startswith("anthropic") and EXPECTED[path]["streaming"]:
        items = [i for i in items if i.get("type") != "ping"]  # ping is not a RawMessageStreamEvent
    from_dicts = parse(path, items)
    from_sdk = parse(path, _sdk_objects(path, items))
    assert from_sdk.message == from_dicts.message
    assert (from_sdk.finish_reason, from_sdk.finish_reason_raw, from_sdk.complete) == (
        from_dicts.finish_reason, from_dicts.finish_reason_raw, from_dicts.complete)
    assert (from_sdk.model, from_sdk.response_id, from_sdk.usage) == (
        from_dicts.model, from_dicts.response_id, from_dicts.usage)
