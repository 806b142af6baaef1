"""Spans from anywhere as one plain record, and OTLP/JSON in and out.

:func:`read_spans` accepts what people have: the SDK's finished spans (``InMemorySpanExporter`` or the list
it returns), an OTLP/JSON document (``{"resourceSpans": [...]}``, the body of an OTLP/HTTP JSON export and
the line format of the Collector's file exporter), its text, or a path to a file of one or more such
documents (JSON Lines included). :func:`to_otlp_json` writes SDK spans as that document, with the OTLP/JSON
encoding rules: hex trace and span ids, 64-bit integers as strings, attribute values as ``AnyValue``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..redact import redact

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


def read_spans(source: Any) -> list[SpanRecord]:
    """Every span in ``source`` (see the module docstring for what it may be), secrets redacted."""
    if hasattr(source, "get_finished_spans"):
        source = source.get_finished_spans()
    if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith(("{", "["))):
        source = Path(source).read_text(encoding="utf-8")
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    if isinstance(source, str):
        text = source.strip()
        try:
            docs: list[Any] = [json.loads(text)]
        except ValueError:  # JSON Lines: one export request per line
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [s for d in docs for s in _from_otlp(d)]
    if isinstance(source, Mapping):
        return _from_otlp(source)
    out: list[SpanRecord] = []
    for item in source:
        if isinstance(item, SpanRecord):
            out.append(item)
        elif isinstance(item, Mapping):
            out.extend(_from_otlp(item) if "resourceSpans" in item else [_otlp_span(item)])
        else:
            out.append(_from_sdk(item))
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


def _from_otlp(doc: Any) -> list[SpanRecord]:
    if isinstance(doc, list):
        return [s for d in doc for s in _from_otlp(d)]
    out: list[SpanRecord] = []
    for rs in doc.get("resourceSpans") or doc.get("resource_spans") or []:
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or rs.get("scope_spans") or []:
            out.extend(_otlp_span(s) for s in ss.get("spans") or [])
    return out


def _id(value: Any, width: int) -> str:
    """A hex id; the OTLP/JSON rule is hex, but protobuf's own JSON mapping writes base64."""
    text = str(value or "")
    if len(text) == width and all(ch in "0123456789abcdefABCDEF" for ch in text):
        return text.lower()
    try:
        return base64.b64decode(text).hex() if text else ""
    except ValueError:
        return text


def _enum(value: Any, names: list[str], prefix: str) -> str:
    if isinstance(value, int):
        return names[value] if 0 <= value < len(names) else names[0]
    text = str(value or names[0]).upper()
    return text.removeprefix(prefix)


def _otlp_span(s: Mapping[str, Any]) -> SpanRecord:
    status = s.get("status") or {}
    parent = _id(s.get("parentSpanId"), 16)
    return SpanRecord(
        trace_id=_id(s.get("traceId"), 32), span_id=_id(s.get("spanId"), 16), parent_id=parent or None,
        name=str(s.get("name", "")), start_ns=int(s.get("startTimeUnixNano") or 0),
        end_ns=int(s.get("endTimeUnixNano") or s.get("startTimeUnixNano") or 0),
        attributes=redact(_attrs(s.get("attributes"))), kind=_enum(s.get("kind", 1), _KINDS, "SPAN_KIND_"),
        status=_enum(status.get("code", 0), _STATUS, "STATUS_CODE_"), status_message=status.get("message"),
        events=[(str(e.get("name", "")), int(e.get("timeUnixNano") or 0), redact(_attrs(e.get("attributes"))))
                for e in s.get("events") or []],
    )


def _attrs(items: Any) -> dict[str, Any]:
    if isinstance(items, Mapping):  # some writers use a plain object
        return dict(items)
    return {kv["key"]: _value(kv.get("value") or {}) for kv in items or [] if "key" in kv}


def _value(v: Mapping[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return _attrs((v["kvlistValue"] or {}).get("values"))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


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
