"""What every ``parse_history`` shares: a builder of canonical messages that remembers where each part came from.

Theory of operation. A wire API's ``parse_history(body)`` reads a request body (already made safe to read
by its ``normalize``) back into canonical messages and tools. The importers (:mod:`agentnb.importers`)
and the emulator's decoder both call it, so a history reads the same wherever it comes from. Reading
never raises: an item no reader expected is an ``unreadable`` finding and is left out; a part the
canonical conversation cannot hold is an ``unsupported_part`` warning (kept as a placeholder or left out).
Structural problems (pairing, placement, signatures) are the lint rules' business, not the reader's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._findings import Finding, Severity
from .._messages import Message, ResultStatus, ToolCallPart, ToolResultPart
from ..events import ToolInfo
from ._wire import loads_object
from ._wireapi import History

__all__ = ["Builder", "dumps_value", "tool_info"]


def dumps_value(value: Any) -> str:
    """A string as it is, anything else as its JSON text."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def tool_info(d: Any, schema_key: str) -> ToolInfo:
    """A tool definition as a script sees it (a name and description that are not strings are left out)."""
    d = d if isinstance(d, dict) else {}
    name, description, schema = d.get("name"), d.get("description"), d.get(schema_key)
    return ToolInfo(name=name if isinstance(name, str) else "",
                    description=description if isinstance(description, str) else "",
                    parameters=schema if isinstance(schema, dict) else {})


class Builder:
    """Collects canonical messages with the input position each part came from, and reading findings."""

    def __init__(self, list_key: str) -> None:
        self.list_key = list_key
        self.messages: list[Message] = []
        self.sources: list[list[int]] = []
        """The input position of each part of each message."""
        self.findings: list[Finding] = []
        self.names: dict[str, str] = {}

    def where(self, i: int, tail: str = "") -> str:
        """A position in the body's own terms: ``messages[3].content[1]``."""
        return f"{self.list_key}[{i}]{tail}"

    def add(self, role: Any, parts: Sequence[Any], position: int | Sequence[int], *,
            merge_results: bool = False) -> None:
        if not parts:
            return
        positions = [position] * len(parts) if isinstance(position, int) else list(position)
        if merge_results and self.messages and self.messages[-1].role == "tool" and role == "tool":
            last = self.messages[-1]
            self.messages[-1] = Message(role="tool", parts=(*last.parts, *parts))
            self.sources[-1].extend(positions)
            return
        self.messages.append(Message(role=role, parts=tuple(parts)))
        self.sources.append(positions)

    def find(self, code: str, message: str, index: int, position: str, severity: Severity = "error") -> None:
        self.findings.append(Finding(code, position, index, message, severity=severity))

    def call(self, call_id: str, name: str, raw: str, arguments: Any, index: int, **extra: Any) -> ToolCallPart:
        parsed = arguments if isinstance(arguments, dict) else loads_object(raw)
        self.names.setdefault(call_id, name)
        return ToolCallPart(call_id=call_id, name=name, arguments_raw=raw, arguments=parsed, index=index, **extra)

    def result(self, call_id: str, content: str, status: ResultStatus = "ok",
               name: str | None = None) -> ToolResultPart:
        return ToolResultPart(call_id=call_id, name=name or self.names.get(call_id, ""), status=status,
                              content=content)

    def text(self, value: Any, index: int, path: str) -> str:
        """Text of a content value: a string, or a list of text parts (others become a placeholder)."""
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if isinstance(value, Mapping):
            value = [value]
        if not isinstance(value, list):
            return dumps_value(value)
        out: list[str] = []
        for j, part in enumerate(value):
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                kind = part.get("type", "?") if isinstance(part, Mapping) else type(part).__name__
                self.find("unsupported_part", f"a {kind!r} part is kept as a placeholder", index,
                          f"{path}[{j}]", "warning")
                out.append(f"[{kind}]")
        return "".join(out)

    def unreadable(self, i: int, exc: Exception) -> None:
        self.find("unreadable", f"item {i} could not be read ({type(exc).__name__}: {exc})", i, self.where(i))

    def history(self, tools: list[ToolInfo], **options: Any) -> History:
        return History(messages=self.messages, tools=tools, findings=self.findings, sources=self.sources,
                       **options)


def items_of(body: dict[str, Any], key: str) -> list[Any]:
    """The history list of a body (normalized: anything else reads as empty)."""
    items = body.get(key)
    return items if isinstance(items, list) else []
