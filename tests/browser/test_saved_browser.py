"""A notebook saved by JupyterLab (or Notebook 7) itself, reopened: the run stays readable, and reads well.

Each test executes a notebook in the browser, saves it with Ctrl+S (default settings: no widget state in the
file), closes the page and reopens it three ways: with the kernel that ran it still running (the live widget
replaces the static view), after that kernel was shut down (a new kernel has no model for the widget: the
static view stays, and "Error displaying widget: model not found" is never seen), and in the other front end,
whose server has another notary key (the notebook is untrusted there: the static view and a line saying where
the live debugger would be). The JupyterLab test also reads the debugger in JupyterLab Light and Dark: the
contrast of every text (WCAG AA), the header before the first step, the approval card, and the layout at 900
and 700 px. Screenshots go to ``test-artifacts/`` and, when it exists, to ``/tmp/w27-shots/``.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .contrast import AA, below_aa, contrasts

pytestmark = pytest.mark.browser

T = 60_000  # ms; about 10x what these steps take on a loaded 2-core machine
WIDGET = "application/vnd.jupyter.widget-view+json"

CELLS = [
    "import agentnb as anb\n"
    "from IPython.display import display\n"
    "run = anb.Loop(model=anb.ScriptedModel.story('weather'), tools=anb.stories.tools('weather'))"
    ".start('Weather in Paris?').run()\n"
    "run",
    # displayed, then moved on in the same cell: the saved static view must show where it got to
    "refund = anb.Debugger(anb.Loop(model=anb.ScriptedModel.story('refund'), tools=anb.stories.tools('refund'))"
    ".start('Please refund order 42'))\n"
    "display(refund)\n"
    "refund.cont()\n"
    "print(refund.state.value)",
    "fresh = anb.Debugger(anb.Loop(model=anb.ScriptedModel.story('weather'), tools=anb.stories.tools('weather'))"
    ".start('Weather in Rome?'))\n"
    "fresh",
]


def _notebook(root: Path, prefix: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    name = f"{prefix}_{int(time.time() * 1000)}.ipynb"
    nbformat.write(nb, root / name)
    return name


def _api(server: dict[str, Any], path: str, method: str = "GET") -> Any:
    req = urllib.request.Request(f"{server['url']}{path}", method=method,
                                 headers={"Authorization": f"token {server['token']}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def _session(server: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in _api(server, "/api/sessions") if s["path"] == name), None)


def _idle(server: dict[str, Any], name: str) -> None:
    deadline = time.monotonic() + T / 1000
    while True:
        s = _session(server, name)
        if s and s["kernel"]["execution_state"] == "idle":
            return
        assert time.monotonic() < deadline, f"the kernel of {name} did not start"
        time.sleep(0.3)


def _url(server: dict[str, Any], name: str) -> str:
    if server["app"] == "notebook":
        return f"{server['url']}/notebooks/{name}?token={server['token']}"
    return f"{server['url']}/lab/tree/{name}?reset&token={server['token']}"


def _open(browser: Any, server: dict[str, Any], name: str, *, wait_kernel: bool = True) -> Any:
    """A new page on the notebook; ``wait_kernel=False`` reads it while its (new) kernel may still start."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.agentnb_console = console  # read by _assert_live when the kernel's rows never come
    page.agentnb_log = server["log"]
    page.goto(_url(server, name), timeout=T)
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=T)
    if wait_kernel:
        _idle(server, name)
        expect(page.locator(".jp-Dialog")).to_have_count(0, timeout=T)
    return page


def _run_all_and_save(page: Any, server: dict[str, Any], name: str) -> None:
    from playwright.sync_api import expect

    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
    roots.nth(2).wait_for(timeout=T)
    expect(page.locator(".jp-OutputArea-output").filter(has_text="WAITING_APPROVAL").first).to_be_visible(timeout=T)
    _idle(server, name)
    page.locator(".jp-Cell .jp-InputPrompt").first.click()
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + T / 1000
    path = server["root"] / name
    while True:
        text = path.read_text(encoding="utf-8")
        if text.count(WIDGET) >= 3 and "WAITING_APPROVAL" in text:
            break
        assert time.monotonic() < deadline, "Ctrl+S did not save the outputs"
        time.sleep(0.3)
    saved = nbformat.read(path, as_version=4)
    assert "widgets" not in saved.metadata  # JupyterLab's default: no widget state in the file
    kinds = [[sorted(o.get("data", {})) for o in cell.outputs] for cell in saved.cells]
    assert all(any(WIDGET in k for k in cell) and any("text/html" in k and WIDGET not in k for k in cell)
               for cell in kinds), kinds  # each display: the static view, then the widget


def _widget_outputs(page: Any) -> list[dict[str, Any]]:
    """The widget renderer's outputs after a static view (it marks no data-mime-type, unlike the others)."""
    return list(page.evaluate("""() => [...document.querySelectorAll(
        '.jp-OutputArea-child:has(.agentnb-static-view) + .jp-OutputArea-child > .jp-OutputArea-output')]
        .filter(e => !e.hasAttribute('data-mime-type'))
        .map(e => ({text: e.textContent.slice(0, 80), shown: e.checkVisibility()}))"""))


def _assert_live(page: Any) -> None:
    """The widgets are drawn from their models (a kernel answers: rows came) and the static views gave way."""
    from playwright.sync_api import expect

    roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
    expect(roots).to_have_count(3, timeout=T)
    try:
        expect(roots.nth(1).locator(".anb-row").first).to_be_visible(timeout=T)  # rows: the kernel answered
    except AssertionError:
        heads = [roots.nth(i).inner_text()[:300] for i in range(roots.count())]
        log = Path(page.agentnb_log).read_text(encoding="utf-8", errors="replace")[-4000:]
        said = page.evaluate("() => JSON.stringify([(globalThis.agentnbMetrics || {}).hellos, "
                             "(globalThis.agentnbMetrics || {}).marks])")
        heads.append(f"hellos said: {said}")
        raise AssertionError("no rows in the paused debugger's widget\nroots: " + repr(heads) + "\nconsole: "
                             + " | ".join(page.agentnb_console[-30:]) + "\nserver log: " + log) from None
    expect(roots.nth(1).locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL")
    statics = page.locator(".agentnb-static-view")
    expect(statics).to_have_count(3)
    for i in range(3):
        expect(statics.nth(i)).to_be_hidden()
    expect(page.locator(".agentnb-live-note")).to_have_count(0)


def _assert_static(page: Any, *, untrusted: bool = False, renderer_says: str = "model not found") -> None:
    """No model for the widgets: each static view is shown, with what the run did, and no widget error is.

    In a trusted notebook the widget renderer runs: the check waits until each of its outputs says
    ``renderer_says`` (its error once a kernel answers without the model), then finds them all hidden.
    """
    from playwright.sync_api import expect

    statics = page.locator(".jp-OutputArea-output .agentnb-static-view")
    expect(statics).to_have_count(3, timeout=T)
    for i in range(3):
        expect(statics.nth(i)).to_be_visible()
        expect(statics.nth(i).locator(".agentnb-header")).to_contain_text("saved snapshot")
    expect(statics.nth(0)).to_contain_text("COMPLETED")
    expect(statics.nth(0).locator(".agentnb-fallback-events")).to_contain_text("RunFinished")
    expect(statics.nth(0)).to_contain_text("It is 18 °C and sunny in Paris.")
    expect(statics.nth(1).locator(".agentnb-header")).to_contain_text("WAITING_APPROVAL")  # where the cell got to
    expect(statics.nth(2).locator(".agentnb-header")).to_contain_text("scripted:story:weather")
    if untrusted:  # the widget's output falls back to its own text/html: where the live debugger would be
        expect(page.locator(".agentnb-live-note")).to_have_count(3, timeout=T)
        expect(page.locator(".agentnb-live-note").first).to_be_visible()
        assert not _widget_outputs(page)
    else:  # the widget renderer runs, finds no model, and its output (error or "Loading widget...") is hidden
        deadline = time.monotonic() + T / 1000
        while len(outs := _widget_outputs(page)) < 3 or not all(renderer_says in o["text"] for o in outs):
            assert time.monotonic() < deadline, outs
            time.sleep(0.2)
        assert not any(o["shown"] for o in outs), outs
    low = below_aa(statics)  # the static view's own stylesheet (trusted) or the page's plain styles (untrusted)
    assert not low, f"the static view has text below WCAG AA (4.5:1): {low[:8]}"
    texts = page.evaluate("() => document.querySelector('.jp-NotebookPanel').innerText")
    assert "Error displaying widget" not in texts and "model not found" not in texts and "VBox(" not in texts


def _assert_placeholders_fit(root: Any, where: str) -> None:
    """The deny reason's and the breakpoint's placeholders are shown whole (measured in the input's font)."""
    for selector in (".agentnb-deny-reason", ".agentnb-bp-value"):
        fits = root.locator(selector).evaluate("""(el) => { const s = getComputedStyle(el);
            const c = document.createElement('canvas').getContext('2d');
            c.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
            return c.measureText(el.placeholder).width
              <= el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }""")
        assert fits, f"{selector}'s placeholder is cut off at {where}"


def _shot(page: Any, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / name))
    shots = Path("/tmp/w27-shots")
    if shots.is_dir():
        shutil.copy(artifacts / name, shots / name)


def _check_reading(page: Any, artifacts: Path, theme: str) -> None:
    """Contrast of every text of the refund debugger (a row selected) and of the static view's stylesheet."""
    from playwright.sync_api import expect

    roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
    refund = roots.nth(1)
    refund.locator(".agentnb-view-flat").click()  # every event, one row each (the tree folds event 3 in its call)
    refund.locator(".anb-row[data-seq='3'] .anb-summary").click()
    expect(refund.locator(".anb-row.anb-selected[data-seq='3']")).to_be_visible(timeout=T)
    expect(refund.locator(".agentnb-detail-card")).to_have_attribute("data-seq", "3", timeout=T)
    refund.scroll_into_view_if_needed()
    page.mouse.move(0, 0)  # a hovered row shows its breakpoint dot: a hint, measured as the rest is at rest
    measured = contrasts(page.locator(".jp-OutputArea-output .agentnb-debugger"))
    low = [c for c in measured if c["ratio"] < AA]
    assert not low, f"{theme}: text below WCAG AA (4.5:1): {low[:8]}"
    selected = [c["ratio"] for c in contrasts(refund.locator(".anb-row.anb-selected"))]
    print(f"\nJupyterLab {theme}: {len(measured)} texts, lowest contrast {min(c['ratio'] for c in measured):.2f}:1; "
          f"selected row lowest {min(selected):.2f}:1")
    _shot(page, artifacts, f"saved-{theme}-refund.png")


def test_a_notebook_saved_by_jupyterlab_reopens_readable(lab: dict[str, Any], notebook7: dict[str, Any],
                                                         browser: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    name = _notebook(lab["root"], "saved_lab")
    page = _open(browser, lab, name)
    try:
        _run_all_and_save(page, lab, name)
        _assert_live(page)
        roots = page.locator(".jp-OutputArea-output .agentnb-debugger")
        # before the first step the header names the run and its model and says nothing has happened yet
        fresh = roots.nth(2).locator(".agentnb-header")
        expect(fresh).to_contain_text("not started: Step or Continue")
        expect(fresh).to_contain_text("scripted:story:weather")
        expect(fresh.locator("code")).to_have_text(re.compile(r"^run_\w+$"))
        # the approval card shows what would run, and its reason field shows all of its placeholder
        refund = roots.nth(1)
        args = refund.locator(".agentnb-approval-arguments")
        expect(args).to_be_visible()
        expect(args).to_contain_text('"order_id"')
        _assert_placeholders_fit(refund, "1280 px")
        _check_reading(page, artifacts, "light")
        # one step from the page, after the cell ran: one event, in words, and the saved view follows it
        roots.nth(2).locator("button.agentnb-btn-step").click()
        expect(roots.nth(2).locator(".anb-count")).to_have_text("1 event", timeout=T)
        page.locator(".jp-Cell .jp-InputPrompt").first.click()
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + T / 1000
        while "· 1 event ·" not in (lab["root"] / name).read_text(encoding="utf-8"):
            assert time.monotonic() < deadline, "the static view of the stepped debugger was not updated and saved"
            time.sleep(0.3)
        # the layout at 900 and 700 px (JupyterLab's file browser open): the card's tabs stay in sight
        for width in (900, 700):
            page.set_viewport_size({"width": width, "height": 900})
            refund.scroll_into_view_if_needed()
            box = refund.locator(".anb-list").bounding_box()
            tabs = refund.locator(".anb-tabs").bounding_box()
            assert box and tabs
            side_by_side = tabs["x"] >= box["x"] + box["width"] - 1 and tabs["y"] < box["y"] + box["height"]
            # side by side when the debugger is wide enough, else stacked under a short list: never below 480 px
            assert side_by_side or tabs["y"] - box["y"] < 300, (width, box, tabs)
            assert side_by_side == (refund.bounding_box()["width"] >= 560), (width, box, tabs)
            assert refund.evaluate("el => el.scrollWidth <= el.clientWidth + 1"), f"horizontal scroll at {width}"
            _assert_placeholders_fit(refund, f"{width} px")
            _shot(page, artifacts, f"saved-light-{width}px.png")
        kernel = _session(lab, name)["kernel"]["id"]
    finally:
        page.close()

    # reopened while the kernel that ran it still runs: the live widgets come back (read in the dark theme)
    theme = lab["settings"] / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    theme.write_text(json.dumps({"theme": "JupyterLab Dark"}))
    try:
        page = _open(browser, lab, name)
        try:
            expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=T)
            assert _session(lab, name)["kernel"]["id"] == kernel
            _assert_live(page)
            _check_reading(page, artifacts, "dark")
        finally:
            page.close()
    finally:
        theme.unlink()

    # the kernel shut down: a new one starts, and knows none of the widgets' models
    _api(lab, f"/api/sessions/{_session(lab, name)['id']}", method="DELETE")
    page = _open(browser, lab, name)
    try:
        assert _session(lab, name)["kernel"]["id"] != kernel
        _assert_static(page)
        expect(page.locator(".agentnb-static-view").nth(2).locator(".agentnb-header")).to_contain_text("1 event ·")
        _shot(page, artifacts, "saved-lab-new-kernel.png")
        # and with no kernel at all: shut it down, then read the notebook again from disk
        page.get_by_role("menuitem", name="Kernel", exact=True).click()
        page.get_by_role("menuitem", name="Shut Down Kernel", exact=True).click()
        deadline = time.monotonic() + T / 1000
        while _session(lab, name) is not None and _session(lab, name).get("kernel"):
            assert time.monotonic() < deadline, "the kernel did not shut down"
            time.sleep(0.3)
        page.get_by_role("menuitem", name="File", exact=True).click()
        page.get_by_role("menuitem", name="Reload Notebook from Disk", exact=True).click()
        if page.locator(".jp-Dialog").count():
            page.locator(".jp-Dialog .jp-mod-accept").click()
        _assert_static(page, renderer_says="widget")  # "model not found", or "Loading widget..." with no kernel
    finally:
        page.close()

    # the same file in Notebook 7 (another server, another notary key): untrusted
    shutil.copy(lab["root"] / name, notebook7["root"] / name)
    page = _open(browser, notebook7, name, wait_kernel=False)
    try:
        _assert_static(page, untrusted=True)
        _shot(page, artifacts, "saved-lab-in-notebook7-untrusted.png")
    finally:
        page.close()


def test_a_notebook_saved_by_notebook7_reopens_readable(notebook7: dict[str, Any], lab: dict[str, Any],
                                                        browser: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    name = _notebook(notebook7["root"], "saved_nb7")
    page = _open(browser, notebook7, name)
    try:
        _run_all_and_save(page, notebook7, name)
        _assert_live(page)
        kernel = _session(notebook7, name)["kernel"]["id"]
    finally:
        page.close()
    page = _open(browser, notebook7, name)  # the kernel still runs
    try:
        assert _session(notebook7, name)["kernel"]["id"] == kernel
        _assert_live(page)
        _shot(page, artifacts, "saved-nb7-live.png")
    finally:
        page.close()
    _api(notebook7, f"/api/sessions/{_session(notebook7, name)['id']}", method="DELETE")
    # a new kernel, read in the dark theme: the static view's own stylesheet is measured there too
    theme = notebook7["settings"] / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    theme.write_text(json.dumps({"theme": "JupyterLab Dark"}))
    try:
        page = _open(browser, notebook7, name, wait_kernel=False)
        try:
            expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=T)
            _assert_static(page)
            _shot(page, artifacts, "saved-nb7-new-kernel-dark.png")
        finally:
            page.close()
    finally:
        theme.unlink()
    shutil.copy(notebook7["root"] / name, lab["root"] / name)
    page = _open(browser, lab, name, wait_kernel=False)  # untrusted in JupyterLab
    try:
        _assert_static(page, untrusted=True)
        _shot(page, artifacts, "saved-nb7-in-lab-untrusted.png")
    finally:
        page.close()


def test_nbconvert_pages_show_the_static_view(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    """nbconvert's HTML (as GitHub-like readers get it), opened from file:// with no network: the static view
    shows; without widget state the widget's line says where the live debugger would be, and with it the
    widget's output, which no widget manager draws offline, gives way to the static view."""
    import os

    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    from playwright.sync_api import expect

    root = Path(__file__).resolve().parents[2]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    for store in (False, True):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(CELLS[0])]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=store).execute()
        html, _ = HTMLExporter().from_notebook_node(nb, resources={"metadata": {"name": "saved", "path": ""}})
        path = tmp_path / f"saved-{store}.html"
        path.write_text(html, encoding="utf-8")
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route(re.compile(r"^https?://"), lambda route: route.abort())  # offline, as a reader may be
        try:
            page.goto(path.as_uri(), timeout=T)
            static = page.locator(".agentnb-static-view")
            expect(static).to_be_visible(timeout=T)
            expect(static.locator(".agentnb-header")).to_contain_text("COMPLETED")
            note = page.locator(".agentnb-live-note")
            if store:
                expect(note).to_have_count(0)
            else:
                expect(note).to_be_visible()
            assert not below_aa(static), "the static view has text below WCAG AA (4.5:1)"
            _shot(page, artifacts, f"saved-nbconvert-{'state' if store else 'no-state'}.png")
        finally:
            page.close()
