"""Importing GenAI traces at scale: ``anb.import_trace`` over 10^4 to 10^6 spans of OTLP/JSON text.

Two workloads, both made from real agentnb exports (content on):

- ``many runs``: one run of one tool call and an answer (an agent span, two chat spans, a tool span) cloned
  with new trace and span ids, so N spans are N/4 agent invocations, as a Collector's file of a busy service;
- ``one long run``: a single run of N/2 turns of one call each (content off, so the size of the text grows
  with N, not N^2; the calls come back from the tool spans): the shape that shows work done per turn over the
  whole run so far.

Each measurement runs in a fresh child process that reads the text from a file, then imports it: the time is
the import's wall time, and the memory is the import's own peak: the child's peak resident set size after the
import minus its size before it, with the peak reset once the text is read (Linux's ``clear_refs``; elsewhere
the peak of the whole child, text included). The baselines on the same row: ``json.loads`` of the same text
(the floor for a reader that parses the document whole), and with ``--against DIR`` the same import by the
agentnb package found in ``DIR`` (an older version, e.g. ``git archive main agentnb | tar -x -C DIR``).

    python bench/otel_import.py                 # 10^4, 10^5 and 10^6 spans
    python bench/otel_import.py --sizes 10000 100000 --against /tmp/agentnb-main
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _export(script: list[dict[str, Any]], *, content: bool) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import agentnb as anb

    @anb.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    spans, tp = InMemorySpanExporter(), TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    loop = anb.Loop(model=anb.ScriptedModel(script), tools=[add], system="Be brief.", max_turns=len(script) + 1,
                    tracer_provider=anb.otel.Tracing(tp, include_content=content))
    loop.start("Add them up.").run()
    return anb.otel.to_otlp_json(spans.get_finished_spans())


def many_runs(n_spans: int) -> str:
    """``n_spans`` spans: copies of one exported run, each with its own trace id and span ids."""
    template = _export([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "3"}],
                       content=True)
    resource = template["resourceSpans"][0]
    spans = resource["scopeSpans"][0]["spans"]
    text = json.dumps(spans)
    ids = sorted({s["spanId"] for s in spans} | {s["traceId"] for s in spans})
    parts = []
    for k in range(n_spans // len(spans)):
        copy = text
        for j, old in enumerate(ids):
            copy = copy.replace(old, f"{k:0{len(old) - 4}x}{j:04x}")
        parts.append(copy[1:-1])
    body = "[" + ",".join(parts) + "]"
    head = json.dumps({"resourceSpans": [{"resource": resource["resource"], "scopeSpans": [
        {"scope": resource["scopeSpans"][0]["scope"], "spans": "@@"}]}]})
    return head.replace('"@@"', body)


def one_long_run(n_spans: int) -> str:
    """One run of about ``n_spans / 2`` turns, one call each (content off)."""
    turns = max(1, n_spans // 2 - 1)
    script: list[dict[str, Any]] = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]}
                                    for i in range(turns)]
    script.append({"text": "done"})
    return json.dumps(_export(script, content=False))


WORKLOADS = {"many runs": many_runs, "one long run": one_long_run}


def _rss_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _child(path: str, what: str) -> None:
    text = Path(path).read_text(encoding="utf-8")
    try:  # reset the peak, so that it is the import's and not the reading's (Linux 4.0 and later)
        Path("/proc/self/clear_refs").write_text("5")
        base = _rss_kib("VmRSS") or 0
    except OSError:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if what == "json":
        json.loads(text)
        n = 0
    else:
        import agentnb as anb

        n = len(anb.import_trace(text))
    dt = time.perf_counter() - t0
    peak = _rss_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": dt, "mib": (peak - base) / 1024, "transcripts": n}))


def _measure(path: str, what: str, timeout: float, code: Path = ROOT) -> dict[str, Any] | None:
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    try:
        out = subprocess.run([sys.executable, __file__, "--child", path, what], capture_output=True, text=True,
                             timeout=timeout, env=env, check=True)
    except subprocess.TimeoutExpired:
        return None
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _cell(m: dict[str, Any] | None, width: int, timeout: float) -> str:
    """Seconds and MiB of one measurement (or that it ran past the timeout)."""
    return f" {m['s']:>{width}.2f} {m['mib']:>6.0f}" if m else f" {'> ' + format(timeout, 'g'):>{width}} {'':>6}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds before a measurement is given up")
    ap.add_argument("--against", type=Path, help="a directory holding another agentnb package to compare with")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    print(f"{'workload':>13} {'spans':>9} {'MiB text':>9} {'json.loads s':>13} {'MiB':>6}"
          + (f" {'before s':>9} {'MiB':>6}" if args.against else "")
          + f" {'import s':>9} {'MiB':>6} {'spans/s':>9} {'transcripts':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads:
            for n in args.sizes:
                path = os.path.join(tmp, "trace.json")
                Path(path).write_text(WORKLOADS[name](n), encoding="utf-8")
                row = f"{name:>13} {n:>9} {os.path.getsize(path) / 2**20:>9.1f}"
                row += _cell(_measure(path, "json", args.timeout), 13, args.timeout)
                if args.against:
                    row += _cell(_measure(path, "import", args.timeout, args.against), 9, args.timeout)
                got = _measure(path, "import", args.timeout)
                row += _cell(got, 9, args.timeout) + (f" {n / got['s']:>9.0f} {got['transcripts']:>12}" if got else "")
                print(row, flush=True)


if __name__ == "__main__":
    main()
