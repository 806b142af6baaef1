"""The driver: :class:`Run` performs the engine's actions; it is the only place that does I/O.

Theory of operation. ``Run`` asks :func:`~agentnb.engine.decide` what comes next and does it: appends the
event the engine built, pulls the next item of the model's answer (lazily, so one ``step()`` can be one
merged fragment: :mod:`agentnb.driver.stream`), runs started calls (:mod:`agentnb.driver.executor`),
summarizes for compression. What it brings back from I/O -- an item, a model error and the time spent, a
tool's outcome, a person's decision -- goes through the engine's functions for it
(:mod:`agentnb.engine.inputs`), which return the event; the driver stamps it with the time
(:func:`~agentnb.engine.stamp`), masks secrets in it (:mod:`agentnb.driver.scrub`), writes it to the
store, and only then folds it. Everything a ``Run`` knows comes from folding those events
(:class:`~agentnb.engine.RunState`).

Guarantees per crash point: an event changes the run only after the store accepted it, so a store fault
leaves the run equal to its checkpoint (stepping again carries on); a model item or a tool outcome whose
event could not be written is kept and written on the next step, never asked for or run again; the run's
lease (:mod:`agentnb.driver.lease`) keeps a second driver out. Resuming (:meth:`Run.resume`) folds the
stored log again and checks it may go on; forking (:meth:`Run.fork`, :mod:`agentnb.driver.fork`) folds a
prefix of it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .driver.approvals import check_request
from .driver.executor import Executor
from .driver.history import budget_settings, complete_history, summarize, summary_history
from .driver.lease import LeaseKeeper
from .driver.scrub import TEXT_FIELDS, scrub
from .driver.stream import ModelStream
from .driver.view import RunView
from .engine import (
    CallState,
    Compress,
    Emit,
    PullModel,
    RunState,
    RunTool,
    decide,
    finished,
    resolution,
    run_started,
    stamp,
    summarized,
)
from .events import BaseEvent, CallValidated, ResultsBound
from .exceptions import (
    ApprovalError,
    CheckpointError,
    RunLocked,
    RunNotPaused,
)
from .loop import Loop
from .messages import Message, coerce_messages
from .redact import RunSecrets, redact, redact_text
from .states import TERMINAL, TRANSITIONS, LoopState, S, check_transition
from .store import EffectDone, Store, as_store
from .tools import jsonable, render_value
from .transcript import Transcript

_now = datetime.now

__all__ = ["Loop", "Run"]


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

    def __init__(
        self, loop: Loop, messages: list[Message], *, run_id: str | None = None, operation_id: str | None = None,
        store: Store | None = None,
    ) -> None:
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
        self._cancel_reason: str | None = None
        self._exec = Executor(self)
        self._secrets = RunSecrets.for_tools(loop.registry)  # real secret arguments: memory only, never stored
        self._listeners: list[Callable[[BaseEvent], None]] = []
        self._model = ModelStream(self)
        self.prompt = list(messages)
        """The messages the run was started with (without the loop's system prompt)."""
        if loop.system:
            messages = [Message.system(loop.system), *messages]
        self._initial = messages

    # -- reading -------------------------------------------------------------------------------------

    @property
    def state(self) -> LoopState:
        """The loop state now."""
        return self._rs.state

    @property
    def output(self) -> Any:
        """The final answer: its text, or for a loop with ``output_type`` the typed object (None until then)."""
        spec = self.loop.config.output
        if spec is not None:
            return spec.typed(self._rs.final_output) if self._rs.output_ok and self._rs.state is S.COMPLETED else None
        return self._rs.output

    @property
    def reason(self) -> str | None:
        """Why the run ended, in words."""
        return self._rs.reason

    @property
    def messages(self) -> list[Message]:
        """The canonical conversation so far (a copy)."""
        if self._rs.state is S.NEW:
            return list(self._initial)
        return list(self._rs.messages)

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
        return RunView(self)

    @property
    def done(self) -> bool:
        """True once the run is in a terminal state."""
        return self._rs.state in TERMINAL

    @property
    def paused(self) -> bool:
        """True while the run waits for a person."""
        return self._rs.state is S.WAITING_APPROVAL

    @property
    def _owner(self) -> str:
        return self._leases.owner

    def pending_approvals(self) -> list[CallState]:
        """Calls waiting for approval, in the model's order."""
        return self._rs.pending_approvals()

    def on_event(self, callback: Callable[[BaseEvent], None]) -> None:
        """Call ``callback(event)`` after every appended event (the debugger listens here)."""
        self._listeners.append(callback)

    # -- driving -------------------------------------------------------------------------------------

    def step(self) -> BaseEvent | None:
        """Do exactly one event's worth of work and return that event.

        Returns None when there is nothing to do: the run is over, or it waits for an approval.

        Raises:
            CheckpointError: the store refused the event (locked, disk full, read-only); the run is left equal
                to its checkpoint, and stepping again carries on once the fault clears.
            RunLocked: another driver holds the run.
        """
        with self._drive:
            return self._step_locked()

    def _step_locked(self) -> BaseEvent | None:
        if self._rs.state is S.NEW:
            loop, cfg = self.loop, self.loop.config
            model = f"{getattr(loop.model, 'provider', '?')}:{getattr(loop.model, 'name', '?')}"
            return self._append(run_started(
                self.run_id, self._initial, model, loop.tool_infos, {
                    "max_turns": cfg.max_turns, "on_max_turns": cfg.budget.on_exhausted,
                    "budget": budget_settings(cfg.budget), "request": cfg.settings, "operation_id": self.operation_id,
                    "policy_revision": loop.policy_revision, "headless": cfg.headless,
                }))
        return self._step(batch=False)

    def _step(self, *, batch: bool) -> BaseEvent | None:
        rs = self._rs
        cfg = self.loop.config
        if self._cancel_reason is not None:
            reason, self._cancel_reason = self._cancel_reason, None
            return self._cancel_now(reason)
        action = decide(rs, cfg, time.time() if cfg.budget.deadline_s is not None else None)
        if type(action) is Emit:  # the common case first (five of the seven events of a round trip)
            event = self._append(action.event)
            if action.validated is not None and isinstance(event, CallValidated):  # run the call with it, later
                self._exec.validated[event.call_id] = (event.arguments, action.validated)
            return event
        if isinstance(action, PullModel):
            return self._model.pull()
        if isinstance(action, RunTool):
            if batch and cfg.budget.max_parallel > 1:
                return self._exec.execute([c for c in rs.calls.values() if c.status == "running"])
            return self._exec.execute([rs.calls[action.call_id]])
        if isinstance(action, Compress):
            return self._compress(action.tokens)
        return None  # Wait or Done

    def run(self) -> Run:
        """Step until the run ends or pauses for a person; returns the run (handy as a cell's last line).

        Unlike stepping, this runs the ready calls of a turn at the same time (up to ``max_parallel``).
        """
        with self._drive:
            if self._rs.state is S.NEW:
                self.step()
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
            self._cancel_reason = reason
            return None
        try:
            if self.done:
                return None
            if self._rs.state is S.NEW:
                self._step_locked()
            return self._cancel_now(reason)
        finally:
            self._drive.release()

    def _cancel_now(self, reason: str) -> BaseEvent:
        self._model.close()
        self._exec.cancel_running(reason)
        return self._append(finished(S.CANCELLED, reason))

    def fork(
        self, at: int | None = None, *, results: dict[str, Any] | None = None,
        arguments: dict[str, dict[str, Any]] | None = None,
    ) -> Run:
        """A new run from this one's conversation as it stood after event ``at`` (time travel); this run is untouched.

        The fork keeps the history up to the last complete point at or before ``at`` (a turn whose calls are
        not all answered yet, and a final answer, are dropped, so the model is asked again from there), and
        a seekable model (:class:`~agentnb.providers.base.Seekable`, e.g. a script) goes on from that point.

        Args:
            at: the event to fork after (default: the last one; with ``results`` only: where they were bound).
            results: tool results replaced by call id ("what if the tool had answered this?").
            arguments: call arguments replaced by call id ("what if the model had asked for this?"): the fork
                replays that call's turn with the edited arguments (validated against the tool's schema), runs
                its calls, and goes on with the loop's model.

        Example:
            >>> import agentnb as anb
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> run = loop.start("What's the weather in Paris?").run()
            >>> call = next(e.call_id for e in run.events if e.type == "ToolFinished")
            >>> other = run.fork(results={call: {"city": "Paris", "temp_c": -5, "sky": "snow"}}).run()
            >>> other.state.value, run.events[-1].type
            ('COMPLETED', 'RunFinished')
        """
        from .driver.fork import fork

        return fork(self, at, results=results, arguments=arguments)

    # -- approvals -----------------------------------------------------------------------------------

    def _pending(self, call_id: str) -> CallState:
        if self._rs.state is not S.WAITING_APPROVAL:
            raise RunNotPaused(f"the run is {self._rs.state.value}, not waiting for an approval")
        call = self._rs.calls.get(call_id)
        if call is None:
            known = ", ".join(c.call_id for c in self._rs.pending_approvals()) or "(none)"
            raise ApprovalError(f"no call {call_id!r} in this turn; calls waiting for approval: {known}")
        if call.status != "awaiting_approval":
            raise ApprovalError(f"call {call_id!r} is not waiting for approval (it is {call.status})")
        return call

    def _resolve(self, call: CallState, decision: str, effect: EffectDone | None = None, **answer: Any) -> BaseEvent:
        with self._drive:
            try:
                self._leases.hold(self._rs.seq)
            except (RunLocked, CheckpointError) as exc:
                if not self._leases.moved_on(exc, self._rs.seq):
                    raise
                self._reload()
                raise ApprovalError(
                    f"call {call.call_id!r} was not resolved here: another driver holds or moved the run on ({exc}). "
                    f"This Run now shows the stored state: {self.state.value}."
                ) from exc
            return self._append(resolution(self._rs, call, decision, **answer), effect=effect)

    def _reload(self) -> None:
        """Fold the stored events again: this Run becomes what the store says."""
        events = self.store.load(self.run_id)
        self._rs = RunState.fold(events)
        self._events[:] = events
        self._leases.lease = None

    def approve(
        self, call_id: str, *, by: str | None = None, note: str | None = None, arguments: dict[str, Any] | None = None,
        digest: str | None = None,
    ) -> BaseEvent:
        """Approve a waiting call, optionally with edited arguments (validated against the schema first).

        Then ``run.run()`` goes on. For a call whose outcome is unknown after a crash, approving means
        "run it again with the same idempotency key".

        Args:
            call_id: the call.
            by: who approved (recorded).
            note: why (recorded).
            arguments: edited arguments; validated against the tool's schema and recorded as edited.
            digest: the ``arguments_digest`` the approver saw; refused if the waiting arguments differ.

        Raises:
            RunNotPaused, ApprovalError: nothing waits, or the call is unknown or not waiting.
            ApprovalExpired: the request's expiry passed (nothing runs; the call can still be denied).
            DigestMismatch: the arguments are not the ones the approver saw.
            pydantic.ValidationError: edited arguments fail the tool's schema (nothing is recorded).
            InvalidArguments, ValueConversionError: edited arguments the value boundary refuses (a lone
                surrogate, nesting too deep, a non-finite number the schema does not allow; nothing is recorded).
        """
        call = self._pending(call_id)
        if call.kind == "client_result":
            raise ApprovalError(f"call {call_id!r} runs on the client: answer it with run.submit_result(...)")
        check_request(self, call, digest, for_approval=True)
        edited = None
        if arguments is not None:
            tool = self.loop.registry.get(call.name)
            assert tool is not None
            edited = tool.dump(tool.validate(arguments))
        return self._resolve(call, "approved", by=by, note=note, arguments=edited)

    def deny(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> BaseEvent:
        """Deny a waiting call; the model gets a "Denied by the user: <reason>" result and goes on."""
        call = self._pending(call_id)
        return self._resolve(call, "denied", by=by, note=reason)

    def submit_result(self, call_id: str, value: Any, *, by: str | None = None, note: str | None = None) -> BaseEvent:
        """Answer a waiting call with a result instead of running it.

        For a client-executed tool, ``value`` is what the client computed. For a call whose outcome was unknown
        after a crash, it is the reconciled outcome; it goes into the effect ledger, so the call never runs.
        """
        call = self._pending(call_id)
        check_request(self, call, None, for_approval=False)
        audit = redact(jsonable(value))  # converted once (a generator is consumed once); the ledger is stored too
        content = redact_text(render_value(audit))
        tool = self.loop.registry.get(call.name)
        key = call.idempotency_key
        effect = None
        if key and tool is not None and tool.side_effects:
            self.store.claim_effect(key, self.run_id, call.call_id, call.name)  # no-op when claimed before
            effect = EffectDone(key, content, audit, "ok")
        return self._resolve(call, "submitted", effect, by=by, note=note, content=content, value=audit)

    def follow_up(self, prompt: str | Message | list[Message] | list[dict[str, Any]]) -> Run:
        """Start a new run that continues this conversation with a new prompt.

        A pause left behind is resolved first: its waiting calls are denied ("abandoned"), so the history
        never holds an unanswered call. A finished run's history is taken as it is; calls a cancelled run
        left unanswered get a "skipped" result.
        """
        if self._rs.state is S.WAITING_APPROVAL:
            for call in self.pending_approvals():
                self._resolve(call, "denied", by="follow_up", note="abandoned: the user moved on to a new request")
            self.run_until(lambda ev: isinstance(ev, ResultsBound))  # calls that were approved earlier still run
            if self.state is S.RESULTS_READY:
                self._append(finished(S.CANCELLED, "abandoned for a new request (its waiting calls were denied)"))
        elif self._rs.state not in TERMINAL and self._rs.state is not S.NEW:
            raise RunNotPaused(f"the run is still going ({self._rs.state.value}); run, cancel or pause it first")
        history = complete_history(self.messages)
        if self.loop.system and history and history[0].role == "system":
            history = history[1:]
        return self.loop.start([*history, *coerce_messages(prompt)], operation_id=None)

    # -- I/O -----------------------------------------------------------------------------------------

    def _emit(self, action: Emit) -> BaseEvent:
        event = self._append(action.event)
        if action.validated is not None and isinstance(event, CallValidated):  # run the call with it, later
            self._exec.validated[event.call_id] = (event.arguments, action.validated)
        return event

    def _append(self, event: BaseEvent, effect: EffectDone | None = None) -> BaseEvent:
        """Stamp, mask, persist, then apply: the event changes this Run only after the store accepted it."""
        rs = self._rs
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
        self.store.append(event, effect=effect)  # raises CheckpointError (nothing changed here) on a store fault
        rs.apply(event, checked=True)  # the transition was checked above, before the store took the event
        self._events.append(event)
        if state is S.WAITING_APPROVAL or state in TERMINAL:
            self._let_go()
        if self._listeners:
            for listener in self._listeners:
                listener(event)
        return event

    def _let_go(self) -> None:
        """Release the lease when the run pauses for a person or ends: another process may take it then."""
        if self._rs.state in TERMINAL:
            self._exec.shutdown()
        self._leases.let_go()

    def _compress(self, tokens: int) -> BaseEvent:
        """Tier 1: summarize the older history with the summarizer; the engine falls back to pruning."""
        rs = self._rs
        cfg = self.loop.config
        kept: list[Message] | None = None
        removed: list[int] = []
        try:
            summary = summarize(cfg.summarizer, rs.messages, self.run_id)
            kept, removed = summary_history(rs.messages, summary, cfg.budget.keep_pairs)
        except Exception:  # a failing summarizer must not end the run: prune instead
            kept = None
        return self._emit(summarized(rs, cfg, tokens, kept, removed))

    # -- resume --------------------------------------------------------------------------------------

    @classmethod
    def resume(
        cls, run_id: str, *, loop: Loop, store: Store | str | Path | None = None, allow_policy_change: bool = False,
        take_over: bool = False,
    ) -> Run:
        """Rebuild a stored run by folding its events, check it may go on, and return it (paused or ready).

        Before anything executes: the checkpoint's seals are verified (a tampered or truncated checkpoint
        raises :class:`~agentnb.CheckpointError`); the loop's tools and approval policy must be those the run
        started with (``allow_policy_change`` to accept a change); every call still to run is validated
        against the current schema; recorded result bindings are recomputed. A run stopped in the middle of a
        model call asks the model again (a ``ModelRetried`` event); a run stopped in the middle of a
        side-effecting call consults the effect ledger (reuse the outcome, re-run an idempotent tool with the
        same key, or pause as "outcome unknown").

        One driver at a time: a run whose lease another driver holds raises :class:`~agentnb.RunLocked` (naming
        the owner and the expiry). A lease that expired without being released (its driver died) is taken over
        only with ``take_over=True``; a live lease never is. A paused or finished run holds no lease.

        Raises:
            CheckpointError: the stored events cannot be trusted.
            RunLocked: another driver holds the run (or held it: pass ``take_over=True`` once it expired).
            ResumeError: the run cannot go on under this loop; nothing was executed.
        """
        from .driver.resume import resume

        return resume(cls, run_id, loop, as_store(store) if store is not None else loop.store,
                      allow_policy_change=allow_policy_change, take_over=take_over)

    # -- display -------------------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """In a notebook, a run left as a cell's last line shows its debugger."""
        from .debugger import Debugger

        return Debugger(self)._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return (
            f"<agentnb.Run {self.run_id} {self.state.value} turns={self._rs.turns_completed} "
            f"calls={self._rs.tool_calls} events={len(self.transcript)}>"
        )
