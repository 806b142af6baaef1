"""The Wire tab's real wire in Chromium: a streamed run through the official openai client, exported and opened
from ``file://``: the request as sent and the frames with their times beside the rendering, readable in light
and dark, and "Copy as curl" copies a command whose key is a shell variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentnb as anb
from agentnb.emulator import Emulator
from agentnb.providers.openai_chat._model import client

from .contrast import below_aa

pytestmark = pytest.mark.browser
T = 60_000
KEY = "zq9-wire-browser-credential-8812"


def test_the_wire_tab_shows_what_went_over_http(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    from playwright.sync_api import expect

    with Emulator([{"text": "Hello there, from the wire."}], chunk_size=6) as emu:
        model = anb.OpenAIChatModel(client(KEY, emu.url("openai")), model="gpt-4.1", stream=True)
        run = anb.Loop(model=model).start("Hi").run()
    frames = run.events[-2].response.wire["frames_total"]  # type: ignore[attr-defined,index]
    page_path = run.transcript.to_html(tmp_path / "wire.html")
    assert KEY.encode() not in page_path.read_bytes()
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 1100, "height": 900}, color_scheme=scheme)
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e, seen=errors: seen.append(str(e)))
        try:
            page.goto(page_path.as_uri(), timeout=T)
            page.locator("#agentnb-app[data-ready='true']").wait_for(timeout=T)
            root = page.locator(".agentnb-debugger")
            root.locator(".agentnb-view-flat").click()  # the tree folds the request into its model call's row
            root.locator(".anb-row.agentnb-ev-ModelRequested").first.locator(".anb-summary").click()
            root.get_by_role("tab", name="Wire").click()
            sent = root.locator(".agentnb-sent-request")
            expect(sent).to_contain_text('"model": "gpt-4.1"', timeout=T)
            expect(sent).to_contain_text('"stream": true')
            expect(sent).to_contain_text("authorization: Bearer [REDACTED]")
            expect(root.locator(".anb-sent-title")).to_contain_text("as sent through OpenAI Chat Completions: POST")
            response = root.locator(".agentnb-sent-response")
            expect(response).to_contain_text(f"{frames} frames, read at (ms after the request was sent)")
            expect(response).to_contain_text("data: [DONE]")
            low = below_aa(root.locator(".agentnb-pane-wire"))
            assert not low, f"{scheme}: wire text below WCAG AA (4.5:1): {low[:6]}"
            page.screenshot(path=str(artifacts / f"wire-capture-{scheme}.png"), full_page=True)
            if scheme == "light":
                root.locator("button.agentnb-copy-curl").click()
                expect(root.locator("button.agentnb-copy-curl")).to_have_text("Copied", timeout=T)
                copied = page.evaluate("navigator.clipboard.readText()")
                assert copied.startswith("curl -X POST") and "Bearer $OPENAI_API_KEY" in copied and KEY not in copied
                expect(root.locator("button.agentnb-copy-curl")).to_have_text("Copy as curl", timeout=T)
                # another API's tab keeps its rendering, and names the tab that holds the capture
                root.get_by_role("tab", name="Anthropic Messages").click()
                expect(root.locator(".anb-sent-note")).to_contain_text("as sent through OpenAI Chat Completions")
                expect(root.locator(".agentnb-sent-request")).to_be_hidden()
            assert not errors, errors
        finally:
            context.close()
