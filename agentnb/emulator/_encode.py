"""Turns as each service writes them: whole response bodies and streamed events, per wire API.

Each encoder takes a scripted :class:`~agentnb.messages.ModelTurn` (reasoning, text, refusal, calls, the raw
finish reason) and produces what the real service sends for it:

- OpenAI Chat Completions: a ``chat.completion`` object, or ``chat.completion.chunk`` events as bare
  ``data:`` lines ending with ``data: [DONE]``; the first delta of a call carries its ``id``, ``type`` and
  name, later deltas only argument fragments (https://platform.openai.com/docs/api-reference/chat-streaming).
- OpenAI Responses: a ``response`` object, or named events (``response.created``,
  ``response.output_item.added``, ``response.function_call_arguments.delta``, ..., ``response.completed``)
  with ``sequence_number`` (https://platform.openai.com/docs/api-reference/responses-streaming).
- Anthropic Messages: a ``message`` object, or named events ``message_start``, ``content_block_start``/
  ``_delta``/``_stop``, ``ping``, ``message_delta``, ``message_stop``; a ``max_tokens`` cut inside a tool's
  input leaves that block without ``content_block_stop``, as the recorded stream in
  ``tests/fixtures/wire/anthropic/stream-max-tokens-mid-tool-input.sse`` shows
  (https://docs.anthropic.com/en/docs/build-with-claude/streaming).
- Gemini: a ``GenerateContentResponse``, or a sequence of them as ``data:`` lines (``alt=sse``); calls come
  whole, the thought signature on the first call of a step
  (https://ai.google.dev/gemini-api/docs/thought-signatures).

A frame is the bytes of one SSE event. :class:`Encoded` also says which frame holds the middle of the
arguments, where an injected cut goes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..messages import ModelTurn, ReasoningPart, RefusalPart, TextPart, ToolCallPart

Ids = Callable[[str], str]
"""Makes a new id with a prefix (``call_``, ``toolu_``, ``fc_``, ``rs_``, ``msg_``, ...)."""
Sign = Callable[[str, str], str]
"""Signs continuation data: ``sign(kind, content) -> token``."""


@dataclass(slots=True)
class Encoded:
    """A turn as one service writes it."""

    body: dict[str, Any]
    frames: list[bytes] = field(default_factory=list)
    cut_at: int = 0
    """The frame an injected cut breaks (the middle of the arguments, else the middle of the stream)."""
    issued: dict[str, Any] = field(default_factory=dict)
    """What the validator must remember: ``reasoning_for`` (fc id -> rs id), ``reasoning_content_for``."""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _data(obj: Any) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def _event(name: str, obj: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def _parts(turn: ModelTurn) -> tuple[str, str, str, list[ToolCallPart]]:
    msg = turn.message
    reasoning = "".join(p.text or "" for p in msg.parts if isinstance(p, ReasoningPart))
    text = "".join(p.text for p in msg.parts if isinstance(p, TextPart))
    refusal = "".join(p.text for p in msg.parts if isinstance(p, RefusalPart))
    return reasoning, text, refusal, msg.tool_calls


def _call_ids(turn: ModelTurn, ids: Ids, prefix: str) -> list[str]:
    """Ids for the turn's calls: the script's own where it gave one, else new ones in the service's style."""
    spec = turn.raw if isinstance(turn.raw, dict) else {}
    out = []
    for i, _call in enumerate(turn.message.tool_calls):
        given = (spec.get("tool_calls") or [{}] * (i + 1))[i]
        out.append(given["id"] if isinstance(given, dict) and given.get("id") else ids(prefix))
    return out


def _args(call: ToolCallPart) -> dict[str, Any]:
    return call.arguments if call.arguments is not None else {}


def _cut(frames: list[bytes], marks: list[int]) -> int:
    if marks:
        return marks[len(marks) // 2]
    return max(1, len(frames) // 2)


# -- OpenAI Chat Completions ------------------------------------------------------------------------------

_CHAT_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length", "refusal": "stop",
                "content_filter": "content_filter"}


def chat(turn: ModelTurn, model: str, ids: Ids, *, stream: bool, usage_chunk: bool, size: int) -> Encoded:
    """A Chat Completions answer."""
    reasoning, text, refusal, calls = _parts(turn)
    cids = _call_ids(turn, ids, "call_")
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
        return _data({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                      "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]})

    frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if reasoning:
        frames += [chunk({"reasoning_content": p}) for p in _pieces(reasoning, size)]
    if text:
        frames += [chunk({"content": p}) for p in _pieces(text, size)]
    if refusal:
        frames += [chunk({"refusal": p}) for p in _pieces(refusal, size)]
    marks = []
    for i, (cid, c) in enumerate(zip(cids, calls, strict=True)):
        frames.append(chunk({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                             "function": {"name": c.name, "arguments": ""}}]}))
        for p in _pieces(c.arguments_raw, size):
            marks.append(len(frames))
            frames.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
    frames.append(chunk({}, finish))
    if usage_chunk:
        frames.append(_data({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                             "choices": [], "usage": usage}))
    frames.append(b"data: [DONE]\n\n")
    return Encoded(body, frames, _cut(frames, marks), issued)


# -- OpenAI Responses -------------------------------------------------------------------------------------


def responses(  # noqa: C901 -- the event sequence reads best in one place
    turn: ModelTurn, model: str, ids: Ids, sign: Sign, *, stream: bool, encrypted: bool, size: int
) -> Encoded:
    """A Responses answer (``encrypted``: the request asked for ``reasoning.encrypted_content``)."""
    reasoning, text, refusal, calls = _parts(turn)
    cids = _call_ids(turn, ids, "call_")
    length = turn.finish_reason_raw in ("length", "max_tokens")
    rid, created = ids("resp_"), int(time.time())
    items: list[dict[str, Any]] = []
    rs_id = None
    if reasoning:
        rs_id = ids("rs_")
        item: dict[str, Any] = {"type": "reasoning", "id": rs_id,
                                "summary": [{"type": "summary_text", "text": reasoning}]}
        if encrypted:
            item["encrypted_content"] = sign("reasoning", rs_id)
        items.append(item)
    if text or refusal:
        content = ([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if text else []) + (
            [{"type": "refusal", "refusal": refusal}] if refusal else [])
        items.append({"type": "message", "id": ids("msg_"), "status": "completed", "role": "assistant",
                      "content": content})
    fc_ids = []
    for cid, c in zip(cids, calls, strict=True):
        fc_ids.append(ids("fc_"))
        items.append({"type": "function_call", "id": fc_ids[-1], "call_id": cid, "name": c.name,
                      "arguments": c.arguments_raw, "status": "incomplete" if length else "completed"})
    usage = {"input_tokens": turn.usage.input_tokens, "output_tokens": turn.usage.output_tokens,
             "total_tokens": turn.usage.total_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}
    body: dict[str, Any] = {
        "id": rid, "object": "response", "created_at": created, "status": "incomplete" if length else "completed",
        "error": None, "incomplete_details": {"reason": "max_output_tokens"} if length else None, "model": model,
        "output": items, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage,
    }
    issued = {"reasoning_for": {fc: rs_id for fc in fc_ids} if rs_id else {}}
    if not stream:
        return Encoded(body, issued=issued)
    seq = iter(range(1 << 30))

    def ev(kind: str, /, **fields: Any) -> bytes:
        return _event(kind, {"type": kind, "sequence_number": next(seq), **fields})

    head = {**body, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    frames = [ev("response.created", response=head), ev("response.in_progress", response=head)]
    marks: list[int] = []
    for index, item in enumerate(items):
        kind = item["type"]
        if kind == "reasoning":
            frames.append(ev("response.output_item.added", output_index=index,
                             item={**item, "summary": [], "encrypted_content": None}))
            frames.append(ev("response.reasoning_summary_part.added", item_id=item["id"], output_index=index,
                             summary_index=0, part={"type": "summary_text", "text": ""}))
            for p in _pieces(reasoning, size):
                frames.append(ev("response.reasoning_summary_text.delta", item_id=item["id"], output_index=index,
                                 summary_index=0, delta=p))
            frames.append(ev("response.reasoning_summary_text.done", item_id=item["id"], output_index=index,
                             summary_index=0, text=reasoning))
        elif kind == "message":
            frames.append(ev("response.output_item.added", output_index=index,
                             item={**item, "status": "in_progress", "content": []}))
            for ci, c in enumerate(item["content"]):
                empty = {"type": "output_text", "text": "", "annotations": []} if c["type"] == "output_text" else {
                    "type": "refusal", "refusal": ""}
                frames.append(ev("response.content_part.added", item_id=item["id"], output_index=index,
                                 content_index=ci, part=empty))
                if c["type"] == "output_text":
                    for p in _pieces(c["text"], size):
                        frames.append(ev("response.output_text.delta", item_id=item["id"], output_index=index,
                                         content_index=ci, delta=p, logprobs=[]))
                    frames.append(ev("response.output_text.done", item_id=item["id"], output_index=index,
                                     content_index=ci, text=c["text"], logprobs=[]))
                else:
                    for p in _pieces(c["refusal"], size):
                        frames.append(ev("response.refusal.delta", item_id=item["id"], output_index=index,
                                         content_index=ci, delta=p))
                    frames.append(ev("response.refusal.done", item_id=item["id"], output_index=index,
                                     content_index=ci, refusal=c["refusal"]))
                frames.append(ev("response.content_part.done", item_id=item["id"], output_index=index,
                                 content_index=ci, part=c))
        else:
            frames.append(ev("response.output_item.added", output_index=index,
                             item={**item, "arguments": "", "status": "in_progress"}))
            for p in _pieces(item["arguments"], size):
                marks.append(len(frames))
                frames.append(ev("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                 delta=p))
            if length:
                continue  # cut by the token limit: the call is never done
            frames.append(ev("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                             arguments=item["arguments"], name=item["name"]))
        frames.append(ev("response.output_item.done", output_index=index, item=item))
    frames.append(ev("response.incomplete" if length else "response.completed", response=body))
    return Encoded(body, frames, _cut(frames, marks), issued)


# -- Anthropic Messages -----------------------------------------------------------------------------------

_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "max_tokens": "max_tokens",
                   "refusal": "refusal", "content_filter": "refusal", "pause_turn": "pause_turn"}


def anthropic(turn: ModelTurn, model: str, ids: Ids, sign: Sign, *, stream: bool, size: int) -> Encoded:
    """A Messages answer; thinking blocks are signed over their text."""
    reasoning, text, refusal, calls = _parts(turn)
    cids = _call_ids(turn, ids, "toolu_")
    stop = _ANTHROPIC_STOP.get(turn.finish_reason_raw or "stop", "end_turn")
    blocks: list[dict[str, Any]] = []
    if reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": sign("thinking", reasoning)})
    if text or refusal:
        blocks.append({"type": "text", "text": text + refusal})
    for cid, c in zip(cids, calls, strict=True):
        blocks.append({"type": "tool_use", "id": cid, "name": c.name, "input": _args(c)})
    usage = {"input_tokens": turn.usage.input_tokens, "output_tokens": turn.usage.output_tokens,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    body = {"id": ids("msg_"), "type": "message", "role": "assistant", "model": model, "content": blocks,
            "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not stream:
        return Encoded(body)
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    frames = [_event("message_start", {"type": "message_start", "message": start})]
    marks: list[int] = []
    raw_args = [c.arguments_raw for c in calls]
    for index, b in enumerate(blocks):
        kind = b["type"]
        empty = {"thinking": {"type": "thinking", "thinking": "", "signature": ""},
                 "text": {"type": "text", "text": ""},
                 "tool_use": {**b, "input": {}}}[kind]
        frames.append(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                     "content_block": empty}))
        if index == 0:
            frames.append(_event("ping", {"type": "ping"}))

        def delta(d: dict[str, Any], i: int = index) -> bytes:
            return _event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

        cut = False
        if kind == "thinking":
            frames += [delta({"type": "thinking_delta", "thinking": p}) for p in _pieces(b["thinking"], size)]
            frames.append(delta({"type": "signature_delta", "signature": b["signature"]}))
        elif kind == "text":
            frames += [delta({"type": "text_delta", "text": p}) for p in _pieces(b["text"], size)]
        else:
            raw = raw_args[index - (len(blocks) - len(calls))]
            for p in _pieces(raw, size):
                marks.append(len(frames))
                frames.append(delta({"type": "input_json_delta", "partial_json": p}))
            cut = stop == "max_tokens"
        if not cut:
            frames.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    frames.append(_event("message_delta", {"type": "message_delta",
                                           "delta": {"stop_reason": stop, "stop_sequence": None},
                                           "usage": {"output_tokens": turn.usage.output_tokens}}))
    frames.append(_event("message_stop", {"type": "message_stop"}))
    return Encoded(body, frames, _cut(frames, marks))


# -- Gemini -----------------------------------------------------------------------------------------------

_GEMINI_FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "max_tokens": "MAX_TOKENS",
                  "refusal": "SAFETY", "content_filter": "SAFETY"}


def gemini(turn: ModelTurn, model: str, ids: Ids, sign: Sign, *, stream: bool, size: int,
           thinking: bool = False) -> Encoded:
    """A ``generateContent`` answer; with reasoning, the first call (or the text) carries a thought signature.

    ``thinking``: the model always thinks (Gemini 3), so a signature comes even when the script has no reasoning.
    """
    reasoning, text, refusal, calls = _parts(turn)
    finish = _GEMINI_FINISH.get(turn.finish_reason_raw or "stop", "STOP")
    parts: list[dict[str, Any]] = []
    signature = sign("thought", "") if reasoning or thinking else None
    if reasoning:
        parts.append({"text": reasoning, "thought": True})
    if text and finish != "SAFETY":
        parts.append({"text": text})
    for c in calls:
        if c.arguments is None:  # cut arguments: the service sends no call it could not finish
            continue
        parts.append({"functionCall": {"name": c.name, "args": c.arguments}})
    if signature:
        target = next((p for p in parts if "functionCall" in p), None) or next(
            (p for p in reversed(parts) if not p.get("thought")), None)
        if target is not None:
            target["thoughtSignature"] = signature
    usage = {"promptTokenCount": turn.usage.input_tokens, "candidatesTokenCount": turn.usage.output_tokens,
             "totalTokenCount": turn.usage.total_tokens}
    rid = ids("")
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
    if finish == "SAFETY":
        candidate = {"finishReason": "SAFETY", "index": 0,
                     "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                                        "blocked": True}]}
    body = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": rid}
    if not stream:
        return Encoded(body)
    frames: list[bytes] = []
    marks: list[int] = []

    def chunk(chunk_parts: list[dict[str, Any]], last: bool = False) -> bytes:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": chunk_parts}, "index": 0}
        out: dict[str, Any] = {"candidates": [cand], "modelVersion": model, "responseId": rid}
        if last:
            cand["finishReason"] = finish
            out["usageMetadata"] = usage
        return f"data: {json.dumps(out, separators=(',', ':'))}\r\n\r\n".encode()

    if finish == "SAFETY":
        frames.append(f"data: {json.dumps({**body}, separators=(',', ':'))}\r\n\r\n".encode())
        return Encoded(body, frames, 1)
    for p in parts:
        if "functionCall" in p:
            marks.append(len(frames))
            frames.append(chunk([p]))
        elif p.get("thought") or "thoughtSignature" in p:
            frames.append(chunk([p]))
        else:
            frames += [chunk([{"text": piece}]) for piece in _pieces(p["text"], size)]
    frames.append(chunk([], last=True))
    return Encoded(body, frames, _cut(frames, marks))
