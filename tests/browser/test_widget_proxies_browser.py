"""One model, many proxies: the page keeps one store per kernel model (widgets/debugger.js ``storeOf``).

anywidget hands ``initialize`` and each ``render`` a proxy of its own for one model (``get``, ``send``, ``on``
bound to a context). When a notebook is reopened while its kernel runs, JupyterLab restores the models first:
``initialize`` says hello and the kernel's rows can arrive before any view is drawn. A store kept per proxy
left that view empty (it never hears a reply: the welcome had stopped the hellos), and after 2.5 s it showed
the saved snapshot, "no kernel answers", over a kernel that had answered. Here the kernel's real answer to a
hello (captured from a :class:`~agentnb.Debugger`) is delivered between ``initialize`` and ``render`` on a
model that behaves as anywidget 0.11's proxies do, in Chromium, deterministically.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]
T = 30_000  # ms

HARNESS = """
async ({ src, state, replies, reinit }) => {
  const mod = await import(URL.createObjectURL(new Blob([src], { type: "text/javascript" })));
  // the kernel's model as ipywidgets holds it: one object whose listeners carry a context
  class Kernel {
    constructor(state) { this.state = state; this.handlers = []; this.sent = []; }
    get(k) { return this.state[k]; }
    set(k, v) { this.state[k] = v; }
    save_changes() {}
    send(msg) { this.sent.push(msg); }
    on(ev, fn, ctx) { this.handlers.push([ev, fn, ctx]); }
    off(ev, fn, ctx) {
      this.handlers = this.handlers.filter(([e, f, c]) => !((ev == null || e === ev) && (fn == null || f === fn)
        && (ctx == null || c === ctx)));
    }
    trigger(ev, ...args) { for (const [e, f, c] of [...this.handlers]) if (e === ev) f.apply(c, args); }
  }
  // as anywidget 0.11's modelProxy: a new object per call, its listeners bound to the caller's context
  const proxy = (m, ctx) => ({ get: m.get.bind(m), set: m.set.bind(m), save_changes: m.save_changes.bind(m),
    send: m.send.bind(m), on: (n, f) => m.on(n, f, ctx), off: (n, f) => m.off(n, f, ctx), widget_manager: {} });
  const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const m = new Kernel(state);
  const INIT = {}; // anywidget's context for what initialize adds
  mod.default.initialize({ model: proxy(m, INIT) });
  if (reinit) { m.off(null, null, INIT); mod.default.initialize({ model: proxy(m, INIT) }); } // a reloaded module
  // the kernel answers the hello before any view is drawn (a reopened notebook's restored widgets)
  for (const [msg, bufs] of replies) m.trigger("msg:custom", msg, bufs.map((b) => new DataView(bytes(b).buffer)));
  for (const id of ["one", "two"]) {
    mod.default.render({ model: proxy(m, { view: id }), el: document.getElementById(id) });
  }
  globalThis.kernelModel = m;
}
"""


def _answered(dbg: anb.Debugger) -> tuple[dict[str, Any], list[Any]]:
    """The model's synced state and what the kernel sends back to a page's hello, as the page receives them."""
    dbg._repr_mimebundle_()  # displayed: the saved snapshot is synced, the rows start over
    sent: list[Any] = []
    dbg.view.send = lambda content, buffers=None: sent.append(
        [content, [base64.b64encode(bytes(b)).decode() for b in buffers or []]])
    dbg.view._handle_custom_msg({"kind": "hello", "page": "p", "retry": False}, [])
    state = {k: v for k, v in dbg.view.get_state().items() if k not in ("_esm", "_css")}
    return json.loads(json.dumps(state)), sent


def _page(browser: Any, state: dict[str, Any], replies: list[Any], *, reinit: bool = False) -> Any:
    """A page whose two views (``#one``, ``#two``) show one model, the kernel's answer delivered before them.

    ``reinit``: anywidget initializes the model again first (a reloaded module), dropping what the first
    ``initialize`` listened with.
    """
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_content('<div id="one"></div><div id="two"></div>')
    page.add_style_tag(content=(REPO / "widgets" / "debugger.css").read_text(encoding="utf-8"))
    src = (REPO / "widgets" / "debugger.js").read_text(encoding="utf-8")
    page.evaluate(HARNESS, {"src": src, "state": state, "replies": replies, "reinit": reinit})
    return page


@pytest.mark.parametrize("reinit", [False, True], ids=["initialized", "initialized-again"])
def test_a_view_drawn_after_the_kernel_answered_shows_the_rows(browser: Any, reinit: bool) -> None:
    from playwright.sync_api import expect

    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("Paris?")
    dbg = anb.Debugger(run).cont()
    state, replies = _answered(dbg)
    assert state["key"] and [r[0]["kind"] for r in replies][-1] == "welcome"
    page = _page(browser, state, replies, reinit=reinit)
    try:
        for view in ("#one", "#two"):  # both views of the model: one store, the rows the kernel sent
            expect(page.locator(f"{view} .anb-row").first).to_be_visible(timeout=T)
        page.wait_for_timeout(3500)  # past the 2.5 s after which a view that heard nothing shows the snapshot
        for view in ("#one", "#two"):
            expect(page.locator(f"{view} .agentnb-header")).not_to_contain_text("no kernel answers")
            expect(page.locator(f"{view} .anb-row").first).to_be_visible()
        hellos = page.evaluate("() => kernelModel.sent.filter((m) => m.kind === 'hello').length")
        # one per initialize: a view never says hello again for a store that was answered
        assert hellos == 1 + reinit, "a view said hello again although its model's store had been answered"
        assert page.locator("#one .anb-row").count() == page.locator("#two .anb-row").count() > 0
    finally:
        page.close()


def test_a_click_on_a_row_in_sight_shows_its_card_before_the_kernel_answers(browser: Any) -> None:
    """The page asks for the cards of the rows in sight once its list stands still (``cards?``); a click on one
    shows it at once, and a card drawn from a shorter log than the page's is never shown."""
    from playwright.sync_api import expect

    from agentnb._debugger import viewdata

    run = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund")).start("Refund 42")
    dbg = anb.Debugger(run).cont()
    dbg.approve(dbg.pending()[0])
    state, replies = _answered(dbg)
    page = _page(browser, state, replies)
    try:
        expect(page.locator("#one .anb-row").first).to_be_visible(timeout=T)
        page.wait_for_function("() => kernelModel.sent.some((m) => m.kind === 'cards?')", timeout=T)
        asked = page.evaluate("() => kernelModel.sent.filter((m) => m.kind === 'cards?').flatMap((m) => m.seqs)")
        shown = [int(s) for s in page.locator("#one .anb-row").evaluate_all("rs => rs.map((r) => r.dataset.seq)")]
        assert shown and set(shown) <= set(asked), (shown, asked)  # what a click on each row in sight selects
        assert len(asked) == len(set(asked))  # once each, though two views show them
        answer = viewdata.cards_answer(dbg.timeline, {"kind": "cards?", "seqs": asked})
        page.evaluate("(msg) => kernelModel.trigger('msg:custom', msg, [])", answer)
        # the kernel says nothing more: what shows is the card the page was sent
        shown = list(dict.fromkeys(shown))
        for seq in (shown[1], shown[3]):
            page.locator(f'#one .anb-row[data-seq="{seq}"] .anb-summary').first.click()
            card = page.locator(f'#one .agentnb-detail-card[data-seq="{seq}"]')
            expect(card).to_be_visible(timeout=2000)
            sent = answer["html"][answer["seqs"].index(seq)]
            as_sent = page.evaluate("(h) => { const d = document.createElement('div'); d.innerHTML = h; "
                                    "return d.firstElementChild.outerHTML; }", sent)
            assert card.evaluate("el => el.outerHTML") == as_sent
            assert page.evaluate("() => kernelModel.state.selected") == seq  # and the kernel is told
        # the log grew: the cards the page holds are of a shorter log, and a click waits for the kernel's card
        page.evaluate("() => { kernelModel.state.count += 1; kernelModel.trigger('change:count'); }")
        page.locator(f'#one .anb-row[data-seq="{shown[2]}"] .anb-summary').first.click()
        page.wait_for_timeout(500)
        assert page.locator(f'#one .agentnb-detail-card[data-seq="{shown[2]}"]').count() == 0
        expect(page.locator(f'#one .agentnb-detail-card[data-seq="{shown[3]}"]')).to_have_count(1)
    finally:
        page.close()


def _press_redraw_release(page: Any, target: Any) -> None:
    """Press on ``target``, have the list redrawn under the pointer (as a live run's events do), release."""
    box = target.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    # the kernel moves the selection meanwhile (a live run's next event): the rows are drawn at the next frame
    page.evaluate("() => { kernelModel.state.selected = 0; kernelModel.trigger('change:selected'); }")
    page.wait_for_timeout(100)
    page.mouse.up()


def test_a_click_is_not_lost_when_the_rows_are_redrawn_while_the_button_is_down(browser: Any) -> None:
    """The rows are drawn anew for every change (a live run streams them): a press on a row, or on a tree node's
    twisty, followed by a redraw before the release, still counts as a click on it; a scroll still draws."""
    from playwright.sync_api import expect

    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("Paris?")
    dbg = anb.Debugger(run).cont()
    state, replies = _answered(dbg)
    page = _page(browser, state, replies)
    try:
        node = page.locator('#one .anb-node[aria-expanded="false"]').first
        expect(node).to_be_visible(timeout=T)
        which = node.get_attribute("data-node")
        _press_redraw_release(page, node.locator(".anb-twisty"))
        expect(page.locator(f'#one .anb-node[data-node="{which}"]')).to_have_attribute("aria-expanded", "true")
        rows = page.locator("#one .anb-row[data-seq]:not(.anb-node)")
        seqs = [int(s) for s in rows.evaluate_all("rs => rs.map((r) => r.dataset.seq)")]
        target = next(s for s in seqs if s != 0)
        _press_redraw_release(page, page.locator(f'#one .anb-row[data-seq="{target}"]:not(.anb-node) .anb-summary'))
        page.wait_for_function(f"() => kernelModel.state.selected === {target}", timeout=2000)
        # a scroll while the button is down is drawn at once (a press on the scrollbar holds nothing either)
        page.evaluate("() => { const l = document.querySelector('#one .anb-list'); l.style.height = '60px'; }")
        box = page.locator("#one .anb-list").bounding_box()  # the list stays; its rows are drawn anew
        assert box is not None
        page.mouse.move(box["x"] + 40, box["y"] + 10)  # on the first row in sight
        page.mouse.down()
        page.evaluate("() => { document.querySelector('#one .anb-rows').firstElementChild.dataset.probe = 'old'; "
                      "const l = document.querySelector('#one .anb-list'); l.scrollTop = l.scrollHeight; }")
        page.wait_for_function("() => !document.querySelector('#one .anb-rows').firstElementChild.dataset.probe",
                               timeout=2000)  # drawn anew while the button is still down
        # a press held past a second (a release the list may never hear) no longer holds the rows
        page.evaluate("() => { document.querySelector('#one .anb-rows').firstElementChild.dataset.probe = 'old'; }")
        page.wait_for_timeout(1100)
        page.evaluate("() => kernelModel.trigger('change:breakpoints')")  # a redraw that scrolls nothing
        page.wait_for_function("() => !document.querySelector('#one .anb-rows').firstElementChild.dataset.probe",
                               timeout=2000)
        page.mouse.up()
        # following the run while the button is down: the kernel selects the last event, but the list does not
        # scroll to it under the pointer; the click then selects the row pressed
        page.locator("#one .agentnb-view-flat").click()  # the list: an event's row is at its seq
        page.evaluate("() => { document.querySelector('#one .anb-list').scrollTop = 0; }")
        page.wait_for_timeout(100)
        box = page.locator("#one .anb-list").bounding_box()  # the list view's own place
        assert box is not None
        x, y = box["x"] + 40, box["y"] + 10
        pressed = int(page.evaluate(f"() => document.elementFromPoint({x}, {y}).closest('.anb-row').dataset.seq"))
        page.mouse.move(x, y)
        page.mouse.down()
        last = max(seqs)
        assert last != pressed
        page.evaluate(f"() => {{ kernelModel.state.selected = {last}; kernelModel.trigger('change:selected'); }}")
        page.wait_for_timeout(300)
        assert page.evaluate("() => document.querySelector('#one .anb-list').scrollTop") == 0
        page.mouse.up()
        page.wait_for_function(f"() => kernelModel.state.selected === {pressed}", timeout=2000)
    finally:
        page.close()
