from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import agentnb as anb


@anb.tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@anb.tool
def boom(message: str) -> str:
    """Always fails."""
    raise RuntimeError(message)


@pytest.fixture
def make_loop() -> Callable[..., anb.Loop]:
    """A loop over a script, with the test tools and no retry delay."""

    def make(script: list[Any], tools: list[Any] | None = None, **options: Any) -> anb.Loop:
        stream = options.pop("stream", False)
        options.setdefault("retry_base_delay", 0.0)
        model = anb.ScriptedModel(script, stream=stream, chunk_size=options.pop("chunk_size", 4))
        return anb.Loop(model=model, tools=tools if tools is not None else [add, boom], **options)

    return make


def types(run: anb.Run) -> list[str]:
    return [e.type for e in run.events]


# -- PostgreSQL ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_dsn() -> Any:
    """A real PostgreSQL server for the session: ``AGENTNB_TEST_PG_DSN`` if set, else a throw-away cluster.

    Skips (saying why) only when no server can run here; ``.ci/run`` installs Debian's ``postgresql`` so CI never
    skips.
    """
    import os

    from tests.pgserver import start_cluster

    given = os.environ.get("AGENTNB_TEST_PG_DSN")
    if given:
        yield given
        return
    try:
        cluster = start_cluster()
    except Exception as exc:  # the reason is the skip message
        pytest.skip(f"PostgreSQL cannot run here: {exc}")
    try:
        yield cluster.dsn
    finally:
        cluster.stop()


@pytest.fixture
def pg_schema(request: pytest.FixtureRequest) -> str:
    """A fresh PostgreSQL schema name for one test (the tables of each test start empty)."""
    import re
    import uuid

    return f"t_{re.sub(r'[^a-z0-9]', '_', request.node.name.lower())[:40]}_{uuid.uuid4().hex[:8]}"


# -- the installed wheel (tests/wheelhouse.py; run by `make test` as its own step, marked `wheel`) --------------


@pytest.fixture(scope="session")
def built_dist(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sdist and the wheel built from it, from a clean copy of the checkout, once per session."""
    from tests.wheelhouse import build

    try:
        return build(tmp_path_factory.mktemp("dist"))
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def installed(built_dist: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A fresh virtualenv outside the checkout with the wheel and every user-facing extra, once per session."""
    from tests.wheelhouse import install

    try:
        return install(built_dist.wheel, tmp_path_factory.mktemp("venv"))
    except RuntimeError as exc:
        pytest.fail(str(exc))


# -- the docs site (built once per run: tests/test_docs_examples.py, tests/test_course_pages.py and
# tests/browser/test_docs_browser.py read it; under pytest-xdist the workers share one build, behind a file lock)


@pytest.fixture(scope="session")
def docs_site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``mkdocs build --strict`` (``make docs``) into a temporary folder, once per run: the site's folder."""
    import fcntl
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's folder, above the workers'
    site, built = shared / "docs-site", shared / "docs-site.built"
    with open(shared / "docs-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds; the others wait, then read its site
        if not built.is_file():  # written only after a build that passed (a failed one fails every reader)
            env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(root)}
            proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", str(site)],
                                  cwd=root, capture_output=True, text=True, timeout=600, env=env)
            if proc.returncode != 0:
                pytest.fail(f"mkdocs build --strict failed:\n{proc.stderr[-4000:]}")
            built.touch()
    return site


SDK_MODEL_NAMES = {"openai_chat": "gpt-4.1", "openai_responses": "gpt-5", "anthropic": "claude-sonnet-4-6",
                   "gemini": "gemini-2.5-flash", "ollama": "qwen3"}
"""A model name per wire API, as :func:`sdk_model` asks for it."""


def sdk_model(url: Callable[[str], str], api: str, key: str, *, stream: bool, async_: bool = False,
              client: dict[str, Any] | None = None, **options: Any) -> Any:
    """The API's SDK model on its official client, pointed at an emulator (``url`` is its ``Emulator.url``).

    ``client`` goes to the client (``max_retries``), ``options`` to the model (``wire_cap``, ...).
    """
    import importlib

    from agentnb.providers._registry import WIRE_APIS

    module = importlib.import_module(f"agentnb.providers.{api}._model")
    made = module.client(key, url(WIRE_APIS[api].emulator.url_names[0]), async_=async_, **(client or {}))
    cls = next(getattr(module, n) for n in module.__all__ if n.endswith("Model"))
    return cls(made, model=SDK_MODEL_NAMES[api], stream=stream, **options)
