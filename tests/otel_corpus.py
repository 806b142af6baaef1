"""Hostile OTLP/JSON documents for ``anb.import_trace``, each with the outcome it must have.

Every case starts from one valid document (an agentnb run of one tool call, exported with content) or from
nothing, and breaks one thing: the document's own shape, a field's type at every level, a timestamp, an id, the
span graph, an attribute, the text's encoding or size. Its outcome is one of two:

- :class:`Imports`: the document comes back as transcripts, and what was dropped or repaired is said in the
  first event's ``settings["lacks"]`` (``said`` is a pattern one of those lines must match);
- :class:`Refused`: a :class:`~agentnb.TranscriptError` whose message matches ``match`` (it names what was
  wrong).

Never another exception. ``tests/test_hostile_otel.py`` runs them and a property test that mutates the valid
document at random.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentnb as anb


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def valid_document() -> dict[str, Any]:
    """One run (a call of ``add``, then an answer) exported with content, as an OTLP/JSON document."""
    spans, tp = InMemorySpanExporter(), TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    model = anb.ScriptedModel([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "3"}])
    loop = anb.Loop(model=model, tools=[add], system="Be brief.",
                    tracer_provider=anb.otel.Tracing(tp, include_content=True))
    loop.start("1 + 2?").run()
    return anb.otel.to_otlp_json(spans.get_finished_spans())


@dataclass(frozen=True)
class Imports:
    """The document imports; ``said`` (a regex) matches a line of the first transcript's ``lacks``."""

    said: str | None = None
    transcripts: int | None = 1


@dataclass(frozen=True)
class Refused:
    """The document is refused with a ``TranscriptError`` whose message matches ``match``."""

    match: str


Outcome = Imports | Refused


@dataclass(frozen=True)
class Case:
    """One hostile document: a name, how to make it, and the outcome it must have."""

    name: str
    make: Callable[[dict[str, Any]], Any]
    """The document (an object, JSON text or bytes) from a fresh copy of the valid one."""
    outcome: Outcome


def spans_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans list of the first scope of the first resource (the valid document has one)."""
    spans: list[dict[str, Any]] = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def by_op(doc: dict[str, Any], op: str) -> dict[str, Any]:
    """The first span whose ``gen_ai.operation.name`` is ``op``."""
    for s in spans_of(doc):
        if {"key": "gen_ai.operation.name", "value": {"stringValue": op}} in s["attributes"]:
            return s
    raise LookupError(op)


def set_attr(span: dict[str, Any], key: str, value: Any) -> None:
    """Set (or add) attribute ``key`` of a span to the raw AnyValue ``value``."""
    for kv in span["attributes"]:
        if kv["key"] == key:
            kv["value"] = value
            return
    span["attributes"].append({"key": key, "value": value})


def _with(fn: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], Any]:
    def make(doc: dict[str, Any]) -> Any:
        fn(doc)
        return doc
    return make


def _nested_list(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep_kvlist(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "bottom"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def _chat_time(doc: dict[str, Any], value: Any) -> None:
    by_op(doc, "chat")["startTimeUnixNano"] = value


def _duplicate_chat(doc: dict[str, Any]) -> None:
    chats = [s for s in spans_of(doc) if s["name"].startswith("chat")]
    chats[1]["spanId"] = chats[0]["spanId"]


def _parent_cycle(doc: dict[str, Any]) -> None:
    agent = by_op(doc, "invoke_agent")
    chat = by_op(doc, "chat")
    agent["parentSpanId"] = chat["spanId"]  # the agent's parent is its own child
    set_attr(agent, "gen_ai.operation.name", {"stringValue": "workflow"})  # no agent above the chats any more


def _self_parent(doc: dict[str, Any]) -> None:
    for s in spans_of(doc):
        s["parentSpanId"] = s["spanId"]


def _bad_attributes(doc: dict[str, Any]) -> None:
    chat = by_op(doc, "chat")
    chat["attributes"] += [5, "key", {"key": 7, "value": {"stringValue": "x"}}, {"key": "a", "value": "raw"},
                           {"key": "b", "value": [1, 2]}, {"value": {"intValue": "1"}}]


def _list_of_dicts_attribute(doc: dict[str, Any]) -> None:
    chat = by_op(doc, "chat")
    items = {"arrayValue": {"values": [{"kvlistValue": {"values": [{"key": "role", "value": {"stringValue": "user"}}]}},
                                       {"kvlistValue": {"values": [{"key": "parts", "value": {"intValue": "3"}}]}}]}}
    set_attr(chat, "gen_ai.input.messages", items)
    set_attr(chat, "gen_ai.output.messages", {"arrayValue": {"values": [{"kvlistValue": {"values": [
        {"key": "role", "value": {"stringValue": "assistant"}},
        {"key": "parts", "value": {"arrayValue": {"values": [{"stringValue": "hi"}]}}}]}}]}})


def _wrong_message_types(doc: dict[str, Any]) -> None:
    chat = by_op(doc, "chat")
    set_attr(chat, "gen_ai.input.messages", {"stringValue": json.dumps(
        [{"role": 5, "parts": "x"}, {"role": "user", "parts": [{"type": ["text"], "content": {"a": 1}}]},
         {"role": "assistant", "parts": [{"type": "tool_call", "id": {"x": 1}, "name": [1], "arguments": 5}]},
         7, None])})
    set_attr(chat, "gen_ai.system_instructions", {"stringValue": '{"type": "text"}'})
    set_attr(chat, "gen_ai.tool.definitions", {"stringValue": '[{"name": {"x": 1}, "parameters": "none"}, 3]'})


def _wrong_counts(doc: dict[str, Any]) -> None:
    chat = by_op(doc, "chat")
    set_attr(chat, "gen_ai.usage.input_tokens", {"stringValue": "lots"})
    set_attr(chat, "gen_ai.usage.output_tokens", {"doubleValue": 1e308 * 10})
    set_attr(chat, "gen_ai.response.finish_reasons", {"kvlistValue": {"values": []}})
    set_attr(chat, "gen_ai.response.id", {"kvlistValue": {"values": [{"key": "a", "value": {"intValue": "1"}}]}})
    set_attr(chat, "gen_ai.request.temperature", {"arrayValue": {"values": [{"boolValue": True}]}})


def _bad_agentnb_attributes(doc: dict[str, Any]) -> None:
    agent = by_op(doc, "invoke_agent")
    set_attr(agent, "agentnb.state", {"stringValue": "BOGUS"})
    set_attr(agent, "agentnb.run_id", {"arrayValue": {"values": []}})
    chat = by_op(doc, "chat")
    set_attr(chat, "agentnb.finalize", {"stringValue": "no"})
    set_attr(chat, "agentnb.response.complete", {"kvlistValue": {}})
    tool = by_op(doc, "execute_tool")
    set_attr(tool, "agentnb.result.status", {"stringValue": "exploded"})
    set_attr(tool, "agentnb.call.outcome", {"intValue": "3"})


def _bad_span_events(doc: dict[str, Any]) -> None:
    chat = by_op(doc, "chat")
    chat["events"] = ["boom", 5, {"name": {"x": 1}, "timeUnixNano": "soon"},
                      {"name": "agentnb.model_retried", "timeUnixNano": chat["startTimeUnixNano"],
                       "attributes": [{"key": "status", "value": {"stringValue": "teapot"}},
                                      {"key": "attempt", "value": {"kvlistValue": {}}},
                                      {"key": "delay_s", "value": {"stringValue": "NaN"}}]}]
    by_op(doc, "invoke_agent")["events"] = {"name": "agentnb.guard_tripped"}


def _bad_status_and_kind(doc: dict[str, Any]) -> None:
    for i, s in enumerate(spans_of(doc)):
        s["status"] = [{"code": 2}, "ERROR", {"code": 99, "message": {"x": 1}}, 3.5][i % 4]
        s["kind"] = [{"k": 1}, 1e9, "SPAN_KIND_NOPE", None][i % 4]


def _bad_tool_span(doc: dict[str, Any]) -> None:
    tool = by_op(doc, "execute_tool")
    set_attr(tool, "gen_ai.tool.call.id", {"arrayValue": {"values": [{"intValue": "1"}]}})
    set_attr(tool, "gen_ai.tool.name", {"kvlistValue": {"values": []}})
    set_attr(tool, "gen_ai.tool.call.result", {"kvlistValue": {"values": [{"key": "x", "value": {}}]}})


def _huge_string(doc: dict[str, Any]) -> None:
    big = "x" * 20_000_000
    set_attr(by_op(doc, "chat"), "gen_ai.response.id", {"stringValue": big})
    set_attr(by_op(doc, "execute_tool"), "gen_ai.tool.call.result", {"stringValue": big})


def _surrogates(doc: dict[str, Any]) -> Any:
    chat = by_op(doc, "chat")
    set_attr(chat, "gen_ai.input.messages", {"stringValue": '[{"role": "user", "parts": [{"type": "text", '
                                                            '"content": "half \\ud83d an emoji"}]}]'})
    chat["name"] = "chat \ud800"
    return json.dumps(doc)  # ensure_ascii: the lone surrogates travel as \\uXXXX escapes, as JSON allows


def _invalid_utf8(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).replace("1 + 2?", "1 + 2\\u00e9").encode().replace(b"\\u00e9", b"\xff\xfe")


def _no_resource_spans(doc: dict[str, Any]) -> Any:
    return {"resource_logs": doc["resourceSpans"]}


def _jsonl_with_bad_line(doc: dict[str, Any]) -> str:
    return json.dumps(doc) + "\n{not json\n"


def _missing_ids(doc: dict[str, Any]) -> None:
    tool = by_op(doc, "execute_tool")
    del tool["spanId"]
    del by_op(doc, "chat")["traceId"]


def _wrong_id_types(doc: dict[str, Any]) -> None:
    spans = spans_of(doc)
    spans[0]["traceId"] = 12345
    spans[1]["spanId"] = {"hex": "abc"}
    spans[2]["parentSpanId"] = ["x"]


def _attributes_not_a_list(doc: dict[str, Any]) -> None:
    spans = spans_of(doc)
    spans[0]["attributes"] = "gen_ai.operation.name=chat"
    spans[1]["attributes"] = 42


CASES: list[Case] = [
    # the document itself
    Case("empty text", lambda d: "", Refused(r"empty")),
    Case("whitespace only", lambda d: " \n\t ", Refused(r"empty")),
    Case("empty bytes", lambda d: b"", Refused(r"empty")),
    Case("not JSON", lambda d: "{not json", Refused(r"not JSON")),
    Case("JSON null", lambda d: "null", Refused(r"not an OTLP/JSON document.*null")),
    Case("a JSON number", lambda d: "42", Refused(r"not an OTLP/JSON document.*number \(42\)")),
    Case("a JSON string", lambda d: '"resourceSpans"', Refused(r"not an OTLP/JSON document.*string")),
    Case("an object without resourceSpans", _no_resource_spans, Refused(r"no 'resourceSpans'")),
    Case("an empty export", lambda d: {"resourceSpans": []}, Imports(transcripts=0)),
    Case("an empty list of documents", lambda d: "[]", Imports(transcripts=0)),
    Case("JSON nested 100 000 deep", lambda d: _nested_list(100_000), Refused(r"nested too deeply")),
    Case("invalid UTF-8", _invalid_utf8, Refused(r"not UTF-8")),
    Case("JSON Lines with a broken line", _jsonl_with_bad_line, Imports(r"line 2 is not JSON")),
    Case("a path that does not exist", lambda d: "no/such/trace.json", Refused(r"no such file")),
    # wrong types at every level
    Case("resourceSpans is a string", lambda d: {"resourceSpans": "spans"}, Refused(r"resourceSpans.*not a list")),
    Case("resourceSpans of numbers", lambda d: {"resourceSpans": [1, 2]},
         Refused(r"no span could be read.*resourceSpans\[0\].*not an object")),
    Case("scopeSpans is an object", _with(lambda d: d["resourceSpans"][0].update(scopeSpans={"spans": []})),
         Refused(r"scopeSpans.*not a list")),
    Case("spans is a number", _with(lambda d: d["resourceSpans"][0]["scopeSpans"][0].update(spans=3)),
         Refused(r"spans.*not a list")),
    Case("a span that is a list", _with(lambda d: spans_of(d).append(["chat"])),
         Imports(r"spans\[\d+\].*not an object")),
    Case("ids of the wrong type", _with(_wrong_id_types), Imports(r"(spanId|parentSpanId)", transcripts=2)),
    Case("attributes that are not a list", _with(_attributes_not_a_list), Imports(r"attributes.*not a list")),
    Case("attribute entries of the wrong type", _with(_bad_attributes), Imports(r"attribute")),
    Case("attributes that are lists of dicts", _with(_list_of_dicts_attribute), Imports()),
    Case("attribute nested 5000 deep", _with(lambda d: set_attr(by_op(d, "chat"), "deep", _deep_kvlist(5000))),
         Imports(r"nested")),
    Case("messages of the wrong types", _with(_wrong_message_types), Imports()),
    Case("message JSON nested 100 000 deep",
         _with(lambda d: set_attr(by_op(d, "chat"), "gen_ai.input.messages", {"stringValue": _nested_list(100_000)})),
         Imports(r"gen_ai.input.messages")),
    Case("counts, reasons and ids of the wrong types", _with(_wrong_counts), Imports(r"gen_ai.usage.input_tokens")),
    Case("agentnb attributes of the wrong types", _with(_bad_agentnb_attributes), Imports(r"agentnb.state")),
    Case("span events of the wrong types", _with(_bad_span_events), Imports(r"events")),
    Case("status and kind of the wrong types", _with(_bad_status_and_kind), Imports()),
    Case("a tool span of the wrong types", _with(_bad_tool_span), Imports()),
    # timestamps
    Case("a start time of 1e30", _with(lambda d: _chat_time(d, 1e30)), Imports(r"startTimeUnixNano.*1e\+30")),
    Case("a start time of 1e30 as text", _with(lambda d: _chat_time(d, "1" + "0" * 30)),
         Imports(r"startTimeUnixNano")),
    Case("a start time of 5,000 digits as text", _with(lambda d: _chat_time(d, "9" * 5000)),
         Imports(r"startTimeUnixNano")),
    Case("a token count of 5,000 digits", _with(lambda d: set_attr(by_op(d, "chat"), "gen_ai.usage.input_tokens",
                                                                  {"intValue": "9" * 5000})),
         Imports(r"gen_ai.usage.input_tokens")),
    Case("a negative start time", _with(lambda d: _chat_time(d, "-5")), Imports(r"startTimeUnixNano.*-5")),
    Case("a float start time", _with(lambda d: _chat_time(d, float(by_op(d, "chat")["startTimeUnixNano"]))),
         Imports(None)),
    Case("a NaN start time", lambda d: json.dumps(d).replace(
        f'"startTimeUnixNano": "{by_op(d, "chat")["startTimeUnixNano"]}"', '"startTimeUnixNano": NaN', 1),
         Imports(r"startTimeUnixNano.*nan")),
    Case("an infinite end time", _with(lambda d: by_op(d, "chat").update(endTimeUnixNano=float("inf"))),
         Imports(r"endTimeUnixNano")),
    Case("a start time that is not a number", _with(lambda d: _chat_time(d, "yesterday")),
         Imports(r"startTimeUnixNano.*yesterday")),
    Case("a boolean start time", _with(lambda d: _chat_time(d, True)), Imports(r"startTimeUnixNano")),
    Case("an end before the start", _with(lambda d: by_op(d, "chat").update(endTimeUnixNano="1")), Imports()),
    # ids and the span graph
    Case("missing ids", _with(_missing_ids), Imports(r"no spanId")),
    Case("duplicate span ids", _with(_duplicate_chat), Imports(r"span id .* twice")),
    Case("a cycle in parent ids", _with(_parent_cycle), Imports(r"cycle")),
    Case("every span its own parent", _with(_self_parent), Imports(r"cycle", transcripts=2)),
    # text
    Case("lone surrogates", _surrogates, Imports()),  # kept: the event log writes them as escapes
    Case("gigantic strings", _with(_huge_string), Imports()),
]
"""The hostile documents (more than 29), grouped by what they break."""


def build(case: Case) -> Any:
    """The document of ``case``, made from a fresh copy of the valid one."""
    return case.make(copy.deepcopy(_VALID))


_VALID = valid_document()
