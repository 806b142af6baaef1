"""What every framework importer shares: collecting canonical messages with their source, and finishing.

A framework importer maps its history to canonical messages, remembering for each message the position of
the input item it came from, then :meth:`History.done` runs the same structural checks as the provider
importers (:func:`agentnb.importers.lint`, that is :func:`agentnb.pairing.check`) with the input positions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..findings import Finding
from ..messages import Message, ToolCallPart, ToolResultPart
from ..pairing import check
from ..providers._wire import loads_object
from .wire import Imported, transcript_of


def dumps(value: Any) -> str:
    """A result or argument value as the text a model would read (strings as they are)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class History:
    """Canonical messages being built from one framework history, with findings."""

    def __init__(self, fmt: str) -> None:
        self.format = fmt
        self.messages: list[Message] = []
        self.sources: list[int] = []
        self.findings: list[Finding] = []
        self.names: dict[str, str] = {}
        self.model: str | None = None

    def add(self, role: Any, parts: Sequence[Any], position: int) -> None:
        """Append a message (consecutive tool messages merge: the canonical form has one per turn)."""
        if not parts:
            return
        if role == "tool" and self.messages and self.messages[-1].role == "tool":
            self.messages[-1] = Message(role="tool", parts=(*self.messages[-1].parts, *parts))
            return
        self.messages.append(Message(role=role, parts=tuple(parts)))
        self.sources.append(position)

    def find(self, code: str, message: str, position: int, path: str, severity: Any = "warning") -> None:
        """Record a finding about input item ``position``."""
        self.findings.append(Finding(code, path, position, message, severity=severity))

    def call(self, call_id: str, name: str, args: Any, index: int, position: int, path: str) -> ToolCallPart:
        """A call part; arguments as an object or as JSON text (never repaired)."""
        raw = "{}" if args is None else dumps(args)
        parsed = args if isinstance(args, dict) else ({} if args is None else loads_object(raw))
        if parsed is None:
            self.find("invalid_arguments", f"the arguments of call {call_id!r} are not a JSON object", position,
                      path)
        self.names.setdefault(call_id, name)
        return ToolCallPart(call_id=call_id, name=name, arguments_raw=raw, arguments=parsed, index=index)

    def result(self, call_id: str, value: Any, status: Any = "ok", name: str | None = None) -> ToolResultPart:
        """A result part answering ``call_id``."""
        return ToolResultPart(call_id=call_id, name=name or self.names.get(call_id, ""), status=status,
                              content=dumps(value), audit=None if isinstance(value, str) else value)

    def done(self, *, model: str | None = None, run_id: str | None = None, ts: datetime | None = None) -> Imported:
        """The imported history: a transcript of one ``RunStarted`` and the findings, sorted by position."""
        sources = [[src] * len(m.parts) for m, src in zip(self.messages, self.sources, strict=True)]
        findings = sorted([*self.findings, *check(self.messages, sources)], key=lambda f: (f.index, f.code))
        return transcript_of(self.messages, findings, self.format, model or self.model, run_id, ts)
