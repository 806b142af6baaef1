"""Opening a one-file export in Chromium from file://, for the tests that read one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def opened(browser: Any, path: Path, timeout: float) -> Iterator[tuple[Any, list[str]]]:
    """An exported page, ready, and the errors it raised so far (the block must end with none)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri(), timeout=timeout)
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=timeout)
        yield page, errors
        assert not errors, errors
    finally:
        page.close()
