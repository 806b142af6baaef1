"""A store of many runs made cheaply, and a scan of it in a process of its own (to be killed part way).

    python scan_worker.py DB CACHE LOG   # scan every run of the SQLite store DB, cached in CACHE; each run a
                                         # scanner sees is appended to LOG as it is scanned

:func:`make_store` writes N runs into an SQLite store without running a loop N times: one real run's events,
each copy under its own run id, sealed as the store seals them (its own :class:`~agentnb.store._seals.Seals`)
and inserted in one transaction. ``SqliteStore.load`` verifies every seal of every copy, as for any run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import agentnb as anb
from agentnb.events import event_to_json

KEY = b"scan-kill-key-0001"
TEMPLATE = "tmplrun-000000"
"""The template run's id, replaced by each copy's in its events' JSON."""


def run_id(i: int) -> str:
    return f"run-{i:010d}"


def make_store(path: Path, n: int) -> list[str]:
    """An SQLite store holding ``n`` sealed copies of one finished weather run; their ids, in order."""
    loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    events = loop.start("Paris?", run_id=TEMPLATE).run().events
    lines = [event_to_json(ev) for ev in events]
    state = events[-1].state.value
    store = anb.SqliteStore(path, key=KEY)  # the schema and the key's fingerprint
    seals = store._seals
    store.close()
    ids = [run_id(i) for i in range(n)]
    quoted = json.dumps(TEMPLATE)
    event_rows: list[tuple[str, int, str, str, str]] = []
    run_rows: list[tuple[Any, ...]] = []
    now = time.time()
    for k, rid in enumerate(ids):
        prev = ""
        for ev, line in zip(events, lines, strict=True):
            data = line.replace(quoted, json.dumps(rid))
            prev = seals.event(prev, rid, ev.seq, data)
            event_rows.append((rid, ev.seq, ev.type, data, prev))
        head = (len(events) - 1, prev, -1, "")
        run_rows.append((rid, *head, seals.head(rid, head), state, now - k))
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", event_rows)
        db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", run_rows)
    return ids


def main(db: str, cache: str, log: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def events_of(t: anb.Transcript) -> int:
        os.write(fd, f"{t.run_id}\n".encode())  # one write per run: lines from the killed process stay whole
        return len(t.events)

    store = anb.SqliteStore(db, key=KEY, readonly=True)
    hits = anb.scan(store, anb.Scanner("events", events_of), cache=cache, concurrency=2, progress=False)
    print(json.dumps({"runs": hits["run_id"].astype(str).tolist(), "values": hits["value"].tolist()}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
