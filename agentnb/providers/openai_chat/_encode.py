"""The emulator's encoder for this wire API: a scripted turn as the service writes it.

Chat Completions: a ``chat.completion`` object, or ``chat.completion.chunk`` events as bare
``data:`` lines ending with ``data: [DONE]``; the first delta of a call carries its ``id``, ``type`` and
name, later deltas only argument fragments (https://platform.openai.com/docs/api-reference/chat-streaming).
"""

from __future__ import annotations

import time
from typing import Any

from ..._messages import ModelTurn
from .._encoding import Encoded, EncodeRequest, call_ids, cut_point, data, pieces, turn_pieces

__all__ = ["encode"]


_CHAT_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length", "refusal": "stop",
                "content_filter": "content_filter"}


def encode(turn: ModelTurn, req: EncodeRequest) -> Encoded:
    """A Chat Completions answer (a usage chunk when the request asked for ``stream_options.include_usage``)."""
    usage_chunk = bool((req.body.get("stream_options") or {}).get("include_usage"))
    return _chat(turn, req.model, req.ids, stream=req.stream, usage_chunk=usage_chunk, size=req.size)


def _chat(turn: ModelTurn, model: str, ids: Any, *, stream: bool, usage_chunk: bool, size: int) -> Encoded:
    reasoning, text, refusal, calls = turn_pieces(turn)
    cids = call_ids(turn, ids, "call_")
    finish = _CHAT_FINISH.get(turn.finish_reason_raw or "stop", "stop")
    rid, created = ids("chatcmpl-"), int(time.time())
    usage = {"prompt_tokens": turn.usage.input_tokens, "completion_tokens": turn.usage.output_tokens,
             "total_tokens": turn.usage.total_tokens}
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": refusal or None}
    if calls:
        message["tool_calls"] = [{"id": cid, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments_raw}}
                                 for cid, c in zip(cids, calls, strict=True)]
    if reasoning:
        message["reasoning_content"] = reasoning
    body = {"id": rid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}], "usage": usage}
    issued = {"reasoning_content_for": set(cids) if reasoning and calls else set()}
    if not stream:
        return Encoded(body, issued=issued)

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return data({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                      "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]})

    frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if reasoning:
        frames += [chunk({"reasoning_content": p}) for p in pieces(reasoning, size)]
    if text:
        frames += [chunk({"content": p}) for p in pieces(text, size)]
    if refusal:
        frames += [chunk({"refusal": p}) for p in pieces(refusal, size)]
    marks = []
    for i, (cid, c) in enumerate(zip(cids, calls, strict=True)):
        frames.append(chunk({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                             "function": {"name": c.name, "arguments": ""}}]}))
        for p in pieces(c.arguments_raw, size):
            marks.append(len(frames))
            frames.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
    frames.append(chunk({}, finish))
    if usage_chunk:
        frames.append(data({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                             "choices": [], "usage": usage}))
    frames.append(b"data: [DONE]\n\n")
    return Encoded(body, frames, cut_point(frames, marks), issued)
