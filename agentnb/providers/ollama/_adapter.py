"""Ollama's native chat API (``POST /api/chat``): requests, histories, responses and JSON-lines streams.

Pure mapping, no network (the ``ollama`` client is never imported here). The format is documented in
https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion.

*Requests* (:func:`render_request`). ``messages`` holds every role in place: ``system``, ``user``,
``assistant`` and ``tool``. An assistant turn is one message with its ``content``, its ``thinking`` (the
model's own reasoning, sent back only to Ollama) and ``tool_calls: [{"function": {"name", "arguments"}}]``
whose arguments are a JSON *object*, not a string. Arguments that were not an object (kept raw in the
transcript) are sent as ``{}``, as for the other wire APIs (:func:`~agentnb.providers._wire.wire_arguments`).
Each result is one ``{"role": "tool", "content": ..., "tool_name": ...}`` message. Tools use the
OpenAI-like ``{"type": "function", "function": {...}}`` shape. Sampling settings go in ``options``
(``max_tokens`` becomes ``num_predict``); ``output_schema`` becomes ``format`` (a JSON schema); ``think``
and ``keep_alive`` are top-level. ``stream`` is always written: the server streams when it is absent.

*Binding without ids.* The wire has no call ids. Ollama binds a result to a call by *position*: the tool
messages that follow an assistant message answer its calls in order, and ``tool_name`` names the function
each one answers. So results are rendered in the order of the calls they answer (whatever order they were
stored in). Reading a history back (:func:`.history.parse_history`) inverts that: each call gets the id
``ollama_<message>_<call>`` -- unique in the conversation and the same every time the same body is read --
and each tool message binds to the oldest unanswered call of the assistant message before it whose name is
its ``tool_name`` (the next unanswered call when it has no ``tool_name``). A ``tool_call_id`` or call ``id``,
which newer servers may add, is used when present. Calls in a *response* carry no id: their ``call_id`` is
``""``, which the driver replaces by an id unique in the run (as for Gemini).

*Responses* (:func:`parse_response`, :func:`parse_stream`). A response is one JSON object; a stream is
JSON lines (``application/x-ndjson``; not SSE): each line a chunk with a ``message`` fragment (``content``,
``thinking``; tool calls arrive whole in one chunk, like Gemini's), the last with ``done: true``,
``done_reason`` (``stop``, ``length``, ``load``, ``unload``), the token counts ``prompt_eval_count`` and
``eval_count`` and the durations in nanoseconds (kept in the turn's ``raw``). ``stop`` with calls is
``tool_calls``; ``length`` is a max-tokens cut (the engine makes the run INCOMPLETE and runs none of the
turn's calls); any other reason is not an explicit completion. A stream that ends without ``done: true``,
or with an ``{"error": ...}`` line, is an incomplete turn in which nothing is executable. Values of the
wrong JSON type raise :class:`~agentnb.exceptions.WireFormatError` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..._messages import FinishReason, Message, ModelTurn, ReasoningPart, TextPart, ToolCallPart, Usage
from ..._request import NO_OPTIONS, ArgumentsDelta, RequestOptions, StreamItem, TextDelta, tool_choice_json
from ...events import ToolInfo
from ...exceptions import ArgumentsTooLarge, StreamProtocolError, WireFormatError
from .._render import Plan, conversation
from .._wire import DEFAULT_MAX_ARGUMENT_BYTES, EventSource, as_dict, dumps, loads_object, split_settings

PROVIDER = "ollama"
"""The tag of this wire API on turns and on the continuation data (``thinking``) it produces."""

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length"}
_KNOWN = ("model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream", "think", "options")
_OPTIONS = {"max_tokens": "num_predict", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
            "seed": "seed"}
_LINE_SLACK = 64 * 1024
"""Bytes a stream line may hold beyond the argument cap (the chunk's other fields)."""

__all__ = ["PROVIDER", "call_part", "iter_json_lines", "parse_response", "parse_stream", "render_request",
           "render_tool"]


# -- requests -------------------------------------------------------------------------------------------


def render_tool(tool: ToolInfo) -> dict[str, Any]:
    """One tool in Ollama's ``tools`` shape (the JSON schema as is; the server reads a subset of it).

    Example:
        >>> render_tool(ToolInfo(name="add", description="Add.", parameters={"type": "object"}))
        {'type': 'function', 'function': {'name': 'add', 'description': 'Add.', 'parameters': {'type': 'object'}}}
    """
    return {"type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters}}


def _arguments(p: ToolCallPart) -> dict[str, Any]:
    """A call's arguments as the object Ollama wants; ``{}`` when the model's text was not an object."""
    if p.arguments is not None:
        return p.arguments
    return loads_object(p.arguments_raw) or {}


def _assistant(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": m.text + (m.refusal or "")}
    thinking = "".join(p.text or "" for p in m.parts if isinstance(p, ReasoningPart) and p.provider == PROVIDER)
    if thinking:
        out["thinking"] = thinking
    calls = [{"function": {"name": p.name, "arguments": _arguments(p)}} for p in m.tool_calls]
    if calls:
        out["tool_calls"] = calls
    return out


class _Plan(Plan):
    """A message's items depend on it and, for results, on the order of the calls they answer.

    The context maps a call id to its position in the last assistant message with calls. Binding is positional on
    this wire: the results go in the order of the calls they answer.
    """

    def unit(self, m: Message, ctx: list[dict[str, int]]) -> list[dict[str, Any]]:
        if m.role == "assistant":
            return [_assistant(m)]
        if m.role != "tool":
            return [{"role": m.role, "content": m.text}]
        order = ctx[0]
        results = sorted(m.tool_results, key=lambda r: order.get(r.call_id, len(order)))
        out = [{"role": "tool", "content": r.content, "tool_name": r.name} for r in results]
        out.extend({"role": "user", "content": p.text} for p in m.parts if isinstance(p, TextPart) and p.text)
        return out

    def key(self, m: Message, ctx: list[dict[str, int]]) -> Any:
        if m.role != "tool":
            return None
        order = ctx[0]
        return tuple(order.get(r.call_id, len(order)) for r in m.tool_results)

    def context(self) -> list[dict[str, int]]:
        return [{}]

    def advance(self, ctx: list[dict[str, int]], m: Message) -> Any:
        if m.role != "assistant" or not m.tool_calls:
            return None
        before = ctx[0]
        ctx[0] = {c.call_id: k for k, c in enumerate(m.tool_calls)}
        return before

    def undo(self, ctx: list[dict[str, int]], token: Any) -> None:
        if token is not None:
            ctx[0] = token


_PLAN = _Plan()


def render_request(messages: Sequence[Message], tools: Sequence[ToolInfo] = (), *,
                   request_options: RequestOptions = NO_OPTIONS, renders: dict[str, Any] | None = None,
                   **settings: Any) -> dict[str, Any]:
    """The ``/api/chat`` request body for a canonical conversation.

    Args:
        messages: the conversation (system messages stay where they are: Ollama takes them anywhere).
        tools: the tools offered.
        request_options: the output schema becomes ``format``; the tool choice may be ``auto`` (or ``none``:
            no tools are sent).
        **settings: ``model``; ``max_tokens`` (``options.num_predict``), ``temperature``, ``top_p``, ``top_k``,
            ``seed``, ``stop`` and ``options`` (merged) go in ``options``; ``think`` (a bool or ``"low"``/
            ``"medium"``/``"high"``); ``stream``; other keys (``keep_alive``, ``format``, ...) and ``extra`` go
            into the body as given.
        renders: a run's render cache (``ModelRequest.renders``): messages rendered on its earlier requests are
            not rendered again (:mod:`agentnb.providers._render`).

    Raises:
        ValueError: for the tool choice ``required`` or a named tool and ``parallel_tool_calls=False`` with
            tools, which Ollama cannot express (the SDK model reports it before anything is sent).

    Example:
        >>> render_request([Message.user("Hi")], model="qwen3", max_tokens=64)  # doctest: +NORMALIZE_WHITESPACE
        {'model': 'qwen3', 'messages': [{'role': 'user', 'content': 'Hi'}], 'stream': False,
         'options': {'num_predict': 64}}
    """
    mine, rest = split_settings(settings, _KNOWN)
    choice = request_options.tool_choice
    if tools and choice not in (None, "auto", "none"):
        shown = tool_choice_json(choice)
        raise ValueError(f"tool_choice={shown!r} cannot be expressed on Ollama's /api/chat (the model always "
                         "chooses); use 'auto' or 'none'")
    if tools and request_options.parallel_tool_calls is False:
        raise ValueError("parallel_tool_calls=False cannot be expressed on Ollama's /api/chat; leave it unset")
    body: dict[str, Any] = {}
    if "model" in mine:
        body["model"] = mine["model"]
    body["messages"] = conversation(renders, PROVIDER, None, lambda: _PLAN, messages)[1]
    if tools and choice != "none":
        body["tools"] = [render_tool(t) for t in tools]
    body["stream"] = bool(mine.get("stream"))
    options = {wire: mine[key] for key, wire in _OPTIONS.items() if mine.get(key) is not None}
    if mine.get("stop"):
        options["stop"] = [mine["stop"]] if isinstance(mine["stop"], str) else list(mine["stop"])
    options.update(mine.get("options") or {})
    if options:
        body["options"] = options
    if request_options.output is not None:  # structured output: the answer is JSON fitting the schema
        body["format"] = dict(request_options.output.schema)
    if mine.get("think") is not None:
        body["think"] = mine["think"]
    body.update(rest)
    return body


# -- calls --------------------------------------------------------------------------------------------


def call_part(call_id: str, name: str, args: Any, index: int, provider_id: str | None = None) -> ToolCallPart:
    """A canonical call from Ollama's ``function`` fields (arguments that are not an object stay raw).

    Example:
        >>> call_part("c", "add", {"a": 1}, 0).arguments_raw, call_part("c", "add", "[1]", 0).arguments
        ('{"a":1}', None)
    """
    if isinstance(args, dict):
        return ToolCallPart(call_id=call_id, name=name, arguments_raw=dumps(args), arguments=args, index=index,
                            provider_id=provider_id)
    raw = args if isinstance(args, str) else dumps(args)
    return ToolCallPart(call_id=call_id, name=name, arguments_raw=raw, arguments=loads_object(raw), index=index,
                        provider_id=provider_id)


# -- responses ------------------------------------------------------------------------------------------


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if value is None or isinstance(value, kind):
        return value
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    raise WireFormatError(f"an Ollama {where}: {key!r} is a {type(value).__name__}, expected {names}: {value!r:.80}")


class _Turn:
    """The turn being assembled from whole responses or stream chunks."""

    __slots__ = ("calls", "done", "final", "limit", "model", "parts_text", "parts_thinking", "reason")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts_text: list[str] = []
        self.parts_thinking: list[str] = []
        self.calls: list[ToolCallPart] = []
        self.done = False
        self.reason: str | None = None
        self.model = ""
        self.final: dict[str, Any] = {}

    def chunk(self, body: dict[str, Any]) -> Iterator[StreamItem]:
        self.model = _field(body, "model", str, "chunk") or self.model
        message = _field(body, "message", dict, "chunk") or {}
        thinking = _field(message, "thinking", str, "message")
        if thinking:
            self.parts_thinking.append(thinking)
        content = _field(message, "content", str, "message")
        if content:
            self.parts_text.append(content)
            yield TextDelta(content)
        for tc in _field(message, "tool_calls", list, "message") or ():
            yield self.call(tc)
        done = _field(body, "done", bool, "chunk")
        if done:
            self.done = True
            self.reason = _field(body, "done_reason", str, "chunk") or "stop"
            self.final = body

    def call(self, tc: Any) -> ArgumentsDelta:
        if not isinstance(tc, dict):
            raise WireFormatError(f"an Ollama tool call is a {type(tc).__name__}, expected an object: {tc!r:.80}")
        fn = _field(tc, "function", dict, "tool call") or {}
        name = _field(fn, "name", str, "tool call function") or ""
        wire_id = _field(tc, "id", str, "tool call") or None
        part = call_part("", name, fn.get("arguments"), len(self.calls), wire_id)
        raw = part.arguments_raw
        if len(raw) > self.limit or (not raw.isascii() and len(raw.encode("utf-8", "surrogatepass")) > self.limit):
            raise ArgumentsTooLarge(call_id=wire_id or "", name=name, limit=self.limit)
        self.calls.append(part)
        return ArgumentsDelta(part.index or 0, raw, "", name)

    def turn(self, *, raw: Any, error: str | None) -> ModelTurn:
        parts: list[Any] = []
        if self.parts_thinking:
            parts.append(ReasoningPart(provider=PROVIDER, text="".join(self.parts_thinking)))
        if self.parts_text:
            parts.append(TextPart(text="".join(self.parts_text)))
        parts.extend(self.calls)
        complete = self.done and error is None
        finish: FinishReason = _FINISH.get(self.reason or "", "other") if complete else "other"
        if finish == "stop" and self.calls:  # Ollama says "stop" when the turn ends in tool calls
            finish = "tool_calls"
        f = self.final
        return ModelTurn(
            message=Message(role="assistant", parts=tuple(parts)),
            provider=PROVIDER,
            model=self.model,
            finish_reason_raw=self.reason,
            finish_reason=finish,
            usage=Usage(input_tokens=_count(f, "prompt_eval_count"), output_tokens=_count(f, "eval_count")),
            complete=complete,
            incomplete_reason=None if complete else (error or "the stream ended before a chunk with done: true"),
            raw=raw,
        )


def _count(body: dict[str, Any], key: str) -> int:
    value = body.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _as_body(obj: Any) -> dict[str, Any]:
    if type(obj) is dict:
        return obj
    if isinstance(obj, str | bytes):
        try:
            value = json.loads(obj)
        except ValueError as exc:
            raise WireFormatError(f"an Ollama stream line is not JSON ({exc}): {obj!r:.80}") from None
        if not isinstance(value, dict):
            raise WireFormatError(f"an Ollama stream line is a JSON {type(value).__name__}, not an object: "
                                  f"{obj!r:.80}")
        return value
    return as_dict(obj, "an Ollama response")


def parse_response(raw: Any) -> ModelTurn:
    """One canonical turn from a whole ``/api/chat`` response (a dict, JSON text or the SDK's ``ChatResponse``).

    Raises:
        WireFormatError: an error body (``{"error": ...}``), no ``message``, or a field of the wrong type.

    Example:
        >>> turn = parse_response({"model": "qwen3", "done": True, "done_reason": "stop", "message": {
        ...     "role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add",
        ...     "arguments": {"a": 1}}}]}, "prompt_eval_count": 12, "eval_count": 7})
        >>> turn.finish_reason, turn.message.tool_calls[0].arguments, turn.usage.total_tokens
        ('tool_calls', {'a': 1}, 19)
    """
    body = _as_body(raw)
    if not isinstance(body.get("message"), dict):
        error = body.get("error")
        if error is not None:
            raise WireFormatError(f"an Ollama error body, not a response: {error!r:.200}")
        raise WireFormatError(f"an Ollama response without a message object: {body!r:.120}")
    acc = _Turn(1 << 62)
    for _ in acc.chunk(body):
        pass
    return acc.turn(raw=body, error=None if acc.done else "the response says done: false")


def parse_stream(events: Iterable[Any], *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
                 ) -> Iterator[StreamItem]:
    """Stream items from ``/api/chat`` stream chunks: dicts, the SDK's ``ChatResponse`` objects, or JSON lines.

    A ``str``/``bytes`` item is one whole line (what ``httpx.Response.iter_lines()`` gives; use
    :func:`iter_json_lines` on raw byte chunks). Yields a :class:`TextDelta` per content fragment (thinking
    goes into the turn's reasoning part) and one :class:`ArgumentsDelta` per call, holding its whole
    arguments, then the turn.

    Raises:
        ArgumentsTooLarge: a call's arguments (serialized) or a line passed ``max_argument_bytes``.
        WireFormatError: a chunk of the wrong shape.

    Example:
        >>> lines = ['{"model":"m","message":{"role":"assistant","content":"Hel"},"done":false}',
        ...          '{"model":"m","message":{"role":"assistant","content":"lo"},"done":true,"done_reason":"stop"}']
        >>> turn = list(parse_stream(lines))[-1]
        >>> turn.message.text, turn.complete, turn.finish_reason
        ('Hello', True, 'stop')
    """
    acc = _Turn(max_argument_bytes)
    source = EventSource(events)
    error: str | None = None
    for item in source:
        if isinstance(item, str | bytes):
            if not item.strip():
                continue
            if len(item) > max_argument_bytes + _LINE_SLACK:
                raise ArgumentsTooLarge(call_id="", name="", limit=max_argument_bytes)
        body = _as_body(item)
        if "error" in body and not isinstance(body.get("message"), dict):
            error = f"the provider sent an error: {body['error']!r:.200}"
            break
        yield from acc.chunk(body)
        if acc.done:
            break  # nothing follows the done chunk
    yield acc.turn(raw=acc.final or None, error=source.error or error)


def iter_json_lines(chunks: Iterable[bytes | str], *, max_line_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
                    + _LINE_SLACK) -> Iterator[dict[str, Any]]:
    r"""Split a JSON-lines body (``application/x-ndjson``) in chunks cut anywhere into its objects.

    A last line without its newline that is not whole JSON (the connection broke) is dropped, so the adapter
    sees a stream without its done chunk; a bad line anywhere else is an error. Linear in the input: each
    read is scanned once and a line's pieces are joined once.

    Raises:
        WireFormatError: a line that is not a JSON object.
        StreamProtocolError: a line longer than ``max_line_bytes``.

    Example:
        >>> [c["n"] for c in iter_json_lines([b'{"n":1}\n{"n"', b':2}\n{"n":3'])]
        [1, 2]
    """
    parts: list[bytes] = []  # the pieces of the line being read, joined once its newline arrives
    size = 0
    for chunk in chunks:
        data = chunk.encode() if isinstance(chunk, str) else bytes(chunk)
        nl = data.find(b"\n")
        if nl < 0:  # the common case in a long line: one more piece, no scan of what came before
            parts.append(data)
            size += len(data)
            if size > max_line_bytes:
                raise StreamProtocolError(f"an Ollama stream line is longer than {max_line_bytes} bytes")
            continue
        start = 0
        while nl >= 0:
            parts.append(data[start:nl])
            line = b"".join(parts)
            parts, size = [], 0
            if line.strip():
                yield _as_body(line)
            start = nl + 1
            nl = data.find(b"\n", start)
        if start < len(data):
            parts, size = [data[start:]], len(data) - start
            if size > max_line_bytes:
                raise StreamProtocolError(f"an Ollama stream line is longer than {max_line_bytes} bytes")
    rest = b"".join(parts)
    if rest.strip():
        try:
            yield _as_body(rest)
        except WireFormatError:
            return  # a cut last line: the stream ends without its done chunk
