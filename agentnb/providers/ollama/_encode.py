"""Turns written as Ollama's ``/api/chat`` writes them, for the local emulator.

:func:`encode` takes a scripted :class:`~agentnb._messages.ModelTurn` and produces the whole response (one
JSON object) or the stream: JSON lines, one chunk per content fragment, one chunk per tool call (whole, as
the server sends them), and a last chunk with ``done: true``, ``done_reason`` and the counts and durations
(nanoseconds). A call the script cut (arguments that are not an object, with a ``length`` finish) is not
sent: the server emits only calls it could parse. Thinking is sent in ``message.thinking``; a refusal is
plain content (Ollama has no refusal field).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from ..._messages import ModelTurn, ReasoningPart, RefusalPart, TextPart
from .._wireapi import Encoded, EncodeRequest

__all__ = ["encode"]


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def encode(turn: ModelTurn, request: EncodeRequest) -> Encoded:
    r"""A ``/api/chat`` answer for ``turn``: the whole body, and the JSON lines of the stream.

    Example:
        >>> from agentnb._messages import Message
        >>> turn = ModelTurn(message=Message.assistant("Hi"), provider="scripted", model="s", finish_reason="stop")
        >>> req = EncodeRequest(model="qwen3", body={}, stream=True, size=8, ids=str, sign=lambda k, c: "")
        >>> encode(turn, req).frames[0]
        b'{"model":"qwen3","created_at":...,"message":{"role":"assistant","content":"Hi"},"done":false}\n'
    """
    model, stream, size = request.model, request.stream, request.size
    msg = turn.message
    thinking = "".join(p.text or "" for p in msg.parts if isinstance(p, ReasoningPart))
    text = "".join(p.text for p in msg.parts if isinstance(p, TextPart | RefusalPart))
    calls = [{"function": {"name": c.name, "arguments": c.arguments}} for c in msg.tool_calls
             if c.arguments is not None]
    reason = "length" if turn.finish_reason_raw in ("length", "max_tokens") or turn.finish_reason == "length" else (
        "stop")
    created = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    ns = time.perf_counter_ns() % 1_000_000 + 1_000_000  # durations of the right shape; nobody times a script
    stats = {"done": True, "done_reason": reason, "total_duration": 3 * ns, "load_duration": ns,
             "prompt_eval_count": turn.usage.input_tokens, "prompt_eval_duration": ns,
             "eval_count": turn.usage.output_tokens, "eval_duration": ns}
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking:
        message["thinking"] = thinking
    if calls:
        message["tool_calls"] = calls
    body = {"model": model, "created_at": created, "message": message, **stats}
    if not stream:
        return Encoded(body)

    def chunk(fields: dict[str, Any]) -> bytes:
        return _line({"model": model, "created_at": created, "message": {"role": "assistant", "content": "",
                                                                          **fields}, "done": False})

    frames = [chunk({"content": "", "thinking": p}) for p in _pieces(thinking, size)]
    frames += [chunk({"content": p}) for p in _pieces(text, size)]
    marks = []
    for call in calls:
        marks.append(len(frames))
        frames.append(chunk({"tool_calls": [call]}))
    frames.append(_line({"model": model, "created_at": created, "message": {"role": "assistant", "content": ""},
                         **stats}))
    cut_at = marks[len(marks) // 2] if marks else max(1, len(frames) // 2)
    return Encoded(body, frames, min(cut_at, len(frames) - 1))
