"""The approvals inbox's widget (widgets/inbox.js) in a real JupyterLab and Chromium.

A notebook lists a SQLite store's paused runs in the widget; the test decides one row, then a selection, watches
a run paused by another process appear by itself, opens a row's debugger, reads the page in JupyterLab
Light and Dark (text contrast at WCAG AA), then groups and filters by the runs' tags and ends a row's run.
Screenshots: ``test-artifacts/inbox-light.png``, ``inbox-dark.png``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb

from .contrast import below_aa
from .server import run_all, write_notebook

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]
T = 60_000  # ms; about 10x what these steps take on a loaded 2-core machine

CELLS = [
    "import sys; sys.path.insert(0, {repo!r})\n"
    "import agentnb as anb\n"
    "from tests.test_inbox import KEY, make_loop\n"
    "store = anb.SqliteStore({db!r}, key=KEY)\n"
    "loop = make_loop(store)\n"
    "_ = anb.batch(loop, [f'refund order {{i}}' for i in range(4)], name='support', tags=('desk',), progress=False)",
    "inbox = anb.Inbox(store, loop=loop, by='ana')\n"
    "inbox.widget(interval=0.2)",
]


def _notebook(root: Path, db: Path) -> str:
    return write_notebook(root, "inbox", [c.format(repo=str(REPO), db=str(db)) for c in CELLS])


def test_the_inbox_widget_decides_one_a_selection_and_updates_live(lab: dict[str, Any], browser: Any,
                                                                   artifacts: Path) -> None:
    from playwright.sync_api import expect

    db = lab["root"] / f"inbox_{int(time.time() * 1000)}.db"
    name = _notebook(lab["root"], db)
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    theme = lab["settings"] / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    try:
        page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}", timeout=T)
        run_all(page)
        app = page.locator(".jp-OutputArea-output .agentnb-inbox-app")
        rows = app.locator(".anbi-row")
        try:
            expect(rows).to_have_count(4, timeout=T)
        except AssertionError:
            page.screenshot(path=str(artifacts / "inbox-missing.png"))
            raise AssertionError("the inbox widget did not render its 4 rows (console: "
                                 + " | ".join(console[-5:]) + ")") from None
        expect(page.locator(".jp-OutputArea-child:has(.agentnb-inbox-static)")).to_be_hidden()  # the widget replaced it
        expect(app.locator(".anbi-title")).to_contain_text("deciding as ana")
        app.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "inbox-light.png"))
        assert below_aa(app) == []

        # decide one row
        app.locator(".anbi-row[data-run='support-0'] .anbi-approve").click()
        expect(rows).to_have_count(3, timeout=T)
        expect(app.locator(".anbi-message")).to_have_text("1 applied, 0 refused")

        # decide a selection, grouped by tool: two rows ticked, denied with one reason
        app.locator(".anbi-group").select_option("tool")
        expect(app.locator(".anbi-group-head")).to_contain_text("tool: refund")
        for run in ("support-1", "support-2"):
            app.locator(f".anbi-row[data-run='{run}'] .anbi-select").check()
        expect(app.locator(".anbi-count")).to_have_text("2 selected")
        app.locator(".anbi-note").fill("ask the customer first")
        app.locator(".anbi-deny-selected").click()
        expect(rows).to_have_count(1, timeout=T)
        expect(app.locator(".anbi-message")).to_have_text("2 applied, 0 refused")
        events = anb.SqliteStore(db, key="inbox-test-key-0001").load("support-2")
        denied = [e for e in events if e.type == "ApprovalResolved"]
        assert [(e.decision, e.by, e.note) for e in denied] == [("denied", "ana", "ask the customer first")]  # type: ignore[attr-defined]

        # another process pauses a run: it appears by itself
        code = ("import sys; sys.path.insert(0, sys.argv[2]); import agentnb as anb; "
                "from tests.test_inbox import KEY, make_loop; "
                "make_loop(anb.SqliteStore(sys.argv[1], key=KEY)).start('refund order 9', run_id='late').run()")
        done = subprocess.run([sys.executable, "-c", code, str(db), str(REPO)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        expect(app.locator(".anbi-row[data-run='late']")).to_have_count(1, timeout=T)
        expect(rows).to_have_count(2)

        # open a row: its run's debugger at the pause, below the inbox
        app.locator(".anbi-row[data-run='late'] .anbi-open").click()
        opened = page.locator(".agentnb-inbox-opened .agentnb-debugger")
        expect(opened.first).to_be_visible(timeout=T)
        expect(opened.first.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL", timeout=T)

        # the same page in JupyterLab Dark
        theme.write_text(json.dumps({"theme": "JupyterLab Dark"}))
        page.reload()
        expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=T)
        run_all(page)
        expect(rows).to_have_count(2, timeout=T)
        app.locator(".anbi-row[data-run='late'] .anbi-select").check()
        app.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "inbox-dark.png"))
        assert below_aa(app) == []

        # group and filter by the runs' tags, then end a row's run (a reason is needed)
        expect(app.locator(".anbi-row[data-run='support-3'] .anbi-tag-badge")).to_have_text("desk")
        app.locator(".anbi-group").select_option("tag")
        expect(app.locator(".anbi-group-head")).to_have_count(2)
        expect(app.locator(".anbi-group-head[data-group='desk']")).to_contain_text("tag: desk (1)")
        expect(app.locator(".anbi-group-head[data-group='(none)']")).to_contain_text("(1)")
        app.locator(".anbi-tag").select_option("desk")
        expect(rows).to_have_count(1)
        row = app.locator(".anbi-row[data-run='support-3']")
        row.locator(".anbi-end").click()
        expect(app.locator(".anbi-message")).to_contain_text("End run needs a reason")
        row.locator(".anbi-row-note").fill("the customer called: handled by phone")
        row.locator(".anbi-end").click()
        expect(app.locator(".anbi-message")).to_have_text("1 applied, 0 refused", timeout=T)
        expect(app.locator(".anbi-empty")).to_have_text("no row matches the filter")
        ended = anb.SqliteStore(db, key="inbox-test-key-0001").load("support-3")[-1]
        assert ended.reason == "ended by ana: the customer called: handled by phone"  # type: ignore[attr-defined]
    finally:
        if theme.exists():
            theme.unlink()
        page.close()
