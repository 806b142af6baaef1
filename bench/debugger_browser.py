"""The debugger's front end in Chromium: open, click, stream and export timings, taken inside the page.

Targets (issues 16, 27 and 30): a 100,000-event transcript opens in at most 1 s (a million in 5 s, with a page
heap of at most 300 MB); click-to-updated-detail at most 50 ms (100 ms at a million); opening or closing a row
of the timeline's tree under 50 ms; a live run streaming 500 fragments/s keeps the view under 200 ms behind;
the exported HTML of a 10,000-event run opens in under 1 s and is under 10 MB. The live stream is measured
twice: from a ScriptedModel in the kernel, and through the official ``openai`` client against the emulator.
Every figure is the median of a few repeats, next to a baseline measured in the same run (a 100-event
transcript), because this machine's load moves all of them.

In JupyterLab, "open" is measured from the cell's start to the rows painted (and to the tree painted: the
kernel stamps the start with the wall clock, the page its marks, on the same machine), and split in two: the
kernel's share (loading the transcript, folding it into the debugger, its display: printed by the cell; the
rest of the cell is in neither share) and the page's share (from the widget's first render until every
row's codes are in and the rows in sight are painted with their texts -- the list, then the tree, which comes
after it --, from ``agentnbMetrics`` in the page; a front end that sent every text at once: until the last row
arrived, and "tree painted" is not measured). "first click" is a click made as soon as the rows are painted,
timed until its card shows: while a long run's tree is still being built.

With ``--before DIR`` (a checkout of the version to compare with), a second JupyterLab whose kernels import
agentnb (and so the front end) from DIR opens the same transcript, alternating with this tree, repeat by repeat;
the table gains a "before" column.

    python bench/debugger_browser.py [--events 100000] [--export-events 10000] [--repeats 3] [--before DIR]

Needs Debian's Chromium (/usr/bin/chromium), playwright and jupyterlab (the dev extra).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from debugger import long_run  # noqa: E402

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.browser.server import jupyter_server  # noqa: E402

T = 120_000


def run_notebook(browser: Any, server: dict[str, Any], stem: str, source: str) -> Any:
    """A new JupyterLab page on a one-cell notebook, its kernel idle, after *Run All Cells*."""
    import re

    from playwright.sync_api import expect

    name = f"{stem}_{int(time.time() * 1000)}.ipynb"
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                     "source": source}],
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                      "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    (server["root"] / name).write_text(json.dumps(nb))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server['url']}/lab/tree/{name}?reset&token={server['token']}", timeout=T)
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=T)
    expect(page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).first).to_be_visible(timeout=T)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    return page


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def export_open(browser: Any, path: Path, repeats: int) -> dict[str, float]:
    """Open an exported page from file:// and read its in-page timings."""
    first, ready, clicks = [], [], []
    for _ in range(repeats):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(path.as_uri(), timeout=T)
        page.wait_for_selector("#agentnb-app[data-ready='true']", timeout=T)
        marks = page.evaluate("agentnbMetrics.marks")
        first.append(marks["standaloneFirstPaint"])
        ready.append(marks["standaloneReady"])
        clicks += click_rows(page, 0, 5)
        page.close()
    return {"first paint ms": median(first), "ready ms": median(ready), "click ms": median(clicks)}


def click_rows(page: Any, index: int, count: int, pause_ms: int = 0) -> list[float]:
    """Click rows in sight and time each click until the detail pane shows that event (in the page).

    ``pause_ms``: the list stands still this long before each click, as while a person reads it (the page asks
    for the cards in sight once its list has stood still for a moment); 0: one click right after another.
    """
    out = []
    for k in range(count):
        page.wait_for_timeout(pause_ms)
        out.append(float(page.evaluate(
            """([index, k]) => new Promise(resolve => {
                const root = document.querySelectorAll('.agentnb-debugger')[index];
                const rows = root.querySelectorAll('.anb-row');
                const row = rows[Math.max(0, rows.length - 14 - 2 * k)];
                const seq = row.dataset.seq;
                const done = () => root.querySelector(`.agentnb-detail-card[data-seq="${seq}"]`);
                const obs = new MutationObserver(() => {
                    if (done()) { obs.disconnect(); resolve(performance.now() - t0); } });
                obs.observe(root, {subtree: true, childList: true, attributes: true});
                const t0 = performance.now();
                row.querySelector('.anb-summary').click();
            })""", [index, k])))
    return out


def scroll_ms(page: Any, index: int, steps: int = 30) -> float:
    """Median time to repaint the timeline after a jump of the scroll position (a frame's work)."""
    return float(page.evaluate(
        """([index, steps]) => new Promise(async resolve => {
            const list = document.querySelectorAll('.agentnb-debugger')[index].querySelector('.anb-list');
            const times = [];
            for (let i = 0; i < steps; i++) {
                const t0 = performance.now();
                list.scrollTop = Math.random() * (list.scrollHeight - list.clientHeight);
                list.dispatchEvent(new Event('scroll'));
                await new Promise(r => requestAnimationFrame(r));
                times.push(performance.now() - t0);
            }
            times.sort((a, b) => a - b);
            resolve(times[times.length >> 1]);
        })""", [index, steps]))


def expand_ms(page: Any, index: int, times: int = 6) -> list[float]:
    """Open and close a model call's row in the tree: click -> the next frame painted, each time (in the page).

    Empty where the page has no tree (an older front end)."""
    return [float(t) for t in page.evaluate(
        """([index, times]) => new Promise(async resolve => {
            const root = document.querySelectorAll('.agentnb-debugger')[index];
            const out = [];
            for (let k = 0; k < times; k++) {
                const twisty = root.querySelector('.anb-node.agentnb-node-model .anb-twisty');
                if (!twisty) break;
                const t0 = performance.now();
                twisty.click();
                await new Promise(r => requestAnimationFrame(r));
                out.push(performance.now() - t0);
            }
            resolve(out);
        })""", [index, times])]


NOTEBOOK = """\
import time, agentnb as anb
from IPython.display import display
start, t0 = time.time(), time.perf_counter()
tr = anb.Transcript.load({path!r})
t1 = time.perf_counter()
dbg = anb.Debugger(tr, start="end")
t2 = time.perf_counter()
display(dbg)  # displayed once, as a cell ending in `dbg` does: the static fallback, the widget, the rows
t3 = time.perf_counter()
print(f"KERNEL load={{t1 - t0:.3f}} fold={{t2 - t1:.3f}} display={{t3 - t2:.3f}} start={{start:.3f}}")"""


def lab_once(browser: Any, server: dict[str, Any], path: Path, n: int, tag: str) -> dict[str, list[float]]:
    """Open a transcript in the debugger in JupyterLab once; the kernel's and the page's shares of the time."""
    page = run_notebook(browser, server, f"bench_{n}_{tag}", NOTEBOOK.format(path=str(path)))
    page.wait_for_function(f"(globalThis.agentnbMetrics?.marks.rows || 0) >= {n}", timeout=T, polling=50)
    page.wait_for_function("agentnbMetrics.marks.painted || !agentnbMetrics.lazyTexts", timeout=T, polling=20)
    first = click_rows(page, 0, 1)  # at once: a long run's tree may still be on its way
    # a front end that sends texts on demand marks the first paint with the texts in sight ("painted")
    page.wait_for_function("agentnbMetrics.marks.treePainted || !agentnbMetrics.lazyTexts", timeout=T, polling=20)
    page.wait_for_timeout(100)
    marks = page.evaluate("agentnbMetrics.marks")
    out: dict[str, list[float]] = {
        "page ms": [marks.get("painted", marks["lastRows"]) - marks["renderAt"]],
        "tree ms": [marks.get("treePainted", float("nan")) - marks["renderAt"]], "first click ms": first,
        "heap MB": [heap_mb(page)]}
    text = page.locator(".jp-OutputArea-output pre").filter(has_text="KERNEL ").first.inner_text()
    nums = dict(kv.split("=") for kv in text.split("KERNEL ", 1)[1].split()[:4])
    start = float(nums.pop("start")) * 1000 - page.evaluate("performance.timeOrigin")  # the cell's start, page clock
    out["kernel ms"] = [sum(float(v) for v in nums.values()) * 1000]
    out["cell rows ms"] = [marks.get("painted", marks["lastRows"]) - start]  # cell started -> rows painted
    out["cell tree ms"] = [marks.get("treePainted", float("nan")) - start]
    out["click ms"] = click_rows(page, 0, 5)
    out["read click ms"] = click_rows(page, 0, 5, pause_ms=400)
    out["scroll frame ms"] = [scroll_ms(page, 0)]
    page.evaluate("document.querySelector('.agentnb-debugger .anb-list').scrollTop = 0")
    page.wait_for_timeout(100)
    out["expand ms"] = expand_ms(page, 0)
    page.close()
    shut_kernels(server)  # a million events' kernel holds gigabytes: one at a time
    return out


def lab_open(browser: Any, servers: dict[str, dict[str, Any]], path: Path, n: int,
             repeats: int) -> dict[str, dict[str, float]]:
    """Each server's medians over ``repeats`` openings, the servers taking turns."""
    got: dict[str, dict[str, list[float]]] = {name: {} for name in servers}
    for r in range(repeats):
        for name, server in servers.items():
            for k, v in lab_once(browser, server, path, n, f"{name}_{r}").items():
                got[name].setdefault(k, []).extend(v)
    out = {name: {k: median(v) for k, v in g.items()} for name, g in got.items()}
    for o in out.values():
        o["open ms"] = o["kernel ms"] + o["page ms"]
    return out


def shut_kernels(server: dict[str, Any]) -> None:
    """End the server's sessions (and their kernels)."""
    import urllib.request

    auth = {"Authorization": f"token {server['token']}"}
    with urllib.request.urlopen(urllib.request.Request(f"{server['url']}/api/sessions", headers=auth)) as r:
        sessions = json.load(r)
    for session in sessions:
        req = urllib.request.Request(f"{server['url']}/api/sessions/{session['id']}", method="DELETE", headers=auth)
        urllib.request.urlopen(req).close()


def heap_mb(page: Any) -> float:
    """The page's JavaScript heap after a garbage collection (MB), read over the DevTools protocol."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("HeapProfiler.collectGarbage")
    used = cdp.send("Runtime.getHeapUsage")["usedSize"]
    cdp.detach()
    return float(used) / 1e6


STREAM = """\
import agentnb as anb
stream = anb.Debugger(anb.Loop(model=anb.ScriptedModel([{"text": "streaming " * 200}], stream=True,
                                                       chunk_size=1, chunk_delay=0.0013)).start("go"))
stream"""


STREAM_SDK = """\
import agentnb as anb, openai
emu = anb.emulator.Emulator(anb.ScriptedModel([{"text": "streaming " * 200}], stream=True, chunk_size=1,
                                              chunk_delay=0.0013))
emu.start()
client = openai.OpenAI(base_url=emu.url("openai"), api_key="bench")
stream = anb.Debugger(anb.Loop(model=anb.OpenAIChatModel(client, model="gpt-4.1", stream=True)).start("go"))
stream"""
"""The same stream, through the official ``openai`` client and the emulator (its frames paced by the script)."""


def lab_stream(browser: Any, server: dict[str, Any], source: str = STREAM) -> dict[str, float]:
    """Continue a run streaming about 500 fragments a second; how far behind the run the page is drawn."""
    from playwright.sync_api import expect

    page = run_notebook(browser, server, "bench_stream", source)
    root = page.locator(".agentnb-debugger").first
    root.locator("button.agentnb-btn-continue").wait_for(timeout=T)
    expect(root.locator(".agentnb-header")).to_contain_text("NEW", timeout=T)
    page.evaluate("agentnbMetrics.lags.length = 0")
    t0 = time.perf_counter()
    root.locator("button.agentnb-btn-continue").click()
    expect(root.locator(".agentnb-header")).to_contain_text("COMPLETED", timeout=T)
    elapsed = time.perf_counter() - t0
    lags = sorted(page.evaluate("agentnbMetrics.lags"))
    events = int(root.locator(".anb-count").inner_text().split()[0].replace(",", ""))
    page.close()
    return {"events": events, "fragments/s": events / elapsed, "updates": len(lags),
            "updates/s": len(lags) / elapsed, "lag median ms": median(lags),
            "lag p95 ms": lags[max(0, int(len(lags) * 0.95) - 1)] if lags else float("nan"),
            "lag max ms": max(lags) if lags else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--export-events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a checkout of the version to compare with")
    parser.add_argument("--no-export", action="store_true", help="leave out the export and the live stream")
    args = parser.parse_args()
    from contextlib import ExitStack

    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="agentnb-bench-"))
    baseline_run = long_run(100)
    big_run = long_run(args.events)
    files = {}
    for label, run in (("baseline", baseline_run), ("big", big_run)):
        files[label] = work / f"{label}.jsonl"
        run.transcript.save(files[label])
    n_big, n_base = len(big_run.events), len(baseline_run.events)
    del big_run
    nan = float("nan")

    with sync_playwright() as p, ExitStack() as stack:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        servers = {"after": stack.enter_context(jupyter_server(work / "lab", "jupyterlab"))}
        if args.before:
            servers["before"] = stack.enter_context(jupyter_server(
                work / "lab-before", "jupyterlab", {"PYTHONPATH": str(args.before.resolve())}))
        base = lab_open(browser, {"after": servers["after"]}, files["baseline"], n_base, args.repeats)["after"]
        big = lab_open(browser, servers, files["big"], n_big, args.repeats)
        if not args.no_export:
            export_run = long_run(args.export_events)
            n_export = len(export_run.events)
            t0 = time.perf_counter()
            exported = export_run.transcript.to_html(work / "export.html")
            export_write = time.perf_counter() - t0
            small_export = baseline_run.transcript.to_html(work / "baseline.html")
            exp = export_open(browser, exported, args.repeats)
            exp_base = export_open(browser, small_export, args.repeats)
            stream = lab_stream(browser, servers["after"])
            sdk_stream = lab_stream(browser, servers["after"], STREAM_SDK)
        browser.close()

    after, before = big["after"], big.get("before", {})
    print(f"debugger front end in Chromium (median of {args.repeats}; baseline = a {n_base}-event transcript"
          + (f"; before = {args.before}, alternating" if args.before else "") + ")")
    print(f"{'measure':<60}{'measured':>10}{'before':>10}{'baseline':>10}   target")
    lab = f"JupyterLab, {n_big:,} events:"
    rows = [
        (f"{lab} page, render -> rows painted (ms)", "page ms", ""),
        (f"{lab} page, render -> tree painted (ms)", "tree ms", ""),
        (f"{lab} kernel, load+fold+display (ms)", "kernel ms", ""),
        (f"{lab} open, kernel + page (ms)", "open ms", ""),
        (f"{lab} open, cell started -> rows painted (ms)", "cell rows ms", "<= 1000 (1M: <= 5000)"),
        (f"{lab} open, cell started -> tree painted (ms)", "cell tree ms", ""),
        (f"{lab} page heap (MB)", "heap MB", "<= 300 at 1M"),
        (f"{lab} first click, at rows painted -> detail (ms)", "first click ms", ""),
        (f"{lab} click -> detail, clicks in a row (ms)", "click ms", "<= 50 (1M: <= 100)"),
        (f"{lab} click -> detail, after 0.4 s on the list (ms)", "read click ms", "<= 50 (1M: <= 100)"),
        (f"{lab} scroll jump -> next frame (ms)", "scroll frame ms", "~ 1-2 frames"),
        (f"{lab} tree expand -> next frame (ms)", "expand ms", "<= 50"),
    ]
    for label, key, target in rows:
        print(f"{label:<60}{after[key]:>10.1f}{before.get(key, nan):>10.1f}{base[key]:>10.1f}   {target}")
    if args.no_export:
        return
    for label, value, baseline, target in [
        (f"export, {n_export:,} events: size (MB)", exported.stat().st_size / 1e6, small_export.stat().st_size / 1e6,
         "< 10"),
        (f"export, {n_export:,} events: written by Python (ms)", export_write * 1000, nan, ""),
        (f"export, {n_export:,} events: first paint (ms)", exp["first paint ms"], exp_base["first paint ms"], ""),
        (f"export, {n_export:,} events: ready, cards loaded (ms)", exp["ready ms"], exp_base["ready ms"], "< 1000"),
        (f"export, {n_export:,} events: click -> detail (ms)", exp["click ms"], exp_base["click ms"], "< 100"),
    ]:
        print(f"{label:<60}{value:>10.1f}{'':>10}{baseline:>10.1f}   {target}")
    for what, st in (("live stream (ScriptedModel)", stream), ("live stream (openai client -> emulator)", sdk_stream)):
        print(f"{what}: {st['events']:.0f} events at {st['fragments/s']:.0f} fragments/s, "
              f"{st['updates']:.0f} view updates ({st['updates/s']:.1f}/s); lag behind the run: median "
              f"{st['lag median ms']:.0f} ms, p95 {st['lag p95 ms']:.0f} ms, max {st['lag max ms']:.0f} ms "
              "(target < 200 ms)")


if __name__ == "__main__":
    main()
