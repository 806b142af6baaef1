"""OpenAI Responses wire adapter: pure mapping, no network (the ``openai`` SDK is never imported).

Theory of operation.

*Requests* (:func:`render_request`). The system prompt goes in ``instructions``; the conversation becomes
``input`` items, stateless (no ``previous_response_id``). An assistant turn becomes its output items again,
in order: ``reasoning`` items exactly as last received (``id``, ``summary``, ``encrypted_content``: with
``store=false`` and ``include=["reasoning.encrypted_content"]`` the encrypted content is the only copy of
the model's reasoning, and a reasoning model's function call sent back without the reasoning item that
preceded it is refused), assistant ``message`` items (with their ``id`` and ``phase`` when this API produced
them) and ``function_call`` items (``call_id``, ``name``, ``arguments`` as written, and the ``fc_...`` item
``id``). Each result is a ``function_call_output`` item whose ``call_id`` is the call's ``call_id`` -- not
the item id (https://platform.openai.com/docs/guides/function-calling). Function tools are sent with
``strict: false`` unless ``strict=True`` is asked for: this API makes strict mode the default, and strict
mode refuses schemas with optional properties.

*Responses* (:func:`parse_response`, :func:`parse_stream`). Output items keep their ``output_index`` order.
In a stream, ``response.output_item.added`` opens an item (a different item under an ``output_index``
already taken is a :class:`~agentnb.exceptions.StreamProtocolError`); argument deltas are keyed by
``item_id``; ``response.function_call_arguments.done``, ``response.output_item.done`` and the final
``response.completed`` each restate the whole arguments, which are checked against the merged fragments
(not appended again) and mark the call done. A reasoning item's ``encrypted_content`` changes between
``output_item.added``, ``output_item.done`` and ``response.completed``: the last one seen is kept. The
turn is complete at ``response.completed``, ``response.incomplete`` or ``response.failed``; the raw
finish reason is the response ``status`` (``incomplete`` with ``max_output_tokens`` is a ``length`` cut).
Streams with or without ``sequence_number`` and ``obfuscation`` fields read the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..._messages import (
    FinishReason,
    Message,
    ModelTurn,
    ReasoningPart,
    RefusalPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..._request import NO_OPTIONS, ArgumentsDelta, NamedTool, RequestOptions, StreamItem, TextDelta
from ...events import ToolInfo
from ...exceptions import StreamProtocolError, WireFormatError
from .._render import Plan, conversation
from .._wire import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    CallBuffer,
    EventSource,
    as_dict,
    own_data,
    own_reasoning,
    split_settings,
    wire_arguments,
)
from ..openai_chat._adapter import check_strict

PROVIDER = "openai_responses"
"""The tag of this wire API on turns and on the continuation data it produces."""

_KNOWN = ("model", "max_tokens", "strict", "stream")
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")

__all__ = ["PROVIDER", "parse_response", "parse_stream", "render_request", "render_tool"]


# -- requests -------------------------------------------------------------------------------------------


def render_tool(tool: ToolInfo, *, strict: bool = False) -> dict[str, Any]:
    """One tool in the Responses ``tools`` dialect (``strict`` is always explicit: the API defaults it on).

    Raises:
        ValueError: with ``strict=True``, for a schema strict mode refuses.
    """
    strict = strict or tool.strict  # a tool made with @anb.tool(strict=True) asks for it itself
    if strict:
        check_strict(tool.name, tool.parameters, "parameters")
    return {"type": "function", "name": tool.name, "description": tool.description,
            "parameters": tool.parameters, "strict": strict}


def _assistant_items(m: Message) -> Iterator[dict[str, Any]]:
    for p in m.parts:
        if isinstance(p, ReasoningPart):
            if own_reasoning(p, PROVIDER) and p.data:
                yield dict(p.data)
        elif isinstance(p, TextPart):
            mine = own_data(p, PROVIDER)
            if mine.get("id"):
                item = {"type": "message", "role": "assistant", "id": mine["id"], "status": "completed",
                        "content": [{"type": "output_text", "text": p.text, "annotations": []}]}
                if mine.get("phase"):
                    item["phase"] = mine["phase"]
                yield item
            elif p.text:
                yield {"role": "assistant", "content": p.text}
        elif isinstance(p, RefusalPart):
            yield {"role": "assistant", "content": p.text}
        elif isinstance(p, ToolCallPart):
            item = {"type": "function_call", "call_id": p.call_id, "name": p.name, "arguments": wire_arguments(p)}
            if p.provider_id:
                item["id"] = p.provider_id
            yield item


class _Plan(Plan):
    """One message at a time: each message's items depend on it alone."""

    provider = "The Responses API"
    system_apart = True

    def unit(self, m: Message, ctx: Any) -> list[dict[str, Any]]:
        if m.role == "assistant":
            return list(_assistant_items(m))
        out: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, ToolResultPart):
                out.append({"type": "function_call_output", "call_id": p.call_id, "output": p.content})
            elif isinstance(p, TextPart) and p.text:
                out.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": p.text}]})
        return out


_PLAN = _Plan()


def render_request(messages: Sequence[Message], tools: Sequence[ToolInfo] = (), *,
                   request_options: RequestOptions = NO_OPTIONS, renders: dict[str, Any] | None = None,
                   **settings: Any) -> dict[str, Any]:
    """The Responses request body for a canonical conversation.

    Args:
        messages: the conversation; system messages (at the start) become ``instructions``.
        tools: the tools offered.
        request_options: the tool choice (``auto``/``none``/``required``/a named tool) and
            ``parallel_tool_calls`` (both only with tools), and the output schema (``text.format``
            json_schema).
        **settings: ``model``, ``max_tokens`` (sent as ``max_output_tokens``), ``strict``, ``stream``,
            ``extra`` (merged into the body); other keys (``reasoning``, ``include``, ``store``, ...) pass
            through as given.
        renders: a run's render cache (``ModelRequest.renders``): messages rendered on its earlier requests are
            not rendered again (:mod:`agentnb.providers._render`).

    Example:
        >>> render_request([Message.system("Be brief."), Message.user("Hi")], model="gpt-5", max_tokens=100)
        ... # doctest: +NORMALIZE_WHITESPACE
        {'model': 'gpt-5', 'instructions': 'Be brief.',
         'input': [{'type': 'message', 'role': 'user', 'content': [{'type': 'input_text', 'text': 'Hi'}]}],
         'max_output_tokens': 100}
    """
    mine, rest = split_settings(settings, _KNOWN)
    texts, items = conversation(renders, PROVIDER, None, lambda: _PLAN, messages)
    system = "\n\n".join(texts) if texts else None
    body: dict[str, Any] = {}
    if "model" in mine:
        body["model"] = mine["model"]
    if system:
        body["instructions"] = system
    body["input"] = items
    if tools:
        strict = bool(mine.get("strict", False))
        body["tools"] = [render_tool(t, strict=strict) for t in tools]
        choice = request_options.tool_choice
        if isinstance(choice, NamedTool):
            body["tool_choice"] = {"type": "function", "name": choice.name}
        elif choice is not None:
            body["tool_choice"] = choice
        if request_options.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request_options.parallel_tool_calls
    output = request_options.output
    if output is not None:  # structured output: the answer's text is JSON fitting the schema (agentnb._output)
        body["text"] = {"format": {"type": "json_schema", "name": output.name, "schema": dict(output.schema),
                                   "strict": output.strict}}
    if mine.get("max_tokens") is not None:
        body["max_output_tokens"] = mine["max_tokens"]
    if mine.get("stream"):
        body["stream"] = True
    body.update(rest)
    return body


# -- responses ------------------------------------------------------------------------------------------


class _Message:
    """An assistant message item being assembled."""

    __slots__ = ("item", "refusal", "text")

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        self.text: list[str] = []
        self.refusal: list[str] = []


class _Turn:
    __slots__ = ("by_id", "calls", "error", "failed", "items", "limit", "model", "response", "response_id",
                 "status")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.items: dict[int, CallBuffer | _Message | dict[str, Any]] = {}
        self.by_id: dict[str, CallBuffer | _Message | dict[str, Any]] = {}
        self.calls: dict[str, CallBuffer] = {}
        self.status: str | None = None
        self.response: dict[str, Any] = {}
        self.response_id: str | None = None
        self.model = ""
        self.error: str | None = None
        self.failed = False

    def header(self, response: dict[str, Any]) -> None:
        self.response = response
        self.response_id = response.get("id") or self.response_id
        self.model = response.get("model") or self.model

    def added(self, index: int, item: dict[str, Any]) -> Iterator[StreamItem]:
        item_id = item.get("id") or f"#{index}"
        held = self.items.get(index)
        if held is not None:
            raise StreamProtocolError(f"output item {item_id!r} arrived at output_index {index}, already taken")
        kind = item.get("type")
        entry: CallBuffer | _Message | dict[str, Any]
        if kind == "function_call":
            buf = CallBuffer(len(self.calls), index, item.get("call_id") or "", item.get("name") or "", self.limit)
            buf.provider_id = item.get("id")
            entry = self.calls[item_id] = buf
            yield ArgumentsDelta(buf.position, "", buf.call_id, buf.name)
            if item.get("arguments"):
                buf.add(item["arguments"])
                yield ArgumentsDelta(buf.position, item["arguments"])
        elif kind == "message":
            entry = _Message(item)
            for c in item.get("content") or ():
                yield from self.content(entry, c)
        else:
            entry = dict(item)
        self.items[index] = self.by_id[item_id] = entry

    def content(self, msg: _Message, c: dict[str, Any]) -> Iterator[StreamItem]:
        if c.get("type") == "output_text" and c.get("text"):
            msg.text.append(c["text"])
            yield TextDelta(c["text"])
        elif c.get("type") == "refusal" and c.get("refusal"):
            msg.refusal.append(c["refusal"])

    def item_done(self, index: int, item: dict[str, Any], where: str) -> Iterator[StreamItem]:
        entry = self.by_id.get(item.get("id") or f"#{index}")
        if entry is None:
            yield from self.added(index, item)
            entry = self.items[index]
        if isinstance(entry, CallBuffer):
            if item.get("call_id") and item["call_id"] != entry.call_id:
                raise StreamProtocolError(f"{where}: call_id {item['call_id']!r} differs from {entry.call_id!r}")
            entry.restated(item.get("arguments"), where)
            entry.done = True
        elif isinstance(entry, _Message):
            entry.item = item
            if not entry.text and not entry.refusal:
                for c in item.get("content") or ():
                    yield from self.content(entry, c)
        else:
            self.items[index] = self.by_id[item.get("id") or f"#{index}"] = dict(item)

    def final(self, response: dict[str, Any]) -> Iterator[StreamItem]:
        self.header(response)
        self.status = response.get("status") or "completed"
        for index, item in enumerate(response.get("output") or ()):
            yield from self.item_done(index, item, "the final response")

    def event(self, kind: Any, ev: dict[str, Any]) -> Iterator[StreamItem]:
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            yield from self.text_delta(kind, ev)
        elif kind in ("response.function_call_arguments.delta", "response.function_call_arguments.done"):
            yield from self.arguments(kind, ev)
        elif kind == "response.output_item.added":
            yield from self.added(ev.get("output_index", len(self.items)), ev.get("item") or {})
        elif kind == "response.output_item.done":
            yield from self.item_done(ev.get("output_index", len(self.items)), ev.get("item") or {}, kind)
        elif kind in _TERMINAL:
            yield from self.final(ev.get("response") or {})
        elif kind in ("response.created", "response.in_progress"):
            self.header(ev.get("response") or {})
        elif kind == "error":
            self.error = f"the provider sent an error event: {ev.get('message') or ev.get('error') or ev}"
            self.failed = True

    def text_delta(self, kind: str, ev: dict[str, Any]) -> Iterator[StreamItem]:
        msg = self.by_id.get(ev.get("item_id") or "")
        if not isinstance(msg, _Message):
            raise StreamProtocolError(f"{kind} for item {ev.get('item_id')!r}, which is not an open message")
        if ev.get("delta"):
            if kind == "response.output_text.delta":
                msg.text.append(ev["delta"])
                yield TextDelta(ev["delta"])
            else:
                msg.refusal.append(ev["delta"])

    def arguments(self, kind: str, ev: dict[str, Any]) -> Iterator[StreamItem]:
        buf = self.calls.get(ev.get("item_id") or "")
        if buf is None:
            what = "argument delta" if kind.endswith(".delta") else kind
            raise StreamProtocolError(f"{what} for item {ev.get('item_id')!r}, which was never added")
        if kind.endswith(".done"):
            buf.restated(ev.get("arguments"), kind)
            buf.done = True
        elif ev.get("delta"):
            buf.add(ev["delta"])
            yield ArgumentsDelta(buf.position, ev["delta"])

    def turn(self, *, raw: Any) -> ModelTurn:
        complete = self.status is not None and not self.failed
        parts: list[Any] = []
        for index in sorted(self.items):
            parts.extend(self._parts(self.items[index], complete))
        calls = any(isinstance(p, ToolCallPart) for p in parts)
        finish = self._finish(calls, any(isinstance(p, RefusalPart) for p in parts)) if complete else "other"
        raw_finish = self.status
        waiting = [e for e in self.items.values() if isinstance(e, dict) and e.get("execution") == "client"]
        if complete and waiting and not calls:
            # A server-side item run by the client (``tool_search_call`` with ``execution: "client"``): the
            # service waits for its result, which agentnb cannot produce. Not an answer: the run ends
            # INCOMPLETE with a reason that names the item, never an empty COMPLETED.
            finish = "other"
            raw_finish = ", ".join(f"{e.get('type')} {e.get('id') or e.get('call_id') or ''}".strip()
                                   for e in waiting) + " waits for a client-side action agentnb cannot perform"
        usage = self.response.get("usage") or {}
        return ModelTurn(
            message=Message(role="assistant", parts=tuple(parts)),
            provider=PROVIDER,
            model=self.model,
            response_id=self.response_id,
            finish_reason_raw=raw_finish,
            finish_reason=finish,
            usage=Usage(input_tokens=usage.get("input_tokens") or 0, output_tokens=usage.get("output_tokens") or 0),
            complete=complete,
            incomplete_reason=None if complete else (self.error or "the stream ended before response.completed"),
            raw=raw,
        )

    def _finish(self, calls: bool, refusal: bool) -> FinishReason:
        if self.status == "completed":
            return "refusal" if refusal else "tool_calls" if calls else "stop"
        if self.status == "incomplete":
            reason = (self.response.get("incomplete_details") or {}).get("reason")
            return "length" if reason == "max_output_tokens" else "content_filter" if reason == "content_filter" \
                else "other"
        return "error" if self.status == "failed" else "other"

    def _parts(self, entry: CallBuffer | _Message | dict[str, Any], complete: bool) -> list[Any]:
        if isinstance(entry, CallBuffer):
            return [entry.part(executable=complete)]
        if isinstance(entry, _Message):
            out: list[Any] = []
            if entry.text:
                tag = {k: entry.item[k] for k in ("id", "phase") if entry.item.get(k)}
                out.append(TextPart(text="".join(entry.text), provider_data={PROVIDER: tag} if tag else None))
            if entry.refusal:
                out.append(RefusalPart(text="".join(entry.refusal)))
            return out
        text = None
        if entry.get("type") == "reasoning":
            summary = [s.get("text") or "" for s in entry.get("summary") or () if isinstance(s, dict)]
            text = "\n\n".join(summary) if summary else None
        return [ReasoningPart(provider=PROVIDER, text=text, data=entry)]


def parse_response(raw: Any) -> ModelTurn:
    """One canonical turn from a whole Responses response (a dict or an SDK ``Response``).

    Raises:
        WireFormatError: when ``raw`` has no ``output`` list (an error body, say).

    Example:
        >>> turn = parse_response({"id": "resp_1", "model": "gpt-5", "status": "completed", "output": [
        ...     {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add", "arguments": '{"a": 1}'}]})
        >>> call = turn.message.tool_calls[0]
        >>> turn.finish_reason, call.call_id, call.provider_id, call.arguments
        ('tool_calls', 'call_1', 'fc_1', {'a': 1})
    """
    body = as_dict(raw, "a Responses response")
    if not isinstance(body.get("output"), list):
        error = body.get("error")
        raise WireFormatError(f"a Responses response without output{f': {error}' if error else ''}")
    acc = _Turn(limit=1 << 62)
    for _ in acc.final(body):
        pass
    return acc.turn(raw=body)


def parse_stream(
    events: Iterable[Any], *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> Iterator[StreamItem]:
    """Stream items from Responses stream events (dicts from SSE ``data:`` lines, or SDK event objects).

    Yields a :class:`TextDelta` per output text fragment and an :class:`ArgumentsDelta` per argument
    fragment (``index`` = the call's position among the turn's calls; id and name on a first, empty
    fragment when the item is added), then the turn.

    Raises:
        ArgumentsTooLarge: one call's arguments passed ``max_argument_bytes``.
        StreamProtocolError: an item at an ``output_index`` already taken, a delta for an item never added,
            or a done event whose arguments differ from the merged fragments.
    """
    acc = _Turn(max_argument_bytes)
    calls = acc.calls
    source = EventSource(events)
    for ev in source:
        if type(ev) is not dict:
            ev = as_dict(ev, "a Responses stream event")
        kind = ev.get("type")
        if kind == "response.function_call_arguments.delta":  # the fast path: one argument fragment
            buf = calls.get(ev.get("item_id"))
            fragment = ev.get("delta")
            if buf is not None and type(fragment) is str:
                if fragment:  # CallBuffer.add, inlined: this runs once per fragment
                    size = buf.size + (len(fragment) if fragment.isascii()
                                       else len(fragment.encode("utf-8", "surrogatepass")))
                    if size > buf.limit:
                        buf.add(fragment)  # raises ArgumentsTooLarge
                    buf.size = size
                    buf.chunks.append(fragment)
                    yield ArgumentsDelta(buf.position, fragment)
                continue
        yield from acc.event(kind, ev)
        if acc.failed:
            break
    if source.error:
        acc.error = source.error
    yield acc.turn(raw=None)
