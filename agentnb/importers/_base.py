"""What every framework importer shares: collecting canonical messages with their source, and finishing.

A framework importer maps its history to canonical messages, remembering for each message the position of
the input item it came from, then :meth:`History.done` runs the same structural checks as the provider
importers (:func:`agentnb.importers.lint`, that is :func:`agentnb._pairing.check`) with the input positions.

Whatever it is given, an importer gives an :class:`Imported` and never raises: :meth:`History.items` turns
any value into the list of items to read (JSON text parsed, one message wrapped, the framework's own objects
dumped one by one), and :meth:`History.word`, :meth:`History.field_list` and friends read each field with the
type the format gives it. Anything else is a ``malformed`` or ``not_a_message`` finding naming the place, and
what it held is left out (or kept as its JSON text, for content).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .._findings import Finding
from .._messages import Message, ToolCallPart, ToolResultPart
from .._pairing import check
from .._values import MAX_DEPTH, fits
from ..providers._wire import loads_object
from ._wire import Imported, transcript_of

WHOLE = -1
"""The ``index`` of a finding about the history as a whole (not one of its items)."""


def dumps(value: Any) -> str:
    """A result or argument value as the text a model would read (strings as they are).

    A value JSON cannot write (one that contains itself, an integer of 4,300 digits or more) reads as a note
    saying so; :meth:`History.call` makes such arguments a finding.
    """
    return value if isinstance(value, str) else _dumps(value)[0]


def _dumps(value: Any) -> tuple[str, str | None]:
    """``(text, None)``, or a note and why JSON cannot write ``value``."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str), None
    except (ValueError, RecursionError) as exc:  # a circular value; int() refuses 4,300 digits; nesting
        why = str(exc).split(";")[0] or type(exc).__name__
        return f"(a {type(value).__name__} JSON cannot write: {why})", why


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

    # -- any value, read as the format's items and fields ------------------------------------------------

    def items(self, history: Any, dump: Callable[[Any], Any] | None = None) -> list[Any]:
        """The items of ``history``, whatever it is, each a dict to read or a value the importer reports.

        The history is :meth:`listed`; an item that is not a dict goes through ``dump`` (the framework's own
        serializer for its message objects, which raises for anything else); an item nested deeper than
        :data:`agentnb._values.MAX_DEPTH` or that contains itself is left out (None). Each of these is a finding.
        """
        out = []
        for i, item in enumerate(self.listed(history)):
            if not isinstance(item, Mapping) and dump is not None:
                item = self._dumped(item, i, dump)
            if isinstance(item, Mapping | list | tuple) and not fits(item):
                self.find("malformed", f"item {i} nests deeper than {MAX_DEPTH} levels or contains itself: left out",
                          i, f"[{i}]", "error")
                item = None
            out.append(item)
        return out

    def listed(self, history: Any) -> list[Any]:
        """The history as a list, each departure from one a finding.

        JSON text is parsed, a single message (a dict) is a list of one, and what is no list at all (None, a
        number) is an empty one.
        """
        if isinstance(history, str | bytes):
            history = self._parsed(history)
            if history is None:
                return []
        if isinstance(history, Mapping):
            self.find("malformed", "the history is one message (an object), not a list of them: read as a list "
                      "of one", WHOLE, "(history)")
            return [history]
        if history is None or not isinstance(history, Iterable):
            self.find("malformed", f"the history is a {type(history).__name__}, not a list of messages: nothing "
                      "to import", WHOLE, "(history)", "error")
            return []
        return list(history)

    def _parsed(self, text: str | bytes) -> Any:
        """The JSON value of the text, or None (with a finding) when it has none."""
        try:
            value = json.loads(text)
            if value is None:
                self.find("malformed", "the history's text is JSON null: nothing to import", WHOLE, "(history)",
                          "error")
            return value
        except UnicodeDecodeError as exc:
            why = f"is not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        except ValueError as exc:
            why = f"is not JSON ({exc})"
        except RecursionError:
            why = "is JSON nested too deeply to read"
        self.find("malformed", f"the history's text {why}: nothing to import", WHOLE, "(history)", "error")
        return None

    def _dumped(self, item: Any, i: int, dump: Callable[[Any], Any]) -> Any:
        try:
            return dump(item)
        except Exception as exc:  # the framework's serializer refuses it: it is no message of the framework
            self.find("not_a_message", f"item {i} is a {type(item).__name__}, not a {self.format} message "
                      f"({type(exc).__name__}: {str(exc)[:120]})", i, f"[{i}]", "error")
            return None

    def word(self, value: Any, what: str, position: int, path: str) -> str:
        """An id or a name: text (a number as its text); anything else is a finding and reads as ``""``."""
        if value is None or isinstance(value, str):
            return value or ""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        self.find("malformed", f"{what} is a {type(value).__name__}, not text: left out", position, path)
        return ""

    def field_list(self, value: Any, what: str, position: int, path: str) -> list[Any]:
        """A field that holds a list (None: empty); anything else is a finding and reads as empty."""
        if value is None:
            return []
        if isinstance(value, list | tuple):
            return list(value)
        self.find("malformed", f"{what} is a {type(value).__name__}, not a list: left out", position, path)
        return []

    def mapping(self, value: Any, what: str, position: int, path: str) -> Mapping[str, Any] | None:
        """A field that holds an object; anything else (but None) is a finding and reads as None."""
        if value is None or isinstance(value, Mapping):
            return value
        self.find("malformed", f"{what} is a {type(value).__name__}, not an object: left out", position, path)
        return None

    def content(self, value: Any, position: int, path: str) -> list[Any] | str:
        """Message content: text, or a list of blocks; any other value is a finding and is kept as JSON text."""
        if value is None:
            return ""
        if isinstance(value, str | list | tuple):
            return value if isinstance(value, str) else list(value)
        self.find("malformed", f"the content is a {type(value).__name__}, not text or a list: kept as its JSON text",
                  position, path)
        return dumps(value)

    def call(self, call_id: str, name: str, args: Any, index: int, position: int, path: str) -> ToolCallPart:
        """A call part; arguments as an object or as JSON text (never repaired)."""
        raw, why = ("{}", None) if args is None else (args, None) if isinstance(args, str) else _dumps(args)
        if why is not None:
            self.find("invalid_arguments", f"the arguments of call {call_id!r} cannot be written as JSON ({why})",
                      position, path)
            return ToolCallPart(call_id=call_id, name=name, arguments_raw=raw, arguments=None, index=index)
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
