"""A scan of 10,000 stored runs, killed with SIGKILL part way in a process of its own, resumes: every run ends up
scanned and in the results once, and no run the cache held at the kill is scanned again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.scan_worker import make_store

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("scan_worker.py")
RUNS = 10_000
CONCURRENCY = 2  # the worker's: at most this many runs are between their scanner and their cache file at once


def _scan(db: Path, cache: Path, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(WORKER), str(db), str(cache), str(log)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _cached(cache: Path) -> set[str]:
    return {json.loads(p.read_text())["run_id"] for p in cache.rglob("*.json")}


def test_a_scan_of_ten_thousand_stored_runs_resumes_after_sigkill(tmp_path: Path) -> None:
    db, cache = tmp_path / "runs.db", tmp_path / "cache"
    ids = make_store(db, RUNS)
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    first = _scan(db, cache, first_log)
    deadline = time.monotonic() + 120
    while len(_lines(first_log)) < RUNS // 4:
        assert first.poll() is None, f"the scan ended before it was killed: {first.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, "the scan did not get a quarter of the way in two minutes"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL
    seen_first = _lines(first_log)
    cached = _cached(cache)  # what the killed scan left: whole files only (a cut one would not read)
    assert RUNS // 4 <= len(seen_first) < RUNS and len(cached) >= len(seen_first) - CONCURRENCY
    assert cached <= set(seen_first)

    second = _scan(db, cache, second_log)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err[-2000:]
    result = json.loads(out)
    assert result["runs"] == ids and set(result["values"]) == {11}  # every run once, in the store's order
    seen_second = _lines(second_log)
    assert not set(seen_second) & cached  # a run the cache held was not scanned again
    assert max(Counter(seen_first).values()) == 1 and max(Counter(seen_second).values()) == 1
    again = set(seen_first) & set(seen_second)  # scanned when the kill came, before its file was written
    assert len(again) <= CONCURRENCY and set(seen_first) | set(seen_second) == set(ids)
    assert len(_cached(cache)) == RUNS
