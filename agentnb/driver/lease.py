"""One driver at a time: the run's lease, taken before the first write and renewed when half spent.

A run is driven by the process that holds its lease in the store (see :mod:`agentnb.store`). The lease is
taken or renewed before an event is written (one store write per half lease), let go when the run pauses
for a person or ends (an approver in another process may then take the run), and never taken from a live
holder.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from ..exceptions import CheckpointError, RunLocked
from ..store import Lease, Store


class LeaseKeeper:
    """The lease of one run, as one driver holds it."""

    def __init__(self, store: Store, run_id: str, ttl: float) -> None:
        self.store = store
        self.run_id = run_id
        self.ttl = ttl
        self.half = ttl / 2
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """Who this driver is, in the run's lease."""
        self.lease: Lease | None = None

    def fresh(self) -> bool:
        """True when the lease is held and more than half of it is left (no store write needed)."""
        lease = self.lease
        return lease is not None and lease.expires - time.time() > self.half

    def hold(self, seq: int) -> None:
        """Take or renew the lease when it is missing or half spent (raises ``RunLocked`` when another holds it)."""
        if not self.fresh():
            self.lease = self.store.acquire_lease(self.run_id, self.owner, self.ttl, seq=seq)

    def take(self, seq: int, *, take_over: bool) -> None:
        """Take the run on resume (``take_over``: from a driver whose lease expired)."""
        self.lease = self.store.acquire_lease(self.run_id, self.owner, self.ttl, take_over=take_over, seq=seq)

    def let_go(self) -> None:
        """Release the lease (the run paused for a person or ended); a store fault lets it expire on its own."""
        if self.lease is None:
            return
        self.lease = None
        try:
            self.store.release_lease(self.run_id, self.owner)
        except CheckpointError:  # it expires on its own; the event that paused or ended the run is stored
            pass

    def moved_on(self, exc: Exception, seq: int) -> bool:
        """True when ``exc`` means another driver holds the run or wrote past ``seq`` (not a store fault)."""
        if isinstance(exc, RunLocked):
            return True
        try:
            return len(self.store.load(self.run_id)) > seq
        except CheckpointError:
            return False
