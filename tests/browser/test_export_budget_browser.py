"""In Chromium, from file://: an export past its card budget shows a left-out event's summary and the event as
recorded (read from the page's embedded transcript), with a hidden character written out, never drawn."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb._debugger import bundle

from .exported import opened

pytestmark = pytest.mark.browser

T = 60_000
CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def test_a_left_out_card_shows_the_event_as_recorded(browser: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from playwright.sync_api import expect

    @anb.tool
    def echo(text: str) -> str:
        """Echo a text."""
        return text

    model = anb.ScriptedModel([{"text": "a \u202eevil\u202c b", "tool_calls": [
        {"name": "echo", "arguments": {"text": "x\u202ey"}}]}, {"text": "done"}], stream=True, chunk_size=3)
    run = anb.Loop(model=model, tools=[echo]).start("go").run()
    monkeypatch.setattr(bundle, "CARD_BUDGET", 5)
    path = run.transcript.to_html(tmp_path / "budget.html")
    left_out = next(e for e in run.events if e.type == "TextMerged" and "\u202e" in e.fragment)
    kept = len(run.events) - 1
    with opened(browser, path, T) as (page, _):
        root = page.locator(".agentnb-debugger")
        card = root.locator(".agentnb-detail-card")
        expect(card).to_have_attribute("data-seq", str(kept), timeout=T)  # the last event keeps its own card
        expect(card.locator(".agentnb-recorded")).to_have_count(0)
        root.locator(".agentnb-view-flat").click()
        root.locator(f".anb-row[data-seq='{left_out.seq}'] .anb-summary").click()
        expect(card).to_have_attribute("data-seq", str(left_out.seq), timeout=T)
        recorded = card.locator(".agentnb-recorded")
        expect(recorded).to_contain_text('"type":"TextMerged"', timeout=T)
        expect(recorded).to_contain_text("\\u202e")
        expect(card).to_contain_text("TextMerged")
        expect(card.locator(".agentnb-detail-summary")).to_contain_text(f"({left_out.length} chars)")  # its row's
        assert not CONTROLS.search(card.inner_text())


def test_left_out_cards_on_different_pages_each_show_their_own_line(browser: Any, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The page inflates the embedded transcript a page at a time: events on the first, a middle and the last
    page of it (and back to the first, after the cache let it go) each show the event as recorded."""
    from playwright.sync_api import expect

    from agentnb import _embedded

    @anb.tool
    def echo(text: str) -> str:
        """Echo a text."""
        return text

    turns = [{"text": f"turn {i}", "tool_calls": [{"name": "echo", "arguments": {"text": f"t{i}"}}]} for i in range(12)]
    model = anb.ScriptedModel([*turns, {"text": "done"}], stream=True, chunk_size=2)
    run = anb.Loop(model=model, tools=[echo], max_turns=20).start("go").run()
    monkeypatch.setattr(bundle, "CARD_BUDGET", 3)
    monkeypatch.setattr(_embedded, "PAGE_LINES", 4)
    path = run.transcript.to_html(tmp_path / "paged.html")
    n = len(run.events)
    pages = -(-n // 4)
    assert pages > 10  # more pages than the page keeps inflated (8): the first is let go and read again
    wanted = [1, 4 * (pages // 2) + 1, 4 * (pages - 1) - 2, *range(5, 4 * 10, 4), 2]
    with opened(browser, path, T) as (page, _):
        root = page.locator(".agentnb-debugger")
        card = root.locator(".agentnb-detail-card")
        root.locator(".agentnb-view-flat").click()
        for seq in wanted:
            page.evaluate("""async (seq) => {  // the list draws the rows in sight: bring this one there, after
                // the frames in which the last click's selection is revealed (that would scroll back to it)
                await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
                const list = document.querySelector('.anb-list'), row = list.querySelector('.anb-row');
                list.scrollTop = Math.max(0, seq * row.offsetHeight - 200); }""", seq)
            root.locator(f".anb-row[data-seq='{seq}'] .anb-summary").click(timeout=T)
            expect(card).to_have_attribute("data-seq", str(seq), timeout=T)
            recorded = card.locator(".agentnb-recorded")
            expect(recorded).to_contain_text(f'"seq":{seq},', timeout=T)
            expect(recorded).to_contain_text(f'"type":"{run.events[seq].type}"')
