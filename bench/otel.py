"""What OpenTelemetry export costs a run, and how fast a trace comes back as a transcript.

Workload: one conversation of N round trips (the model asks for a trivial tool, then answers), ScriptedModel,
no streaming. Baseline: the same run with no tracer provider, measured in the same process. Rows: the run
with live export to the SDK's in-memory exporter (content off, then on), the export of the finished
transcript, and the import of its spans (SDK spans, and the OTLP/JSON text of them). Medians of repeats.

    python bench/otel.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    repeats = ap.parse_args().repeats
    print(f"{'round trips':>11} {'baseline ms':>12} {'live ms':>9} {'x':>5} {'live+content ms':>16} {'x':>5} "
          f"{'export ms':>10} {'import ms':>10} {'import OTLP/JSON ms':>20}")
    for n in NS:
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
