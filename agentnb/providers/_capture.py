"""The wire as it was: what an SDK model's request sent and received over HTTP, redacted and size-capped.

Theory of operation. The official SDKs all speak HTTP through an ``httpx``-style client (``openai`` and
``anthropic`` keep it at ``client._client``, ``ollama`` too, ``google-genai`` at
``client._api_client._httpx_client`` / ``_async_httpx_client``). :func:`tap` adds one request hook and one
response hook to that client's ``event_hooks`` (httpx's public seam; once per client, whoever shares it). The
hooks do nothing unless a :class:`Capture` is current (:data:`CURRENT`, a context variable the model sets
around its SDK call): so a client shared with code outside agentnb, or with another model that does not
capture, sends and receives exactly as before, and two runs that share one client in two threads each see
their own requests (an async client runs its requests on agentnb's event loop, to which
``asyncio.run_coroutine_threadsafe`` carries the caller's context).

The request hook keeps the method, URL, headers and body bytes as the SDK built them (the real model name, the
stream flag, every setting the SDK added). The response hook keeps the status and headers and wraps the
response's byte stream, so the body is recorded as the SDK reads it: a whole JSON body, or the frames of a
stream (SSE events split on blank lines, JSON lines on newlines), each with the milliseconds between sending
the request and reading the bytes that completed it (when the client read them: a run paused mid-stream shows
the pause).

:meth:`Capture.record` turns it into the plain JSON data a :class:`~agentnb._messages.ModelTurn` carries in
``wire`` (keys below). Secrets never get there: header values under credential names (``Authorization``,
``x-api-key``, ``x-goog-api-key``, ``api-key``, cookies ...) are masked, and every text (URL, body, frames)
goes through :func:`agentnb._redact.redact_text` (key shapes, registered literals such as the client's own
key); the driver masks the run's secret arguments on top, as for the raw response. A request keeps at most
``cap`` bytes of body and response together: past it, the rest is dropped and ``truncated`` says so.

``wire`` keys: ``method``, ``url``, ``request_headers``, ``request_body`` (text), ``status``,
``response_headers``, ``response_body`` (text of a whole response, else None), ``stream`` (whether the
answer came as frames), ``frames`` (``[[ms, text], ...]``), ``frames_total``, ``bytes`` (body + response
bytes seen), ``truncated`` (None, or "truncated at N bytes of M"), ``elapsed_ms``, ``attempts`` (HTTP
requests this model request made: an SDK's own retries and redirects; the last one is kept).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from typing import Any

from .._redact import MASK, redact, redact_text

__all__ = ["CURRENT", "WIRE_CAP", "Capture", "tap"]

WIRE_CAP = 256 * 1024
"""Bytes of request body and response (together) one model request keeps by default."""

CURRENT: ContextVar[Capture | None] = ContextVar("agentnb_wire_capture", default=None)
"""The capture of the model request in progress in this context (None: the hooks do nothing)."""

_MARK = "_agentnb_wire"


class Capture:
    """What one model request sent and received; fed by the client's hooks, read by :meth:`record`."""

    def __init__(self, cap: int = WIRE_CAP, secrets: tuple[str, ...] = ()) -> None:
        self.cap = max(0, int(cap))
        self.secrets = tuple(s for s in secrets if s)
        self.attempts = 0
        self._reset()

    def _reset(self) -> None:
        self.method = ""
        self.url = ""
        self.request_headers: dict[str, str] = {}
        self.request_body = ""
        self.status: int | None = None
        self.response_headers: dict[str, str] = {}
        self.stream = False
        self.body = bytearray()
        self.frames: list[list[Any]] = []
        self.frames_total = 0
        self.seen = 0
        self.kept = 0
        self.cut = False
        self.t0 = time.perf_counter()
        self.last = 0.0
        self._pending = b""
        self._sep = b"\n\n"

    # -- fed by the hooks --------------------------------------------------------------------------------

    def on_request(self, request: Any) -> None:
        """Keep one outgoing request (the last one wins: an SDK's own retry replaces the attempt before)."""
        self.attempts += 1
        self._reset()
        self.method = str(getattr(request, "method", ""))
        self.url = str(getattr(request, "url", ""))
        self.request_headers = {str(k): str(v) for k, v in getattr(request, "headers", {}).items()}
        try:
            content = bytes(request.content)
        except Exception:  # a streamed request body the SDK has not read yet
            content = b"<a streamed request body, not captured>"
        self.seen += len(content)
        self.request_body = self._take(content).decode("utf-8", "replace")

    def on_response(self, response: Any, *, is_async: bool = False) -> None:
        """Keep the status and headers, and wrap the body so its bytes are recorded as they are read."""
        self.status = int(getattr(response, "status_code", 0) or 0) or None
        self.response_headers = {str(k): str(v) for k, v in getattr(response, "headers", {}).items()}
        media = self.response_headers.get("content-type", "").lower()
        self.stream = "event-stream" in media or "ndjson" in media or "jsonl" in media
        self._sep = b"\n\n" if "event-stream" in media else b"\n"
        stream = getattr(response, "stream", None)
        if stream is None:
            return
        response.stream = _tap_class(type(stream), is_async)(stream, self)

    def on_bytes(self, chunk: bytes) -> None:
        """Record one chunk of the response body as it is read."""
        self.last = (time.perf_counter() - self.t0) * 1000
        self.seen += len(chunk)
        if not self.stream:
            self.body += self._take(chunk)
            return
        data = (self._pending + chunk).replace(b"\r\n", b"\n")
        *whole, self._pending = data.split(self._sep)
        for frame in whole:
            if frame.strip():
                self._frame(frame)

    def on_end(self) -> None:
        """The body was read to its end (or closed): what is left is the last frame."""
        if self.stream and self._pending.strip():
            self._frame(self._pending)
        self._pending = b""

    def _frame(self, frame: bytes) -> None:
        self.frames_total += 1
        if self.cut:
            return
        kept = self._take(frame)
        if len(kept) < len(frame):  # a frame is kept whole or not at all
            self.kept -= len(kept)
            self.cut = True
            return
        self.frames.append([round(self.last, 3), frame.decode("utf-8", "replace")])

    def _take(self, data: bytes) -> bytes:
        room = self.cap - self.kept
        if room >= len(data) and not self.cut:
            self.kept += len(data)
            return data
        self.cut = True
        part = data[: max(0, room)]
        self.kept += len(part)
        return part

    # -- read once, at the end of the turn ---------------------------------------------------------------

    def record(self) -> dict[str, Any] | None:
        """The capture as the plain, redacted JSON data a turn's ``wire`` holds (None: nothing was sent)."""
        if not self.attempts:
            return None
        self.on_end()
        body = None if self.stream else self._clean(bytes(self.body).decode("utf-8", "replace"))
        return {
            "method": self.method,
            "url": self._clean(self.url),
            "request_headers": _headers(self.request_headers, self._clean),
            "request_body": self._clean(self.request_body),
            "status": self.status,
            "response_headers": _headers(self.response_headers, self._clean),
            "response_body": body,
            "stream": self.stream,
            "frames": [[ms, self._clean(text)] for ms, text in self.frames],
            "frames_total": self.frames_total,
            "bytes": self.seen,
            "truncated": f"truncated at {self.kept:,} bytes of {self.seen:,}" if self.cut else None,
            "elapsed_ms": round(self.last, 3),
            "attempts": self.attempts,
        }

    def _clean(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return redact_text(text)


def _headers(headers: dict[str, str], clean: Any) -> dict[str, str]:
    masked: dict[str, str] = redact(headers)  # credential names (authorization, x-api-key, ...) by key
    for key, value in headers.items():
        scheme, _, token = value.partition(" ")
        if masked[key] == MASK and token and scheme.lower() in ("bearer", "basic", "token"):
            masked[key] = f"{scheme} {MASK}"  # the scheme is no secret, and "Copy as curl" needs it
    return {k: clean(v) for k, v in masked.items()}


class _SyncTap:
    """A response byte stream that records what passes through it."""

    def __init__(self, inner: Any, capture: Capture) -> None:
        self._inner = inner
        self._capture = capture

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._capture.on_bytes(chunk)
            yield chunk
        self._capture.on_end()

    def close(self) -> None:
        self._capture.on_end()
        self._inner.close()


class _AsyncTap:
    """The async twin of :class:`_SyncTap`."""

    def __init__(self, inner: Any, capture: Capture) -> None:
        self._inner = inner
        self._capture = capture

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._capture.on_bytes(chunk)
            yield chunk
        self._capture.on_end()

    async def aclose(self) -> None:
        self._capture.on_end()
        await self._inner.aclose()


_TAPS: dict[tuple[type, bool], type] = {}


def _tap_class(stream_type: type, is_async: bool) -> Any:
    """The tap for a stream class, also an instance of its ``SyncByteStream``/``AsyncByteStream`` base.

    ``httpx`` (and its fork ``httpx2``) check that base when they close or read a response, so the tap
    derives from the very class the SDK's HTTP library uses.
    """
    made = _TAPS.get((stream_type, is_async))
    if made is None:
        tap_type: type = _AsyncTap if is_async else _SyncTap
        wanted = "AsyncByteStream" if is_async else "SyncByteStream"
        base = next((c for c in stream_type.__mro__ if c.__name__ == wanted), None)
        made = tap_type if base is None else type(tap_type.__name__, (tap_type, base), {})
        _TAPS[(stream_type, is_async)] = made
    return made


# -- the hooks ------------------------------------------------------------------------------------------


def _on_request(request: Any) -> None:
    capture = CURRENT.get()
    if capture is not None:
        capture.on_request(request)


def _on_response(response: Any, *, is_async: bool = False) -> None:
    capture = CURRENT.get()
    if capture is not None:
        capture.on_response(response, is_async=is_async)


async def _on_request_async(request: Any) -> None:
    _on_request(request)


async def _on_response_async(response: Any) -> None:
    _on_response(response, is_async=True)


for _hook in (_on_request, _on_response, _on_request_async, _on_response_async):
    setattr(_hook, _MARK, True)


def http_clients(client: Any) -> list[Any]:
    """The ``httpx``-style clients an SDK client sends its requests through (empty when none is found)."""
    found: list[Any] = []
    api = getattr(client, "_api_client", None)  # google-genai (also its .aio)
    for holder, attrs in ((client, ("_client",)), (api, ("_httpx_client", "_async_httpx_client"))):
        for attr in attrs:
            inner = getattr(holder, attr, None) if holder is not None else None
            if inner is not None and isinstance(getattr(inner, "event_hooks", None), dict):
                found.append(inner)
    return found


def tap(client: Any) -> bool:
    """Add the capture hooks to the HTTP clients of an SDK client (once each); whether any was found.

    Example:
        >>> import openai
        >>> tap(openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9"))
        True
    """
    clients = http_clients(client)
    for http in clients:
        is_async = "async" in type(http).__name__.lower()
        hooks = http.event_hooks
        if any(getattr(h, _MARK, False) for h in hooks.get("request", ())):
            continue
        request_hook, response_hook = ((_on_request_async, _on_response_async) if is_async
                                       else (_on_request, _on_response))
        http.event_hooks = {"request": [*hooks.get("request", ()), request_hook],
                            "response": [*hooks.get("response", ()), response_hook]}
        # google-genai's async client sends through one inner client per event loop, made from its
        # construction arguments: give those the hooks too
        kwargs = getattr(http, "_client_kwargs", None)
        if isinstance(kwargs, dict):
            kwargs["event_hooks"] = http.event_hooks
            for inner in list(getattr(http, "_loop_clients", {}).values()):
                inner.event_hooks = http.event_hooks
    return bool(clients)
