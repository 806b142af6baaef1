"""What the SDK-backed models share: the request cycle, sync and async clients, and error mapping.

Theory of operation. A provider model (:class:`~agentnb.providers.openai_chat.OpenAIChatModel`, ...) wraps
the official client the user passes. For each turn it

1. renders the canonical request with its wire adapter (``render_request``), merging the model's own
   settings with the loop's on *every* turn (so temperature, max tokens, tool choice and parallel calls hold
   for the whole run, not only its first request). The model's settings are split once, when it is made
   (:func:`~agentnb._request.split_options`): its tool choice, parallel calls and output schema become default
   :class:`~agentnb._request.RequestOptions`, which the request's own options override field by field, and
   the rest passes through. Everything a turn renders comes from that turn's request: the model keeps no
   memory of a run's earlier requests (a provider that needs the run's tool definitions on a tools-free turn
   reads ``request.run_tools``). What the run kept of its earlier requests' renderings travels with the
   request (``request.renders``, the run's own: :mod:`agentnb.providers._render`), so a message is rendered
   once per run, not once per turn; the items of a body are shared with later turns' bodies (read them, never
   change them);
2. hands the body to the SDK method (``client.chat.completions.create(**body)``, ...). Keys the method does
   not name go in ``extra_body``, so a setting passed through by the adapter still reaches the wire;
3. parses the answer with the same adapter: ``parse_response`` for a whole response, ``parse_stream`` (with
   the model's ``max_argument_bytes`` cap) over the SDK's stream objects.

Async clients (``openai.AsyncOpenAI``, ``anthropic.AsyncAnthropic``, ``genai.Client(...).aio``) are driven
on agentnb's private event loop (:mod:`agentnb._aio`): a notebook cell already runs an event loop, so the
model never calls ``asyncio.run``; each stream item is awaited there and handed back to the synchronous
driver, which keeps pulling one item per ``step()``.

Retries belong to the loop, not the SDK: the client is copied with ``max_retries=0`` (where the SDK has
that option) so every retry is a ``ModelRetried`` event. SDK errors become :class:`ProviderError` (a
:class:`~agentnb.exceptions.ModelError`) with the HTTP status, the provider's own message and the
``retry-after`` delay the server asked for. Until that delay has passed, the model waits before its next
request, so ``retry-after`` is honoured whatever backoff the driver chose; a delay longer than
``max_retry_wait`` makes the error final instead (a run never sleeps for an hour on its own).
"""

from __future__ import annotations

import copy
import email.utils
import inspect
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, NoReturn

from .._aio import run_coroutine
from .._messages import ModelTurn
from .._redact import client_credentials
from .._request import ModelRequest, StreamItem, split_options
from ..events import ToolInfo
from ..exceptions import AgentnbError, ModelError, ProviderError, StreamInterrupted, WireFormatError
from ._base import WireKind
from ._capture import CURRENT, WIRE_CAP, Capture, tap
from ._wire import DEFAULT_MAX_ARGUMENT_BYTES

__all__ = ["ProviderError", "SdkModel", "require"]

_CONNECTION_ERRORS = ("APIConnectionError", "APITimeoutError", "ConnectError", "ConnectTimeout", "ReadTimeout",
                      "TimeoutException", "TransportError", "RemoteProtocolError", "ReadError", "TimeoutError",
                      "ConnectionError")


RENDERS: ContextVar[dict[str, Any] | None] = ContextVar("agentnb_renders", default=None)
"""The render cache of the request being sent (``ModelRequest.renders``), for what a model's ``_send`` converts
once per run (the Gemini model's SDK contents); None outside a request, or for a request without one."""


def require(module: str, extra: str) -> Any:
    """Import an SDK module, or raise an ImportError that names the extra to install.

    Example:
        >>> require("json", "openai").__name__
        'json'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this model needs the {module.split('.')[0]!r} package: pip install 'agentnb[{extra}]'"
        ) from exc


def _retry_after(headers: Any) -> float | None:
    """Seconds from a ``retry-after`` (seconds or HTTP date) or ``retry-after-ms`` header."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
    except Exception:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _message_from_body(body: Any) -> str | None:
    """The provider's own error message from an error body of any of the four APIs."""
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    if not isinstance(body, dict):
        return None
    error = body.get("error", body)
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(body.get("message"), str):
        return str(body["message"])
    return None


def map_error(exc: BaseException, provider: str) -> ModelError | None:
    """A :class:`ProviderError` for an SDK or transport exception, or None when it is not one of those."""
    if isinstance(exc, AgentnbError):
        return exc if isinstance(exc, ModelError) else None
    names = {c.__name__ for c in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        code = getattr(exc, "code", None)  # google-genai's APIError
        status = code if isinstance(code, int) and "APIError" in names else None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if status is not None:
        body = getattr(exc, "body", None)
        if body is None:
            body = getattr(exc, "details", None)
        message = _message_from_body(body) or getattr(exc, "message", None) or str(exc)
        return ProviderError(f"{provider}: {message}", status=status, provider=provider,
                             retry_after=_retry_after(headers), body=body)
    if names & set(_CONNECTION_ERRORS):
        return ProviderError(f"{provider} connection error ({type(exc).__name__}): {exc}", status=None,
                             retryable=True, provider=provider)
    return None


def call_kwargs(method: Callable[..., Any], body: dict[str, Any], *, verbatim: str | None = None) -> dict[str, Any]:
    """The body as keyword arguments of an SDK method; keys it does not name go in ``extra_body``.

    ``verbatim`` names the history's key (``messages``, ``input``): its list goes in ``extra_body`` as it is,
    and its parameter gets an empty list. The ``openai`` and ``anthropic`` clients copy every parameter through
    a type-directed pass (``maybe_transform``) before they send it, about 200 µs a message: on the history
    that is the whole conversation again on every turn, and on the JSON the adapter renders the pass changes
    nothing (it renames aliased keys and encodes files given as bytes; the adapters write neither). The SDK
    merges ``extra_body`` into the JSON it sends, the key keeping its place, so the wire carries what the
    adapter rendered.
    """
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return dict(body)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(body)
    known = {k: v for k, v in body.items() if k in params}
    extra = {k: v for k, v in body.items() if k not in params}
    if verbatim is not None and verbatim in known and verbatim in params:
        extra[verbatim] = known[verbatim]
        known[verbatim] = []
    if extra:
        known["extra_body"] = {**(known.get("extra_body") or {}), **extra}
    return known


def without_sdk_retries(client: Any) -> Any:
    """A copy of ``client`` with the SDK's own retries off (the loop retries, with events), where possible."""
    with_options = getattr(client, "with_options", None)
    if callable(with_options):
        try:
            return with_options(max_retries=0)
        except TypeError:
            return client
    return client


def is_async_client(client: Any) -> bool:
    """Whether ``client`` is an SDK's async client (its methods return awaitables)."""
    name = type(client).__name__
    return name.startswith("Async") or name == "AsyncClient"


def _drain_async(stream: Any) -> Iterator[Any]:
    """Pull an async iterator one item at a time on agentnb's event loop."""
    it: AsyncIterator[Any] = stream.__aiter__()
    try:
        while True:
            try:
                item: Any = run_coroutine(_awaited(it.__anext__()))
            except StopAsyncIteration:
                return
            yield item
    finally:
        close = getattr(stream, "close", None) or getattr(stream, "aclose", None)
        if callable(close):
            try:
                result = close()
                if inspect.isawaitable(result):
                    run_coroutine(_awaited(result))
            except Exception:  # closing a broken stream must not mask what broke it
                pass


async def _awaited(value: Any) -> Any:
    return await value


class SdkModel:
    """The shared request cycle of the SDK-backed models (see the module docs); subclass per wire API.

    Subclasses set ``provider`` (the wire API tag), ``adapter`` (the wire adapter module) and implement
    :meth:`_send` (one SDK call returning a whole response or a stream).
    """

    provider: str = ""
    adapter: Any = None
    extra: str = ""

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        stream: bool = False,
        settings: dict[str, Any] | None = None,
        max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
        max_retry_wait: float = 60.0,
        sdk_retries: bool = False,
        capture_wire: bool = True,
        wire_cap: int = WIRE_CAP,
        **request_settings: Any,
    ) -> None:
        if client is None:
            raise TypeError(f"{type(self).__name__} needs the SDK client you made, e.g. "
                            f"{type(self).__name__}(client, model=...)")
        self.client = client if sdk_retries else without_sdk_retries(client)
        self.name = model
        self.stream = stream
        # The options among the model's settings are checked (and refused, naming the value) here, once.
        self.options, self.settings = split_options({**(settings or {}), **request_settings})
        self.max_argument_bytes = max_argument_bytes
        self.max_retry_wait = max_retry_wait
        self.is_async = is_async_client(client)
        self._not_before = 0.0
        self._lock = threading.Lock()
        self._wire: list[Callable[[WireKind, Any], None]] = []
        if not isinstance(wire_cap, int) or isinstance(wire_cap, bool) or wire_cap < 0:
            raise ValueError(f"wire_cap must be a number of bytes (an int >= 0), not {wire_cap!r}")
        self.wire_cap = wire_cap
        # the HTTP exchange of each request is kept on its turn (``turn.wire``, see agentnb.providers._capture)
        self.capture_wire = bool(capture_wire) and tap(self.client)
        self._wire_secrets: tuple[str, ...] | None = None

    def on_wire(self, callback: Callable[[WireKind, Any], None]) -> Callable[[], None]:
        """Call ``callback(kind, payload)`` with what goes over the wire; returns the function that stops it.

        ``kind`` is ``"request"`` (a copy of the body, before it is sent), ``"response"`` (a whole response) or
        ``"event"`` (one raw stream event, as the SDK hands it over, before the adapter reads it). The
        callback runs in the thread that pulls the answer; what it raises propagates (keep it small).

        Example:
            >>> import openai
            >>> from agentnb.providers.openai_chat import OpenAIChatModel
            >>> model = OpenAIChatModel(openai.OpenAI(api_key="k"), model="m")
            >>> seen = []
            >>> stop = model.on_wire(lambda kind, payload: seen.append(kind))
            >>> stop()
        """
        self._wire.append(callback)

        def stop() -> None:
            if callback in self._wire:
                self._wire.remove(callback)

        return stop

    def _tell(self, kind: WireKind, payload: Any) -> None:
        for callback in list(self._wire):
            callback(kind, payload)

    def _told(self, events: Iterator[Any]) -> Iterator[Any]:
        """The raw stream events, each reported to the wire callbacks as it passes."""
        try:
            for event in events:
                self._tell("event", event)
                yield event
        finally:
            close = getattr(events, "close", None)
            if callable(close):
                close()

    def credentials(self) -> list[str]:
        """The credentials the SDK client holds (its key or token), so a run can mask them wherever echoed.

        Example:
            >>> import openai
            >>> from agentnb.providers.openai_chat import OpenAIChatModel
            >>> OpenAIChatModel(openai.OpenAI(api_key="zq9-plain-credential-7731"), model="m").credentials()
            ['zq9-plain-credential-7731']
        """
        return client_credentials(self.client)

    def __repr__(self) -> str:
        mode = "async" if self.is_async else "sync"
        return f"{type(self).__name__}(model={self.name!r}, stream={self.stream}, {mode})"

    # -- the seam ---------------------------------------------------------------------------------------

    def render(self, request: ModelRequest) -> dict[str, Any]:
        """The wire request body this model sends for ``request`` (the model's settings, then the loop's)."""
        settings = {**self.settings, **request.settings, "model": self.name}
        if self.stream:
            settings["stream"] = True
        else:
            settings.pop("stream", None)
        options = request.options.over(self.options)
        try:
            body: dict[str, Any] = self.adapter.render_request(request.messages, self._offered(request),
                                                               request_options=options, renders=request.renders,
                                                               **settings)
        except ValueError as exc:  # a setting this wire API cannot express: say so before anything is sent
            raise ProviderError(f"{self.provider}: {exc}; nothing was sent", provider=self.provider,
                                retryable=False) from exc
        return body

    def _offered(self, request: ModelRequest) -> Sequence[ToolInfo]:
        """The tools to render; a subclass may render the run's definitions on a tools-free request."""
        return request.tools

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        """Send one request through the SDK client and yield the adapter's stream items, then the turn.

        With ``capture_wire`` (the default), the turn's ``wire`` holds the HTTP exchange as sent and received
        (redacted, at most ``wire_cap`` bytes; see :mod:`agentnb.providers._capture`).
        """
        capture = None
        if self.capture_wire:
            if self._wire_secrets is None:
                self._wire_secrets = tuple(self.credentials())
            capture = Capture(self.wire_cap, self._wire_secrets)
        token = CURRENT.set(capture)
        kept = RENDERS.set(request.renders)
        try:
            return self._respond(request, capture)
        finally:
            RENDERS.reset(kept)
            CURRENT.reset(token)

    def _respond(self, request: ModelRequest, capture: Capture | None) -> Iterator[StreamItem]:
        body = self.render(request)
        self._wait_retry_after()
        if self._wire:  # a copy: the body's items are the run's render cache, shared with its later requests
            self._tell("request", copy.deepcopy(body))
        try:
            result = self._send(body)
            if inspect.isawaitable(result):
                result = run_coroutine(_awaited(result))
        except Exception as exc:
            raise self._failed(exc, capture) from exc
        if self._wire and not self.stream:
            self._tell("response", result)
        if not self.stream:
            try:
                turn = self.adapter.parse_response(result)
            except Exception as exc:
                _reraise(self._unreadable(exc, capture), exc)
            return iter((self._tag(turn, capture),))
        events: Iterator[Any] = iter(_drain_async(result) if self.is_async else result)
        if self._wire:
            events = self._told(events)
        # Some SDKs send the request only when their stream is first iterated (google-genai): the first
        # event is pulled here, so an HTTP error is a ModelError (retried, or a fallback) and not a broken
        # stream. Later failures are the adapter's business: an incomplete turn.
        try:
            first = next(events)
        except StopIteration:
            return self._stream(iter(()), capture)
        except Exception as exc:
            raise self._failed(exc, capture) from exc
        return self._stream(itertools.chain((first,), events), capture)

    def _stream(self, events: Iterable[Any], capture: Capture | None) -> Iterator[StreamItem]:
        try:
            for item in self.adapter.parse_stream(events, max_argument_bytes=self.max_argument_bytes):
                if isinstance(item, ModelTurn):
                    item = self._tag(item, capture)
                yield item
        except Exception as exc:  # broke mid-way, or an event it cannot read: the frames so far are its wire
            _reraise(self._unreadable(exc, capture), exc)

    def _tag(self, turn: ModelTurn, capture: Capture | None = None) -> ModelTurn:
        if not turn.model:
            turn.model = self.name
        if capture is not None:
            turn.wire = capture.record()
        return turn

    def _send(self, body: dict[str, Any]) -> Any:  # pragma: no cover - each subclass has its own
        """One SDK call for ``body`` (:data:`RENDERS` holds the run's render cache meanwhile)."""
        raise NotImplementedError

    # -- errors and retry-after ---------------------------------------------------------------------------

    def _failed(self, exc: Exception, capture: Capture | None) -> ModelError:
        """The model error for a failed request, carrying what went over HTTP when it was captured."""
        err = self._error(exc)
        err.wire = self._failed_wire(capture)
        return err

    def _unreadable(self, exc: Exception, capture: Capture | None) -> ModelError:
        """An answer the adapter could not read: its error, a broken stream, or a wire format error naming it."""
        what = f"({type(exc).__name__}: {exc})"
        err = (exc if isinstance(exc, ModelError)
               else StreamInterrupted(f"{self.provider}: the stream broke {what}") if map_error(exc, self.provider)
               else WireFormatError(f"{self.provider}: an answer of an unexpected shape {what}"))
        if err.wire is None:
            err.wire = self._failed_wire(capture)
        return err

    def _failed_wire(self, capture: Capture | None) -> dict[str, Any] | None:
        record = capture.record() if capture is not None else None  # None: the request never left
        return None if record is None else {**record, "provider": self.provider}

    def _error(self, exc: Exception) -> ModelError:
        mapped = map_error(exc, self.provider)
        if mapped is None:
            return ModelError(f"{self.provider}: the SDK call raised {type(exc).__name__}: {exc}", retryable=False)
        retry_after = getattr(mapped, "retry_after", None)
        if retry_after is not None and mapped.retryable:
            if retry_after > self.max_retry_wait:
                mapped.retryable = False
                mapped.args = (f"{mapped}; the server asked to wait {retry_after:.0f} s, longer than "
                               f"max_retry_wait={self.max_retry_wait:.0f} s",)
            else:
                with self._lock:
                    self._not_before = max(self._not_before, time.monotonic() + retry_after)
        return mapped

    def _wait_retry_after(self) -> None:
        with self._lock:
            wait = self._not_before - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def _reraise(err: ModelError, cause: Exception) -> NoReturn:
    """Raise ``err``: as it is when it is the exception caught, else from it."""
    if err is cause:
        raise err
    raise err from cause
