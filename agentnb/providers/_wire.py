"""Helpers shared by the wire adapters: input normalization, the per-call argument buffer, settings.

Nothing here knows a provider's format; each adapter module does. What is shared is the discipline:

- every input (a whole response or one stream event) is turned into a plain ``dict`` first, whether it
  came as a dict decoded from JSON or as an SDK object (``model_dump()`` / ``to_dict()``);
- a streamed call's argument text is kept as a list of fragments and joined once, when the provider's done
  signal for that call arrives, so assembly is linear in the stream size; the byte count per call is capped;
- failures of the event source itself (a dropped connection) end the stream; the adapter then reports an
  incomplete turn in which nothing is executable, rather than raising. Each adapter pulls events with
  ``next()`` in its own loop (not through a wrapping generator: on a 1 MB argument in 8-byte fragments, one
  more generator layer per event is a measurable share of the time), letting agentnb's own errors through.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .._messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from .._request import OPTION_SETTINGS
from ..exceptions import AgentnbError, ArgumentsTooLarge, StreamProtocolError, WireFormatError

DEFAULT_MAX_ARGUMENT_BYTES = 1 << 20
"""The default cap on one call's streamed argument bytes (1 MiB)."""

def as_dict(obj: Any, what: str) -> dict[str, Any]:
    """A plain dict from a decoded JSON object or an SDK object (pydantic ``model_dump`` or ``to_dict``)."""
    if type(obj) is dict:
        return obj
    if isinstance(obj, dict):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            value = dump(mode="json", exclude_unset=True, by_alias=True)
        except TypeError:  # a model_dump without these options
            value = dump()
        if isinstance(value, dict):
            return value
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        value = to_dict()
        if isinstance(value, dict):
            return value
    if isinstance(obj, str | bytes):
        try:
            value = json.loads(obj)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    raise WireFormatError(f"{what} is not a JSON object or an SDK object: {type(obj).__name__} {obj!r:.120}")


def loads_object(raw: str) -> dict[str, Any] | None:
    """The parsed arguments when ``raw`` is a JSON object, else ``None`` (malformed text is never repaired)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def wire_arguments(part: ToolCallPart) -> str:
    """A call's argument text as it goes back to a provider: the model's own text when it is a JSON object.

    Arguments that are not a JSON object (malformed text, ``[]``, ``"x"``) are sent as ``{}``: OpenAI-compatible
    servers ``json.loads`` the arguments of every earlier call and refuse the whole request otherwise, so one
    bad call would poison every later request of the conversation. The raw text stays in the transcript and
    in the error result that tells the model what was wrong; only the wire copy changes.

    Example:
        >>> wire_arguments(ToolCallPart(call_id="c", name="f", arguments_raw='{"a": 1,'))
        '{}'
    """
    raw = part.arguments_raw
    if loads_object(raw) is not None:
        return raw
    return dumps(part.arguments) if part.arguments is not None else "{}"


def dumps(value: Any) -> str:
    """Compact JSON text, non-ASCII kept (the form our adapters use for arguments they serialize)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class CallBuffer:
    """One streamed call: its ids, name and argument fragments, joined once when it is done."""

    __slots__ = ("call_id", "chunks", "done", "extra", "final", "limit", "name", "position", "provider_id", "size",
                 "wire_index")

    def __init__(self, position: int, wire_index: Any, call_id: str, name: str, limit: int) -> None:
        self.position = position
        self.wire_index = wire_index
        self.call_id = call_id
        self.name = name
        self.limit = limit
        self.chunks: list[str] = []
        self.size = 0
        self.done = False
        self.final: str | None = None
        self.provider_id: str | None = None
        self.extra: dict[str, Any] | None = None

    def add(self, fragment: str) -> None:
        """Append one fragment; raise :class:`ArgumentsTooLarge` past the cap."""
        self.size += len(fragment) if fragment.isascii() else len(fragment.encode("utf-8", "surrogatepass"))
        if self.size > self.limit:
            raise ArgumentsTooLarge(call_id=self.call_id, name=self.name, limit=self.limit)
        self.chunks.append(fragment)

    def text(self) -> str:
        """The merged argument text (joined once and kept)."""
        if self.final is None or len(self.chunks) > 1:
            joined = "".join(self.chunks)
            self.chunks = [joined]
            self.final = joined
        return self.final

    def restated(self, full: Any, where: str) -> None:
        """Check a done event that repeats the whole argument text against the merged fragments."""
        if not isinstance(full, str):
            return
        if not self.chunks:  # nothing streamed: the done event is the only copy
            self.add(full)
            return
        if self.text() != full:
            raise StreamProtocolError(
                f"{where} for call {self.call_id or '?'} ({self.name}) restates arguments that differ from the "
                f"streamed fragments ({len(full)} vs {len(self.text())} characters)"
            )

    def part(self, *, executable: bool, empty_is_object: bool = False, **kw: Any) -> ToolCallPart:
        """The canonical call; ``arguments`` is ``None`` unless the done signal came and the text is an object."""
        raw = self.text()
        if empty_is_object and raw == "" and self.done:
            parsed: dict[str, Any] | None = {}
        else:
            parsed = loads_object(raw) if executable and self.done else None
        return ToolCallPart(
            call_id=self.call_id, name=self.name, arguments_raw=raw, arguments=parsed,
            index=self.wire_index if isinstance(self.wire_index, int) else self.position,
            provider_id=self.provider_id, **kw,
        )


def check_id(buf: CallBuffer, call_id: Any, where: str) -> None:
    """A second id for a call already open under the same index is a protocol error, not a merge."""
    if call_id and buf.call_id and call_id != buf.call_id:
        raise StreamProtocolError(
            f"{where}: call id {call_id!r} arrived under an index already taken by call {buf.call_id!r}"
        )
    if call_id and not buf.call_id:
        buf.call_id = call_id


def source_error(exc: Exception) -> str:
    """The incomplete reason for an event source that raised (a dropped connection, a read timeout)."""
    return f"the event source raised {type(exc).__name__}: {exc}"


class EventSource:
    """Iterate a stream's raw events; a source that breaks ends the iteration and leaves ``error`` set.

    agentnb's own errors (a protocol error, the byte cap) pass through; anything else the source raises (a
    dropped connection, a read timeout) ends the turn there, incomplete, with ``error`` as its reason.
    """

    __slots__ = ("_events", "error")

    def __init__(self, events: Iterable[Any]) -> None:
        self._events = events
        self.error: str | None = None

    def __iter__(self) -> Iterator[Any]:
        it = iter(self._events)
        while True:
            try:
                ev = next(it)
            except StopIteration:
                return
            except AgentnbError:
                raise
            except Exception as exc:  # the connection broke: the turn ends here, incomplete
                self.error = source_error(exc)
                return
            yield ev


def is_done_sentinel(event: Any) -> bool:
    """Whether a stream item is OpenAI's ``[DONE]`` sentinel (passed as the raw ``data:`` text)."""
    return isinstance(event, str | bytes) and event.strip() in ("[DONE]", b"[DONE]")


def system_and_rest(messages: Sequence[Message], provider: str) -> tuple[str | None, list[Message]]:
    """Split leading system messages (joined by blank lines) from the rest of the conversation."""
    system: list[str] = []
    rest: list[Message] = []
    for m in messages:
        if m.role == "system":
            if rest:
                raise ValueError(
                    f"{provider} takes the system prompt apart from the conversation: put system messages "
                    "at the start of the conversation"
                )
            system.append(m.text)
        else:
            rest.append(m)
    return ("\n\n".join(system) if system else None), rest


def own_reasoning(part: Any, provider: str) -> bool:
    """Whether ``part`` is continuation data of ``provider`` (other providers' data is never sent)."""
    return isinstance(part, ReasoningPart) and part.provider == provider


def own_data(part: TextPart | ToolCallPart, provider: str) -> dict[str, Any]:
    """The per-part opaque data ``provider`` left on a part, or an empty dict."""
    data = part.provider_data
    if not data:
        return {}
    return data.get(provider) or {}


def result_is_error(result: ToolResultPart) -> bool:
    """Whether a result is an error for the model (anything but ``ok``: error, denied, skipped, timeout)."""
    return result.status != "ok"


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with local ``$ref`` to ``$defs``/``definitions`` inlined and the definitions dropped.

    Raises:
        ValueError: for a recursive schema (it cannot be inlined) or a ``$ref`` that is not local.
    """
    defs: dict[str, Any] = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if not ref.startswith(("#/$defs/", "#/definitions/")) or name not in defs:
                raise ValueError(f"cannot inline $ref {ref!r}: only local #/$defs references are supported")
            if name in seen:
                raise ValueError(f"cannot inline the recursive schema {name!r} for this provider")
            merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
            return walk(merged, (*seen, name))
        return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    out = walk(schema, ())
    assert isinstance(out, dict)
    return out


def split_settings(settings: dict[str, Any], known: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings this adapter maps itself, and the rest (passed through into the body as given).

    Raises:
        ValueError: for a request option given as a setting (``tool_choice``, ...): it is rendered from the
            typed ``request_options``, and passing it through raw would put an unchecked value on the wire.
    """
    options = [k for k in OPTION_SETTINGS if k in settings]
    if options:
        raise ValueError(f"{', '.join(options)} is a request option, not a setting: pass "
                         f"request_options=RequestOptions(...) (agentnb._request.split_options reads a settings dict)")
    known_set = set(known)
    mine = {k: v for k, v in settings.items() if k in known_set}
    rest = {k: v for k, v in settings.items() if k not in known_set and k != "extra"}
    extra = settings.get("extra") or {}
    if not isinstance(extra, dict):
        raise ValueError("settings['extra'] must be a dict merged into the request body")
    return mine, {**rest, **extra}
