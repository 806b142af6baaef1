"""A real JupyterLab on 127.0.0.1 and Debian's Chromium driven by Playwright (recipe: BROWSER_TESTING.md).

The server runs with every Jupyter directory in a temporary folder and no outbound calls; each test copies
its notebook into the server's root and opens it in a fresh page. Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .server import jupyter_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


@pytest.fixture(scope="session")
def chromium() -> str:
    if not Path(CHROMIUM).exists():
        message = "Debian's chromium is not installed (apt-get install chromium); .ci/run installs it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, chromium: str) -> Iterator[dict[str, Any]]:
    try:
        with jupyter_server(tmp_path_factory.mktemp("lab"), "jupyterlab") as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def notebook7(tmp_path_factory: pytest.TempPathFactory, chromium: str) -> Iterator[dict[str, Any]]:
    try:
        import notebook  # noqa: F401
    except ImportError:
        pytest.skip("Notebook 7 is not installed (pip install notebook; it is in the dev extra)")
    try:
        with jupyter_server(tmp_path_factory.mktemp("nb7"), "notebook") as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Any]:
    # module scope: Playwright's sync API keeps an event loop in this thread until it is closed
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
