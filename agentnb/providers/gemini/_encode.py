"""The emulator's encoder for this wire API: a scripted turn as the service writes it.

Gemini: a ``GenerateContentResponse``, or a sequence of them as ``data:`` lines (``alt=sse``); calls come
whole, the thought signature on the first call of a step
(https://ai.google.dev/gemini-api/docs/thought-signatures).
"""

from __future__ import annotations

import json
from typing import Any

from ..._messages import ModelTurn
from .._encoding import Encoded, EncodeRequest, cut_point, pieces, turn_pieces

__all__ = ["encode"]


_GEMINI_FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "max_tokens": "MAX_TOKENS",
                  "refusal": "SAFETY", "content_filter": "SAFETY"}


def encode(turn: ModelTurn, req: EncodeRequest) -> Encoded:
    """A ``generateContent`` answer; a thinking model (Gemini 3, or ``req.thinking``) signs its first call."""
    thinking = req.thinking
    if thinking is None:
        thinking = req.model.split("/")[-1].startswith("gemini-3")
    return _gemini(turn, req.model, req.ids, req.sign, stream=req.stream, size=req.size, thinking=thinking)


def _gemini(turn: ModelTurn, model: str, ids: Any, sign: Any, *, stream: bool, size: int,
            thinking: bool = False) -> Encoded:
    """A ``generateContent`` answer; with reasoning, the first call (or the text) carries a thought signature.

    ``thinking``: the model always thinks (Gemini 3), so a signature comes even when the script has no reasoning.
    """
    finish = _GEMINI_FINISH.get(turn.finish_reason_raw or "stop", "STOP")
    parts = _parts(turn, sign, finish, thinking)
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
    if finish == "SAFETY":
        return Encoded(body, [f"data: {json.dumps({**body}, separators=(',', ':'))}\r\n\r\n".encode()], 1)
    return _stream(body, parts, size, finish, usage)


def _parts(turn: ModelTurn, sign: Any, finish: str, thinking: bool) -> list[dict[str, Any]]:
    reasoning, text, _refusal, calls = turn_pieces(turn)
    parts: list[dict[str, Any]] = []
    if reasoning:
        parts.append({"text": reasoning, "thought": True})
    if text and finish != "SAFETY":
        parts.append({"text": text})
    for c in calls:
        if c.arguments is None:  # cut arguments: the service sends no call it could not finish
            continue
        parts.append({"functionCall": {"name": c.name, "args": c.arguments}})
    if reasoning or thinking:
        signature = sign("thought", "")
        target = next((p for p in parts if "functionCall" in p), None) or next(
            (p for p in reversed(parts) if not p.get("thought")), None)
        if target is not None:
            target["thoughtSignature"] = signature
    return parts


def _stream(body: dict[str, Any], parts: list[dict[str, Any]], size: int, finish: str,
            usage: dict[str, Any]) -> Encoded:
    frames: list[bytes] = []
    marks: list[int] = []

    def chunk(chunk_parts: list[dict[str, Any]], last: bool = False) -> bytes:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": chunk_parts}, "index": 0}
        out: dict[str, Any] = {"candidates": [cand], "modelVersion": body["modelVersion"],
                               "responseId": body["responseId"]}
        if last:
            cand["finishReason"] = finish
            out["usageMetadata"] = usage
        return f"data: {json.dumps(out, separators=(',', ':'))}\r\n\r\n".encode()

    for p in parts:
        if "functionCall" in p:
            marks.append(len(frames))
            frames.append(chunk([p]))
        elif p.get("thought") or "thoughtSignature" in p:
            frames.append(chunk([p]))
        else:
            frames += [chunk([{"text": piece}]) for piece in pieces(p["text"], size)]
    frames.append(chunk([], last=True))
    return Encoded(body, frames, cut_point(frames, marks))
