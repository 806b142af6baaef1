"""Anthropic Messages wire adapter: pure mapping, no network (the ``anthropic`` SDK is never imported).

Theory of operation.

*Requests* (:func:`render_request`). The system prompt goes in the top-level ``system`` field. An assistant
turn is one ``assistant`` message whose content blocks follow the canonical parts in order: ``thinking`` and
``redacted_thinking`` blocks exactly as received (with their ``signature``/``data``: the API checks them
and rejects a tool-use turn whose thinking was altered or dropped,
https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks), then
``text`` and ``tool_use`` (``input`` is the parsed arguments object). The results of a turn are
``tool_result`` blocks (``tool_use_id``, ``content``, ``is_error`` for anything but an ``ok`` result), all
in the next user message and before any text of it: a user turn that follows tool results is merged into
that message (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use). Empty text
blocks are left out (the API refuses them). ``max_tokens`` is required by the API (default 4096);
``parallel_tool_calls=False`` becomes ``tool_choice.disable_parallel_tool_use``. A strict tool gets ``strict:
true`` and a typed output ``output_config.format`` (JSON outputs), both with their schema in the subset of JSON
Schema the service's constrained decoding takes (:func:`json_output_schema`,
https://docs.claude.com/en/docs/build-with-claude/structured-outputs).

*Responses* (:func:`parse_response`, :func:`parse_stream`). Content blocks keep their order; a block's
position in the canonical message is its ``index``. In a stream, ``content_block_start`` opens block
``index`` (a second start for an index already open is a
:class:`~agentnb.exceptions.StreamProtocolError`), ``content_block_delta`` adds ``text_delta``,
``thinking_delta``, ``signature_delta`` or ``input_json_delta`` (whose fragments split keys and strings
anywhere, the first often ``""``), and ``content_block_stop`` closes it: only then are a tool's arguments
parsed. A tool with no arguments streams only ``""``; its input is then the ``{}`` of ``content_block_start``.
``message_delta`` carries the ``stop_reason`` and the cumulative output tokens; ``message_stop`` ends the
message. The turn is complete once the stop reason (or ``message_stop``) arrived: recorded streams end
without the blank line after ``message_stop``, which strict SSE parsers drop. A ``tool_use`` block that
never got its ``content_block_stop`` (a ``max_tokens`` cut inside the input) keeps its raw text and no
parsed arguments, so it is never executable. Unknown block types (server tools, ...) travel as opaque
:class:`~agentnb._messages.ReasoningPart` blocks tagged ``anthropic`` and are sent back as received.
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
    dumps,
    loads_object,
    own_reasoning,
    result_is_error,
    split_settings,
)

PROVIDER = "anthropic"
"""The tag of this wire API on turns and on the continuation data it produces."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when the settings give none (the API requires one)."""

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
    # A long server-side tool turn paused by the service: sending the conversation back continues it
    # (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool, "pause_turn").
    "pause_turn": "pause",
}
_KNOWN = ("model", "max_tokens", "stop", "stream")

__all__ = ["PROVIDER", "parse_response", "parse_stream", "render_request", "render_tool"]


# -- requests -------------------------------------------------------------------------------------------


def render_tool(tool: ToolInfo) -> dict[str, Any]:
    """One tool in the Messages ``tools`` dialect.

    The JSON schema goes in ``input_schema`` unchanged, except for a strict tool (``@anb.tool(strict=True)``):
    it gets ``"strict": true`` (strict tool use, generally available: the service's decoding keeps the input
    inside the schema) and its schema in the subset strict decoding takes (:func:`json_output_schema`).

    Example:
        >>> from agentnb.events import ToolInfo
        >>> render_tool(ToolInfo(name="f", description="F.", parameters={"type": "object"}, strict=True))
        ... # doctest: +NORMALIZE_WHITESPACE
        {'name': 'f', 'description': 'F.', 'input_schema': {'type': 'object', 'properties': {},
         'additionalProperties': False}, 'strict': True}
    """
    if tool.strict:
        return {"name": tool.name, "description": tool.description,
                "input_schema": json_output_schema(tool.parameters), "strict": True}
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


# What strict decoding takes of JSON Schema (https://docs.claude.com/en/docs/build-with-claude/structured-outputs,
# "JSON Schema limitations"; the same subset as the ``anthropic`` SDK's ``transform_schema``): anything else
# (numeric bounds, string lengths, patterns, defaults, ...) is written into the description, where the model
# reads it, and agentnb still validates the answer against the whole schema.
_STRING_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6",
                             "uuid"})
_KEPT = ("description", "title")


def json_output_schema(schema: Any) -> dict[str, Any]:
    r"""``schema`` in the subset of JSON Schema that Anthropic's JSON outputs and strict tools take.

    Objects get ``additionalProperties: false``; ``oneOf`` becomes ``anyOf``; a keyword outside the subset moves
    into the description as ``{keyword: value}``.

    Example:
        >>> json_output_schema({"type": "integer", "minimum": 0, "description": "Cents."})
        {'type': 'integer', 'description': 'Cents.\n\n{minimum: 0}'}
    """
    rest = dict(schema) if isinstance(schema, dict) else {}
    out: dict[str, Any] = {}
    defs = rest.pop("$defs", None)
    if isinstance(defs, dict):
        out["$defs"] = {k: json_output_schema(v) for k, v in defs.items()}
    if "$ref" in rest:
        out["$ref"] = rest.pop("$ref")
        return out
    kind = rest.pop("type", None)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(rest.get(key), list):
            out["allOf" if key == "allOf" else "anyOf"] = [json_output_schema(v) for v in rest.pop(key)]
            kind = None
            break
    for key in ("enum", "const"):
        if key in rest:
            out[key] = rest.pop(key)
            kind = None
    if kind is not None:
        out["type"] = kind
    for key in _KEPT:
        if key in rest:
            out[key] = rest.pop(key)
    _typed(kind, rest, out)
    if rest:
        extra = "{" + ", ".join(f"{k}: {v}" for k, v in rest.items()) + "}"
        out["description"] = f"{out['description']}\n\n{extra}" if out.get("description") else extra
    return out


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in m.parts:
        if isinstance(p, ReasoningPart):
            if own_reasoning(p, PROVIDER) and p.data:
                blocks.append(dict(p.data))
        elif isinstance(p, TextPart | RefusalPart):
            if p.text:
                blocks.append({"type": "text", "text": p.text})
        elif isinstance(p, ToolCallPart):
            args = p.arguments if p.arguments is not None else (loads_object(p.arguments_raw) or {})
            blocks.append({"type": "tool_use", "id": p.call_id, "name": p.name, "input": args})
    return blocks


def _user_blocks(m: Message) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for p in m.parts:
        if isinstance(p, ToolResultPart):
            results.append({"type": "tool_result", "tool_use_id": p.call_id, "content": p.content,
                            "is_error": result_is_error(p)})
        elif isinstance(p, TextPart) and p.text:
            texts.append({"type": "text", "text": p.text})
    return results + texts


class _Plan(Plan):
    """A message's blocks depend on it alone; consecutive messages of one role are one message of the API."""

    provider = "Anthropic"
    system_apart = True
    merges = True

    def unit(self, m: Message, ctx: Any) -> tuple[str, list[dict[str, Any]]]:
        if m.role == "assistant":
            return "assistant", _assistant_blocks(m)
        return "user", _user_blocks(m)

    def join(self, role: str, before: list[Any], blocks: list[Any]) -> list[Any]:
        results = [b for b in blocks if b["type"] == "tool_result"] if role == "user" else None
        if not results:
            return before + blocks
        # results come first in a user message: they go before the text already there
        n = sum(1 for b in before if b["type"] == "tool_result")
        return [*before[:n], *results, *before[n:], *(b for b in blocks if b["type"] != "tool_result")]


_PLAN = _Plan()


def render_request(messages: Sequence[Message], tools: Sequence[ToolInfo] = (), *,
                   request_options: RequestOptions = NO_OPTIONS, renders: dict[str, Any] | None = None,
                   **settings: Any) -> dict[str, Any]:
    """The Messages request body for a canonical conversation.

    Args:
        messages: the conversation; system messages (at the start) become ``system``.
        tools: the tools offered.
        request_options: the tool choice (``auto``/``none``/``required``/a named tool: ``tool_choice``) and
            ``parallel_tool_calls`` (False: ``disable_parallel_tool_use``); both only with tools. An output
            schema (strict form only) goes in ``output_config.format`` (JSON outputs, generally available).
        **settings: ``model``, ``max_tokens`` (default 4096), ``stop`` (``stop_sequences``), ``stream``, ``extra``
            (merged into the body); other keys (``temperature``, ``thinking``, ...) pass through as given.
        renders: a run's render cache (``ModelRequest.renders``): messages rendered on its earlier requests are
            not rendered again (:mod:`agentnb.providers._render`).

    Raises:
        ValueError: for an output schema that is not in strict form, or an option given as a setting.

    Example:
        >>> render_request([Message.system("Be brief."), Message.user("Hi")], model="claude-sonnet-4-5")
        ... # doctest: +NORMALIZE_WHITESPACE
        {'model': 'claude-sonnet-4-5', 'max_tokens': 4096, 'system': 'Be brief.',
         'messages': [{'role': 'user', 'content': [{'type': 'text', 'text': 'Hi'}]}]}
    """
    mine, rest = split_settings(settings, _KNOWN)
    output = request_options.output
    if output is not None and not output.strict:  # asked for, never silently dropped (nor sent loosened)
        raise ValueError(f"output schema {output.name!r} is not in strict form (free keys, a tuple, ...): Anthropic's "
                         "JSON outputs take only that; ask for it with the output tool (output_mode='tool')")
    texts, items = conversation(renders, PROVIDER, None, lambda: _PLAN, messages)
    system = "\n\n".join(texts) if texts else None
    body: dict[str, Any] = {}
    if "model" in mine:
        body["model"] = mine["model"]
    body["max_tokens"] = mine.get("max_tokens") or DEFAULT_MAX_TOKENS
    if system:
        body["system"] = system
    body["messages"] = items
    if tools:
        body["tools"] = [render_tool(t) for t in tools]
        choice = request_options.tool_choice
        native: dict[str, Any] | None
        if choice is None:
            native = None
        elif isinstance(choice, NamedTool):
            native = {"type": "tool", "name": choice.name}
        else:
            native = {"type": {"auto": "auto", "none": "none", "required": "any"}[choice]}
        if request_options.parallel_tool_calls is False:
            native = {"type": "auto", **(native or {}), "disable_parallel_tool_use": True}
        if native is not None:
            body["tool_choice"] = native
    if output is not None:  # JSON outputs: the answer's text is JSON fitting the schema (agentnb._output)
        body["output_config"] = {**(rest.pop("output_config", None) or {}),
                                 "format": {"type": "json_schema", "schema": json_output_schema(output.schema)}}
    if mine.get("stop"):
        stop = mine["stop"]
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if mine.get("stream"):
        body["stream"] = True
    body.update(rest)
    return body


def _typed(kind: Any, rest: dict[str, Any], out: dict[str, Any]) -> None:
    """Move the keywords of ``kind`` that the subset takes from ``rest`` to ``out``."""
    if kind == "object":
        out["properties"] = {k: json_output_schema(v) for k, v in (rest.pop("properties", None) or {}).items()}
        rest.pop("additionalProperties", None)
        out["additionalProperties"] = False
        if "required" in rest:
            out["required"] = list(rest.pop("required"))
    elif kind == "array":
        if "items" in rest:
            out["items"] = json_output_schema(rest.pop("items"))
        if rest.get("minItems") in (0, 1):
            out["minItems"] = rest.pop("minItems")
    elif kind == "string" and rest.get("format") in _STRING_FORMATS:
        out["format"] = rest.pop("format")


# -- responses ------------------------------------------------------------------------------------------


class _Block:
    """One content block being assembled (text, thinking or an opaque block; tool_use uses CallBuffer)."""

    __slots__ = ("block", "chunks", "done", "json", "signature")

    def __init__(self, block: dict[str, Any]) -> None:
        self.block = block
        self.chunks: list[str] = []
        self.json: list[str] = []
        self.signature: str | None = None
        self.done = False


class _Turn:
    __slots__ = ("blocks", "calls", "error", "failed", "finish", "input_tokens", "limit", "model", "output_tokens",
                 "response_id", "stopped")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.blocks: dict[int, _Block | CallBuffer] = {}
        self.calls: dict[int, CallBuffer] = {}
        self.finish: str | None = None
        self.stopped = False
        self.model = ""
        self.response_id: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.error: str | None = None
        self.failed = False

    def message(self, msg: dict[str, Any]) -> None:
        self.response_id = msg.get("id")
        self.model = msg.get("model") or ""
        self.usage(msg.get("usage"))
        if msg.get("stop_reason"):
            self.finish = msg["stop_reason"]

    def usage(self, usage: dict[str, Any] | None) -> None:
        if not usage:
            return
        if usage.get("input_tokens") is not None:
            self.input_tokens = sum(usage.get(k) or 0 for k in (
                "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        if usage.get("output_tokens") is not None:
            self.output_tokens = usage["output_tokens"]

    def start(self, index: int, block: dict[str, Any]) -> Iterator[StreamItem]:
        if index in self.blocks:
            raise StreamProtocolError(f"content_block_start for index {index}, which is already open")
        if block.get("type") == "tool_use":
            buf = CallBuffer(len(self.calls), index, block.get("id") or "", block.get("name") or "", self.limit)
            buf.extra = block.get("input") or {}
            self.blocks[index] = self.calls[index] = buf
            yield ArgumentsDelta(buf.position, "", buf.call_id, buf.name)
            return
        b = self.blocks[index] = _Block(block)
        text = block.get("text") or block.get("thinking")
        if text:
            b.chunks.append(text)
            if block.get("type") == "text":
                yield TextDelta(text)
        if block.get("signature"):
            b.signature = block["signature"]

    def delta(self, index: int, delta: dict[str, Any]) -> Iterator[StreamItem]:
        b = self.blocks.get(index)
        if b is None:
            raise StreamProtocolError(f"content_block_delta for index {index}, which was never started")
        kind = delta.get("type")
        if isinstance(b, CallBuffer):
            fragment = delta.get("partial_json")
            if kind == "input_json_delta" and fragment:
                b.add(fragment)
                yield ArgumentsDelta(b.position, fragment)
        elif kind == "text_delta":
            if delta.get("text"):
                b.chunks.append(delta["text"])
                yield TextDelta(delta["text"])
        elif kind == "thinking_delta":
            b.chunks.append(delta.get("thinking") or "")
        elif kind == "signature_delta":
            b.signature = delta.get("signature")
        elif kind == "input_json_delta":
            b.json.append(delta.get("partial_json") or "")
        elif kind == "citations_delta" and delta.get("citation") is not None:
            b.block = {**b.block, "citations": [*(b.block.get("citations") or []), delta["citation"]]}

    def stop(self, index: int) -> None:
        b = self.blocks.get(index)
        if b is None:
            raise StreamProtocolError(f"content_block_stop for index {index}, which was never started")
        b.done = True

    def event(self, kind: Any, ev: dict[str, Any]) -> bool:
        """Fold an event that yields nothing; False when the stream must end here (an error event)."""
        if kind == "content_block_stop":
            self.stop(ev.get("index"))  # type: ignore[arg-type]
        elif kind == "message_start":
            self.message(ev.get("message") or {})
        elif kind == "message_delta":
            stop = (ev.get("delta") or {}).get("stop_reason")
            if stop:
                self.finish = stop
            self.usage(ev.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            self.error = f"the provider sent an error event: {ev.get('error')}"
            self.failed = True
            return False
        return True

    def turn(self, *, raw: Any) -> ModelTurn:
        complete = (self.finish is not None or self.stopped) and not self.failed
        parts: list[Any] = []
        for index in sorted(self.blocks):
            parts.append(self._part(self.blocks[index], complete))
        finish = _FINISH.get(self.finish or "", "other")
        return ModelTurn(
            message=Message(role="assistant", parts=tuple(parts)),
            provider=PROVIDER,
            model=self.model,
            response_id=self.response_id,
            finish_reason_raw=self.finish,
            finish_reason=finish if complete else "other",
            usage=Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens),
            complete=complete,
            incomplete_reason=None if complete else (self.error or "the stream ended before the stop reason"),
            raw=raw,
        )

    def _part(self, b: _Block | CallBuffer, complete: bool) -> Any:
        if isinstance(b, CallBuffer):
            if b.done and not b.chunks and b.extra:  # the input came whole with the block start
                b.add(dumps(b.extra))
            return b.part(executable=complete, empty_is_object=True)
        kind = b.block.get("type")
        text = "".join(b.chunks)
        if kind == "text":
            return TextPart(text=text)
        if kind == "thinking":
            return ReasoningPart(provider=PROVIDER, text=text,
                                 data={"type": "thinking", "thinking": text, "signature": b.signature or ""})
        block = dict(b.block)
        if b.json:
            block["input"] = loads_object("".join(b.json)) or {}
        return ReasoningPart(provider=PROVIDER, text=None, data=block)


def parse_response(raw: Any) -> ModelTurn:
    """One canonical turn from a whole Messages response (a dict or an SDK ``Message``).

    Raises:
        WireFormatError: when ``raw`` has no ``content`` list (an error body, say).

    Example:
        >>> turn = parse_response({"id": "msg_1", "model": "claude", "stop_reason": "tool_use", "content": [
        ...     {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}]})
        >>> turn.finish_reason, turn.message.tool_calls[0].arguments
        ('tool_calls', {'a': 1})
    """
    body = as_dict(raw, "a Messages response")
    content = body.get("content")
    if not isinstance(content, list):
        error = body.get("error")
        raise WireFormatError(f"a Messages response without content{f': {error}' if error else ''}")
    acc = _Turn(limit=1 << 62)
    acc.message(body)
    for index, block in enumerate(content):
        if block.get("type") == "tool_use":
            block = {**block, "input": {}}
            for _ in acc.start(index, block):
                pass
            acc.calls[index].add(dumps(content[index].get("input") or {}))
        else:
            for _ in acc.start(index, block):
                pass
        acc.stop(index)
    acc.stopped = True
    if acc.finish is None:
        acc.finish = "end_turn"
    return acc.turn(raw=body)


def parse_stream(
    events: Iterable[Any], *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> Iterator[StreamItem]:
    """Stream items from Messages stream events (dicts from SSE ``data:`` lines, or SDK event objects).

    Yields a :class:`TextDelta` per text fragment and an :class:`ArgumentsDelta` per ``input_json_delta``
    fragment (``index`` = the call's position among the turn's calls; id and name on a first, empty
    fragment at ``content_block_start``), then the turn. Thinking goes into the turn's reasoning parts.

    Raises:
        ArgumentsTooLarge: one call's input passed ``max_argument_bytes``.
        StreamProtocolError: a block started twice, or a delta or stop for a block never started.
    """
    acc = _Turn(max_argument_bytes)
    calls = acc.calls
    source = EventSource(events)
    for ev in source:
        if type(ev) is not dict:
            ev = as_dict(ev, "a Messages stream event")
        kind = ev.get("type")
        if kind == "content_block_delta":
            delta = ev.get("delta") or {}
            buf = calls.get(ev.get("index"))
            fragment = delta.get("partial_json")
            if buf is not None and type(fragment) is str and delta.get("type") == "input_json_delta":
                if fragment:  # the fast path, CallBuffer.add inlined: this runs once per fragment
                    size = buf.size + (len(fragment) if fragment.isascii()
                                       else len(fragment.encode("utf-8", "surrogatepass")))
                    if size > buf.limit:
                        buf.add(fragment)  # raises ArgumentsTooLarge
                    buf.size = size
                    buf.chunks.append(fragment)
                    yield ArgumentsDelta(buf.position, fragment)
            else:
                yield from acc.delta(ev.get("index"), delta)
        elif kind == "content_block_start":
            yield from acc.start(ev.get("index"), ev.get("content_block") or {})
        elif not acc.event(kind, ev):
            break
    if source.error:
        acc.error = source.error
    yield acc.turn(raw=None)
