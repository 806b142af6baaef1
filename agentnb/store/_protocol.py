"""The store contract: the :class:`Store` protocol, the values it trades in, and the rules all stores share.

A store keeps a run's events, its effect ledger and its lease (see :mod:`agentnb.store` for what each one
guarantees). Every implementation -- :class:`~agentnb.store.MemoryStore`, :class:`~agentnb.store.SqliteStore`,
``PostgresStore`` -- answers with the same values: an :class:`Effect` is the ledger's view of one idempotency
key, folded from its ``claim``/``retry``/``done`` operations by :func:`fold_effect`; an :class:`EffectDone` is
an outcome written in the same transaction as the event that reports it; a :class:`Lease` says who drives a
run until when, and :func:`check_lease` is the one rule for who may take it. Sharing these two functions is
what keeps the stores' behaviour identical (``tests/test_store_conformance.py`` runs the same cases on each).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from .._outcomes import Effect, EffectDone
from ..events import BaseEvent
from ..exceptions import RunLocked

LEASE_TTL = 30.0
"""Seconds a driver's lease lasts without renewal (a driver renews it while it works)."""


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

    def wait_for_change(self, run_id: str | None = None, *, seen: int | None = None,
                        timeout: float | None = None) -> tuple[str, str] | None:
        """Block until a run gets a new event; ``(run_id, state)`` of the changed run, or None after ``timeout``.

        ``run_id``: the run to watch (None: any run of the store, what a live inbox waits on); ``seen``: how many
        of its events the caller has (a store holding more answers at once). For any run, a change made since
        this store object's previous wait counts: nothing is lost between two waits. PostgreSQL waits on
        ``LISTEN``, SQLite polls one small query per interval, memory listens on append.
        """


def check_lease(current: Lease | None, run_id: str, owner: str, take_over: bool, empty: bool = False) -> None:
    """Refuse a lease another owner holds; an expired one only with ``take_over``.

    Or when the run has no stored event: its driver died before writing one, so there is nothing to protect.
    """
    if current is None or current.owner == owner:
        return
    if current.live:
        raise RunLocked(run_id, current.owner, current.expires, expired=False)
    if not take_over and not empty:
        raise RunLocked(run_id, current.owner, current.expires, expired=True)


def fold_effect(key: str, ops: list[tuple[str, str, str, str, str | None, Any, str | None]]) -> Effect | None:
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
