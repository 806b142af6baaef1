"""The emulator's encoder for this wire API: a scripted turn as the service writes it.

Anthropic Messages: a ``message`` object, or named events ``message_start``, ``content_block_start``/
``_delta``/``_stop``, ``ping``, ``message_delta``, ``message_stop``; a ``max_tokens`` cut inside a tool's
input leaves that block without ``content_block_stop``, as the recorded stream in
``tests/fixtures/wire/anthropic/stream-max-tokens-mid-tool-input.sse`` shows
(https://docs.anthropic.com/en/docs/build-with-claude/streaming).
"""

from __future__ import annotations

from typing import Any

from ..._messages import ModelTurn
from .._encoding import Encoded, EncodeRequest, args, call_ids, cut_point, event, pieces, turn_pieces

__all__ = ["encode"]


_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "max_tokens": "max_tokens",
                   "refusal": "refusal", "content_filter": "refusal", "pause_turn": "pause_turn"}


def encode(turn: ModelTurn, req: EncodeRequest) -> Encoded:
    """A Messages answer; thinking blocks are signed over their text."""
    return _anthropic(turn, req.model, req.ids, req.sign, stream=req.stream, size=req.size)


def _anthropic(turn: ModelTurn, model: str, ids: Any, sign: Any, *, stream: bool, size: int) -> Encoded:
    reasoning, text, refusal, calls = turn_pieces(turn)
    cids = call_ids(turn, ids, "toolu_")
    stop = _ANTHROPIC_STOP.get(turn.finish_reason_raw or "stop", "end_turn")
    blocks: list[dict[str, Any]] = []
    if reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": sign("thinking", reasoning)})
    if text or refusal:
        blocks.append({"type": "text", "text": text + refusal})
    for cid, c in zip(cids, calls, strict=True):
        blocks.append({"type": "tool_use", "id": cid, "name": c.name, "input": args(c)})
    usage = {"input_tokens": turn.usage.input_tokens, "output_tokens": turn.usage.output_tokens,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    body = {"id": ids("msg_"), "type": "message", "role": "assistant", "model": model, "content": blocks,
            "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not stream:
        return Encoded(body)
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    frames = [event("message_start", {"type": "message_start", "message": start})]
    marks: list[int] = []
    raw_args = [c.arguments_raw for c in calls]
    for index, b in enumerate(blocks):
        kind = b["type"]
        empty = {"thinking": {"type": "thinking", "thinking": "", "signature": ""},
                 "text": {"type": "text", "text": ""},
                 "tool_use": {**b, "input": {}}}[kind]
        frames.append(event("content_block_start", {"type": "content_block_start", "index": index,
                                                     "content_block": empty}))
        if index == 0:
            frames.append(event("ping", {"type": "ping"}))

        def delta(d: dict[str, Any], i: int = index) -> bytes:
            return event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

        cut = False
        if kind == "thinking":
            frames += [delta({"type": "thinking_delta", "thinking": p}) for p in pieces(b["thinking"], size)]
            frames.append(delta({"type": "signature_delta", "signature": b["signature"]}))
        elif kind == "text":
            frames += [delta({"type": "text_delta", "text": p}) for p in pieces(b["text"], size)]
        else:
            raw = raw_args[index - (len(blocks) - len(calls))]
            for p in pieces(raw, size):
                marks.append(len(frames))
                frames.append(delta({"type": "input_json_delta", "partial_json": p}))
            cut = stop == "max_tokens"
        if not cut:
            frames.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
    frames.append(event("message_delta", {"type": "message_delta",
                                           "delta": {"stop_reason": stop, "stop_sequence": None},
                                           "usage": {"output_tokens": turn.usage.output_tokens}}))
    frames.append(event("message_stop", {"type": "message_stop"}))
    return Encoded(body, frames, cut_point(frames, marks))
