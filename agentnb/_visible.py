r"""Text made safe to show a person: every invisible or direction-changing character written as its code point.

Theory of operation. What a person approves must be what runs. A call's argument ``"\u202e0987654321\u202c"``
holds a right-to-left override: a browser draws it as ``1234567890`` while the tool receives ``0987654321``. A
zero-width space, a word joiner or a tag character (U+E0000 block) is not drawn at all, so two arguments that
look the same can differ, and a payload can hide inside one that looks short. So everything the debugger shows
-- cards, timeline rows, the approvals pane, the static view of a saved notebook, the one-file export -- goes
through :func:`visible`, which writes each such character as ``⟨U+202E⟩`` (or, inside JSON a person may edit and
send back, as the JSON escape ``\u202e``, which parses back to the very same text) and says whether it wrote
any, so the view can flag the value with :data:`FLAG`.

Which characters: those of the Unicode categories ``Cc`` (controls; line feed and tab excepted: they are laid
out as what they are), ``Cf`` (format: the bidirectional embeddings, overrides, isolates and marks U+202A-U+202E,
U+2066-U+2069, U+200E, U+200F, U+061C; the zero-width U+200B-U+200D, U+2060, U+FEFF; the soft hyphen; tags),
``Zl`` and ``Zp`` (line and paragraph separators), ``Cs`` (lone surrogates), ``Cn`` (unassigned here, perhaps a
format character in the browser's newer Unicode); and the other default-ignorable code points, which a browser
draws as nothing (the combining grapheme joiner, Hangul fillers, Mongolian variation selectors, variation
selectors U+FE00-U+FE0D and U+E0100-U+E01EF). Not escaped: U+FE0E and U+FE0F, which choose the text or emoji
glyph of the character before them (``☀️``) and carry no more than that; spaces of category ``Zs`` (visible as
space); private-use characters (drawn as a box or a glyph).

Text without any of these comes back as the very same string, and the check that says so is one C-level pass
(``str.isprintable``) for most text, so the function can sit under every escape of the debugger.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

FLAG = "contains invisible or direction-changing characters"
"""The warning a view shows next to a value that :func:`visible` changed."""

_KEPT_CONTROLS = frozenset("\n\t")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})

_IGNORABLE_PRINTABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0d\uffa0\U000e0100-\U000e01ef]"
)
"""Default-ignorable code points that ``str.isprintable`` calls printable (letters and marks drawn as nothing)."""

_NOT_PLAIN = re.compile("[^\x20-\x7e\n\t]")
"""Every character that is not printable ASCII, line feed or tab: the candidates the slow path looks at."""

_ASCII_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
"""The hidden characters of ASCII text."""


def _hidden(ch: str) -> bool:
    if ch in _KEPT_CONTROLS:
        return False
    return unicodedata.category(ch) in _HIDDEN_CATEGORIES or _IGNORABLE_PRINTABLE.match(ch) is not None


@lru_cache(maxsize=4096)
def _mark(ch: str) -> str:
    return f"⟨U+{ord(ch):04X}⟩" if _hidden(ch) else ch


@lru_cache(maxsize=4096)
def _json_mark(ch: str) -> str:
    if not _hidden(ch):
        return ch
    cp = ord(ch)
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    cp -= 0x10000  # JSON writes a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"


def _plain(text: str) -> bool:
    """No character of ``text`` is hidden (cheap for the usual text: C-level passes only)."""
    if text.isascii():  # known without a pass: most text the debugger shows
        return text.isprintable() or _ASCII_CONTROL.search(text) is None
    if not (text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable()):
        # a space of category Zs or a private-use character is "not printable" to Python but shown: look closer
        return not any(_hidden(m.group()) for m in _NOT_PLAIN.finditer(text))
    return _IGNORABLE_PRINTABLE.search(text) is None


def visible(text: str, *, json: bool = False) -> tuple[str, bool]:
    r"""``text`` with every invisible or direction-changing character written out, and whether there was one.

    Args:
        text: any text.
        json: write each one as a JSON escape (``\u202e``) instead of ``⟨U+202E⟩``: for JSON text a person may
            edit and send back (inside a JSON string the escape stands for the character itself).

    Returns:
        ``(shown, changed)``: ``shown`` is ``text`` itself when ``changed`` is False.

    Example:
        >>> visible("\u202e0987654321\u202c")
        ('⟨U+202E⟩0987654321⟨U+202C⟩', True)
        >>> visible('{"n": "\u202e1"}', json=True)
        ('{"n": "\\u202e1"}', True)
        >>> visible("refund 42 €, line\nbreak")
        ('refund 42 €, line\nbreak', False)
    """
    if _plain(text):
        return text, False
    mark = _json_mark if json else _mark
    return _NOT_PLAIN.sub(lambda m: mark(m.group()), text), True


def hides(value: Any) -> bool:
    """Whether :func:`visible` would change any text inside ``value`` (keys and strings at any depth)."""
    if isinstance(value, str):
        return visible(value)[1]
    if isinstance(value, dict):
        return any(hides(k) or hides(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(hides(v) for v in value)
    return False


__all__ = ["FLAG", "hides", "visible"]
