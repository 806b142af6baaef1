"""The cost of keeping the wire: one model request through the official ``openai`` client against the emulator.

For a whole answer and a streamed one (a 2,000-character text in 40-character fragments, no delays), the same
loop runs with the capture on (the default) and off (``capture_wire=False``), interleaved so both see the same
machine: the median wall time of one run of one turn, and the bytes the run's transcript takes. All measured
in this run; the machine is shared and noisy, so read the ratios.

    python bench/wire_capture.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import agentnb as anb
from agentnb.emulator import Emulator
from agentnb.events import event_to_json
from agentnb.providers.openai_chat._model import client

TEXT = "The quick brown fox jumps over the lazy dog. " * 45


def one(emu: Emulator, http: object, stream: bool, capture: bool) -> tuple[float, int]:
    emu.play([{"text": TEXT[:2000]}])
    model = anb.OpenAIChatModel(http, model="gpt-4.1", stream=stream, capture_wire=capture)
    t0 = time.perf_counter()
    run = anb.Loop(model=model).start("Talk.").run()
    spent = time.perf_counter() - t0
    assert run.state is anb.LoopState.COMPLETED, run.reason
    return spent, sum(len(event_to_json(e)) for e in run.events)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    with Emulator(chunk_size=40) as emu:
        http = client("bench-key-0000000000", emu.url("openai"))
        print(f"{'answer':<10} {'capture':<8} {'median ms':>10} {'p90 ms':>8} {'transcript bytes':>17}")
        for stream in (False, True):
            times: dict[bool, list[float]] = {True: [], False: []}
            size: dict[bool, int] = {}
            for _ in range(3):  # warm-up: SDK imports, connections
                one(emu, http, stream, True)
                one(emu, http, stream, False)
            for _ in range(args.repeats):
                for capture in (False, True):
                    spent, size[capture] = one(emu, http, stream, capture)
                    times[capture].append(spent * 1000)
            for capture in (False, True):
                ts = sorted(times[capture])
                print(f"{'streamed' if stream else 'whole':<10} {'on' if capture else 'off':<8} "
                      f"{statistics.median(ts):>10.2f} {ts[int(len(ts) * 0.9) - 1]:>8.2f} {size[capture]:>17,}")


if __name__ == "__main__":
    main()
