"""``agentnb view`` in Debian's Chromium: the run list renders and sorts, each run opens in the static debugger.

The viewer is started as a user starts it (``python -m agentnb view ... --no-browser`` in a subprocess), its
printed URL is loaded in a page, and a page without the token is refused. Its sources are one of each kind: a
SQLite store, a transcript, a Parquet dataset and an OTLP/JSON trace. With ``--follow``, runs other
processes write (a run that pauses for a person, then the approval that drives it on, from ``agentnb
approve``) appear in the list and in the open run's page without a restart.
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


def _sources(d: Path) -> list[str]:
    from tests.test_cli_servers import otlp_trace, weather_run

    store = anb.SqliteStore(d / "runs.db", key=KEY)
    refund = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
    refund.start("Please refund order 42", run_id="refund-42").run()
    weather_run("weather-1").save(d / "weather-1.jsonl")
    anb.TranscriptCollection([weather_run("parquet-1")]).save_parquet(d / "dataset")
    otlp_trace(d / "trace.json")
    return ["runs.db", "weather-1.jsonl", "dataset", "trace.json"]


def _env(d: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
            "HOME": str(d), "AGENTNB_CHECKPOINT_KEY": KEY}


def _url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    url, deadline = "", time.monotonic() + T / 1000
    while "token=" not in url and time.monotonic() < deadline:
        url = proc.stdout.readline().strip()
        assert url or proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    return url


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=T / 1000)
    assert proc.returncode == 0 and "Traceback" not in err, err


def test_view_in_chromium(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    from playwright.sync_api import expect

    sources = _sources(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "agentnb", "view", *sources, "--no-browser"],
                            cwd=tmp_path, env=_env(tmp_path), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        url = _url(proc)
        base = url.split("/?token=")[0]

        refused = page.goto(f"{base}/", timeout=T)
        assert refused is not None and refused.status == 403
        expect(page.locator("body")).to_contain_text("token")

        page.goto(url, timeout=T)
        rows = page.locator("table.runs tbody tr.run")
        expect(rows).to_have_count(4, timeout=T)
        expect(page.locator("table.runs")).to_contain_text("WAITING_APPROVAL")
        expect(page.locator("table.runs")).to_contain_text("COMPLETED")
        page.locator("th a[data-sort='run_id']").click()  # descending first
        expect(rows.first).to_contain_text("weather-1", timeout=T)
        page.locator("th a[data-sort='run_id']").click()
        expect(rows.first).to_contain_text("parquet-1", timeout=T)
        page.screenshot(path=str(artifacts / "cli-view-list.png"))

        listed = page.url
        for source in sources:  # each kind of source opens in the debugger, with all its run's events
            row = page.locator("table.runs tbody tr.run", has=page.locator(f"td.muted:text-is('{source}')"))
            expect(row).to_have_count(1, timeout=T)
            n = int(row.locator("td.num").nth(2).inner_text())
            row.locator("a").click()
            page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=T)
            expect(page.locator(".agentnb-debugger .anb-count")).to_have_text(f"{n} events", timeout=T)
            page.goto(listed, timeout=T)
        page.locator("table.runs tbody tr.run a:text-is('refund-42')").click()
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
        _stop(proc)


SHOP = """
import os
import agentnb as anb

store = anb.SqliteStore("runs.db", key=os.environ["AGENTNB_CHECKPOINT_KEY"])
loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)

if __name__ == "__main__":  # the writer: a run that pauses for a person
    run = loop.start("Please refund order 7", run_id="refund-7").run()
    print(run.pending_approvals()[0].call_id)
"""


def test_follow_shows_a_run_other_processes_write(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    from playwright.sync_api import expect

    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    anb.SqliteStore(tmp_path / "runs.db", key=KEY)  # an empty store, as a team's is before its first run
    env = _env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "agentnb", "view", "runs.db", "--follow", "--interval", "1",
                             "--no-browser"], cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        url = _url(proc)
        page.goto(url, timeout=T)
        expect(page.locator("body")).to_contain_text("0 run(s)", timeout=T)

        writer = subprocess.run([sys.executable, "shop.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=T / 1000)
        assert writer.returncode == 0, writer.stderr
        call_id = writer.stdout.strip().splitlines()[-1]
        row = page.locator("table.runs tbody tr.run")
        expect(row).to_have_count(1, timeout=T)  # the list page reloads itself
        expect(row.locator("td.state")).to_have_text("WAITING_APPROVAL", timeout=T)

        href = row.locator("a").get_attribute("href")
        page.goto(url.split("/?")[0] + str(href), timeout=T)
        page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=T)
        root = page.locator(".agentnb-debugger")
        expect(root.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL")
        paused = len(anb.SqliteStore(tmp_path / "runs.db", key=KEY, readonly=True).load("refund-7"))
        expect(root.locator(".anb-count")).to_have_text(f"{paused} events")

        approve = subprocess.run([sys.executable, "-m", "agentnb", "approve", "runs.db", "refund-7", call_id,
                                  "--loop", "shop.py:loop", "--by", "ana"], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=T / 1000)
        assert approve.returncode == 0, approve.stderr
        done = len(anb.SqliteStore(tmp_path / "runs.db", key=KEY, readonly=True).load("refund-7"))
        assert done > paused
        # the open page reloads itself once the run has more events: no click, no restart
        expect(page.locator(".agentnb-debugger .agentnb-header")).to_contain_text("COMPLETED", timeout=T)
        expect(page.locator(".agentnb-debugger .anb-count")).to_have_text(f"{done} events", timeout=T)
        page.screenshot(path=str(artifacts / "cli-view-follow.png"))
        assert not errors, errors
    finally:
        page.close()
        _stop(proc)
