"""The debugger's hello said again until the kernel answers, and "Replay this turn with edits", in JupyterLab.

from .server import run_all, write_notebook

The page is opened with every widget's first hello dropped on its way to the kernel (the websocket's ``send``
wrapped before JupyterLab loads): a debugger of a long run (more rows than the kernel sends before a page
answers) must still fill, from the hello the page says again. Then a model turn's card is edited -- its
user message and tool choice -- and replayed: the fork shows in the same widget, its lineage says "request
edited" with the diff.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from .server import run_all, write_notebook

pytestmark = pytest.mark.browser

T = 60_000

# Each widget's first hello (its page id, retry false) never reaches the kernel; the repeats do.
DROP_FIRST_HELLO = """(() => {
  const send = WebSocket.prototype.send;
  window.__droppedHellos = 0;
  const pages = new Set();
  WebSocket.prototype.send = function (data) {
    let text = "";
    try {
      text = typeof data === "string" ? data
        : new TextDecoder().decode(data instanceof ArrayBuffer ? new Uint8Array(data)
          : new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    } catch (e) { text = ""; }
    const m = /"kind":"hello","page":"([^"]+)","retry":false/.exec(text);
    if (m && !pages.has(m[1])) { pages.add(m[1]); window.__droppedHellos++; return; }
    return send.call(this, data);
  };
})();"""

CELLS = [
    """import agentnb as anb
long = anb.Loop(model=anb.ScriptedModel([{"text": "x" * 2500}], stream=True, chunk_size=1)).start("go").run()
assert len(long.events) > anb.Debugger.EARLY_ROWS  # the kernel waits for the page's hello to send these rows
anb.Debugger(long)""",
    """refund = anb.Debugger(anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"))
                       .start("Please refund order 42"))
refund.cont()
refund""",
]


def _notebook(root: Path) -> str:
    return write_notebook(root, "replay", CELLS)


def test_a_lost_hello_is_said_again_and_a_turn_replays_with_edits(lab: dict[str, Any], browser: Any,
                                                                  artifacts: Path) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.add_init_script(DROP_FIRST_HELLO)
    try:
        page.goto(f"{lab['url']}/lab/tree/{_notebook(lab['root'])}?reset&token={lab['token']}", timeout=T)
        run_all(page)
        roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
        roots.nth(0).wait_for(timeout=T)
        long = roots.nth(0)
        t0 = time.monotonic()
        expect(long.locator(".anb-row").first).to_be_visible(timeout=T)  # rows, from a repeated hello
        expect(long.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
        print(f"\nrows after a lost hello: {time.monotonic() - t0:.1f} s after the widget was drawn")
        assert page.evaluate("window.__droppedHellos") >= 2  # each widget lost its first hello

        # Replay this turn with edits: the turn that asked for the refund, its user message and tool choice edited
        refund = roots.nth(1)
        expect(refund.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL", timeout=T)
        refund.locator(".agentnb-view-flat").click()
        refund.locator(".anb-row.agentnb-ev-ModelRequested").nth(1).locator(".anb-summary").click()
        replay = refund.locator("details.agentnb-replay")
        expect(replay).to_be_visible(timeout=T)
        replay.locator("summary").click()
        box = replay.locator("textarea.agentnb-replay-request")
        text = box.input_value()
        assert '"Please refund order 42"' in text and '"tool_choice": "auto"' in text
        box.fill(text.replace('"Please refund order 42"', '"Please refund order 42, it arrived broken"')
                 .replace('"tool_choice": "auto"', '"tool_choice": "required"'))
        t1 = time.monotonic()
        replay.locator(".agentnb-btn-replay").click()
        lineage = refund.locator(".agentnb-lineage")
        expect(lineage).to_contain_text("request edited", timeout=T)
        expect(refund.locator(".agentnb-run-picker option")).to_have_count(2)
        expect(refund.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL", timeout=T)  # it asks again
        print(f"replay click -> the fork shown: {time.monotonic() - t1:.1f} s")
        refund.locator(".anb-row.agentnb-ev-RunStarted .anb-summary").click()
        card = refund.locator(".agentnb-detail-card")
        expect(card).to_contain_text("request edited", timeout=T)
        expect(card).to_contain_text("it arrived broken")
        expect(card).to_contain_text("tool_choice: 'auto' -> 'required'")
        refund.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "replay-request-edited.png"))
        # a bad edit says why on the page and forks nothing (the fork's one request so far: its edited one)
        refund.locator(".anb-row.agentnb-ev-ModelRequested").first.locator(".anb-summary").click()
        replay = refund.locator("details.agentnb-replay")
        expect(replay).to_be_visible(timeout=T)
        replay.locator("summary").click()
        replay.locator("textarea.agentnb-replay-request").fill("{not json")
        replay.locator(".agentnb-btn-replay").click()
        expect(replay.locator(".agentnb-fork-error")).to_contain_text("not JSON", timeout=T)
        expect(refund.locator(".agentnb-run-picker option")).to_have_count(2)
    except Exception:
        page.screenshot(path=str(artifacts / "replay-failed.png"))
        raise
    finally:
        page.close()
