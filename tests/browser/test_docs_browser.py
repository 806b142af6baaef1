"""The docs site in Debian's Chromium, from ``file://`` as ``make docs`` leaves it: two pages and a chapter's run.

Opens the tutorial and a course chapter (its debugger output is the static view), follows the chapter's link
to its run (the one-file debugger) and checks that it is the run the page shows. Screenshots go to
``test-artifacts/`` (``docs-tutorial.png``, ``docs-course.png``, ``docs-course-run.png``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

T = 60_000  # ms


def _errors(page: Any) -> list[str]:
    errors: list[str] = []
    # Material's search loads its index in a web worker, which a file:// page may not start: not the page's fault
    page.on("pageerror", lambda e: None if "search" in str(e) else errors.append(str(e)))
    return errors


def test_two_pages_and_a_chapters_run_in_chromium(browser: Any, docs_site: Path, artifacts: Path) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = _errors(page)
    try:
        page.goto((docs_site / "tutorial.html").as_uri(), timeout=T)
        expect(page.locator("h1").first).to_be_visible(timeout=T)
        expect(page.locator("nav.md-nav--primary")).to_contain_text("02 · Stepping through a loop")
        page.screenshot(path=str(artifacts / "docs-tutorial.png"))

        page.goto((docs_site / "course" / "02_stepping.html").as_uri(), timeout=T)
        static = page.locator(".agentnb-nb-output .agentnb-static-view")
        expect(static).to_have_count(1, timeout=T)
        expect(static.locator("table.agentnb-fallback-events tbody tr").first).to_contain_text("RunStarted")
        run_id = static.locator(".agentnb-header code").first.inner_text()
        events = int(static.get_attribute("data-events") or "0")
        static.evaluate("el => el.scrollIntoView({block: 'start'})")  # its header, meters and first rows
        page.screenshot(path=str(artifacts / "docs-course.png"))

        page.get_by_role("link", name="Open this run in the debugger").first.click()
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=T)
        root = page.locator(".agentnb-debugger")
        expect(root.locator(".agentnb-header")).to_contain_text(run_id)
        expect(root.locator(".anb-count")).to_have_text(re.compile(rf"^{events} events$"))
        page.screenshot(path=str(artifacts / "docs-course-run.png"))
        assert not errors, errors
    finally:
        page.close()
