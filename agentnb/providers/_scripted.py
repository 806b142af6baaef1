r"""ScriptedModel: the offline model that makes agentnb work with no key and no network.

A script is a list of turns. Each turn is plain data (so a teacher can keep a script in a JSON file) or a
function of the conversation so far that returns such data (so a script can use the tool results it got)::

    {"text": "It is 3."}                                    # an answer
    {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}   # one or several calls
    {"tool_calls": [{"name": "add", "arguments": "{\\"a\\": 1,", "id": "call_x"}]}  # raw (malformed) JSON
    {"refusal": "I can't help with that."}                  # a refusal
    {"text": "The answer is", "finish": "length"}           # a max-tokens cut
    {"error": {"status": 429, "message": "rate limited"}}   # an API error (retryable by status)
    {"text": "partial", "interrupt": True}                  # a stream that breaks before its done signal

Optional keys: ``"usage": {"input_tokens": .., "output_tokens": ..}`` (otherwise estimated at four characters
a token), ``"reasoning": "..."`` (an opaque reasoning part tagged ``scripted``).

Where a run is in the script. Within a run the model answers the *k*-th request with the next turn, counting
retried requests, so ``[{"error": {"status": 500}}, {"text": "ok"}]`` fails once and then answers. Where a
run *begins* is a function of the conversation it is given: every text and call part the model makes carries
its script position (``provider_data={"scripted": {"turn": k}}``, which no wire adapter sends), and a run's
first request continues after the last position in its history. So ``run.follow_up(...)`` goes on with the
next turn of the script instead of playing the first conversation again, while a fresh start, or a fork of a
history without later turns, replays from where that history stands (from the start for a new prompt). One
instance can serve many runs at once; each run has its own place.

:class:`ReplayedModel` (``ScriptedModel.replay(path)``) is a scripted model whose script is a cassette that
:class:`agentnb.Recorder` wrote (read by :func:`agentnb._recorder.read_cassette`): it lives here, beside the
constructor that makes it, so that neither module imports the other back.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from .._messages import (
    MESSAGE_ADAPTER,
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
from .._recorder import cassette_exception, cassette_item, read_cassette
from .._request import ArgumentsDelta, ModelRequest, StreamItem, TextDelta
from ..exceptions import ModelError, ReplayDiverged, StreamInterrupted
from ..stories import script

TurnSpec = dict[str, Any]
ScriptStep = TurnSpec | Callable[[Sequence[Message]], TurnSpec]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "refusal": "refusal",
    "content_filter": "content_filter",
    "error": "error",
}
_KNOWN_KEYS = {"text", "tool_calls", "refusal", "finish", "error", "usage", "interrupt", "reasoning"}


def _check_spec(spec: Any, where: str) -> TurnSpec:
    if not isinstance(spec, dict):
        raise TypeError(f"{where}: a scripted turn is a dict (or a function returning one), got {type(spec).__name__}")
    unknown = set(spec) - _KNOWN_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; known keys are {sorted(_KNOWN_KEYS)}")
    for i, call in enumerate(spec.get("tool_calls") or []):
        if not isinstance(call, dict) or "name" not in call:
            raise ValueError(f"{where}: tool_calls[{i}] needs at least a 'name'")
        args = call.get("arguments", {})
        if not isinstance(args, str):
            try:
                json.dumps(args, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError) as exc:  # int() refuses 4,300 digits; a cycle; a set
                raise ValueError(f"{where}: tool_calls[{i}]'s arguments cannot be written as JSON "
                                 f"({str(exc).split(';')[0]}); give JSON text or JSON values") from None
    return spec


def _chars(m: Message) -> int:
    n = 0
    for p in m.parts:
        if isinstance(p, TextPart | RefusalPart):
            n += len(p.text)
        elif isinstance(p, ToolCallPart):
            n += len(p.name) + len(p.arguments_raw)
        elif isinstance(p, ToolResultPart):
            n += len(p.content)
    return n


_MARK = "scripted"
"""The ``provider_data`` key of the script position a scripted part carries."""


def continues_at(messages: Sequence[Message], name: str | None = None) -> int:
    """The script position after the last scripted turn in ``messages`` (0 when there is none).

    ``name``: count only the turns of the scripted model of that name (a fallback chain may hold two).

    Example:
        >>> first = ScriptedModel([{"text": "one"}, {"text": "two"}])
        >>> run = __import__("agentnb").Loop(model=first).start("Hi").run()
        >>> continues_at(run.messages)
        1
    """
    for m in reversed(messages):
        if m.role != "assistant":
            continue
        for p in m.parts:
            data = getattr(p, "provider_data", None)
            mark = data.get(_MARK) if data else None
            if isinstance(mark, dict) and isinstance(mark.get("turn"), int) and name in (None, mark.get("model")):
                return int(mark["turn"]) + 1
    return 0


def _compile(spec: TurnSpec, pos: int, provider: str, name: str) -> tuple[Message, str, int]:
    """The assistant message, raw finish reason and output size of a turn spec (built once per static turn)."""
    parts: list[Any] = []
    mark = {_MARK: {"turn": pos, "model": name}}
    if spec.get("reasoning"):
        parts.append(ReasoningPart(provider=provider, text=str(spec["reasoning"])))
    if spec.get("text"):
        parts.append(TextPart(text=str(spec["text"]), provider_data=mark))
    if spec.get("refusal"):
        parts.append(RefusalPart(text=str(spec["refusal"])))
    calls = spec.get("tool_calls") or []
    for i, call in enumerate(calls):
        args = call.get("arguments", {})
        raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        parsed: dict[str, Any] | None
        try:
            loaded = json.loads(raw)
            parsed = loaded if isinstance(loaded, dict) else None
        except ValueError:
            parsed = None
        call_id = call["id"] if "id" in call else f"call_{pos + 1}_{i + 1}"
        parts.append(
            ToolCallPart(call_id=call_id or "", name=call["name"], arguments_raw=raw, arguments=parsed, index=i,
                         provider_data=mark)
        )
    finish_raw = spec.get("finish") or ("tool_calls" if calls else "refusal" if spec.get("refusal") else "stop")
    message = Message(role="assistant", parts=tuple(parts))
    return message, str(finish_raw), _chars(message)


class ScriptedModel:
    """A deterministic model that plays a script: for workshops, tests, docs, and anything offline.

    Args:
        script: the turns, as dicts or functions ``(messages) -> dict`` (see the module docs).
        stream: split text and arguments into fragments, so ``TextMerged``/``ArgumentsMerged`` events happen.
        chunk_size: characters per simulated fragment.
        latency: seconds to wait before each answer (simulated time to first token).
        chunk_delay: seconds to wait between fragments when streaming.
        name: the model name shown in transcripts.

    Example:
        >>> import agentnb as anb
        >>> @anb.tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> model = anb.ScriptedModel([
        ...     {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
        ...     lambda messages: {"text": f"It is {messages[-1].tool_results[0].content}."},
        ... ])
        >>> anb.Loop(model=model, tools=[add]).start("What is 1 + 2?").run().output
        'It is 3.'
    """

    provider = "scripted"

    def __init__(
        self,
        script: Sequence[ScriptStep],
        *,
        stream: bool = False,
        chunk_size: int = 8,
        latency: float = 0.0,
        chunk_delay: float = 0.0,
        name: str = "scripted",
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        self.script: list[ScriptStep] = [
            s if callable(s) else _check_spec(s, f"script[{i}]") for i, s in enumerate(script)
        ]
        self.stream = stream
        self.chunk_size = chunk_size
        self.latency = latency
        self.chunk_delay = chunk_delay
        self.name = name
        self._compiled = {i: _compile(s, i, self.provider, name) for i, s in enumerate(self.script) if not callable(s)}
        self._position: dict[str, int] = {}
        self._seeked: set[str] = set()
        self._token_cache: dict[str, tuple[int, int, int]] = {}
        self._tools_seen: object = None
        self._tools_chars = 0

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.script)} turns, stream={self.stream})"

    @classmethod
    def from_json(cls, path: str | Path, **options: Any) -> ScriptedModel:
        """Load a script (a JSON list of turns) from a file."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if isinstance(data, dict):
            options = {**data.get("options", {}), **options}
            data = data["script"]
        return cls(data, **options)

    @classmethod
    def story(cls, name: str, **options: Any) -> ScriptedModel:
        """A named story that ships with agentnb; see :func:`agentnb.stories.names` for the list.

        Example:
            >>> ScriptedModel.story("weather")
            ScriptedModel(2 turns, stream=False)
        """
        return cls(script(name), name=f"story:{name}", **options)

    @classmethod
    def replay(
        cls, path: str | Path, *, timing: Literal["none", "recorded"] = "none", speed: float = 1.0,
        run: str | int | None = None, strict: bool = False,
    ) -> ScriptedModel:
        """A model that plays back a cassette recorded with :class:`agentnb.Recorder`, offline.

        Every request gets the recorded answer: the same stream items, the same final turn (message, finish
        reasons, usage, response id, raw response) or the same error, under the recorded provider and model
        name. Each run starts from the first recorded request.

        Args:
            path: the cassette file.
            timing: ``"none"`` plays at once; ``"recorded"`` waits before each item until its recorded offset.
            speed: with ``timing="recorded"``, play this many times faster (2.0: half the waits).
            run: which recorded run to play (its run id, or its position) when the cassette holds several.
            strict: a request that differs from the recorded one (messages by content, or the tools offered)
                fails the run with :class:`agentnb.exceptions.ReplayDiverged`; by default the recorded answer is
                played and a :class:`ReplayDivergenceWarning` names the first difference, once
                per run.

        Example:
            >>> model = ScriptedModel.replay("cassettes/weather.jsonl", timing="recorded")  # doctest: +SKIP
        """
        return ReplayedModel(path, timing=timing, speed=speed, run=run, strict=strict)

    def seek(self, run_id: str, position: int) -> None:
        """Make run ``run_id`` continue from script turn ``position`` (0-based); used when a run is forked.

        The run never goes back before the position its conversation has reached (see the module docs).
        """
        self._position[run_id] = position
        self._seeked.add(run_id)

    def credentials(self) -> list[str]:
        """None: a scripted model holds no key."""
        return []

    def _next(self, request: ModelRequest) -> int:
        """The script position of this request: the run's next one, or where its conversation stands."""
        run_id = request.run_id
        pos = self._position.get(run_id)
        if pos is None:
            pos = continues_at(request.messages, self.name)
        elif run_id in self._seeked:
            self._seeked.discard(run_id)
            pos = max(pos, continues_at(request.messages, self.name))
        self._position[run_id] = pos + 1
        return pos

    # -- the seam ---------------------------------------------------------------------------------------

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        """Answer the run's next request with the next turn of the script."""
        pos = self._next(request)
        if pos >= len(self.script):
            raise ModelError(
                f"ScriptedModel has no turn {pos + 1}: the script has {len(self.script)} turn(s)",
                status=None,
                retryable=False,
            )
        step = self.script[pos]
        spec = _check_spec(step(request.messages), f"script[{pos}]()") if callable(step) else step
        if self.latency:
            time.sleep(self.latency)
        if "error" in spec:
            err = spec["error"] or {}
            status = err.get("status")
            raise ModelError(err.get("message") or f"scripted API error (HTTP {status})", status=status)
        turn = self._turn(spec, request, pos)
        if self.stream:
            return self._fragments(turn, bool(spec.get("interrupt")))
        if spec.get("interrupt"):
            raise StreamInterrupted("the scripted response was cut off")
        return iter((turn,))

    def _fragments(self, turn: ModelTurn, interrupt: bool) -> Iterator[StreamItem]:
        fragments: list[StreamItem] = []
        text = turn.message.text
        size = self.chunk_size
        fragments.extend(TextDelta(text[i : i + size]) for i in range(0, len(text), size))
        for index, call in enumerate(turn.message.tool_calls):
            raw = call.arguments_raw
            chunks = [raw[i : i + size] for i in range(0, len(raw), size)] or [""]
            for k, chunk in enumerate(chunks):
                first = k == 0
                fragments.append(
                    ArgumentsDelta(index, chunk, call.call_id if first else None, call.name if first else None)
                )
        cut = len(fragments) // 2 if interrupt else None
        for i, item in enumerate(fragments):
            if cut is not None and i == cut:
                raise StreamInterrupted("the scripted stream broke before its done signal")
            if self.chunk_delay:
                time.sleep(self.chunk_delay)
            yield item
        if cut is not None:
            raise StreamInterrupted("the scripted stream broke before its done signal")
        yield turn

    def _turn(self, spec: TurnSpec, request: ModelRequest, pos: int) -> ModelTurn:
        compiled = self._compiled.get(pos) if spec is self.script[pos] else None
        if compiled is None:
            compiled = _compile(spec, pos, self.provider, self.name)
        message, finish_raw, out_chars = compiled
        usage = spec.get("usage")
        return ModelTurn(
            message=message,
            provider=self.provider,
            model=self.name,
            response_id=f"scripted-{pos + 1}",
            finish_reason_raw=finish_raw,
            finish_reason=_FINISH.get(finish_raw, "other"),
            usage=Usage(**usage) if usage else self._estimate(request, out_chars),
            raw=spec,
        )

    def _estimate(self, request: ModelRequest, out_chars: int) -> Usage:
        # Incremental over the append-only history, so a long run is not quadratic in its length.
        msgs = request.messages
        base = getattr(msgs, "_items", msgs)
        cached = self._token_cache.get(request.run_id)
        if cached is None or cached[2] != id(base) or cached[0] > len(msgs):
            count, chars = 0, 0
        else:
            count, chars = cached[0], cached[1]
        for i in range(count, len(msgs)):
            chars += _chars(msgs[i])
        self._token_cache[request.run_id] = (len(msgs), chars, id(base))
        tools = request.tools
        if tools is not self._tools_seen:
            self._tools_seen = tools
            self._tools_chars = sum(len(t.name) + len(t.description) + len(str(t.parameters)) for t in tools)
        return Usage(input_tokens=(chars + self._tools_chars) // 4 + 1, output_tokens=out_chars // 4 + 1)


class ReplayedModel(ScriptedModel):
    """A :class:`~agentnb.ScriptedModel` that plays a cassette; make one with :meth:`ScriptedModel.replay`.

    Each run plays the recorded requests from the first (a fork or a resume continues where ``seek`` puts
    it), with the recorded stream items, turns and errors, under the recorded provider and model name.
    ``timing="recorded"`` waits before each item until its recorded offset (divided by ``speed``).
    """

    def __init__(
        self, path: str | Path, *, timing: Literal["none", "recorded"] = "none", speed: float = 1.0,
        run: str | int | None = None, strict: bool = False,
    ) -> None:
        if timing not in ("none", "recorded"):
            raise ValueError(f"timing must be 'none' or 'recorded', got {timing!r}")
        if speed <= 0:
            raise ValueError("speed must be positive")
        cassette = read_cassette(path)
        self.cassette = cassette
        self.recorded = cassette.for_run(run)
        super().__init__([], stream=bool(cassette.header.get("stream")), name=str(cassette.header.get("model")))
        self.provider = str(cassette.header.get("provider"))
        self.timing = timing
        self.speed = speed
        self.strict = strict
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return (f"ReplayedModel({self.provider}:{self.name}, {len(self.recorded)} turns from "
                f"{self.cassette.path.name!r}, timing={self.timing!r})")

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        """Answer the run's next request with the next recorded answer."""
        pos = self._position.get(request.run_id, 0)
        self._position[request.run_id] = pos + 1
        if pos >= len(self.recorded):
            raise ModelError(
                f"the cassette {self.cassette.path.name} has no request {pos + 1}: it recorded {len(self.recorded)}. "
                "The run went further than the recording did.",
                status=None, retryable=False,
            )
        diverged = self._divergence(pos, request)
        if diverged is not None:
            message = (f"the cassette {self.cassette.path.name} was recorded for another conversation: at request "
                       f"{pos + 1}, {diverged}. The recorded answer is played anyway.")
            if self.strict:
                raise ReplayDiverged(message.replace(" The recorded answer is played anyway.", ""))
            if request.run_id not in self._warned:  # once per run: the first difference is the one that matters
                self._warned.add(request.run_id)
                warnings.warn(message, ReplayDivergenceWarning, stacklevel=2)
        lines = self.recorded[pos].items
        if lines and lines[0]["type"] == "error":  # the model failed before its stream began
            self._wait(time.perf_counter(), lines[0])
            raise cassette_exception(lines[0])
        return self._play(lines)

    def _divergence(self, pos: int, request: ModelRequest) -> str | None:
        """The first difference between this request and the recorded one (messages by content, tool names)."""
        history: list[Any] = []
        for rec in self.recorded[: pos + 1]:  # a recorded request holds the messages new since the previous one
            line = rec.request
            history = history[: int(line.get("messages_from", 0))] + list(line.get("messages", []))
        recorded_tools = sorted(str(t.get("name")) for t in self.recorded[pos].request.get("tools", []))
        tools = sorted(t.name for t in request.tools)
        if tools != recorded_tools:
            return f"the tools offered are {tools}, the recording offered {recorded_tools}"
        now = [_content(MESSAGE_ADAPTER.dump_python(m, mode="json")) for m in request.messages]
        then = [_content(m) for m in history]
        for i, (a, b) in enumerate(zip(now, then, strict=False)):
            if a != b:
                return f"message {i + 1} ({a[0]}) is {_short(a[1])}, the recording had {_short(b[1])}"
        if len(now) != len(then):
            return f"the conversation has {len(now)} messages, the recording had {len(then)}"
        return None

    def _play(self, lines: list[dict[str, Any]]) -> Iterator[StreamItem]:
        t0 = time.perf_counter()
        for line in lines:
            self._wait(t0, line)
            if line["type"] == "error":
                raise cassette_exception(line)
            yield cassette_item(line)

    def _wait(self, t0: float, line: dict[str, Any]) -> None:
        if self.timing == "recorded":
            delay = t0 + float(line.get("ms", 0.0)) / 1000 / self.speed - time.perf_counter()
            if delay > 0:
                time.sleep(delay)


class ReplayDivergenceWarning(UserWarning):
    """A replayed cassette was asked something other than what it recorded (its answers may not fit)."""


def _content(message: dict[str, Any]) -> tuple[str, list[tuple[Any, ...]]]:
    """A message by what it says: role, texts, call names and arguments, result contents.

    Ids and opaque provider data are left out: a replay's generated call ids differ from the recording's.
    """
    parts: list[tuple[Any, ...]] = []
    for p in message.get("parts", []):
        kind = p.get("kind")
        if kind in ("text", "refusal"):
            parts.append((kind, p.get("text")))
        elif kind == "tool_call":
            parts.append((kind, p.get("name"), p.get("arguments_raw") if p.get("arguments") is None
                          else json.dumps(p.get("arguments"), sort_keys=True)))
        elif kind == "tool_result":
            parts.append((kind, p.get("name"), p.get("status"), p.get("content")))
    return str(message.get("role")), parts


def _short(parts: list[tuple[Any, ...]]) -> str:
    text = " ".join(str(x) for part in parts for x in part[1:] if x is not None)
    return repr(text if len(text) <= 80 else text[:77] + "...")
