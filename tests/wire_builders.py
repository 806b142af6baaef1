"""Synthetic wire traffic for the adapter tests: one whole response and one stream per provider, from a spec.

The shapes follow the recorded corpus in tests/fixtures/wire (field names, event order, done signals); the
split function decides how text and arguments are cut into fragments, so property tests can re-chunk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

import agentnb as anb
from agentnb.events import ToolInfo

Split = Callable[[str], list[str]]


def whole(s: str) -> list[str]:
    return [s] if s else []


def every(n: int) -> Split:
    return lambda s: [s[i : i + n] for i in range(0, len(s), n)]


@dataclass
class Call:
    id: str
    name: str
    args: str  # the raw argument text


@dataclass
class Spec:
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    refusal: str = ""
    finish: str = "auto"  # auto: tool_calls when there are calls, else stop; or "length"
    reasoning: str = ""  # reasoning text (summary/thinking/thought) where the provider has it
    signature: str = "c2lnbmF0dXJl+/=="

    @property
    def cut(self) -> bool:
        return self.finish == "length"


# -- OpenAI Chat --------------------------------------------------------------------------------------------


def _chat_finish(spec: Spec) -> str:
    return "length" if spec.cut else "tool_calls" if spec.calls else "stop"


def chat_whole(spec: Spec) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": spec.text or None, "refusal": spec.refusal or None}
    if spec.reasoning:
        msg["reasoning_content"] = spec.reasoning
    if spec.calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.args}}
                             for c in spec.calls]
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "message": msg, "finish_reason": _chat_finish(spec)}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}


def chat_stream(spec: Spec, split: Split = whole) -> list[dict[str, Any]]:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-test"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": f}) for f in split(spec.reasoning)]
    out += [chunk({"content": f}) for f in split(spec.text)]
    out += [chunk({"refusal": f}) for f in split(spec.refusal)]
    for i, c in enumerate(spec.calls):
        out.append(chunk({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                          "function": {"name": c.name, "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": f}}]}) for f in split(c.args)]
    out.append(chunk({}, _chat_finish(spec)))
    out.append({**head, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})
    return out


# -- OpenAI Responses ---------------------------------------------------------------------------------------


def _responses_output(spec: Spec) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if spec.reasoning:
        out.append({"id": "rs_1", "type": "reasoning", "encrypted_content": "enc-final",
                    "summary": [{"type": "summary_text", "text": spec.reasoning}]})
    if spec.text or spec.refusal:
        content = []
        if spec.text:
            content.append({"type": "output_text", "text": spec.text, "annotations": []})
        if spec.refusal:
            content.append({"type": "refusal", "refusal": spec.refusal})
        out.append({"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": content})
    for i, c in enumerate(spec.calls):
        out.append({"id": f"fc_{i}", "type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.args,
                    "status": "completed"})
    return out


def responses_whole(spec: Spec) -> dict[str, Any]:
    status = "incomplete" if spec.cut else "completed"
    return {"id": "resp_1", "object": "response", "model": "gpt-test", "status": status,
            "incomplete_details": {"reason": "max_output_tokens"} if spec.cut else None,
            "output": _responses_output(spec), "usage": {"input_tokens": 11, "output_tokens": 7}}


def responses_stream(spec: Spec, split: Split = whole) -> list[dict[str, Any]]:
    final = responses_whole(spec)
    out: list[dict[str, Any]] = [{"type": "response.created", "response": {**final, "status": "in_progress",
                                                                           "output": []}}]
    for idx, item in enumerate(final["output"]):
        if item["type"] == "reasoning":
            out.append({"type": "response.output_item.added", "output_index": idx,
                        "item": {**item, "encrypted_content": "enc-added", "summary": []}})
            out.append({"type": "response.output_item.done", "output_index": idx,
                        "item": {**item, "encrypted_content": "enc-done"}})
        elif item["type"] == "message":
            out.append({"type": "response.output_item.added", "output_index": idx,
                        "item": {**item, "status": "in_progress", "content": []}})
            out += [{"type": "response.output_text.delta", "item_id": item["id"], "output_index": idx,
                     "content_index": 0, "delta": f} for f in split(spec.text)]
            out += [{"type": "response.refusal.delta", "item_id": item["id"], "output_index": idx,
                     "content_index": 1, "delta": f} for f in split(spec.refusal)]
            if not spec.cut:
                out.append({"type": "response.output_item.done", "output_index": idx, "item": item})
        else:
            out.append({"type": "response.output_item.added", "output_index": idx,
                        "item": {**item, "arguments": "", "status": "in_progress"}})
            out += [{"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": idx,
                     "delta": f} for f in split(item["arguments"])]
            if not spec.cut:
                out.append({"type": "response.function_call_arguments.done", "item_id": item["id"],
                            "output_index": idx, "arguments": item["arguments"]})
                out.append({"type": "response.output_item.done", "output_index": idx, "item": item})
    if spec.cut:  # the final response of a cut stream restates only what was finished
        final = {**final, "output": [o for o in final["output"] if o["type"] == "reasoning"]}
    out.append({"type": "response.incomplete" if spec.cut else "response.completed", "response": final})
    return out


# -- Anthropic ----------------------------------------------------------------------------------------------


def _anthropic_stop(spec: Spec) -> str:
    return "max_tokens" if spec.cut else "tool_use" if spec.calls else "refusal" if spec.refusal else "end_turn"


def anthropic_whole(spec: Spec) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if spec.reasoning:
        content.append({"type": "thinking", "thinking": spec.reasoning, "signature": spec.signature})
    if spec.text or spec.refusal:
        content.append({"type": "text", "text": spec.text + spec.refusal})
    for c in spec.calls:
        try:
            args = json.loads(c.args)
        except ValueError:  # a cut call: the whole response has what the API could parse
            args = {}
        content.append({"type": "tool_use", "id": c.id, "name": c.name, "input": args})
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": content,
            "stop_reason": _anthropic_stop(spec), "usage": {"input_tokens": 11, "output_tokens": 7}}


def anthropic_stream(spec: Spec, split: Split = whole) -> list[dict[str, Any]]:
    msg = anthropic_whole(spec) if not spec.cut else {**anthropic_whole(Spec()), "stop_reason": None}
    out: list[dict[str, Any]] = [{"type": "message_start", "message": {**msg, "content": [], "stop_reason": None,
                                                                        "usage": {"input_tokens": 11,
                                                                                  "output_tokens": 1}}}]
    index = 0
    if spec.reasoning:
        out.append({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        out += [{"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": f}}
                for f in split(spec.reasoning)]
        out.append({"type": "content_block_delta", "index": index,
                    "delta": {"type": "signature_delta", "signature": spec.signature}})
        out.append({"type": "content_block_stop", "index": index})
        index += 1
    if spec.text or spec.refusal:
        out.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        out += [{"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": f}}
                for f in split(spec.text + spec.refusal)]
        out.append({"type": "content_block_stop", "index": index})
        index += 1
    for n, c in enumerate(spec.calls):
        out.append({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}})
        out.append({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta",
                                                                             "partial_json": ""}})
        out += [{"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta",
                                                                          "partial_json": f}} for f in split(c.args)]
        if not (spec.cut and n == len(spec.calls) - 1):  # a max_tokens cut leaves the last block open
            out.append({"type": "content_block_stop", "index": index})
        index += 1
    out.append({"type": "message_delta", "delta": {"stop_reason": _anthropic_stop(spec), "stop_sequence": None},
                "usage": {"output_tokens": 7}})
    out.append({"type": "message_stop"})
    return out


# -- Gemini -------------------------------------------------------------------------------------------------


def _gemini_parts(spec: Spec) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if spec.reasoning:
        parts.append({"text": spec.reasoning, "thought": True})
    if spec.text or spec.refusal:
        parts.append({"text": spec.text + spec.refusal})
    for n, c in enumerate(spec.calls):
        part: dict[str, Any] = {"functionCall": {"name": c.name, "args": json.loads(c.args)}}
        if n == 0:
            part["thoughtSignature"] = spec.signature
        parts.append(part)
    return parts


def _gemini_finish(spec: Spec) -> str:
    return "MAX_TOKENS" if spec.cut else "SAFETY" if spec.refusal else "STOP"


def gemini_whole(spec: Spec) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": _gemini_parts(spec)}, "index": 0,
                            "finishReason": _gemini_finish(spec)}],
            "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 7},
            "modelVersion": "gemini-test", "responseId": "r1"}


def gemini_stream(spec: Spec, split: Split = whole) -> list[dict[str, Any]]:
    head = {"modelVersion": "gemini-test", "responseId": "r1"}

    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        return {**head, "candidates": [cand]}

    out = [chunk([{"text": f, "thought": True}]) for f in split(spec.reasoning)]
    out += [chunk([{"text": f}]) for f in split(spec.text + spec.refusal)]
    out += [chunk([p]) for p in _gemini_parts(spec) if "functionCall" in p]
    last = chunk([{"text": ""}], _gemini_finish(spec))
    last["usageMetadata"] = {"promptTokenCount": 11, "candidatesTokenCount": 7}
    out.append(last)
    return out


BUILDERS: dict[str, tuple[Callable[[Spec], dict[str, Any]], Callable[..., list[dict[str, Any]]]]] = {
    "openai_chat": (chat_whole, chat_stream),
    "openai_responses": (responses_whole, responses_stream),
    "anthropic": (anthropic_whole, anthropic_stream),
    "gemini": (gemini_whole, gemini_stream),
}


# -- round trips ------------------------------------------------------------------------------------------


def adapter(name: str) -> Any:
    from agentnb import providers

    return getattr(providers, name)


def roundtrip(name: str, spec: Spec, split: Split = whole) -> tuple[Any, Any, list[Any]]:
    """(turn from the whole response, turn from the stream, the stream items before the turn)."""
    mod = adapter(name)
    build_whole, build_stream = BUILDERS[name]
    from_whole = mod.parse_response(build_whole(spec))
    items = list(mod.parse_stream(build_stream(spec, split)))
    return from_whole, items[-1], items[:-1]


def same_turn(a: Any, b: Any) -> bool:
    """Equal canonical turns (the raw response aside)."""
    return bool(a.message == b.message and a.finish_reason == b.finish_reason
                and a.finish_reason_raw == b.finish_reason_raw and a.complete == b.complete
                and a.model == b.model and a.response_id == b.response_id and a.usage == b.usage)


def results_for(turn: Any, *, error_for: str | None = None) -> Any:
    """The canonical tool message answering every call of ``turn`` (``error_for``: a call id that failed)."""
    from agentnb._messages import Message, ToolResultPart

    return Message(role="tool", parts=tuple(
        ToolResultPart(call_id=c.call_id, name=c.name, status="error" if c.call_id == error_for else "ok",
                       content=f"result of {c.call_id}", audit={"secret": "never rendered"})
        for c in turn.message.tool_calls))


class Loc(BaseModel):
    city: str
    country: str | None = None


@anb.tool
def weather(where: Loc, units: Literal["c", "f"] = "c", days: int | None = None) -> str:
    """Get the weather."""
    return ""


def weather_tool() -> ToolInfo:
    """A ToolInfo with the pydantic schema features each dialect treats differently ($defs, anyOf null)."""
    info = weather.info()
    return ToolInfo(name=info["name"], description=info["description"], parameters=info["parameters"])


# Arguments in compact JSON: the form the adapters give for providers that send an object (Anthropic and
# Gemini whole responses), so whole and streamed turns compare equal to the byte.
SINGLE = Spec(calls=[Call("call_1", "weather", '{"where":{"city":"Paris"}}')])
PARALLEL = Spec(calls=[Call("call_1", "weather", '{"where":{"city":"Paris"}}'),
                       Call("call_2", "weather", '{"where":{"city":"Oslo"},"units":"f"}')])
TEXT_AND_CALLS = Spec(text="Let me check both cities.", calls=PARALLEL.calls)
REFUSAL = Spec(refusal="I can't help with that.")
CUT = Spec(text="Writing", calls=[Call("call_9", "write_file", '{"path": "a.txt", "body": "Once upon a ti')],
           finish="length")
