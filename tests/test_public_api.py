from __future__ import annotations

import re
import types
from pathlib import Path

import agentnb as anb

API_DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"
_LINE = re.compile(r"^- `anb\.(?P<name>\w+)` — (?P<what>\S.*)$")


def test_all_is_sorted_and_complete() -> None:
    assert anb.__all__ == sorted(anb.__all__)
    assert len(set(anb.__all__)) == len(anb.__all__)
    for name in anb.__all__:
        assert hasattr(anb, name), name


def test_star_import_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from agentnb import *", namespace)
    assert set(anb.__all__) <= set(namespace)


def test_nothing_is_public_by_accident() -> None:
    """A name the package binds is in ``__all__``, unless it is a submodule (reached by its path)."""
    stray = [name for name, value in vars(anb).items()
             if not name.startswith("_") and name not in anb.__all__ and not isinstance(value, types.ModuleType)
             and name not in ("annotations", "TYPE_CHECKING")]
    assert not stray, f"agentnb binds {stray} outside __all__: add them to __all__ and docs/api.md, or drop them"


def _draft(name: str) -> str:
    doc = (getattr(anb, name).__doc__ or "").strip().splitlines()
    return f"- `anb.{name}` — {doc[0].rstrip('.') if doc else '...'}"


def test_every_public_name_has_its_line_in_docs_api() -> None:
    documented = [m["name"] for line in API_DOC.read_text(encoding="utf-8").splitlines() if (m := _LINE.match(line))]
    missing = [name for name in anb.__all__ if name not in documented]
    assert not missing, "docs/api.md lacks a line for each of these; drafts from their docstrings:\n" + "\n".join(
        _draft(name) for name in missing)
    extra = sorted(set(documented) - set(anb.__all__))
    assert not extra, f"docs/api.md documents {extra}, which agentnb.__all__ does not have"
    twice = sorted({n for n in documented if documented.count(n) > 1})
    assert not twice, f"docs/api.md documents {twice} more than once"


def test_public_names_have_docstrings_with_usage() -> None:
    for name in ("Loop", "Run", "ScriptedModel", "Transcript", "tool"):
        doc = getattr(anb, name).__doc__ or ""
        assert "Example" in doc, name
