"""OTLP/JSON documents walked down to their spans, whatever the text holds.

Theory of operation. An OTLP/JSON document is ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``
(the body of an OTLP/HTTP JSON export; a Collector's file exporter writes one per line). This module finds the
spans in it and hands each span's JSON object, with its place (``resourceSpans[0].scopeSpans[0].spans[3]``), to
a callback; the fields of a span are the callback's business (:mod:`agentnb.otel._spans`).

Two walks give the same spans:

- **text, span by span** (the usual case): the outer levels are read by hand with the standard library's
  ``raw_decode``, and each span is parsed, handed over and dropped, so a file of a million spans never sits in
  memory as one tree of JSON objects (that tree is four to five times the size of the text, and building it
  is most of the time an import takes);
- **objects**, for a document already parsed, and as the fallback of the first walk: the moment the text is
  anything but the expected shape (a key given twice, an alias such as ``resource_spans``, a list of documents, a
  wrong type), the walk by hand stops, what it read is dropped, and the text is parsed whole and walked here,
  where every departure from the shape is a :class:`Notes` line naming its place.

What cannot be read at all is a :class:`~agentnb.TranscriptError` naming why: empty text, text that is not
UTF-8 or not JSON, JSON nested too deeply for the parser, a path that is not a readable file. In a file of
several documents (JSON Lines) a line that is not JSON is a note and the other lines are read; such a file is
read a line at a time (:func:`file_lines`), so its text is never held whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, but not in typeshed's __all__
from pathlib import Path
from typing import Any

from ..exceptions import TranscriptError

NOTES_KEPT = 1000
"""How many notes a reading keeps word for word; past it, they are counted."""

_WS = re.compile(r"[ \t\n\r]*")
"""JSON's white space (RFC 8259, section 2)."""
_WS_BYTES = re.compile(rb"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_RESOURCE_KEYS = ("resourceSpans", "resource_spans")
_SCOPE_KEYS = ("scopeSpans", "instrumentationLibrarySpans", "scope_spans")


class Notes:
    """What a reading left out or repaired, each line about one trace (or the whole document)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        """``(trace id, text)``; the trace id is ``""`` for a note about the document."""
        self.more = 0
        """How many notes were not kept (past :data:`NOTES_KEPT`)."""

    def add(self, text: str, trace: str = "") -> None:
        """Note ``text`` about ``trace`` (``""``: about the document)."""
        if len(self.items) < NOTES_KEPT:
            self.items.append((trace, text))
        else:
            self.more += 1

    def extend(self, other: Notes) -> None:
        """Take over the notes of another reading."""
        for trace, text in other.items:
            self.add(text, trace)
        self.more += other.more

    def __len__(self) -> int:
        return len(self.items) + self.more

    def about(self, trace: str) -> list[str]:
        """The notes about ``trace`` and about the document, in order (and how many were not kept)."""
        out = [text for t, text in self.items if t in ("", trace)]
        if self.more:
            out.append(f"{self.more} more problems in the trace document (the first {NOTES_KEPT} are listed)")
        return out

    def summary(self, n: int = 3) -> str:
        """The first ``n`` notes in one sentence."""
        texts = [text for _, text in self.items[:n]]
        rest = len(self) - len(texts)
        return "; ".join(texts) + (f"; and {rest} more" if rest > 0 else "")


Convert = Callable[[str, Any, Notes], Any]
"""Called with each span's place, its JSON object and the notes to write to; returns what the span becomes
(None: nothing, the span is left out)."""


# -- the text -------------------------------------------------------------------------------------------------


def text_of(source: str | bytes | Path) -> str:
    """The text of a document given as text, bytes, or the path of a file.

    A ``str`` is a document when it starts (after white space) with ``{`` or ``[``, or is any other JSON value;
    otherwise it names a file.

    Raises:
        TranscriptError: the text is empty or not UTF-8, or the file is missing or cannot be read.
    """
    if isinstance(source, bytes):
        return _decoded(source, "the trace document")
    path = path_of(source)
    if path is None:
        assert isinstance(source, str)
        return source
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TranscriptError(f"no such file: {str(path)!r} (a string is read as OTLP/JSON when it starts "
                              "with '{' or '[', and as the path of a file otherwise)") from None
    except (OSError, ValueError) as exc:  # a directory, no permission, a name too long or holding a NUL
        raise TranscriptError(f"cannot read the trace file {str(path)!r}: {exc}") from None
    return _decoded(data, f"the trace file {str(path)!r}")


def path_of(source: str | Path) -> Path | None:
    """The file ``source`` names, or None when it is the text of a document (see :func:`text_of`).

    Raises:
        TranscriptError: ``source`` is a string of white space only.
    """
    if isinstance(source, Path):
        return source
    text = source.strip()
    if not text:
        raise TranscriptError("the trace document is empty (no text)")
    if text.startswith(("{", "[")) or _is_json(text):
        return None
    return Path(source)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _decoded(data: bytes, what: str, offset: int = 0) -> str:
    """``data`` as text; ``offset``: where it starts in the file (for the message)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{what} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {offset + exc.start}); "
                              "OTLP/JSON is UTF-8 text") from None


def text_chunks(text: str, convert: Convert, notes: Notes) -> Iterator[list[Any]]:
    """What ``convert`` makes of the spans in ``text``, a line at a time for JSON Lines (else all at once).

    Raises:
        TranscriptError: the text is empty, not JSON, or nested too deeply (raised before anything is given).
    """
    if not text.strip():
        raise TranscriptError("the trace document is empty (no text)")
    lines = _json_lines(text)
    if lines is not None:
        return walk_lines(lines, convert, notes)
    try:
        return iter([_unit(text, "", convert, notes)])
    except (ValueError, RecursionError) as exc:
        raise TranscriptError(f"the trace document {_why_not_json(exc)}") from None


def walk_lines(lines: Iterable[tuple[int, str]], convert: Convert, notes: Notes) -> Iterator[list[Any]]:
    """What ``convert`` makes of each line's spans, line by line; a line that is not JSON is a note."""
    for n, line in lines:
        try:
            yield _unit(line, f"line {n}: ", convert, notes)
        except (ValueError, RecursionError) as exc:
            notes.add(f"line {n} {_why_not_json(exc)}: left out")
            yield []


def file_lines(path: Path) -> Iterator[tuple[int, str]] | None:
    """The non-empty lines of a file of JSON Lines, read as they are needed; None when it is not one.

    The test is that of :func:`_json_lines`, made on the first lines only. None too when the file cannot be
    opened or its first lines are not UTF-8: :func:`text_of` then reads it whole, and says what is wrong.

    Raises:
        TranscriptError: (while the lines are read) a line that is not UTF-8.
    """
    try:
        with path.open("rb") as f:
            first: bytes | None = None  # kept as bytes, and tested last: a document may be one line of a GB
            for raw in f:
                if first is None:
                    if _WS_BYTES.fullmatch(raw):
                        continue
                    if not raw.endswith(b"\n"):
                        return None
                    first = raw
                elif raw.decode("utf-8").strip():
                    break
            else:
                return None
        return _lines_of(path) if _is_json(first.decode("utf-8")) else None
    except (OSError, ValueError):  # a decoding error is a ValueError
        return None


def _lines_of(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("rb") as f:
        offset = 0
        for n, raw in enumerate(f, 1):
            line = _decoded(raw, f"the trace file {str(path)!r}", offset).removesuffix("\n")
            offset += len(raw)
            if line.strip():
                yield n, line


def _why_not_json(exc: ValueError | RecursionError) -> str:
    if isinstance(exc, RecursionError):
        return "is JSON nested too deeply to read"
    return f"is not JSON ({exc})"


def _json_lines(text: str) -> Iterator[tuple[int, str]] | None:
    """The non-empty lines of a file of one document per line (JSON Lines), or None for one document.

    It is JSON Lines when there is more than one non-empty line and the first is a JSON value on its own (a
    pretty-printed document's first line is ``{``).
    """
    start = _ws(text, 0)
    end = text.find("\n", start)
    if end < 0 or not text[end:].strip() or not _is_json(text[start:end]):
        return None

    def lines() -> Iterator[tuple[int, str]]:
        pos, n = 0, 0
        while pos <= len(text):
            stop = text.find("\n", pos)
            stop = len(text) if stop < 0 else stop
            n += 1
            if text[pos:stop].strip():
                yield n, text[pos:stop]
            pos = stop + 1

    return lines()


def _unit(text: str, prefix: str, convert: Convert, notes: Notes) -> list[Any]:
    """One JSON value's spans: by hand if it has the expected shape, else parsed whole and walked as objects."""
    mine = Notes()
    out: list[Any] = []

    def keep(where: str, span: Any) -> None:
        made = convert(where, span, mine)
        if made is not None:
            out.append(made)

    try:
        end = _document(text, _ws(text, 0), prefix, keep)
        if _ws(text, end) != len(text):
            raise _Surprise  # more than one value: json.loads says what is wrong
    except (_Surprise, ValueError, RecursionError):  # a JSON error too: the parse of the whole text names it
        # what the walk by hand made and noted is dropped: the objects' walk starts again from the beginning
        mine, out = Notes(), []
        walk_objects(json.loads(text), prefix, convert, mine, out)
    notes.extend(mine)
    return out


def _ws(text: str, i: int) -> int:
    """Where the white space at ``i`` ends."""
    m = _WS.match(text, i)
    return m.end() if m is not None else i


class _Surprise(Exception):
    """The text is not in the shape the walk by hand reads: walk it as objects instead."""


def _document(text: str, i: int, prefix: str, keep: Callable[[str, Any], None]) -> int:
    """``{"resourceSpans": [{"scopeSpans": [{"spans": [span, ...]}, ...]}, ...], ...}``, one span at a time."""

    def span(at: int, r: int, s: int, x: int) -> int:
        if text[at:at + 1] != "{":
            raise _Surprise
        value, end = _DECODER.raw_decode(text, at)
        keep(f"{prefix}resourceSpans[{r}].scopeSpans[{s}].spans[{x}]", value)
        return int(end)

    def scope(at: int, r: int, s: int) -> int:
        return _object(text, at, {"spans": lambda n: _array(text, n, lambda p, x: span(p, r, s, x))})

    def resource(at: int, r: int) -> int:
        return _object(text, at, {"scopeSpans": lambda k: _array(text, k, lambda m, s: scope(m, r, s))})

    return _object(text, i, {"resourceSpans": lambda j: _array(text, j, resource)}, needs=True)


def _object(text: str, i: int, fields: dict[str, Callable[[int], int]], *, needs: bool = False) -> int:
    """Read the object at ``i``: the named fields by their readers, any other value skipped; its end.

    ``needs``: the object must hold one of the fields (a document without ``resourceSpans`` is noted by the
    objects' walk); inside a document a missing list is an empty one, as protobuf's JSON mapping leaves out
    empty repeated fields.
    """
    if text[i:i + 1] != "{":
        raise _Surprise
    i = _ws(text, i + 1)
    seen: set[str] = set()
    if text[i:i + 1] == "}":
        if needs:
            raise _Surprise
        return i + 1
    while True:
        if text[i:i + 1] != '"':
            raise _Surprise
        key, i = scanstring(text, i + 1)
        if key in seen or key in _ALIASES:
            raise _Surprise  # a key given twice (JSON's last one wins), or an alias: the objects' walk reads them
        seen.add(key)
        i = _ws(text, i)
        if text[i:i + 1] != ":":
            raise _Surprise
        i = _ws(text, i + 1)
        i = fields[key](i) if key in fields else _DECODER.raw_decode(text, i)[1]
        i = _ws(text, i)
        if text[i:i + 1] == "}":
            if needs and not seen & fields.keys():
                raise _Surprise
            return i + 1
        if text[i:i + 1] != ",":
            raise _Surprise
        i = _ws(text, i + 1)


_ALIASES = frozenset({*_RESOURCE_KEYS[1:], *_SCOPE_KEYS[1:]})


def _array(text: str, i: int, item: Callable[[int, int], int]) -> int:
    """Read the array at ``i``, each element by ``item(position, index)``; its end."""
    if text[i:i + 1] != "[":
        raise _Surprise
    i = _ws(text, i + 1)
    if text[i:i + 1] == "]":
        return i + 1
    n = 0
    while True:
        i = _ws(text, item(i, n))
        n += 1
        if text[i:i + 1] == "]":
            return i + 1
        if text[i:i + 1] != ",":
            raise _Surprise
        i = _ws(text, i + 1)


# -- the objects ----------------------------------------------------------------------------------------------


def walk_objects(doc: Any, prefix: str, convert: Convert, notes: Notes, out: list[Any]) -> None:
    """Add to ``out`` what ``convert`` makes of every span of a parsed document (or list of documents).

    Each departure from the shape of a document is a note naming its place.
    """
    if isinstance(doc, list):
        for n, item in enumerate(doc):
            walk_objects(item, f"{prefix}document {n}: ", convert, notes, out)
        return
    if not isinstance(doc, Mapping):
        notes.add(f"{prefix}not an OTLP/JSON document: a JSON {kind_of(doc)}, where an object with 'resourceSpans' "
                  "belongs")
        return
    key = next((k for k in _RESOURCE_KEYS if k in doc), None)
    if key is None:
        shown = ", ".join(repr(k) for k in list(doc)[:5]) or "none"
        notes.add(f"{prefix.removesuffix(': ') or 'the document'} has no 'resourceSpans' (its keys: {shown}): it "
                  "is not an OTLP/JSON trace export")
        return
    for r, rs in _items(doc[key], f"{prefix}resourceSpans", notes):
        scopes = next((rs[k] for k in _SCOPE_KEYS if k in rs), None)  # a list left out is an empty one
        for s, ss in _items(scopes, f"{prefix}resourceSpans[{r}].scopeSpans", notes):
            for x, span in _items(ss.get("spans"), f"{prefix}resourceSpans[{r}].scopeSpans[{s}].spans", notes):
                made = convert(f"{prefix}resourceSpans[{r}].scopeSpans[{s}].spans[{x}]", span, notes)
                if made is not None:
                    out.append(made)


def _items(value: Any, where: str, notes: Notes) -> Iterator[tuple[int, Any]]:
    """The elements of a list that should hold objects; other elements, or a value that is not a list, are noted."""
    if value is None:
        return
    if not isinstance(value, list):
        notes.add(f"{where} is a JSON {kind_of(value)}, not a list: left out")
        return
    for n, item in enumerate(value):
        if isinstance(item, Mapping):
            yield n, item
        else:
            notes.add(f"{where}[{n}] is a JSON {kind_of(item)}, not an object: left out")


def kind_of(value: Any) -> str:
    """A JSON value's type, in JSON's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return f"number ({value!r})"
    if isinstance(value, str):
        return f"string ({value[:40]!r})"
    return "array" if isinstance(value, list) else "object" if isinstance(value, Mapping) else type(value).__name__
