"""The driver: :class:`Run` is the loop -- decide, perform through a port, receive, append -- and its public methods.

Theory of operation. ``Run`` asks :func:`~agentnb.engine.decide` what comes next. An :class:`~agentnb.engine.Emit`
is appended as it is; anything else needs I/O, which a port performs and returns as a typed record
(:mod:`agentnb.engine.results`): the model port (:mod:`agentnb.driver.model_port`) pulls one item of the
model's answer, the tool port (:mod:`agentnb.driver.tool_port`) claims effects and runs calls, a person's
answer arrives through :meth:`Run.approve` and its siblings. The engine's :func:`~agentnb.engine.receive`
turns each record into the event; ``Run`` stamps it (:func:`~agentnb.engine.stamp`), masks secrets in it
(:mod:`agentnb.driver.scrub`), writes it to the store, and only then folds it. Nothing here decides.

Guarantees per crash point: an event changes the run only after the store accepted it, so a store fault
leaves the run equal to its checkpoint (stepping again carries on); an I/O result whose event could not be
written is held and received again on the next step, never asked for or run again; the run's lease
(:mod:`agentnb.driver.lease`) keeps a second driver out. Listeners get each event with the run's state after
it, so nobody folds the log again.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .driver.admit import admit
from .driver.fork import ParentReads, lineage, plan_fork
from .driver.history import budget_settings, complete_history, summary
from .driver.lease import LeaseKeeper
from .driver.listeners import listener_failed
from .driver.loopspec import LoopSpec
from .driver.model_port import ModelPort
from .driver.reconcile import kept
from .driver.resume import load_checked
from .driver.scrub import TEXT_FIELDS, scrub
from .driver.tool_port import Job, StopFlag, ToolPort
from .engine import CallState, Compress, Emit, PullModel, RunState, RunTool, decide, receive, stamp
from .engine.calls import owed_approval
from .engine.effects import call_limit, ledger_key, looks_first
from .engine.inputs import request_for, run_started
from .engine.receive import intervention, waiting
from .engine.results import Cancelled, Decision, DuplicateDone, Intervention, ModelLost, ToolReturned, ToolStopped
from .engine.view import RunView
from .events import ApprovalRequested, BaseEvent, ModelRetried, ResultsBound, RunFinished
from .exceptions import ApprovalError, CheckpointError, RunLocked, RunNotPaused
from .messages import Message, coerce_messages
from .outcomes import EffectDone
from .providers.base import Seekable
from .redact import RunSecrets, redact, redact_text
from .states import TERMINAL, TRANSITIONS, LoopState, S, check_transition
from .store import Store, as_store, home_of
from .tools import jsonable, render_value
from .transcript import Transcript

_now = datetime.now
Listener = Callable[[BaseEvent, RunState], None]

__all__ = ["Run"]


class Run:
    """One run of a loop. Step it, run it, approve or deny its calls, read its transcript.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> run = loop.start("What's the weather in Paris?")
        >>> run.step().type, run.state
        ('RunStarted', <LoopState.READY: 'READY'>)
        >>> run.run_until(lambda e: e.type == "ToolFinished").content
        '{"city": "Paris", "temp_c": 18, "sky": "sunny"}'
    """

    def __init__(self, loop: LoopSpec, messages: list[Message], *, run_id: str | None = None,
                 operation_id: str | None = None, store: Store | None = None,
                 tool_port: type[ToolPort] = ToolPort) -> None:
        self.loop = loop
        self.run_id = run_id or f"run_{uuid.uuid4().hex[:12]}"
        self.operation_id = operation_id or self.run_id
        self.store = store if store is not None else loop.store
        self._rs = RunState()
        self.transcript = Transcript([])
        self._events = self.transcript.events
        self._leases = LeaseKeeper(self.store, self.run_id, loop.lease_ttl)
        self._drive = threading.RLock()
        """Held while stepping: cancel() from another thread asks the driver instead of racing it."""
        self._stop = StopFlag()
        self._secrets = RunSecrets.for_tools(loop.registry)  # real secret arguments: memory only, never stored
        self._listeners: list[Listener] = []
        self._model = ModelPort(loop.model, self._secrets, loop.config.budget)
        self._tools = tool_port(self.store, loop.registry, self.run_id, self._secrets, loop.config.budget.max_parallel,
                               self._stop)
        self._held: list[Any] = []
        """I/O results whose events a store fault kept out: received and written first on the next step."""
        self._unsure: tuple[BaseEvent, Any] | None = None
        """The event whose write failed (and the I/O result it came from): the store may have committed it anyway
        (a reply lost after the commit), so the next step asks the store before anything else."""
        self.prompt = list(messages)
        """The messages the run was started with (without the loop's system prompt)."""
        self._initial = [Message.system(loop.system), *messages] if loop.system else list(messages)
        self._lineage: dict[str, Any] | None = None
        """A fork's lineage and effect policy (``Run.fork``), stored in its ``RunStarted``."""
        self._reads = ParentReads(self.store, "", None)
        """A fork's parent's reads (``reads="reuse"``), read from the store when a resumed fork needs them."""

    # -- reading -------------------------------------------------------------------------------------

    @property
    def state(self) -> LoopState:
        """The loop state now."""
        return self._rs.state

    @property
    def output(self) -> Any:
        """The final answer: its text, or for a loop with ``output_type`` the typed object (None until then)."""
        spec, rs = self.loop.config.output, self._rs
        if spec is not None:
            return spec.typed(rs.final_output) if rs.output_ok and rs.state is S.COMPLETED else None
        return rs.output

    @property
    def reason(self) -> str | None:
        """Why the run ended, in words."""
        return self._rs.reason

    @property
    def messages(self) -> list[Message]:
        """The canonical conversation so far (a copy)."""
        return list(self._initial) if self._rs.state is S.NEW else list(self._rs.messages)

    @property
    def events(self) -> list[BaseEvent]:
        """The events so far (the transcript's list)."""
        return self.transcript.events

    @property
    def view(self) -> RunState:
        """A read-only snapshot of the folded state (calls, usage, counters) as of now; see :class:`RunView`.

        Example:
            >>> import agentnb as anb
            >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("hi")
            >>> before = run.view
            >>> run.run().view.tool_calls, before.tool_calls
            (1, 0)
        """
        return RunView(lambda: self._rs, self._events)

    @property
    def done(self) -> bool:
        """True once the run is in a terminal state."""
        return self._rs.state in TERMINAL

    @property
    def paused(self) -> bool:
        """True while the run waits for a person."""
        return self._rs.state is S.WAITING_APPROVAL

    def pending_approvals(self) -> list[CallState]:
        """Calls waiting for approval, in the model's order."""
        return self._rs.pending_approvals()

    def on_event(self, callback: Listener) -> None:
        """Call ``callback(event, state)`` after every appended event, ``state`` being the run's fold after it.

        ``state`` is the run's own state, shared so that no listener folds the log again: read it, never change
        it (``run.view`` is a snapshot of your own). The debugger and the OpenTelemetry writer listen here.
        A listener that raises cannot undo its event (stored and applied already): its exception becomes an
        :class:`~agentnb.ListenerWarning` naming it, the run and the event; the other listeners still get the
        event, this one stays attached, and the run goes on (``KeyboardInterrupt`` still stops it).
        """
        self._listeners.append(callback)

    # -- driving -------------------------------------------------------------------------------------

    def step(self) -> BaseEvent | None:
        """Do exactly one event's worth of work and return that event (None: the run is over or waits for a person).

        Raises:
            CheckpointError: the store refused the event (locked, disk full, read-only); the run is left equal
                to its checkpoint, and stepping again carries on once the fault clears.
            RunLocked: another driver holds the run.
        """
        with self._drive:
            if self._unsure is not None:
                self._reconcile()
            return self._started() if self._rs.state is S.NEW else self._step(batch=False)

    def _started(self) -> BaseEvent:
        loop, cfg = self.loop, self.loop.config
        model = f"{getattr(loop.model, 'provider', '?')}:{getattr(loop.model, 'name', '?')}"
        return self._write(Emit(run_started(self.run_id, self._initial, model, loop.tool_infos, {
            "max_turns": cfg.max_turns, "on_max_turns": cfg.budget.on_exhausted, "budget": budget_settings(cfg.budget),
            "request": cfg.settings, "operation_id": self.operation_id, "policy_revision": loop.policy_revision,
            "headless": cfg.headless, **home_of(self.store), **({"fork": self._lineage} if self._lineage else {})})))

    def _step(self, *, batch: bool) -> BaseEvent | None:
        if self._unsure is not None:
            self._reconcile()
        if self._held:
            return self._drain()
        if self._stop.reason is not None:
            return self._cancel_now(self._stop.take() or "")
        rs, cfg = self._rs, self.loop.config
        action = decide(rs, cfg, time.time() if cfg.budget.deadline_s is not None else None)
        if type(action) is Emit:  # the common case first (five of the seven events of a round trip)
            return self._write(action)
        if isinstance(action, PullModel):
            self._leases.waiting(rs.seq)  # a model that thinks for minutes must not look like a dead driver
            try:
                result = self._model.pull(lambda: request_for(rs, cfg, self.run_id), rs.retries == 0)
            finally:
                self._leases.done_waiting()
            event = self._receive(result)
            if isinstance(event, ModelRetried):
                self._model.back_off(event.delay_s)
            return event
        if isinstance(action, RunTool):
            calls = [c for c in rs.calls.values() if c.status == "running"] if batch and cfg.budget.max_parallel > 1 \
                else [rs.calls[action.call_id]]
            return self._execute(calls)
        if isinstance(action, Compress):
            return self._receive(summary(self._rs, self.loop.config, self.run_id, action.tokens))
        return None  # Wait or Done

    def run(self) -> Run:
        """Step until the run ends or pauses for a person; returns the run (handy as a cell's last line).

        Unlike stepping, this runs the ready calls of a turn at the same time (up to ``max_parallel``).
        """
        with self._drive:
            if self._unsure is not None:
                self._reconcile()
            if self._rs.state is S.NEW:
                self._started()
            step = self._step
            while step(batch=True) is not None:
                pass
        return self

    def run_until(self, predicate: Callable[[BaseEvent], bool]) -> BaseEvent | None:
        """Step until an event satisfies ``predicate`` and return it (None if the run stops first)."""
        while (ev := self.step()) is not None:
            if predicate(ev):
                return ev
        return None

    def cancel(self, reason: str = "cancelled by the user") -> BaseEvent | None:
        """End the run in ``CANCELLED`` (no-op if it is already over).

        Safe from any thread: while another thread drives the run (``run()``, a debugger's Continue), this only
        asks it to stop, and it ends the run at its next boundary -- calls already finished keep their results,
        running calls are waited for, calls not started yet get ``skipped`` results -- and returns None.
        """
        if not self._drive.acquire(blocking=False):
            self._stop.reason = reason
            return None
        try:
            if self._unsure is not None:
                self._reconcile()  # the run's end may have been stored though its reply was lost
            if self.done:
                return None
            if self._rs.state is S.NEW:
                self._started()
            return self._cancel_now(reason)
        finally:
            self._drive.release()

    def interject(self, text: str, *, by: str | None = None) -> BaseEvent:
        """While the run is paused, tell the model something: a user message its next request sends after results."""
        return self._person(Intervention(text, by))

    def cancel_call(self, call_id: str, reason: str, *, by: str | None = None) -> BaseEvent:
        """While the run is paused, cancel one call not answered yet; the model reads "Cancelled by <by>: <reason>"."""
        return self._person(Intervention(reason, by, call_id=call_id))

    def end(self, reason: str, *, by: str | None = None) -> BaseEvent:
        """While the run is paused, end it (``CANCELLED``; ``run.reason`` says who ended it and why)."""
        return self._person(Intervention(reason, by, end=True))

    def _person(self, said: Intervention) -> BaseEvent:  # the rules and refusals: engine/receive.py (intervention)
        with self._drive:
            if self._unsure is not None:
                self._reconcile()
            while self._held:  # a call that ran gets its result first, never cancelled as if it had not run
                self._drain()
            event = intervention(self._rs, self.loop.config, said).event
            return self._cancel_now(event.reason) if isinstance(event, RunFinished) else self._write(Emit(event))

    def release(self) -> None:
        """Let go of the run's lease now, so another process may drive it (stepping again takes it back)."""
        with self._drive:
            self._leases.let_go()

    def _cancel_now(self, reason: str) -> BaseEvent:
        self._model.close()
        if self._unsure is not None:
            self._reconcile()
        while self._held:  # calls that ran keep what happened, never "skipped"
            self._drain()
        for c in [c for c in self._rs.calls.values() if c.status == "running"]:
            self._receive(ToolStopped(c.call_id, "cancelled", started=False, reason=reason, queued=False))
        return self._receive(Cancelled(reason))

    def fork(self, at: int | None = None, *, results: dict[str, Any] | None = None,
             arguments: dict[str, dict[str, Any]] | None = None, effects: str = "ask", reads: str = "rerun",
             rerun: Collection[str] = (), run_id: str | None = None) -> Run:
        """A new run from this one's conversation as it stood after event ``at`` (time travel); this run is untouched.

        ``at``: the event to fork after (default: the last one; with ``results`` only, where they were bound).
        ``results``: tool results replaced by call id; ``arguments``: call arguments replaced by call id (that
        call's turn is replayed with them). Where the fork cuts and how its model goes on: :mod:`agentnb.driver.fork`.

        A fork belongs to this run's operation and store: a write any run of the operation made is answered
        from the effect ledger (``inherited``), never made again. A write nobody made follows ``effects``:
        ``"ask"`` pauses for a person, ``"simulate"`` runs ``@tool(simulate=...)`` (none: refused), ``"run"``
        runs it. ``reads="reuse"`` answers reads from this run's results; ``rerun`` names tools whose effects
        the fork does again. The lineage is stored with the fork (``run_id``: its id; default a new one).

        Example:
            >>> import agentnb as anb
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> run = loop.start("What's the weather in Paris?").run()
            >>> call = next(e.call_id for e in run.events if e.type == "ToolFinished")
            >>> other = run.fork(results={call: {"city": "Paris", "temp_c": -5, "sky": "snow"}}).run()
            >>> other.state.value, run.events[-1].type
            ('COMPLETED', 'RunFinished')
        """
        plan = plan_fork(self.events, self._initial, self.prompt, self.loop, at, results=results, arguments=arguments,
                         lineage=lineage(self.run_id, effects, reads, rerun))
        forked: Run = plan.loop.start(plan.history, run_id=run_id, operation_id=self.operation_id, store=self.store)
        forked._lineage = plan.lineage
        forked._reads = ParentReads(self.store, self.run_id, self.events if reads == "reuse" else None)
        model = plan.loop.model
        if isinstance(model, Seekable):
            model.seek(forked.run_id, plan.seek)
        return forked

    # -- a person's answers ------------------------------------------------------------------------------

    def approve(self, call_id: str, *, by: str | None = None, note: str | None = None,
                arguments: dict[str, Any] | None = None, digest: str | None = None) -> BaseEvent:
        """Approve a waiting call, optionally with edited arguments (validated against the schema first).

        Then ``run.run()`` goes on. For a call whose outcome is unknown after a crash, approving means "run it
        again with the same idempotency key". ``digest`` is the ``arguments_digest`` the approver saw.

        Raises:
            RunNotPaused, ApprovalError: nothing waits, or the call is unknown or not waiting.
            ApprovalExpired: the request's expiry passed (nothing runs; the call can still be denied).
            DigestMismatch: the arguments are not the ones the approver saw.
            pydantic.ValidationError, InvalidArguments, ValueConversionError: edited arguments that do not fit.
        """
        return self._decide(Decision(call_id, "approved", _now(UTC), by, note, arguments, digest))

    def deny(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> BaseEvent:
        """Deny a waiting call; the model gets a "Denied by the user: <reason>" result and goes on."""
        return self._decide(Decision(call_id, "denied", _now(UTC), by, reason))

    def submit_result(self, call_id: str, value: Any, *, by: str | None = None, note: str | None = None) -> BaseEvent:
        """Answer a waiting call with a result instead of running it.

        For a client-executed tool, ``value`` is what the client computed. For a call whose outcome was unknown
        after a crash, it is the reconciled outcome; it goes into the effect ledger, so the call never runs.
        """
        waiting(self._rs, call_id)
        audit = redact(jsonable(value))  # converted once (a generator is consumed once); the ledger is stored too
        content = redact_text(render_value(audit))
        return self._decide(Decision(call_id, "submitted", _now(UTC), by, note, content=content, value=audit))

    def _decide(self, decision: Decision) -> BaseEvent:
        with self._drive:
            if self._unsure is not None:
                self._reconcile()  # an earlier answer may have been stored though its reply was lost
            rs = self._rs
            emit = receive(rs, self.loop.config, decision)  # refused here: nothing is recorded
            assert isinstance(emit, Emit)
            call = rs.calls[decision.call_id]
            key = ledger_key(rs, self.loop.config, call) if decision.decision == "submitted" else None
            if key:  # a submitted outcome of a side-effecting call goes into the ledger: the call never runs
                self._tools.claim(key, call, False, frozenset())  # no-op when claimed before
                emit = Emit(emit.event, EffectDone(key, decision.content or "", decision.value, "ok"))
            try:
                self._leases.hold(self._rs.seq)
            except (RunLocked, CheckpointError) as exc:
                if not self._leases.moved_on(exc, self._rs.seq):
                    raise
                self._reload()
                raise ApprovalError(
                    f"call {decision.call_id!r} was not resolved here: another driver holds or moved the run on "
                    f"({exc}). This Run now shows the stored state: {self.state.value}.") from exc
            return self._write(emit)

    def _reload(self) -> None:
        """Fold the stored events again: this Run becomes what the store says."""
        events = self.store.load(self.run_id)
        self._rs = RunState.fold(events)
        self._events[:] = events
        self._leases.lease = None

    def follow_up(self, prompt: str | Message | list[Message] | list[dict[str, Any]]) -> Run:
        """Start a new run that continues this conversation with a new prompt.

        A pause left behind is resolved first: its waiting calls are denied ("abandoned"), so the history
        never holds an unanswered call. A finished run's history is taken as it is; calls a cancelled run
        left unanswered get a "skipped" result.
        """
        if self._rs.state is S.WAITING_APPROVAL:
            for call in self.pending_approvals():
                self.deny(call.call_id, "abandoned: the user moved on to a new request", by="follow_up")
            self.run_until(lambda ev: isinstance(ev, ResultsBound))  # calls that were approved earlier still run
            if self.state is S.RESULTS_READY:
                self._receive(Cancelled("abandoned for a new request (its waiting calls were denied)"))
        elif self._rs.state not in TERMINAL and self._rs.state is not S.NEW:
            raise RunNotPaused(f"the run is still going ({self._rs.state.value}); run, cancel or pause it first")
        history = complete_history(self.messages)
        if self.loop.system and history and history[0].role == "system":
            history = history[1:]
        new: Run = self.loop.start([*history, *coerce_messages(prompt)], operation_id=None)
        return new

    # -- perform, receive, append --------------------------------------------------------------------

    def _execute(self, calls: list[CallState]) -> BaseEvent:
        """Claim, run and answer ``calls`` (results in the model's order; a pause for a person last)."""
        rs, cfg, tools = self._rs, self.loop.config, self._tools
        if len(calls) == 1 and ledger_key(rs, cfg, calls[0]) is None and not looks_first(rs, cfg, calls[0]):
            c = calls[0]
            tool = self.loop.registry.get(c.name)
            assert tool is not None
            self._leases.waiting(rs.seq)
            try:
                ran, interrupted = tools.run([Job(c, tool, *call_limit(rs, cfg, c), claim=False, turn=rs.turn)])
            finally:
                self._leases.done_waiting()
            event = self._receive(ran[c.call_id])
            if interrupted:
                raise KeyboardInterrupt
            return event
        answers, firsts, jobs = admit(rs, cfg, tools, calls, self._reads)
        self._leases.waiting(rs.seq)  # a long tool keeps the run's lease alive
        try:
            ran, interrupted = tools.run(jobs)
        finally:
            self._leases.done_waiting()
        answers.update(ran)
        for cid, first in firsts.items():
            done = ran.get(first)
            answers[cid] = DuplicateDone(cid, first, done.outcome.content if isinstance(done, ToolReturned) else None)
        results = [answers[c.call_id] for c in calls if c.call_id in answers]
        emits = [receive(rs, cfg, r) for r in results]  # independent calls: each reads its own call only
        pause = [isinstance(e, Emit) and isinstance(e.event, ApprovalRequested) for e in emits]
        order = [i for i in range(len(results)) if not pause[i]] + [i for i in range(len(results)) if pause[i]]
        last = None
        for n, i in enumerate(order):  # the model's order; a pause for a person after every answer
            emit = emits[i]
            assert isinstance(emit, Emit)
            try:
                last = self._write(emit, results[i])
            except CheckpointError:
                self._held.extend(results[j] for j in order[n:])  # they ran: written next step, never run again
                raise
        if interrupted:
            raise KeyboardInterrupt
        assert last is not None
        return last

    def _drain(self) -> BaseEvent:
        """Receive and write the oldest held result (it stays held if the store refuses its event again)."""
        emit = receive(self._rs, self.loop.config, self._held[0])
        assert isinstance(emit, Emit)
        event = self._write(emit, self._held[0])
        self._held.pop(0)
        return event

    def _receive(self, result: Any) -> BaseEvent:
        """Receive an I/O result and write its event; held for the next step if the store refuses it."""
        emit = receive(self._rs, self.loop.config, result)
        assert isinstance(emit, Emit)
        try:
            return self._write(emit, result)
        except CheckpointError:
            self._held.append(result)  # what I/O brought back is not lost: the next step writes it
            raise

    def _write(self, emit: Emit, result: Any = None) -> BaseEvent:
        """Stamp, mask, persist, then apply: the event changes this Run only after the store accepted it.

        ``result`` is the I/O result the event was received from (None for the engine's own decisions).
        """
        rs, event = self._rs, emit.event
        stamp(rs, event, _now(UTC))
        if type(event) in TEXT_FIELDS:
            scrub(event, self._secrets, self.loop.config.settings, self.loop.event_settings, rs.calls)
        state = event.state
        allowed = TRANSITIONS[rs.state].get(event.type)
        if allowed is None or state not in allowed:  # an illegal event is refused before it is stored
            check_transition(rs.state, event.type, state)
        lease = self._leases.lease  # inline LeaseKeeper.fresh(): this runs for every event
        if lease is None or lease.expires - time.time() <= self._leases.half:
            self._leases.hold(rs.seq)
        try:
            self.store.append(event, effect=emit.effect)
        except CheckpointError:  # nothing changed here; the store may have kept it all the same (see _reconcile)
            self._unsure = (event, result)
            raise
        return self._applied(event)

    def _applied(self, event: BaseEvent) -> BaseEvent:
        """Fold a stored event into this Run and tell the listeners."""
        rs = self._rs
        rs.apply(event, checked=True)  # the transition was checked before the store took the event
        self._events.append(event)
        state = event.state
        if state is S.WAITING_APPROVAL or state in TERMINAL:
            if state in TERMINAL:
                self._tools.shutdown()
            self._leases.let_go()  # another process may take the run now
        for listener in self._listeners:
            try:
                listener(event, rs)
            except Exception as exc:  # the event is stored and applied: a listener's fault is warned, never undoes it
                listener_failed(listener, self.run_id, event, exc)
        return event

    def _reconcile(self) -> None:
        """After a failed write, adopt the event if the store kept it after all (see :mod:`agentnb.driver.reconcile`).

        Raises:
            CheckpointError: the store still cannot be read (the run stays unsure), or it holds events this driver
                did not write (this Run then shows the stored state).
        """
        assert self._unsure is not None
        attempted, result = self._unsure
        found = kept(self.store, self.run_id, len(self._events), attempted)
        self._unsure = None
        if found == "it":
            self._applied(attempted)
            if result is not None and self._held and self._held[0] is result:
                self._held.pop(0)  # its event is stored: never received and written again
        elif found == "other":
            self._reload()
            raise CheckpointError(f"run {self.run_id!r}: the store holds events this driver did not write (another "
                                  f"writer moved the run); this Run now shows the stored state: {self.state.value}")

    # -- resume, display -------------------------------------------------------------------------------

    @classmethod
    def resume(cls, run_id: str, *, loop: LoopSpec, store: Store | str | Path | None = None,
               allow_policy_change: bool = False, take_over: bool = False) -> Run:
        """Rebuild a stored run by folding its events, check it may go on, and return it (paused or ready).

        What is checked before anything executes, and what a run stopped mid-call does, is in
        :mod:`agentnb.driver.resume`. A live lease of another driver is never taken; an expired one only with
        ``take_over=True``. The log's approval decisions are not taken on trust: every call validated but not
        started is asked about again under this loop's tools and approval policy, and one that needs a person
        now, though its log says it did not, is asked for (an ``ApprovalRequested`` saying why, stored before
        this returns): the run comes back paused, and nothing of its turn starts until the person answers.

        Raises:
            CheckpointError: the stored events cannot be trusted: tampered, truncated, or sealed yet not a log a
                run can have (an approval resolved that was never requested, ...; the message names the event,
                and the fold's :class:`~agentnb.TranscriptError` is its cause).
            RunLocked: another driver holds the run (or held it: pass ``take_over=True`` once it expired).
            ResumeError: the run cannot go on under this loop; nothing was executed.
        """
        store_ = as_store(store) if store is not None else loop.store
        stored = load_checked(store_, loop, run_id, allow_policy_change=allow_policy_change)
        first = stored.first
        run = cls(loop, [m for m in first.messages if m.role != "system"] if loop.system else list(first.messages),
                  run_id=run_id, operation_id=first.settings.get("operation_id"), store=store_)
        run._initial, run._rs = list(first.messages), stored.state
        run._events.extend(stored.events)
        if stored.state.state not in TERMINAL:  # a finished run is only read (a fork's parent): no lease to take
            run._leases.take(stored.state.seq, take_over=take_over)  # the checks passed: only now take the run
        while (asked := owed_approval(run._rs, loop.config)) is not None:  # before anything runs (driver/resume.py)
            run._write(asked)
        if run.paused or run.done:
            run._leases.let_go()  # nothing to drive until a person answers: approvers elsewhere may take it
        if isinstance(loop.model, Seekable):
            loop.model.seek(run_id, stored.seek)
        if stored.state.state is S.MODEL_REQUESTED:
            run._receive(ModelLost())
        return run

    def _debugger(self) -> Any:  # a run left as a cell's last line shows its debugger: the one upward facade
        from .debugger import Debugger  # (tests/test_walls.py)
        return Debugger(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self._debugger()._repr_mimebundle_(**kwargs)

    def _ipython_display_(self) -> None:  # two outputs: a static view a saved notebook keeps, and the widget
        self._debugger()._ipython_display_()

    def __repr__(self) -> str:
        return (f"<agentnb.Run {self.run_id} {self.state.value} turns={self._rs.turns_completed} "
                f"calls={self._rs.tool_calls} events={len(self.transcript)}>")
