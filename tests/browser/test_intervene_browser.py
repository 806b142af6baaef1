"""Stepping into a paused run from the debugger (widgets/debugger.js ``attachIntervene``) in JupyterLab and Chromium.

A notebook pauses two runs of a SQLite store at their approvals, each in a debugger. In the first, the test
approves one call (queued behind the other), types a message for the model, cancels the queued call with a
reason, then denies the other: the run carries on, and the model's next request -- read back from the store --
holds the message and the cancellation. In the second it first ends the run with no reason (refused, on the
page) and then with one. Screenshots: ``test-artifacts/intervene-light.png``, ``intervene-dark.png``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb.events import CallRejected, Interjected, ModelRequested, TurnCompleted

from .contrast import below_aa
from .server import run_all, write_notebook

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]
T = 60_000  # ms; about 10x what these steps take on a loaded 2-core machine
KEY = "cancel-call-test-key-1"

CELLS = [
    "import sys; sys.path.insert(0, {repo!r})\n"
    "import agentnb as anb\n"
    "from tests.test_cancel_call import KEY, make_loop\n"
    "import uuid; n = uuid.uuid4().hex[:8]  # new runs each time the notebook runs\n"
    "loop = make_loop(anb.SqliteStore({db!r}, key=KEY), 'refund', 'refund')",
    "anb.Debugger(loop.start('two refunds', run_id=f'one_{{n}}'), by='ana').cont()",
    "anb.Debugger(loop.start('two refunds', run_id=f'two_{{n}}'), by='ana').cont()",
]


def _notebook(root: Path, db: Path) -> str:
    return write_notebook(root, "intervene", [c.format(repo=str(REPO), db=str(db)) for c in CELLS])


def test_a_person_tells_the_model_something_cancels_a_queued_call_and_ends_a_run(
        lab: dict[str, Any], browser: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    db = lab["root"] / f"intervene_{int(time.time() * 1000)}.db"
    name = _notebook(lab["root"], db)
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    theme = lab["settings"] / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    try:
        page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}", timeout=T)
        run_all(page)
        roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
        try:
            expect(roots).to_have_count(2, timeout=T)
            expect(roots.nth(1).locator(".agentnb-intervene-calls .anb-intervene-call")).to_have_count(2, timeout=T)
        except AssertionError:
            page.screenshot(path=str(artifacts / "intervene-missing.png"))
            raise AssertionError("the debuggers did not show the step-in box (console: "
                                 + " | ".join(console[-5:]) + ")") from None
        one, two = roots.nth(0), roots.nth(1)
        run_one, run_two = (r.locator(".agentnb-header code").first.inner_text() for r in (one, two))
        box = one.locator(".agentnb-intervene")
        expect(box.locator("summary")).to_contain_text("Step in as ana")
        calls = box.locator(".anb-intervene-call")
        expect(calls).to_have_count(2)
        first = calls.nth(0).get_attribute("data-call-id")
        second = calls.nth(1).get_attribute("data-call-id")

        # approve the first: it is queued behind the second, which still waits
        one.locator(f".anb-approval[data-call-id='{first}'] .agentnb-btn-approve").click()
        expect(calls.nth(0)).to_contain_text("approved", timeout=T)

        # a message for the model: its card shows at once
        box.locator(".agentnb-interject-text").fill("refund only the first order, the second was a test")
        box.locator(".agentnb-btn-interject").click()
        expect(box.locator(".agentnb-intervene-said")).to_contain_text("ana told the model", timeout=T)
        expect(one.locator(".agentnb-detail")).to_contain_text("refund only the first order", timeout=T)
        expect(box.locator(".agentnb-interject-text")).to_have_value("")
        box.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "intervene-light.png"))
        assert below_aa(one) == []

        # cancel the queued call, with a reason
        calls.nth(0).locator(".agentnb-cancel-reason").fill("approved by mistake")
        calls.nth(0).locator(".agentnb-btn-cancel-call").click()
        expect(one.locator(".agentnb-detail")).to_contain_text("Cancelled by ana: approved by mistake", timeout=T)
        expect(calls).to_have_count(1, timeout=T)

        # deny the other: the run goes on and ends; the model read both
        one.locator(f".anb-approval[data-call-id='{second}'] .agentnb-deny-reason").fill("not needed")
        one.locator(f".anb-approval[data-call-id='{second}'] .agentnb-btn-deny").click()
        expect(one.locator(".agentnb-state-badge")).to_have_text("COMPLETED", timeout=T)
        events = anb.SqliteStore(db, key=KEY).load(run_one)
        said = [e for e in events if isinstance(e, Interjected)]
        assert [(e.text, e.by) for e in said] == [("refund only the first order, the second was a test", "ana")]
        cancelled = [e for e in events if isinstance(e, CallRejected)]
        assert [(e.call_id, e.by) for e in cancelled] == [(first, "ana")]
        last = [e for e in events if isinstance(e, ModelRequested)][-1]
        assert [m.text for m in last.new_messages if m.role == "user"] == [said[0].text]
        answer = [e for e in events if isinstance(e, TurnCompleted)][-1].response.message.text
        assert answer == "I read: Cancelled by ana: approved by mistake | Denied by the user: not needed"
        expect(box.locator(".agentnb-intervene-why")).to_contain_text("the run is over (COMPLETED)", timeout=T)

        # end the second run: without a reason it is refused on the page, with one it ends
        other = two.locator(".agentnb-intervene")
        other.locator(".agentnb-btn-end-run").click()
        expect(other.locator(".agentnb-intervene-error")).to_contain_text("end needs a reason", timeout=T)
        expect(two.locator(".agentnb-state-badge")).to_have_text("WAITING_APPROVAL")
        other.locator(".agentnb-end-reason").fill("a duplicate ticket")
        other.locator(".agentnb-btn-end-run").click()
        expect(two.locator(".agentnb-state-badge")).to_have_text("CANCELLED", timeout=T)
        expect(two.locator(".agentnb-header")).to_contain_text("ended by ana: a duplicate ticket")
        expect(other.locator(".agentnb-intervene-error")).to_have_text("")
        assert anb.SqliteStore(db, key=KEY).load(run_two)[-1].reason == "ended by ana: a duplicate ticket"  # type: ignore[attr-defined]

        # the box in JupyterLab Dark (the notebook runs again: new runs, paused)
        theme.write_text(json.dumps({"theme": "JupyterLab Dark"}))
        page.reload()
        expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=T)
        run_all(page)
        expect(roots.nth(1).locator(".anb-intervene-call")).to_have_count(2, timeout=T)
        roots.nth(0).locator(".agentnb-interject-text").fill("check the order date first")
        roots.nth(0).locator(".agentnb-intervene").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "intervene-dark.png"))
        assert below_aa(roots.nth(0)) == []
    finally:
        if theme.exists():
            theme.unlink()
        page.close()
