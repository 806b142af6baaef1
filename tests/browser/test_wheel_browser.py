"""The installed wheel's front end in Chromium: a run exported by the venv's ``agentnb`` opens from file://.

The HTML file embeds ``debugger.js`` and ``debugger.css`` as the installed package read them (from
``agentnb._widgets`` in site-packages, the checkout not on the path); rows in the timeline mean they loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_wheel import SCRIPTED_RUN
from tests.wheelhouse import ROOT

from .test_cli_view_browser import T

pytestmark = [pytest.mark.wheel, pytest.mark.browser]


def test_an_export_from_the_installed_command_opens_in_chromium(installed: Any, browser: Any, tmp_path: Path,
                                                                artifacts: Path) -> None:
    from playwright.sync_api import expect

    made = installed.run(str(installed.python), "-c", SCRIPTED_RUN, cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    exported = installed.run(str(installed.command), "export", "refund.jsonl", "-o", "refund.html", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    html = (tmp_path / "refund.html").read_text(encoding="utf-8")
    js = (ROOT / "widgets" / "debugger.js").read_text(encoding="utf-8")
    assert js[:200] in html and js[-200:] in html  # the shipped module, whole
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto((tmp_path / "refund.html").as_uri(), timeout=T)
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=T)
        root = page.locator(".agentnb-debugger")
        expect(root.locator(".agentnb-header")).to_contain_text("COMPLETED")
        root.locator(".agentnb-view-flat").click()  # every event, one row each (the tree folds them in their calls)
        expect(root.locator(".anb-row.agentnb-ev-ToolFinished")).to_have_count(2, timeout=T)
        expect(root.locator(".anb-row").first).to_be_visible()
        page.screenshot(path=str(artifacts / "wheel-export.png"))
    finally:
        page.close()
    assert not errors, errors
