"""What the emulator's parts trade: the request log, faults, an answer and its pacing, the refusals, routing."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .._lint import Finding
from ..providers._registry import WIRE_APIS
from ..providers._wireapi import Encoded, RouteMatch, WireAPI

STATUS_TEXT = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
               408: "Request Timeout", 413: "Payload Too Large", 429: "Too Many Requests",
               500: "Internal Server Error", 503: "Service Unavailable", 529: "Overloaded"}

MAX_BODY_BYTES = 32 * 1024 * 1024
"""Request bodies over this size (32 MiB, the Anthropic Messages API's limit) are answered 413 unread."""
READ_TIMEOUT = 30.0
"""Seconds a connection may stay silent while the emulator reads a request (then it is closed)."""
LOG_SIZE = 1000
"""How many requests :attr:`Emulator.requests` keeps (the oldest are dropped first)."""
LISTEN_BACKLOG = 1024
"""Connections the kernel queues before the emulator accepts them (the kernel caps it at ``somaxconn``).

The standard library's ``socketserver`` listens with a backlog of 5: 64 clients connecting at once overflow it,
and the kernel drops their handshakes (the client tries again a second later) or resets them."""


@dataclass(slots=True)
class Fault:
    """A fault to inject on the next request(s): an HTTP error, or a stream cut in the middle.

    Attributes:
        status: the HTTP status (429, 500, 503, ...), or None for a cut.
        retry_after: seconds for the ``retry-after`` header.
        message: the error message (default: the service's usual one for the status).
        times: how many requests it answers.
        provider: only requests to this wire API (None: any).
    """

    status: int | None = None
    retry_after: float | None = None
    message: str | None = None
    times: int = 1
    provider: str | None = None


@dataclass(slots=True)
class Logged:
    """One request the emulator answered."""

    provider: str
    path: str
    body: dict[str, Any]
    status: int
    stream: bool
    error: str | None = None
    findings: list[Finding] = field(default_factory=list)
    finished_at: float | None = None
    """``time.perf_counter()`` when the answer's last byte was written (a cut: when the connection was dropped);
    None while it is being sent, and for answers refused before reading the body."""
    headers: dict[str, str] = field(default_factory=dict)
    """The request's headers as received (names in lower case)."""
    frames: list[bytes] = field(default_factory=list)
    """A whole streamed answer's frames as written, in order (empty for a whole body or a cut stream)."""


class RequestLog(list[Logged]):
    """The list of answered requests, bounded: past ``maxlen`` entries the oldest are dropped.

    Requests are answered in parallel, so an append (and the trimming after it) holds a lock of its own.
    """

    def __init__(self, maxlen: int) -> None:
        super().__init__()
        self.maxlen = maxlen
        self._lock = threading.Lock()

    def append(self, item: Logged) -> None:
        """Log one request, dropping the oldest past ``maxlen``."""
        with self._lock:
            super().append(item)
            if len(self) > self.maxlen:
                del self[: len(self) - self.maxlen]


@dataclass(frozen=True, slots=True)
class Answer:
    """One request's answer, encoded, and how it leaves: cut or whole, and at what pace.

    The script's timing (:class:`~agentnb.ScriptedModel`'s ``latency`` and ``chunk_delay``) is spent by the
    HTTP handler while it writes a stream, frame by frame, never while a lock is held; a whole answer has spent
    it already, as the script does when it answers whole.
    """

    encoded: Encoded
    cut: bool = False
    """Break the answer where :attr:`Encoded.cut_at` says (a stream), or halfway (a whole body)."""
    latency: float = 0.0
    """Seconds between the stream's headers and its first frame (the script's time to first token)."""
    chunk_delay: float = 0.0
    """Seconds before each frame of a stream (the script's delay between fragments)."""


def default_message(provider: str, status: int) -> str:
    """The message a service sends with ``status`` when nobody said another."""
    return WIRE_APIS[provider].emulator.default_message(status)


def error_body(provider: str, status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """The error body each service sends for ``status`` (the shapes of their API references)."""
    return WIRE_APIS[provider].emulator.error_body(status, message, param)


def mounts() -> dict[str, WireAPI]:
    """Every name ``Emulator.url``/``client`` take (``openai``, ``anthropic``, ...), and its wire API."""
    return {n: api for api in WIRE_APIS.values() for n in api.emulator.url_names}


def route(path: str) -> tuple[WireAPI, RouteMatch] | None:
    """The wire API that serves a POST to ``path``, and what the path says (model, streaming)."""
    for api in WIRE_APIS.values():
        match = api.emulator.route(path)
        if match is not None:
            return api, match
    return None


def provider_of(path: str) -> str:
    """The wire API whose error shape a path gets (also for paths no route serves)."""
    routed = route(path)
    if routed is not None:
        return routed[0].name
    return next((api.name for api in WIRE_APIS.values() if path.startswith(api.emulator.mount + "/")),
                next(iter(WIRE_APIS)))
