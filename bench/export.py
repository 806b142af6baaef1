"""The one-file HTML export of a long run: time to write it, its size, and (with ``--browser``) the time to be
ready in Chromium and the page's heap, beside a previous version of agentnb measured in the same session.

The run is ``bench/debugger.py``'s ``long_run`` (streamed tool round trips), saved once per size. Each write
runs in a fresh child process (the transcript loaded first, not timed), alternating between this tree and the
``--before`` tree, so a machine's changing load falls on both; the figures are medians, CPU time beside wall
time (on a shared machine the CPU time is the steadier one). In Chromium the page is opened from file://; ready
is the page's own mark (cards loaded), heap is the JavaScript heap once ready (``Performance.getMetrics``), and
click is the median time from a click on a row to its card, over rows near the end and the start. Then events
past the card budget (shown as recorded, from the transcript the page embeds): the first such click, and the
next ones (the middle of the run, then near the start again), measured before any other click.

Targets (issue 30, item 3): 100k events written in at most 1.5 s, a file of at most 4 MB, ready in at most
1 s with at most 150 MB of page heap.

    python bench/export.py --before /path/to/a/checkout/of/main [--sizes 10000 100000] [--repeats 3] [--browser]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {100_000: (1.5, 4.0, 1000.0, 150.0)}
"""By size: seconds to write, MB of file, ms to be ready, MB of page heap."""


def child(source: str, out: str) -> None:
    """Write one export in this process and print its timings as JSON."""
    import time

    import agentnb as anb

    transcript = anb.Transcript.load(source)
    t0, c0 = time.perf_counter(), time.process_time()
    transcript.to_html(out)
    print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                      "size": os.path.getsize(out)}))


def write(tree: Path, source: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    got = subprocess.run([sys.executable, __file__, "--child", str(source), str(out)], env=env, check=True,
                         capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(got.strip().splitlines()[-1])
    return result


def page_figures(browser: Any, path: Path, repeats: int, n: int) -> dict[str, float]:
    """Ready (ms), heap once ready (MB) and click -> card (ms) of an exported page in Chromium."""
    ready, heap, clicks, first_left_out, left_out = [], [], [], [], []
    for _ in range(repeats):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(path.as_uri(), timeout=300_000)
        page.wait_for_selector("#agentnb-app[data-ready='true']", timeout=300_000)
        ready.append(page.evaluate("agentnbMetrics.marks.standaloneReady"))
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        heap.append(metrics["JSHeapUsedSize"] / 1e6)
        page.locator(".agentnb-view-flat").click()
        # first, events past the card budget, shown as recorded from the embedded transcript: the first such click
        # (nothing of it read yet), one on another part of the run, and one near the first again
        for i, seq in enumerate((1, n // 2 + 1, 2) if n > 10_000 else ()):
            page.evaluate("""async (seq) => {  // after the last click's reveal (the next frames), bring seq in sight
                await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
                const list = document.querySelector('.anb-list');
                list.scrollTop = Math.max(0, seq * list.querySelector('.anb-row').offsetHeight - 200); }""", seq)
            page.locator(f".anb-row[data-seq='{seq}']").wait_for(timeout=60_000)  # drawn once in sight
            (first_left_out if i == 0 else left_out).append(float(page.evaluate(
                """(seq) => new Promise((resolve, reject) => {
                    const done = () => document.querySelector(
                        `.agentnb-detail-card[data-seq="${seq}"] .agentnb-recorded`);
                    const obs = new MutationObserver(() => {
                        if (done()) { obs.disconnect(); resolve(performance.now() - t0); } });
                    obs.observe(document.body, {subtree: true, childList: true, attributes: true});
                    setTimeout(() => reject(new Error(`no recorded card for ${seq}`)), 60000);
                    const t0 = performance.now();
                    document.querySelector(`.anb-row[data-seq="${seq}"] .anb-summary`).click();
                })""", seq)))
        page.evaluate("""async () => {  // back to the end of the run, where the page opened
            await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
            const list = document.querySelector('.anb-list'); list.scrollTop = list.scrollHeight;
            await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))); }""")
        clicks += [float(page.evaluate(
            """(k) => new Promise(resolve => {
                const rows = document.querySelectorAll('.anb-row');
                const row = rows[Math.max(0, rows.length - 3 - 2 * k)];
                const seq = row.dataset.seq;
                const obs = new MutationObserver(() => {
                    if (document.querySelector(`.agentnb-detail-card[data-seq="${seq}"]`)) {
                        obs.disconnect(); resolve(performance.now() - t0); } });
                obs.observe(document.body, {subtree: true, childList: true, attributes: true});
                const t0 = performance.now();
                row.querySelector('.anb-summary').click();
            })""", k)) for k in range(5)]
        page.close()
    return {"ready": statistics.median(ready), "heap": statistics.median(heap), "click": statistics.median(clicks),
            "first_left_out": statistics.median(first_left_out or [float("nan")]),
            "left_out": statistics.median(left_out or [float("nan")])}


def row(label: str, before: float, after: float, unit: str, target: float | None) -> str:
    goal = f"<= {target:g} {unit}" if target is not None else ""
    gain = before / after if after else float("nan")
    return f"  {label:<30} {before:10.3f} {after:10.3f} {unit:<4} {gain:6.1f}x  {goal}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the version to compare with")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also open each export in Chromium")
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    from debugger import long_run

    folder = Path(tempfile.mkdtemp(prefix="agentnb-bench-"))
    trees = {"before": args.before.resolve(), "after": ROOT}
    print(f"one-file export: before = {trees['before']}, after = {ROOT}; medians of {args.repeats}, alternating, "
          "each in a fresh process (a shared, busy machine: compare the columns, not the absolutes)")
    print(f"  {'':<30} {'before':>10} {'after':>10} {'':<4} {'gain':>7}  target")
    for size in args.sizes:
        source = folder / f"run-{size}.jsonl"
        run = long_run(size)
        run.transcript.save(source)
        n = len(run.events)
        del run
        got: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                got[name].append(write(tree, source, folder / f"{name}-{size}.html"))
        med = {k: {f: statistics.median(g[f] for g in v) for f in ("wall", "cpu", "size")} for k, v in got.items()}
        target = TARGETS.get(size, (None, None, None, None))
        print(f"{n:,} events")
        print(row("written, CPU", med["before"]["cpu"], med["after"]["cpu"], "s", target[0]))
        print(row("written, wall", med["before"]["wall"], med["after"]["wall"], "s", target[0]))
        print(row("file size", med["before"]["size"] / 1e6, med["after"]["size"] / 1e6, "MB", target[1]))
        if args.browser:
            from playwright.sync_api import sync_playwright

            from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                figures = {k: page_figures(browser, folder / f"{k}-{size}.html", args.repeats, n) for k in trees}
                browser.close()
            b, a = figures["before"], figures["after"]
            print(row("ready in Chromium", b["ready"], a["ready"], "ms", target[2]))
            print(row("page heap once ready", b["heap"], a["heap"], "MB", target[3]))
            print(row("click -> card", b["click"], a["click"], "ms", 100.0))
            print(row("first left-out card", b["first_left_out"], a["first_left_out"], "ms", None))
            print(row("next left-out cards", b["left_out"], a["left_out"], "ms", None))
        for p in folder.iterdir():
            p.unlink()
    folder.rmdir()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:4])
    else:
        main()
