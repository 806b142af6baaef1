"""The docs' pictures, taken in Debian's Chromium: ``python -m tests.browser.docs_shots [SITE_DIR]``.

Writes ``docs/img/debugger.png`` (the README's and the tutorial's picture: the refund story exported as one
HTML file, the approval selected) and, when a built site is given (``make docs`` first), screenshots of two of
its pages into ``test-artifacts/``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import agentnb as anb

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"docs-tutorial.png": "tutorial.html", "docs-approvals.png": "guides/approvals.html",
         "docs-reference.png": "reference.html#agentnb.Loop"}


def export(where: Path) -> Path:
    """The refund story, approved and finished, as the one-file debugger."""
    loop = anb.Loop(model=anb.ScriptedModel.story("refund", stream=True, chunk_size=6),
                    tools=anb.stories.tools("refund"))
    run = loop.start("Please refund order 42").run()
    run.approve(run.pending_approvals()[0].call_id, by="ana")
    run.run()
    return run.transcript.to_html(where / "refund.html")


def main(site: Path | None) -> None:
    """Take the pictures."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 640}, device_scale_factor=1)
        page.goto(export(Path(tmp)).as_uri())
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=60_000)
        root = page.locator(".agentnb-debugger")
        root.locator(".anb-row.agentnb-ev-ApprovalRequested .anb-summary").first.click()
        page.wait_for_timeout(300)  # the card's transition
        out = ROOT / "docs" / "img" / "debugger.png"
        page.screenshot(path=str(out))
        print(out)
        if site is not None:
            ARTIFACTS.mkdir(exist_ok=True)
            for name, rel in PAGES.items():
                path, _, anchor = rel.partition("#")
                page.goto((site / path).as_uri() + (f"#{anchor}" if anchor else ""))
                page.wait_for_load_state("load")
                page.screenshot(path=str(ARTIFACTS / name))
                print(ARTIFACTS / name)
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else None)
