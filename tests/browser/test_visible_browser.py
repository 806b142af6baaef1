"""In a real browser: an argument holding a right-to-left override is drawn written out, in the order it runs.

``"\u202e0987654321\u202c"`` is drawn as ``1234567890`` wherever the override reaches the page. These tests
read what Chromium lays out, not what the DOM holds: the page's text must show ``⟨U+202E⟩`` and the warning,
and the digits' boxes must run left to right in the order the tool receives them (``0`` first).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._visible import FLAG

from .exported import opened

pytestmark = pytest.mark.browser

T = 60_000  # ms; about 10x what these steps take on a loaded 2-core machine
RLO = "\u202e0987654321\u202c"
SHOWN = "⟨U+202E⟩0987654321⟨U+202C⟩"
CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")

DIGIT_BOXES = """(root) => {
    // the left edge of each digit of every drawn "0987654321", in the order the text holds them
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const found = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const at = node.data.indexOf("0987654321");
        if (at < 0) continue;
        const xs = [];
        for (let k = 0; k < 10; k++) {
            const range = document.createRange();
            range.setStart(node, at + k);
            range.setEnd(node, at + k + 1);
            const box = range.getBoundingClientRect();
            if (!box.width) { xs.length = 0; break; }  // not drawn (a closed disclosure)
            xs.push(box.left);
        }
        if (xs.length) found.push(xs);
    }
    return found;
}"""


def transfer_loop() -> anb.Loop:
    @anb.tool(risk="write")
    def transfer(account: str) -> str:
        """Send the money to an account."""
        return f"sent to {account!r}"

    model = anb.ScriptedModel([{"tool_calls": [{"name": "transfer", "arguments": {"account": RLO}}]},
                               {"text": "done"}])
    return anb.Loop(model=model, tools=[transfer])


def assert_drawn_as_it_runs(root: Any) -> None:
    text = root.inner_text()
    assert SHOWN in text and FLAG in text, text[:2000]
    assert not CONTROLS.search(text), "a direction-changing character reached the page"
    boxes = root.evaluate(DIGIT_BOXES)
    assert boxes, "no drawn 0987654321 on the page"
    for xs in boxes:
        assert xs == sorted(xs), f"the digits are drawn in another order than they run: {xs}"


def test_the_export_from_file_shows_the_override_written_out(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    from playwright.sync_api import expect

    run = transfer_loop().start("pay").run()
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    path = run.transcript.to_html(tmp_path / "override.html")
    asked = next(e.seq for e in run.events if e.type == "ApprovalRequested")
    with opened(browser, path, T) as (page, _):
        root = page.locator(".agentnb-debugger")
        root.locator(".agentnb-view-flat").click()  # the tree folds the approval into its call's row
        row = root.locator(f".anb-row[data-seq='{asked}']")
        expect(row).to_contain_text(SHOWN, timeout=T)
        expect(row).to_contain_text(FLAG)
        row.locator(".anb-summary").click()
        card = root.locator(".agentnb-detail-card")
        expect(card).to_have_attribute("data-seq", str(asked), timeout=T)
        expect(card.locator(".agentnb-hidden-flag")).to_contain_text(FLAG)
        assert_drawn_as_it_runs(root)
        page.screenshot(path=str(artifacts / "visible-export.png"))


def test_the_widget_in_jupyterlab_shows_the_waiting_call_written_out(lab: dict[str, Any], browser: Any,
                                                                    artifacts: Path) -> None:
    import nbformat
    from playwright.sync_api import expect

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import agentnb as anb\n"
        "@anb.tool(risk='write')\n"
        "def transfer(account: str) -> str:\n"
        "    '''Send the money to an account.'''\n"
        "    return 'sent'\n"
        "model = anb.ScriptedModel([{'tool_calls': [{'name': 'transfer', 'arguments': "
        "{'account': '\\u202e0987654321\\u202c'}}]}, {'text': 'done'}])\n"
        "run = anb.Loop(model=model, tools=[transfer]).start('pay').run()\n"
        "anb.Debugger(run)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    name = f"override_{int(time.time() * 1000)}.ipynb"
    nbformat.write(nb, lab["root"] / name)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}", timeout=T)
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=T)
        expect(page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).first).to_be_visible(
            timeout=T)
        expect(page.locator(".jp-Dialog")).to_have_count(0, timeout=T)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        root = page.locator(".jp-OutputArea-output .agentnb-debugger")
        try:
            root.wait_for(timeout=T)
        except Exception:
            page.screenshot(path=str(artifacts / "visible-lab-missing.png"))
            raise AssertionError("the debugger widget did not render (is the JupyterLab widget manager there?)"
                                 ) from None
        approval = root.locator(".anb-approval")
        expect(approval.locator(".agentnb-hidden-flag")).to_contain_text(FLAG, timeout=T)
        edit = approval.locator(".agentnb-edit-arguments")
        assert "\\u202e0987654321\\u202c" in edit.input_value() and not CONTROLS.search(edit.input_value())
        card = root.locator(".agentnb-detail-card")  # the live view follows the run: the approval request
        expect(card).to_contain_text(SHOWN, timeout=T)
        assert_drawn_as_it_runs(root)
        page.screenshot(path=str(artifacts / "visible-lab.png"))
    finally:
        page.close()
