"""End to end in a real browser: the debugger's front end (widgets/debugger.js) in JupyterLab, and exported.

Timings are taken inside the page (``performance.now()``) and printed as a report, not asserted: a loaded
2-core machine must not turn them into flaky failures. ``bench/debugger_browser.py`` measures the large
transcripts.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

import agentnb as anb

from .contrast import below_aa
from .server import run_all

HERE = Path(__file__).parent
pytestmark = pytest.mark.browser

T = 60_000  # ms; about 10x what these steps take on a loaded 2-core machine


def _copy_stripped(src: Path, dst: Path) -> None:
    nb = json.loads(src.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    dst.write_text(json.dumps(nb), encoding="utf-8")


def click_to_detail_ms(page: Any, index: int, seq: int) -> float:
    """Milliseconds from a click on row ``seq`` to the detail pane showing that event, timed inside the page."""
    return float(page.evaluate(
        """([index, seq]) => new Promise(resolve => {
            const root = document.querySelectorAll('.agentnb-debugger')[index];
            const done = () => root.querySelector(`.agentnb-detail-card[data-seq="${seq}"]`);
            const obs = new MutationObserver(() => {
                if (done()) { obs.disconnect(); resolve(performance.now() - t0); } });
            obs.observe(root, {subtree: true, childList: true, attributes: true});
            const t0 = performance.now();
            root.querySelector(`.anb-row[data-seq="${seq}"] .anb-summary`).click();
        })""",
        [index, seq],
    ))


def _open(lab: dict[str, Any], browser: Any, artifacts: Path) -> tuple[Any, list[str]]:
    name = f"debugger_e2e_{int(time.time() * 1000)}.ipynb"
    _copy_stripped(HERE / "debugger_e2e.ipynb", lab["root"] / name)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab["url"])
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}", timeout=T)
    run_all(page)
    roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
    try:
        roots.nth(3).wait_for(timeout=T)
    except Exception:
        page.screenshot(path=str(artifacts / "debugger-missing.png"))
        raise AssertionError(
            "the debugger widget did not render; if the output shows a repr instead, the JupyterLab widget "
            "manager or anywidget's extension is missing (console: " + " | ".join(console[-5:]) + ")"
        ) from None
    return page, console


def _rows_count(root: Any) -> int:
    text = root.locator(".anb-count").inner_text()
    return int(re.sub(r"[^\d]", "", text.split(" of ")[-1]) or 0)


def test_debugger_in_jupyterlab(lab: dict[str, Any], browser: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    page, console = _open(lab, browser, artifacts)
    report: list[str] = []
    try:
        roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
        # the last cell displays a debugger and continues it: rows show while that cell still runs
        same_cell = roots.nth(3)
        seen_running = 0
        deadline = time.monotonic() + T / 1000
        while time.monotonic() < deadline:
            rows_now = _rows_count(same_cell)
            if "COMPLETED" in same_cell.locator(".agentnb-header").inner_text():
                break
            seen_running = max(seen_running, rows_now)
            time.sleep(0.05)
        final_same = _rows_count(same_cell)
        settle = time.monotonic() + T / 1000  # a resend after a gap clears the rows for a moment: read again
        while final_same <= seen_running and time.monotonic() < settle:
            time.sleep(0.05)
            final_same = _rows_count(same_cell)
        assert 0 < seen_running < final_same, (seen_running, final_same)
        root = roots.nth(0)
        header = root.locator(".agentnb-header")
        expect(header).to_contain_text("NEW", timeout=T)
        root.locator(".agentnb-view-flat").click()  # this test reads every event's row (the tree: test_tree_browser)
        root.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "debugger-01-opened.png"))

        # keyboard: s steps (the debugger has focus); the notebook does not see the key
        root.focus()
        cells_before = page.locator(".jp-Cell").count()
        for n in (1, 2, 3):
            page.keyboard.press("s")
            expect(root.locator(".anb-count")).to_have_text("1 event" if n == 1 else f"{n} events", timeout=T)
        assert page.locator(".jp-Cell").count() == cells_before

        # Step (button) until an argument fragment shows, then click its row: the detail follows the click
        step = root.locator("button.agentnb-btn-step")
        merges = root.locator(".anb-row.agentnb-ev-ArgumentsMerged")
        for _ in range(40):
            if merges.count():
                break
            before = _rows_count(root)
            step.click()
            expect(root.locator(".anb-count")).to_have_text(f"{before + 1} events", timeout=T)
        assert merges.count() >= 1, "no ArgumentsMerged row after 40 steps"
        seq = int(merges.first.get_attribute("data-seq") or -1)
        first_click = click_to_detail_ms(page, 0, seq)
        detail = root.locator(".agentnb-pane-event")
        expect(detail.locator(f".agentnb-detail-card[data-seq='{seq}'] .agentnb-frag")).to_be_visible(timeout=T)
        expect(root.locator(f".anb-row.anb-selected[data-seq='{seq}']")).to_have_count(1)
        page.screenshot(path=str(artifacts / "debugger-02-argument-merge.png"))

        # a breakpoint on the refund tool, set from the page
        root.locator(".agentnb-bp-kind").select_option("tool")
        root.locator(".agentnb-bp-value").fill("create_refund")
        root.locator("button.agentnb-btn-add-breakpoint").click()
        expect(root.locator(".agentnb-breakpoint")).to_have_text("✕ tool = create_refund", timeout=T)

        # Continue: the run pauses for approval; Approve from the panel; the breakpoint stops before the tool runs
        root.locator("button.agentnb-btn-continue").click()
        approve = root.locator("button.agentnb-btn-approve")
        expect(approve).to_be_visible(timeout=T)
        expect(header).to_contain_text("WAITING_APPROVAL", timeout=T)
        page.screenshot(path=str(artifacts / "debugger-03-approval.png"))
        approve.click()
        expect(root.locator(".agentnb-status")).to_contain_text("breakpoint: tool = create_refund", timeout=T)
        expect(header).to_contain_text("EXECUTING")
        last = root.locator(".anb-row").last
        expect(last).to_have_class(re.compile("agentnb-ev-ToolStarted"))
        expect(root.locator(".anb-row.agentnb-ev-ToolFinished")).to_have_count(1)  # only get_order ran
        page.screenshot(path=str(artifacts / "debugger-04-tool-breakpoint.png"))

        # c continues (keyboard) to the end
        root.focus()
        page.keyboard.press("c")
        expect(header).to_contain_text("COMPLETED", timeout=T)
        expect(root.locator(".anb-row.agentnb-ev-RunFinished")).to_have_count(1, timeout=T)
        total = _rows_count(root)

        # filters and search
        root.locator(".agentnb-filter-type").select_option("ToolFinished")
        expect(root.locator(".anb-count")).to_have_text(f"2 of {total}", timeout=T)
        expect(root.locator(".anb-row")).to_have_count(2)
        root.locator(".agentnb-filter-type").select_option("")
        root.locator(".agentnb-filter-tool").select_option("create_refund")
        expect(root.locator(".anb-row.agentnb-ev-ApprovalResolved")).to_have_count(1, timeout=T)
        root.locator(".agentnb-filter-tool").select_option("")
        root.focus()
        page.keyboard.press("/")
        page.keyboard.type("approved")
        expect(root.locator(".anb-count")).to_have_text(f"1 of {total}", timeout=T)
        page.keyboard.press("Escape")
        root.locator(".agentnb-filter-q").fill("")
        expect(root.locator(".anb-count")).to_have_text(f"{total} events", timeout=T)

        # keyboard time travel: Home, → → →, j, k, End; the selection is always in view
        root.focus()
        page.keyboard.press("Home")
        travel = root.locator(".agentnb-pane-event .agentnb-detail-card")
        expect(travel).to_have_attribute("data-seq", "0", timeout=T)
        for key, expected in (("ArrowRight", "1"), ("ArrowRight", "2"), ("ArrowRight", "3"), ("j", "4"), ("k", "3")):
            page.keyboard.press(key)
            expect(travel).to_have_attribute("data-seq", expected, timeout=T)
        root.get_by_role("tab", name="Conversation").click()
        conversation = root.locator(".agentnb-time-travel")
        expect(conversation).to_contain_text("after event 3")
        expect(conversation).to_contain_text("Please refund order 42")
        page.screenshot(path=str(artifacts / "debugger-05-time-travel.png"))
        page.keyboard.press("End")
        expect(root.locator(f".anb-row.anb-selected[data-seq='{total - 1}']")).to_be_in_viewport(timeout=T)

        # click-to-detail timings on rows in sight
        root.get_by_role("tab", name="Event").click()
        clicks = [first_click]
        for target in (total - 3, total - 6, total - 9, total - 12):
            clicks.append(click_to_detail_ms(page, 0, target))
        report.append(f"click a row -> detail updated: median {statistics.median(clicks):.0f} ms, "
                      f"max {max(clicks):.0f} ms over {len(clicks)} clicks (target < 100 ms)")

        # the wire view, one provider at a time, full width of the pane
        request_row = root.locator(".anb-row.agentnb-ev-ModelRequested").last
        request_row.locator(".anb-summary").click()
        root.get_by_role("tab", name="Wire").click()
        wire = root.locator(".agentnb-pane-wire")
        expect(wire.locator(".agentnb-wire-request")).to_contain_text('"tool_call_id"', timeout=T)
        wire.get_by_role("tab", name="Anthropic Messages").click()
        expect(wire).to_have_attribute("data-provider", "Anthropic Messages", timeout=T)
        expect(wire.locator(".agentnb-wire-request")).to_contain_text('"tool_use_id"', timeout=T)
        expect(wire.locator(".agentnb-wire-request")).not_to_contain_text('"tool_call_id"')
        wire.locator("button.agentnb-copy-request").click()
        expect(wire.locator("button.agentnb-copy-request")).to_have_text("Copied", timeout=T)
        copied = page.evaluate("navigator.clipboard.readText()")
        assert '"tool_use_id"' in copied and copied == wire.locator(".agentnb-wire-request").inner_text()
        page.screenshot(path=str(artifacts / "debugger-06-wire.png"))
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), "horizontal scroll"

        # Deny from the panel of the second debugger (it waits for approval since its cell ran)
        other = roots.nth(1)
        expect(other.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL", timeout=T)
        other.locator(".agentnb-deny-reason").fill("not today")
        other.locator("button.agentnb-btn-deny").click()
        expect(other.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
        other.get_by_role("tab", name="Conversation").click()
        expect(other.locator(".agentnb-time-travel")).to_contain_text("Denied by the user: not today", timeout=T)

        # live streaming: the page keeps up with 500 fragments a second
        live = roots.nth(2)
        page.evaluate("agentnbMetrics.lags.length = 0")
        live.locator("button.agentnb-btn-continue").click()
        expect(live.locator(".agentnb-header")).to_contain_text("MODEL_REQUESTED", timeout=T)  # it moves while running
        mid = _rows_count(live)
        expect(live.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
        final = _rows_count(live)
        lags = page.evaluate("agentnbMetrics.lags.slice()")
        assert 0 < mid < final and len(lags) >= 3, (mid, final, lags)
        lags_sorted = sorted(lags)
        report.append(f"live stream, {final} events at ~500 fragments/s: {len(lags)} view updates, "
                      f"lag behind the run median {statistics.median(lags):.0f} ms, "
                      f"p95 {lags_sorted[int(len(lags) * 0.95) - 1]:.0f} ms, max {max(lags):.0f} ms (target < 200 ms)")
        live.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "debugger-07-streamed.png"))

        # the same view in JupyterLab's dark theme (colours come from its CSS variables)
        theme = lab["settings"] / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
        theme.write_text(json.dumps({"theme": "JupyterLab Dark"}))
        try:
            page.reload()
            expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=T)
            run_all(page)
            root = page.locator(".jp-OutputArea-output .agentnb-debugger").first
            root.locator("button.agentnb-btn-continue").click()
            expect(root.locator("button.agentnb-btn-approve")).to_be_visible(timeout=T)
            root.scroll_into_view_if_needed()
            page.screenshot(path=str(artifacts / "debugger-08-dark-theme.png"))
        finally:
            theme.unlink()
    finally:
        print("\n" + "\n".join(report))
        page.close()


def test_exported_html_opens_from_file(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    from playwright.sync_api import expect

    model = anb.ScriptedModel.story("refund", stream=True, chunk_size=6)
    loop = anb.Loop(model=model, tools=anb.stories.tools("refund"))
    run = loop.start("Please refund order 42").run()
    run.approve(run.pending_approvals()[0].call_id)
    run.run()
    path = run.transcript.to_html(tmp_path / "refund.html")
    n = len(run.events)
    for scheme in ("light", "dark"):
        page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
        requests: list[str] = []
        errors: list[str] = []
        page.on("request", lambda r, seen=requests: seen.append(r.url))
        page.on("pageerror", lambda e, seen=errors: seen.append(str(e)))
        try:
            page.goto(path.as_uri(), timeout=T)
            app = page.locator("#agentnb-app[data-ready='true']")
            app.wait_for(timeout=T)
            root = page.locator(".agentnb-debugger")
            expect(root.locator(".agentnb-header")).to_contain_text("COMPLETED")
            expect(root.locator(".anb-count")).to_have_text(f"{n} events")
            expect(root.locator("button.agentnb-btn-step")).to_be_hidden()  # read-only
            expect(root.locator(".anb-row.anb-selected")).to_be_visible()
            low = below_aa(root)  # the export's own light and dark variables, the last row selected
            assert not low, f"{scheme}: text below WCAG AA (4.5:1): {low[:8]}"
            page.screenshot(path=str(artifacts / f"export-{scheme}.png"))
            if Path("/tmp/w27-shots").is_dir():
                page.screenshot(path=f"/tmp/w27-shots/export-{scheme}.png")
            if scheme == "dark":
                continue
            # select by clicking and by keys, filter, read the wire view (every event's row)
            root.locator(".agentnb-view-flat").click()
            root.locator(".anb-row[data-seq='30'] .anb-summary").click()
            expect(root.locator(".agentnb-detail-card")).to_have_attribute("data-seq", "30", timeout=T)
            root.focus()
            page.keyboard.press("Home")
            expect(root.locator(".agentnb-detail-card")).to_have_attribute("data-seq", "0", timeout=T)
            page.keyboard.press("ArrowRight")
            expect(root.locator(".agentnb-detail-card")).to_have_attribute("data-seq", "1", timeout=T)
            root.locator(".agentnb-filter-type").select_option("ToolFinished")
            expect(root.locator(".anb-row")).to_have_count(2)
            root.locator(".anb-row").last.locator(".anb-summary").click()
            root.get_by_role("tab", name="Conversation").click()
            expect(root.locator(".agentnb-time-travel")).to_contain_text("Please refund order 42")
            root.get_by_role("tab", name="Wire").click()
            expect(root.locator(".agentnb-wire-request")).to_contain_text('"tool_call_id"', timeout=T)
            root.get_by_role("tab", name="Google Gemini").click()
            expect(root.locator(".agentnb-wire-request")).to_contain_text('"functionResponse"', timeout=T)
            assert not errors, errors
            assert all(u.startswith(("file:", "data:", "blob:")) for u in requests), requests  # no network
            ready = page.evaluate("agentnbMetrics.marks.standaloneReady")
            print(f"\nexported {n}-event run: {path.stat().st_size / 1024:.0f} KiB, ready in {ready:.0f} ms")
        finally:
            page.close()


def _kernel_idle(server: dict[str, Any]) -> bool:
    import urllib.request

    req = urllib.request.Request(f"{server['url']}/api/kernels", headers={"Authorization": f"token {server['token']}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            kernels = json.loads(resp.read())
    except OSError:  # the server answers 500 while a kernel is still starting on a loaded machine: ask again
        return False
    return bool(kernels) and all(k.get("execution_state") == "idle" for k in kernels)


def test_debugger_in_notebook7(notebook7: dict[str, Any], browser: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    name = f"debugger_nb7_{int(time.time() * 1000)}.ipynb"
    _copy_stripped(HERE / "debugger_e2e.ipynb", notebook7["root"] / name)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{notebook7['url']}/notebooks/{name}?token={notebook7['token']}", timeout=T)
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=T)
        deadline = time.monotonic() + T / 1000
        while not _kernel_idle(notebook7):  # Notebook 7 has no status bar: ask the server
            assert time.monotonic() < deadline, "the kernel did not start"
            time.sleep(0.3)
        expect(page.locator(".jp-Dialog")).to_have_count(0, timeout=T)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        root = page.locator(".jp-OutputArea-output .agentnb-debugger").first
        root.wait_for(timeout=T)
        expect(root.locator(".agentnb-header")).to_contain_text("NEW", timeout=T)
        root.locator("button.agentnb-btn-continue").click()
        expect(root.locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL", timeout=T)
        root.locator("button.agentnb-btn-approve").click()
        expect(root.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
        root.locator(".agentnb-view-flat").click()
        root.locator(".anb-row[data-seq='30'] .anb-summary").click()
        expect(root.locator(".agentnb-detail-card")).to_have_attribute("data-seq", "30", timeout=T)
        root.focus()
        page.keyboard.press("k")
        expect(root.locator(".agentnb-detail-card")).to_have_attribute("data-seq", "29", timeout=T)
        root.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "debugger-notebook7.png"))
    finally:
        page.close()


def test_saved_notebook_without_its_kernel_shows_the_run(lab: dict[str, Any], browser: Any,
                                                               artifacts: Path) -> None:
    """Executed and saved with widget state, opened later: the models come back but no kernel object answers."""
    import os

    import nbformat
    from nbclient import NotebookClient
    from playwright.sync_api import expect

    root_dir = Path(__file__).resolve().parents[2]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root_dir), os.environ.get("PYTHONPATH")]))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import agentnb as anb\n"
        "run = anb.Loop(model=anb.ScriptedModel.story('weather'), tools=anb.stories.tools('weather'))"
        ".start('Weather in Paris?').run()\n"
        "anb.Debugger(run)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True).execute()
    name = f"saved_{int(time.time() * 1000)}.ipynb"
    nbformat.write(nb, lab["root"] / name)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{lab['url']}/lab/tree/{name}?reset&token={lab['token']}", timeout=T)
        # An untrusted notebook shows the bundle's text/html; a trusted one restores the widget, which shows the
        # snapshot from its saved state when no kernel object answers. Either way: the run, not a repr.
        shown = page.locator(".jp-OutputArea-output .agentnb-fallback").first
        try:
            shown.wait_for(timeout=T)
        except Exception:
            page.screenshot(path=str(artifacts / "debugger-09-saved-missing.png"))
            raise
        expect(shown).to_contain_text("COMPLETED")
        expect(shown.locator(".agentnb-fallback-events")).to_contain_text("RunFinished")
        expect(shown).to_contain_text("It is 18 °C and sunny in Paris.")
        outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
        assert not any("Error displaying widget" in t or "VBox(" in t or "AnyWidget(" in t for t in outputs), outputs
        page.screenshot(path=str(artifacts / "debugger-09-saved-untrusted.png"))

        # trusted: the widget comes back from the saved state and shows its snapshot
        from nbformat.sign import NotebookNotary

        trusted = f"trusted_{name}"
        notary = NotebookNotary(data_dir=str(lab["settings"].parent / "jupyter_data_dir"))
        notary.sign(nb)
        nbformat.write(nb, lab["root"] / trusted)
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.goto(f"{lab['url']}/lab/tree/{trusted}?reset&token={lab['token']}", timeout=T)
        snapshot = page.locator(".jp-OutputArea-output .agentnb-debugger .anb-snapshot")
        try:
            expect(snapshot).to_be_visible(timeout=T)
        except AssertionError:  # say what the page and the server saw (a flake seen on loaded machines)
            log = Path(lab["log"]).read_text(encoding="utf-8", errors="replace")[-3000:]
            signed = notary.check_signature(nbformat.read(lab["root"] / trusted, as_version=4))
            raise AssertionError(f"no widget snapshot; signature valid: {signed}; static views: "
                                 f"{page.locator('.agentnb-static-view').count()}; console: "
                                 + " | ".join(console[-30:]) + "\nserver log: " + log) from None
        expect(snapshot).to_contain_text("no kernel answers")
        expect(snapshot.locator(".agentnb-fallback-events")).to_contain_text("RunFinished")
        header = page.locator(".jp-OutputArea-output .agentnb-debugger > .anb-top .agentnb-header")
        expect(header).to_contain_text("saved snapshot")  # not "live": no kernel answers
        expect(header.locator(".agentnb-mode")).not_to_contain_text("live")
        # the widget draws the snapshot, so the static view above it gives way; no widget error is shown
        expect(page.locator(".agentnb-static-view")).to_be_hidden()
        assert "Error displaying widget" not in page.locator(".jp-NotebookPanel").inner_text()
        page.screenshot(path=str(artifacts / "debugger-10-saved-trusted.png"))
    finally:
        page.close()
