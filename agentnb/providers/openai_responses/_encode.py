"""The emulator's encoder for this wire API: a scripted turn as the service writes it.

Responses: a ``response`` object, or named events (``response.created``,
``response.output_item.added``, ``response.function_call_arguments.delta``, ..., ``response.completed``)
with ``sequence_number`` (https://platform.openai.com/docs/api-reference/responses-streaming).
"""

from __future__ import annotations

import time
from typing import Any

from ..._messages import ModelTurn
from .._encoding import Encoded, EncodeRequest, call_ids, cut_point, event, pieces, turn_pieces

__all__ = ["encode"]


def encode(turn: ModelTurn, req: EncodeRequest) -> Encoded:
    """A Responses answer (encrypted reasoning when the request asked for ``reasoning.encrypted_content``)."""
    encrypted = "reasoning.encrypted_content" in (req.body.get("include") or ())
    body, issued = _body(turn, req, encrypted)
    if not req.stream:
        return Encoded(body, issued=issued)
    return _stream(body, issued, req.size, turn.finish_reason_raw in ("length", "max_tokens"))


def _body(turn: ModelTurn, req: EncodeRequest, encrypted: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    ids = req.ids
    reasoning, text, refusal, calls = turn_pieces(turn)
    cids = call_ids(turn, ids, "call_")
    length = turn.finish_reason_raw in ("length", "max_tokens")
    rid, created = ids("resp_"), int(time.time())
    items: list[dict[str, Any]] = []
    rs_id = None
    if reasoning:
        rs_id = ids("rs_")
        item: dict[str, Any] = {"type": "reasoning", "id": rs_id,
                                "summary": [{"type": "summary_text", "text": reasoning}]}
        if encrypted:
            item["encrypted_content"] = req.sign("reasoning", rs_id)
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
        "error": None, "incomplete_details": {"reason": "max_output_tokens"} if length else None,
        "model": req.model, "output": items, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": usage,
    }
    return body, {"reasoning_for": {fc: rs_id for fc in fc_ids} if rs_id else {}}


class _Events:
    """The stream's frames, numbered by ``sequence_number`` as the service numbers them."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.marks: list[int] = []
        self._seq = 0

    def __call__(self, kind: str, /, **fields: Any) -> None:
        self.frames.append(event(kind, {"type": kind, "sequence_number": self._seq, **fields}))
        self._seq += 1


def _stream(body: dict[str, Any], issued: dict[str, Any], size: int, length: bool) -> Encoded:
    ev = _Events()
    head = {**body, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    ev("response.created", response=head)
    ev("response.in_progress", response=head)
    for index, item in enumerate(body["output"]):
        kind = item["type"]
        if kind == "reasoning":
            _reasoning(ev, index, item, size)
        elif kind == "message":
            _message(ev, index, item, size)
        elif not _call(ev, index, item, size, length):
            continue  # cut by the token limit: the call is never done
        ev("response.output_item.done", output_index=index, item=item)
    ev("response.incomplete" if length else "response.completed", response=body)
    return Encoded(body, ev.frames, cut_point(ev.frames, ev.marks), issued)


def _reasoning(ev: _Events, index: int, item: dict[str, Any], size: int) -> None:
    text = item["summary"][0]["text"]
    ids = {"item_id": item["id"], "output_index": index, "summary_index": 0}
    ev("response.output_item.added", output_index=index, item={**item, "summary": [], "encrypted_content": None})
    ev("response.reasoning_summary_part.added", **ids, part={"type": "summary_text", "text": ""})
    for p in pieces(text, size):
        ev("response.reasoning_summary_text.delta", **ids, delta=p)
    ev("response.reasoning_summary_text.done", **ids, text=text)


def _message(ev: _Events, index: int, item: dict[str, Any], size: int) -> None:
    ev("response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []})
    for ci, c in enumerate(item["content"]):
        ids = {"item_id": item["id"], "output_index": index, "content_index": ci}
        text = c["type"] == "output_text"
        ev("response.content_part.added", **ids,
           part={"type": "output_text", "text": "", "annotations": []} if text else {"type": "refusal", "refusal": ""})
        if text:
            for p in pieces(c["text"], size):
                ev("response.output_text.delta", **ids, delta=p, logprobs=[])
            ev("response.output_text.done", **ids, text=c["text"], logprobs=[])
        else:
            for p in pieces(c["refusal"], size):
                ev("response.refusal.delta", **ids, delta=p)
            ev("response.refusal.done", **ids, refusal=c["refusal"])
        ev("response.content_part.done", **ids, part=c)


def _call(ev: _Events, index: int, item: dict[str, Any], size: int, length: bool) -> bool:
    """The call's events; False when the token limit cut it (no done events follow)."""
    ev("response.output_item.added", output_index=index, item={**item, "arguments": "", "status": "in_progress"})
    for p in pieces(item["arguments"], size):
        ev.marks.append(len(ev.frames))
        ev("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=p)
    if length:
        return False
    ev("response.function_call_arguments.done", item_id=item["id"], output_index=index,
       arguments=item["arguments"], name=item["name"])
    return True
