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
in memory). :class:`SqliteStore` is the durable default: one SQLite file in WAL mode; :class:`PostgresStore`
(:mod:`agentnb.store._postgres`) is the one a team shares. The key and its fingerprint, and the seals every durable
store writes, are in :mod:`agentnb.store._seals`; durability settings in :mod:`agentnb.store._sqlite`.

The package, by responsibility:

- :mod:`agentnb.store._protocol`: the :class:`Store` protocol and the values it trades in (:class:`Effect`,
  :class:`EffectDone`, :class:`Lease`), with the two rules every implementation shares (who may take a lease,
  and an effect as the fold of its ledger operations);
- :mod:`agentnb.store._memory`: :class:`MemoryStore`;
- :mod:`agentnb.store._seals`: checkpoint keys and the HMAC chains (:class:`Seals`), one formula for every
  durable store;
- :mod:`agentnb.store._sqlite`: :class:`SqliteStore`;
- :mod:`agentnb.store._postgres`: :class:`PostgresStore` (psycopg is imported when one is made);
- :mod:`agentnb.store._moves`: :func:`move_run`, which moves a run with its whole operation and ledger into
  another store, and the claim-time check that refuses a new effect for a run copied without them.
"""

from __future__ import annotations

from pathlib import Path

from .._outcomes import Effect, EffectDone, EffectStatus
from ._memory import MemoryStore
from ._moves import home_of, move_run
from ._postgres import PostgresStore
from ._protocol import LEASE_TTL, Lease, Store
from ._seals import MIN_KEY_BYTES, Seals, key_mismatch, load_key
from ._sqlite import SCHEMA_VERSION, SqliteStore

__all__ = [
    "LEASE_TTL",
    "MIN_KEY_BYTES",
    "SCHEMA_VERSION",
    "Effect",
    "EffectDone",
    "EffectStatus",
    "Lease",
    "MemoryStore",
    "PostgresStore",
    "Seals",
    "SqliteStore",
    "Store",
    "as_store",
    "key_mismatch",
    "home_of",
    "load_key",
    "move_run",
]


def as_store(store: Store | str | Path | None) -> Store:
    """A store from a store, a path (an :class:`SqliteStore`), a ``postgresql://`` DSN, or None (in memory)."""
    if store is None:
        return MemoryStore()
    if isinstance(store, str) and store.startswith(("postgresql://", "postgres://")):
        return PostgresStore(store)
    if isinstance(store, str | Path):
        return SqliteStore(store)
    return store
