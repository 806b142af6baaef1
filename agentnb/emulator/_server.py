"""The emulator's HTTP server, routing, validation and faults (see :mod:`agentnb.emulator`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import socket
import threading
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..exceptions import ModelError, StreamInterrupted
from ..lint import Context, Finding, validate
from ..messages import ModelTurn
from ..providers.registry import WIRE_APIS
from ..providers.scripted import ScriptedModel, ScriptStep
from ..providers.wireapi import Encoded, EncodeRequest, RouteMatch, WireAPI
from ..request import ModelRequest
from ._choice import enforce_strict, honour_tool_choice

_STATUS_TEXT = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
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


class _Server(ThreadingHTTPServer):
    """The HTTP server: a thread per connection, daemon threads, a listen backlog of :data:`LISTEN_BACKLOG`."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True


class RequestLog(list["Logged"]):
    """The list of answered requests, bounded: past ``maxlen`` entries the oldest are dropped."""

    def __init__(self, maxlen: int) -> None:
        super().__init__()
        self.maxlen = maxlen

    def append(self, item: Logged) -> None:
        """Log one request, dropping the oldest past ``maxlen``."""
        super().append(item)
        if len(self) > self.maxlen:
            del self[: len(self) - self.maxlen]


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


def _default_message(provider: str, status: int) -> str:
    return WIRE_APIS[provider].emulator.default_message(status)


def error_body(provider: str, status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """The error body each service sends for ``status`` (the shapes of their API references)."""
    return WIRE_APIS[provider].emulator.error_body(status, message, param)


def _mounts() -> dict[str, WireAPI]:
    """Every name ``Emulator.url``/``client`` take (``openai``, ``anthropic``, ...), and its wire API."""
    return {n: api for api in WIRE_APIS.values() for n in api.emulator.url_names}


def _route(path: str) -> tuple[WireAPI, RouteMatch] | None:
    """The wire API that serves a POST to ``path``, and what the path says (model, streaming)."""
    for api in WIRE_APIS.values():
        match = api.emulator.route(path)
        if match is not None:
            return api, match
    return None


def _provider_of(path: str) -> str:
    """The wire API whose error shape a path gets (also for paths no route serves)."""
    routed = _route(path)
    if routed is not None:
        return routed[0].name
    return next((api.name for api in WIRE_APIS.values() if path.startswith(api.emulator.mount + "/")),
                next(iter(WIRE_APIS)))


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


class Emulator:
    """The local emulator of the OpenAI, Anthropic and Gemini APIs (see the module docs).

    Args:
        script: the turns, as for :class:`~agentnb.ScriptedModel` (or a ScriptedModel itself).
        chunk_size: characters per streamed fragment.
        port: a port to listen on (default: a free one).
        require_thought_signatures: Gemini: require signatures on function calls (default: for
            ``gemini-3*`` models, as the service does).
        verify_signatures: check the thinking signatures, thought signatures and encrypted reasoning this
            emulator issued: one it issued must come back with the content it was issued for (an edited
            thinking block is refused). False: accept any, even an edited one.
        strict_signatures: also refuse the ones it did not issue. By default they are accepted, as a
            history recorded from the real services carries theirs, which only they can verify, and
            Gemini's documented placeholders are accepted in either mode (plain or base64, as the SDK
            sends them).
        log_size: how many requests :attr:`requests` keeps.

    Example:
        >>> with Emulator([{"text": "ok"}]) as emu:
        ...     emu.url("anthropic").startswith("http://127.0.0.1:")
        True
    """

    def __init__(self, script: Sequence[ScriptStep] | ScriptedModel = (), *, chunk_size: int = 8, port: int = 0,
                 require_thought_signatures: bool | None = None, verify_signatures: bool = True,
                 strict_signatures: bool = False, log_size: int = LOG_SIZE) -> None:
        self.chunk_size = chunk_size
        self.requests: RequestLog = RequestLog(log_size)
        """The requests answered, in order (the last ``log_size`` of them)."""
        self.require_thought_signatures = require_thought_signatures
        self.verify_signatures = verify_signatures
        self.strict_signatures = strict_signatures
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._secret = secrets.token_bytes(32)
        self._issued_thoughts: set[bytes] = set()
        self._issued: set[bytes] = set()  # thinking signatures and encrypted reasoning, to tell ours from others'
        self._reasoning_for: dict[str, str] = {}
        self._reasoning_content_for: set[str] = set()
        self._counter = 0
        self._position = 0
        self.model = self._as_model(script)

    # -- life cycle ---------------------------------------------------------------------------------------

    def start(self) -> Emulator:
        """Start serving (idempotent); returns the emulator."""
        if self._server is not None:
            return self
        handler = type("Handler", (_Handler,), {"emulator": self})
        self._server = _Server(("127.0.0.1", self._port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="agentnb-emulator",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"http://127.0.0.1:{self.port}" if self._server else "stopped"
        return f"Emulator({where}, {len(self.requests)} requests)"

    @property
    def port(self) -> int:
        """The port it listens on (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the emulator is not running: call start() or use it in a with block")
        return int(self._server.server_address[1])

    def url(self, provider: str) -> str:
        """The base URL to give a client: ``openai`` (Chat and Responses), ``anthropic`` or ``gemini``.

        Example:
            >>> Emulator().start().url("openai").endswith("/openai/v1")
            True
        """
        mounts = _mounts()
        if provider not in mounts:
            raise ValueError(f"provider={provider!r}: use one of {', '.join(repr(n) for n in mounts)}")
        return f"http://127.0.0.1:{self.port}{mounts[provider].emulator.mount}"

    def client(self, provider: str, *, async_: bool = False) -> Any:
        """A real SDK client pointed at the emulator (``openai``, ``anthropic`` or ``gemini``)."""
        api = _mounts().get(provider)
        if api is None or api.emulator.client is None:
            raise ValueError(f"provider={provider!r}: use one of {', '.join(repr(n) for n in _mounts())}")
        return api.emulator.client(self.url(provider), async_)

    # -- scripting and faults -----------------------------------------------------------------------------

    def play(self, script: Sequence[ScriptStep] | ScriptedModel) -> Emulator:
        """Answer the next requests with this script, from its first turn."""
        with self._lock:
            self.model = self._as_model(script)
            self._position = 0
            self._faults.clear()
        return self

    def fail(self, status: int, *, retry_after: float | None = None, message: str | None = None, times: int = 1,
             provider: str | None = None) -> Emulator:
        """Answer the next ``times`` requests with HTTP ``status`` (and ``retry-after``) before the script."""
        with self._lock:
            self._faults.append(Fault(status, retry_after, message, times, provider))
        return self

    @staticmethod
    def _as_model(script: Sequence[ScriptStep] | ScriptedModel) -> ScriptedModel:
        return script if isinstance(script, ScriptedModel) else ScriptedModel(script, name="emulator")

    # -- what the validator needs -------------------------------------------------------------------------

    def _id(self, prefix: str) -> str:
        self._counter += 1
        digest = hashlib.sha256(self._secret + str(self._counter).encode()).hexdigest()
        return f"{prefix}{digest[:24]}"

    def _sign(self, kind: str, content: str) -> str:
        mac = hmac.new(self._secret, f"{kind}:{content}".encode(), hashlib.sha256).digest()
        if kind == "thought":
            mac = hmac.new(self._secret, f"thought:{self._id('')}".encode(), hashlib.sha256).digest()
            self._issued_thoughts.add(mac)
        self._issued.add(mac)
        return base64.b64encode(mac).decode()

    def _verify(self, kind: str, value: str, content: str) -> bool:
        # Only what this emulator issued can be checked: anything else came from a real service (or a
        # placeholder) and is refused only on request (``strict_signatures``).
        try:
            raw = base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4))
        except ValueError:
            return not self.strict_signatures
        if raw not in self._issued:
            return not self.strict_signatures
        if kind == "thought":
            return raw in self._issued_thoughts
        return hmac.compare_digest(raw, hmac.new(self._secret, f"{kind}:{content}".encode(), hashlib.sha256).digest())

    def _context(self, provider: str) -> Context:
        return Context(verify=self._verify if self.verify_signatures else None, reasoning_for=dict(self._reasoning_for),
                       reasoning_content_for=set(self._reasoning_content_for),
                       require_thought_signatures=self.require_thought_signatures)

    # -- answering ----------------------------------------------------------------------------------------

    def _fault(self, provider: str) -> Fault | None:
        for f in self._faults:
            if f.provider in (None, provider) and f.times > 0:
                f.times -= 1
                if f.times == 0:
                    self._faults.remove(f)
                return f
        return None

    def answer(self, provider: str, body: dict[str, Any], model: str, stream: bool) -> tuple[Encoded, bool]:
        """The encoded answer to one request, and whether to cut it; raises ``_Request`` for errors."""
        with self._lock:
            fault = self._fault(provider)
            if fault is not None and fault.status is not None:
                raise _Request(fault.status, fault.message or _default_message(provider, fault.status),
                               retry_after=fault.retry_after)
            api = WIRE_APIS[provider]
            problem = api.emulator.check_request(body)
            if problem is not None:
                raise _Request(400, *problem)
            findings = validate(provider, body, self._context(provider))
            errors = [f for f in findings if f.severity == "error"]
            if errors:
                raise _Request(400, errors[0].provider_message, errors[0].param, findings=errors)
            clean, _ = api.normalize(body)  # the shapes the service tolerates, in the documented form
            history = api.parse_history(clean)
            messages, tools = history.messages, history.tools
            request = ModelRequest(messages=messages, tools=tools, settings={}, run_id="emulator")
            self._position += 1
            try:
                items = list(self.model.respond(request))
                cut = fault is not None
            except StreamInterrupted:  # the script asks for a cut: encode the whole turn, then cut the bytes
                step = self.model.script[self._position - 1]
                spec = step(messages) if callable(step) else step
                whole = ScriptedModel([{k: v for k, v in spec.items() if k != "interrupt"}], name=self.model.name)
                items = list(whole.respond(request))
                cut = True
            except ModelError as exc:
                status = exc.status or 500
                raise _Request(status, str(exc) if exc.status else _default_message(provider, status)) from exc
            turn = items[-1]
            assert isinstance(turn, ModelTurn)
            turn = honour_tool_choice(turn, history.tool_choice, tools)
            turn = enforce_strict(turn, history.strict)
            turn.usage.input_tokens = max(turn.usage.input_tokens, 1)
            encoded = api.emulator.encode(turn, EncodeRequest(
                model, body, stream, self.chunk_size, self._id, self._sign, self.require_thought_signatures))
            self._reasoning_for.update(encoded.issued.get("reasoning_for") or {})
            self._reasoning_content_for.update(encoded.issued.get("reasoning_content_for") or ())
            return encoded, cut


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT  # socketserver sets it on the connection: a silent client cannot hold a thread
    emulator: Emulator

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
        pass  # quiet: the emulator logs requests in Emulator.requests

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own errors (a bad request line, an unknown method) as JSON in the service's shape."""
        self.close_connection = True
        path = urllib.parse.urlsplit(getattr(self, "path", "") or "").path
        if code == 501:  # an HTTP method the server has no handler for
            code, message = 405, f"Method {getattr(self, 'command', '?')} is not allowed."
        try:
            self._json(code, error_body(_provider_of(path), code, message or _STATUS_TEXT.get(code, "Error")),
                       {"connection": "close"})
        except OSError:
            pass

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        """Every route takes POST only: 405 on a known route, 404 elsewhere, in the service's error shape."""
        path = urllib.parse.urlsplit(self.path).path
        provider = _provider_of(path)
        if _route(path) is None:
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
        parsed = urllib.parse.urlsplit(self.path)
        path = parsed.path
        raw = self._read_body(_provider_of(path))
        if raw is None:
            return
        routed = _route(path)
        if routed is None:
            self._json(404, error_body(_provider_of(path), 404, f"Unknown request URL: POST {path}."))
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
        emu = self.emulator
        try:
            encoded, cut = emu.answer(provider, body, model, stream)
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
        emu.requests.append(Logged(provider, path, body, 200, stream))
        if not stream:
            if cut:
                self._cut_body(encoded.body)
            else:
                self._json(200, encoded.body)
            return
        self._stream(encoded, cut, api.emulator.stream_media_type)

    def _error(self, provider: str, path: str, body: dict[str, Any], exc: _Request, stream: bool) -> None:
        self.emulator.requests.append(Logged(provider, path, body, exc.status, stream, exc.message, exc.findings))
        headers = {}
        if exc.retry_after is not None:
            headers["retry-after"] = f"{exc.retry_after:g}"
        if not exc.retry:
            headers["x-should-retry"] = "false"
        self._json(exc.status, error_body(provider, exc.status, exc.message, exc.param), headers)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status, _STATUS_TEXT.get(status))
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

    def _stream(self, encoded: Encoded, cut: bool, media_type: str) -> None:
        self.send_response(200)
        self.send_header("content-type", media_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        frames = encoded.frames
        try:
            for i, frame in enumerate(frames):
                if cut and i == encoded.cut_at:
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

