"""OpenAI Chat Completions wire adapter (also OpenAI-compatible servers): pure mapping, no network.

Theory of operation.

*Requests* (:func:`render_request`). The canonical conversation becomes ``messages``: the system prompt is a
``system`` message (``developer`` with ``system_role="developer"``); an assistant turn is ONE assistant
message carrying its text (``content``, ``null`` when it only calls tools), its refusal and all of its calls
(``tool_calls[].id``/``function.name``/``function.arguments``, the argument text exactly as the model wrote
it); the results of a turn follow as one ``role: tool`` message per call, in the model's order, each with
its ``tool_call_id`` (https://platform.openai.com/docs/guides/function-calling). Servers that return the
model's reasoning as ``reasoning_content`` (DeepSeek, vLLM, ...) require it back on assistant messages with
tool calls; it is kept as a :class:`~agentnb._messages.ReasoningPart` tagged ``openai_chat`` and sent back
under the field it came in. ``max_tokens`` is sent as ``max_completion_tokens`` (OpenAI deprecated
``max_tokens`` and reasoning models reject it; ``max_tokens_field="max_tokens"`` for older servers).
Tools keep their JSON schema as is (``$defs`` are accepted); ``strict=True`` asks for OpenAI's strict mode,
which requires every property to be required and ``additionalProperties: false`` everywhere.

*Responses* (:func:`parse_response`, :func:`parse_stream`). Choice 0 is read. In a stream, a tool call's
``id``, ``type`` and ``function.name`` arrive in the first delta for its ``tool_calls[].index``; later deltas
for that index carry only argument fragments. Fragments are merged by index (a different id under an index
already taken is a :class:`~agentnb.exceptions.StreamProtocolError`) and parsed once, after the choice's
``finish_reason`` (the done signal). With ``stream_options.include_usage`` the usage comes in a last chunk
with ``choices: []``; ``data: [DONE]`` ends the stream. A refusal arrives in ``refusal``, apart from
``content``. A stream that ends before ``finish_reason`` gives a turn with ``complete=False`` whose calls
have no parsed arguments. A whole response is parsed as a stream of one chunk, so both give the same turn.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Sequence
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
from ...exceptions import WireFormatError
from .._render import Plan, conversation
from .._wire import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    CallBuffer,
    EventSource,
    as_dict,
    check_id,
    dumps,
    is_done_sentinel,
    own_reasoning,
    split_settings,
    wire_arguments,
)

PROVIDER = "openai_chat"
"""The tag of this wire API on turns and on the continuation data it produces."""

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
_KNOWN = ("model", "max_tokens", "max_tokens_field", "strict", "stream", "system_role", "send_reasoning")

__all__ = ["PROVIDER", "parse_response", "parse_stream", "render_request", "render_tool"]


# -- requests -------------------------------------------------------------------------------------------


def render_tool(tool: ToolInfo, *, strict: bool = False) -> dict[str, Any]:
    """One tool in the Chat Completions ``tools`` dialect.

    Raises:
        ValueError: with ``strict=True``, for a schema OpenAI's strict mode refuses (an optional property or
            an object without ``additionalProperties: false``), naming the tool and the property.
    """
    function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    strict = strict or tool.strict  # a tool made with @anb.tool(strict=True) asks for it itself
    if strict:
        check_strict(tool.name, tool.parameters, "parameters")
        function["strict"] = True
    return {"type": "function", "function": function}


def check_strict(name: str, node: Any, path: str) -> None:
    if isinstance(node, list):
        for i, v in enumerate(node):
            check_strict(name, v, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "object" or "properties" in node:
        props = node.get("properties") or {}
        missing = sorted(set(props) - set(node.get("required") or ()))
        if missing:
            raise ValueError(f"tool {name!r}: strict mode needs every property required; {path} has optional {missing}")
        if node.get("additionalProperties") is not False:
            raise ValueError(f"tool {name!r}: strict mode needs additionalProperties: false at {path}")
    for k, v in node.items():
        if isinstance(v, dict | list):
            check_strict(name, v, f"{path}.{k}")


def _assistant(m: Message, send_reasoning: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": m.text or None}
    calls = [
        {"id": p.call_id, "type": "function", "function": {"name": p.name, "arguments": wire_arguments(p)}}
        for p in m.parts if isinstance(p, ToolCallPart)
    ]
    if calls:
        out["tool_calls"] = calls
    if m.refusal is not None:
        out["refusal"] = m.refusal
    if send_reasoning:
        for p in m.parts:
            if own_reasoning(p, PROVIDER):
                assert isinstance(p, ReasoningPart)
                field = p.data.get("field", "reasoning_content")
                out[field] = out.get(field, "") + (p.text or "")
    return out


class _Plan(Plan):
    """One message at a time: each message's items depend on it and the two options only."""

    def __init__(self, system_role: str, send_reasoning: bool) -> None:
        self.system_role = system_role
        self.send_reasoning = send_reasoning

    def unit(self, m: Message, ctx: Any) -> list[dict[str, Any]]:
        if m.role == "system":
            return [{"role": self.system_role, "content": m.text}]
        if m.role == "user":
            return [{"role": "user", "content": m.text}]
        if m.role == "assistant":
            return [_assistant(m, self.send_reasoning)]
        out: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, ToolResultPart):
                out.append({"role": "tool", "tool_call_id": p.call_id, "content": p.content})
            elif isinstance(p, TextPart) and p.text:
                out.append({"role": "user", "content": p.text})
        return out


def render_request(messages: Sequence[Message], tools: Sequence[ToolInfo] = (), *,
                   request_options: RequestOptions = NO_OPTIONS, renders: dict[str, Any] | None = None,
                   **settings: Any) -> dict[str, Any]:
    """The Chat Completions request body for a canonical conversation.

    Args:
        messages: the conversation (system messages first).
        tools: the tools offered; none means no ``tools``, ``tool_choice`` or ``parallel_tool_calls``.
        request_options: the tool choice (``auto``/``none``/``required``/a named tool) and
            ``parallel_tool_calls`` (both only with tools), and the output schema (``response_format``
            json_schema).
        **settings: ``model``, ``max_tokens`` (sent as ``max_completion_tokens``; ``max_tokens_field`` to
            rename), ``strict``, ``stream`` (adds ``stream_options.include_usage``), ``system_role``
            (``system`` or ``developer``), ``send_reasoning`` (default True: send ``reasoning_content``
            back), ``extra`` (merged into the body); other keys pass through as given.
        renders: a run's render cache (``ModelRequest.renders``): messages rendered on its earlier requests are
            not rendered again (:mod:`agentnb.providers._render`).

    Example:
        >>> render_request([Message.user("Hi")], model="gpt-4o", max_tokens=50)
        {'model': 'gpt-4o', 'messages': [{'role': 'user', 'content': 'Hi'}], 'max_completion_tokens': 50}
    """
    mine, rest = split_settings(settings, _KNOWN)
    body: dict[str, Any] = {}
    if "model" in mine:
        body["model"] = mine["model"]
    role, reasoning = mine.get("system_role", "system"), bool(mine.get("send_reasoning", True))
    body["messages"] = conversation(renders, PROVIDER, (role, reasoning), lambda: _Plan(role, reasoning), messages)[1]
    if tools:
        strict = bool(mine.get("strict", False))
        body["tools"] = [render_tool(t, strict=strict) for t in tools]
        choice = request_options.tool_choice
        if isinstance(choice, NamedTool):
            body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
        elif choice is not None:
            body["tool_choice"] = choice
        if request_options.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request_options.parallel_tool_calls
    output = request_options.output
    if output is not None:  # structured output: the answer's text is JSON fitting the schema (agentnb._output)
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": output.name, "schema": dict(output.schema), "strict": output.strict}}
    if mine.get("max_tokens") is not None:
        body[mine.get("max_tokens_field", "max_completion_tokens")] = mine["max_tokens"]
    if mine.get("stream"):
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body.update(rest)
    return body


# -- responses ------------------------------------------------------------------------------------------


class _Turn:
    """The accumulator of one choice: whole messages and stream deltas go through the same code."""

    __slots__ = ("calls", "finish", "limit", "model", "reasoning", "reasoning_field", "refusal", "response_id",
                 "text", "usage")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.calls: dict[Any, CallBuffer] = {}
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_field = "reasoning_content"
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model = ""
        self.response_id: str | None = None

    def header(self, chunk: dict[str, Any]) -> None:
        if self.response_id is None:
            self.response_id = chunk.get("id")
            self.model = chunk.get("model") or ""
        usage = chunk.get("usage")
        if usage:
            self.usage = usage

    def delta(self, delta: dict[str, Any]) -> Iterator[StreamItem]:
        content = delta.get("content")
        if content:
            if isinstance(content, list):  # some compatible servers send content parts
                content = "".join(c.get("text") or "" for c in content if isinstance(c, dict))
            self.text.append(content)
            yield TextDelta(content)
        refusal = delta.get("refusal")
        if refusal:
            self.refusal.append(refusal)
        for field in ("reasoning_content", "reasoning"):
            value = delta.get(field)
            if value and isinstance(value, str):
                self.reasoning.append(value)
                self.reasoning_field = field
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            for pos, tc in enumerate(tool_calls):
                yield from self._call(tc, pos)

    def _call(self, tc: dict[str, Any], pos: int) -> Iterator[ArgumentsDelta]:
        index = tc.get("index", pos)
        fn = tc.get("function") or {}
        fragment = fn.get("arguments")
        if fragment is not None and not isinstance(fragment, str):  # an object, from some compatible servers
            fragment = dumps(fragment)
        buf = self.calls.get(index)
        if buf is None:
            buf = self.calls[index] = CallBuffer(len(self.calls), index, tc.get("id") or "", fn.get("name") or "",
                                                 self.limit)
            if fragment:
                buf.add(fragment)
            yield ArgumentsDelta(buf.position, fragment or "", buf.call_id, buf.name)
            return
        check_id(buf, tc.get("id"), "chat.completion.chunk")
        if not buf.name and fn.get("name"):
            buf.name = fn["name"]
        if fragment:
            buf.add(fragment)
            yield ArgumentsDelta(buf.position, fragment)

    def chunk(self, chunk: dict[str, Any]) -> Generator[StreamItem, None, str | None]:
        """Fold one chunk that is not a lone argument fragment; returns an error event's reason (ends the stream)."""
        if self.response_id is None or chunk.get("usage"):
            self.header(chunk)
        choice0 = _choice0(chunk.get("choices"))
        if choice0 is None:
            if "error" in chunk:
                return f"the provider sent an error event: {chunk['error']}"
            return None
        delta = choice0.get("delta")
        if delta:
            yield from self.delta(delta)
        finish = choice0.get("finish_reason")
        if finish:
            self.finish = finish
        return None

    def turn(self, *, raw: Any, error: str | None) -> ModelTurn:
        done = self.finish is not None
        parts: list[Any] = []
        if self.reasoning:
            parts.append(ReasoningPart(provider=PROVIDER, text="".join(self.reasoning),
                                       data={"field": self.reasoning_field}))
        if self.text:
            parts.append(TextPart(text="".join(self.text)))
        if self.refusal:
            parts.append(RefusalPart(text="".join(self.refusal)))
        for buf in self.calls.values():
            buf.done = done
            parts.append(buf.part(executable=done))
        finish = _FINISH.get(self.finish or "", "other")
        if self.refusal and finish == "stop":
            finish = "refusal"
        elif self.calls and finish == "stop":  # some compatible servers say stop when they call tools
            finish = "tool_calls"
        usage = self.usage or {}
        return ModelTurn(
            message=Message(role="assistant", parts=tuple(parts)),
            provider=PROVIDER,
            model=self.model,
            response_id=self.response_id,
            finish_reason_raw=self.finish,
            finish_reason=finish if done else "other",
            usage=Usage(input_tokens=usage.get("prompt_tokens") or 0,
                        output_tokens=usage.get("completion_tokens") or 0),
            complete=done,
            incomplete_reason=None if done else (error or "the stream ended before the choice's finish_reason"),
            raw=raw,
        )


def _choice0(choices: Any) -> dict[str, Any] | None:
    if not choices:
        return None
    for c in choices:
        if c.get("index", 0) == 0:
            return c  # type: ignore[no-any-return]
    return None


def parse_response(raw: Any) -> ModelTurn:
    r"""One canonical turn from a whole Chat Completions response (a dict or an SDK ``ChatCompletion``).

    Raises:
        WireFormatError: when ``raw`` has no ``choices`` (an error body, say).

    Example:
        >>> turn = parse_response({"id": "c1", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
        ...     "message": {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
        ...     "function": {"name": "add", "arguments": "{\"a\": 1}"}}]}}]})
        >>> turn.finish_reason, turn.message.tool_calls[0].arguments
        ('tool_calls', {'a': 1})
    """
    body = as_dict(raw, "a Chat Completions response")
    choice = _choice0(body.get("choices"))
    if choice is None:
        error = body.get("error")
        raise WireFormatError(f"a Chat Completions response without choices{f': {error}' if error else ''}")
    acc = _Turn(limit=1 << 62)
    acc.header(body)
    for _ in acc.delta(choice.get("message") or {}):
        pass
    acc.finish = choice.get("finish_reason") or "stop"
    return acc.turn(raw=body, error=None)


def parse_stream(
    events: Iterable[Any], *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> Iterator[StreamItem]:
    """Stream items from Chat Completions chunks (dicts from SSE ``data:`` lines, or SDK chunk objects).

    Yields a :class:`TextDelta` per content fragment and an :class:`ArgumentsDelta` per argument fragment
    (``index`` = the call's position in the turn; id and name on its first fragment), then the turn.

    Raises:
        ArgumentsTooLarge: one call's arguments passed ``max_argument_bytes``.
        StreamProtocolError: a second call id arrived under an index already taken.

    Example:
        >>> chunks = [{"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        ...           {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        >>> [type(i).__name__ for i in parse_stream(chunks)]
        ['TextDelta', 'ModelTurn']
    """
    acc = _Turn(max_argument_bytes)
    calls = acc.calls
    source = EventSource(events)
    error: str | None = None
    for chunk in source:
        if type(chunk) is not dict:
            if is_done_sentinel(chunk):
                break
            chunk = as_dict(chunk, "a Chat Completions chunk")
        # The fast path, taken by every fragment of a long call but its first: one choice (index 0) whose
        # delta is one argument fragment of a call already open, and nothing else. It is inlined here (a call
        # per fragment costs, see bench/stream_assembly.py); any other chunk goes through _Turn.chunk.
        try:
            choice = chunk["choices"][0]
            delta = choice["delta"]
            tcs = delta["tool_calls"]
            tc = tcs[0]
            fragment = tc["function"]["arguments"]
            buf = calls[tc["index"]]
            # delta, tool_calls and the call hold at least 1, 1 and 2 entries: a sum of 4 means nothing else
            # (no content, no second call, no id to check) is in this chunk.
            fast = (len(delta) + len(tcs) + len(tc) == 4 and choice["index"] == 0
                    and choice.get("finish_reason") is None and type(fragment) is str)
        except (KeyError, IndexError, TypeError):
            fast = False
        if fast:
            if fragment:
                size = buf.size + (len(fragment) if fragment.isascii()
                                   else len(fragment.encode("utf-8", "surrogatepass")))
                if size > buf.limit:
                    buf.add(fragment)  # raises ArgumentsTooLarge
                buf.size = size
                buf.chunks.append(fragment)
                yield ArgumentsDelta(buf.position, fragment)
            continue
        error = yield from acc.chunk(chunk)
        if error is not None:
            break
    yield acc.turn(raw=None, error=source.error or error)
