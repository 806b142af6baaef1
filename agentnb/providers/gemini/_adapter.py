"""Google Gemini (``generateContent``) wire adapter: pure mapping, no network (``google-genai`` is never imported).

Theory of operation.

*Requests* (:func:`render_request`). The system prompt goes in ``systemInstruction``; the conversation is
``contents`` with roles ``user`` and ``model``. A model turn's parts come back in order and as received:
``functionCall`` parts (name, ``args`` object, and ``id`` where the API gave one) and text parts carry
their ``thoughtSignature`` on exactly the part that had it -- with parallel calls only the first call is
signed, and Gemini 3 refuses a function-calling turn whose signatures are missing
(https://ai.google.dev/gemini-api/docs/thought-signatures). Thought-summary parts (``thought: true``) are
kept as :class:`~agentnb._messages.ReasoningPart` tagged ``gemini`` and sent back as they were. Results are
``functionResponse`` parts in one ``user`` content, in the model's order, named with the function's real
name (the API matches responses to calls by name and order; by ``id`` where calls have one), with
``response: {"output": ...}`` or ``{"error": ...}`` (https://ai.google.dev/gemini-api/docs/function-calling).
Tool schemas are converted to the API's OpenAPI-style ``Schema`` subset: local ``$ref`` are inlined and
``$defs``, ``additionalProperties``, ``title`` and ``default`` dropped; ``["T", "null"]`` and
``anyOf [T, null]`` become ``nullable``. ``schema_dialect="json_schema"`` sends the schema unchanged as
``parametersJsonSchema`` instead. ``parallel_tool_calls=False`` has no Gemini equivalent and is refused (a
``ValueError``; the SDK model raises a ``ProviderError`` before sending); the model name and streaming are
chosen by the URL, not the body.

*Responses* (:func:`parse_response`, :func:`parse_stream`). Candidate 0 is read. A ``functionCall`` arrives
whole, in one chunk, with no argument deltas and (on these models) no call id: such calls get
``call_id=""``, which the driver replaces by a unique id. ``finishReason`` is ``STOP`` even when the turn
ends in function calls, so a turn with calls is normalized to ``tool_calls``. In a stream (SSE chunks
separated by CRLF, no ``event:`` and no ``[DONE]``; or the elements of a JSON array), consecutive text
fragments merge into one part until a part carrying a ``thoughtSignature`` closes it (a signature may come
on a trailing empty text part; it belongs to the text before it). The turn is complete once a
``finishReason`` arrived. SDK objects are read through their JSON form, whose ``thoughtSignature`` is
URL-safe base64; it is turned back into the standard base64 the API sends.
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
from ..._request import NO_OPTIONS, ArgumentsDelta, NamedTool, RequestOptions, StreamItem, TextDelta, ToolChoice
from ...events import ToolInfo
from ...exceptions import ArgumentsTooLarge, WireFormatError
from .._render import Plan, conversation
from .._wire import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    EventSource,
    as_dict,
    dumps,
    inline_refs,
    loads_object,
    own_data,
    own_reasoning,
    split_settings,
)

PROVIDER = "gemini"
"""The tag of this wire API on turns and on the continuation data it produces."""

_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
}
_KNOWN = ("model", "max_tokens", "stream", "temperature", "top_p", "top_k", "stop", "seed", "generation_config",
          "schema_dialect")
_GENERATION = {"max_tokens": "maxOutputTokens", "temperature": "temperature", "top_p": "topP", "top_k": "topK",
               "seed": "seed"}
_SCHEMA_KEYS = {"type", "format", "description", "nullable", "enum", "items", "properties", "required", "minItems",
                "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "anyOf", "propertyOrdering",
                "minProperties", "maxProperties"}

__all__ = ["PROVIDER", "gemini_schema", "parse_response", "parse_stream", "render_request", "render_tool"]


# -- requests -------------------------------------------------------------------------------------------


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema (pydantic's, with ``$defs``) in the Gemini ``Schema`` dialect.

    Raises:
        ValueError: for a recursive schema, which the dialect cannot express.

    Example:
        >>> gemini_schema({"type": "object", "title": "T", "additionalProperties": False,
        ...     "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}}})
        {'type': 'object', 'properties': {'n': {'type': 'integer', 'nullable': True}}}
    """
    out: dict[str, Any] = _convert(inline_refs(schema))
    return out


def _convert(node: Any) -> Any:
    """One JSON Schema node in the dialect: one small rule per keyword the dialect lacks, then its own keys."""
    if isinstance(node, list):
        return [_convert(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = _nullable_any_of(_nullable_type(_flatten(dict(node))))
    if isinstance(node.get("enum"), list) and not all(isinstance(v, str) for v in node["enum"]):
        del node["enum"]  # the dialect takes string enums only
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _SCHEMA_KEYS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: _convert(v) for k, v in value.items()}
        else:
            out[key] = _convert(value) if key in ("items", "anyOf") else value
    return out


def _flatten(node: dict[str, Any]) -> dict[str, Any]:
    """``allOf`` with one schema merged in; ``const`` as a one-value ``enum``."""
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
        node = {**node.pop("allOf")[0], **node}
    if "const" in node:
        node.setdefault("enum", [node.pop("const")])
    return node


def _nullable_type(node: dict[str, Any]) -> dict[str, Any]:
    """``"type": ["T", "null"]`` as ``"type": "T", "nullable": true``."""
    types = node.get("type")
    if isinstance(types, list):
        rest = [t for t in types if t != "null"]
        node["type"] = rest[0] if len(rest) == 1 else rest
        if "null" in types:
            node["nullable"] = True
    return node


def _nullable_any_of(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf [T, null]`` as ``T`` with ``nullable: true`` (the other options kept)."""
    options = node.get("anyOf")
    if not isinstance(options, list):
        return node
    rest = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
    if len(rest) < len(options):
        node["nullable"] = True
    if len(rest) == 1:
        del node["anyOf"]
        return {**rest[0], **node}
    node["anyOf"] = rest
    return node


def render_tool(tool: ToolInfo, *, schema_dialect: str = "openapi") -> dict[str, Any]:
    """One function declaration (``parameters`` in the Schema dialect, or ``parametersJsonSchema`` as is)."""
    decl: dict[str, Any] = {"name": tool.name, "description": tool.description}
    if schema_dialect == "json_schema":
        decl["parametersJsonSchema"] = tool.parameters
        return decl
    if schema_dialect != "openapi":
        raise ValueError(f"schema_dialect={schema_dialect!r}: use 'openapi' or 'json_schema'")
    params = gemini_schema(tool.parameters)
    if params.get("properties"):  # a tool without parameters declares none (the API refuses empty objects)
        decl["parameters"] = params
    return decl


def _signed(part: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    if data.get("thoughtSignature"):
        part["thoughtSignature"] = data["thoughtSignature"]
    return part


def _model_parts(m: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for p in m.parts:
        if isinstance(p, ReasoningPart):
            if own_reasoning(p, PROVIDER):
                parts.append(dict(p.data["part"]) if "part" in p.data else
                             _signed({"text": p.text or "", "thought": True}, p.data))
        elif isinstance(p, TextPart):
            mine = own_data(p, PROVIDER)
            if p.text or mine.get("thoughtSignature"):
                parts.append(_signed({"text": p.text}, mine))
        elif isinstance(p, RefusalPart):
            parts.append({"text": p.text})
        elif isinstance(p, ToolCallPart):
            mine = own_data(p, PROVIDER)
            args = p.arguments if p.arguments is not None else (loads_object(p.arguments_raw) or {})
            call: dict[str, Any] = {"name": p.name, "args": args}
            if mine.get("id"):
                call["id"] = mine["id"]
            parts.append(_signed({"functionCall": call}, mine))
    return parts


def _user_parts(m: Message, wire_ids: dict[str, str]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for p in m.parts:
        if isinstance(p, ToolResultPart):
            response: dict[str, Any] = {"name": p.name,
                                        "response": {"output" if p.status == "ok" else "error": p.content}}
            if p.call_id in wire_ids:
                response["id"] = wire_ids[p.call_id]
            results.append({"functionResponse": response})
        elif isinstance(p, TextPart) and p.text:
            texts.append({"text": p.text})
    return results + texts


class _Plan(Plan):
    """A message's parts depend on it and, for results, on the wire ids of the calls they answer.

    The context maps a call id to its Gemini id, from the assistant messages before; consecutive messages of one
    role are one content.
    """

    provider = "Gemini"
    system_apart = True
    merges = True
    content = "parts"

    def unit(self, m: Message, ctx: dict[str, str]) -> tuple[str, list[dict[str, Any]]] | None:
        role, parts = ("model", _model_parts(m)) if m.role == "assistant" else ("user", _user_parts(m, ctx))
        return (role, parts) if parts else None

    def key(self, m: Message, ctx: dict[str, str]) -> Any:
        if m.role == "assistant" or not ctx:
            return None
        return tuple(ctx.get(p.call_id) for p in m.parts if isinstance(p, ToolResultPart))

    def context(self) -> dict[str, str]:
        return {}

    def advance(self, ctx: dict[str, str], m: Message) -> Any:
        if m.role != "assistant":
            return None
        undo = []
        for c in m.tool_calls:
            gid = own_data(c, PROVIDER).get("id")
            if gid:
                undo.append((c.call_id, ctx.get(c.call_id)))
                ctx[c.call_id] = gid
        return undo or None

    def undo(self, ctx: dict[str, str], token: Any) -> None:
        for call_id, before in reversed(token or ()):
            if before is None:
                del ctx[call_id]
            else:
                ctx[call_id] = before


_PLAN = _Plan()


def _tool_config(choice: ToolChoice | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, NamedTool):
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice.name]}}
    return {"functionCallingConfig": {"mode": {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice]}}


def render_request(messages: Sequence[Message], tools: Sequence[ToolInfo] = (), *,
                   request_options: RequestOptions = NO_OPTIONS, renders: dict[str, Any] | None = None,
                   **settings: Any) -> dict[str, Any]:
    """The ``generateContent`` request body for a canonical conversation.

    Args:
        messages: the conversation; system messages (at the start) become ``systemInstruction``.
        tools: the tools offered.
        request_options: the tool choice (``auto``/``none``/``required``/a named tool) becomes ``toolConfig``;
            the output schema becomes ``responseJsonSchema``; ``parallel_tool_calls`` is not part of the body
            (False cannot be expressed and is refused when tools are offered).
        **settings: ``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``stop``, ``seed`` and
            ``generation_config`` (merged) go in ``generationConfig``; ``schema_dialect`` (``openapi`` or
            ``json_schema``); ``model`` and ``stream`` are not part of the body; ``extra`` is merged into
            the body; other keys (``safetySettings``, ...) pass through as given.
        renders: a run's render cache (``ModelRequest.renders``): messages rendered on its earlier requests are
            not rendered again (:mod:`agentnb.providers._render`).

    Example:
        >>> render_request([Message.system("Be brief."), Message.user("Hi")], max_tokens=64)
        ... # doctest: +NORMALIZE_WHITESPACE
        {'systemInstruction': {'parts': [{'text': 'Be brief.'}]},
         'contents': [{'role': 'user', 'parts': [{'text': 'Hi'}]}], 'generationConfig': {'maxOutputTokens': 64}}
    """
    mine, rest = split_settings(settings, _KNOWN)
    if request_options.parallel_tool_calls is False and tools:
        raise ValueError("parallel_tool_calls=False cannot be expressed on Gemini (it has no switch for parallel "
                         "function calls); leave it unset for this model")
    texts, items = conversation(renders, PROVIDER, None, lambda: _PLAN, messages)
    system = "\n\n".join(texts) if texts else None
    body: dict[str, Any] = {}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    body["contents"] = items
    if tools:
        dialect = mine.get("schema_dialect", "openapi")
        body["tools"] = [{"functionDeclarations": [render_tool(t, schema_dialect=dialect) for t in tools]}]
        config = _tool_config(request_options.tool_choice)
        if config is not None:
            body["toolConfig"] = config
    generation = {wire: mine[key] for key, wire in _GENERATION.items() if mine.get(key) is not None}
    if mine.get("stop"):
        generation["stopSequences"] = [mine["stop"]] if isinstance(mine["stop"], str) else list(mine["stop"])
    output = request_options.output
    if output is not None:  # structured output: JSON fitting the schema (JSON Schema as is: responseJsonSchema)
        generation["responseMimeType"] = "application/json"
        generation["responseJsonSchema"] = dict(output.schema)
    generation.update(mine.get("generation_config") or {})
    if generation:
        body["generationConfig"] = generation
    body.update(rest)
    return body


# -- responses ------------------------------------------------------------------------------------------


def _standard_b64(value: Any) -> Any:
    return value.replace("-", "+").replace("_", "/") if isinstance(value, str) else value


def _as_chunk(obj: Any) -> dict[str, Any]:
    if type(obj) is dict:
        return obj
    body = as_dict(obj, "a Gemini response")
    if hasattr(obj, "model_dump"):  # an SDK object: its JSON form has URL-safe base64 signatures
        for cand in body.get("candidates") or ():
            for part in (cand.get("content") or {}).get("parts") or ():
                if "thoughtSignature" in part:
                    part["thoughtSignature"] = _standard_b64(part["thoughtSignature"])
    return body


class _Turn:
    __slots__ = ("calls", "finish", "limit", "model", "open", "open_chunks", "parts", "response_id", "usage")

    def __init__(self, limit: int = 1 << 62) -> None:
        self.limit = limit
        self.parts: list[Any] = []
        self.calls = 0
        self.open: dict[str, Any] | None = None  # the text part being merged: {"thought": bool}
        self.open_chunks: list[str] = []
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}
        self.model = ""
        self.response_id: str | None = None

    def chunk(self, body: dict[str, Any]) -> Iterator[StreamItem]:
        self.response_id = body.get("responseId") or self.response_id
        self.model = body.get("modelVersion") or self.model
        if body.get("usageMetadata"):
            self.usage = body["usageMetadata"]
        candidates = body.get("candidates") or ()
        cand = next((c for c in candidates if c.get("index", 0) == 0), None)
        if cand is None:
            block = (body.get("promptFeedback") or {}).get("blockReason")
            if block:
                self.finish = block if block in _FINISH else "SAFETY"
            return
        for part in (cand.get("content") or {}).get("parts") or ():
            yield from self.part(part)
        if cand.get("finishReason"):
            self.finish = cand["finishReason"]

    def part(self, part: dict[str, Any]) -> Iterator[StreamItem]:
        signature = part.get("thoughtSignature")
        if "functionCall" in part:
            self.close()
            fc = part["functionCall"] or {}
            args = fc.get("args") or {}
            raw = dumps(args)
            if len(raw) > self.limit or len(raw.encode("utf-8", "surrogatepass")) > self.limit:
                raise ArgumentsTooLarge(call_id=fc.get("id") or "", name=fc.get("name") or "", limit=self.limit)
            data = {k: v for k, v in (("id", fc.get("id")), ("thoughtSignature", signature)) if v}
            call_id = fc.get("id") or ""
            self.parts.append(ToolCallPart(call_id=call_id, name=fc.get("name") or "", arguments_raw=raw,
                                           arguments=args if isinstance(args, dict) else None, index=self.calls,
                                           provider_data={PROVIDER: data} if data else None))
            yield ArgumentsDelta(self.calls, raw, call_id, fc.get("name") or "")
            self.calls += 1
        elif "text" in part:
            thought = bool(part.get("thought"))
            text = part.get("text") or ""
            if self.open is not None and self.open["thought"] != thought:
                self.close()
            if text or signature:
                if self.open is None:
                    self.open = {"thought": thought}
                self.open_chunks.append(text)
                if text and not thought:
                    yield TextDelta(text)
            if signature:
                self.open = {"thought": thought, "thoughtSignature": signature}
                self.close()
        else:
            self.close()
            self.parts.append(ReasoningPart(provider=PROVIDER, text=None, data={"part": part}))

    def close(self) -> None:
        if self.open is None:
            return
        text = "".join(self.open_chunks)
        sig = self.open.get("thoughtSignature")
        if self.open["thought"]:
            self.parts.append(ReasoningPart(provider=PROVIDER, text=text,
                                            data={"thoughtSignature": sig} if sig else {}))
        else:
            data = {PROVIDER: {"thoughtSignature": sig}} if sig else None
            self.parts.append(TextPart(text=text, provider_data=data))
        self.open, self.open_chunks = None, []

    def turn(self, *, raw: Any, error: str | None) -> ModelTurn:
        self.close()
        complete = self.finish is not None
        finish = _FINISH.get(self.finish or "", "other")
        if self.calls and finish == "stop":  # Gemini says STOP when it calls functions
            finish = "tool_calls"
        u = self.usage
        return ModelTurn(
            message=Message(role="assistant", parts=tuple(self.parts)),
            provider=PROVIDER,
            model=self.model,
            response_id=self.response_id,
            finish_reason_raw=self.finish,
            finish_reason=finish if complete else "other",
            usage=Usage(input_tokens=(u.get("promptTokenCount") or 0) + (u.get("toolUsePromptTokenCount") or 0),
                        output_tokens=(u.get("candidatesTokenCount") or 0) + (u.get("thoughtsTokenCount") or 0)),
            complete=complete,
            incomplete_reason=None if complete else (error or "the stream ended before a finishReason"),
            raw=raw,
        )


def parse_response(raw: Any) -> ModelTurn:
    """One canonical turn from a whole ``generateContent`` response (a dict or an SDK response object).

    Raises:
        WireFormatError: when ``raw`` has neither ``candidates`` nor ``promptFeedback`` (an error body, say).

    Example:
        >>> turn = parse_response({"modelVersion": "gemini-2.0-flash", "candidates": [{"finishReason": "STOP",
        ...     "content": {"role": "model", "parts": [{"functionCall": {"name": "add", "args": {"a": 1}}}]}}]})
        >>> turn.finish_reason, turn.finish_reason_raw, turn.message.tool_calls[0].arguments
        ('tool_calls', 'STOP', {'a': 1})
    """
    body = _as_chunk(raw)
    if not body.get("candidates") and not body.get("promptFeedback"):
        error = body.get("error")
        raise WireFormatError(f"a Gemini response without candidates{f': {error}' if error else ''}")
    acc = _Turn()
    for _ in acc.chunk(body):
        pass
    if acc.finish is None:
        acc.finish = "STOP"
    return acc.turn(raw=body, error=None)


def parse_stream(
    events: Iterable[Any], *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
) -> Iterator[StreamItem]:
    """Stream items from ``streamGenerateContent`` chunks (SSE ``data:`` dicts, JSON-array elements, SDK objects).

    Yields a :class:`TextDelta` per answer-text fragment (thought text goes into the turn's reasoning parts)
    and one :class:`ArgumentsDelta` per call, holding its whole arguments (Gemini sends calls whole), then
    the turn.

    Raises:
        ArgumentsTooLarge: one call's arguments (serialized) passed ``max_argument_bytes``.
    """
    acc = _Turn(max_argument_bytes)
    source = EventSource(events)
    error: str | None = None
    for chunk in source:
        body = _as_chunk(chunk)
        if "error" in body and not body.get("candidates"):
            error = f"the provider sent an error: {body['error']}"
            acc.finish = None
            break
        yield from acc.chunk(body)
    yield acc.turn(raw=None, error=source.error or error)
