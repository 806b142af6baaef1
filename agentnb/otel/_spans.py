"""Spans from anywhere as one plain record, and OTLP/JSON in and out.

:func:`read_spans` accepts what people have: the SDK's finished spans (``InMemorySpanExporter`` or the list
it returns), an OTLP/JSON document (``{"resourceSpans": [...]}``, the body of an OTLP/HTTP JSON export and
the line format of the Collector's file exporter), its text, or a path to a file of one or more such
documents (JSON Lines included). :func:`to_otlp_json` writes SDK spans as that document, with the OTLP/JSON
encoding rules: hex trace and span ids, 64-bit integers as strings, attribute values as ``AnyValue``.

Reading trusts nothing in a document (:mod:`agentnb.otel._otlp` finds the spans in it): each field of a span is
checked for its type, and what cannot be read is left out with a note (:class:`Reading`) -- an attribute
that is not an ``AnyValue``, or nests deeper than :data:`MAX_DEPTH`; a whole span when it has no ``spanId``, a
start that is not a time, or a span id already given. A value that has the wrong type but a clear meaning is
read (an integer id, a float time), and one with no reading is defaulted and noted (an unknown status code
is ``UNSET``). Text that is not a trace at all is a :class:`~agentnb.TranscriptError`.
"""

from __future__ import annotations

import base64
import math
import re
import reprlib
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._redact import redact
from ..exceptions import TranscriptError
from ._otlp import Notes, file_lines, kind_of, path_of, text_chunks, text_of, walk_lines, walk_objects

_KINDS = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]
_STATUS = ["UNSET", "OK", "ERROR"]


@dataclass(slots=True)
class SpanRecord:
    """One span, whatever it was read from."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    kind: str = "INTERNAL"
    status: str = "UNSET"
    """``UNSET``, ``OK`` or ``ERROR``."""
    status_message: str | None = None
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    """``(name, time in ns, attributes)`` of the span's events."""

    @property
    def operation(self) -> str:
        """``gen_ai.operation.name``, or the first word of the span name when the attribute is missing."""
        op = self.attributes.get("gen_ai.operation.name")
        return str(op) if op else (self.name.split(" ", 1)[0] if self.name else "")


# -- reading -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Reading:
    """The spans read from a source, and what was left out or repaired on the way (see :class:`Notes`)."""

    spans: list[SpanRecord]
    notes: Notes


def read_spans(source: Any) -> list[SpanRecord]:
    """Every span in ``source`` (see the module docstring for what it may be), secrets redacted.

    A span that cannot be read (a start time that is not a time, no ``spanId``, an id given twice) is left out,
    and a field that cannot be read is dropped; :func:`agentnb.import_trace` says which in what it imports.

    Raises:
        TranscriptError: nothing in ``source`` can be read as spans (the message says why: empty, not UTF-8,
            not JSON, not an OTLP/JSON document, a file that does not exist, ...).
    """
    return read(source).spans


def read(source: Any) -> Reading:
    """The spans in ``source`` and the notes of what was left out (see :func:`read_spans`)."""
    notes = Notes()
    spans = _unique([s for chunk in chunks(source, notes) for s in chunk], notes)
    if not spans and len(notes):
        raise TranscriptError(f"no span could be read: {notes.summary()}")
    return Reading(spans, notes)


def chunks(source: Any, notes: Notes) -> Iterator[list[SpanRecord]]:
    """The spans of ``source`` as they are read, a list at a time.

    A line at a time from JSON Lines (a file's lines are read as they are needed), all at once from anything
    else. Repeated span ids are not yet left out (see :func:`read`).

    Raises:
        TranscriptError: on the call, when ``source`` is no source of spans, a file that cannot be read, or text
            that is empty or not JSON; while the chunks are read, when a line of the file is not UTF-8.
    """
    if hasattr(source, "get_finished_spans"):
        source = source.get_finished_spans()
    if isinstance(source, str | Path):
        path = path_of(source)
        if path is None:
            return text_chunks(str(source), _otlp_span, notes)
        lines = file_lines(path)
        return walk_lines(lines, _otlp_span, notes) if lines is not None else text_chunks(
            text_of(path), _otlp_span, notes)
    if isinstance(source, bytes):
        return text_chunks(text_of(source), _otlp_span, notes)
    spans: list[SpanRecord] = []
    if isinstance(source, Mapping):
        walk_objects(source, "", _otlp_span, notes, spans)
    elif isinstance(source, Iterable):
        for n, item in enumerate(source):
            _item(item, n, notes, spans)
    else:
        raise TranscriptError(f"cannot read spans from a {type(source).__name__}: give SDK spans, an OTLP/JSON "
                              "document (an object, its text or bytes) or the path of a file")
    return iter([spans])


def _item(item: Any, n: int, notes: Notes, out: list[SpanRecord]) -> None:
    if isinstance(item, SpanRecord):
        out.append(item)
    elif isinstance(item, Mapping) and ("resourceSpans" in item or "resource_spans" in item):
        walk_objects(item, f"item {n}: ", _otlp_span, notes, out)
    elif isinstance(item, Mapping):
        made = _otlp_span(f"item {n}", item, notes)
        if made is not None:
            out.append(made)
    elif hasattr(item, "context") and hasattr(item, "start_time"):
        out.append(_from_sdk(item))
    else:
        notes.add(f"item {n} is a {type(item).__name__}, not a span: left out")


def _unique(spans: list[SpanRecord], notes: Notes) -> list[SpanRecord]:
    """The spans with each span id once: a span id names one span, and the import links spans by it."""
    seen: set[str] = set()
    out = []
    for s in spans:
        if s.span_id in seen:
            notes.add(f"span id {s.span_id} appears twice: the second, {s.name!r}, is left out", s.trace_id)
            continue
        seen.add(s.span_id)
        out.append(s)
    return out


def _from_sdk(span: Any) -> SpanRecord:
    ctx = span.context
    parent = span.parent
    return SpanRecord(
        trace_id=f"{ctx.trace_id:032x}", span_id=f"{ctx.span_id:016x}",
        parent_id=f"{parent.span_id:016x}" if parent is not None else None,
        name=span.name, start_ns=int(span.start_time or 0), end_ns=int(span.end_time or span.start_time or 0),
        attributes=redact(dict(span.attributes or {})), kind=span.kind.name, status=span.status.status_code.name,
        status_message=span.status.description,
        events=[(e.name, int(e.timestamp), redact(dict(e.attributes or {}))) for e in span.events],
    )


# -- one span of OTLP/JSON, field by field: what cannot be read is noted and left out -------------------------

MAX_DEPTH = 32
"""Attribute values nested deeper than this are left out (no convention nests more than a few levels)."""
_MAX_NS = 2**64
"""Times are ``fixed64`` nanoseconds since 1970 in OTLP."""
_INT = re.compile(r"-?[0-9]{1,19}")
"""An ``int64`` as OTLP/JSON writes it (text); longer is none (and ``int()`` of 4,300 digits or more raises)."""
_HEX = {16: re.compile(r"[0-9a-fA-F]{16}"), 32: re.compile(r"[0-9a-fA-F]{32}")}
_BAD = object()
"""What a field that cannot be read becomes (the caller leaves it out)."""
_SHORT = 40
"""Attribute keys, and string values up to this length, are interned: a trace repeats the same few thousand
(``gen_ai.operation.name``, ``chat``, a model's name) in every span, and one copy of each is a third of the
records' memory saved."""


def _is_object(value: Any) -> bool:
    """A JSON object (a dict, checked first: ``isinstance`` against ``Mapping`` is slow, and this is per value)."""
    return type(value) is dict or isinstance(value, Mapping)


def _otlp_span(where: str, s: Any, notes: Notes) -> SpanRecord | None:
    """One span object as a record; None (with a note) when it cannot be one: no ``spanId``, no start time."""
    if not _is_object(s):
        notes.add(f"{where} is a JSON {kind_of(s)}, not an object: left out")
        return None
    trace = _id(s.get("traceId"), 32)
    name = s.get("name", "")
    if not isinstance(name, str):
        notes.add(f"{where}: its name is a JSON {kind_of(name)}, not a string (read as none)", trace or "")
        name = ""
    at = f"{where} ({name!r})"
    if trace is None or trace == "":
        notes.add(f"{at}: {_said(s.get('traceId'), 'no traceId', 'traceId')} (read as none)")
        trace = ""
    span = _id(s.get("spanId"), 16)
    if not span:
        notes.add(f"{at}: {_said(s.get('spanId'), 'no spanId', 'spanId')}: the span is left out", trace)
        return None
    parent = _id(s.get("parentSpanId"), 16)
    if parent is None:
        notes.add(f"{at}: parentSpanId {_shown(s.get('parentSpanId'))} is not an id (read as a root span)", trace)
    start = _time(s.get("startTimeUnixNano", 0))
    if start is None:
        notes.add(f"{at}: startTimeUnixNano {_shown(s.get('startTimeUnixNano'))} is not a time (whole nanoseconds "
                  "since 1970, 0 to 2^64): the span is left out", trace)
        return None
    end = _time(s.get("endTimeUnixNano") or start)
    if end is None:
        notes.add(f"{at}: endTimeUnixNano {_shown(s.get('endTimeUnixNano'))} is not a time (read as its start)",
                  trace)
        end = start
    status, message = _status(s.get("status"), at, notes, trace)
    kind = _enum(s.get("kind", 1), _KINDS, "SPAN_KIND_")
    if kind is None:
        notes.add(f"{at}: kind {_shown(s.get('kind'))} is not a span kind (read as INTERNAL)", trace)
    return SpanRecord(
        trace_id=trace, span_id=span, parent_id=parent or None, name=name, start_ns=start, end_ns=end,
        attributes=redact(_attrs(s.get("attributes"), f"{at}: attributes", notes, trace, 0)),
        kind=kind or "INTERNAL", status=status, status_message=message,
        events=_events(s.get("events"), at, notes, trace),
    )


def _said(value: Any, missing: str, field_name: str) -> str:
    return missing if value is None or value == "" else f"{field_name} {_shown(value)} is not an id"


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40


def _shown(value: Any) -> str:
    """A value in a note: short, and safe for one nested a thousand levels deep."""
    return _REPR.repr(value)


def _id(value: Any, width: int) -> str | None:
    """A hex id ("" when absent, None when it is no id at all).

    The OTLP/JSON rule is hex, but protobuf's own JSON mapping writes base64; an integer is read as the number
    the hex digits spell.
    """
    if value is None or value == "":
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:0{width}x}" if value >= 0 else None
    if not isinstance(value, str):
        return None
    if _HEX[width].fullmatch(value):
        return sys.intern(value.lower())  # a span's id comes back as its children's parent id
    try:
        return base64.b64decode(value).hex()
    except ValueError:
        return value


def _time(value: Any) -> int | None:
    """Nanoseconds since 1970 from a ``fixed64`` (a number, or its decimal text), or None when it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and 0 <= value < _MAX_NS else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:  # a fixed64's digits
        value = int(value)
    if isinstance(value, int):
        return value if 0 <= value < _MAX_NS else None
    return None


def _enum(value: Any, names: list[str], prefix: str) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return names[value] if 0 <= value < len(names) else None
    if isinstance(value, str):
        text = value.upper().removeprefix(prefix)
        return text if text in names else None
    return names[0] if value is None else None


def _status(value: Any, at: str, notes: Notes, trace: str) -> tuple[str, str | None]:
    if value is None:
        return "UNSET", None
    if not isinstance(value, Mapping):
        notes.add(f"{at}: status is a JSON {kind_of(value)}, not an object (read as UNSET)", trace)
        return "UNSET", None
    code = _enum(value.get("code", 0), _STATUS, "STATUS_CODE_")
    if code is None:
        notes.add(f"{at}: status code {_shown(value.get('code'))} is not UNSET, OK or ERROR (read as UNSET)", trace)
    message = value.get("message")
    if message is not None and not isinstance(message, str):
        notes.add(f"{at}: the status message is a JSON {kind_of(message)}, not a string: left out", trace)
        message = None
    return code or "UNSET", message or None


def _events(value: Any, at: str, notes: Notes, trace: str) -> list[tuple[str, int, dict[str, Any]]]:
    if value is None:
        return []
    if not isinstance(value, list):
        notes.add(f"{at}: events is a JSON {kind_of(value)}, not a list: left out", trace)
        return []
    out = []
    for n, e in enumerate(value):
        name = e.get("name", "") if isinstance(e, Mapping) else None
        when = _time(e.get("timeUnixNano") or 0) if isinstance(e, Mapping) else None
        if not isinstance(name, str) or when is None:
            notes.add(f"{at}: events[{n}] is not an event with a name and a time: left out", trace)
            continue
        out.append((name, when, redact(_attrs(e.get("attributes"), f"{at}: events[{n}]", notes, trace, 0))))
    return out


def _attrs(items: Any, at: str, notes: Notes, trace: str, depth: int) -> dict[str, Any]:
    """A list of ``{"key", "value": AnyValue}`` (or a plain object, as some writers use) as a dict."""
    if items is None:
        return {}
    if type(items) is not list and _is_object(items):
        return {str(k): v for k, v in ((k, _plain(v, depth + 1)) for k, v in items.items()) if v is not _BAD}
    if not isinstance(items, list):
        notes.add(f"{at} is a JSON {kind_of(items)}, not a list: left out", trace)
        return {}
    out: dict[str, Any] = {}
    for n, kv in enumerate(items):
        key = kv.get("key") if _is_object(kv) else None
        if type(key) is not str:
            notes.add(f"{at}[{n}] is not an attribute (an object with a string 'key'): left out", trace)
            continue
        value = _value(kv.get("value"), depth)
        if value is _BAD:
            notes.add(f"{at}: {key!r} holds {_shown(kv.get('value'))}, not an AnyValue nested at most {MAX_DEPTH} "
                      "deep: left out", trace)
            continue
        out[sys.intern(key) if len(key) <= _SHORT else key] = value
    return out


def _value(v: Any, depth: int) -> Any:
    """An ``AnyValue`` as a Python value; ``_BAD`` when it is none (or nests deeper than :data:`MAX_DEPTH`)."""
    if v is None:
        return None
    if not _is_object(v) or depth > MAX_DEPTH:
        return _BAD
    if "stringValue" in v:  # most values: read here, not through the table
        x = v["stringValue"]
        return (sys.intern(x) if len(x) <= _SHORT else x) if type(x) is str else _BAD
    for key, read in _READERS.items():
        if key in v:
            return read(v[key], depth)
    return None  # an empty AnyValue: no value


def _double(x: Any, _: int = 0) -> Any:
    if isinstance(x, int | float) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, str):  # protobuf's JSON writes "NaN", "Infinity" and "-Infinity" as text
        try:
            return float(x)
        except ValueError:
            return _BAD
    return _BAD


def _array(x: Any, depth: int) -> Any:
    values = x.get("values") if _is_object(x) else [] if x is None else _BAD
    if values is None:
        return []
    if not isinstance(values, list):
        return _BAD
    out = [_value(item, depth + 1) for item in values]
    return _BAD if any(item is _BAD for item in out) else out


def _kvlist(x: Any, depth: int) -> Any:
    values = x.get("values") if _is_object(x) else [] if x is None else _BAD
    if values is None:
        return {}
    if not isinstance(values, list) or not all(_is_object(kv) and isinstance(kv.get("key"), str) for kv in values):
        return _BAD
    out = {kv["key"]: _value(kv.get("value"), depth + 1) for kv in values}
    return _BAD if any(item is _BAD for item in out.values()) else out


_READERS: dict[str, Callable[[Any, int], Any]] = {
    "stringValue": lambda x, _: x if isinstance(x, str) else _BAD,
    "boolValue": lambda x, _: x if isinstance(x, bool) else _BAD,
    "intValue": lambda x, _: (x if isinstance(x, int) and not isinstance(x, bool)
                              else int(x) if isinstance(x, str) and _INT.fullmatch(x) else _BAD),
    "doubleValue": _double,
    "arrayValue": _array,
    "kvlistValue": _kvlist,
    "bytesValue": lambda x, _: x if isinstance(x, str) else _BAD,
}


def _plain(value: Any, depth: int) -> Any:
    """A plain attribute value (an object's member), or ``_BAD`` when it nests deeper than :data:`MAX_DEPTH`."""
    if isinstance(value, list | tuple):
        if depth > MAX_DEPTH:
            return _BAD
        items = [_plain(v, depth + 1) for v in value]
        return _BAD if any(v is _BAD for v in items) else items
    if isinstance(value, Mapping):
        if depth > MAX_DEPTH:
            return _BAD
        members = {str(k): _plain(v, depth + 1) for k, v in value.items()}
        return _BAD if any(v is _BAD for v in members.values()) else members
    return value


# -- writing -------------------------------------------------------------------------------------------------


def _any(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": _kv(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_any(v) for v in value]}}
    return {"stringValue": str(value)}


def _kv(attrs: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any(v)} for k, v in (attrs or {}).items()]


def to_otlp_json(spans: Iterable[Any]) -> dict[str, Any]:
    """SDK spans (``ReadableSpan``) as one OTLP/JSON ``ExportTraceServiceRequest`` document.

    Example:
        >>> import json, agentnb as anb
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        >>> spans, provider = InMemorySpanExporter(), TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(spans))
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> _ = anb.otel.export(run.start("Paris?").run(), provider)
        >>> doc = anb.otel.to_otlp_json(spans.get_finished_spans())
        >>> [s["name"] for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]][-1]
        'invoke_agent agentnb'
    """
    groups: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = getattr(span, "resource", None)
        scope = getattr(span, "instrumentation_scope", None)
        _, scopes = groups.setdefault(id(resource), (resource, {}))
        key = (getattr(scope, "name", "") or "", getattr(scope, "version", "") or "")
        ctx, parent = span.context, span.parent
        scopes.setdefault(key, []).append({
            "traceId": f"{ctx.trace_id:032x}", "spanId": f"{ctx.span_id:016x}",
            "parentSpanId": f"{parent.span_id:016x}" if parent is not None else "",
            "name": span.name, "kind": _KINDS.index(span.kind.name) if span.kind.name in _KINDS else 1,
            "startTimeUnixNano": str(span.start_time), "endTimeUnixNano": str(span.end_time),
            "attributes": _kv(span.attributes),
            "events": [{"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _kv(e.attributes)}
                       for e in span.events],
            "status": {"code": _STATUS.index(span.status.status_code.name),
                       **({"message": span.status.description} if span.status.description else {})},
        })
    return {"resourceSpans": [
        {"resource": {"attributes": _kv(getattr(resource, "attributes", None))},
         "scopeSpans": [{"scope": {"name": name, "version": version}, "spans": items}
                        for (name, version), items in scopes.items()]}
        for resource, scopes in groups.values()
    ]}
