"""The journal: a run's log as its driver writes it -- receive, stamp, mask, check, persist, then fold and tell.

Theory of operation. Every event of a run goes through :meth:`Journal.write`: stamped with the next ``seq``
(:func:`~agentnb._engine.stamp`), masked (:mod:`.scrub`), checked against the transition table, written to the
store under the run's lease (:mod:`.lease`), and only then folded into the run's state and handed to the
listeners with that state (so nobody folds the log again). An I/O result goes through :meth:`Journal.receive`:
the engine's :func:`~agentnb._engine.receive` gives its event, which is written as above. The journal holds the
run's state, not the run: it performs one kind of I/O (the store's ``append``) and decides nothing.

Guarantees per crash point:

- a store fault on ``append`` leaves the state as it was (the event changes the run only after the store took
  it); the result the event came from is *held* and written first on the next step, never asked for or run
  again (:attr:`Journal.held`);
- the store may have kept an event whose reply was lost: the next step asks it first (:meth:`Journal.settle`,
  :mod:`.reconcile`), adopting the event, or reloading when another writer moved the run on;
- a run that pauses for a person or ends lets go of its lease, so another process may take it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .._engine import Emit, RunState, receive, stamp
from .._engine.calls import owed_approval
from .._engine.effects import ledger_key
from .._engine.receive import intervention, waiting
from .._engine.results import Cancelled, Decision, Intervention, ModelLost, ToolStopped
from .._outcomes import EffectDone
from .._redact import RunSecrets, redact, redact_text
from .._states import TERMINAL, TRANSITIONS, S, check_transition
from ..events import ApprovalRequested, BaseEvent, RunFinished
from ..exceptions import ApprovalError, CheckpointError, RunLocked
from ..providers._base import Seekable
from ..store import Store
from ..tools import jsonable, render_value
from .lease import LeaseKeeper
from .listeners import listener_failed
from .loopspec import LoopSpec
from .reconcile import kept
from .resume import Stored
from .scrub import TEXT_FIELDS, scrub
from .tool_port import ToolPort

_now = datetime.now
Listener = Callable[[BaseEvent, RunState], None]


class Journal:
    """One run's log and its fold, as one driver writes them (see the module docstring)."""

    __slots__ = ("cfg", "events", "held", "leases", "listeners", "loop", "rs", "run_id", "secrets", "store",
                 "tools", "unsure")

    def __init__(self, store: Store, run_id: str, loop: LoopSpec, events: list[BaseEvent], leases: LeaseKeeper,
                 secrets: RunSecrets, tools: ToolPort) -> None:
        self.store = store
        self.run_id = run_id
        self.loop = loop
        self.cfg = loop.config
        self.rs = RunState()
        """The run's fold: the one state every reader of a live run shares."""
        self.events = events
        """The run's events (the transcript's list)."""
        self.leases = leases
        self.secrets = secrets
        self.tools = tools
        self.listeners: list[Listener] = []
        self.held: list[Any] = []
        """I/O results whose events a store fault kept out: received and written first on the next step."""
        self.unsure: tuple[BaseEvent, Any] | None = None
        """The event whose write failed (and the I/O result it came from): the store may have committed it anyway
        (a reply lost after the commit), so the next step asks the store before anything else."""

    # -- writing -----------------------------------------------------------------------------------------

    def write(self, emit: Emit, result: Any = None) -> BaseEvent:
        """Stamp, mask, persist, then apply: the event changes the run only after the store accepted it.

        ``result`` is the I/O result the event was received from (None for the engine's own decisions).
        """
        rs, event = self.rs, emit.event
        stamp(rs, event, _now(UTC))
        if type(event) in TEXT_FIELDS:
            loop = self.loop
            scrub(event, self.secrets, self.cfg.settings, loop.event_settings, rs.calls)
        state = event.state
        allowed = TRANSITIONS[rs.state].get(event.type)
        if allowed is None or state not in allowed:  # an illegal event is refused before it is stored
            check_transition(rs.state, event.type, state)
        leases = self.leases
        lease = leases.lease  # inline LeaseKeeper.fresh(): this runs for every event
        if lease is None or lease.expires - time.time() <= leases.half:
            leases.hold(rs.seq)
        try:
            self.store.append(event, effect=emit.effect)
        except CheckpointError:  # nothing changed here; the store may have kept it all the same (see settle)
            self.unsure = (event, result)
            raise
        return self.applied(event)

    def applied(self, event: BaseEvent) -> BaseEvent:
        """Fold a stored event into the run and tell the listeners (with the state after it)."""
        rs = self.rs
        rs.apply(event, checked=True)  # the transition was checked before the store took the event
        self.events.append(event)
        state = event.state
        if state is S.WAITING_APPROVAL or state in TERMINAL:
            if state in TERMINAL:
                self.tools.shutdown()
            self.leases.let_go()  # another process may take the run now
        for listener in self.listeners:
            try:
                listener(event, rs)
            except Exception as exc:  # the event is stored and applied: a listener's fault is warned, never undoes it
                listener_failed(listener, self.run_id, event, exc)
        return event

    def receive(self, result: Any) -> BaseEvent:
        """Receive an I/O result and write its event; held for the next step if the store refuses it."""
        emit = receive(self.rs, self.cfg, result)
        assert isinstance(emit, Emit)
        try:
            return self.write(emit, result)
        except CheckpointError:
            self.held.append(result)  # what I/O brought back is not lost: the next step writes it
            raise

    def receive_all(self, results: list[Any], interrupted: bool = False) -> BaseEvent:
        """Receive a turn's results (independent calls) and write them: the model's order, a pause last.

        A store fault holds the results not written yet: they ran, so they are written next step, never run again.
        ``interrupted``: a ``KeyboardInterrupt`` came while they ran; it is raised again once they are written.
        """
        if len(results) == 1:
            event = self.receive(results[0])
            if interrupted:
                raise KeyboardInterrupt
            return event
        rs, cfg = self.rs, self.cfg
        emits = [receive(rs, cfg, r) for r in results]  # independent calls: each reads its own call only
        pause = [isinstance(e, Emit) and isinstance(e.event, ApprovalRequested) for e in emits]
        order = [i for i in range(len(results)) if not pause[i]] + [i for i in range(len(results)) if pause[i]]
        last = None
        for n, i in enumerate(order):
            emit = emits[i]
            assert isinstance(emit, Emit)
            try:
                last = self.write(emit, results[i])
            except CheckpointError:
                self.held.extend(results[j] for j in order[n:])
                raise
        if interrupted:
            raise KeyboardInterrupt
        assert last is not None
        return last

    def drain(self) -> BaseEvent:
        """Receive and write the oldest held result (it stays held if the store refuses its event again)."""
        emit = receive(self.rs, self.cfg, self.held[0])
        assert isinstance(emit, Emit)
        event = self.write(emit, self.held[0])
        self.held.pop(0)
        return event

    def decided(self, decision: Decision) -> BaseEvent:
        """Write a person's answer (refused before anything is recorded when the engine says it does not fit).

        A submitted outcome of a side-effecting call goes into the effect ledger first, so the call never runs.

        Raises:
            ApprovalError: another driver holds the run or moved it on (the journal then shows the stored state).
        """
        self.settle()  # an earlier answer may have been stored though its reply was lost
        rs, cfg = self.rs, self.cfg
        emit = receive(rs, cfg, decision)  # refused here: nothing is recorded
        assert isinstance(emit, Emit)
        call = rs.calls[decision.call_id]
        key = ledger_key(rs, cfg, call) if decision.decision == "submitted" else None
        if key:
            self.tools.claim(key, call, False, frozenset())  # no-op when claimed before
            emit = Emit(emit.event, EffectDone(key, decision.content or "", decision.value, "ok"))
        try:
            self.leases.hold(rs.seq)
        except (RunLocked, CheckpointError) as exc:
            if not self.leases.moved_on(exc, rs.seq):
                raise
            self.reload()
            raise ApprovalError(
                f"call {decision.call_id!r} was not resolved here: another driver holds or moved the run on "
                f"({exc}). This Run now shows the stored state: {self.rs.state.value}.") from exc
        return self.write(emit)

    def submitted(self, call_id: str, value: Any, by: str | None, note: str | None) -> BaseEvent:
        """Write a result a person (or a client) gives a waiting call: converted once, masked, then decided."""
        waiting(self.rs, call_id)
        audit = redact(jsonable(value))  # converted once (a generator is consumed once); the ledger is stored too
        content = redact_text(render_value(audit))
        return self.decided(Decision(call_id, "submitted", _now(UTC), by, note, content=content, value=audit))

    def told(self, said: Intervention) -> BaseEvent:
        """What a person does to a paused run: a message, a call cancelled, the end.

        The rules and refusals are the engine's: :func:`~agentnb._engine.receive.intervention`.
        """
        self.settle()
        while self.held:  # a call that ran gets its result first, never cancelled as if it had not run
            self.drain()
        event = intervention(self.rs, self.cfg, said).event
        return self.cancelled(event.reason) if isinstance(event, RunFinished) else self.write(Emit(event))

    def cancelled(self, reason: str) -> BaseEvent:
        """End the run in ``CANCELLED``: held results first (calls that ran keep them), running calls stopped."""
        self.settle()
        while self.held:
            self.drain()
        for c in [c for c in self.rs.calls.values() if c.status == "running"]:
            self.receive(ToolStopped(c.call_id, "cancelled", started=False, reason=reason, queued=False))
        return self.receive(Cancelled(reason))

    # -- after a fault, on resume ------------------------------------------------------------------------

    def settle(self) -> None:
        """After a failed write, adopt the event if the store kept it after all (see :mod:`.reconcile`).

        Raises:
            CheckpointError: the store still cannot be read (the run stays unsure), or it holds events this driver
                did not write (the journal then shows the stored state).
        """
        if self.unsure is None:
            return
        attempted, result = self.unsure
        found = kept(self.store, self.run_id, len(self.events), attempted)
        self.unsure = None
        if found == "it":
            self.applied(attempted)
            if result is not None and self.held and self.held[0] is result:
                self.held.pop(0)  # its event is stored: never received and written again
        elif found == "other":
            self.reload()
            raise CheckpointError(f"run {self.run_id!r}: the store holds events this driver did not write (another "
                                  f"writer moved the run); this Run now shows the stored state: {self.rs.state.value}")

    def reload(self) -> None:
        """Fold the stored events again: the run becomes what the store says."""
        events = self.store.load(self.run_id)
        self.rs = RunState.fold(events)
        self.events[:] = events
        self.leases.lease = None

    def resumed(self, stored: Stored, *, take_over: bool, model: Any = None) -> None:
        """Adopt a stored run checked by :func:`.resume.load_checked`: take its lease, ask what the engine owes.

        A finished run is only read (a fork's parent): no lease is taken. The approvals the engine says are owed
        are written before anything runs. A seekable ``model`` is then moved to where the run stopped (only once
        the run is this driver's), and a run stopped mid model call asks the model again (a ``ModelRetried``).
        """
        self.rs = stored.state
        self.events.extend(stored.events)
        if stored.state.state not in TERMINAL:
            self.leases.take(stored.state.seq, take_over=take_over)  # the checks passed: only now take the run
        while (asked := owed_approval(self.rs, self.cfg)) is not None:
            self.write(asked)
        if self.rs.state is S.WAITING_APPROVAL or self.rs.state in TERMINAL:
            self.leases.let_go()  # nothing to drive until a person answers: approvers elsewhere may take it
        if isinstance(model, Seekable):
            model.seek(self.run_id, stored.seek)
        if self.rs.state is S.MODEL_REQUESTED:
            self.receive(ModelLost())


__all__ = ["Journal", "Listener"]
