"""End to end in a real browser: open a notebook in JupyterLab, drive the debugger by clicking."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
pytestmark = pytest.mark.browser

T = 60_000  # ms; about 10x what these steps take on a loaded 2-core machine


def _copy_stripped(src: Path, dst: Path) -> None:
    nb = json.loads(src.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    dst.write_text(json.dumps(nb), encoding="utf-8")


def _click_to_update_ms(page: Any, button: str, selector: str, seq: str) -> float:
    """Milliseconds from a click on ``button`` to the view showing event ``seq``, timed inside the page."""
    return float(page.evaluate(
        """([button, selector, seq]) => new Promise(resolve => {
            const check = () => { const el = document.querySelector(selector);
                return el && el.getAttribute('data-seq') === seq; };
            const obs = new MutationObserver(() => {
                if (check()) { obs.disconnect(); resolve(performance.now() - t0); } });
            obs.observe(document.body, {subtree: true, childList: true, attributes: true});
            const t0 = performance.now();
            document.querySelector(button).click();
        })""",
        [button, selector, seq],
    ))


def _run_all(page: Any) -> None:
    from playwright.sync_api import expect

    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=T)
    expect(page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).first).to_be_visible(timeout=T)
    expect(page.locator(".jp-Dialog")).to_have_count(0, timeout=T)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def test_step_continue_approve_time_travel(lab: dict[str, Any], browser: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    name = f"debugger_e2e_{int(time.time() * 1000)}.ipynb"
    _copy_stripped(HERE / "debugger_e2e.ipynb", lab["root"] / name)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    try:
        page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}", timeout=T)
        _run_all(page)

        root = page.locator(".jp-OutputArea-output .agentnb-debugger")
        try:
            root.wait_for(timeout=T)
        except Exception:
            page.screenshot(path=str(artifacts / "debugger-missing.png"))
            raise AssertionError(
                "the debugger widget did not render; if the output shows 'VBox(children=(...' the JupyterLab "
                "widget manager is missing (console: " + " | ".join(console[-5:]) + ")"
            ) from None
        header = root.locator(".agentnb-header")
        expect(header).to_contain_text("NEW", timeout=T)
        page.screenshot(path=str(artifacts / "debugger-01-opened.png"), full_page=True)

        # Step until an argument-merge card shows
        step = root.locator("button.agentnb-btn-step")
        merges = root.locator(".agentnb-timeline .agentnb-ev-ArgumentsMerged")
        for _ in range(30):
            if merges.count():
                break
            before = root.locator(".agentnb-timeline .agentnb-card").count()
            step.click()
            expect(root.locator(".agentnb-timeline .agentnb-card")).to_have_count(before + 1, timeout=T)
        assert merges.count() >= 1, "no ArgumentsMerged card after 30 steps"
        merges.first.locator("summary").click()  # cards expand in place
        expect(merges.first.locator(".agentnb-frag")).to_be_visible(timeout=T)
        page.screenshot(path=str(artifacts / "debugger-02-argument-merge.png"), full_page=True)

        # Continue to the approval
        root.locator("button.agentnb-btn-continue").click()
        approve = root.locator("button.agentnb-btn-approve")
        expect(approve).to_be_visible(timeout=T)
        expect(header).to_contain_text("WAITING_APPROVAL", timeout=T)
        page.screenshot(path=str(artifacts / "debugger-03-approval.png"), full_page=True)

        # Approve: the run resumes and completes
        t0 = time.perf_counter()
        approve.click()
        expect(header).to_contain_text("COMPLETED", timeout=T)
        approve_to_done = time.perf_counter() - t0
        expect(root.locator(".agentnb-current-state[data-state='COMPLETED']")).to_have_count(1, timeout=T)
        expect(root.locator(".agentnb-timeline .agentnb-ev-RunFinished")).to_have_count(1, timeout=T)
        page.screenshot(path=str(artifacts / "debugger-04-completed.png"), full_page=True)

        # Time travel: go to the first event, then forward to event 3
        root.locator("button.agentnb-btn-first").click()
        travel = root.locator(".agentnb-time-travel")
        expect(travel).to_have_attribute("data-seq", "0", timeout=T)
        clicks = []
        for expected in ("1", "2", "3"):
            clicks.append(_click_to_update_ms(
                page, ".agentnb-debugger button.agentnb-btn-next", ".agentnb-debugger .agentnb-time-travel", expected
            ))
            expect(travel).to_have_attribute("data-seq", expected, timeout=T)
        expect(travel).to_contain_text("after event 3")
        # event 3 is a fragment of the first streamed answer: the answer is not in the history yet
        expect(travel.locator(".agentnb-msg")).to_have_count(1)
        expect(travel).to_contain_text("Please refund order 42")
        expect(root.locator(".agentnb-timeline .agentnb-selected[data-seq='3']")).to_have_count(1)
        root.get_by_role("tab", name="Conversation").click()
        expect(travel).to_be_visible(timeout=T)
        page.screenshot(path=str(artifacts / "debugger-05-time-travel.png"), full_page=True)
        print(f"\napprove->COMPLETED {approve_to_done * 1000:.0f} ms; "
              f"selection, click to updated view: {[round(c) for c in clicks]} ms")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), "horizontal scroll"

        # the same view in JupyterLab's dark theme (colours come from its CSS variables)
        theme = lab["settings"] / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
        theme.write_text(json.dumps({"theme": "JupyterLab Dark"}))
        try:
            page.reload()
            expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=T)
            _run_all(page)
            root.locator("button.agentnb-btn-continue").click()
            expect(root.locator("button.agentnb-btn-approve")).to_be_visible(timeout=T)
            page.screenshot(path=str(artifacts / "debugger-06-dark-theme.png"), full_page=True)
        finally:
            theme.unlink()
    finally:
        page.close()
