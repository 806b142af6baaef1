"""The debugger's tree, waterfall, fork on the page and compare view in JupyterLab and Chromium (light and dark).

One notebook: a finished run whose two tool calls ran in parallel, a live refund run (stepped in the tree,
then forked from the page with an edited result), and ``anb.compare`` of a run and its fork. Timings are
printed, not asserted (bench/debugger_browser.py measures a 100,000-event run).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .contrast import below_aa
from .server import run_all, write_notebook

pytestmark = pytest.mark.browser

T = 60_000

CELLS = [
    """import time, agentnb as anb

@anb.tool
def slow(city: str) -> str:
    \"\"\"Look a city up, slowly.\"\"\"
    time.sleep(0.3)
    return f"{city}: sunny"

model = anb.ScriptedModel([
    {"text": "Checking both.", "tool_calls": [{"name": "slow", "arguments": {"city": "Paris"}},
                                              {"name": "slow", "arguments": {"city": "Rome"}}]},
    {"text": "Both sunny."}], stream=True, chunk_size=4)
par = anb.Loop(model=model, tools=[slow]).start("Paris and Rome?").run()
anb.Debugger(par)""",
    """loop = anb.Loop(model=anb.ScriptedModel.story("refund", stream=True, chunk_size=6),
                tools=anb.stories.tools("refund"))
live = anb.Debugger(loop.start("Please refund order 42"))
live""",
    """weather = anb.Loop(model=anb.ScriptedModel.story("weather"),
                   tools=anb.stories.tools("weather")).start("Weather in Paris?").run()
call = next(e.call_id for e in weather.events if e.type == "ToolFinished")
snow = weather.fork(results={call: {"city": "Paris", "temp_c": -5, "sky": "snow"}}).run()
anb.compare(weather, snow)""",
]


def _notebook(root: Path) -> str:
    return write_notebook(root, "tree", CELLS)


def _count(root: Any) -> int:
    text = root.locator(".anb-count").inner_text()
    return int(re.sub(r"[^\d]", "", text.split(" of ")[-1]) or 0)


def _expand_ms(page: Any, index: int, node: str) -> float:
    """Click a tree node's twisty and time it until the next frame is painted (in the page)."""
    return float(page.evaluate(
        """([index, node]) => new Promise(resolve => {
            const root = document.querySelectorAll('.agentnb-debugger')[index];
            const t0 = performance.now();
            root.querySelector(`.anb-node[data-node="${node}"] .anb-twisty`).click();
            requestAnimationFrame(() => resolve(performance.now() - t0));
        })""", [index, node]))


def _open(lab: dict[str, Any], browser: Any, name: str) -> tuple[Any, Any, Any, Any]:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}", timeout=T)
    run_all(page)
    roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
    roots.nth(1).wait_for(timeout=T)
    tree, live = roots.nth(0), roots.nth(1)
    expect(tree.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
    expect(tree.locator(".anb-node.agentnb-node-call")).to_have_count(2, timeout=T)
    compare = page.locator(".jp-OutputArea-output .agentnb-compare")
    compare.wait_for(timeout=T)
    return page, tree, live, compare


def _shots(page: Any, tree: Any, compare: Any, artifacts: Path, theme: str) -> None:
    from playwright.sync_api import expect

    page.mouse.move(0, 0)
    tree.scroll_into_view_if_needed()
    tree.screenshot(path=str(artifacts / f"tree-{theme}.png"))
    model = tree.locator(".anb-node.agentnb-node-model").first
    model.locator(".anb-twisty").click()
    calls = tree.locator(".anb-node.agentnb-node-call")
    for i in range(2):  # one call opened at a time: the tree redraws after each click, so wait for it
        twisty = calls.nth(i).locator(".anb-twisty")
        twisty.click()  # a press holds the rows still: a redraw between press and release cannot lose it
        try:
            expect(calls.nth(i)).to_have_attribute("aria-expanded", "true", timeout=5_000)
        except AssertionError:
            # seen once in four full runs: the second call's click did not open it (not a redraw during the
            # press, which is held; the cause is not known) -- clicked again, once, only while it is still shut
            twisty.click()
        expect(tree.locator(".anb-row.agentnb-ev-ToolStarted")).to_have_count(i + 1, timeout=T)
    page.mouse.move(0, 0)
    tree.locator(".anb-list").screenshot(path=str(artifacts / f"waterfall-{theme}.png"))
    low = below_aa(tree)
    assert not low, f"{theme}: tree text below WCAG AA (4.5:1): {low[:8]}"
    compare.scroll_into_view_if_needed()
    compare.screenshot(path=str(artifacts / f"compare-{theme}.png"))
    low = below_aa(compare)
    assert not low, f"{theme}: compare text below WCAG AA (4.5:1): {low[:8]}"


def test_tree_waterfall_fork_and_compare_in_jupyterlab(lab: dict[str, Any], browser: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    page, tree, live, compare = _open(lab, browser, _notebook(lab["root"]))
    report: list[str] = []
    try:
        # the tree is the default view: run, turns, a model call (its fragments folded), one row per tool call
        expect(tree.locator(".agentnb-view-tree")).to_have_attribute("aria-selected", "true")
        n = _count(tree)
        assert tree.locator(".anb-node.agentnb-node-turn").count() == 2
        expect(tree.locator(".anb-row.agentnb-ev-TextMerged")).to_have_count(0)
        model = tree.locator(".anb-node.agentnb-node-model").first
        expect(model).to_contain_text("fragments")
        node = model.get_attribute("data-node") or ""
        expands = [_expand_ms(page, 0, node)]
        expect(model).to_have_attribute("aria-expanded", "true")
        assert tree.locator(".anb-row.agentnb-ev-TextMerged").count() > 0
        expands.append(_expand_ms(page, 0, node))  # and closed again
        expect(tree.locator(".anb-row.agentnb-ev-TextMerged")).to_have_count(0)
        for _ in range(3):
            expands += [_expand_ms(page, 0, node), _expand_ms(page, 0, node)]
        report.append(f"tree expand/collapse -> next frame: max {max(expands):.1f} ms over {len(expands)} "
                      "(target <= 50 ms)")

        # the waterfall: the two calls ran at the same time, drawn side by side against wall time
        bars = [tree.locator(".anb-node.agentnb-node-call").nth(i).locator(".anb-wf-ran").bounding_box()
                for i in range(2)]
        assert bars[0] and bars[1]
        a, b = bars[0], bars[1]
        assert a["y"] != b["y"], "one row each"
        assert a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"], f"parallel calls overlap in time: {bars}"
        assert a["width"] > 20 and b["width"] > 20, "each ran 0.3 s of a run of well under a second"
        expect(tree.locator(".anb-node.agentnb-node-call").first).to_contain_text("ms")

        # filters combine and negate: key:value terms in the search box, ≠ on a select, hide fragments
        search = tree.locator(".agentnb-filter-q")
        search.fill("type:ToolFinished,ToolStarted tool:slow")
        expect(tree.locator(".anb-count")).to_have_text(f"4 of {n}", timeout=T)
        expect(tree.locator(".anb-row.agentnb-ev-ToolFinished")).to_have_count(2)
        search.fill("status!=ok")
        expect(tree.locator(".anb-row.agentnb-ev-ToolFinished")).to_have_count(0, timeout=T)
        search.fill("")
        tree.locator(".agentnb-filter-hide-fragments").check()
        expect(tree.locator(".anb-count")).to_contain_text(f" of {n}", timeout=T)
        shown = int(tree.locator(".anb-count").inner_text().split(" of ")[0].replace(",", ""))
        tree.locator(".agentnb-filter-hide-fragments").uncheck()
        tree.locator(".agentnb-view-flat").click()
        tree.locator(".agentnb-filter-type").select_option("TextMerged")
        tree.locator(".agentnb-filter-type-not").click()  # ≠ TextMerged
        expect(tree.locator(".anb-count")).to_contain_text(f" of {n}", timeout=T)
        not_text = int(tree.locator(".anb-count").inner_text().split(" of ")[0].replace(",", ""))
        tree.locator(".agentnb-filter-type-not").click()
        expect(tree.locator(".anb-count")).to_have_text(f"{n - not_text} of {n}", timeout=T)
        assert shown < not_text < n  # fragments are text and argument fragments; ≠ TextMerged keeps the latter
        tree.locator(".agentnb-filter-type").select_option("")
        expect(tree.locator(".anb-row .anb-time").first).to_contain_text("ms")  # rows carry their time
        tree.locator(".agentnb-view-tree").click()

        # stepping in the tree view: each step's event is the selected row (or the folded node that holds it)
        live.scroll_into_view_if_needed()
        live.focus()
        for k in range(1, 6):
            page.keyboard.press("s")
            expect(live.locator(".anb-count")).to_have_text("1 event" if k == 1 else f"{k} events", timeout=T)
            expect(live.locator(f".anb-row.anb-selected[data-seq='{k - 1}']")).to_be_visible(timeout=T)
        expect(live.locator(".anb-node.anb-selected")).to_be_visible()  # the latest event is folded in its node
        live.locator(".agentnb-bp-kind").select_option("tool")
        live.locator(".agentnb-bp-value").fill("get_order")
        live.locator("button.agentnb-btn-add-breakpoint").click()
        live.locator("button.agentnb-btn-continue").click()
        expect(live.locator(".agentnb-status")).to_contain_text("breakpoint: tool = get_order", timeout=T)
        call = live.locator(".anb-node.agentnb-node-call.anb-selected")
        expect(call).to_contain_text("get_order", timeout=T)  # stopped before it ran: the call's row is selected
        live.locator(".agentnb-breakpoint").click()
        live.locator("button.agentnb-btn-continue").click()
        expect(live.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL", timeout=T)
        live.locator("button.agentnb-btn-approve").click()
        expect(live.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
        parent_id = live.locator(".agentnb-header code").first.inner_text()

        # fork on the page: the get_order result edited, the fork shows here with its lineage and marks
        order = live.locator(".anb-node.agentnb-node-call", has_text="get_order")
        order.locator(".anb-twisty").click()
        live.locator(".anb-row.agentnb-ev-ToolFinished .anb-summary").first.click()
        editor = live.locator(".agentnb-fork-edit")
        expect(editor).to_be_visible(timeout=T)
        editor.locator("summary").click()
        edit = editor.locator(".agentnb-fork-result")
        expect(edit).to_have_value(re.compile("Blue kettle"))
        edit.fill(json.dumps({"order_id": "42", "item": "Red kettle", "amount_cents": 1999, "status": "delivered"}))
        editor.locator("button.agentnb-btn-fork-result").click()
        lineage = live.locator(".agentnb-lineage")
        expect(lineage).to_contain_text(f"fork of {parent_id}", timeout=T)
        expect(lineage).to_contain_text("results replaced")
        picker = live.locator(".agentnb-run-picker")
        expect(picker).to_be_visible()
        expect(picker.locator("option")).to_have_count(2)
        expect(live.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL", timeout=T)  # the refund asks
        live.locator("button.agentnb-btn-approve").click()
        expect(live.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
        expect(live.locator(".anb-effect")).to_have_text("inherited", timeout=T)  # answered from the ledger
        assert live.locator(".agentnb-header code").first.inner_text() != parent_id
        live.scroll_into_view_if_needed()
        page.mouse.move(0, 0)
        live.screenshot(path=str(artifacts / "fork-on-page-light.png"))
        picker.select_option(parent_id)  # back to the parent, in the same output
        expect(live.locator(".agentnb-header code").first).to_have_text(parent_id, timeout=T)
        expect(live.locator(".agentnb-lineage")).to_be_hidden()

        # the comparison: side by side, the first divergence lit, the conversations' diff
        parted = compare.locator(".anb-cmp-parted")
        expect(parted).to_have_count(1)
        expect(parted).to_contain_text("first divergence")
        expect(compare.locator(".anb-cmp-verdict")).to_contain_text("another tool result")
        expect(compare.locator(".agentnb-del").last).to_contain_text("18 °C and sunny")
        expect(compare.locator(".agentnb-add").first).to_contain_text("snow")
        assert "Error" not in compare.inner_text()

        _shots(page, tree, compare, artifacts, "light")

        theme = lab["settings"] / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
        theme.write_text(json.dumps({"theme": "JupyterLab Dark"}))
        try:
            page.close()
            page, tree, live, compare = _open(lab, browser, _notebook(lab["root"]))
            expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=T)
            _shots(page, tree, compare, artifacts, "dark")
        finally:
            theme.unlink()
    finally:
        print("\n" + "\n".join(report))
        page.close()
