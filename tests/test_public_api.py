from __future__ import annotations

import agentnb as anb


def test_all_is_sorted_and_complete() -> None:
    assert anb.__all__ == sorted(anb.__all__)
    for name in anb.__all__:
        assert hasattr(anb, name), name


def test_public_names_have_docstrings_with_usage() -> None:
    for name in ("Loop", "Run", "ScriptedModel", "Transcript", "tool"):
        doc = getattr(anb, name).__doc__ or ""
        assert "Example" in doc, name
