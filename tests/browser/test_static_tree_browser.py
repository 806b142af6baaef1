"""The tree in the kernel-less views, in Chromium from file://: the static ``text/html`` and the one-file export.

The static view (what a saved notebook, GitHub, nbviewer and nbconvert show) lists the tree above the events,
readable in light and dark (WCAG AA); the export opens on the tree with its waterfall, the flat list one
click away.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger import viewdata
from agentnb._debugger.timeline import Timeline

from .contrast import below_aa

pytestmark = pytest.mark.browser

T = 60_000


def _run() -> anb.Run:
    loop = anb.Loop(model=anb.ScriptedModel.story("parallel", stream=True), tools=anb.stories.tools("parallel"))
    return loop.start("Weather in Paris, London and Tokyo?").run()


def test_the_static_view_and_the_export_show_the_tree(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    from playwright.sync_api import expect

    run = _run()
    static = tmp_path / "static.html"
    static.write_text("<!doctype html><html><head><meta charset='utf-8'></head><body>"
                      f"{viewdata.fallback_html(Timeline(run.events), live=False)}</body></html>", encoding="utf-8")
    export = run.transcript.to_html(tmp_path / "export.html")
    for scheme in ("light", "dark"):
        page = browser.new_page(viewport={"width": 1000, "height": 900}, color_scheme=scheme)
        page.route("http*://**", lambda route: route.abort())  # offline
        try:
            page.goto(static.as_uri(), timeout=T)
            tree = page.locator(".agentnb-fallback-tree")
            expect(tree).to_be_visible(timeout=T)
            expect(tree.locator("li.agentnb-tree-turn")).to_have_count(2)
            expect(tree.locator("li.agentnb-tree-call")).to_have_count(3)
            expect(tree.locator("li.agentnb-tree-call").first).to_contain_text("get_weather")
            expect(tree.locator("li.agentnb-tree-run")).to_contain_text("COMPLETED")
            low = below_aa(tree)
            assert not low, f"{scheme}: the static tree has text below WCAG AA (4.5:1): {low[:8]}"
            tree.screenshot(path=str(artifacts / f"static-tree-{scheme}.png"))

            page.goto(export.as_uri(), timeout=T)
            page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=T)
            root = page.locator(".agentnb-debugger")
            expect(root.locator(".agentnb-view-tree")).to_have_attribute("aria-selected", "true")
            expect(root.locator(".anb-node.agentnb-node-call")).to_have_count(3)
            expect(root.locator(".anb-row.agentnb-ev-TextMerged")).to_have_count(0)  # fragments folded
            root.locator(".agentnb-view-flat").click()
            expect(root.locator(".anb-row.agentnb-ev-ToolFinished")).to_have_count(3)
        finally:
            page.close()
