"""``agentnb view`` in Debian's Chromium: the run list renders and sorts, a run opens in the static debugger.

The viewer is started as a user starts it (``python -m agentnb view ... --no-browser`` in a subprocess), its
printed URL is loaded in a page, and a page without the token is refused.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
KEY = "a-test-checkpoint-key"
T = 60_000  # ms; about 10x what these steps take on a loaded 2-core machine


def _sources(d: Path) -> None:
    store = anb.SqliteStore(d / "runs.db", key=KEY)
    refund = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
    refund.start("Please refund order 42", run_id="refund-42").run()
    weather = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    weather.start("Paris?", run_id="weather-1").run().transcript.save(d / "weather-1.jsonl")


def test_view_in_chromium(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    from playwright.sync_api import expect

    _sources(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
           "HOME": str(tmp_path), "AGENTNB_CHECKPOINT_KEY": KEY}
    proc = subprocess.Popen([sys.executable, "-m", "agentnb", "view", "runs.db", "weather-1.jsonl", "--no-browser"],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        assert proc.stdout is not None
        url, deadline = "", time.monotonic() + T / 1000
        while "token=" not in url and time.monotonic() < deadline:
            url = proc.stdout.readline().strip()
            assert url or proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        base = url.split("/?token=")[0]

        refused = page.goto(f"{base}/", timeout=T)
        assert refused is not None and refused.status == 403
        expect(page.locator("body")).to_contain_text("token")

        page.goto(url, timeout=T)
        rows = page.locator("table.runs tbody tr.run")
        expect(rows).to_have_count(2, timeout=T)
        expect(page.locator("table.runs")).to_contain_text("WAITING_APPROVAL")
        expect(page.locator("table.runs")).to_contain_text("COMPLETED")
        page.locator("th a[data-sort='run_id']").click()  # descending first
        expect(rows.first).to_contain_text("weather-1", timeout=T)
        page.locator("th a[data-sort='run_id']").click()
        expect(rows.first).to_contain_text("refund-42", timeout=T)
        page.screenshot(path=str(artifacts / "cli-view-list.png"))

        rows.first.locator("a").click()
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=T)
        root = page.locator(".agentnb-debugger")
        expect(root.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL")
        n = len(anb.SqliteStore(tmp_path / "runs.db", key=KEY, readonly=True).load("refund-42"))
        expect(root.locator(".anb-count")).to_have_text(f"{n} events")
        expect(root.locator("button.agentnb-btn-step")).to_be_hidden()  # read-only
        page.screenshot(path=str(artifacts / "cli-view-run.png"))
        assert not errors, errors
    finally:
        page.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=T / 1000)
    assert proc.returncode == 0 and "Traceback" not in err, err
