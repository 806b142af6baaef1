"""The emulator: its script, faults and what it issued, and how one request is answered (see :mod:`agentnb.emulator`).

Theory of operation. Requests are answered in parallel, each on its connection's worker thread
(:mod:`agentnb.emulator._http`). What they share is guarded by one lock, held only to read or write it: the
faults still to inject, the script and the position of the next turn in it, the id counter, and the
signatures and reasoning items issued (which validation reads). Everything else -- validation, reading the
history, the script's own function, its waits, the encoding -- runs outside the lock, so a script that waits
(for a person, a barrier, its ``latency``) holds back only its own request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
from collections.abc import Sequence
from typing import Any

from .._lint import Context, validate
from .._messages import ModelTurn
from .._request import ModelRequest
from ..exceptions import ModelError, StreamInterrupted
from ..providers._registry import WIRE_APIS
from ..providers._scripted import ScriptedModel, ScriptStep
from ..providers._wireapi import EncodeRequest
from ._choice import enforce_strict, honour_tool_choice
from ._http import Handler, Server, refusal
from ._records import LOG_SIZE, Answer, Fault, RequestLog, default_message, mounts

__all__ = ["Emulator"]


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
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # what concurrent requests share (see the module docs), held briefly
        self._model_lock = threading.Lock()  # a model with its own respond (a replay) answers one at a time
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
        handler = type("Handler", (Handler,), {"emulator": self})
        self._server = Server(("127.0.0.1", self._port), handler)
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
        named = mounts()
        if provider not in named:
            raise ValueError(f"provider={provider!r}: use one of {', '.join(repr(n) for n in named)}")
        return f"http://127.0.0.1:{self.port}{named[provider].emulator.mount}"

    def client(self, provider: str, *, async_: bool = False) -> Any:
        """A real SDK client pointed at the emulator (``openai``, ``anthropic`` or ``gemini``)."""
        api = mounts().get(provider)
        if api is None or api.emulator.client is None:
            raise ValueError(f"provider={provider!r}: use one of {', '.join(repr(n) for n in mounts())}")
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
        with self._lock:
            self._counter += 1
            n = self._counter
        digest = hashlib.sha256(self._secret + str(n).encode()).hexdigest()
        return f"{prefix}{digest[:24]}"

    def _sign(self, kind: str, content: str) -> str:
        mac = hmac.new(self._secret, f"{kind}:{content}".encode(), hashlib.sha256).digest()
        if kind == "thought":
            mac = hmac.new(self._secret, f"thought:{self._id('')}".encode(), hashlib.sha256).digest()
        with self._lock:
            if kind == "thought":
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
        with self._lock:
            ours, thought = raw in self._issued, raw in self._issued_thoughts
        if not ours:
            return not self.strict_signatures
        if kind == "thought":
            return thought
        return hmac.compare_digest(raw, hmac.new(self._secret, f"{kind}:{content}".encode(), hashlib.sha256).digest())

    def _context(self) -> Context:
        with self._lock:
            reasoning_for, content_for = dict(self._reasoning_for), set(self._reasoning_content_for)
        return Context(verify=self._verify if self.verify_signatures else None, reasoning_for=reasoning_for,
                       reasoning_content_for=content_for, require_thought_signatures=self.require_thought_signatures)

    # -- answering ----------------------------------------------------------------------------------------

    def _fault(self, provider: str) -> Fault | None:
        for f in self._faults:
            if f.provider in (None, provider) and f.times > 0:
                f.times -= 1
                if f.times == 0:
                    self._faults.remove(f)
                return f
        return None

    def answer(self, provider: str, body: dict[str, Any], model: str, stream: bool) -> Answer:
        """The answer to one request: encoded, cut or whole, and its pace; raises a :func:`~._http.refusal` for errors.

        Safe to call from many threads at once: the lock is held only to read or write the shared state (see
        the module docs). A whole answer has spent the script's waits when it returns; a stream's are in the
        :class:`~agentnb.emulator._records.Answer`, for the handler to spend frame by frame.
        """
        api = WIRE_APIS[provider]
        with self._lock:
            fault = self._fault(provider)
        if fault is not None and fault.status is not None:
            raise refusal(fault.status, fault.message or default_message(provider, fault.status),
                           retry_after=fault.retry_after)
        problem = api.emulator.check_request(body)
        if problem is not None:
            raise refusal(400, *problem)
        findings = validate(provider, body, self._context())
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            raise refusal(400, errors[0].provider_message, errors[0].param, findings=errors)
        clean, _ = api.normalize(body)  # the shapes the service tolerates, in the documented form
        history = api.parse_history(clean)
        request = ModelRequest(messages=history.messages, tools=history.tools, settings={}, run_id="emulator")
        with self._lock:  # this request's turn: the next one of the script playing now
            script, pos = self.model, self._position
            self._position += 1
        try:
            turn, interrupted = self._play(script, pos, request, stream)
        except ModelError as exc:
            status = exc.status or 500
            raise refusal(status, str(exc) if exc.status else default_message(provider, status)) from exc
        turn = honour_tool_choice(turn, history.tool_choice, history.tools)
        turn = enforce_strict(turn, history.strict)
        turn.usage.input_tokens = max(turn.usage.input_tokens, 1)
        encoded = api.emulator.encode(turn, EncodeRequest(
            model, body, stream, self.chunk_size, self._id, self._sign, self.require_thought_signatures))
        with self._lock:
            self._reasoning_for.update(encoded.issued.get("reasoning_for") or {})
            self._reasoning_content_for.update(encoded.issued.get("reasoning_content_for") or ())
        cut = interrupted or fault is not None
        if not stream:
            return Answer(encoded, cut)
        return Answer(encoded, cut, latency=script.latency, chunk_delay=script.chunk_delay)

    def _play(self, script: ScriptedModel, pos: int, request: ModelRequest, stream: bool) -> tuple[ModelTurn, bool]:
        """Turn ``pos`` of ``script`` and whether it asks for a cut, with no lock held.

        The turn is played by a one-turn copy of the script, so nothing the script model keeps is shared
        between requests. A stream's turn is made at once (the handler spends its waits, frame by frame); a
        whole answer waits here as the script does (``latency``, and its chunk delays when it streams).
        """
        if type(script).respond is not ScriptedModel.respond:  # a model with answers of its own (a replay)
            with self._model_lock:
                items = list(script.respond(request))
            last = items[-1]
            assert isinstance(last, ModelTurn)
            return last, False
        if pos >= len(script.script):
            raise ModelError(f"the emulator's script has no turn {pos + 1}: it has {len(script.script)} turn(s)",
                             status=None, retryable=False)
        step = script.script[pos]
        spec = step(request.messages) if callable(step) else step
        timing: dict[str, Any] = {} if stream else {"stream": script.stream, "latency": script.latency,
                                                     "chunk_delay": script.chunk_delay}
        try:
            one = ScriptedModel([spec], chunk_size=script.chunk_size, name=script.name, **timing)
        except (TypeError, ValueError) as exc:  # a function's turn that is not one: name its place in the script
            raise type(exc)(str(exc).replace("script[0]", f"script[{pos}]()", 1)) from None
        try:
            items = list(one.respond(request))
        except StreamInterrupted:  # the script asks for a cut: encode the whole turn, then cut the bytes
            whole = ScriptedModel([{k: v for k, v in spec.items() if k != "interrupt"}], name=script.name)
            items = list(whole.respond(request))
            return _last_turn(items), True
        return _last_turn(items), False


def _last_turn(items: list[Any]) -> ModelTurn:
    turn = items[-1]
    assert isinstance(turn, ModelTurn)
    return turn
