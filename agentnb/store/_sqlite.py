"""The durable default store: one SQLite file in WAL mode, with sealed events, a sealed ledger and leases.

Every write is one ``BEGIN IMMEDIATE`` transaction (an event, the effect outcome it reports and the run's new
head together); any fault rolls it back and raises :class:`~agentnb.CheckpointError`. A claim is an insert
that a unique index on claims refuses when the key exists, so two processes can never both own one effect.

Durability: commits use WAL with ``synchronous=NORMAL``, which survives the process being killed at any
point (the crash tests in ``tests/test_durable.py`` and ``tests/test_effects.py`` do exactly that) but may lose
the last commits on a power failure; pass ``synchronous="FULL"`` for that too.
"""

from __future__ import annotations

import hmac
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from .._outcomes import Effect, EffectDone
from ..events import BaseEvent, event_to_json
from ..exceptions import CheckpointError, RunLocked, RunNotFound
from ._moves import Guard, Mark, RunRows, mark_name
from ._protocol import LEASE_TTL, Lease, check_lease
from ._seals import Head, Seals, encode_value, fingerprint_of, key_mismatch, load_key

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
        self._heads: dict[str, Head] = {}
        if not readonly:
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('store_id', ?)", (uuid.uuid4().hex,))
        self.store_id: str = self._meta("store_id") or ""
        """This store's id: runs started here record it, so a copy elsewhere is known for one (agentnb.move_run)."""
        self._guard = Guard(self.store_id, repr(self))
        self._writes = 0
        """Transactions this object committed (``PRAGMA data_version`` moves only for other connections')."""
        self._any_seen: tuple[int, str] | None = None
        """The change token the last wait for any run saw (the next one starts from it)."""

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
        fingerprint = fingerprint_of(checked)
        if recorded is None and not self.readonly:
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('key_fingerprint', ?)", (fingerprint,))
        elif recorded is not None and recorded != fingerprint:
            raise key_mismatch(str(self.path), recorded, fingerprint, source)
        return checked

    def _head(self, run_id: str) -> Head:
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
                self._writes += 1
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

    def _put_head(self, db: sqlite3.Connection, run_id: str, head: Head, state: str | None) -> None:
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

    def _ledger_op(self, db: sqlite3.Connection, head: Head, run_id: str, op: str, key: str, call_id: str,
                   tool: str, content: str | None = None, value: str | None = None,
                   status: str | None = None) -> Head:
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

        def body(db: sqlite3.Connection) -> Head:
            head = self._head(run_id)
            if event.seq != head[0] + 1:
                raise CheckpointError(f"run {run_id!r}: event seq {event.seq} does not follow {head[0]}")
            mac = self._seals.event(head[1], run_id, event.seq, data)
            db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (run_id, event.seq, event.type, data, mac))
            head = (event.seq, mac, head[2], head[3])
            if effect is not None:
                head = self._ledger_op(db, head, run_id, "done", effect.key, getattr(event, "call_id", ""), "",
                                       effect.content, encode_value(effect.value), effect.result_status)
            self._put_head(db, run_id, head, event.state.value)
            return head

        self._heads[run_id] = self._write(run_id, f"write event {event.seq} ({event.type})", body)

    def load(self, run_id: str) -> list[BaseEvent]:
        """All events of a run after checking every seal, the ledger's included; raises :class:`CheckpointError`."""
        with self._lock:
            self._heads.pop(run_id, None)
            head = self._head(run_id)
            if head[0] < 0:
                raise RunNotFound(f"no run {run_id!r} in {self.path}")
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

    def wait_for_change(self, run_id: str | None = None, *, seen: int | None = None, timeout: float | None = None,
                        interval: float = 0.5) -> tuple[str, str] | None:
        """Block until a run gets a new event; return ``(run_id, state)``, or None when ``timeout`` passed first.

        Polled with a bounded cost: one small query every ``interval`` seconds, whatever the store holds --
        ``PRAGMA data_version`` (it moves when another connection commits) beside this object's own commits for
        any run, the run's head row for one. ``run_id`` and ``seen`` as in ``PostgresStore.wait_for_change``. For
        any run, a change made since this object's previous wait counts (nothing is lost between two waits).
        """
        def token() -> tuple[int, str]:
            with self._lock:
                try:
                    if run_id is not None:
                        row = self._db.execute("SELECT head_seq, state FROM runs WHERE run_id=?", (run_id,)).fetchone()
                        return (-1, "") if row is None else (int(row[0]), str(row[1]))
                    return int(self._db.execute("PRAGMA data_version").fetchone()[0]), str(self._writes)
                except sqlite3.Error as exc:
                    raise CheckpointError(f"could not wait for changes in {self.path}: {exc}") from exc

        now = token()
        if run_id is not None and seen is not None and now[0] + 1 > seen:
            return run_id, now[1]
        # for any run, the view of this object's last wait is the baseline: a change between two waits is news
        start = now if run_id is not None or self._any_seen is None else self._any_seen
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if now != start:
                if run_id is not None:
                    return run_id, now[1]
                self._any_seen = now
                latest = self.runs()
                return latest[0] if latest else None
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if run_id is None:
                    self._any_seen = now
                return None
            time.sleep(interval if left is None else min(interval, left))
            now = token()

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

        def body(db: sqlite3.Connection) -> Head | None:
            if db.execute("SELECT 1 FROM ledger WHERE key=? AND op='claim'", (key,)).fetchone() is not None:
                return None
            self._guard.check(run_id, key, self._first_row, self._get_mark)
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

        def body(db: sqlite3.Connection) -> Head:
            head = self._ledger_op(db, self._head(run_id), run_id, "retry", key, call_id, "")
            self._put_head(db, run_id, head, None)
            return head

        self._heads[run_id] = self._write(run_id, f"record a retry of {key!r}", body)

    def finish_effect(self, key: str, run_id: str, call_id: str, content: str, value: Any, result_status: str) -> None:
        """Record a late outcome (no event reports it: the run stopped waiting for the call)."""

        def body(db: sqlite3.Connection) -> Head:
            head = self._ledger_op(db, self._head(run_id), run_id, "done", key, call_id, "", content,
                                   encode_value(value), result_status)
            self._put_head(db, run_id, head, None)
            return head

        self._heads[run_id] = self._write(run_id, f"record the late outcome of {key!r}", body)

    # -- moves (agentnb.store._moves) -------------------------------------------------------------------

    def _first_row(self, run_id: str) -> str | None:  # inside a transaction (the lock held)
        row = self._db.execute("SELECT data FROM events WHERE run_id=? AND seq=0", (run_id,)).fetchone()
        return None if row is None else str(row[0])

    def _first(self, run_id: str) -> str | None:
        with self._lock:
            return self._first_row(run_id)

    def _get_mark(self, operation: str) -> Mark | None:
        raw = self._meta(mark_name(operation))
        return None if raw is None else Mark.decode(self._seals, operation, raw)

    def _put_mark(self, operation: str, mark: Mark) -> None:
        self._write("", f"mark operation {operation!r} moved", lambda db: db.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", (mark_name(operation), mark.encode(self._seals, operation))))

    def _export(self, run_id: str) -> RunRows:
        with self._lock:
            head = self._db.execute("SELECT head_seq, head_mac, ledger_seq, ledger_mac, seal, state, updated FROM runs "
                                    "WHERE run_id=?", (run_id,)).fetchone()
            if head is None:
                raise RunNotFound(f"no run {run_id!r} in {self.path}")
            events = self._db.execute("SELECT seq, type, data, mac FROM events WHERE run_id=? ORDER BY seq",
                                      (run_id,)).fetchall()
            ledger = self._db.execute("SELECT lseq, op, key, call_id, tool, content, value, result_status, ts, prev, "
                                      "mac FROM ledger WHERE run_id=? ORDER BY lseq", (run_id,)).fetchall()
        return RunRows(run_id, events, ledger, tuple(head))

    def _import(self, rows: list[RunRows], operation: str, mark: Mark) -> None:
        """Copy runs in verbatim and mark their operation moved in, in one transaction.

        A run already here with the same head is skipped: a move interrupted after this step is finished by
        calling it again.
        """

        def body(db: sqlite3.Connection) -> None:
            for run in rows:
                here = db.execute("SELECT head_seq, head_mac, ledger_seq, ledger_mac FROM runs WHERE run_id=?",
                                  (run.run_id,)).fetchone()
                if here is not None:
                    if tuple(here) != run.head[:4]:
                        raise CheckpointError(f"run {run.run_id!r} is already in {self.path} with other events: "
                                              "refusing to overwrite it")
                    continue
                db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", [(run.run_id, *e) for e in run.events])
                db.executemany("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               [(run.run_id, *op) for op in run.ledger])
                db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (run.run_id, *run.head))
            raw = db.execute("SELECT value FROM meta WHERE name=?", (mark_name(operation),)).fetchone()
            old = None if raw is None else Mark.decode(self._seals, operation, str(raw[0]))
            keys = sorted(set(mark.keys) | set(old.keys if old else []))
            new = Mark(came_from=mark.came_from, keys=keys, at=mark.at)
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (mark_name(operation), new.encode(self._seals,
                                                                                                     operation)))

        self._write("", f"move in the runs of operation {operation!r}", body)
        for run in rows:
            self._heads.pop(run.run_id, None)

    # -- leases ---------------------------------------------------------------------------------------

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float = LEASE_TTL, *, take_over: bool = False, seq: int | None = None
    ) -> Lease:
        """Take or renew the run's lease (atomically); see :class:`Store`."""

        def body(db: sqlite3.Connection) -> Lease:
            row = db.execute("SELECT owner, expires FROM leases WHERE run_id=?", (run_id,)).fetchone()
            self._heads.pop(run_id, None)
            stored = self._head(run_id)[0] + 1
            check_lease(None if row is None else Lease(run_id, row[0], row[1]), run_id, owner, take_over,
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
