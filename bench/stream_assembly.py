"""Streamed tool-call assembly: one call's arguments (100 KB and 1 MB) arriving in 8-byte fragments.

For each wire adapter the same stream of decoded events (the dicts of SSE ``data:`` lines) goes through:

- ``agentnb``: the adapter's ``parse_stream``, consumed to the end (one stream item per fragment, the call
  merged, checked and parsed once at its done signal);
- ``join+loads``: the least any accumulator can do: pick each fragment out of its event, join, ``json.loads``;
- the provider SDK's own accumulator, fed the SDK's event objects (built before timing): openai's
  ``ChatCompletionStreamState`` and ``ResponseStreamState``, anthropic's ``accumulate_event``. The openai
  states concatenate without parsing, so ``json.loads`` of their result is added to be the same work.

Gemini sends a call whole in one chunk (no argument fragments on the Gemini API), so its row is that one
chunk through the adapter beside ``json.dumps`` of the arguments (the adapter keeps the raw text). Ollama
also sends a call whole, in one line of a JSON-lines body: its row is that body's bytes arriving in 8-byte
network reads, split into lines (``iter_json_lines``) and parsed, beside ``json.loads`` of the joined bytes.
Medians of several repeats, all measured in this run; the machine is shared and noisy, so read the ratios.
An SDK accumulator that takes more than ``--sdk-budget`` seconds at 100 KB is not run at 1 MB; the line
then gives a bound from linear extrapolation (10x its 100 KB time), which flatters an SDK that is quadratic.

    python bench/stream_assembly.py [--repeats 5] [--sdk-budget 1]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from agentnb._messages import ModelTurn
from agentnb.providers import anthropic, gemini, ollama, openai_chat, openai_responses

SIZES = {"100 KB": 100_000, "1 MB": 1_000_000}
FRAGMENT = 8
LIMIT = 4 << 20


def arguments(size: int) -> str:
    """A JSON object of exactly ``size`` bytes with escapes and nesting, like a file-writing call."""
    line = 'Line of \\"quoted\\" text with a tab\\t and a newline\\n; '
    head = '{"path": "notes/big.txt", "mode": "w", "body": "'
    tail = '", "lines": [1, 2, 3]}'
    body = (line * (size // len(line) + 1))[: size - len(head) - len(tail)]
    if body.endswith("\\"):
        body = body[:-1] + "x"
    text = head + body + tail
    json.loads(text)
    return text


def fragments(text: str) -> list[str]:
    return [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]


# -- the streams ----------------------------------------------------------------------------------------


def chat_events(frags: list[str]) -> list[dict[str, Any]]:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": ""}}]})]
    out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in frags]
    out.append(chunk({}, "tool_calls"))
    return out


def responses_events(frags: list[str]) -> list[dict[str, Any]]:
    item = {"id": "fc_1", "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_1",
            "name": "write_file"}
    response = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5", "status": "in_progress",
                "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    full = "".join(frags)
    done = {**item, "status": "completed", "arguments": full}
    out: list[dict[str, Any]] = [{"type": "response.created", "response": response, "sequence_number": 0},
                                 {"type": "response.output_item.added", "output_index": 0, "item": item,
                                  "sequence_number": 1}]
    out += [{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": f,
             "sequence_number": n + 2} for n, f in enumerate(frags)]
    n = len(out)
    out += [{"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0,
             "arguments": full, "sequence_number": n},
            {"type": "response.output_item.done", "output_index": 0, "item": done, "sequence_number": n + 1},
            {"type": "response.completed", "response": {**response, "status": "completed", "output": [done],
                                                        "usage": {"input_tokens": 1, "output_tokens": 1,
                                                                  "total_tokens": 2,
                                                                  "input_tokens_details": {"cached_tokens": 0},
                                                                  "output_tokens_details": {"reasoning_tokens": 0}}},
             "sequence_number": n + 2}]
    return out


def anthropic_events(frags: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                              "model": "claude-sonnet-4-5", "stop_reason": None,
                                              "stop_sequence": None,
                                              "usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}}]
    out += [{"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": f}}
            for f in frags]
    out += [{"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
             "usage": {"output_tokens": 1}},
            {"type": "message_stop"}]
    return out


def gemini_events(text: str) -> list[dict[str, Any]]:
    return [{"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "write_file", "args": json.loads(text)}}]}, "finishReason": "STOP", "index": 0}],
        "modelVersion": "gemini-2.5-flash"}]


def ollama_reads(text: str) -> list[bytes]:
    """The JSON-lines body of a call and the done chunk, as 8-byte network reads."""
    call = {"model": "qwen3", "message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "write_file", "arguments": json.loads(text)}}]}, "done": False}
    done = {"model": "qwen3", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"}
    body = (json.dumps(call) + "\n" + json.dumps(done) + "\n").encode()
    return [body[i : i + FRAGMENT] for i in range(0, len(body), FRAGMENT)]


class OllamaLines:
    """Ollama's adapter over raw reads: the JSON-lines splitter, then ``parse_stream``."""

    @staticmethod
    def parse_stream(reads: list[bytes], *, max_argument_bytes: int) -> Any:
        return ollama.parse_stream(ollama.iter_json_lines(reads, max_line_bytes=2 * max_argument_bytes),
                                   max_argument_bytes=max_argument_bytes)


def loads_reads(reads: list[bytes]) -> Callable[[], None]:
    return lambda: [json.loads(line) for line in b"".join(reads).splitlines()] and None


# -- the contenders -------------------------------------------------------------------------------------


def ours(mod: Any, events: list[Any], expected: dict[str, Any]) -> Callable[[], None]:
    turn = list(mod.parse_stream(events, max_argument_bytes=LIMIT))[-1]
    assert isinstance(turn, ModelTurn) and turn.complete
    assert turn.message.tool_calls[0].arguments == expected, "the adapter merged the arguments wrong"
    return lambda: deque(mod.parse_stream(events, max_argument_bytes=LIMIT), maxlen=0) and None


def join_loads(pick: Callable[[list[Any]], list[str]], events: list[Any]) -> Callable[[], None]:
    return lambda: json.loads("".join(pick(events))) and None


def pick_chat(events: list[Any]) -> list[str]:
    return [tc["function"].get("arguments") or "" for e in events for ch in e["choices"]
            for tc in (ch["delta"].get("tool_calls") or ())]


def pick_responses(events: list[Any]) -> list[str]:
    return [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]


def pick_anthropic(events: list[Any]) -> list[str]:
    return [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]


def sdk_chat(events: list[dict[str, Any]]) -> Callable[[], None] | str:
    try:
        from openai._models import construct_type
        from openai.lib.streaming.chat._completions import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk
    except ImportError:
        return "openai not installed"
    objs = [construct_type(type_=ChatCompletionChunk, value=e) for e in events]

    def run() -> None:
        state: Any = ChatCompletionStreamState()
        for o in objs:
            state.handle_chunk(o)
        snap = state.current_completion_snapshot
        json.loads(snap.choices[0].message.tool_calls[0].function.arguments)

    return run


def sdk_responses(events: list[dict[str, Any]]) -> Callable[[], None] | str:
    try:
        from openai import omit
        from openai._models import construct_type
        from openai.lib.streaming.responses._responses import ResponseStreamState
        from openai.types.responses import ResponseStreamEvent
    except ImportError:
        return "openai not installed"
    objs = [construct_type(type_=ResponseStreamEvent, value=e) for e in events]  # type: ignore[arg-type]

    def run() -> None:
        state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
        for o in objs:
            state.handle_event(o)
        snap = state._completed_response  # noqa: SLF001 -- the state's own final response
        args = snap.output[0].arguments if snap is not None else objs[-3].item.arguments
        json.loads(args)

    return run


def sdk_anthropic(events: list[dict[str, Any]]) -> Callable[[], None] | str:
    try:
        from anthropic._models import construct_type
        from anthropic.lib.streaming._messages import accumulate_event
        from anthropic.types import RawMessageStreamEvent
    except ImportError:
        return "anthropic not installed"
    objs = [construct_type(type_=RawMessageStreamEvent, value=e) for e in events]  # type: ignore[arg-type]

    def run() -> None:
        snap: Any = None
        bufs: dict[int, bytes] = {}
        for o in objs:
            snap = accumulate_event(event=o, current_snapshot=snap, json_bufs=bufs)
        assert snap.content[0].input

    return run


def median_time(fn: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        gc.enable()
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sdk-budget", type=float, default=1.0, help="seconds an SDK may take at 100 KB to run at 1 MB")
    opts = ap.parse_args()

    rows: list[tuple[str, str, float, float, str]] = []
    ours_times: dict[str, dict[str, float]] = {}
    sdk_skip: dict[str, float] = {}
    print(f"one call's arguments in {FRAGMENT}-byte fragments; medians of {opts.repeats} (SDKs: of up to 3)\n")
    header = f"{'adapter':<17}{'size':>7}{'agentnb MB/s':>14}{'join+loads MB/s':>17}{'ratio':>7}   SDK accumulator"
    print(header)
    print("-" * (len(header) + 30))
    for label, size in SIZES.items():
        text = arguments(size)
        expected = json.loads(text)
        frags = fragments(text)
        mb = size / 1e6
        cases: list[tuple[str, Any, list[Any], Callable[[list[Any]], list[str]] | None, Any]] = [
            ("openai_chat", openai_chat, chat_events(frags), pick_chat, sdk_chat),
            ("openai_responses", openai_responses, responses_events(frags), pick_responses, sdk_responses),
            ("anthropic", anthropic, anthropic_events(frags), pick_anthropic, sdk_anthropic),
            ("gemini (whole)", gemini, gemini_events(text), None, None),
            ("ollama (lines)", OllamaLines, ollama_reads(text), None, None),
        ]
        for name, mod, events, pick, sdk in cases:
            t_ours = median_time(ours(mod, events, expected), opts.repeats)
            ours_times.setdefault(name, {})[label] = t_ours
            if pick is not None:
                t_base = median_time(join_loads(pick, events), opts.repeats)
            elif mod is OllamaLines:
                t_base = median_time(loads_reads(events), opts.repeats)
            else:
                t_base = median_time(lambda e=expected: json.dumps(e, ensure_ascii=False) and None, opts.repeats)
            sdk_note = "-"
            if sdk is not None:
                if name in sdk_skip:
                    est = sdk_skip[name] * 10
                    sdk_note = f"not run: >= {est:.0f} s by linear extrapolation, <= {mb / est:.3f} MB/s"
                else:
                    fn = sdk(events)
                    if isinstance(fn, str):
                        sdk_note = fn
                    else:
                        first = median_time(fn, 1)
                        t_sdk = first if first > 2 else median_time(fn, 3)
                        verdict = "agentnb faster" if t_ours < t_sdk else "SDK faster"
                        sdk_note = f"{mb / t_sdk:8.2f} MB/s  ({t_sdk / t_ours:5.1f}x agentnb's time; {verdict})"
                        if t_sdk > opts.sdk_budget:
                            sdk_skip[name] = t_sdk
            ratio = t_ours / t_base
            print(f"{name:<17}{label:>7}{mb / t_ours:14.2f}{mb / t_base:17.2f}{ratio:7.2f}   {sdk_note}")
            rows.append((name, label, t_ours, t_base, sdk_note))
    print("\nlinearity (agentnb time at 1 MB / at 100 KB; linear is 10, target < 12):")
    for name, times in ours_times.items():
        print(f"  {name:<17}{times['1 MB'] / times['100 KB']:6.1f}x")


if __name__ == "__main__":
    main()
