"""The docs' pictures, taken in Debian's Chromium: ``python -m tests.browser.docs_shots [SITE_DIR]``.

Writes ``docs/img/debugger.png`` (the README's and the tutorial's picture: the refund story exported as one
HTML file, the approval selected), ``docs/img/view-runs.png`` (the command's page: ``agentnb view``'s run list
over a store, a transcript, a Parquet dataset and a trace) and, when a built site is given (``make docs``
first), screenshots of some of its pages into ``test-artifacts/``. The browser tests take the same views into
``test-artifacts/`` on every run (``tests/browser/test_cli_view_browser.py``, ``test_docs_browser.py``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import agentnb as anb

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"docs-tutorial.png": "tutorial.html", "docs-approvals.png": "guides/approvals.html",
         "docs-reference.png": "reference.html#agentnb.Loop", "docs-course.png": "course/02_stepping.html"}


def export(where: Path) -> Path:
    """The refund story, approved and finished, as the one-file debugger."""
    loop = anb.Loop(model=anb.ScriptedModel.story("refund", stream=True, chunk_size=6),
                    tools=anb.stories.tools("refund"))
    run = loop.start("Please refund order 42").run()
    run.approve(run.pending_approvals()[0].call_id, by="ana")
    run.run()
    return run.transcript.to_html(where / "refund.html")


def view_runs(page: object, where: Path) -> Path:
    """``agentnb view`` over one source of each kind, its run list cut to the rows."""
    from .test_cli_view_browser import _env, _sources, _stop, _url

    sources = _sources(where)
    proc = subprocess.Popen([sys.executable, "-m", "agentnb", "view", *sources, "--no-browser"], cwd=where,
                            env=_env(where), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        url = _url(proc)
        page.goto(url + "&sort=run_id&order=asc")  # type: ignore[attr-defined]
        page.locator("table.runs tbody tr.run").nth(3).wait_for()  # type: ignore[attr-defined]
        out = ROOT / "docs" / "img" / "view-runs.png"
        page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": 1280, "height": 290})  # type: ignore[attr-defined]
        from PIL import Image  # matplotlib's dependency: 64 colours keep the picture small (about 16 kB)

        Image.open(out).convert("RGB").quantize(colors=64).save(out, optimize=True)
        return out
    finally:
        _stop(proc)


def main(site: Path | None) -> None:
    """Take the pictures."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 640}, device_scale_factor=1)
        page.goto(export(Path(tmp)).as_uri())
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=60_000)
        root = page.locator(".agentnb-debugger")
        root.locator(".agentnb-view-flat").click()  # the List view: every event a row (the tree folds them)
        root.locator(".anb-row.agentnb-ev-ApprovalRequested .anb-summary").first.click()
        page.wait_for_timeout(300)  # the card's transition
        out = ROOT / "docs" / "img" / "debugger.png"
        page.screenshot(path=str(out))
        print(out)
        print(view_runs(page, Path(tmp)))
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
