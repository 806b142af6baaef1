"""The run an HTML export carries: its events as JSON Lines, gzip-compressed, in base64, in one inert element.

The lines are cut into pages of :data:`PAGE_LINES` events, each compressed on its own and written on a line of
its own, so the page reads one page to show one event. :func:`embedded_pages`, :func:`packed` and
:func:`embedded_element` write the element (the export, :mod:`agentnb._debugger.export`, puts it in every page,
compressing the pages in worker threads);
:func:`embedded_lines` reads the JSON Lines back out of a page (``Transcript.load``, :mod:`agentnb._transcript`,
then reads them as it reads a ``.jsonl`` file, with the same checks). Below both, so neither imports the other.
An element of type ``application/x-ndjson`` is never run by a browser, and base64 holds nothing ``</script>``
or a hidden character could hide in. Inside, every invisible or direction-changing character is written as its
JSON escape (:func:`agentnb._visible.visible`), which reads back as the same character: the page may show an
event's line as it is (an export's cards past its budget do, :mod:`agentnb._debugger.bundle`).
"""

from __future__ import annotations

import base64
import codecs
import gzip
import re
from pathlib import Path

from ._visible import visible
from .events import BaseEvent, event_to_json
from .exceptions import TranscriptError

EMBEDDED_ID = "agentnb-transcript"
"""The id of the element of an HTML export that holds the run's events."""

PAGE_LINES = 10_000
"""Events per page of the element: each page is its own gzip member in base64, the pages one per line, so the
page inflates only the page of an event it shows (a few megabytes, not a long run's whole log)."""

_OPEN = f'<script type="application/x-ndjson" id="{EMBEDDED_ID}" data-transcript="jsonl+gzip+base64"'
"""The element's opening tag (its attribute says what it holds: the JSON Lines of a transcript, not JSON)."""
_EMBEDDED = re.compile(re.escape(_OPEN.encode("ascii"))
                       + rb'(?: data-page-lines="[0-9]+")?>([A-Za-z0-9+/=\n]*)</script>')
"""The element, paged or not (an export made before the pages holds one)."""


def embedded_pages(events: list[BaseEvent]) -> list[bytes]:
    """The JSON Lines the element holds, page by page, before compression (hidden characters as JSON escapes)."""
    page_lines = PAGE_LINES
    lines = [visible(event_to_json(ev), json=True)[0] + "\n" for ev in events]
    return ["".join(lines[i:i + page_lines]).encode("utf-8") for i in range(0, len(lines), page_lines)] or [b""]


def packed(data: bytes) -> str:
    """``data`` gzip-compressed (level 6, no timestamp: the same bytes each time), in base64.

    Each page of the element, and the export's other blocks (``data-encoding="gzip+base64"``), which the page
    inflates alike.
    """
    return base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii")


def embedded_element(pages: list[str]) -> str:
    """The element around the pages of :func:`embedded_pages`, each :func:`packed`."""
    body = "\n".join(pages)
    return f'{_OPEN} data-page-lines="{PAGE_LINES}">{body}</script>\n'


def is_html(head: bytes) -> bool:
    """True when a file's first bytes are an HTML document's."""
    start = head.removeprefix(codecs.BOM_UTF8).lstrip().lower()
    return start.startswith((b"<!doctype html", b"<html"))


def embedded_lines(page: bytes, path: str | Path) -> bytes:
    """The JSON Lines an HTML export embeds (:func:`embedded_element`)."""
    found = _EMBEDDED.findall(page)
    if len(found) != 1:
        what = "several transcripts" if found else "no transcript"
        raise TranscriptError(f"{path}: an HTML file with {what} embedded (an agentnb export holds one run's "
                              "events in <script id=\"agentnb-transcript\">; exports made before it was added "
                              "do not)")
    try:
        return b"".join(_inflated(page) for page in found[0].split(b"\n"))
    except (ValueError, OSError, EOFError) as exc:
        raise TranscriptError(f"{path}: the transcript embedded in this HTML file is damaged ({exc})") from exc


def _inflated(page: bytes) -> bytes:
    if not page:  # even no events make a gzip member: an empty page lost its text
        raise ValueError("a page is empty")
    return gzip.decompress(base64.b64decode(page, validate=True))
