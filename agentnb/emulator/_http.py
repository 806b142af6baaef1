"""The emulator's HTTP side: the listening server, its worker threads, and the handler that writes answers.

Theory of operation. The server accepts on one thread and hands each connection to :class:`Workers`: an idle
worker thread takes it, or a new one starts when every worker is busy, so a connection never waits for
another to close (a keep-alive client holds its worker between requests, as a classroom's 64 notebooks do),
and a worker that finished its connection waits for the next one instead of a thread being made per
connection. Workers idle for :data:`IDLE_SECONDS` end. Nothing here holds a lock while it answers: the handler
asks the emulator for an :class:`~agentnb.emulator._records.Answer` (which guards only the state requests
share) and then writes it, a stream one frame at a time: each frame waits the script's chunk delay, is
written as one HTTP chunk and flushed, so a client reads the fragments as the script produces them.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from .._lint import Finding
from ._records import (
    LISTEN_BACKLOG,
    MAX_BODY_BYTES,
    READ_TIMEOUT,
    STATUS_TEXT,
    Answer,
    Logged,
    RequestLog,
    error_body,
    provider_of,
    route,
)

IDLE_SECONDS = 60.0
"""Seconds a worker thread waits for a connection before it ends."""


class _Request(Exception):
    """An answer decided before the script runs (an invalid request, a fault)."""

    def __init__(self, status: int, message: str, param: str | None = None, retry_after: float | None = None,
                 findings: list[Finding] | None = None, retry: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.retry_after = retry_after
        self.findings = findings or []
        self.retry = retry
        """False: the answer says ``x-should-retry: false`` (the SDKs that honour it do not ask again)."""


def refusal(status: int, message: str, param: str | None = None, retry_after: float | None = None,
            findings: list[Finding] | None = None, retry: bool = True) -> Exception:
    """The error to raise for an answer decided before the script runs; the handler here catches it and answers.

    The class stays in this module (control flow between the emulator's answer and its handler).
    """
    return _Request(status, message, param, retry_after, findings, retry)


class Answering(Protocol):
    """What the handler needs of the emulator: an answer per request, and the log."""

    requests: RequestLog

    def answer(self, provider: str, body: dict[str, Any], model: str, stream: bool) -> Answer:
        """The answer to one request; raises ``_Request`` for one decided without the script."""
        ...


class Workers:
    """Daemon threads that run jobs: an idle one takes the next job, a new one starts when none is idle.

    Unbounded on purpose: a job is a connection, which may stay open (keep-alive) as long as its client wants,
    so a bound would make the next client wait for another one to leave. ``started`` counts the threads made.

    Example:
        >>> pool = Workers()
        >>> done = threading.Event()
        >>> pool.submit(done.set)
        >>> done.wait(5), pool.started
        (True, 1)
        >>> pool.close()
    """

    def __init__(self, idle_seconds: float = IDLE_SECONDS, name: str = "agentnb-emulator-worker") -> None:
        self.idle_seconds = idle_seconds
        self.name = name
        self.started = 0
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one permit per idle worker no job is promised to
        self._lock = threading.Lock()
        self._alive = 0

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on an idle worker, or on a new one when all are busy."""
        if not self._idle.acquire(blocking=False):
            with self._lock:
                self.started += 1
                self._alive += 1
                n = self.started
            threading.Thread(target=self._work, name=f"{self.name}-{n}", daemon=True).start()
        self._jobs.put(job)

    def close(self) -> None:
        """Let every worker end once its current job is done (the jobs already given still run)."""
        with self._lock:
            alive = self._alive
        for _ in range(alive):
            self._jobs.put(None)

    def _work(self) -> None:
        try:
            while True:
                try:
                    job = self._jobs.get(timeout=self.idle_seconds)
                except queue.Empty:
                    if self._idle.acquire(blocking=False):  # nobody was promised this worker: it may end
                        return
                    continue  # a job is on its way to some idle worker: take it
                if job is None:
                    return
                with contextlib.suppress(Exception):  # a job's own failure does not end its worker
                    job()
                self._idle.release()
        finally:
            with self._lock:
                self._alive -= 1


class Server(ThreadingHTTPServer):
    """The HTTP server: connections served by :class:`Workers`, a listen backlog of :data:`LISTEN_BACKLOG`."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.workers = Workers()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Hand the accepted connection to a worker (the standard library starts a thread per connection)."""
        self.workers.submit(lambda: self.process_request_thread(request, client_address))

    def server_close(self) -> None:
        """Close the port and let the idle workers end."""
        super().server_close()
        self.workers.close()


class Handler(BaseHTTPRequestHandler):
    """One connection's requests: read, route, ask the emulator, write the answer (see the module docs)."""

    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT  # socketserver sets it on the connection: a silent client cannot hold a thread
    emulator: Answering

    def setup(self) -> None:
        """Send small writes at once (no Nagle delay between headers, frames and the client's ACKs)."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        """Serve the connection; a client that hangs up (or stays silent past the timeout) is not an error."""
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError, TimeoutError):
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """Quiet: the emulator logs requests in ``Emulator.requests``."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own errors (a bad request line, an unknown method) as JSON in the service's shape."""
        self.close_connection = True
        path = urllib.parse.urlsplit(getattr(self, "path", "") or "").path
        if code == 501:  # an HTTP method the server has no handler for
            code, message = 405, f"Method {getattr(self, 'command', '?')} is not allowed."
        try:
            self._json(code, error_body(provider_of(path), code, message or STATUS_TEXT.get(code, "Error")),
                       {"connection": "close"})
        except OSError:
            pass

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        """Every route takes POST only: 405 on a known route, 404 elsewhere, in the service's error shape."""
        path = urllib.parse.urlsplit(self.path).path
        provider = provider_of(path)
        if route(path) is None:
            self._json(404, error_body(provider, 404, f"Unknown request URL: {self.command} {path}."))
        else:
            self._json(405, error_body(provider, 405, f"Method {self.command} is not allowed for {path}: use POST."),
                       {"allow": "POST"})
        self.close_connection = True  # a body the client may have sent is not read

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET  # noqa: N815 - the stdlib's names

    def _read_body(self, provider: str) -> bytes | None:
        """The request body within the cap, or None after answering 400/408/413 (the connection then closes)."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            return self._read_chunked(provider)
        header = self.headers.get("content-length")
        try:
            length = int(header) if header is not None else 0
            if length < 0 or (header is not None and not header.strip().isdigit()):
                raise ValueError(header)
        except ValueError:
            self._refuse(provider, 400, f"Invalid Content-Length header: {header!r}.")
            return None
        if length > MAX_BODY_BYTES:
            self._refuse(provider, 413, f"Request body of {length} bytes is over the {MAX_BODY_BYTES}-byte limit.")
            return None
        try:
            raw = self.rfile.read(length) if length else b""
        except TimeoutError:
            self._refuse(provider, 408, f"The request body did not arrive within {self.timeout:g} s.")
            return None
        if len(raw) < length:  # the client hung up mid-body
            self.close_connection = True
            return None
        return raw

    def _read_chunked(self, provider: str) -> bytes | None:
        body = bytearray()
        try:
            while True:
                line = self.rfile.readline(100)
                size = int(line.split(b";")[0].strip() or b"x", 16)
                if size < 0:
                    raise ValueError(line)
                if len(body) + size > MAX_BODY_BYTES:
                    self._refuse(provider, 413, f"Request body is over the {MAX_BODY_BYTES}-byte limit.")
                    return None
                if size == 0:
                    while self.rfile.readline(1000).strip():  # trailers
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline(3)
        except ValueError:
            self._refuse(provider, 400, "Invalid chunked request body.")
        except TimeoutError:
            self._refuse(provider, 408, f"The request body did not arrive within {self.timeout:g} s.")
        return None

    def _refuse(self, provider: str, status: int, message: str) -> None:
        """Answer an HTTP-level error and close: what is left of the body is never read."""
        self.close_connection = True
        path = urllib.parse.urlsplit(self.path).path
        self.emulator.requests.append(Logged(provider, path, {}, status, False, message))
        try:
            self._json(status, error_body(provider, status, message), {"connection": "close"})
        except OSError:
            pass

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        """Route a POST to the API it belongs to."""
        path = urllib.parse.urlsplit(self.path).path
        raw = self._read_body(provider_of(path))
        if raw is None:
            return
        routed = route(path)
        if routed is None:
            self._json(404, error_body(provider_of(path), 404, f"Unknown request URL: POST {path}."))
            return
        api, match = routed
        provider = api.name
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):
            self._error(provider, path, {}, _Request(400, "We could not parse the JSON body of your request."), False)
            return
        stream = match.stream if match.stream is not None else bool(body.get("stream", api.emulator.stream_default))
        model = match.model or str(body.get("model") or "")
        if match.model:  # the model named in the path is the request's model (Gemini)
            body = {**body, "model": model}
        try:
            answer = self.emulator.answer(provider, body, model, stream)
        except _Request as exc:
            self._error(provider, path, body, exc, stream)
            return
        except RecursionError:
            self._error(provider, path, body, _Request(400, "Invalid request: the JSON body is nested too deeply."),
                        stream)
            return
        except Exception as exc:  # a bug in a script function: answer as the service does for its own errors,
            # but tell the SDKs not to retry: asking again would only move the script on to its next turn
            self._error(provider, path, body, _Request(500, f"{type(exc).__name__}: {exc}", retry=False), stream)
            return
        logged = Logged(provider, path, body, 200, stream, headers={k.lower(): v for k, v in self.headers.items()},
                        frames=list(answer.encoded.frames) if stream and not answer.cut else [])
        self.emulator.requests.append(logged)
        try:
            if not stream:
                if answer.cut:
                    self._cut_body(answer.encoded.body)
                else:
                    self._json(200, answer.encoded.body)
            else:
                self._stream(answer, api.emulator.stream_media_type)
        finally:
            logged.finished_at = time.perf_counter()

    def _error(self, provider: str, path: str, body: dict[str, Any], exc: _Request, stream: bool) -> None:
        logged = Logged(provider, path, body, exc.status, stream, exc.message, exc.findings)
        self.emulator.requests.append(logged)
        headers = {}
        if exc.retry_after is not None:
            headers["retry-after"] = f"{exc.retry_after:g}"
        if not exc.retry:
            headers["x-should-retry"] = "false"
        self._json(exc.status, error_body(provider, exc.status, exc.message, exc.param), headers)
        logged.finished_at = time.perf_counter()

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status, STATUS_TEXT.get(status))
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _cut_body(self, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self._abort()

    def _stream(self, answer: Answer, media_type: str) -> None:
        """The headers at once, then each frame after the script's delay, one flushed HTTP chunk per frame."""
        self.send_response(200)
        self.send_header("content-type", media_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        encoded = answer.encoded
        try:
            if answer.latency > 0:
                time.sleep(answer.latency)
            for i, frame in enumerate(encoded.frames):
                if answer.chunk_delay > 0:  # a relative wait, as the script's own: a late frame delays the rest
                    time.sleep(answer.chunk_delay)
                if answer.cut and i == encoded.cut_at:
                    self._chunk(frame[: max(1, len(frame) // 2)])
                    self._abort()
                    return
                self._chunk(frame)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _abort(self) -> None:
        """Drop the connection mid-body (no final chunk): the client sees a broken read."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
