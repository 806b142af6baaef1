"""Every exception agentnb defines is in the tree drawn in :mod:`agentnb.exceptions`, under the base it has.

The test imports every module of the package (a module whose optional dependency is missing is skipped, and
named), collects the classes each defines, and holds them to the two drawings in the module docstring of
``agentnb/exceptions.py``: the errors under ``AgentnbError``, the warnings under ``UserWarning``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from functools import cache
from types import ModuleType

import agentnb
import agentnb._states
import agentnb.exceptions


@cache
def _modules() -> tuple[tuple[ModuleType, ...], tuple[str, ...]]:
    """Every module of the package, and the ones skipped because an optional dependency is missing."""
    found, skipped = [], []
    for info in pkgutil.walk_packages(agentnb.__path__, "agentnb."):
        try:
            found.append(importlib.import_module(info.name))
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("agentnb"):
                raise
            skipped.append(f"{info.name} (needs {exc.name})")
    return tuple(found), tuple(skipped)


def _defined(kind: type[BaseException]) -> dict[str, type[BaseException]]:
    """The subclasses of ``kind`` the package defines, by name."""
    out: dict[str, type[BaseException]] = {}
    for module in _modules()[0]:
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, kind) and obj.__module__ == module.__name__:
                assert out.get(name, obj) is obj, f"two exception classes named {name}"
                out[name] = obj
    return out


_ROW = re.compile(r"(?P<name>[A-Z]\w+)\b(?P<rest>.*)")
"""What follows a branch (``├── `` or ``└── ``): the class name, then its description."""


def _drawing(root: str) -> dict[str, tuple[str | None, str]]:
    """``{class name: (drawn parent, the rest of its line)}`` of the tree whose root is ``root``."""
    doc = agentnb.exceptions.__doc__ or ""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == root)
    base = len(lines[start]) - len(lines[start].lstrip())
    tree: dict[str, tuple[str | None, str]] = {root: (None, "")}
    stack = [root]
    for line in lines[start + 1:]:
        if not line.strip():
            break
        if "── " not in line:
            continue  # a description carried on to the next line
        at = line.index("── ") + 3
        depth = (at - base) // 4
        m = _ROW.match(line[at:])
        assert m is not None, line
        del stack[depth:]
        tree[m["name"]] = (stack[-1], m["rest"].strip())
        stack.append(m["name"])
    return tree


def test_every_module_is_imported() -> None:
    modules, skipped = _modules()
    assert len(modules) > 100
    assert all(not s.startswith("agentnb._engine") for s in skipped), skipped  # the core needs no extra


def test_every_error_is_an_agentnb_error_drawn_under_its_base() -> None:
    errors = {n: c for n, c in _defined(Exception).items() if not issubclass(c, Warning)}
    tree = _drawing("AgentnbError")
    problems = []
    for name, cls in sorted(errors.items()):
        if name.startswith("_"):
            continue  # control flow inside one module: see the test below
        if not issubclass(cls, agentnb.AgentnbError):
            problems.append(f"{cls.__module__}.{name} does not derive from AgentnbError")
        elif name not in tree:
            problems.append(f"{cls.__module__}.{name} is not drawn in the tree of agentnb.exceptions")
        elif name != "AgentnbError":
            parent = tree[name][0]
            if parent not in [b.__name__ for b in cls.__bases__]:
                problems.append(f"{name} is drawn under {parent}, but its bases are "
                                f"{', '.join(b.__name__ for b in cls.__bases__)}")
    assert not problems, "\n".join(problems)


def test_a_private_exception_never_leaves_its_module() -> None:
    """A class like ``values._Fail`` carries a failure to the function that turns it into a public error."""
    for name, cls in _defined(Exception).items():
        if name.startswith("_"):
            source = inspect.getsource(inspect.getmodule(cls))  # type: ignore[arg-type]
            assert re.search(rf"except\s*(\([^)]*)?\b{name}\b", source), f"{cls.__module__}.{name} is not caught there"


def test_the_drawing_names_only_classes_of_the_exceptions_module() -> None:
    tree = _drawing("AgentnbError")
    for name, (parent, _) in tree.items():
        home = agentnb._states if name == "IllegalTransition" else agentnb.exceptions  # beside the table it enforces
        cls = getattr(home, name, None)
        assert inspect.isclass(cls) and issubclass(cls, agentnb.AgentnbError), f"{name} is drawn but not defined"
        assert cls.__module__ == home.__name__, name
        assert parent is None or parent in [b.__name__ for b in cls.__bases__], name
    defined = {n for n, c in vars(agentnb.exceptions).items() if inspect.isclass(c) and issubclass(c, Exception)}
    assert defined == set(tree) - {"IllegalTransition"}


def test_every_warning_is_drawn_with_its_module() -> None:
    warnings_ = _defined(Warning)
    tree = _drawing("UserWarning")
    assert set(warnings_) == set(tree) - {"UserWarning"}
    for name, cls in warnings_.items():
        parent, rest = tree[name]
        assert parent in [b.__name__ for b in cls.__bases__], name
        assert rest.startswith(f"({cls.__module__})"), f"{name}: the drawing should name {cls.__module__}"
