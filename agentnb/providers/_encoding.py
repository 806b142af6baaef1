"""Helpers the emulator's encoders share: SSE framing, the turn's pieces, call ids, the cut point.

Each wire API's ``encode.py`` writes a scripted :class:`~agentnb._messages.ModelTurn` the way its service
does (whole, or as stream frames); a frame is the bytes of one event. :class:`Encoded` also says which frame
holds the middle of the arguments, where an injected cut goes.
"""

from __future__ import annotations

import json
from typing import Any

from .._messages import ModelTurn, ReasoningPart, RefusalPart, TextPart, ToolCallPart
from ._wireapi import Encoded, EncodeRequest

__all__ = ["Encoded", "EncodeRequest", "args", "call_ids", "cut_point", "data", "event", "pieces", "turn_pieces"]

def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def data(obj: Any) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def event(name: str, obj: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def turn_pieces(turn: ModelTurn) -> tuple[str, str, str, list[ToolCallPart]]:
    msg = turn.message
    reasoning = "".join(p.text or "" for p in msg.parts if isinstance(p, ReasoningPart))
    text = "".join(p.text for p in msg.parts if isinstance(p, TextPart))
    refusal = "".join(p.text for p in msg.parts if isinstance(p, RefusalPart))
    return reasoning, text, refusal, msg.tool_calls


def call_ids(turn: ModelTurn, ids: Any, prefix: str) -> list[str]:
    """Ids for the turn's calls: the script's own where it gave one, else new ones in the service's style."""
    spec = turn.raw if isinstance(turn.raw, dict) else {}
    out = []
    for i, _call in enumerate(turn.message.tool_calls):
        given = (spec.get("tool_calls") or [{}] * (i + 1))[i]
        out.append(given["id"] if isinstance(given, dict) and given.get("id") else ids(prefix))
    return out


def args(call: ToolCallPart) -> dict[str, Any]:
    return call.arguments if call.arguments is not None else {}


def cut_point(frames: list[bytes], marks: list[int]) -> int:
    if marks:
        return marks[len(marks) // 2]
    return max(1, len(frames) // 2)
