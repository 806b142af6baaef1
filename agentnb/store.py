"""Checkpoints and the effect ledger: where a run's events and its side effects are made durable.

A store holds, per run, the events append-only, and an **effect ledger** keyed by idempotency key: the
intent of a side-effecting call is recorded before the tool runs and its outcome right after. Resuming a
run is folding its stored events again (:meth:`agentnb.Run.resume`); the ledger is what keeps a retried,
replayed or resumed write from running twice.

:class:`MemoryStore` is what a loop uses when you give it none (nothing survives the process).
:class:`SqliteStore` is the durable default: one SQLite file in WAL mode. Every stored event is sealed
with an HMAC chained over the run's previous seal, and the run's head (last seq and seal) is sealed too, so
an edited, reordered, inserted, removed or truncated event is detected when the run is loaded: the load is
refused as a whole, never half-loaded. The key comes from ``AGENTNB_CHECKPOINT_KEY`` or a key file created
with 0600 permissions (``~/.agentnb/checkpoint.key`` unless ``key_file`` says otherwise).

Durability: commits use WAL with ``synchronous=NORMAL``, which survives the process being killed at any
point (the crash tests in ``tests/test_durable.py`` do exactly that) but may lose the last commits on a power
failure; pass ``synchronous="FULL"`` for that too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from .events import BaseEvent, event_from_json, event_to_json
from .exceptions import CheckpointError

EffectStatus = Literal["started", "done"]


@dataclass(frozen=True, slots=True)
class Effect:
    """One entry of the effect ledger."""

    key: str
    run_id: str
    call_id: str
    tool: str
    status: EffectStatus
    content: str | None = None
    """What the model saw (when done)."""
    value: Any = None
    result_status: str | None = None


class Store(Protocol):
    """Where a run's events and effects go. One I/O seam: ``append`` per event."""

    def append(self, event: BaseEvent) -> None:
        """Persist one event of a run (in order)."""

    def load(self, run_id: str) -> list[BaseEvent]:
        """All events of a run, verified; raises ``CheckpointError`` when they cannot be trusted."""

    def effect(self, key: str) -> Effect | None:
        """The ledger entry for an idempotency key, if any."""

    def start_effect(self, key: str, run_id: str, call_id: str, tool: str) -> None:
        """Record the intent of a side-effecting call before it runs."""

    def finish_effect(self, key: str, content: str, value: Any, result_status: str) -> None:
        """Record the outcome of a side-effecting call right after it ran."""


class MemoryStore:
    """The store of a loop given none: events stay in the run, the ledger in this object."""

    def __init__(self) -> None:
        self._events: dict[str, list[BaseEvent]] = {}
        self._effects: dict[str, Effect] = {}

    def append(self, event: BaseEvent) -> None:
        """Keep the event."""
        self._events.setdefault(event.run_id, []).append(event)

    def attach(self, run_id: str, events: list[BaseEvent]) -> None:
        """Share a run's own event list (the run then appends to it; nothing is copied)."""
        self._events[run_id] = events

    def load(self, run_id: str) -> list[BaseEvent]:
        """The run's events."""
        if run_id not in self._events:
            raise CheckpointError(f"no run {run_id!r} in this store")
        return list(self._events[run_id])

    def effect(self, key: str) -> Effect | None:
        """The ledger entry for a key."""
        return self._effects.get(key)

    def start_effect(self, key: str, run_id: str, call_id: str, tool: str) -> None:
        """Record an intent."""
        self._effects[key] = Effect(key, run_id, call_id, tool, "started")

    def finish_effect(self, key: str, content: str, value: Any, result_status: str) -> None:
        """Record an outcome."""
        e = self._effects[key]
        self._effects[key] = Effect(e.key, e.run_id, e.call_id, e.tool, "done", content, value, result_status)


def _load_key(key: bytes | str | None, key_file: str | Path | None) -> bytes:
    if key is not None:
        return key.encode() if isinstance(key, str) else key
    env = os.environ.get("AGENTNB_CHECKPOINT_KEY")
    if env:
        return env.encode()
    path = Path(key_file) if key_file else Path.home() / ".agentnb" / "checkpoint.key"
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise CheckpointError(f"checkpoint key file {path} is readable by others (mode {mode:o}); chmod 600 it")
        return path.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_hex(32).encode())
    return path.read_bytes()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, mac TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, head_seq INTEGER NOT NULL, head_mac TEXT NOT NULL, seal TEXT NOT NULL,
    state TEXT NOT NULL, updated REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS effects (
    key TEXT PRIMARY KEY, run_id TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL,
    content TEXT, value TEXT, result_status TEXT, started REAL NOT NULL, finished REAL, mac TEXT NOT NULL
) WITHOUT ROWID;
"""


class SqliteStore:
    """Durable checkpoints in one SQLite file (WAL), HMAC-sealed.

    Args:
        path: the database file (created if missing).
        key: the HMAC key; default ``AGENTNB_CHECKPOINT_KEY`` or the key file.
        key_file: where to find or create the key (0600).
        synchronous: SQLite's ``synchronous`` pragma: ``NORMAL`` (survives a killed process) or ``FULL``.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> store = anb.SqliteStore(os.path.join(tempfile.mkdtemp(), "runs.db"), key="k")
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
        >>> run = loop.start("Refund order 42").run()
        >>> again = anb.Run.resume(run.run_id, loop=loop, store=store)
        >>> again.state.value, len(again.events) == len(run.events)
        ('WAITING_APPROVAL', True)
    """

    def __init__(
        self, path: str | Path, *, key: bytes | str | None = None, key_file: str | Path | None = None,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        self.path = Path(path)
        self._key = _load_key(key, key_file)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.executescript(_SCHEMA)
        self._heads: dict[str, tuple[int, str]] = {}

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def _mac(self, *parts: str) -> str:
        return hmac.new(self._key, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()

    def _head(self, run_id: str) -> tuple[int, str]:
        head = self._heads.get(run_id)
        if head is None:
            row = self._db.execute("SELECT head_seq, head_mac, seal FROM runs WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                head = (-1, "")
            else:
                if not hmac.compare_digest(row[2], self._mac("head", run_id, str(row[0]), row[1])):
                    raise CheckpointError(f"run {run_id!r}: the checkpoint's head seal does not match")
                head = (int(row[0]), str(row[1]))
            self._heads[run_id] = head
        return head

    # -- events ---------------------------------------------------------------------------------------

    def append(self, event: BaseEvent) -> None:
        """Seal and store one event and the run's new head, in one transaction."""
        data = event_to_json(event)
        with self._lock:
            prev_seq, prev_mac = self._head(event.run_id)
            if event.seq != prev_seq + 1:
                raise CheckpointError(f"run {event.run_id!r}: event seq {event.seq} does not follow {prev_seq}")
            mac = self._mac(prev_mac, event.run_id, str(event.seq), data)
            seal = self._mac("head", event.run_id, str(event.seq), mac)
            db = self._db
            db.execute("BEGIN")
            try:
                db.execute(
                    "INSERT INTO events VALUES (?, ?, ?, ?, ?)", (event.run_id, event.seq, event.type, data, mac)
                )
                db.execute(
                    "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
                    "head_seq=excluded.head_seq, head_mac=excluded.head_mac, seal=excluded.seal, "
                    "state=excluded.state, updated=excluded.updated",
                    (event.run_id, event.seq, mac, seal, event.state.value, time.time()),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            self._heads[event.run_id] = (event.seq, mac)

    def load(self, run_id: str) -> list[BaseEvent]:
        """All events of a run after checking every seal; raises :class:`CheckpointError` otherwise."""
        with self._lock:
            self._heads.pop(run_id, None)
            head_seq, head_mac = self._head(run_id)
            if head_seq < 0:
                raise CheckpointError(f"no run {run_id!r} in {self.path}")
            rows = self._db.execute(
                "SELECT seq, data, mac FROM events WHERE run_id=? ORDER BY seq", (run_id,)
            ).fetchall()
        events: list[BaseEvent] = []
        prev = ""
        for expected, (seq, data, mac) in enumerate(rows):
            if seq != expected:
                raise CheckpointError(f"run {run_id!r}: event {expected} is missing from the checkpoint")
            if not hmac.compare_digest(mac, self._mac(prev, run_id, str(seq), data)):
                raise CheckpointError(f"run {run_id!r}: event {seq} was changed after it was written (seal mismatch)")
            try:
                events.append(event_from_json(data))
            except Exception as exc:
                raise CheckpointError(f"run {run_id!r}: event {seq} cannot be read: {exc}") from None
            prev = mac
        if len(rows) != head_seq + 1 or prev != head_mac:
            raise CheckpointError(
                f"run {run_id!r}: the checkpoint is truncated ({len(rows)} events stored, the head says {head_seq + 1})"
            )
        return events

    def runs(self) -> list[tuple[str, str]]:
        """``(run_id, state)`` of every stored run, most recent first."""
        rows = self._db.execute("SELECT run_id, state FROM runs ORDER BY updated DESC").fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    # -- effect ledger --------------------------------------------------------------------------------

    def _effect_mac(self, key: str, status: str, content: str | None, value: str | None) -> str:
        return self._mac("effect", key, status, content or "", value or "")

    def effect(self, key: str) -> Effect | None:
        """The ledger entry for a key (its seal checked)."""
        with self._lock:
            row = self._db.execute(
                "SELECT key, run_id, call_id, tool, status, content, value, result_status, mac FROM effects "
                "WHERE key=?", (key,)
            ).fetchone()
        if row is None:
            return None
        if not hmac.compare_digest(row[8], self._effect_mac(row[0], row[4], row[5], row[6])):
            raise CheckpointError(f"effect ledger entry {key!r} was changed after it was written (seal mismatch)")
        value = json.loads(row[6]) if row[6] is not None else None
        return Effect(row[0], row[1], row[2], row[3], row[4], row[5], value, row[7])

    def start_effect(self, key: str, run_id: str, call_id: str, tool: str) -> None:
        """Record an intent (committed before the tool runs)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO effects (key, run_id, call_id, tool, status, started, mac) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET status='started', call_id=excluded.call_id, mac=excluded.mac",
                (key, run_id, call_id, tool, "started", time.time(), self._effect_mac(key, "started", None, None)),
            )

    def finish_effect(self, key: str, content: str, value: Any, result_status: str) -> None:
        """Record an outcome (committed right after the tool returns)."""
        encoded = json.dumps(value, ensure_ascii=False, default=repr)
        with self._lock:
            self._db.execute(
                "UPDATE effects SET status='done', content=?, value=?, result_status=?, finished=?, mac=? WHERE key=?",
                (content, encoded, result_status, time.time(), self._effect_mac(key, "done", content, encoded), key),
            )


def as_store(store: Store | str | Path | None) -> Store:
    """A store from a store, a path (an :class:`SqliteStore`), or None (a :class:`MemoryStore`)."""
    if store is None:
        return MemoryStore()
    if isinstance(store, str | Path):
        return SqliteStore(store)
    return store
