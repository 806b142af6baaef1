r"""Framing of streamed HTTP bodies: Server-Sent Events and Gemini's JSON-array stream.

Theory of operation. The wire adapters parse *events* (one JSON object each); this module turns the bytes
of a streamed response body into those events, so the adapters never see framing:

- :func:`iter_sse` splits a ``text/event-stream`` body into :class:`SSEEvent` records following the WHATWG
  rules (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
  lines end with LF, CRLF or CR; ``data:`` lines of one event are joined with ``\n``; one leading space after
  the colon is dropped; lines starting with ``:`` are comments; a blank line dispatches the event. Unlike a
  strict browser parser, an event left without its terminating blank line at end of input is dispatched
  too: Anthropic's recorded streams end that way, and dropping the last event would lose ``message_stop``.
- :func:`iter_sse_json` decodes each event's data as JSON and stops at OpenAI's ``data: [DONE]`` sentinel.
  A final event that was cut mid-JSON (the connection broke) is dropped rather than raised, so the adapter
  sees a stream without its done signal and reports an incomplete turn; bad JSON anywhere else is an error.
- :func:`iter_json_array` decodes Gemini's ``streamGenerateContent`` body requested without ``alt=sse``:
  one JSON array whose elements arrive one at a time. Elements are yielded as soon as they are complete.

Input is any iterable of ``bytes`` or ``str`` chunks split anywhere (an HTTP client's ``iter_bytes()``, a
file, a list). Every function is linear in the input size: a buffer is scanned from where the previous scan
stopped, never from its start.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..exceptions import WireFormatError

__all__ = ["SSEEvent", "iter_json_array", "iter_sse", "iter_sse_json"]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched Server-Sent Event.

    Attributes:
        data: the joined ``data:`` lines.
        event: the ``event:`` field, or ``None`` when absent (OpenAI Chat, Gemini).
        id: the ``id:`` field, or ``None``.
        terminated: False for an event flushed at end of input without its blank line.
    """

    data: str
    event: str | None = None
    id: str | None = None
    terminated: bool = True


def iter_sse(chunks: Iterable[bytes | str]) -> Iterator[SSEEvent]:
    r"""Split a ``text/event-stream`` body into events.

    Example:
        >>> [e.data for e in iter_sse([b"data: a\r\n\r\ndata: b\n", b"data: c"])]
        ['a', 'b\nc']
    """
    data: list[str] = []
    event: str | None = None
    last_id: str | None = None
    has_fields = False
    for line, ended in _split_lines(chunks):
        if not line:
            if data:
                yield SSEEvent("\n".join(data), event, last_id, True)
            data, event, has_fields = [], None, False
            continue
        if line[0] == ":":
            continue
        name, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        has_fields = True
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id":
            last_id = value
        if not ended:
            break
    if has_fields and data:
        yield SSEEvent("\n".join(data), event, last_id, False)


def _split_lines(chunks: Iterable[bytes | str]) -> Iterator[tuple[str, bool]]:
    """Lines of the body, each with whether its terminator was seen (LF, CRLF or CR)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pending = ""
    skip_lf = False  # the previous chunk ended in CR: a LF starting this chunk belongs to it
    for chunk in chunks:
        try:
            text = decoder.decode(chunk) if isinstance(chunk, bytes | bytearray) else chunk
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"the stream is not UTF-8 ({exc.reason} at byte {exc.start} of a chunk)") from None
        if not text:
            continue
        if skip_lf:
            skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if text.endswith("\r"):
            skip_lf = True
        buf = pending + text
        lines = buf.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        pending = lines.pop()
        for line in lines:
            yield line, True
    try:
        pending += decoder.decode(b"", final=True)
    except UnicodeDecodeError:  # cut inside a multi-byte character: the stream broke there (the line is cut too)
        pass
    if pending:
        yield pending, False


def iter_sse_json(chunks: Iterable[bytes | str]) -> Iterator[dict[str, Any]]:
    r"""Decode each event's data as a JSON object; stop at ``[DONE]``.

    A cut final event (no blank line, data not valid JSON) is dropped: the stream broke there.

    Raises:
        WireFormatError: an event's data is not JSON (other than a cut final event).

    Example:
        >>> list(iter_sse_json(["data: {\"a\": 1}\n\n", "data: [DONE]\n\n"]))
        [{'a': 1}]
    """
    for ev in iter_sse(chunks):
        if ev.data == "[DONE]":
            return
        try:
            value = json.loads(ev.data)
        except ValueError as exc:
            if not ev.terminated:
                return
            raise WireFormatError(f"an SSE event's data is not JSON ({exc}): {ev.data[:200]!r}") from None
        if not isinstance(value, dict):
            raise WireFormatError(f"an SSE event's data is not a JSON object: {ev.data[:200]!r}")
        yield value


_STRUCTURE = re.compile(r'["{}\[\]]')
_IN_STRING = re.compile(r'["\\]')


class _ArrayScanner:
    """Finds where each top-level object of a JSON array ends, keeping its place between chunks."""

    __slots__ = ("buf", "depth", "in_string", "opened", "pos", "start")

    def __init__(self) -> None:
        self.buf = ""
        self.pos = 0  # where the scan goes on
        self.start = -1  # where the current element starts, or -1 between elements
        self.depth = 0
        self.in_string = False
        self.opened = False

    def feed(self, text: str) -> tuple[list[dict[str, Any]], bool]:
        """The elements completed by ``text``, and whether the array's closing ``]`` was reached."""
        keep = self.start if self.start >= 0 else self.pos  # drop what was consumed
        self.buf = self.buf[keep:] + text
        self.pos -= keep
        if self.start >= 0:
            self.start = 0
        if not self.opened and not self._open():
            return [], False
        out: list[dict[str, Any]] = []
        while True:
            if self.in_string:
                if not self._skip_string():
                    return out, False
                continue
            m = _STRUCTURE.search(self.buf, self.pos)
            if m is None:
                self.pos = len(self.buf)
                return out, False
            self.pos = m.end()
            ch = m.group()
            if ch == '"':
                self.in_string = True
            elif ch in "{[":
                if self.depth == 0:
                    if ch == "[":
                        raise WireFormatError("a JSON-array stream element is not an object")
                    self.start = m.start()
                self.depth += 1
            elif self.depth == 0:
                if ch == "]":
                    return out, True
                raise WireFormatError("unbalanced '}' in a JSON-array stream")
            else:
                self.depth -= 1
                if self.depth == 0:
                    out.append(self._element())

    def _open(self) -> bool:
        stripped = self.buf.lstrip()
        if not stripped:
            return False
        if stripped[0] != "[":
            raise WireFormatError(f"a JSON-array stream must start with '[', got {stripped[:40]!r}")
        self.buf, self.pos, self.opened = stripped[1:], 0, True
        return True

    def _skip_string(self) -> bool:
        m = _IN_STRING.search(self.buf, self.pos)
        if m is None:
            self.pos = len(self.buf)
            return False
        if m.group() == "\\":
            if m.end() >= len(self.buf):  # the escaped character is in the next chunk
                self.pos = m.start()
                return False
            self.pos = m.end() + 1
            return True
        self.in_string, self.pos = False, m.end()
        return True

    def _element(self) -> dict[str, Any]:
        try:
            value = json.loads(self.buf[self.start : self.pos])
        except ValueError as exc:
            raise WireFormatError(f"a JSON-array stream element is not JSON ({exc})") from None
        self.start = -1
        return value  # type: ignore[no-any-return]


def iter_json_array(chunks: Iterable[bytes | str]) -> Iterator[dict[str, Any]]:
    r"""Yield the elements of a streamed JSON array as each one completes (Gemini without ``alt=sse``).

    The scan keeps its place between chunks (inside a string or not, the nesting depth), so a large
    element split into many chunks is scanned once. An element cut by the end of input is dropped: the
    stream broke there.

    Raises:
        WireFormatError: the body is not a JSON array of objects.

    Example:
        >>> list(iter_json_array(['[{"a": 1}', ',\n{"b"', ': "}"}]']))
        [{'a': 1}, {'b': '}'}]
    """
    scanner = _ArrayScanner()
    decoder = codecs.getincrementaldecoder("utf-8")()
    for chunk in chunks:
        values, closed = scanner.feed(decoder.decode(chunk) if isinstance(chunk, bytes | bytearray) else chunk)
        yield from values
        if closed:
            return
