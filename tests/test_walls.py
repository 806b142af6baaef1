"""The layer walls of the design (imports point one way, downwards), held by reading every module's imports.

Theory of operation. Every module of ``agentnb/`` is parsed with :mod:`ast` (nothing is imported) and each
``import``/``from ... import`` becomes an :class:`Edge`: module-level, lazy (inside a function) or typing (inside
``if TYPE_CHECKING:``). All three count: a lazy or typing-only import still says "this module knows that one",
and a circle closed by one is still a circle. Relative imports are resolved, and ``from pkg import name`` points
at the submodule ``pkg.name`` when there is one, else at ``pkg``.

:data:`LAYERS` puts every module in a layer (a test fails for a module it does not place); the rules below
name the walls between layers, and :func:`test_no_import_circle` forbids circles anywhere. Two allow-lists,
both small: :data:`FACADES`, the upward imports the design keeps on purpose, and :data:`_BEING_REMOVED`, the
ones whose removal is under way (delete an entry when that work lands: a test fails for an entry nothing
uses any more).

Imports the walker cannot see: ``importlib.import_module`` with a computed name. The package root's lazy
``__getattr__`` (the debugger, the emulator, the workshop and ``otel`` on first use) is the one such facade,
and it is harmless because no module inside the package imports the root
(:func:`test_no_module_imports_the_package_root`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agentnb"

LAYERS: dict[str, str] = {
    # -- core types: the records every layer trades in; they know nothing of providers, stores or views
    "agentnb._messages": "core",
    "agentnb.events": "core",
    "agentnb._gc": "core",  # the collector paused while a long log is built (the fold, the frames, the tree, traces)
    "agentnb._states": "core",
    "agentnb.exceptions": "core",
    "agentnb._values": "core",
    "agentnb._binding": "core",
    "agentnb._request": "core",  # ModelRequest and its options, the stream items a model answers with
    "agentnb._outcomes": "core",  # what a call produced and what the effect ledger holds: the ports' records
    "agentnb._version": "core",  # a constant, so nothing needs the package root for it
    "agentnb._visible": "core",  # text made safe to show a person (invisible and direction-changing characters)
    # -- helpers: pure code over core types that several inner layers share; not a layer of the design's
    # drawing, but each is below the engine and the I/O parts that use it
    "agentnb._findings": "helpers",  # the one vocabulary of lint findings (providers' rules, lint, importers)
    "agentnb._pairing": "helpers",  # which result answers which call (rules, importers, the engine's pruning)
    "agentnb._strict": "helpers",  # strict JSON schemas (tools' argument schemas, structured output)
    "agentnb._output": "helpers",  # OutputSpec: the engine's configuration names it, the loop builds it
    "agentnb._aio": "helpers",  # the background event loop the SDK models and MCP servers run on
    "agentnb._redact": "helpers",  # secret masking: tools, providers, the driver and the exporters call it
    "agentnb._embedded": "helpers",  # the run an HTML export carries: the export writes it, Transcript reads it
    # -- the sans-IO engine: the fold, decide(), receive(), and the guards it applies
    "agentnb._engine": "engine",
    # -- the I/O parts beside the engine (the design draws them on one row with it)
    "agentnb.providers": "providers",
    "agentnb._recorder": "providers",  # a Model that wraps a Model and writes cassettes (ScriptedModel.replay)
    "agentnb.stories": "providers",  # the named scripts ScriptedModel.story plays, with their tools
    "agentnb.tools": "tools",
    "agentnb.mcp": "tools",  # an MCP server's tools are tools: the same validation and approval path
    "agentnb.store": "store",
    # -- the driver's ports, then the run that drives them
    "agentnb._driver": "driver",
    "agentnb._run": "run",
    "agentnb._loop": "run",  # the configuration a Run is started from
    "agentnb._transcript": "run",  # the log as a value: Run.transcript hands one out, so it cannot sit above
    # -- outer layers: public APIs of the inner ones only
    "agentnb.frames": "outer",
    "agentnb._plots": "outer",
    "agentnb._collection": "outer",
    "agentnb._parquet": "outer",  # Parquet datasets of runs: files, manifest, writing in batches, reading lazily
    "agentnb._batch": "outer",
    "agentnb._replay": "outer",  # a recorded run driven again by today's loop
    "agentnb._compare": "outer",  # two runs aligned step by step
    "agentnb._inbox": "outer",  # the calls waiting for a person across a store's runs
    "agentnb._inbox_widget": "outer",  # the inbox as a widget (Inbox.widget() loads it; it imports no inbox)
    "agentnb._batch_items": "outer",  # the rows of a batch, checked before it runs anything
    "agentnb._debugger": "outer",
    "agentnb.workshop": "outer",
    "agentnb.emulator": "outer",
    "agentnb._lint": "outer",
    "agentnb.importers": "outer",
    "agentnb.otel": "outer",
    "agentnb.mcp_demo": "outer",
    "agentnb._cli": "outer",  # the `agentnb` command: calls the public API of the layers below, as a notebook does
    "agentnb.scanners": "outer",  # scanners over runs: they read transcripts, frames and stores, and ask loops
    "agentnb._labels": "outer",  # what people say about runs, kept beside the sealed log (a file, a store table)
    "agentnb._label_books": "outer",  # where labels are kept: files, store tables, Parquet datasets, HTML pages
    "agentnb.evals": "outer",  # evaluations: datasets run through batches, then scored (they read scanners' views)
    # -- the package root: the map of the public API, above everything
    "agentnb": "root",
}
"""Module prefix -> layer, lowest layer first. The longest matching prefix places a module."""

ORDER = ("core", "helpers", "engine", "providers", "tools", "store", "driver", "run", "outer", "root")

FACADES: frozenset[tuple[str, str, str]] = frozenset({
    # (importing module, imported module, function): upward imports the design keeps, lazily, in one function.
    # A run or a transcript left as a cell's last line shows its debugger (DESIGN.md, "Names we expect users
    # to touch"); the debugger reads the run and the transcript, so this display is the one upward door.
    # Both display hooks (the mimebundle, and _ipython_display_'s two outputs) go through one function.
    ("agentnb._run", "agentnb._debugger", "_debugger"),
    ("agentnb._transcript", "agentnb._debugger", "_debugger"),
    # Loop(tracer_provider=...) is the user's one switch for live tracing: the listener it attaches (and
    # OpenTelemetry with it) is loaded only when asked for, inside Loop.start; the run knows no tracing at all.
    ("agentnb._loop", "agentnb.otel._export", "start"),
})

_BEING_REMOVED: tuple[tuple[str, str, str], ...] = (
    # (importer prefix, imported prefix, why): walls broken today whose removal is under way in this wave.
    # Delete an entry when that work lands (test_every_allowance_is_still_needed tells you).
)

Kind = Literal["module", "lazy", "typing"]


@dataclass(frozen=True)
class Edge:
    """One import: who imports what, where, and when it runs."""

    source: str
    target: str
    path: str
    """The importing file, relative to the repository."""
    line: int
    kind: Kind
    """``module`` (runs at import), ``lazy`` (inside a function) or ``typing`` (inside ``if TYPE_CHECKING:``)."""
    function: str | None = None
    """The innermost function around a lazy import."""

    def __str__(self) -> str:
        where = f" in {self.function}()" if self.function else ""
        return f"{self.path}:{self.line} imports {self.target} ({self.kind}{where})"


# -- the walker ---------------------------------------------------------------------------------------------


def module_name(path: Path, root: Path = ROOT) -> str:
    """``agentnb/_engine/fold.py`` -> ``agentnb._engine.fold``; a package's ``__init__.py`` names the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, source: str, *, is_package: bool, known: Iterable[str], path: str = "") -> list[Edge]:
    """The ``agentnb`` imports of one module's source text, resolved against the ``known`` module names."""
    modules = set(known)
    package = name if is_package else name.rpartition(".")[0]
    edges: list[Edge] = []

    def owner(dotted: str) -> str:
        # the longest known module that holds ``dotted`` (an attribute of a module resolves to the module)
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted

    def base_of(node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        parts = package.split(".")
        anchor = ".".join(parts[: len(parts) - (node.level - 1)])
        return f"{anchor}.{node.module}" if node.module else anchor

    def add(target: str, node: ast.stmt, kind: Kind, function: str | None) -> None:
        edge = Edge(name, owner(target), path, node.lineno, kind, function if kind == "lazy" else None)
        if target.split(".")[0] == "agentnb" and edge not in edges:  # one edge for `from m import a, b`
            edges.append(edge)

    def visit(body: Iterable[ast.AST], kind: Kind, function: str | None) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node, kind, function)
            elif isinstance(node, ast.ImportFrom):
                base = base_of(node)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    add(full if full in modules else base, node, kind, function)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, "typing", function)
                visit(node.orelse, kind, function)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(ast.iter_child_nodes(node), "typing" if kind == "typing" else "lazy", node.name)
            else:
                visit(ast.iter_child_nodes(node), kind, function)

    visit(_parse(source).body, "module", None)
    return edges


def _parse(source: str) -> ast.Module:
    """``ast.parse``, again if CPython 3.11 says its recursion count did not match (python/cpython#106905).

    3.11 keeps the AST builder's recursion count per interpreter, not per thread, so another thread building
    an AST at the same time -- a traceback formatted in a server's thread, which parses the failing line for
    its carets -- makes a correct parse fail with ``SystemError``; the source is the same the next time.
    """
    for _ in range(4):
        try:
            return ast.parse(source)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
            error = exc
    raise error


@cache
def package_edges() -> tuple[Edge, ...]:
    """Every import of every module of the package."""
    files = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    return tuple(e for name, p in files.items()
                 for e in imports_of(name, p.read_text(encoding="utf-8"), is_package=p.name == "__init__.py",
                                     known=files, path=str(p.relative_to(ROOT)))
                 if e.target != e.source)


def modules() -> list[str]:
    """Every module of the package, by name."""
    return sorted(module_name(p) for p in PACKAGE.rglob("*.py"))


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str, layers: Mapping[str, str] = LAYERS) -> str | None:
    """The layer of a module: that of the longest prefix of :data:`LAYERS` it falls under."""
    best = max((p for p in layers if _within(name, p)), key=len, default=None)
    return layers[best] if best is not None else None


def _allowed(e: Edge) -> bool:
    return (e.source, e.target, e.function) in FACADES or any(
        _within(e.source, s) and _within(e.target, t) for s, t, _ in _BEING_REMOVED)


def crossings(edges: Iterable[Edge], sources: Sequence[str], forbidden: Sequence[str],
              layers: Mapping[str, str] = LAYERS) -> list[Edge]:
    """The edges from a module of a ``sources`` layer (or prefix) into a ``forbidden`` layer (or prefix)."""

    def is_in(name: str, group: Sequence[str]) -> bool:
        return layer_of(name, layers) in group or any(_within(name, g) for g in group if "." in g)

    return [e for e in edges if is_in(e.source, sources) and is_in(e.target, forbidden) and not _allowed(e)]


def circles(edges: Iterable[Edge]) -> list[list[Edge]]:
    """The import circles: per strongly connected component of more than one module, the edges inside it."""
    edges = [e for e in edges if not _allowed(e)]
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [sorted((e for e in edges if e.source in c and e.target in c), key=lambda e: (e.path, e.line))
            for c in found]


def _report(found: Sequence[Edge], wall: str) -> str:
    return f"{len(found)} import(s) through the wall '{wall}':\n" + "\n".join(f"  {e}" for e in found)


# -- the walker works ---------------------------------------------------------------------------------------


def test_the_walker_finds_known_imports_of_every_kind() -> None:
    edges = package_edges()
    assert len(modules()) > 100 and len(edges) > 500
    assert any(e.source == "agentnb._engine.fold" and e.target == "agentnb._engine.projection" and e.kind == "module"
               for e in edges)
    assert any(e.source == "agentnb._run" and e.target == "agentnb._debugger" and e.kind == "lazy"
               and e.function == "_debugger" for e in edges)
    assert any(e.kind == "typing" for e in edges)


def test_the_walker_resolves_relative_imports_and_submodules() -> None:
    known = {"agentnb", "agentnb.a", "agentnb.a.b", "agentnb.a.c", "agentnb.d"}
    source = ("import json\nfrom . import c\nfrom .c import thing\nfrom .. import d\nfrom ..d import x\n"
              "import agentnb.a.c\nfrom agentnb.a import c as cc\nfrom agentnb import something\n")
    edges = imports_of("agentnb.a.b", source, is_package=False, known=known)
    assert [e.target for e in edges] == ["agentnb.a.c", "agentnb.a.c", "agentnb.d", "agentnb.d", "agentnb.a.c",
                                         "agentnb.a.c", "agentnb"]
    edges = imports_of("agentnb.a", "from . import b\nfrom .. import d\n", is_package=True, known=known)
    assert [e.target for e in edges] == ["agentnb.a.b", "agentnb.d"]


def test_the_walker_flags_a_synthetic_upward_import_and_circle() -> None:
    known = {"agentnb", "agentnb.events", "agentnb._run", "agentnb._debugger"}
    events = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._run import Run\n"
    run = "def show():\n    from ._debugger import Debugger\n"
    debugger = "from .events import BaseEvent\nfrom . import _run\n"
    edges = [*imports_of("agentnb.events", events, is_package=False, known=known, path="agentnb/events.py"),
             *imports_of("agentnb._run", run, is_package=False, known=known, path="agentnb/_run.py"),
             *imports_of("agentnb._debugger", debugger, is_package=False, known=known, path="agentnb/_debugger.py")]
    up = crossings(edges, ["core"], [layer for layer in ORDER if layer != "core"])
    assert [str(e) for e in up] == ["agentnb/events.py:3 imports agentnb._run (typing)"]
    (circle,) = circles(edges)
    assert {e.source for e in circle} == {"agentnb.events", "agentnb._run", "agentnb._debugger"}
    assert any(e.kind == "lazy" and e.function == "show" for e in circle)


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in modules() if layer_of(m) is None]
    assert not unplaced, f"place these modules in LAYERS (tests/test_walls.py): {unplaced}"
    assert set(LAYERS.values()) <= set(ORDER)


def test_every_allowance_is_still_needed() -> None:
    edges = package_edges()
    stale = [(s, t) for s, t, _ in _BEING_REMOVED
             if not any(_within(e.source, s) and _within(e.target, t) for e in edges)]
    stale += [(s, t) for s, t, f in FACADES
              if not any((e.source, e.target, e.function) == (s, t, f) for e in edges)]
    assert not stale, f"these imports are gone: delete their allow-list entries in tests/test_walls.py: {stale}"


# -- the walls ----------------------------------------------------------------------------------------------


def test_core_types_import_nothing_above_them() -> None:
    found = crossings(package_edges(), ["core"], ORDER[1:])
    assert not found, _report(found, "core types (messages, events, states, ...) import only core types")


def test_helpers_import_only_core_types_and_helpers() -> None:
    found = crossings(package_edges(), ["helpers"], ORDER[2:])
    assert not found, _report(found, "helpers (findings, pairing, redact, ...) import only core types and helpers")


def test_the_engine_imports_no_provider_tool_store_driver_run_or_view() -> None:
    found = crossings(package_edges(), ["engine"], ["providers", "tools", "store", "driver", "run", "outer", "root"])
    assert not found, _report(found, "the engine is sans-IO: no provider, tool registry, store, driver, run or view")


def test_no_driver_part_imports_the_run() -> None:
    found = crossings(package_edges(), ["driver"], ["agentnb._run"])
    assert not found, _report(found, "a port performs one kind of I/O and returns a record: it holds no Run")


def test_stores_providers_and_tools_import_no_driver_run_or_outer_layer() -> None:
    found = crossings(package_edges(), ["store", "providers", "tools"], ["driver", "run", "outer", "root"])
    assert not found, _report(found, "stores, providers and tools know nothing of the driver, the run or views")


def test_no_module_imports_the_package_root() -> None:
    found = [e for e in package_edges() if e.target == "agentnb"]
    assert not found, _report(found, "import from the defining module: the package root imports every layer")


def test_no_import_circle() -> None:
    found = circles(package_edges())
    text = "\n\n".join(f"a circle of {len({e.source for e in c})} modules:\n" + "\n".join(f"  {e}" for e in c)
                       for c in found)
    assert not found, f"{len(found)} import circle(s), lazy and typing-only imports included:\n{text}"


@pytest.mark.parametrize("layer", ORDER)
def test_each_layer_has_modules(layer: str) -> None:
    assert any(layer_of(m) == layer for m in modules()), f"the layer {layer!r} has no module: drop it from ORDER"
