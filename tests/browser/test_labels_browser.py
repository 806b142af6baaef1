"""Labels from the debugger in a real JupyterLab and Chromium, and in the HTML export opened from file://.

A notebook shows a finished run of an SQLite store in the debugger; the test labels the run from the header and
an event from its card, sees each label on the page at once (and a refusal as a message), adds the run to a
dataset file, then reads the labels back in ``frames.labels()`` from the store's file. The run exported with
those labels copied into the page shows them on its header and card with no kernel. Screenshots:
``test-artifacts/labels-debugger.png``, ``labels-export.png``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb.evals import Dataset

from .server import run_all, write_notebook

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]
T = 60_000  # ms; about 10x what these steps take on a loaded 2-core machine

CELLS = [
    "import sys; sys.path.insert(0, {repo!r})\n"
    "import agentnb as anb\n"
    "from tests.test_labels import KEY, _loop\n"
    "store = anb.SqliteStore({db!r}, key=KEY)\n"
    "run = _loop(store).start('Refund order 42', run_id='r1').run()\n"
    "run.approve(run.pending_approvals()[0].call_id)\n"
    "_ = run.run()",
    "dbg = anb.Debugger(run, by='ana', dataset={cases!r})\n"
    "dbg",
]


def _notebook(root: Path, db: Path, cases: Path) -> str:
    return write_notebook(root, "labels", [c.format(repo=str(REPO), db=str(db), cases=str(cases)) for c in CELLS])


def test_a_person_labels_the_run_and_an_event_from_the_debugger(lab: dict[str, Any], browser: Any,
                                                                artifacts: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    from tests.test_labels import KEY

    stamp = int(time.time() * 1000)
    db, cases = lab["root"] / f"labels_{stamp}.db", lab["root"] / f"cases_{stamp}.jsonl"
    name = _notebook(lab["root"], db, cases)
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    try:
        page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}", timeout=T)
        run_all(page)
        app = page.locator(".jp-OutputArea-output .agentnb-debugger")
        try:
            expect(app.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
        except AssertionError:
            page.screenshot(path=str(artifacts / "labels-missing.png"))
            raise AssertionError("the debugger did not show the finished run (console: "
                                 + " | ".join(console[-5:]) + ")") from None

        # the run, from the header: a refusal first (nothing said), then a label
        app.locator(".agentnb-btn-label-run").click()
        form = app.locator(".agentnb-label-form-run")
        expect(form.locator(".agentnb-label-who")).to_contain_text("as ana")
        form.locator(".agentnb-btn-label-save").click()
        expect(form.locator(".agentnb-label-error")).to_contain_text("give a tag, a note or a score", timeout=T)
        form.locator(".agentnb-label-tag").fill("good run")
        form.locator(".agentnb-label-note").fill("checked by hand")
        form.locator(".agentnb-btn-label-save").click()
        chips = app.locator(".agentnb-run-label-chips .agentnb-label")
        expect(chips).to_have_text(["good run · checked by hand"], timeout=T)
        expect(form.locator(".agentnb-label-error")).to_have_text("")
        expect(form.locator(".agentnb-label-tag")).to_have_value("")  # saved: the form starts again

        # an event, from its card
        app.locator(".agentnb-view-flat").click()
        app.locator(".anb-row[data-seq='3']").click()
        expect(app.locator(".agentnb-detail")).to_contain_text("CallParsed", timeout=T)
        app.locator(".agentnb-btn-label-event").click()
        card = app.locator(".agentnb-label-form-event")
        expect(card.locator(".agentnb-label-about option").first).to_have_text("this event (3 · CallParsed)", timeout=T)
        card.locator(".agentnb-label-tag").fill("look here")
        card.locator(".agentnb-label-score").fill("1")
        card.locator(".agentnb-btn-label-save").click()
        expect(app.locator(".agentnb-card-label-chips .agentnb-label")).to_have_text(["event 3: look here · score 1"],
                                                                                     timeout=T)
        expect(chips).to_have_count(2)

        # add the run to the dataset, its expected output confirmed
        app.locator(".agentnb-btn-add-to-dataset").click()
        expect(app.locator(".agentnb-dataset-expected")).to_have_value("Refunded.")
        app.locator(".agentnb-btn-dataset-add").click()
        expect(app.locator(".agentnb-dataset-form .agentnb-label-done")).to_contain_text("added case 'r1'", timeout=T)
        app.scroll_into_view_if_needed()
        app.screenshot(path=str(artifacts / "labels-debugger.png"))
    finally:
        page.close()

    # beside the log, in the store's file: a frame that joins the run's
    t = anb.Transcript(anb.SqliteStore(db, key=KEY).load("r1"))  # every seal verifies
    book = anb.Labels(db)
    frame = t.frames.labels(book)
    assert frame["tag"].tolist() == ["good run", "look here"] and frame["by"].tolist() == ["ana", "ana"]
    assert frame["seq"].tolist()[1] == 3 and frame["score"].tolist()[1] == 1.0
    assert Dataset(cases)["r1"].expected == "Refunded."

    # the export, with the labels copied into the page, shows them with no kernel
    export = t.to_html(tmp_path / "labelled.html")
    anb.Labels(export).extend(book)
    anb.Labels(export).add(t, seq=5, tag="a\u202eb <img src=x onerror=alert(1)>", by="mallory")  # hostile text
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    try:
        page.goto(export.as_uri(), timeout=T)
        app = page.locator("#agentnb-app[data-ready='true']")
        app.wait_for(timeout=T)
        chips = app.locator(".agentnb-run-label-chips .agentnb-label")
        expect(chips).to_have_text(["good run · checked by hand", "event 3: look here · score 1",
                                    "event 5: a\\u202eb <img src=x onerror=alert(1)>"], timeout=T)
        assert app.locator(".agentnb-run-labels img").count() == 0  # text, never markup; the override written out
        expect(app.locator(".agentnb-btn-label-run")).to_be_hidden()  # no kernel: nothing to press
        chips.nth(1).click()  # the event's chip selects it: its card shows the label
        expect(app.locator(".agentnb-detail")).to_contain_text("CallParsed", timeout=T)
        expect(app.locator(".agentnb-card-label-chips .agentnb-label")).to_have_text(["event 3: look here · score 1"])
        expect(app.locator(".agentnb-btn-label-event")).to_be_hidden()
        page.screenshot(path=str(artifacts / "labels-export.png"))
    finally:
        page.close()
