"""agentnb._visible: no invisible or direction-changing character survives, and visible text comes back as itself.

The oracle below is written from the Unicode definitions (general categories, and the default-ignorable code
points of DerivedCoreProperties.txt), not from the module's own tables, so the two can disagree.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentnb._visible import FLAG, hides, visible

_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"}
_DEFAULT_IGNORABLE = [  # DerivedCoreProperties.txt, Default_Ignorable_Code_Point
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
]
_GLYPH_CHOICE = {"\ufe0e", "\ufe0f"}  # text or emoji presentation of the character before: shown as it is


def hidden(ch: str) -> bool:
    """Whether a person could not see ``ch`` for what it is (the definition the module promises)."""
    if ch in "\n\t" or ch in _GLYPH_CHOICE:
        return False
    cp = ord(ch)
    return unicodedata.category(ch) in _CATEGORIES or any(lo <= cp <= hi for lo, hi in _DEFAULT_IGNORABLE)


SPEC = [  # every character the issue names, and neighbours of each kind
    *"\u202a\u202b\u202c\u202d\u202e", *"\u2066\u2067\u2068\u2069", "\u200e", "\u200f", "\u061c",
    *"\u200b\u200c\u200d", "\u2060", "\ufeff", "\x00", "\x07", "\x1b", "\r", "\x7f", "\x85", "\u2028", "\u2029",
    "\u00ad", "\U000e0041", "\U000e0100", "\ufe00", "\u3164", "\u034f", "\ud800", "\udfff",
]
tricky = st.sampled_from([*SPEC, "\n", "\t", " ", "\u00a0", "\u3000", "\ufe0f", "\ue000", "⟨", "⟩", "U", "+",
                          "a", "1", "é", "中", "😀", "\u05d0", "\u0627"])
chars = st.one_of(st.characters(), st.characters(categories=["Cc", "Cf", "Cs", "Cn", "Zl", "Zp", "Zs", "Mn"]),
                  tricky)
texts = st.text(alphabet=chars, max_size=60)
shown_chars = chars.filter(lambda ch: not hidden(ch))


def unescape(shown: str) -> str:
    return re.sub(r"⟨U\+([0-9A-F]{4,6})⟩", lambda m: chr(int(m.group(1), 16)), shown)


@given(texts)
def test_no_invisible_or_direction_changing_character_survives(text: str) -> None:
    for json_form in (False, True):
        shown, changed = visible(text, json=json_form)
        assert not [ch for ch in shown if hidden(ch)], (text, shown)
        assert changed == any(hidden(ch) for ch in text)
        assert visible(shown, json=json_form) == (shown, False)  # written out once is written out for good


@given(st.text(alphabet=shown_chars, max_size=60))
def test_visible_text_comes_back_as_itself(text: str) -> None:
    shown, changed = visible(text)
    assert shown is text and not changed
    assert visible(text, json=True) == (text, False)


@given(texts)
def test_the_written_out_form_says_exactly_which_characters_were_there(text: str) -> None:
    if "⟨" in text:  # a literal "⟨U+…⟩" in the text reads like a written-out character: not decodable
        return
    assert unescape(visible(text)[0]) == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_json_written_out_parses_back_to_the_same_value(value: Any) -> None:
    for indent in (None, 2):
        text = json.dumps(value, ensure_ascii=False, indent=indent)
        shown, _ = visible(text, json=True)
        assert not [ch for ch in shown if hidden(ch)]
        assert json.loads(shown) == value  # what a person sends back from the approvals pane is what was there


@given(json_values)
def test_hides_says_whether_any_key_or_text_inside_a_value_would_change(value: Any) -> None:
    def strings(v: Any) -> list[str]:
        if isinstance(v, str):
            return [v]
        if isinstance(v, dict):
            return [s for k, x in v.items() for s in (*strings(k), *strings(x))]
        if isinstance(v, list):
            return [s for x in v for s in strings(x)]
        return []

    assert hides(value) == any(hidden(ch) for s in strings(value) for ch in s)


@pytest.mark.parametrize("ch", SPEC, ids=lambda ch: f"U+{ord(ch):04X}")
def test_every_character_the_issue_names_is_written_out_by_code_point(ch: str) -> None:
    assert visible(f"a{ch}b") == (f"a⟨U+{ord(ch):04X}⟩b", True)
    shown, changed = visible(json.dumps(f"a{ch}b", ensure_ascii=False), json=True)
    assert changed or ord(ch) < 0x20  # json.dumps writes C0 controls as escapes already
    assert json.loads(shown) == f"a{ch}b"


def test_the_override_of_the_issue() -> None:
    assert visible("\u202e0987654321\u202c") == ("⟨U+202E⟩0987654321⟨U+202C⟩", True)
    assert visible('"\u202e0987654321\u202c"', json=True) == ('"\\u202e0987654321\\u202c"', True)
    assert visible('"\U000e0041"', json=True) == ('"\\udb40\\udc41"', True)  # beyond the BMP: a surrogate pair
    assert FLAG == "contains invisible or direction-changing characters"


def test_what_stays_as_it_is() -> None:
    for text in ("line\nbreak\tand tab", "18 °C, 42 €", "non\u00a0breaking", "☀️ emoji", "שלום", "مرحبا", "中文",
                 "\ue000 private use", ""):
        assert visible(text) == (text, False), text
