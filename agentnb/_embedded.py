"""The run an HTML export carries: its events as JSON Lines, gzip-compressed, in base64, in one inert element.

:func:`embedded_lines_text` and :func:`embedded_element` write the element (the export,
:mod:`agentnb._debugger.export`, puts it in every page, compressing in a second thread);
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

_OPEN = f'<script type="application/x-ndjson" id="{EMBEDDED_ID}" data-transcript="jsonl+gzip+base64">'
"""The element's opening tag (its attribute says what it holds: the JSON Lines of a transcript, not JSON)."""
_EMBEDDED = re.compile(re.escape(_OPEN.encode("ascii")) + rb"([A-Za-z0-9+/=]*)</script>")


def embedded_lines_text(events: list[BaseEvent]) -> bytes:
    """The JSON Lines the element holds, before compression (hidden characters written as JSON escapes)."""
    return "".join(visible(event_to_json(ev), json=True)[0] + "\n" for ev in events).encode("utf-8")


def embedded_element(packed: str) -> str:
    """The element around ``packed``: :func:`embedded_lines_text`, gzip-compressed, in base64."""
    return f"{_OPEN}{packed}</script>\n"


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
        return gzip.decompress(base64.b64decode(found[0], validate=True))
    except (ValueError, OSError, EOFError) as exc:
        raise TranscriptError(f"{path}: the transcript embedded in this HTML file is damaged ({exc})") from exc
