"""A long run in JupyterLab: every row's codes come at once, the texts of the rows in sight as the page asks.

A 20,000-event run (bench/debugger.py's long run): the rows at the bottom show their summaries once scrolled
to (they were not sent with the first answer), the type filter and the search box (which asks the kernel)
count what the kernel counts, and the tree's nodes open with their labels. While the kernel builds a long run's
tree (held there by a gate in the notebook, released by the page's click), the page shows the list, says so,
answers clicks, and shows the tree when it comes -- unless the list was chosen meanwhile.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .server import run_all, write_notebook

pytestmark = pytest.mark.browser

T = 60_000
BENCH = Path(__file__).resolve().parents[2] / "bench"

CELLS = [
    f"""import json, sys
sys.path.insert(0, {str(BENCH)!r})
import agentnb as anb
from agentnb._debugger import cards
from debugger import long_run
events = long_run(20_000).events
big = anb.Debugger(anb.Transcript(events), start="end")
big""",
    """said = lambda e: cards.summary_text(e).lower() + " " + e.type.lower()
print("EXPECT " + json.dumps({"n": len(events), "mid": cards.summary_text(events[10_000]),
      "last": cards.summary_text(events[-1]), "finished": sum(e.type == "ToolFinished" for e in events),
      "alpha": sum("alpha-1234" in said(e) for e in events)}))""",
]


def _summary(root: Any, seq: int) -> Any:
    return root.locator(f".anb-row[data-seq='{seq}']:not(.anb-node) .anb-summary")


def _scroll_to(page: Any, fraction: float) -> None:
    page.evaluate("""(f) => { const list = document.querySelector('.agentnb-debugger .anb-list');
        list.scrollTop = f * (list.scrollHeight - list.clientHeight); list.dispatchEvent(new Event('scroll')); }""",
                  fraction)


def test_a_long_run_shows_the_rows_it_is_scrolled_to_and_filters_them(lab: dict[str, Any], browser: Any,
                                                                     artifacts: Path) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    asked: list[str] = []  # the page's requests for texts, as its kernel's websocket carried them

    def sent(payload: str | bytes) -> None:
        text = payload if isinstance(payload, str) else payload.decode("utf-8", "ignore")
        if '"texts?"' in text:
            asked.append(text)

    page.on("websocket", lambda ws: ws.on("framesent", sent))
    try:
        page.goto(f"{lab['url']}/lab/tree/{write_notebook(lab['root'], 'pages', CELLS)}?reset&token={lab['token']}",
                  timeout=T)
        run_all(page)
        printed = page.locator(".jp-OutputArea-output pre", has_text="EXPECT")
        printed.wait_for(timeout=T)
        want = json.loads(printed.inner_text().split("EXPECT ", 1)[1])
        n = want["n"]
        root = page.locator(".jp-OutputArea-output .agentnb-debugger").first
        expect(root.locator(".anb-count")).to_have_text(f"{n:,} events", timeout=T)

        # the tree (the default view) draws its nodes' labels, asked for as they come in sight
        turn = root.locator(".anb-node.agentnb-node-turn .anb-tlabel").first
        expect(turn).to_contain_text(re.compile(r"^turn \d+"), timeout=T)
        node = root.locator(".anb-node.agentnb-node-model").last.get_attribute("data-node")
        model = root.locator(f".anb-node[data-node='{node}']")  # the rows redraw after the click: found by its node
        model.locator(".anb-twisty").click()
        expect(model).to_have_attribute("aria-expanded", "true", timeout=T)
        inside = root.locator(f".anb-node[data-node='{node}'] ~ .anb-row:not(.anb-node) .anb-summary").first
        expect(inside).not_to_have_text("…", timeout=T)
        expect(inside).not_to_have_text("")

        # the list: the middle and the bottom show their summaries once scrolled to
        root.locator(".agentnb-view-flat").click()
        asked.clear()
        _scroll_to(page, 0.5)
        mid = _summary(root, 10_000)
        expect(mid).to_have_text(want["mid"], timeout=T)
        _scroll_to(page, 1.0)
        expect(_summary(root, n - 1)).to_have_text(want["last"], timeout=T)
        assert asked, "the page showed rows it was never sent without asking for their texts"
        page.screenshot(path=str(artifacts / "pages-01-bottom.png"))

        # filters stay in the page (every row's codes are there); the search box asks the kernel
        root.locator(".agentnb-filter-type").select_option("ToolFinished")
        expect(root.locator(".anb-count")).to_have_text(f"{want['finished']:,} of {n:,}", timeout=T)
        expect(root.locator(".anb-row.agentnb-ev-ToolFinished").first).to_be_visible()
        root.locator(".agentnb-filter-type").select_option("")
        root.locator(".agentnb-filter-q").fill("alpha-1234")
        expect(root.locator(".anb-count")).to_have_text(f"{want['alpha']:,} of {n:,}", timeout=T)
        expect(root.locator(".anb-row .anb-summary").first).to_contain_text(re.compile("alpha-1234", re.I))
        page.screenshot(path=str(artifacts / "pages-02-search.png"))
        root.locator(".agentnb-filter-q").fill("")
        expect(root.locator(".anb-count")).to_have_text(f"{n:,} events", timeout=T)
    finally:
        page.close()


HELD = [
    f"""import sys, threading
sys.path.insert(0, {str(BENCH)!r})
import agentnb as anb
from agentnb._debugger import tree as tree_mod
from debugger import long_run
events = long_run(20_000).events
held, add, main = threading.Event(), tree_mod.TreeEncoder.add, threading.main_thread()

def gated(tree, ev):  # the building thread waits at event 3,000 until the page selects an event
    if ev.seq == 3_000 and threading.current_thread() is not main:
        held.wait(120)
    add(tree, ev)

tree_mod.TreeEncoder.add = gated
held_dbg = anb.Debugger(anb.Transcript(events), start="end")
held_dbg.view.observe(lambda change: held.set(), names="selected")
held_dbg""",
]


@pytest.mark.parametrize("choose_list", [False, True])
def test_while_the_tree_is_built_the_list_shows_and_answers_clicks(lab: dict[str, Any], browser: Any,
                                                                  artifacts: Path, choose_list: bool) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{lab['url']}/lab/tree/{write_notebook(lab['root'], 'held', HELD)}?reset&token={lab['token']}",
                  timeout=T)
        run_all(page)
        root = page.locator(".jp-OutputArea-output .agentnb-debugger").first
        count = root.locator(".anb-count")
        expect(count).to_have_text("20,000 events · building the tree…", timeout=T)
        expect(root.locator(".agentnb-view-tree")).to_have_attribute("aria-selected", "true")
        assert root.locator(".anb-node").count() == 0  # the list, meanwhile
        last = root.locator(".anb-row[data-seq='19999'] .anb-summary")
        expect(last).not_to_have_text("…", timeout=T)  # with the texts in sight
        page.screenshot(path=str(artifacts / f"pages-03-building{'-list' if choose_list else ''}.png"))
        if choose_list:
            root.locator(".agentnb-view-flat").click()
            expect(count).to_have_text("20,000 events")
        row = root.locator(".anb-row[data-seq='19990']")
        row.locator(".anb-summary").click()  # answered while the tree is held: the click releases it after
        expect(root.locator(".agentnb-detail-card[data-seq='19990']")).to_be_visible(timeout=T)
        page.wait_for_function("agentnbMetrics.marks.treeAt", timeout=T, polling=50)
        if choose_list:  # the tree came, but the list was chosen: it stays until the Tree tab is clicked
            page.wait_for_timeout(200)
            assert root.locator(".anb-node").count() == 0
            expect(count).to_have_text("20,000 events")
            root.locator(".agentnb-view-tree").click()
        expect(root.locator(".anb-node.agentnb-node-turn").first).to_be_visible(timeout=T)
        expect(count).to_have_text("20,000 events", timeout=T)
        expect(root.locator(".anb-row.anb-selected")).to_be_visible(timeout=T)  # the selected event, in the tree
    finally:
        page.close()
