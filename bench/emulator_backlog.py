"""Many SDK clients connecting to the emulator at once: failed connections and answering time, by listen backlog.

Each round, ``--clients`` threads (64) each make a new ``openai.OpenAI`` client (its own connection, the SDK's
retries off so that a refused or reset connection shows as an error instead of a retry a second later), wait at
a barrier, and send one Chat Completions request to the emulator on 127.0.0.1. The same rounds run against an
emulator listening with the standard library's backlog of 5 (what ``socketserver`` uses when nobody says
otherwise) and with the emulator's own (:data:`agentnb.emulator._records.LISTEN_BACKLOG`), alternating, in this
run: the share of requests that failed to connect, and the p50, p99 and worst wall time of those that did.

    python bench/emulator_backlog.py [--clients 64] [--rounds 10]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import openai

from agentnb.emulator import Emulator, _http
from agentnb.emulator._records import LISTEN_BACKLOG


def one_round(url: str, clients: int) -> tuple[list[float], int]:
    barrier = threading.Barrier(clients)
    times: list[float] = []
    failed = [0]
    lock = threading.Lock()

    def client() -> None:
        http = openai.OpenAI(api_key="bench-key-0000000000", base_url=url, max_retries=0, timeout=30.0)
        barrier.wait()
        t0 = time.perf_counter()
        try:
            http.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}])
        except openai.APIConnectionError:
            with lock:
                failed[0] += 1
        else:
            with lock:
                times.append(time.perf_counter() - t0)
        finally:
            http.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times, failed[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    results: dict[int, tuple[list[float], int]] = {5: ([], 0), LISTEN_BACKLOG: ([], 0)}
    script: list[Any] = [{"text": "ok"}] * (args.clients * args.rounds * 2 + 10)
    for _ in range(args.rounds):
        for backlog in results:
            _http.Server.request_queue_size = backlog
            try:
                with Emulator(script) as emu:
                    times, failed = one_round(emu.url("openai"), args.clients)
            finally:
                _http.Server.request_queue_size = LISTEN_BACKLOG
            results[backlog][0].extend(times)
            results[backlog] = (results[backlog][0], results[backlog][1] + failed)
    total = args.clients * args.rounds
    print(f"{args.clients} clients at once, {args.rounds} rounds ({total} requests per backlog)")
    print(f"{'backlog':>8} {'failed':>8} {'failed %':>9} {'p50 ms':>8} {'p99 ms':>8} {'worst ms':>9}")
    for backlog, (times, failed) in results.items():
        ts = sorted(times)
        p99 = ts[max(0, int(len(ts) * 0.99) - 1)] if ts else float("nan")
        print(f"{backlog:>8} {failed:>8} {failed / total * 100:>8.1f}% {statistics.median(ts) * 1e3:>8.1f} "
              f"{p99 * 1e3:>8.1f} {ts[-1] * 1e3:>9.1f}")


if __name__ == "__main__":
    main()
