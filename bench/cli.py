"""What the ``agentnb`` command's additions cost: the transcript an HTML export now embeds, and the CLI's start.

Measured in one run, on a long scripted transcript (``--events``, 10,000 by default):

- the export (``render_html``) without the embedded transcript (the block replaced by nothing: what an export
  was before) and with it, in milliseconds and bytes;
- ``Transcript.load`` of the run from its JSONL file and from its HTML export;
- ``python -m agentnb --version`` and ``python -m agentnb runs`` on a store of ``--runs`` runs, wall time of
  a fresh interpreter (the import of agentnb is most of it).

    python bench/cli.py [--events 10000] [--runs 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import agentnb as anb
from agentnb._debugger import export
from agentnb._debugger.timeline import Timeline

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from debugger import long_run  # noqa: E402


def median_ms(fn: Any, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    transcript = anb.Transcript(list(long_run(args.events).events))
    timeline = Timeline(transcript.events)
    n = len(transcript)

    real = export.embedded_block
    export.embedded_block = lambda events: ""  # type: ignore[assignment]
    try:
        before_ms = median_ms(lambda: export.render_html(timeline))
        before_bytes = len(export.render_html(timeline).encode())
    finally:
        export.embedded_block = real
    after_ms = median_ms(lambda: export.render_html(timeline))
    page = export.render_html(timeline)
    (tmp / "run.html").write_text(page, encoding="utf-8")
    transcript.save(tmp / "run.jsonl")
    load_jsonl = median_ms(lambda: anb.Transcript.load(tmp / "run.jsonl"))
    load_html = median_ms(lambda: anb.Transcript.load(tmp / "run.html"))

    key = "bench-checkpoint-key"
    store = anb.SqliteStore(tmp / "runs.db", key=key)
    loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
    for i in range(args.runs):
        loop.start("Refund order 42", run_id=f"refund-{i}").run()
    env = {**os.environ, "AGENTNB_CHECKPOINT_KEY": key, "PYTHONPATH": str(ROOT)}

    def command(*argv: str) -> None:
        subprocess.run([sys.executable, "-m", "agentnb", *argv], cwd=tmp, env=env, check=True, capture_output=True)

    version_ms = median_ms(lambda: command("--version"), 5)
    runs_ms = median_ms(lambda: command("runs", "runs.db", "--json"), 5)

    print(f"HTML export of a {n}-event run (median of 5)")
    print(f"  {'':<34} {'before (no transcript)':>24} {'after (embedded)':>18}")
    print(f"  {'render_html, ms':<34} {before_ms:>24.0f} {after_ms:>18.0f}")
    print(f"  {'size, KiB':<34} {before_bytes / 1024:>24.0f} {len(page.encode()) / 1024:>18.0f}")
    print(f"Transcript.load of the same run, ms: from JSONL {load_jsonl:.0f}, from the HTML export {load_html:.0f}")
    print(f"python -m agentnb (fresh interpreter, median of 5): --version {version_ms:.0f} ms; "
          f"runs --json on {args.runs} runs {runs_ms:.0f} ms")


if __name__ == "__main__":
    main()
