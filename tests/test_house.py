"""The shape of the house (docs/contributing.md): small modules, no function too complex to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agentnb"
MAX_LINES = 600
"""A module longer than this is split by responsibility (docs/contributing.md)."""

MODULES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_is_found() -> None:
    assert len(MODULES) > 50 and (PACKAGE / "_engine" / "fold.py") in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_longer_than_the_limit(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines; split it by responsibility"


def test_no_function_waives_the_complexity_rule() -> None:
    waived = [f"{p.relative_to(PACKAGE)}:{i}" for p in MODULES
              for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "noqa: C901" in line]
    assert waived == [], f"split these functions instead of waiving ruff's complexity rule: {waived}"


RUN_MAX_LINES = 300
"""``Run`` is the loop (decide, perform through a port, receive, append) and its public methods; what is not the
loop lives in the driver's ports (docs/contributing.md)."""


def test_the_run_is_the_loop_and_its_public_methods() -> None:
    tree = ast.parse((PACKAGE / "_run.py").read_text(encoding="utf-8"))
    run = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Run")
    lines = run.end_lineno - run.lineno + 1 if run.end_lineno is not None else 0
    assert 0 < lines <= RUN_MAX_LINES, f"Run has {lines} lines; move what is not the loop into agentnb/_driver/"
    private = [f.name for f in run.body if isinstance(f, ast.FunctionDef) and f.name.startswith("_")
               and not f.name.startswith("__") and f.name not in ("_step", "_started", "_debugger",
                                                                  "_repr_mimebundle_", "_ipython_display_")]
    assert private == [], f"Run's private helpers belong in a port of agentnb/_driver/: {private}"


def _private_imports(path: Path) -> list[str]:
    """``from <an agentnb module> import _name``: a private name used outside its module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("agentnb")):
            for alias in node.names:
                name = alias.name
                if name.startswith("_") and not name.startswith("__"):
                    if node.level:
                        base = path.parent
                        for _ in range(node.level - 1):
                            base = base.parent
                    else:
                        base = PACKAGE.parent
                    base = base.joinpath(*(node.module or "").split(".")) if node.module else base
                    if not ((base / f"{name}.py").exists() or (base / name).is_dir()):  # a module is no name
                        found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports {name}")
    return found


def test_no_private_name_is_imported_from_another_module() -> None:
    """A name with a leading underscore stays in its module; what another module needs is named without one (a
    private module's names are private already, by its own underscore)."""
    crossing = [hit for p in MODULES for hit in _private_imports(p)]
    assert crossing == [], f"drop the underscore of these names in their module (or keep them there): {crossing}"


def test_the_private_import_check_sees_one(tmp_path: Path) -> None:
    sample = PACKAGE / "_engine" / "fold.py"
    text = sample.read_text(encoding="utf-8")
    assert _private_imports(sample) == []
    probe = PACKAGE / "_engine" / "_probe_private_import.py"
    probe.write_text(text + "\nfrom .calls import _hidden  # noqa\n", encoding="utf-8")
    try:
        assert [h.split(" imports ")[1] for h in _private_imports(probe)] == ["_hidden"]
    finally:
        probe.unlink()
