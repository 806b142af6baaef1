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


_MODULE_LINE = re.compile(r"^- `(?P<module>agentnb(?:\.\w+)+)` — (?P<what>\S.*?) Names: (?P<names>`.*`)\.$")


def public_modules() -> list[str]:
    """Every module of the package whose dotted path has no part with a leading underscore."""
    import pkgutil

    return sorted(m.name for m in pkgutil.walk_packages(anb.__path__, "agentnb.")
                  if not any(part.startswith("_") for part in m.name.split(".")[1:]))


def documented_modules(text: str) -> dict[str, list[str]]:
    section = text.split("\n## Modules\n", 1)[1] if "\n## Modules\n" in text else ""
    return {m["module"]: re.findall(r"`(\w+)`", m["names"])
            for line in section.splitlines() if (m := _MODULE_LINE.match(line))}


def test_every_public_module_and_its_names_are_listed_in_docs_api() -> None:
    """A module without a leading underscore in its path is public: docs/api.md lists it with its ``__all__``.

    A new module is private (``_name.py``) unless it is meant to be imported by its path; a public one gets its
    line, so the public face grows only on purpose."""
    import importlib

    documented = documented_modules(API_DOC.read_text(encoding="utf-8"))
    found = public_modules()
    assert sorted(documented) == found, (
        f"public modules not in docs/api.md: {sorted(set(found) - set(documented))}; "
        f"listed there but not public: {sorted(set(documented) - set(found))} (give a module a leading underscore "
        "unless users import it by its path)")
    for name in found:
        module = importlib.import_module(name)
        names = getattr(module, "__all__", None)
        assert names is not None, f"{name} is public and has no __all__"
        assert sorted(documented[name]) == sorted(names), f"docs/api.md's line for {name} differs from its __all__"
        for n in names:
            assert hasattr(module, n), f"{name}.__all__ names {n}, which it does not have"
            value = getattr(module, n)
            if isinstance(value, types.ModuleType):
                assert value.__name__ in found, f"{name}.{n} is the private module {value.__name__}"


def test_the_module_check_sees_a_new_public_module_and_a_changed_name() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    documented = documented_modules(text)
    assert "agentnb.providers.openai_chat" in documented and "render_request" in documented[
        "agentnb.providers.openai_chat"]
    assert "agentnb._engine" not in public_modules() and "agentnb.events" in public_modules()
    cut = text.replace("- `agentnb.stories` —", "- `agentnb.storie` —")
    assert "agentnb.stories" not in documented_modules(cut)
