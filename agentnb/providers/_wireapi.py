"""What a wire API is: the one record the linter, importers, emulator, wire view and ``anb.model`` read.

Theory of operation. A wire API (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages, Gemini
``generateContent``, ...) is one package under :mod:`agentnb.providers` that holds everything about that
format, and exports one :class:`WireAPI` value named ``API``. :mod:`agentnb.providers._registry` lists those
values in :data:`~agentnb.providers._registry.WIRE_APIS`; every part of agentnb that treats providers one by
one iterates that mapping instead of naming them:

=================================== ====================================================================
reader                              fields it uses
=================================== ====================================================================
the SDK models, the wire corpus     ``render_request``, ``parse_response``, ``parse_stream``
importers, emulator (decoding)      ``parse_history``, ``system_key``, ``list_key``
linter (``anb.lint``), emulator     ``rules`` (each with its optional fix), ``view``, ``normalize``,
                                    ``list_key``
emulator (serving)                  ``emulator`` (an :class:`Endpoint`: routes, stream rule, encoder,
                                    error bodies, request checks, client)
``anb.model("prefix:name")``        ``prefixes``, ``api_key_env``, ``model_class``, ``client``
debugger wire view                  ``title``, ``where``
structured output, OpenTelemetry    ``native_output``, ``otel_name``
prices (budgets, frames, debugger)  ``name``, ``prefixes``, ``vendor`` (:mod:`agentnb.providers._prices`)
=================================== ====================================================================

So adding a wire API is one package plus one line in the registry; ``tests/test_wire_apis.py`` runs the
shared conformance suite over every registered API (see ``docs/contributing.md``, "Adding a wire API").

The record is a frozen dataclass rather than a Protocol: a Protocol would let a module pass for a wire API by
accident of its names, and a dataclass lists, checks and documents every field in one place. Its fields are
stable: add new ones with defaults at the end.

Nothing here imports a provider package, so the packages can import these types freely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._findings import Context, Finding, Rule, View
    from .._messages import Message, ModelTurn
    from .._request import StreamItem
    from ..events import ToolInfo
    from ._sdk import SdkModel
    from ._shapes import Malformed

__all__ = ["Encoded", "EncodeRequest", "Endpoint", "History", "RouteMatch", "WireAPI"]


@dataclass(slots=True)
class History:
    """A request body read back into the canonical conversation (what ``parse_history`` returns).

    Example:
        >>> History(messages=[], tools=[]).findings
        []
    """

    messages: list[Message]
    """The conversation, in canonical messages (system messages first)."""
    tools: list[ToolInfo]
    """The tools the request offers."""
    findings: list[Finding] = field(default_factory=list)
    """What reading found that the lint rules do not see: a part it cannot represent (``unsupported_part``),
    arguments that are not an object (``invalid_arguments``), an item no reader could read (``unreadable``)."""
    sources: list[list[int]] = field(default_factory=list)
    """For each message, the input position of each of its parts (-1: not from the list, e.g. the system
    prompt). Lets canonical findings point back into the input."""
    tool_choice: str | dict[str, str] | None = None
    """The request's tool choice in canonical terms: ``auto``, ``none``, ``required``, ``{"name": ...}``."""
    strict: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tools whose arguments the service must make fit their schema (strict mode): name -> schema."""


@dataclass(frozen=True, slots=True)
class RouteMatch:
    """A path the emulator serves for a wire API: the model named in the path, and the stream rule.

    Attributes:
        model: the model when the path names it (Gemini's ``/models/{model}:generateContent``), else ``""``.
        stream: True/False when the path decides streaming (Gemini's ``:streamGenerateContent``); None when
            the body does (``stream`` field, defaulting to :attr:`Endpoint.stream_default`).
    """

    model: str = ""
    stream: bool | None = None


@dataclass(slots=True)
class EncodeRequest:
    """What an encoder needs besides the turn: the request, and the emulator's id and signature makers."""

    model: str
    """The model name the request asked for (answered back in the body)."""
    body: dict[str, Any]
    """The request body, normalized (an encoder reads options such as ``include`` or ``stream_options``)."""
    stream: bool
    """Answer as a stream (frames) or as one body."""
    size: int
    """Characters per streamed fragment."""
    ids: Callable[[str], str]
    """Makes a new id with a prefix (``call_``, ``toolu_``, ``fc_``, ...)."""
    sign: Callable[[str, str], str]
    """Signs continuation data: ``sign(kind, content) -> token`` (kinds ``thinking``, ``thought``, ``reasoning``)."""
    thinking: bool | None = None
    """Gemini: sign function calls as a thinking model does (None: decide from the model name)."""


@dataclass(slots=True)
class Encoded:
    """A turn as one service writes it: the whole body, and the stream frames (bytes as sent)."""

    body: dict[str, Any]
    frames: list[bytes] = field(default_factory=list)
    cut_at: int = 0
    """The frame an injected cut breaks (the middle of the arguments, else the middle of the stream)."""
    issued: dict[str, Any] = field(default_factory=dict)
    """What the validator must remember: ``reasoning_for`` (fc id -> rs id), ``reasoning_content_for``."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """How the local emulator (:mod:`agentnb.emulator`) serves one wire API.

    Attributes:
        mount: the base path a client is given by ``Emulator.url(name)`` (``/openai/v1``, ``/anthropic``).
        url_names: the names ``Emulator.url``/``Emulator.client`` accept for it (``openai`` for both OpenAI
            APIs, which share one client and one mount).
        route: ``route(path) -> RouteMatch | None``: whether a POST to ``path`` is a request of this API.
        encode: ``encode(turn, request) -> Encoded``: the turn as the service writes it, whole or streamed.
        error_body: ``error_body(status, message, param) -> dict``: the service's error body.
        default_message: ``default_message(status) -> str``: its usual message for a status (429, 5xx).
        check_request: ``check_request(body) -> (message, param) | None``: a 400 the service answers before
            validating the history (a missing ``model`` or ``max_tokens``).
        client: ``client(base_url, async_) -> SDK client`` pointed at the emulator, or None.
        stream_default: whether a request without ``stream`` streams (False for the SSE APIs).
        stream_media_type: the ``content-type`` of a streamed answer (``text/event-stream``; JSON lines
            are ``application/x-ndjson``). The encoder writes the frames; the server only sends them.
    """

    mount: str
    url_names: tuple[str, ...]
    route: Callable[[str], RouteMatch | None]
    encode: Callable[[ModelTurn, EncodeRequest], Encoded]
    error_body: Callable[[int, str, str | None], dict[str, Any]]
    default_message: Callable[[int], str]
    check_request: Callable[[dict[str, Any]], tuple[str, str | None] | None] = lambda body: None
    client: Callable[[str, bool], Any] | None = None
    stream_default: bool = False
    stream_media_type: str = "text/event-stream"


@dataclass(frozen=True, slots=True)
class WireAPI:
    """One wire API: everything agentnb knows about that format, in one record (see the module docs).

    Example:
        >>> from agentnb.providers import WIRE_APIS
        >>> api = WIRE_APIS["anthropic"]
        >>> api.render_request([]), api.list_key
        ({'max_tokens': 4096, 'messages': []}, 'messages')
    """

    name: str
    """The registry key, and the ``provider`` tag on turns and on continuation data (``openai_chat``)."""
    title: str
    """A title for people (``OpenAI Chat Completions``): the wire view's tab."""
    render_request: Callable[..., dict[str, Any]]
    """``render_request(messages, tools=(), *, request_options=RequestOptions(), renders=None, **settings) -> body``:
    the request for a canonical conversation, its typed options and pass-through settings (``renders``: a run's
    render cache, :mod:`agentnb.providers._render`)."""
    parse_response: Callable[[Any], ModelTurn]
    """``parse_response(raw) -> ModelTurn``: a whole response (a dict or an SDK object)."""
    parse_stream: Callable[..., Iterator[StreamItem]]
    """``parse_stream(events, *, max_argument_bytes) -> stream items, then the turn``."""
    parse_history: Callable[[dict[str, Any]], History]
    """``parse_history(body) -> History``: a request body read back (the importers and the emulator's
    decoder); input positions in ``History.sources`` index ``body[list_key]``."""
    list_key: str
    """The body key that holds the history (``messages``, ``input``, ``contents``)."""
    system_key: str | None
    """The body key of a system prompt kept apart from the history (``system``, ``instructions``,
    ``systemInstruction``), None when it is a message of the history."""
    normalize: Callable[[Any], tuple[dict[str, Any], list[Malformed]]]
    """``normalize(body) -> (clean copy, malformed)``: values of the wrong JSON type made safe to read,
    each a finding (see :mod:`agentnb.providers._shapes`). Runs before the rules and ``parse_history``."""
    rules: Sequence[Rule]
    """The lint rules, in the order their findings are reported (the emulator answers the first error)."""
    view: Callable[[dict[str, Any], Context | None], View]
    """``view(clean_body, context) -> View``: the digest of a body the rules read (a :class:`~agentnb._findings.View`
    subclass computing what several rules share, once)."""
    emulator: Endpoint
    """How the local emulator serves this API."""
    model_class: type[SdkModel]
    """The SDK model class (``OpenAIChatModel``, ...); it imports its SDK only when made."""
    client: Callable[..., Any]
    """``client(api_key, base_url=None, *, async_=False, **options)``: the official SDK's client."""
    prefixes: tuple[str, ...]
    """The prefixes of ``anb.model("prefix:name")`` that pick this API (the first is the canonical one)."""
    api_key_env: tuple[str, ...]
    """Environment variables holding the API key, tried in order."""
    sdk_extra: str
    """The ``pip install 'agentnb[extra]'`` that brings the SDK."""
    where: tuple[str, str, str]
    """For the wire view's table: where the system prompt, a tool call and its result go."""
    native_output: bool = False
    """Structured output is a request option of this API (a JSON schema the service enforces), not a tool."""
    native_output_strict_only: bool = False
    """Its structured-output mode takes only a schema in strict form (Anthropic's JSON outputs): a type that
    cannot be strict (free keys, a tuple) is asked for with the output tool instead under ``output_mode="auto"``."""
    otel_name: str = ""
    """The ``gen_ai.provider.name`` of OpenTelemetry's semantic conventions (``openai``, ``gcp.gemini``)."""
    needs_key: bool = True
    """False for a service that runs without a key (a local Ollama server): ``anb.model`` then makes the
    client with ``api_key=None`` when none of :attr:`api_key_env` is set, instead of refusing."""
    vendor: str = ""
    """Who bills the models this API serves (``openai``, ``google``; empty for a local server): a price filed
    under ``vendor:model`` (or a prefix's) counts for this API's turns, and the maintained price table
    (:mod:`agentnb.providers._prices`) is read under this name."""

    def __repr__(self) -> str:
        return f"WireAPI({self.name!r})"

    def key(self, environ: Iterable[tuple[str, str]]) -> str | None:
        """The first non-empty API key among :attr:`api_key_env` in ``environ`` (``os.environ.items()``)."""
        env = dict(environ)
        return next((env[n] for n in self.api_key_env if env.get(n)), None)
