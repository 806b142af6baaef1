"""Record a model's answers into a cassette file, and read one back (``ScriptedModel.replay`` plays it offline).

A teacher records a real run once, at home, with a key::

    rec = anb.Recorder(anb.model("openai:gpt-4o-mini"), "cassettes/weather.jsonl")
    anb.Loop(model=rec, tools=[get_weather]).start("Weather in Paris?").run()
    rec.close()

and replays it in a room without wifi, with the same stream items, the same turns and (optionally) the same
pacing::

    model = anb.ScriptedModel.replay("cassettes/weather.jsonl", timing="recorded")

Theory of operation. :class:`Recorder` wraps any :class:`~agentnb.Model` and sits at the model seam: for
every request it writes what the loop asked, then every stream item the model yielded (``TextDelta``,
``ArgumentsDelta``) and the final ``ModelTurn`` -- including the provider's raw response as the model
returned it -- or the error it raised, each with the offset in milliseconds from the start of the request.
When the wrapped model is an SDK-backed provider model (it reports its wire traffic through the public
hook ``on_wire``, :class:`agentnb.providers._base.WireObservable`), the recorder also listens there: the
JSON body that went to the provider and every raw stream event (or the whole response) the SDK handed
back, with its own offset. Those ``wire_*`` lines are for reading and teaching; replay does
not need them.

The cassette is JSON Lines, one object per line, each with a ``type``, the request index ``turn`` (0-based,
counting retried requests, as :class:`~agentnb.ScriptedModel` counts) and ``ms``:

==================  ==============================================================================
``cassette``        the header: format version, provider, model name, when and with what it was recorded
``request``         run id, the run's turn, finalize, tools, settings and the canonical messages: those
                    new since the run's previous request (``messages_from`` of ``message_count``)
``wire_request``    the provider request body (SDK models only)
``wire_event``      one raw stream event, as JSON (SDK models only)
``wire_response``   the whole raw response of a non-streamed request (SDK models only)
``text``            a ``TextDelta``: ``fragment``
``arguments``       an ``ArgumentsDelta``: ``index``, ``fragment``, ``call_id``, ``name``
``turn``            the final ``ModelTurn`` (message, finish reasons, usage, response id, ``raw``)
``error``           the exception the model raised: class, message, HTTP status, retryable
==================  ==============================================================================

Secrets never reach the file: every line passes through :func:`agentnb._redact.redact` before it is written
(keys named like credentials, strings shaped like provider keys or bearer tokens, every credential the
wrapped model declares and the usual ``*_API_KEY`` environment variables). The secret parameters of the tools
offered (``SecretStr``, ``secret=[...]``) are masked in turns and in streamed fragments, which are held back
while they could still be the start of a secret (:class:`agentnb._redact.StreamRedactor`). Raw stream events
of a request are written when its turn is complete, so that pieces of a secret split across events are
masked too (:func:`agentnb._redact.redact_pieces`). Transport headers are never recorded at all. A cassette
therefore replays masked values: a tool that needs a secret argument gets ``[REDACTED]`` on replay.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pydantic import TypeAdapter

from ._messages import MESSAGE_ADAPTER, ModelTurn
from ._redact import (
    HoldsCredentials,
    RunSecrets,
    redact,
    redact_pieces,
    register_credentials,
    register_secret,
    shaped_values,
)
from ._request import ArgumentsDelta, ModelRequest, StreamItem, TextDelta
from .events import ToolInfo
from .exceptions import ModelError, StreamInterrupted
from .providers._base import Seekable, WireKind, WireObservable

__all__ = ["CASSETTE_VERSION", "Cassette", "RecordedRequest", "Recorder", "read_cassette"]

CASSETTE_VERSION = 1
"""The cassette format version written in the header line."""

_TURN_ADAPTER: TypeAdapter[ModelTurn] = TypeAdapter(ModelTurn)
_TOOL_ADAPTER: TypeAdapter[ToolInfo] = TypeAdapter(ToolInfo)


_TRANSPORT = frozenset({"sdk_http_response", "headers", "http_headers"})
"""Keys of transport metadata dropped from wire lines (response headers are not part of the API's answer)."""


def _jsonable(value: Any) -> Any:
    """Plain JSON data from dicts, lists, scalars and SDK objects (``model_dump``/``to_dict``); else ``repr``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):  # transport headers are never recorded (google-genai keeps them in the response)
        return {str(k): _jsonable(v) for k, v in value.items() if k not in _TRANSPORT}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _jsonable(dump(mode="json", exclude_unset=True, by_alias=True))
        except TypeError:
            return _jsonable(dump())
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _jsonable(to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    return repr(value)


class Recorder:
    """A model wrapper that records every request, stream item, final turn and error into a cassette.

    Use it wherever a model goes; the run is the same as without it (the recorder keeps the wrapped model's
    ``provider`` and ``name``). Lines are written and flushed as they happen, so a crash keeps what was
    recorded. Close it (or use it as a context manager) when done.

    Args:
        model: the model to record (a provider model, or any :class:`~agentnb.Model`).
        path: the cassette file (JSON Lines); overwritten.
        secrets: extra literal strings to mask, besides the ones :mod:`agentnb._redact` knows.
        wire: also record an SDK model's provider request bodies and raw stream events.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "weather.jsonl")
        >>> with anb.Recorder(anb.ScriptedModel.story("weather", stream=True), path) as rec:
        ...     run = anb.Loop(model=rec, tools=anb.stories.tools("weather")).start("Paris?", run_id="r1").run()
        >>> replay = anb.Loop(model=anb.ScriptedModel.replay(path), tools=anb.stories.tools("weather"))
        >>> replay.start("Paris?", run_id="r1").run().output == run.output
        True
    """

    def __init__(
        self, model: Any, path: str | Path, *, secrets: Iterable[str] = (), wire: bool = True
    ) -> None:
        if not callable(getattr(model, "respond", None)):
            raise TypeError(f"Recorder needs a model with respond(request), got {type(model).__name__}")
        self.model = model
        self.path = Path(path)
        self.provider: str = getattr(model, "provider", "?")
        self.name: str = getattr(model, "name", "?")
        self.secrets = [s for s in secrets if s]
        for secret in self.secrets:
            register_secret(secret)
        register_credentials(model)
        self._masks: dict[int, RunSecrets] = {}
        self._pending: dict[int, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._count = 0
        self._current: tuple[int, float] = (-1, 0.0)
        self._seen: dict[str, tuple[object, int]] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] | None = self.path.open("w", encoding="utf-8")
        self._untap: Callable[[], None] | None = None
        self._write({
            "type": "cassette", "version": CASSETTE_VERSION, "provider": self.provider, "model": self.name,
            "stream": getattr(model, "stream", None), "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "recorder": "agentnb.Recorder",
        })
        if wire and isinstance(model, WireObservable):
            self._untap = model.on_wire(self._on_wire)

    def __repr__(self) -> str:
        state = "closed" if self._fh is None else f"{self._count} requests"
        return f"Recorder({self.provider}:{self.name} -> {str(self.path)!r}, {state})"

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def requests(self) -> int:
        """How many requests were recorded."""
        return self._count

    def close(self) -> None:
        """Finish the cassette and give the wrapped model back untouched."""
        if self._untap is not None:
            self._untap()
            self._untap = None
        for k in list(self._pending):
            self._flush(k, secret=True)
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def credentials(self) -> list[str]:
        """The wrapped model's credentials and the extra ``secrets`` given (a loop registers them)."""
        held = self.model.credentials() if isinstance(self.model, HoldsCredentials) else []
        return list(dict.fromkeys([*held, *self.secrets]))

    def seek(self, run_id: str, position: int) -> None:
        """Pass a fork's or a resume's position on to the wrapped model, when it has one (a scripted model)."""
        if isinstance(self.model, Seekable):
            self.model.seek(run_id, position)

    # -- the seam ---------------------------------------------------------------------------------------

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        """Ask the wrapped model and record the request, then each item as the caller pulls it."""
        with self._lock:
            k = self._count
            self._count += 1
        t0 = time.perf_counter()
        self._current = (k, t0)
        self._masks[k] = RunSecrets.for_tools(request.tools)
        # A run's history only grows (HistoryView over one list) until compression replaces it: write only the
        # messages that are new since this run's previous request, so a long run's cassette stays linear.
        msgs = request.messages
        base = getattr(msgs, "_items", None)
        seen = self._seen.get(request.run_id)
        start = seen[1] if seen is not None and base is not None and seen[0] is base and seen[1] <= len(msgs) else 0
        self._seen[request.run_id] = (base, len(msgs))
        self._write({
            "type": "request", "turn": k, "ms": 0.0, "run_id": request.run_id, "run_turn": request.turn,
            "finalize": request.options.finalize, "message_count": len(msgs), "messages_from": start,
            "messages": [MESSAGE_ADAPTER.dump_python(msgs[i], mode="json") for i in range(start, len(msgs))],
            "tools": [_TOOL_ADAPTER.dump_python(t, mode="json") for t in request.tools],
            # the options under their setting names, as cassettes have always recorded what was asked
            "settings": _jsonable({**request.settings, **request.options.to_settings()}),
        })
        try:
            stream = iter(self.model.respond(request))
        except Exception as exc:
            self._error(k, t0, exc)
            raise
        return self._items(k, t0, stream)

    def _items(self, k: int, t0: float, stream: Iterator[StreamItem]) -> Iterator[StreamItem]:
        try:
            while True:
                try:
                    item = next(stream)
                except StopIteration:
                    return
                except Exception as exc:
                    self._error(k, t0, exc)
                    raise
                self._item(k, t0, item)
                yield item
        finally:
            close = getattr(stream, "close", None)
            if callable(close):
                close()
            self._flush(k, secret=True)
            self._masks.pop(k, None)

    def _item(self, k: int, t0: float, item: StreamItem) -> None:
        ms = _ms(t0)
        if isinstance(item, TextDelta):
            self._hold(k, {"type": "text", "turn": k, "ms": ms, "fragment": item.fragment})
        elif isinstance(item, ArgumentsDelta):
            self._hold(k, {"type": "arguments", "turn": k, "ms": ms, "index": item.index, "fragment": item.fragment,
                           "call_id": item.call_id, "name": item.name})
        elif isinstance(item, ModelTurn):
            # The copy written is masked; the turn the caller gets keeps its values (its run masks them itself).
            masks = self._masks.get(k) or RunSecrets({})
            shaped = [v for p in item.message.parts for v in shaped_values(_part_text(p))]
            message = masks.turn(item.message)
            self._flush(k, secret=bool(shaped) or message is not item.message, shaped=shaped)
            # the HTTP capture stays out (a cassette keeps no transport headers; its wire lines hold the bodies),
            # and a replay sends nothing over HTTP
            turn = dataclasses.replace(item, message=message, raw=redact(_jsonable(item.raw), masks.names(None)),
                                       wire=None)
            self._write({"type": "turn", "turn": k, "ms": ms, "response": _TURN_ADAPTER.dump_python(turn, mode="json")})
        else:
            self._write({"type": "unknown", "turn": k, "ms": ms, "repr": repr(item)})

    def _hold(self, k: int, line: dict[str, Any]) -> None:
        """Keep a streamed line until its turn is complete (and its secrets are known)."""
        self._pending.setdefault(k, []).append(line)

    def _flush(self, k: int, *, secret: bool, shaped: list[str] | None = None) -> None:
        """Write the held lines of request ``k`` in the order they came.

        When the request's turn held no secret they go as received, so a replay streams exactly the same
        fragments. Otherwise (or when the turn never completed) the fragments go through a stream redactor and
        the raw events are masked wherever they hold a piece of a secret.
        """
        lines = self._pending.pop(k, None)
        if not lines:
            return
        masks = self._masks.get(k) or RunSecrets({})
        masks.restart_streams()
        for line in lines:
            kind = line["type"]
            if secret and kind == "wire_event":
                line = redact_pieces(line, shaped or ())
            elif secret and kind == "text":
                line = {**line, "fragment": masks.fragment("text", None, line["fragment"])}
            elif secret and kind == "arguments":
                line = {**line, "fragment": masks.fragment(line["index"], line["name"], line["fragment"])}
            self._write(line)

    def _error(self, k: int, t0: float, exc: BaseException) -> None:
        self._flush(k, secret=True)
        self._write({
            "type": "error", "turn": k, "ms": _ms(t0), "error": type(exc).__name__,
            "interrupted": isinstance(exc, StreamInterrupted), "message": str(exc),
            "status": getattr(exc, "status", None), "retryable": getattr(exc, "retryable", None),
        })
        self._masks.pop(k, None)

    # -- the wire tap (SDK models) ------------------------------------------------------------------------

    def _on_wire(self, kind: WireKind, payload: Any) -> None:
        k, t0 = self._current
        if kind == "request":
            self._write({"type": "wire_request", "turn": k, "ms": _ms(t0), "body": _jsonable(payload)})
            return
        names = self._masks[k].names(None) if k in self._masks else frozenset()
        if kind == "response":
            self._write({"type": "wire_response", "turn": k, "ms": _ms(t0), "body": redact(_jsonable(payload), names)})
            return
        # a raw stream event: written with the turn, once its secrets are known
        self._hold(k, {"type": "wire_event", "turn": k, "ms": _ms(t0), "event": redact(_jsonable(payload), names)})

    def _write(self, line: dict[str, Any]) -> None:
        text = json.dumps(redact(line), ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            if self._fh is None:
                raise ValueError(f"the recorder for {self.path} is closed; make a new Recorder to record again")
            self._fh.write(text + "\n")
            self._fh.flush()


def _part_text(part: Any) -> str:
    """The text of a part that can carry a secret by its shape (text, refusal, call arguments)."""
    kind = getattr(part, "kind", "")
    if kind in ("text", "refusal"):
        return str(part.text)
    if kind == "tool_call":
        return str(part.arguments_raw)
    return ""


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


# -- reading and replaying ------------------------------------------------------------------------------


@dataclasses.dataclass
class RecordedRequest:
    """One recorded request: what was asked, and the lines that answered it, in order."""

    index: int
    run_id: str
    request: dict[str, Any]
    items: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """``text``, ``arguments``, ``turn`` and ``error`` lines (the ones replay plays)."""
    wire: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """``wire_request``, ``wire_event`` and ``wire_response`` lines."""


@dataclasses.dataclass
class Cassette:
    """A cassette file read back: its header and its requests in the order they were made."""

    path: Path
    header: dict[str, Any]
    requests: list[RecordedRequest]

    @property
    def run_ids(self) -> list[str]:
        """The recorded runs, in the order they first asked."""
        return list(dict.fromkeys(r.run_id for r in self.requests))

    def for_run(self, run: str | int | None) -> list[RecordedRequest]:
        """The requests of one recorded run (by id or position); ``None`` when the cassette holds one run."""
        ids = self.run_ids
        if run is None:
            if len(ids) > 1:
                raise ValueError(
                    f"cassette {self.path} holds {len(ids)} runs ({', '.join(ids)}); choose one with run=<id or index>"
                )
            return list(self.requests)
        if isinstance(run, int):
            if not -len(ids) <= run < len(ids):
                raise ValueError(f"cassette {self.path} holds {len(ids)} run(s); run={run} is out of range")
            run = ids[run]
        if run not in ids:
            raise ValueError(f"cassette {self.path} has no run {run!r}; runs: {', '.join(ids) or '(none)'}")
        return [r for r in self.requests if r.run_id == run]


def read_cassette(path: str | Path) -> Cassette:
    """Read a cassette written by :class:`Recorder`.

    Raises:
        ValueError: naming the line, when the file is not a cassette or a line is not valid JSON.
    """
    path = Path(path)
    header: dict[str, Any] | None = None
    requests: dict[int, RecordedRequest] = {}
    with path.open(encoding="utf-8") as fh:
        for n, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"cassette {path} line {n}: not JSON ({exc})") from None
            kind = line.get("type") if isinstance(line, dict) else None
            if header is None:
                if kind != "cassette":
                    raise ValueError(f"cassette {path} line {n}: expected the cassette header, got {kind!r}")
                if line.get("version") != CASSETTE_VERSION:
                    raise ValueError(f"cassette {path}: format version {line.get('version')!r}, this agentnb reads "
                                     f"version {CASSETTE_VERSION}")
                header = line
            elif kind == "request":
                requests[line["turn"]] = RecordedRequest(line["turn"], line.get("run_id", ""), line)
            elif kind in ("text", "arguments", "turn", "error"):
                requests[line["turn"]].items.append(line)
            elif kind in ("wire_request", "wire_event", "wire_response"):
                requests[line["turn"]].wire.append(line)
    if header is None:
        raise ValueError(f"cassette {path} is empty")
    return Cassette(path, header, [requests[k] for k in sorted(requests)])


def cassette_item(line: dict[str, Any]) -> StreamItem:
    kind = line["type"]
    if kind == "text":
        return TextDelta(line["fragment"])
    if kind == "arguments":
        return ArgumentsDelta(line["index"], line["fragment"], line.get("call_id"), line.get("name"))
    return _TURN_ADAPTER.validate_python(line["response"])


def cassette_exception(line: dict[str, Any]) -> Exception:
    message = line.get("message", "")
    if line.get("interrupted"):
        return StreamInterrupted(message)
    if line.get("status") is not None or line.get("error") in ("ModelError", "ProviderError", "WireFormatError"):
        return ModelError(message, status=line.get("status"), retryable=line.get("retryable"))
    cls = getattr(builtins, str(line.get("error")), None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls(message)
    return ModelError(message, status=line.get("status"), retryable=line.get("retryable"))
