"""Importing GenAI traces at scale: ``anb.import_trace`` and ``anb.iter_trace`` over 10^4 to 10^6 spans.

Two workloads, both made from real agentnb exports (content on), written as the Collector's file exporter
writes them (JSON Lines: one OTLP/JSON document a line, ``--per-line`` spans each, 512 as the SDK's batch
processor sends them), or with ``--document`` as one OTLP/JSON document:

- ``many runs``: one run of one tool call and an answer (an agent span, two chat spans, a tool span) cloned
  with new trace and span ids, so N spans are N/4 agent invocations, as a Collector's file of a busy service;
- ``one long run``: a single run of N/2 turns of one call each (content off, so the size of the text grows
  with N, not N^2; the calls come back from the tool spans): the shape that shows work done per turn over the
  whole run so far, and the one invocation the streaming form must hold whole.

Each measurement runs in a fresh child process, ``--repeat`` times (the median is shown): the time is the wall
time, and the memory the peak resident set size during the measurement minus the size before it (with
agentnb imported, and the peak reset: Linux's ``clear_refs``; elsewhere the peak of the whole child). The
import is given the file's path, so reading it counts: ``import_trace`` keeps every transcript it returns,
``iter_trace`` is consumed and each transcript dropped (as a pipeline into a store or a scan would), so its
memory is what the stream itself holds. The baselines on the same row: ``json.loads`` of each line of the file,
every document kept (the floor for a reader that holds what it parsed), and with ``--against DIR`` the same
``import_trace`` by the agentnb package found in ``DIR`` (an older version, e.g.
``git archive main agentnb | tar -x -C DIR``).

    python bench/otel_import.py                 # 10^4, 10^5 and 10^6 spans
    python bench/otel_import.py --sizes 10000 100000 --against /tmp/agentnb-main

Measured (2 shared cores under other load, so the times are rough; JSON Lines of 512 spans a line; medians of 3
runs at 10^4 and 10^5, one run at 10^6; "before" is main's ``import_trace``, which reads the text whole):

    workload        spans   MiB file  before s  MiB   import s  MiB   iter s  MiB
    many runs       10^4        16      2.1     59      1.4     16      2.4    27
    many runs       10^5       164     54      491     23      175     33      30
    many runs       10^6      1642    850     4924    570     1717    612      34
    one long run    10^4        10      0.9     40      0.8     23      0.9    24
    one long run    10^5       104     16      310      8.3    246     15     246
    one long run    10^6      1039    252     3114    147     2433    273    2442

``iter_trace`` stays near 30 MiB for many runs at every size (the window of 10 000 spans); a single run is one
invocation, held whole until its agent span, so there it is what ``import_trace`` holds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def many_runs(n_spans: int) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """``n_spans`` spans: copies of one exported run, each with its own trace id and span ids (made as written)."""
    template = _export([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "3"}],
                       content=True)
    spans = template["resourceSpans"][0]["scopeSpans"][0]["spans"]
    text = json.dumps(spans)
    ids = sorted({s["spanId"] for s in spans} | {s["traceId"] for s in spans})

    def copies() -> Iterator[dict[str, Any]]:
        for k in range(n_spans // len(spans)):
            copy = text
            for j, old in enumerate(ids):
                copy = copy.replace(old, f"{k:0{len(old) - 4}x}{j:04x}")
            yield from json.loads(copy)

    return template, copies()


def one_long_run(n_spans: int) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """One run of about ``n_spans / 2`` turns, one call each (content off)."""
    turns = max(1, n_spans // 2 - 1)
    script: list[dict[str, Any]] = [{"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]}
                                    for i in range(turns)]
    script.append({"text": "done"})
    doc = _export(script, content=False)
    return doc, iter(doc["resourceSpans"][0]["scopeSpans"][0].pop("spans"))


def write(workload: tuple[dict[str, Any], Iterator[dict[str, Any]]], path: str, per_line: int | None) -> None:
    """A workload's spans as one document (``per_line`` None), or as JSON Lines of ``per_line`` spans a line."""
    doc, spans = workload
    resource = doc["resourceSpans"][0]

    def document(part: list[dict[str, Any]]) -> dict[str, Any]:
        return {"resourceSpans": [{**resource, "scopeSpans": [{**resource["scopeSpans"][0], "spans": part}]}]}

    with open(path, "w", encoding="utf-8") as f:
        if per_line is None:
            json.dump(document(list(spans)), f)
            return
        while part := list(itertools.islice(spans, per_line)):
            f.write(json.dumps(document(part)) + "\n")


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
    if what != "json":
        import agentnb as anb
        import agentnb.otel  # noqa: F401  (loaded before the base, so its modules are not counted)
    try:  # reset the peak, so that it is the measurement's and not the start's (Linux 4.0 and later)
        Path("/proc/self/clear_refs").write_text("5")
        base = _rss_kib("VmRSS") or 0
    except OSError:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if what == "json":  # every line parsed and kept (one document: parsed whole)
        with open(path, encoding="utf-8") as f:
            n = len([json.loads(line) for line in f if line.strip()]) * 0
    elif what == "iter":
        n = sum(1 for _ in anb.iter_trace(path))
    else:
        n = len(anb.import_trace(path))
    dt = time.perf_counter() - t0
    peak = _rss_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": dt, "mib": (peak - base) / 1024, "transcripts": n}))


def _measure(path: str, what: str, timeout: float, repeat: int, code: Path = ROOT) -> dict[str, Any] | None:
    """The median time and memory of ``repeat`` runs (None: one ran past the timeout)."""
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    runs = []
    for _ in range(repeat):
        try:
            out = subprocess.run([sys.executable, __file__, "--child", path, what], capture_output=True,
                                 text=True, timeout=timeout, env=env, check=True)
        except subprocess.TimeoutExpired:
            return None
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"s": statistics.median(r["s"] for r in runs), "mib": statistics.median(r["mib"] for r in runs),
            "transcripts": runs[0]["transcripts"]}


def _cell(m: dict[str, Any] | None, width: int, timeout: float) -> str:
    """Seconds and MiB of one measurement (or that it ran past the timeout)."""
    return f" {m['s']:>{width}.2f} {m['mib']:>6.0f}" if m else f" {'> ' + format(timeout, 'g'):>{width}} {'':>6}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--per-line", type=int, default=512, help="spans a line of JSON Lines")
    ap.add_argument("--document", action="store_true", help="write one OTLP/JSON document, not JSON Lines")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement (the median is shown)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before a measurement is given up")
    ap.add_argument("--no-json", action="store_true", help="leave out the json.loads baseline (slow at 10^6)")
    ap.add_argument("--against", type=Path, help="a directory holding another agentnb package to compare with")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    print(f"{'workload':>13} {'spans':>9} {'MiB file':>9} {'json.loads s':>13} {'MiB':>6}"
          + (f" {'before s':>9} {'MiB':>6}" if args.against else "")
          + f" {'import s':>9} {'MiB':>6} {'iter s':>9} {'MiB':>6} {'transcripts':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads:
            for n in args.sizes:
                path = os.path.join(tmp, "trace.json")
                write(WORKLOADS[name](n), path, None if args.document else args.per_line)
                row = f"{name:>13} {n:>9} {os.path.getsize(path) / 2**20:>9.1f}"
                row += (f" {'-':>13} {'':>6}" if args.no_json
                        else _cell(_measure(path, "json", args.timeout, args.repeat), 13, args.timeout))
                if args.against:
                    row += _cell(_measure(path, "import", args.timeout, args.repeat, args.against), 9, args.timeout)
                got = _measure(path, "import", args.timeout, args.repeat)
                row += _cell(got, 9, args.timeout)
                streamed = _measure(path, "iter", args.timeout, args.repeat)
                row += _cell(streamed, 9, args.timeout)
                row += f" {(got or streamed or {}).get('transcripts', ''):>12}"
                print(row, flush=True)


if __name__ == "__main__":
    main()
