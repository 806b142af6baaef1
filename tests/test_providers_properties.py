"""Invariants of stream assembly, for every adapter (hypothesis).

- any re-chunking of the same content gives the same canonical turn, equal to the whole response's turn;
- any truncation of a stream (events cut off, or bytes cut anywhere) gives no executable call: either the
  finish rules end the run (INCOMPLETE) or the provider's done signal had already arrived, and the turn is
  the full one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentnb._engine import classify
from agentnb._messages import ModelTurn
from agentnb.providers._sse import iter_json_array, iter_sse_json

from .test_wire_corpus import ADAPTERS, CASES, EXPECTED, WIRE
from .wire_builders import BUILDERS, Call, Spec, adapter, same_turn

PROVIDERS = sorted(BUILDERS)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(st.text(max_size=8), json_values, max_size=4).map(
    lambda d: json.dumps(d, ensure_ascii=False, separators=(",", ":")))


@st.composite
def specs(draw: Any) -> Spec:
    n = draw(st.integers(0, 3))
    calls = [Call(f"call_{i}", draw(st.sampled_from(["get", "put", "find_all"])), draw(arguments)) for i in range(n)]
    return Spec(text=draw(st.text(max_size=40)), calls=calls, reasoning=draw(st.text(max_size=20)))


def chunker(sizes: list[int]) -> Callable[[str], list[str]]:
    def split(s: str) -> list[str]:
        out, i, k = [], 0, 0
        while i < len(s):
            n = sizes[k % len(sizes)]
            out.append(s[i : i + n])
            i, k = i + n, k + 1
        return out

    return split


def final(mod: Any, events: list[Any]) -> ModelTurn:
    items = list(mod.parse_stream(events))
    assert isinstance(items[-1], ModelTurn)
    return items[-1]


@pytest.mark.parametrize("name", PROVIDERS)
@FAST
@given(spec=specs(), sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_any_rechunking_gives_the_same_turn(name: str, spec: Spec, sizes: list[int]) -> None:
    build_whole, build_stream = BUILDERS[name]
    mod = adapter(name)
    one = final(mod, build_stream(spec))
    many = final(mod, build_stream(spec, chunker(sizes)))
    assert same_turn(one, many)
    assert same_turn(mod.parse_response(build_whole(spec)), many)
    assert [c.arguments for c in many.message.tool_calls] == [json.loads(c.args) for c in spec.calls]


@pytest.mark.parametrize("name", PROVIDERS)
@FAST
@given(spec=specs(), sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5), data=st.data())
def test_any_truncation_yields_no_executable_call(name: str, spec: Spec, sizes: list[int], data: Any) -> None:
    _, build_stream = BUILDERS[name]
    mod = adapter(name)
    events = build_stream(spec, chunker(sizes))
    full = final(mod, events)
    cut = data.draw(st.integers(0, len(events) - 1))
    turn = final(mod, events[:cut])
    verdict = classify(turn)
    if verdict is None or verdict.state.value != "INCOMPLETE":
        assert turn.complete and turn.message == full.message  # the done signal had arrived
    else:
        assert not turn.complete


def _parse_bytes(path: str, chunks: list[bytes]) -> ModelTurn:
    mod = ADAPTERS[path.split("/")[0]]
    events = iter_json_array(chunks) if EXPECTED[path]["format"] == "json-array-stream" else iter_sse_json(chunks)
    return final(mod, list(events))


STREAMS = [p for p in CASES if EXPECTED[p]["streaming"]]


@pytest.mark.parametrize("path", STREAMS)
@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), min_size=1, max_size=6))
def test_recorded_streams_survive_any_byte_chunking(path: str, sizes: list[int]) -> None:
    data = (WIRE / path).read_bytes()
    whole = _parse_bytes(path, [data])
    chunks, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        chunks.append(data[i : i + n])
        i, k = i + n, k + 1
    assert same_turn(whole, _parse_bytes(path, chunks))


@pytest.mark.parametrize("path", STREAMS)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_recorded_streams_cut_anywhere_execute_nothing(path: str, data: Any) -> None:
    body = (WIRE / path).read_bytes()
    whole = _parse_bytes(path, [body])
    cut = data.draw(st.integers(0, len(body) - 1))
    turn = _parse_bytes(path, [body[:cut]])
    verdict = classify(turn)
    if verdict is None or verdict.state.value != "INCOMPLETE":
        assert turn.complete and turn.message == whole.message


def test_a_stream_cut_inside_a_multibyte_character_is_a_cut_not_a_crash() -> None:
    from agentnb.exceptions import WireFormatError
    from agentnb.providers import _sse as sse

    whole = 'data: {"text": "caf\u00e9"}\n\ndata: {"text": "na\u00efve"}\n\n'.encode()
    cut = whole[: whole.index("\u00ef".encode()) + 1]  # the first byte of a two-byte character
    assert list(sse.iter_sse_json([cut])) == [{"text": "caf\u00e9"}]  # what arrived whole is kept
    import pytest

    with pytest.raises(WireFormatError, match="not UTF-8"):  # invalid bytes mid-stream are a wire error
        list(sse.iter_sse_json([b"data: {\"a\": \"\xff\xfe\"}\n\n", b"data: {}\n\n"]))


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_lone_surrogate_in_streamed_arguments_is_parsed_not_a_crash(name: str) -> None:
    """JSON's ``\\ud800`` escape decodes to a lone surrogate, which has no UTF-8 form: counting the bytes of a
    fragment must not raise. The turn is the whole response's; the call's validation refuses the text later."""
    build_whole, build_stream = BUILDERS[name]
    mod = adapter(name)
    spec = Spec(calls=[Call("call_0", "get", '{"q":"a\ud800b"}')])
    many = final(mod, build_stream(spec, chunker([2, 3])))
    assert same_turn(mod.parse_response(build_whole(spec)), many)
    assert [c.arguments for c in many.message.tool_calls] == [{"q": "a\ud800b"}]
