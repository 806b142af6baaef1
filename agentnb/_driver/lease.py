"""One driver at a time: the run's lease, taken before the first write and renewed when half spent.

A run is driven by the process that holds its lease in the store (see :mod:`agentnb.store`). The lease is
taken or renewed before an event is written (one store write per half lease), let go when the run pauses
for a person or ends (an approver in another process may then take the run), and never taken from a live
holder.

Between two events the driver may wait a long time: a tool that runs for minutes, a model that thinks before
its first byte. A lease that lapsed then would tell another process the driver is gone while it is not, so
while the driver waits on I/O (:meth:`LeaseKeeper.busy`) one daemon thread per process (:class:`Heartbeat`)
renews the leases of the runs that have been busy for half their lease. It costs the hot path two dict
operations per wait (no wake-up of the thread); the thread starts with the first busy run and, when no run
is busy, only looks now and then.
"""

from __future__ import annotations

import os
import socket
import threading
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
        self.seq = 0
        """The seq the run had when the lease was last taken or renewed (what a renewal checks against)."""

    def fresh(self) -> bool:
        """True when the lease is held and more than half of it is left (no store write needed)."""
        lease = self.lease
        return lease is not None and lease.expires - time.time() > self.half

    def hold(self, seq: int) -> None:
        """Take or renew the lease when it is missing or half spent (raises ``RunLocked`` when another holds it)."""
        if not self.fresh():
            self.lease = self.store.acquire_lease(self.run_id, self.owner, self.ttl, seq=seq)
            self.seq = seq

    def take(self, seq: int, *, take_over: bool) -> None:
        """Take the run on resume (``take_over``: from a driver whose lease expired)."""
        self.lease = self.store.acquire_lease(self.run_id, self.owner, self.ttl, take_over=take_over, seq=seq)
        self.seq = seq

    def let_go(self) -> None:
        """Release the lease (the run paused for a person or ended); a store fault lets it expire on its own."""
        if self.lease is None:
            return
        self.lease = None
        try:
            self.store.release_lease(self.run_id, self.owner)
        except CheckpointError:  # it expires on its own; the event that paused or ended the run is stored
            pass

    def waiting(self, seq: int) -> None:
        """The driver waits on I/O now, the run being ``seq`` events long: the heartbeat keeps its lease alive.

        Pair it with :meth:`done_waiting` (``try``/``finally``); a plain pair of calls, not a context manager,
        because it brackets every model call and every tool batch.
        """
        if self.lease is not None:
            self.seq = seq
            HEARTBEAT.enter(self)

    def done_waiting(self) -> None:
        """The driver is back from its I/O (its next write renews the lease as usual)."""
        HEARTBEAT.busy.pop(id(self), None)

    def beat(self) -> None:
        """Renew the lease from the heartbeat thread if it is half spent (a fault is left to the driver)."""
        lease = self.lease
        if lease is None or lease.expires - time.time() > self.half:
            return
        try:
            self.lease = self.store.acquire_lease(self.run_id, self.owner, self.ttl, seq=self.seq)
        except Exception:  # noqa: S110 - the driver's next write renews or reports it
            pass

    def moved_on(self, exc: Exception, seq: int) -> bool:
        """True when ``exc`` means another driver holds the run or wrote past ``seq`` (not a store fault)."""
        if isinstance(exc, RunLocked):
            return True
        try:
            return len(self.store.load(self.run_id)) > seq
        except CheckpointError:
            return False


class Heartbeat:
    """One daemon thread per process renewing the leases of busy runs (see the module docstring)."""

    def __init__(self) -> None:
        self.busy: dict[int, LeaseKeeper] = {}
        """The keepers of the runs whose drivers wait on I/O, by id."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pace = float("inf")
        """The shortest lease the thread has kept so far (inf: it has not started)."""
        self._thread: threading.Thread | None = None

    def enter(self, keeper: LeaseKeeper) -> None:
        """``keeper``'s run waits on I/O now (leaving is ``busy.pop``: one dict operation, thread-safe).

        The thread is woken only for a lease shorter than any it has kept so far: an idle thread keeps its pace
        (it looks every eighth of the shortest lease it has seen, finding nothing to do), so the waits of a busy
        loop -- two a tool round trip -- cost no wake-up and no switch to the thread.
        """
        self.busy[id(keeper)] = keeper
        if keeper.ttl < self._pace:
            self._pace = keeper.ttl
            if self._thread is None:
                with self._lock:
                    if self._thread is None:
                        self._thread = threading.Thread(target=self._loop, name="agentnb-lease-heartbeat",
                                                        daemon=True)
                        self._thread.start()
            self._wake.set()  # a shorter beat than the thread keeps

    def _loop(self) -> None:
        while True:
            for keeper in list(self.busy.values()):
                keeper.beat()
            self._wake.wait(max(0.01, self._pace / 8))  # a lease is renewed once half spent: eight looks a lease
            self._wake.clear()


HEARTBEAT = Heartbeat()
"""The process's heartbeat (one thread, started by the first busy run)."""


def _forked() -> None:
    """A forked child has none of its parent's threads: its first busy run starts its own heartbeat."""
    HEARTBEAT._thread = None
    HEARTBEAT._pace = float("inf")
    HEARTBEAT.busy.clear()


os.register_at_fork(after_in_child=_forked)
