"""Checkpoints, the effect ledger and run leases: where a run's events and its side effects are made durable.

A store holds, per run:

- the **events**, append-only, each sealed with an HMAC chained over the run's previous seal;
- the **effect ledger**: the operations on the run's side effects, append-only and chained the same way. An
  effect is identified by its *idempotency key* (the business intent, see :func:`agentnb.tool`). ``claim``
  records the intent before a tool runs and is an insert that fails when the key exists (so two calls, two
  threads or two processes can never both run one effect); ``done`` records the outcome *in the same
  transaction* as the ``ToolFinished`` event that reports it; ``retry`` records that a person approved re-running
  an effect whose outcome was unknown;
- the run's **head**: the last event's seq and seal and the last ledger operation's number and seal, sealed
  together. An edited, reordered, inserted, removed or truncated event *or ledger row* is detected when the run is
  loaded, and the load is refused as a whole, never half-loaded;
- a **lease** (owner, expiry): the one driver allowed to append to the run. A driver renews it as it goes and
  releases it when the run pauses or ends; a second driver gets :class:`~agentnb.RunLocked` while the lease is live.

Guarantees, per crash point of a side-effecting call (a ``write`` or ``dangerous`` tool):

=====================================  ===========================================================================
the process dies ...                   on resume
=====================================  ===========================================================================
before the claim commits               nothing was recorded and nothing ran: the call runs (once)
after the claim, before the outcome    the ledger says "started": the run pauses as *outcome unknown*; a person
                                       reconciles (``submit_result``), approves a retry, or denies. An
                                       ``idempotent=True`` tool is re-run with the same key (its downstream
                                       deduplicates)
after the outcome commits              the outcome and its ``ToolFinished`` event are one transaction: the run
                                       goes on from the recorded result; the tool never runs again
=====================================  ===========================================================================

Every store fault (database locked past its timeout, disk full, read-only file) raises
:class:`~agentnb.CheckpointError` with the original error as its cause, after rolling back: nothing half-written
stays, and the run object is left equal to its checkpoint (see :class:`agentnb.Run`).

:class:`MemoryStore` is what a loop uses when you give it none (nothing survives the process; the same rules,
in memory). :class:`SqliteStore` is the durable default: one SQLite file in WAL mode. The key comes from the
``key`` argument, ``AGENTNB_CHECKPOINT_KEY``, or a key file created with 0600 permissions
(``~/.agentnb/checkpoint.key`` unless ``key_file`` says otherwise). A store remembers a fingerprint of its key,
so a missing or different key is reported as exactly that, never as tampering.

Durability: commits use WAL with ``synchronous=NORMAL``, which survives the process being killed at any
point (the crash tests in ``tests/test_durable.py`` and ``tests/test_effects.py`` do exactly that) but may lose
the last commits on a power failure; pass ``synchronous="FULL"`` for that too.
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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from .events import BaseEvent, event_from_json, event_to_json
from .exceptions import CheckpointError, RunLocked

EffectStatus = Literal["started", "done"]

LEASE_TTL = 30.0
"""Seconds a driver's lease lasts without renewal (a driver renews it while it works)."""

MIN_KEY_BYTES = 8
"""The shortest checkpoint key accepted: a shorter one gives no real integrity."""


@dataclass(frozen=True, slots=True)
class Effect:
    """One side effect as the ledger knows it (the fold of its ledger operations)."""

    key: str
    run_id: str
    """The run that claimed it (whose ledger chain holds its operations)."""
    call_id: str
    """The call that claimed it."""
    tool: str
    status: EffectStatus
    content: str | None = None
    """What the model saw (when done)."""
    value: Any = None
    result_status: str | None = None
    attempts: int = 1
    """1, plus one for every approved retry of an unknown outcome."""


@dataclass(frozen=True, slots=True)
class EffectDone:
    """An effect's outcome, recorded in the same transaction as the event that reports it."""

    key: str
    content: str
    value: Any
    result_status: str


@dataclass(frozen=True, slots=True)
class Lease:
    """Who drives a run, and until when (epoch seconds) without a renewal."""

    run_id: str
    owner: str
    expires: float

    @property
    def live(self) -> bool:
        """True until the lease expires."""
        return time.time() < self.expires


class Store(Protocol):
    """Where a run's events, effects and lease live. Every implementation passes ``tests/test_store_conformance.py``.

    Faults raise :class:`~agentnb.CheckpointError` (with the original error as ``__cause__``) after rolling back.
    """

    def append(self, event: BaseEvent, *, effect: EffectDone | None = None) -> None:
        """Persist one event of a run (in order), with the outcome of an effect when it reports one."""

    def load(self, run_id: str) -> list[BaseEvent]:
        """All events of a run, verified with its ledger; raises ``CheckpointError`` when they cannot be trusted."""

    def effect(self, key: str) -> Effect | None:
        """The ledger's view of an idempotency key, if any."""

    def claim_effect(self, key: str, run_id: str, call_id: str, tool: str) -> Effect | None:
        """Atomically record the intent of an effect: None when this call now owns the key, else the existing one."""

    def retry_effect(self, key: str, run_id: str, call_id: str) -> None:
        """Record that a person approved running an effect whose outcome is unknown once more."""

    def finish_effect(self, key: str, run_id: str, call_id: str, content: str, value: Any, result_status: str) -> None:
        """Record an outcome with no event (a write that finished after its run stopped waiting for it)."""

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float = LEASE_TTL, *, take_over: bool = False, seq: int | None = None
    ) -> Lease:
        """Take or renew the run's lease; ``RunLocked`` when another owner holds it (or held it: ``take_over``).

        ``seq``: the next seq the caller expects; ``CheckpointError`` when the stored run has moved past it.
        """

    def release_lease(self, run_id: str, owner: str) -> None:
        """Give the lease up (no-op when ``owner`` does not hold it)."""

    def lease(self, run_id: str) -> Lease | None:
        """The run's lease, live or expired, if any."""

    def runs(self, state: str | None = None) -> list[tuple[str, str]]:
        """``(run_id, state)`` of stored runs, most recent first (only those in ``state`` when given)."""


def _check_lease(current: Lease | None, run_id: str, owner: str, take_over: bool, empty: bool = False) -> None:
    """Refuse a lease another owner holds; an expired one only with ``take_over``.

    Or when the run has no stored event: its driver died before writing one, so there is nothing to protect.
    """
    if current is None or current.owner == owner:
        return
    if current.live:
        raise RunLocked(run_id, current.owner, current.expires, expired=False)
    if not take_over and not empty:
        raise RunLocked(run_id, current.owner, current.expires, expired=True)


def _fold_effect(key: str, ops: list[tuple[str, str, str, str, str | None, Any, str | None]]) -> Effect | None:
    """``ops``: (op, run_id, call_id, tool, content, value, result_status) in ledger order."""
    effect: Effect | None = None
    for op, run_id, call_id, tool, content, value, status in ops:
        if op == "claim":
            effect = Effect(key, run_id, call_id, tool, "started")
        elif effect is not None and op == "retry":
            effect = Effect(key, effect.run_id, call_id, effect.tool, "started", attempts=effect.attempts + 1)
        elif effect is not None and op == "done":
            effect = Effect(key, effect.run_id, effect.call_id, effect.tool, "done", content, value, status,
                            effect.attempts)
    return effect


class MemoryStore:
    """The store of a loop given none: events stay in the run, the ledger and leases in this object."""

    def __init__(self) -> None:
        self._events: dict[str, list[BaseEvent]] = {}
        self._ops: dict[str, list[tuple[str, str, str, str, str | None, Any, str | None]]] = {}
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()

    def append(self, event: BaseEvent, *, effect: EffectDone | None = None) -> None:
        """Keep the event (and the effect's outcome)."""
        events = self._events.get(event.run_id)
        if events is None:
            events = self._events.setdefault(event.run_id, [])
        if event.seq != len(events):  # one driver per run (leases), so no lock is needed on this hot path
            raise CheckpointError(f"run {event.run_id!r}: event seq {event.seq} does not follow {len(events) - 1}")
        events.append(event)
        if effect is not None:
            with self._lock:
                self._op(effect.key, "done", event.run_id, "", "", effect.content, effect.value, effect.result_status)

    def load(self, run_id: str) -> list[BaseEvent]:
        """The run's events."""
        if run_id not in self._events:
            raise CheckpointError(f"no run {run_id!r} in this store")
        return list(self._events[run_id])

    def _op(self, key: str, op: str, run_id: str, call_id: str, tool: str, content: str | None = None,
            value: Any = None, status: str | None = None) -> None:
        self._ops.setdefault(key, []).append((op, run_id, call_id, tool, content, value, status))

    def effect(self, key: str) -> Effect | None:
        """The ledger's view of a key."""
        with self._lock:
            return _fold_effect(key, self._ops.get(key, []))

    def claim_effect(self, key: str, run_id: str, call_id: str, tool: str) -> Effect | None:
        """Claim a key: None when claimed now, else the existing effect."""
        with self._lock:
            existing = _fold_effect(key, self._ops.get(key, []))
            if existing is not None:
                return existing
            self._op(key, "claim", run_id, call_id, tool)
            return None

    def retry_effect(self, key: str, run_id: str, call_id: str) -> None:
        """Record an approved retry."""
        with self._lock:
            self._op(key, "retry", run_id, call_id, "")

    def finish_effect(self, key: str, run_id: str, call_id: str, content: str, value: Any, result_status: str) -> None:
        """Record a late outcome."""
        with self._lock:
            self._op(key, "done", run_id, call_id, "", content, value, result_status)

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float = LEASE_TTL, *, take_over: bool = False, seq: int | None = None
    ) -> Lease:
        """Take or renew the run's lease."""
        with self._lock:
            _check_lease(self._leases.get(run_id), run_id, owner, take_over, empty=not self._events.get(run_id))
            stored = len(self._events.get(run_id, []))
            if seq is not None and run_id in self._events and stored > seq:
                raise CheckpointError(f"run {run_id!r} moved on in another driver (it has {stored} events, not {seq})")
            lease = self._leases[run_id] = Lease(run_id, owner, time.time() + ttl)
            return lease

    def release_lease(self, run_id: str, owner: str) -> None:
        """Give the lease up."""
        with self._lock:
            lease = self._leases.get(run_id)
            if lease is not None and lease.owner == owner:
                del self._leases[run_id]

    def lease(self, run_id: str) -> Lease | None:
        """The run's lease, if any."""
        return self._leases.get(run_id)

    def runs(self, state: str | None = None) -> list[tuple[str, str]]:
        """``(run_id, state)`` of the runs held here."""
        out = [(rid, evs[-1].state.value) for rid, evs in self._events.items() if evs]
        return [r for r in reversed(out) if state is None or r[1] == state]


# -- keys ---------------------------------------------------------------------------------------------------


def _checked_key(raw: bytes, source: str) -> bytes:
    key = raw.rstrip(b"\r\n")  # a key file written by `echo` ends with a newline: the newline is not the key
    if len(key) < MIN_KEY_BYTES:
        what = "empty" if not key else f"{len(key)} bytes long"
        raise CheckpointError(
            f"the checkpoint key from {source} is {what}; use at least {MIN_KEY_BYTES} bytes "
            "(for example the output of `python -c 'import secrets; print(secrets.token_hex(32))'`)"
        )
    return key


def _read_key_file(path: Path) -> bytes | None:
    if path.is_dir():
        raise CheckpointError(f"the checkpoint key file {path} is a directory; give the path of a file")
    if not path.exists():
        return None
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise CheckpointError(f"checkpoint key file {path} is readable by others (mode {mode:o}); chmod 600 it")
    return _checked_key(path.read_bytes(), f"key file {path}")


def _new_key_file(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_hex(32).encode())
    return path.read_bytes()


def load_key(key: bytes | str | None, key_file: str | Path | None, *, where: str, recorded: str | None,
             may_create: bool = True) -> tuple[bytes, str]:
    """A store's checkpoint key, checked, and where it came from.

    From the argument, ``AGENTNB_CHECKPOINT_KEY``, or a key file (created, 0600, only for a store that has no key
    yet: ``recorded`` is its stored fingerprint).

    Raises:
        CheckpointError: the key file is missing for a store sealed with a key, the key is too short, the key file
            is a directory or readable by others, or there is no key and none may be made.
    """
    if key is not None:
        raw, source = (key.encode() if isinstance(key, str) else key), "the key argument"
    elif os.environ.get("AGENTNB_CHECKPOINT_KEY"):
        raw, source = os.environ["AGENTNB_CHECKPOINT_KEY"].encode(), "AGENTNB_CHECKPOINT_KEY"
    else:
        path = Path(key_file) if key_file else Path.home() / ".agentnb" / "checkpoint.key"
        found = _read_key_file(path)
        if found is None:
            if recorded is not None:
                raise CheckpointError(
                    f"the checkpoint key file {path} is missing, and {where} holds runs sealed with a key "
                    f"(fingerprint {recorded}). Restore that key file, or set AGENTNB_CHECKPOINT_KEY to the key."
                )
            if not may_create:
                raise CheckpointError(f"no checkpoint key for {where}: give key=, key_file= or set "
                                      "AGENTNB_CHECKPOINT_KEY")
            found = _new_key_file(path)
        raw, source = found, f"key file {path}"
    return _checked_key(raw, source), source


def key_mismatch(where: str, recorded: str, fingerprint: str, source: str) -> CheckpointError:
    """The error for a store opened with another key than the one it was sealed with."""
    return CheckpointError(
        f"{where} was sealed with a different key (fingerprint {recorded}) than the one from {source} "
        f"(fingerprint {fingerprint}); open it with the key it was written with"
    )


def _fingerprint(key: bytes) -> str:
    return hmac.new(key, b"agentnb checkpoint key fingerprint", hashlib.sha256).hexdigest()[:16]


# -- seals -------------------------------------------------------------------------------------------------

_Head = tuple[int, str, int, str]  # head seq, head mac, ledger seq, ledger mac


class Seals:
    """The HMAC chains of a durable store and their verification: one formula for every store.

    Events are chained per run (each seal covers the previous one), ledger operations likewise, and the run's
    head seals both chain ends together. :class:`SqliteStore` and ``PostgresStore`` use this one class, so a run
    moves between them unchanged.
    """

    __slots__ = ("key",)

    def __init__(self, key: bytes) -> None:
        self.key = key

    def mac(self, *parts: str) -> str:
        """HMAC-SHA256 of the parts (joined with a unit separator), hex."""
        return hmac.new(self.key, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()

    def event(self, prev: str, run_id: str, seq: int, data: str) -> str:
        """The seal of one event, chained over the previous event's."""
        return self.mac(prev, run_id, str(seq), data)

    def head(self, run_id: str, head: _Head) -> str:
        """The seal of a run's head: the last event's seq and seal, the last ledger entry's number and seal."""
        return self.mac("head", run_id, str(head[0]), head[1], str(head[2]), head[3])

    def ledger(self, run_id: str, lseq: int, op: str, key: str, call_id: str, tool: str, content: str | None,
               value: str | None, status: str | None, prev: str) -> str:
        """The seal of one ledger operation, every column covered, chained over the previous one's."""
        absent = "\x00"  # None and "" seal differently
        return self.mac("ledger", run_id, str(lseq), op, key, call_id, tool, absent if content is None else content,
                        absent if value is None else value, status or "", prev)

    def verify(self, run_id: str, head: _Head, rows: list[Any], ledger: list[Any]) -> list[BaseEvent]:
        """The run's events from stored ``(seq, data, mac)`` rows, after checking both chains against the head.

        ``ledger`` holds ``(lseq, op, key, call_id, tool, content, value, result_status, prev, mac)`` rows.

        Raises:
            CheckpointError: an event or ledger row is missing, changed, reordered or unreadable.
        """
        events: list[BaseEvent] = []
        prev = ""
        for expected, (seq, data, mac) in enumerate(rows):
            if seq != expected:
                raise CheckpointError(f"run {run_id!r}: event {expected} is missing from the checkpoint")
            if not hmac.compare_digest(mac, self.event(prev, run_id, seq, data)):
                raise CheckpointError(f"run {run_id!r}: event {seq} was changed after it was written (seal mismatch)")
            try:
                events.append(event_from_json(data))
            except Exception as exc:
                raise CheckpointError(f"run {run_id!r}: event {seq} cannot be read: {exc}") from None
            prev = mac
        if len(rows) != head[0] + 1 or prev != head[1]:
            raise CheckpointError(
                f"run {run_id!r}: the checkpoint is truncated ({len(rows)} events stored, the head says {head[0] + 1})"
            )
        prev = ""
        for expected, (lseq, op, key, call_id, tool, content, value, status, row_prev, mac) in enumerate(ledger):
            if lseq != expected:
                raise CheckpointError(f"run {run_id!r}: effect ledger entry {expected} is missing")
            good = self.ledger(run_id, lseq, op, key, call_id, tool, content, value, status, row_prev)
            if row_prev != prev or not hmac.compare_digest(mac, good):
                raise CheckpointError(
                    f"run {run_id!r}: effect ledger entry {lseq} ({op} {key!r}) was changed after it was written"
                )
            prev = mac
        if len(ledger) != head[2] + 1 or prev != head[3]:
            raise CheckpointError(
                f"run {run_id!r}: the effect ledger is truncated ({len(ledger)} entries stored, the head says "
                f"{head[2] + 1}): an effect's record was deleted"
            )
        return events

    def effect(self, key: str, rows: Iterable[Any]) -> Effect | None:
        """The ledger's view of a key, every row's own seal checked.

        ``rows``: ``(run_id, lseq, op, key, call_id, tool, content, value, result_status, prev, mac)`` in order.
        """
        ops = []
        for run_id, lseq, op, k, call_id, tool, content, value, status, prev, mac in rows:
            if not hmac.compare_digest(mac, self.ledger(run_id, lseq, op, k, call_id, tool, content, value, status,
                                                        prev)):
                raise CheckpointError(f"effect ledger entry {key!r} was changed after it was written (seal mismatch)")
            ops.append((op, run_id, call_id, tool, content, json.loads(value) if value is not None else None, status))
        return _fold_effect(key, ops)


# -- SQLite -------------------------------------------------------------------------------------------------

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, mac TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, head_seq INTEGER NOT NULL, head_mac TEXT NOT NULL,
    ledger_seq INTEGER NOT NULL, ledger_mac TEXT NOT NULL, seal TEXT NOT NULL,
    state TEXT NOT NULL, updated REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger (
    run_id TEXT NOT NULL, lseq INTEGER NOT NULL, op TEXT NOT NULL, key TEXT NOT NULL, call_id TEXT NOT NULL,
    tool TEXT NOT NULL, content TEXT, value TEXT, result_status TEXT, ts REAL NOT NULL, prev TEXT NOT NULL,
    mac TEXT NOT NULL,
    PRIMARY KEY (run_id, lseq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS ledger_claims ON ledger (key) WHERE op = 'claim';
CREATE INDEX IF NOT EXISTS ledger_keys ON ledger (key);
CREATE TABLE IF NOT EXISTS leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL) WITHOUT ROWID;
"""

class SqliteStore:
    """Durable checkpoints in one SQLite file (WAL): sealed events, a sealed effect ledger, run leases.

    Args:
        path: the database file (created if missing).
        key: the HMAC key (at least 8 bytes); default ``AGENTNB_CHECKPOINT_KEY`` or the key file.
        key_file: where to find or create the key (0600). A key file is created only for a new store.
        synchronous: SQLite's ``synchronous`` pragma: ``NORMAL`` (survives a killed process) or ``FULL``.
        timeout: seconds to wait for another connection's write lock before a ``CheckpointError``.
        readonly: open for reading only (works on a read-only mount); appends raise ``CheckpointError``.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> store = anb.SqliteStore(os.path.join(tempfile.mkdtemp(), "runs.db"), key="a-test-key")
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
        >>> run = loop.start("Refund order 42").run()
        >>> again = anb.Run.resume(run.run_id, loop=loop, store=store)
        >>> again.state.value, len(again.events) == len(run.events)
        ('WAITING_APPROVAL', True)
    """

    def __init__(
        self, path: str | Path, *, key: bytes | str | None = None, key_file: str | Path | None = None,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL", timeout: float = 5.0, readonly: bool = False,
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.Lock()
        try:
            if readonly:
                if not self.path.exists():
                    raise CheckpointError(f"no store at {self.path} to open read-only")
                uri = f"file:{self.path}?mode=ro"
                try:
                    self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None,
                                               timeout=timeout)
                    self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                except sqlite3.OperationalError:  # a WAL file on a read-only mount: read it as immutable
                    self._db = sqlite3.connect(f"file:{self.path}?immutable=1", uri=True, check_same_thread=False,
                                               isolation_level=None)
            else:
                self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=timeout)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(f"PRAGMA synchronous={synchronous}")
                self._migrate()
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the store {self.path}: {exc}") from exc
        self._seals = Seals(self._resolve_key(key, key_file))
        self._heads: dict[str, _Head] = {}

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def _migrate(self) -> None:
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "effects" in tables and "ledger" not in tables:
            raise CheckpointError(
                f"{self.path} was written by agentnb 0.1 (schema 1, an unsealed effect ledger); this version keeps "
                f"a sealed ledger (schema {SCHEMA_VERSION}) and cannot trust the old one. Finish or export its runs "
                "with agentnb 0.1, or start a new store file."
            )
        self._db.executescript(_SCHEMA)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _meta(self, name: str) -> str | None:
        try:
            row = self._db.execute("SELECT value FROM meta WHERE name=?", (name,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return None if row is None else str(row[0])

    def _resolve_key(self, key: bytes | str | None, key_file: str | Path | None) -> bytes:
        recorded = self._meta("key_fingerprint")
        checked, source = load_key(key, key_file, where=str(self.path), recorded=recorded,
                                   may_create=not self.readonly)
        fingerprint = _fingerprint(checked)
        if recorded is None and not self.readonly:
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('key_fingerprint', ?)", (fingerprint,))
        elif recorded is not None and recorded != fingerprint:
            raise key_mismatch(str(self.path), recorded, fingerprint, source)
        return checked

    def _head(self, run_id: str) -> _Head:
        head = self._heads.get(run_id)
        if head is None:
            row = self._db.execute(
                "SELECT head_seq, head_mac, ledger_seq, ledger_mac, seal FROM runs WHERE run_id=?", (run_id,)
            ).fetchone()
            if row is None:
                head = (-1, "", -1, "")
            else:
                head = (int(row[0]), str(row[1]), int(row[2]), str(row[3]))
                if not hmac.compare_digest(row[4], self._seals.head(run_id, head)):
                    raise CheckpointError(f"run {run_id!r}: the checkpoint's head seal does not match")
            self._heads[run_id] = head
        return head

    def _write(self, run_id: str, what: str, body: Any) -> Any:
        """Run ``body(db)`` in one IMMEDIATE transaction; any fault rolls back and raises ``CheckpointError``."""
        if self.readonly:
            raise CheckpointError(f"{self.path} is open read-only: cannot {what}")
        db = self._db
        with self._lock:
            try:
                db.execute("BEGIN IMMEDIATE")
                result = body(db)
                db.execute("COMMIT")
                return result
            except BaseException as exc:
                self._heads.pop(run_id, None)  # re-read the head next time: the transaction did not happen
                if db.in_transaction:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error:  # the real cause is `exc`: do not mask it
                        pass
                if isinstance(exc, CheckpointError | RunLocked):
                    raise
                if isinstance(exc, sqlite3.Error):
                    raise CheckpointError(f"run {run_id!r}: could not {what}: {exc}") from exc
                raise

    def _put_head(self, db: sqlite3.Connection, run_id: str, head: _Head, state: str | None) -> None:
        seal = self._seals.head(run_id, head)
        if state is None:
            cur = db.execute(
                "UPDATE runs SET head_seq=?, head_mac=?, ledger_seq=?, ledger_mac=?, seal=?, updated=? WHERE run_id=?",
                (*head, seal, time.time(), run_id),
            )
            if cur.rowcount != 1:
                raise CheckpointError(f"run {run_id!r} has no stored events: cannot record an effect for it")
        else:
            db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
                "head_seq=excluded.head_seq, head_mac=excluded.head_mac, ledger_seq=excluded.ledger_seq, "
                "ledger_mac=excluded.ledger_mac, seal=excluded.seal, state=excluded.state, updated=excluded.updated",
                (run_id, *head, seal, state, time.time()),
            )

    def _ledger_op(self, db: sqlite3.Connection, head: _Head, run_id: str, op: str, key: str, call_id: str,
                   tool: str, content: str | None = None, value: str | None = None,
                   status: str | None = None) -> _Head:
        lseq, prev = head[2] + 1, head[3]
        mac = self._seals.ledger(run_id, lseq, op, key, call_id, tool, content, value, status, prev)
        db.execute(
            "INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, lseq, op, key, call_id, tool, content, value, status, time.time(), prev, mac),
        )
        return (head[0], head[1], lseq, mac)

    # -- events ---------------------------------------------------------------------------------------

    def append(self, event: BaseEvent, *, effect: EffectDone | None = None) -> None:
        """Seal and store one event, the effect's outcome it reports, and the run's new head, in one transaction."""
        data = event_to_json(event)
        run_id = event.run_id

        def body(db: sqlite3.Connection) -> _Head:
            head = self._head(run_id)
            if event.seq != head[0] + 1:
                raise CheckpointError(f"run {run_id!r}: event seq {event.seq} does not follow {head[0]}")
            mac = self._seals.event(head[1], run_id, event.seq, data)
            db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (run_id, event.seq, event.type, data, mac))
            head = (event.seq, mac, head[2], head[3])
            if effect is not None:
                head = self._ledger_op(db, head, run_id, "done", effect.key, getattr(event, "call_id", ""), "",
                                       effect.content, _encode(effect.value), effect.result_status)
            self._put_head(db, run_id, head, event.state.value)
            return head

        self._heads[run_id] = self._write(run_id, f"write event {event.seq} ({event.type})", body)

    def load(self, run_id: str) -> list[BaseEvent]:
        """All events of a run after checking every seal, the ledger's included; raises :class:`CheckpointError`."""
        with self._lock:
            self._heads.pop(run_id, None)
            head = self._head(run_id)
            if head[0] < 0:
                raise CheckpointError(f"no run {run_id!r} in {self.path}")
            rows = self._db.execute(
                "SELECT seq, data, mac FROM events WHERE run_id=? ORDER BY seq", (run_id,)
            ).fetchall()
            ledger = self._db.execute(
                "SELECT lseq, op, key, call_id, tool, content, value, result_status, prev, mac FROM ledger "
                "WHERE run_id=? ORDER BY lseq", (run_id,)
            ).fetchall()
        return self._seals.verify(run_id, head, rows, ledger)

    def runs(self, state: str | None = None) -> list[tuple[str, str]]:
        """``(run_id, state)`` of stored runs, most recent first (only those in ``state`` when given)."""
        with self._lock:
            if state is None:
                rows = self._db.execute("SELECT run_id, state FROM runs ORDER BY updated DESC").fetchall()
            else:
                rows = self._db.execute(
                    "SELECT run_id, state FROM runs WHERE state=? ORDER BY updated DESC", (state,)
                ).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    # -- effect ledger --------------------------------------------------------------------------------

    def effect(self, key: str) -> Effect | None:
        """The ledger's view of a key (every row's seal checked)."""
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT run_id, lseq, op, key, call_id, tool, content, value, result_status, prev, mac FROM ledger "
                    "WHERE key=? ORDER BY lseq", (key,)
                ).fetchall()
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot read the effect ledger for {key!r}: {exc}") from exc
        return self._seals.effect(key, rows)

    def claim_effect(self, key: str, run_id: str, call_id: str, tool: str) -> Effect | None:
        """Claim a key atomically (a unique index on claims): None when claimed now, else the existing effect."""

        def body(db: sqlite3.Connection) -> _Head | None:
            if db.execute("SELECT 1 FROM ledger WHERE key=? AND op='claim'", (key,)).fetchone() is not None:
                return None
            head = self._ledger_op(db, self._head(run_id), run_id, "claim", key, call_id, tool)
            self._put_head(db, run_id, head, None)
            return head

        head = self._write(run_id, f"claim effect {key!r}", body)
        if head is None:
            return self.effect(key)
        self._heads[run_id] = head
        return None

    def retry_effect(self, key: str, run_id: str, call_id: str) -> None:
        """Record an approved retry of an effect whose outcome is unknown."""

        def body(db: sqlite3.Connection) -> _Head:
            head = self._ledger_op(db, self._head(run_id), run_id, "retry", key, call_id, "")
            self._put_head(db, run_id, head, None)
            return head

        self._heads[run_id] = self._write(run_id, f"record a retry of {key!r}", body)

    def finish_effect(self, key: str, run_id: str, call_id: str, content: str, value: Any, result_status: str) -> None:
        """Record a late outcome (no event reports it: the run stopped waiting for the call)."""

        def body(db: sqlite3.Connection) -> _Head:
            head = self._ledger_op(db, self._head(run_id), run_id, "done", key, call_id, "", content, _encode(value),
                                   result_status)
            self._put_head(db, run_id, head, None)
            return head

        self._heads[run_id] = self._write(run_id, f"record the late outcome of {key!r}", body)

    # -- leases ---------------------------------------------------------------------------------------

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float = LEASE_TTL, *, take_over: bool = False, seq: int | None = None
    ) -> Lease:
        """Take or renew the run's lease (atomically); see :class:`Store`."""

        def body(db: sqlite3.Connection) -> Lease:
            row = db.execute("SELECT owner, expires FROM leases WHERE run_id=?", (run_id,)).fetchone()
            self._heads.pop(run_id, None)
            stored = self._head(run_id)[0] + 1
            _check_lease(None if row is None else Lease(run_id, row[0], row[1]), run_id, owner, take_over,
                         empty=stored == 0)
            if seq is not None:
                if stored > seq:
                    raise CheckpointError(
                        f"run {run_id!r} moved on in another driver (it has {stored} events, this one {seq})"
                    )
            lease = Lease(run_id, owner, time.time() + ttl)
            db.execute(
                "INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET owner=excluded.owner, "
                "expires=excluded.expires", (run_id, owner, lease.expires),
            )
            return lease

        lease: Lease = self._write(run_id, "take the run's lease", body)
        return lease

    def release_lease(self, run_id: str, owner: str) -> None:
        """Give the lease up (no-op when ``owner`` does not hold it)."""
        self._write(run_id, "release the run's lease",
                    lambda db: db.execute("DELETE FROM leases WHERE run_id=? AND owner=?", (run_id, owner)))

    def lease(self, run_id: str) -> Lease | None:
        """The run's lease, live or expired, if any."""
        with self._lock:
            row = self._db.execute("SELECT owner, expires FROM leases WHERE run_id=?", (run_id,)).fetchone()
        return None if row is None else Lease(run_id, str(row[0]), float(row[1]))


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def as_store(store: Store | str | Path | None) -> Store:
    """A store from a store, a path (an :class:`SqliteStore`), a ``postgresql://`` DSN, or None (in memory)."""
    if store is None:
        return MemoryStore()
    if isinstance(store, str) and store.startswith(("postgresql://", "postgres://")):
        from .pgstore import PostgresStore

        return PostgresStore(store)
    if isinstance(store, str | Path):
        return SqliteStore(store)
    return store
