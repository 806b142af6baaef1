"""Masking a stream of text fragments without leaking a secret split over them.

Streams. A secret can arrive split over fragments (``"sk-ab"`` + ``"cdef..."``), so masking fragment by
fragment would leak it in pieces. :class:`StreamRedactor` holds back the tail of a stream that could still
become a secret (an object key that may still name a secret, the open value of a secret key, ``sk-`` and the
start of its body, a prefix of a registered literal) and releases it, masked or not, once it is decided;
ordinary arguments and text stream through unchanged. A fragment event therefore carries the decided text
(its ``length`` counts what is shown); the text still held when the turn ends is in the turn itself. A held
tail longer than :data:`MAX_HOLD` characters is masked whole and the rest of that value swallowed, so a
hostile 1 MB "key" costs linear time (``bench/redaction.py``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .mask import field_pattern, redact_json_text
from .patterns import KEY_NAMES, KEY_WORDS, MASK, PATTERNS, registered_literals

MAX_HOLD = 1024
"""The most characters a :class:`StreamRedactor` holds back before it masks them whole."""

# What an unfinished instance of each pattern looks like at the end of a stream (over-approximations: holding
# a character back too long only delays it; letting the start of a key through would leak it).
_OPEN_TAIL = re.compile(
    r"s(?:k(?:-[A-Za-z0-9_\-]*)?)?\Z"
    r"|A(?:I(?:z(?:a[0-9A-Za-z_\-]*)?)?)?\Z"
    r"|(?i:\bb(?:e(?:a(?:r(?:e(?:r(?:\s+[A-Za-z0-9._~+/\-]*=*)?)?)?)?)?)?)\Z"
    r"|(?i:[?&][a-z_]{0,7}(?:=[^&\s\"']*)?)\Z"
)
_KEY_TAIL = re.compile(r'"([A-Za-z0-9_\-]{0,64})("\s*(?::\s*)?)?\Z')
"""An object key still arriving (or just closed) at the end of a stream: held only if it may name a secret."""
_TOKEN_BODY = re.compile(r"[^\s\"'&,}\]]*")
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*')


@lru_cache(maxsize=256)
def _key_prefixes(names: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """Secret key names (lower case) and every prefix of them."""
    full = frozenset({*KEY_NAMES, *(n.lower() for n in names)})
    return full, frozenset(n[:i] for n in full for i in range(len(n) + 1))


@lru_cache(maxsize=256)
def _open_field(names: frozenset[str]) -> re.Pattern[str]:
    """An unfinished value of a secret key at the end of a stream (a string, a number, ``true``/``false``)."""
    extra = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    keys = f"{KEY_WORDS}|{extra}" if extra else KEY_WORDS
    return re.compile(rf'"(?i:{keys})"\s*:\s*(?:"(?:[^"\\]|\\.)*\\?|-?[\d.eE+\-]*|[a-z]*)\Z')


class StreamRedactor:
    """Masks secrets in a stream of text fragments, holding back what could still become one.

    Args:
        names: keys whose JSON string values are secret (a tool's secret parameters), besides the keys that
            name credentials.

    Example:
        >>> r = StreamRedactor(frozenset({"token"}))
        >>> [r.feed(f) for f in ['{"q": "hi", "tok', 'en": "abc', 'def", "n": 1}']]
        ['{"q": "hi", ', '', '"token": "[REDACTED]", "n": 1}']
        >>> r = StreamRedactor()
        >>> "".join(r.feed(f) for f in ["use sk-ab", "cdefgh1234", " now"])
        'use [REDACTED] now'
    """

    __slots__ = ("_held", "_names", "_prev", "_swallow")

    def __init__(self, names: frozenset[str] = frozenset()) -> None:
        self._held = ""
        self._prev = ""
        """The last non-blank character released (tells a key's quote from a value's)."""
        self._names = names
        self._swallow: str | None = None
        """``"string"`` or ``"token"`` while the rest of an over-long secret is dropped."""

    @property
    def held(self) -> str:
        """The text received but not released yet (it may still become a secret)."""
        return self._held

    def _key_cut(self, text: str, cut: int) -> int:
        """Hold an object key at the end of the stream while it may still be a secret key."""
        m = _KEY_TAIL.search(text)
        if m is None or m.start() >= cut:
            return cut
        before = text[: m.start()].rstrip()
        prev = before[-1] if before else self._prev
        if prev not in ("{", ",", ""):  # after ':' or '[' the quote opens a value, not a key
            return cut
        names, prefixes = _key_prefixes(self._names)
        name = m.group(1).lower()
        if (name in names) if m.group(2) else (name in prefixes):
            return m.start()
        return cut

    def feed(self, fragment: str) -> str:
        """Take the next fragment; return the text now decided, masked (possibly empty)."""
        text = self._held + fragment
        if self._swallow is not None:
            text = self._skip(text)
            if self._swallow is not None:
                return ""
        cut = self._cut(text)
        if len(text) - cut > MAX_HOLD:
            return self._overflow(text, cut)
        ready, self._held = text[:cut], text[cut:]
        if not ready:
            return ""
        last = ready.rstrip()
        if last:
            self._prev = last[-1]
        return redact_json_text(ready, self._names)

    def _cut(self, text: str) -> int:
        """Where the undecided tail of ``text`` begins (``len(text)`` when all of it is decided)."""
        cut = len(text)
        m = _OPEN_TAIL.search(text)
        if m is not None:
            cut = m.start()
        if '"' in text:
            cut = self._key_cut(text, cut)
        if '"' in text:
            m = _open_field(self._names).search(text)
            if m is not None:
                cut = min(cut, m.start())
        for literal in registered_literals:
            start = max(0, len(text) - len(literal) + 1)
            pos = text.find(literal[0], start)
            while pos != -1 and pos < cut:
                if literal.startswith(text[pos:]):
                    cut = pos
                    break
                pos = text.find(literal[0], pos + 1)
        # A complete match that crosses the cut must stay whole: hold it back from its start.
        head = text[:cut]
        if cut < len(text):
            for pattern, _ in PATTERNS:
                for m in pattern.finditer(text, max(0, cut - 512)):
                    if m.start() < cut < m.end():
                        cut = m.start()
            if '"' in head:
                for m in field_pattern(self._names).finditer(text, max(0, cut - MAX_HOLD)):
                    if m.start() < cut < m.end():
                        cut = m.start()
        return cut

    def _overflow(self, text: str, cut: int) -> str:
        """The held tail grew past MAX_HOLD: release what is decided, mask the tail, drop the rest of it."""
        tail = text[cut:]
        field = _open_field(self._names).match(tail)
        prefix = redact_json_text(text[:cut], self._names)
        opener = re.match(r'"[^"]*"\s*:\s*"', tail) if field is not None else None
        if opener is not None:
            self._held, self._swallow = "", "string"
            return prefix + opener.group(0) + MASK
        self._held, self._swallow = "", "token"
        return prefix + MASK

    def _skip(self, text: str) -> str:
        """Drop the rest of a swallowed value; what follows it is processed as usual."""
        if self._swallow == "string":
            end = _STRING_BODY.match(text)
            assert end is not None
            stop = end.end()
            if stop >= len(text) or text[stop] == "\\":
                self._held = text[stop:]  # a trailing backslash escapes the next fragment's first character
                return ""
        else:
            end = _TOKEN_BODY.match(text)
            assert end is not None
            stop = end.end()
            if stop >= len(text):
                self._held = ""
                return ""
        self._swallow = None
        self._held = ""
        return text[stop:]
