"""A PostgreSQL store: the :class:`~agentnb.store.Store` of a team, shared by notebooks and workers on many machines.

Same tables, same seals and same guarantees as :class:`~agentnb.SqliteStore` (a run copied row by row from
one to the other loads in both: the HMACs cover the same bytes). What SQLite gets from ``BEGIN IMMEDIATE`` (one
writer at a time), PostgreSQL gets per run, so runs on many workers write at once:

- **an event** is one statement (one round trip, in autocommit): an ``INSERT ... ON CONFLICT DO UPDATE`` of
  the run's head that only succeeds if the head is the one this store last saw (a compare-and-set under the
  row's lock), and the inserts of the event and of the effect outcome it reports, made from that statement's
  ``RETURNING`` rows, so they happen together or not at all. When another process moved the run, nothing is
  written; the store reads the head again and either retries (only the ledger moved) or refuses the event
  ("does not follow"), exactly like SQLite.
- **ledger operations** (claim, retry, late outcome) lock the run's head row (``SELECT ... FOR UPDATE``) for one
  short transaction. A claim is ``INSERT ... ON CONFLICT DO NOTHING`` on a partial unique index (one claim per
  idempotency key), so two workers racing for one effect get exactly one winner, across runs too.
- **durability**: events commit with ``synchronous_commit=off`` by default (the analogue of SQLite's
  ``synchronous=NORMAL``: no client crash loses anything; a server crash may lose the last moment of events,
  never a torn one), while effect claims and approved retries always wait for the disk, because the tool runs
  right after them. A lost event makes the run ask the ledger again on resume; a lost claim could not.
- **leases** are taken under a transaction-scoped advisory lock on the run, against the *server's* clock (one
  clock for every worker, whatever their own clocks say).
- **loads** read the head, the events and the ledger in one ``REPEATABLE READ`` snapshot and check every seal.

Every committed event also sends ``NOTIFY`` (in the same transaction, so it is delivered on commit and only
then): :meth:`PostgresStore.wait_for_change` blocks on ``LISTEN`` until a run changes, which is how a notebook
sees an approval given in another process without polling.

The schema lives in its own PostgreSQL schema (``agentnb`` unless you say otherwise) with a
``schema_version`` table; opening a store creates or migrates it under an advisory lock (so ten workers
starting at once migrate once), and refuses a database written by a newer agentnb.
"""

from __future__ import annotations

import hmac
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._outcomes import Effect, EffectDone
from ..events import BaseEvent, event_to_json
from ..exceptions import CheckpointError, RunLocked, RunNotFound, StoreUnavailable
from ._moves import Guard, Mark, RunRows, mark_name
from ._protocol import LEASE_TTL, Lease
from ._seals import Head, Seals, encode_value, fingerprint_of, key_mismatch, load_key

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

_NO_HEAD: Head = (-1, "", -1, "")

_MIGRATIONS: list[str] = [
    # 1: the first schema (the same tables and columns as SqliteStore's schema 2, plus a global order of the
    # ledger so one key's operations from several runs fold in the order they committed)
    """
    CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, mac TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, head_seq INTEGER NOT NULL, head_mac TEXT NOT NULL,
        ledger_seq INTEGER NOT NULL, ledger_mac TEXT NOT NULL, seal TEXT NOT NULL,
        state TEXT NOT NULL, updated DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX runs_by_state ON runs (state, updated DESC);
    CREATE TABLE ledger (
        gid BIGINT GENERATED ALWAYS AS IDENTITY,
        run_id TEXT NOT NULL, lseq INTEGER NOT NULL, op TEXT NOT NULL, key TEXT NOT NULL, call_id TEXT NOT NULL,
        tool TEXT NOT NULL, content TEXT, value TEXT, result_status TEXT, ts DOUBLE PRECISION NOT NULL,
        prev TEXT NOT NULL, mac TEXT NOT NULL,
        PRIMARY KEY (run_id, lseq)
    );
    CREATE UNIQUE INDEX ledger_claims ON ledger (key) WHERE op = 'claim';
    CREATE INDEX ledger_keys ON ledger (key, gid);
    CREATE TABLE leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL);
    """,
]
SCHEMA_VERSION = len(_MIGRATIONS)

_APPEND = """
WITH head AS (
    INSERT INTO runs AS r VALUES (%(run)s, %(seq)s, %(mac)s, %(lseq)s, %(lmac)s, %(seal)s, %(state)s, %(now)s)
    ON CONFLICT (run_id) DO UPDATE SET head_seq = excluded.head_seq, head_mac = excluded.head_mac,
        ledger_seq = excluded.ledger_seq, ledger_mac = excluded.ledger_mac, seal = excluded.seal,
        state = excluded.state, updated = excluded.updated
    WHERE r.head_seq = %(pseq)s AND r.head_mac = %(pmac)s AND r.ledger_seq = %(plseq)s AND r.ledger_mac = %(plmac)s
    RETURNING 1
), event AS (
    INSERT INTO events (run_id, seq, type, data, mac)
    SELECT %(run)s, %(seq)s, %(type)s, %(data)s, %(mac)s FROM head
), outcome AS (
    INSERT INTO ledger (run_id, lseq, op, key, call_id, tool, content, value, result_status, ts, prev, mac)
    SELECT %(run)s, %(lseq)s, 'done', %(key)s, %(call)s, '', %(content)s, %(value)s, %(status)s, %(now)s,
           %(plmac)s, %(lmac)s
    FROM head WHERE %(effect)s
)
SELECT pg_notify(%(channel)s, %(payload)s) FROM head
"""

_LEDGER_COLUMNS = "run_id, lseq, op, key, call_id, tool, content, value, result_status, ts, prev, mac"


class PostgresStore:
    """Durable checkpoints in PostgreSQL, shared by every process that opens the same database and key.

    Args:
        dsn: a libpq connection string (``postgresql://user:password@host:5432/db`` or ``host=... dbname=...``).
        key: the HMAC key (at least 8 bytes); default ``AGENTNB_CHECKPOINT_KEY`` or the key file. Every
            process that opens the store needs the same key: the database remembers its fingerprint.
        key_file: where to find or create the key (0600). A key file is created only for a new store.
        schema: the PostgreSQL schema holding the tables (created if missing).
        pool_size: connections kept open (threads of one process share them; one is used per operation).
        timeout: seconds to wait for a connection or a lock before a ``CheckpointError``.
        synchronous_commit: PostgreSQL's setting for events. ``off`` (like SqliteStore's ``NORMAL``): a commit
            returns before the server flushes it to disk, so any client may be killed at any point and nothing
            is lost, but a crash of the *server* (or a power failure) may lose its last fraction of a second
            of events. ``on`` waits for the flush (about 4 ms per event on this project's CI disks instead of
            0.3 ms). Effect claims and retries are always flushed before the tool runs, whatever this says: a
            lost claim could let a side effect run twice, a lost event can not (see :mod:`agentnb.store`).

    Example:
        >>> import agentnb as anb, os
        >>> dsn = os.environ.get("AGENTNB_PG_DSN")
        >>> if dsn:  # a server started with `make pg`
        ...     store = anb.PostgresStore(dsn, key="a-test-key", schema="doctest")
        ...     loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"),
        ...                     store=store)
        ...     run = loop.start("Refund order 42").run()
        ...     assert (run.run_id, "WAITING_APPROVAL") in store.runs(state="WAITING_APPROVAL")
    """

    def __init__(
        self, dsn: str, *, key: bytes | str | None = None, key_file: str | Path | None = None,
        schema: str = "agentnb", pool_size: int = 4, timeout: float = 10.0,
        synchronous_commit: Literal["on", "off"] = "off",
    ) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("PostgresStore needs psycopg 3: pip install 'agentnb[postgres]'") from exc
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise CheckpointError(f"schema {schema!r} is not a plain lower-case PostgreSQL name ([a-z_][a-z0-9_]*)")
        self.dsn = dsn
        self.schema = schema
        self.channel = f"agentnb_{schema}"
        self._args = (key, key_file, pool_size, timeout, synchronous_commit)
        self._timeout = timeout
        self._heads: dict[str, Head] = {}
        self._lock = threading.Lock()
        self._listener: psycopg.Connection[Any] | None = None
        self._listen_lock = threading.Lock()
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, int(timeout))) as conn:
                self._migrate(conn)
                self._seals = Seals(self._resolve_key(conn, key, key_file))
                conn.execute(f"INSERT INTO {schema}.meta VALUES ('store_id', %s) ON CONFLICT DO NOTHING",
                             (uuid.uuid4().hex,))
                got = conn.execute(f"SELECT value FROM {schema}.meta WHERE name = 'store_id'").fetchone()
                self.store_id: str = str(got[0]) if got else ""
                """This store's id: runs started here record it, so a copy elsewhere is known (agentnb.move_run)."""
        except psycopg.Error as exc:
            raise CheckpointError(f"cannot open the store {self!r}: {exc}") from exc
        self._guard = Guard(self.store_id, repr(self))

        def configure(conn: psycopg.Connection[Any]) -> None:
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(f"SET lock_timeout = {int(timeout * 1000)}")
            conn.execute("SET synchronous_commit = " + ("on" if synchronous_commit == "on" else "off"))

        self._pool: ConnectionPool[Any] = ConnectionPool(
            dsn, min_size=1, max_size=max(1, pool_size), kwargs={"autocommit": True}, configure=configure,
            timeout=timeout, open=False, name=f"agentnb-{schema}",
        )
        self._pool.open(wait=False)

    def __repr__(self) -> str:
        # never show a password that the DSN may hold
        shown = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", self.dsn)
        shown = re.sub(r"password=\S+", "password=***", shown)
        return f"PostgresStore({shown!r}, schema={self.schema!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Workers of a Dask cluster get a store of their own (connections do not travel). The key travels only
        # when it was given as an argument; otherwise each worker resolves it (environment or key file) itself.
        key, key_file, pool_size, timeout, synchronous_commit = self._args
        return (_reopen, (self.dsn, key, key_file, self.schema, pool_size, timeout, synchronous_commit))

    def close(self) -> None:
        """Close the connections."""
        self._pool.close()
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    # -- schema and key -------------------------------------------------------------------------------

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            # one migrator at a time per schema: ten workers starting together create the tables once
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"agentnb schema {self.schema}",))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            conn.execute(f"SET LOCAL search_path TO {self.schema}")
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                         "applied TIMESTAMPTZ NOT NULL DEFAULT now())")
            row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise CheckpointError(
                    f"schema {self.schema!r} was written by a newer agentnb (schema version {current}; this one "
                    f"knows up to {SCHEMA_VERSION}): upgrade agentnb to open it"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                conn.execute(_MIGRATIONS[version - 1].encode())
                conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))

    def _resolve_key(self, conn: psycopg.Connection[Any], key: bytes | str | None,
                     key_file: str | Path | None) -> bytes:
        table = f"{self.schema}.meta"
        got = conn.execute(f"SELECT value FROM {table} WHERE name = 'key_fingerprint'").fetchone()
        recorded = None if got is None else str(got[0])
        checked, source = load_key(key, key_file, where=repr(self), recorded=recorded)
        fingerprint = fingerprint_of(checked)
        if recorded is None:  # two first openers race: the first fingerprint wins, the other is compared to it
            conn.execute(f"INSERT INTO {table} VALUES ('key_fingerprint', %s) ON CONFLICT DO NOTHING", (fingerprint,))
            got = conn.execute(f"SELECT value FROM {table} WHERE name = 'key_fingerprint'").fetchone()
            recorded = None if got is None else str(got[0])
        if recorded is None or recorded != fingerprint:
            raise key_mismatch(repr(self), str(recorded), fingerprint, source)
        return checked

    # -- plumbing ---------------------------------------------------------------------------------------

    @contextmanager
    def _conn(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; a database fault becomes ``CheckpointError`` (the transaction rolled back).

        An ``OperationalError`` (a connection lost, the server away, a lock or statement timeout) is
        ``StoreUnavailable``: nothing was done, and the same call may be made again.
        """
        import psycopg

        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):  # a connection lost (the server restarted, a cut):
                try:  # the pool's other idle ones likely are too; replace them, so the next operation works
                    self._pool.check()
                except Exception:  # the server is still away: the next operation says so
                    pass
                raise StoreUnavailable(f"could not {what}: {exc}") from exc
            raise CheckpointError(f"could not {what}: {exc}") from exc

    def _read_head(self, conn: psycopg.Connection[Any], run_id: str, *, lock: bool = False) -> tuple[Head, bool]:
        """The stored head (seal checked) and whether the run exists."""
        row = conn.execute(
            "SELECT head_seq, head_mac, ledger_seq, ledger_mac, seal FROM runs WHERE run_id = %s"
            + (" FOR UPDATE" if lock else ""), (run_id,)
        ).fetchone()
        if row is None:
            return _NO_HEAD, False
        head = (int(row[0]), str(row[1]), int(row[2]), str(row[3]))
        if not hmac.compare_digest(str(row[4]), self._seals.head(run_id, head)):
            raise CheckpointError(f"run {run_id!r}: the checkpoint's head seal does not match")
        return head, True

    def _cached_head(self, run_id: str) -> Head:
        with self._lock:
            head = self._heads.get(run_id)
        if head is None:
            with self._conn(f"read the head of run {run_id!r}") as conn:
                head, _ = self._read_head(conn, run_id)
        return head

    def _remember(self, run_id: str, head: Head | None) -> None:
        with self._lock:
            if head is None:
                self._heads.pop(run_id, None)
            else:
                self._heads[run_id] = head

    # -- events -----------------------------------------------------------------------------------------

    def append(self, event: BaseEvent, *, effect: EffectDone | None = None) -> None:
        """Seal and store one event, the effect's outcome it reports, and the run's new head: one statement."""
        data = event_to_json(event)
        run_id = event.run_id
        head = self._cached_head(run_id)
        for _ in range(3):
            if event.seq != head[0] + 1:
                self._remember(run_id, None)
                raise CheckpointError(f"run {run_id!r}: event seq {event.seq} does not follow {head[0]}")
            mac = self._seals.event(head[1], run_id, event.seq, data)
            new: Head = (event.seq, mac, head[2], head[3])
            params: dict[str, Any] = {
                "run": run_id, "type": event.type, "data": data, "pseq": head[0], "pmac": head[1],
                "plseq": head[2], "plmac": head[3], "state": event.state.value, "now": time.time(),
                "channel": self.channel, "payload": f"{event.state.value} {run_id}", "effect": effect is not None,
                "key": None, "call": None, "content": None, "value": None, "status": None,
            }
            if effect is not None:
                call_id = getattr(event, "call_id", "")
                value = encode_value(effect.value)
                lmac = self._seals.ledger(run_id, head[2] + 1, "done", effect.key, call_id, "", effect.content, value,
                                        effect.result_status, head[3])
                new = (event.seq, mac, head[2] + 1, lmac)
                params.update(key=effect.key, call=call_id, content=effect.content, value=value,
                              status=effect.result_status)
            params.update(seq=new[0], mac=new[1], lseq=new[2], lmac=new[3], seal=self._seals.head(run_id, new))
            with self._conn(f"write event {event.seq} ({event.type}) of run {run_id!r}") as conn:
                written = conn.execute(_APPEND, params).fetchone() is not None
                if written:
                    self._remember(run_id, new)
                    return
                head, _ = self._read_head(conn, run_id)  # another process moved the run: look again
        self._remember(run_id, None)
        raise CheckpointError(f"run {run_id!r}: other processes keep writing to it; event {event.seq} was not stored")

    def load(self, run_id: str) -> list[BaseEvent]:
        """All events of a run after checking every seal, the ledger's included; raises :class:`CheckpointError`."""
        with self._conn(f"load run {run_id!r}") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            head, exists = self._read_head(conn, run_id)
            if not exists:
                raise RunNotFound(f"no run {run_id!r} in {self!r}")
            rows = conn.execute("SELECT seq, data, mac FROM events WHERE run_id = %s ORDER BY seq",
                                (run_id,)).fetchall()
            ledger = conn.execute(
                "SELECT lseq, op, key, call_id, tool, content, value, result_status, prev, mac FROM ledger "
                "WHERE run_id = %s ORDER BY lseq", (run_id,)
            ).fetchall()
        self._remember(run_id, head)
        return self._seals.verify(run_id, head, rows, ledger)

    def runs(self, state: str | None = None) -> list[tuple[str, str]]:
        """``(run_id, state)`` of stored runs, most recent first (only those in ``state`` when given).

        Example: the approvals inbox of a team is ``store.runs(state="WAITING_APPROVAL")``.
        """
        with self._conn("list runs") as conn:
            if state is None:
                rows = conn.execute("SELECT run_id, state FROM runs ORDER BY updated DESC").fetchall()
            else:
                rows = conn.execute("SELECT run_id, state FROM runs WHERE state = %s ORDER BY updated DESC",
                                    (state,)).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    def wait_for_change(self, run_id: str | None = None, *, seen: int | None = None,
                        timeout: float | None = None) -> tuple[str, str] | None:
        """Block until a run gets a new event (``LISTEN``/``NOTIFY``, no polling); return ``(run_id, state)``.

        Args:
            run_id: the run to watch; None for any run of this store (an approvals inbox).
            seen: how many events of ``run_id`` the caller already has (``len(run.events)``): when the store
                holds more, return at once, so a change made just before the call is never missed.
            timeout: seconds to wait; None waits for ever.

        Returns:
            The changed run and its state now, or None when ``timeout`` passed with no change.

        Example:
            >>> # paused = Run.resume(run_id, loop=loop, store=store)     # waiting for a person
            >>> # store.wait_for_change(run_id, seen=len(paused.events), timeout=3600)
            >>> # run = Run.resume(run_id, loop=loop, store=store).run()  # approved elsewhere: carry on
        """
        import psycopg

        with self._listen_lock:
            try:
                if self._listener is None or self._listener.closed:
                    self._listener = psycopg.connect(self.dsn, autocommit=True)
                    self._listener.execute(f"LISTEN {self.channel}")
                listener = self._listener
                if run_id is not None:  # older news: the `seen` check below covers what matters
                    for _ in listener.notifies(timeout=0):
                        pass
                # (for any run, the news since the last wait is kept: a change between two waits is never lost)
                if run_id is not None and seen is not None:
                    row = listener.execute(f"SELECT head_seq, state FROM {self.schema}.runs WHERE run_id = %s",
                                           (run_id,)).fetchone()
                    if row is not None and int(row[0]) + 1 > seen:
                        return run_id, str(row[1])
                deadline = None if timeout is None else time.monotonic() + timeout
                while True:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    for note in listener.notifies(timeout=left, stop_after=1):
                        state, _, changed = note.payload.partition(" ")
                        if run_id is None or changed == run_id:
                            return changed, state
                    if deadline is not None and time.monotonic() >= deadline:
                        return None
            except psycopg.Error as exc:
                if self._listener is not None:
                    self._listener.close()
                    self._listener = None
                raise CheckpointError(f"could not wait for changes in {self!r}: {exc}") from exc

    # -- effect ledger ------------------------------------------------------------------------------------

    def effect(self, key: str) -> Effect | None:
        """The ledger's view of a key (every row's seal checked)."""
        with self._conn(f"read the effect ledger for {key!r}") as conn:
            rows = conn.execute(f"SELECT {_LEDGER_COLUMNS} FROM ledger WHERE key = %s ORDER BY gid",
                                (key,)).fetchall()
        return self._seals.effect(key, (row[:9] + row[10:] for row in rows))  # the timestamp is not sealed

    def _ledger_write(self, run_id: str, what: str, op: str, key: str, call_id: str, tool: str,
                      content: str | None = None, value: str | None = None, status: str | None = None) -> bool:
        """Append one ledger operation under the run's row lock; False when it was a claim someone else holds."""
        with self._conn(f"{what} (run {run_id!r})") as conn:
            try:
                with conn.transaction():
                    # the tool runs once this returns: its claim must be on disk first, whatever events do
                    conn.execute("SET LOCAL synchronous_commit = on")
                    head, exists = self._read_head(conn, run_id, lock=True)
                    if not exists:
                        if op == "claim" and conn.execute(
                            "SELECT 1 FROM ledger WHERE key = %s AND op = 'claim'", (key,)
                        ).fetchone() is not None:
                            return False  # claimed by another run: the caller gets that effect
                        raise CheckpointError(f"run {run_id!r} has no stored events: cannot record an effect for it")
                    if op == "claim" and conn.execute(
                        "SELECT 1 FROM ledger WHERE key = %s AND op = 'claim'", (key,)
                    ).fetchone() is None:
                        self._guard.check(run_id, key, lambda r: self._first_in(conn, r),
                                          lambda o: self._mark_in(conn, o))
                    lseq = head[2] + 1
                    mac = self._seals.ledger(run_id, lseq, op, key, call_id, tool, content, value, status, head[3])
                    conflict = " ON CONFLICT (key) WHERE op = 'claim' DO NOTHING" if op == "claim" else ""
                    inserted = conn.execute(
                        f"INSERT INTO ledger ({_LEDGER_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                        f"%s){conflict} RETURNING 1",
                        (run_id, lseq, op, key, call_id, tool, content, value, status, time.time(), head[3], mac),
                    ).fetchone()
                    if inserted is None:
                        self._remember(run_id, head)
                        return False
                    new: Head = (head[0], head[1], lseq, mac)
                    conn.execute(
                        "UPDATE runs SET ledger_seq = %s, ledger_mac = %s, seal = %s, updated = %s WHERE run_id = %s",
                        (lseq, mac, self._seals.head(run_id, new), time.time(), run_id),
                    )
            except BaseException:
                self._remember(run_id, None)
                raise
        self._remember(run_id, new)
        return True

    def claim_effect(self, key: str, run_id: str, call_id: str, tool: str) -> Effect | None:
        """Claim a key atomically (``ON CONFLICT DO NOTHING``): None when claimed now, else the existing effect."""
        if self._ledger_write(run_id, f"claim effect {key!r}", "claim", key, call_id, tool):
            return None
        return self.effect(key)

    def retry_effect(self, key: str, run_id: str, call_id: str) -> None:
        """Record an approved retry of an effect whose outcome is unknown."""
        self._ledger_write(run_id, f"record a retry of {key!r}", "retry", key, call_id, "")

    def finish_effect(self, key: str, run_id: str, call_id: str, content: str, value: Any, result_status: str) -> None:
        """Record a late outcome (no event reports it: the run stopped waiting for the call)."""
        self._ledger_write(run_id, f"record the late outcome of {key!r}", "done", key, call_id, "", content,
                           encode_value(value), result_status)

    # -- moves (agentnb.store._moves) ---------------------------------------------------------------------

    def _first_in(self, conn: psycopg.Connection[Any], run_id: str) -> str | None:
        row = conn.execute("SELECT data FROM events WHERE run_id = %s AND seq = 0", (run_id,)).fetchone()
        return None if row is None else str(row[0])

    def _mark_in(self, conn: psycopg.Connection[Any], operation: str) -> Mark | None:
        row = conn.execute("SELECT value FROM meta WHERE name = %s", (mark_name(operation),)).fetchone()
        return None if row is None else Mark.decode(self._seals, operation, str(row[0]))

    def _first(self, run_id: str) -> str | None:
        with self._conn(f"read the first event of run {run_id!r}") as conn:
            return self._first_in(conn, run_id)

    def _get_mark(self, operation: str) -> Mark | None:
        with self._conn(f"read the move record of operation {operation!r}") as conn:
            return self._mark_in(conn, operation)

    def _put_mark(self, operation: str, mark: Mark) -> None:
        with self._conn(f"mark operation {operation!r} moved") as conn:
            conn.execute("INSERT INTO meta VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                         (mark_name(operation), mark.encode(self._seals, operation)))

    def _export(self, run_id: str) -> RunRows:
        with self._conn(f"read the rows of run {run_id!r}") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            head = conn.execute("SELECT head_seq, head_mac, ledger_seq, ledger_mac, seal, state, updated FROM runs "
                                "WHERE run_id = %s", (run_id,)).fetchone()
            if head is None:
                raise RunNotFound(f"no run {run_id!r} in {self!r}")
            events = conn.execute("SELECT seq, type, data, mac FROM events WHERE run_id = %s ORDER BY seq",
                                  (run_id,)).fetchall()
            ledger = conn.execute("SELECT lseq, op, key, call_id, tool, content, value, result_status, ts, prev, mac "
                                  "FROM ledger WHERE run_id = %s ORDER BY lseq", (run_id,)).fetchall()
        return RunRows(run_id, [tuple(e) for e in events], [tuple(op) for op in ledger],
                       tuple(head))

    def _import(self, rows: list[RunRows], operation: str, mark: Mark) -> None:
        """Copy runs in verbatim and mark their operation moved in, in one transaction (see SqliteStore)."""
        with self._conn(f"move in the runs of operation {operation!r}") as conn, conn.transaction():
            for run in rows:
                here = conn.execute("SELECT head_seq, head_mac, ledger_seq, ledger_mac FROM runs WHERE run_id = %s",
                                    (run.run_id,)).fetchone()
                if here is not None:
                    if tuple(here) != run.head[:4]:
                        raise CheckpointError(f"run {run.run_id!r} is already in {self!r} with other events: "
                                              "refusing to overwrite it")
                    continue
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO events VALUES (%s, %s, %s, %s, %s)",
                                    [(run.run_id, *e) for e in run.events])
                    cur.executemany(f"INSERT INTO ledger ({_LEDGER_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
                                    "%s, %s, %s, %s)", [(run.run_id, *op) for op in run.ledger])
                conn.execute("INSERT INTO runs VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", (run.run_id, *run.head))
            old = self._mark_in(conn, operation)
            new = Mark(came_from=mark.came_from, keys=sorted(set(mark.keys) | set(old.keys if old else [])),
                       at=mark.at)
            conn.execute("INSERT INTO meta VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                         (mark_name(operation), new.encode(self._seals, operation)))
        for run in rows:
            self._remember(run.run_id, None)

    # -- leases -----------------------------------------------------------------------------------------

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float = LEASE_TTL, *, take_over: bool = False, seq: int | None = None
    ) -> Lease:
        """Take or renew the run's lease (atomically, on the server's clock); see :class:`~agentnb.store.Store`."""
        with self._conn(f"take the lease of run {run_id!r}") as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"agentnb lease {self.schema} {run_id}",))
            row = conn.execute(
                "SELECT l.owner, l.expires, extract(epoch FROM clock_timestamp())::float8 "
                "FROM (SELECT 1) AS one LEFT JOIN leases AS l ON l.run_id = %s", (run_id,)
            ).fetchone()
            assert row is not None
            now = float(row[2])
            if row[0] is not None and row[0] != owner:
                if float(row[1]) > now:
                    raise RunLocked(run_id, str(row[0]), float(row[1]), expired=False)
                # an expired lease of a run with no stored event protects nothing: its driver died first
                if not take_over and self._read_head(conn, run_id)[0][0] >= 0:
                    raise RunLocked(run_id, str(row[0]), float(row[1]), expired=True)
            if seq is not None:
                head, _ = self._read_head(conn, run_id)
                self._remember(run_id, head)
                if head[0] + 1 > seq:
                    raise CheckpointError(
                        f"run {run_id!r} moved on in another driver (it has {head[0] + 1} events, this one {seq})"
                    )
            lease = Lease(run_id, owner, now + ttl)
            conn.execute(
                "INSERT INTO leases VALUES (%s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, "
                "expires = excluded.expires", (run_id, owner, lease.expires),
            )
        return lease

    def release_lease(self, run_id: str, owner: str) -> None:
        """Give the lease up (no-op when ``owner`` does not hold it)."""
        with self._conn(f"release the lease of run {run_id!r}") as conn:
            conn.execute("DELETE FROM leases WHERE run_id = %s AND owner = %s", (run_id, owner))

    def lease(self, run_id: str) -> Lease | None:
        """The run's lease, live or expired, if any."""
        with self._conn(f"read the lease of run {run_id!r}") as conn:
            row = conn.execute("SELECT owner, expires FROM leases WHERE run_id = %s", (run_id,)).fetchone()
        return None if row is None else Lease(run_id, str(row[0]), float(row[1]))


def _reopen(dsn: str, key: bytes | str | None, key_file: str | Path | None, schema: str, pool_size: int,
            timeout: float, synchronous_commit: Literal["on", "off"]) -> PostgresStore:
    return PostgresStore(dsn, key=key, key_file=key_file, schema=schema, pool_size=pool_size, timeout=timeout,
                         synchronous_commit=synchronous_commit)
