"""The docs' pictures, taken in Debian's Chromium: ``python -m tests.browser.docs_shots [SITE_DIR]``.

Writes ``docs/img/debugger.png`` (the README's and the tutorial's picture: the refund story exported as one
HTML file, in the tree view, the approval selected); ``tree-*.png``, ``wire-*.png`` and ``compare-*.png``, light
and dark (the tree with its waterfall, the wire as sent through the official openai client, a run and its fork
side by side); ``docs/img/view-runs.png`` (the command's page: ``agentnb view``'s run list
over a store, a transcript, a Parquet dataset and a trace) and, when a built site is given (``make docs``
first), screenshots of some of its pages into ``test-artifacts/``. The browser tests take the same views into
``test-artifacts/`` on every run (``tests/browser/test_cli_view_browser.py``, ``test_docs_browser.py``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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


def _small(out: Path) -> None:
    from PIL import Image  # matplotlib's dependency: 64 colours keep a picture small

    Image.open(out).convert("RGB").quantize(colors=64).save(out, optimize=True)


def figures(browser: Any, where: Path) -> list[Path]:
    """The tree with its waterfall, the wire as sent and a comparison, each in light and dark (``docs/img``)."""
    from agentnb.emulator import Emulator
    from agentnb.providers.openai_chat._model import client

    parallel = anb.Loop(model=anb.ScriptedModel.story("parallel", stream=True, chunk_size=6),
                        tools=anb.stories.tools("parallel")).start("Weather in Paris and Tokyo?").run()
    tree_page = parallel.transcript.to_html(where / "tree.html")
    with Emulator([{"text": "Hello there, from the wire."}], chunk_size=6) as emu:
        model = anb.OpenAIChatModel(client("sk-docs-shots-0000", emu.url("openai")), model="gpt-4.1", stream=True)
        wired = anb.Loop(model=model).start("Hi").run()
    wire_page = wired.transcript.to_html(where / "wire.html")
    refund = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
    run = refund.start("Please refund order 42").run()
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    done = next(e for e in run.events if e.type == "ToolFinished" and e.name == "get_order")
    fork = run.fork(results={done.call_id: {"order_id": "42", "item": "Red kettle", "amount_cents": 1999}},
                    effects="simulate").run()
    compare_page = anb.compare(run, fork).to_html(where / "compare.html")
    out: list[Path] = []
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 1200, "height": 720}, color_scheme=scheme)
        page = context.new_page()
        page.goto(tree_page.as_uri())
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=60_000)
        page.locator(".anb-node.agentnb-node-call").first.click()
        page.wait_for_timeout(300)
        out.append(ROOT / "docs" / "img" / f"tree-{scheme}.png")
        page.screenshot(path=str(out[-1]))
        page.goto(wire_page.as_uri())
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=60_000)
        root = page.locator(".agentnb-debugger")
        root.locator(".agentnb-view-flat").click()
        root.locator(".anb-row.agentnb-ev-ModelRequested").first.locator(".anb-summary").click()
        root.get_by_role("tab", name="Wire").click()
        root.locator(".agentnb-sent-request").wait_for(timeout=60_000)
        page.wait_for_timeout(300)
        out.append(ROOT / "docs" / "img" / f"wire-{scheme}.png")
        page.screenshot(path=str(out[-1]))
        page.goto(compare_page.as_uri())
        page.locator(".anb-cmp-parted").first.wait_for(timeout=60_000)
        out.append(ROOT / "docs" / "img" / f"compare-{scheme}.png")
        page.screenshot(path=str(out[-1]), full_page=True)
        context.close()
    for path in out:
        _small(path)
    return out


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
        # the tree, the default view: the approval's call opened, the approval selected
        root.locator(".anb-node.agentnb-node-call", has_text="create_refund").locator(".anb-twisty").click()
        root.locator(".anb-row.agentnb-ev-ApprovalRequested .anb-summary").first.click()
        page.wait_for_timeout(300)  # the card's transition
        out = ROOT / "docs" / "img" / "debugger.png"
        page.screenshot(path=str(out))
        print(out)
        _small(out)
        print(view_runs(page, Path(tmp)))
        for path in figures(browser, Path(tmp)):
            print(path)
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
