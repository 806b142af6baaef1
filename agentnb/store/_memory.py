"""The in-memory store: what a loop uses when it is given none.

Nothing survives the process, but the rules are the ones of a durable store: events must follow each other
by seq, an idempotency key is claimed at most once (under a lock, so two threads cannot both run one effect),
and a run's lease is refused to a second driver while it is live. No seal is kept: there is no file an
outsider could edit.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .._outcomes import Effect, EffectDone
from ..events import BaseEvent
from ..exceptions import CheckpointError, RunNotFound
from ._protocol import LEASE_TTL, Lease, check_lease, fold_effect


class MemoryStore:
    """The store of a loop given none: events stay in the run, the ledger and leases in this object."""

    def __init__(self) -> None:
        self._events: dict[str, list[BaseEvent]] = {}
        self._ops: dict[str, list[tuple[str, str, str, str, str | None, Any, str | None]]] = {}
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._watching = 0
        """Threads in :meth:`wait_for_change`: only then does an append notify (a lock taken per event)."""
        self._version = 0
        """Appends counted (for waits: the news since the last wait for any run is what moved it)."""
        self._seen_version: int | None = None
        self._last: tuple[str, str] = ("", "")

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
        if self._watching:
            with self._changed:
                self._version += 1
                self._last = (event.run_id, event.state.value)
                self._changed.notify_all()
        else:  # nobody waits: no lock, only a count the next wait starts from (a change between waits is news)
            self._version += 1
            self._last = (event.run_id, event.state.value)

    def wait_for_change(self, run_id: str | None = None, *, seen: int | None = None,
                        timeout: float | None = None) -> tuple[str, str] | None:
        """Block until a run gets a new event (a listener on append); ``(run_id, state)``, or None on ``timeout``.

        ``run_id`` and ``seen`` as in ``PostgresStore.wait_for_change``; for any run, a change made since this
        store's previous wait counts (nothing is lost between two waits).
        """
        def state(rid: str) -> str:
            events = self._events.get(rid)
            return events[-1].state.value if events else ""

        with self._changed:
            self._watching += 1
            try:
                start = self._version if self._seen_version is None else self._seen_version
                if run_id is not None and seen is None:
                    seen = len(self._events.get(run_id, ()))
                if run_id is not None:
                    ok = self._changed.wait_for(lambda: len(self._events.get(run_id, ())) > (seen or 0), timeout)
                    return (run_id, state(run_id)) if ok else None
                ok = self._changed.wait_for(lambda: self._version != start, timeout)
                self._seen_version = self._version
                return self._last if ok else None
            finally:
                self._watching -= 1

    def load(self, run_id: str) -> list[BaseEvent]:
        """The run's events."""
        if run_id not in self._events:
            raise RunNotFound(f"no run {run_id!r} in this store")
        return list(self._events[run_id])

    def _op(self, key: str, op: str, run_id: str, call_id: str, tool: str, content: str | None = None,
            value: Any = None, status: str | None = None) -> None:
        self._ops.setdefault(key, []).append((op, run_id, call_id, tool, content, value, status))

    def effect(self, key: str) -> Effect | None:
        """The ledger's view of a key."""
        with self._lock:
            return fold_effect(key, self._ops.get(key, []))

    def claim_effect(self, key: str, run_id: str, call_id: str, tool: str) -> Effect | None:
        """Claim a key: None when claimed now, else the existing effect."""
        with self._lock:
            existing = fold_effect(key, self._ops.get(key, []))
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
            check_lease(self._leases.get(run_id), run_id, owner, take_over, empty=not self._events.get(run_id))
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
