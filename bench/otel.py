"""What OpenTelemetry export costs a run, and how fast a trace comes back as a transcript.

Workload: one conversation of N round trips (the model asks for a trivial tool, then answers), ScriptedModel,
no streaming. Baseline: the same run with no tracer provider, measured in the same process. Rows: the run
with live export to the SDK's in-memory exporter (content off, then on), the export of the finished
transcript, and the import of its spans (SDK spans, and the OTLP/JSON text of them). Medians of repeats.

    python bench/otel.py [--repeats 5] [--sizes 10 100 300 3000]
    python bench/otel.py --before /path/to/a/checkout/of/main --sizes 300 1000 3000 --repeats 3

With ``--before``, only the export and the import of a finished run with content (the part that grew with the
square of the run), each in a fresh child process, alternating between this tree and the one given, wall and
CPU time (medians). Target (issue 30, item 4): 3,000 round trips in at most 3 s each way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentnb as anb

NS = (10, 100, 300)


@anb.tool
def noop(x: int) -> str:
    """Echo the argument."""
    return str(x)


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    return tp, spans


def run(n: int, tracing: Any = None) -> anb.Run:
    script: list[Any] = [{"tool_calls": [{"name": "noop", "arguments": {"x": i}}]} for i in range(n)]
    script.append({"text": "done"})
    loop = anb.Loop(model=anb.ScriptedModel(script), tools=[noop], max_turns=n + 1, tracer_provider=tracing)
    return loop.start("go")


def timed(fn: Callable[[], Any], repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def child(n: int) -> None:
    """Export a finished run of ``n`` round trips with content, then import its spans; print the times as JSON."""
    done = run(n).run()
    tp, spans = provider()
    t0, c0 = time.perf_counter(), time.process_time()
    anb.otel.export(done.transcript, tp, include_content=True)
    out = {"export": time.perf_counter() - t0, "export_cpu": time.process_time() - c0}
    finished = spans.get_finished_spans()
    t0, c0 = time.perf_counter(), time.process_time()
    [back] = anb.import_trace(finished)
    out.update({"import": time.perf_counter() - t0, "import_cpu": time.process_time() - c0})
    assert back.fold().tool_calls == n and back.state is anb.LoopState.COMPLETED
    print(json.dumps(out))


def against(before: Path, sizes: list[int], repeats: int) -> None:
    trees = {"before": before.resolve(), "after": Path(__file__).resolve().parents[1]}
    print(f"OTel export and import with content: before = {trees['before']}, after = {trees['after']}; medians "
          f"of {repeats}, alternating, fresh processes (a shared, busy machine: compare the columns)")
    print(f"{'round trips':>11}  {'':<14} {'before s':>9} {'after s':>9} {'gain':>6}  target")
    for n in sizes:
        got: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
        for _ in range(repeats):
            for name, tree in trees.items():
                proc = subprocess.run([sys.executable, __file__, "--child", str(n)], check=True, text=True,
                                      capture_output=True, env={**os.environ, "PYTHONPATH": str(tree)})
                got[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        for key in ("export", "export_cpu", "import", "import_cpu"):
            b = statistics.median(r[key] for r in got["before"])
            a = statistics.median(r[key] for r in got["after"])
            label = key.replace("_cpu", ", CPU") if key.endswith("_cpu") else f"{key}, wall"
            print(f"{n:>11}  {label:<14} {b:9.3f} {a:9.3f} {b / a:5.1f}x  {'<= 3 s' if n == 3000 else ''}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(NS), help="round trips per run")
    ap.add_argument("--before", type=Path, help="a checkout of the version to compare with (export and import only)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return
    if args.before is not None:
        against(args.before, args.sizes, args.repeats)
        return
    repeats = args.repeats
    print(f"{'round trips':>11} {'baseline ms':>12} {'live ms':>9} {'x':>5} {'live+content ms':>16} {'x':>5} "
          f"{'export ms':>10} {'import ms':>10} {'import OTLP/JSON ms':>20}")
    for n in args.sizes:
        base = timed(lambda n=n: run(n).run(), repeats)
        live = timed(lambda n=n: run(n, provider()[0]).run(), repeats)
        content = timed(lambda n=n: run(n, anb.otel.Tracing(provider()[0], include_content=True)).run(), repeats)
        done = run(n).run()
        export = timed(lambda done=done: anb.otel.export(done.transcript, provider()[0], include_content=True),
                       repeats)
        tp, spans = provider()
        anb.otel.export(done.transcript, tp, include_content=True)
        finished = spans.get_finished_spans()
        text = json.dumps(anb.otel.to_otlp_json(finished))
        back = anb.import_trace(finished)[0]
        assert back.fold().tool_calls == n and back.state is anb.LoopState.COMPLETED
        imp = timed(lambda finished=finished: anb.import_trace(finished), repeats)
        imp_json = timed(lambda text=text: anb.import_trace(text), repeats)
        print(f"{n:>11} {base * 1e3:>12.1f} {live * 1e3:>9.1f} {live / base:>5.1f} {content * 1e3:>16.1f} "
              f"{content / base:>5.1f} {export * 1e3:>10.1f} {imp * 1e3:>10.1f} {imp_json * 1e3:>20.1f}")


if __name__ == "__main__":
    main()
