"""What a live approvals inbox costs: the stores' append path, one poll of a SQLite store, one listing.

- Memory append per event: this checkout beside a baseline checkout (``--baseline PATH``, default the main
  checkout next to this worktree when there is one), in alternating rounds of the same run, each in its own
  process; and this checkout with an inbox waiting on the store (``wait_for_change``: each append notifies).
- SQLite: one poll of ``wait_for_change`` (``PRAGMA data_version``) on a store of 200 runs, beside one listing of
  its inbox (50 paused runs, each log read and its seals checked) -- what a live widget does once per change.

    python bench/inbox.py [--baseline PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

APPEND = r"""
import statistics, sys, threading, time
from datetime import UTC, datetime
import agentnb as anb
from agentnb.events import RunStarted
from agentnb._states import LoopState as S
watch = sys.argv[1] == "watch"
store = anb.MemoryStore()
if watch:
    stop = threading.Event()
    def watcher():
        while not stop.is_set():
            store.wait_for_change(timeout=0.05)
    threading.Thread(target=watcher, daemon=True).start()
    time.sleep(0.1)
now = datetime.now(UTC)
events = [RunStarted(seq=0, ts=now, run_id=f"r{i}", turn=0, state=S.READY, messages=[], model="m", tools=[])
          for i in range(20000)]
t0 = time.perf_counter()
for ev in events:
    store.append(ev)
print((time.perf_counter() - t0) / len(events) * 1e6)
"""


def append_us(path: Path, mode: str = "plain") -> float:
    out = subprocess.run([sys.executable, "-c", APPEND, mode], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"})
    return float(out.stdout.strip().splitlines()[-1])


def sqlite_rows() -> list[tuple[str, float]]:
    import agentnb as anb
    from tests.test_inbox_batch import KEY, PROMPTS, batch_loop

    db = Path(tempfile.mkdtemp()) / "bench.db"
    store = anb.SqliteStore(db, key=KEY)
    anb.batch(batch_loop(store), PROMPTS, name="orders", concurrency=8, progress=False)
    polls = []
    for _ in range(200):
        t0 = time.perf_counter()
        store.wait_for_change(timeout=0, interval=0)
        polls.append(time.perf_counter() - t0)
    inbox = anb.Inbox(store)
    listings = []
    for _ in range(5):
        t0 = time.perf_counter()
        n = len(inbox.items())
        listings.append(time.perf_counter() - t0)
    return [("SQLite: one poll of wait_for_change (200 runs)", statistics.median(polls) * 1e6),
            (f"SQLite: one listing of the inbox ({n} waiting of 200 runs)", statistics.median(listings) * 1e6)]


def main() -> None:
    parser = argparse.ArgumentParser()
    default = HERE.parent / "main"
    parser.add_argument("--baseline", type=Path, default=default if (default / "agentnb").is_dir() else None)
    args = parser.parse_args()
    rounds: dict[str, list[float]] = {"this": [], "baseline": [], "watched": []}
    for _ in range(5):  # alternating, so a busy moment of a shared machine falls on every column alike
        rounds["this"].append(append_us(HERE))
        if args.baseline is not None:
            rounds["baseline"].append(append_us(args.baseline))
        rounds["watched"].append(append_us(HERE, "watch"))
    print(f"{'what':<62} {'median':>12}")
    if rounds["baseline"]:
        print(f"{'Memory append per event, baseline (' + str(args.baseline) + ')':<62} "
              f"{statistics.median(rounds['baseline']):>9.2f} us")
    print(f"{'Memory append per event, this checkout, nobody waiting':<62} "
          f"{statistics.median(rounds['this']):>9.2f} us")
    print(f"{'Memory append per event, this checkout, an inbox waiting':<62} "
          f"{statistics.median(rounds['watched']):>9.2f} us")
    for what, us in sqlite_rows():
        print(f"{what:<62} {us:>9.0f} us")


if __name__ == "__main__":
    main()
