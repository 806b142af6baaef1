"""The driver: :class:`Run` is the loop -- decide, perform through a port, receive, append -- and its public methods.

``Run`` asks :func:`~agentnb._engine.decide` what comes next. An :class:`~agentnb._engine.Emit` is appended as it
is; anything else is I/O a port performs, returning a typed record (:mod:`agentnb._engine.results`): the model
port pulls one item of the answer, the tool port runs calls (:func:`agentnb._driver.admit.perform`), a person
answers through :meth:`Run.approve` and its siblings. The journal (:mod:`agentnb._driver.journal`, with the
guarantees per crash point) receives each record, stores the event, then folds it and tells the listeners.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._driver.admit import perform
from ._driver.fork import ParentReads, lineage, plan_fork, resumed_loop
from ._driver.history import complete_history, started, summary
from ._driver.journal import Journal, Listener
from ._driver.lease import LeaseKeeper
from ._driver.loopspec import LoopSpec
from ._driver.model_port import ModelPort
from ._driver.resume import load_checked
from ._driver.tool_port import StopFlag, ToolPort
from ._engine import CallState, Compress, Emit, PullModel, RunState, RunTool, decide
from ._engine.inputs import request_for
from ._engine.results import Cancelled, Decision, Intervention
from ._engine.view import RunView
from ._messages import Message, coerce_messages
from ._redact import RunSecrets
from ._states import TERMINAL, LoopState, S
from ._transcript import Transcript
from .events import BaseEvent, ModelRetried, ResultsBound
from .exceptions import RunNotPaused
from .providers._base import Seekable
from .store import Store, as_store

_now = datetime.now

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
                 tool_port: type[ToolPort] = ToolPort, tags: tuple[str, ...] = ()) -> None:
        self.loop = loop
        self.run_id = run_id = run_id or f"run_{uuid.uuid4().hex[:12]}"
        self.operation_id = operation_id or run_id
        self.store = store = store if store is not None else loop.store
        self.transcript = Transcript([])
        self._drive = threading.RLock()  # held while stepping: cancel() from another thread asks, never races
        self._stop = StopFlag()
        secrets = RunSecrets.for_tools(loop.registry)  # real secret arguments: memory only, never stored
        self._leases = LeaseKeeper(store, run_id, loop.lease_ttl)
        self._model = ModelPort(loop.model, secrets, loop.config.budget, self._leases)
        self._tools = tool_port(store, loop.registry, run_id, secrets, loop.config.budget.max_parallel, self._stop)
        self._log = Journal(store, run_id, loop, self.transcript.events, self._leases, secrets, self._tools)
        self.prompt = list(messages)
        """The messages the run was started with (without the loop's system prompt)."""
        self._initial = [Message.system(loop.system), *messages] if loop.system else list(messages)
        self._lineage: dict[str, Any] | None = None  # a fork's lineage and effect policy (stored in RunStarted)
        self._reads = ParentReads(store, "", None)  # a fork's parent's reads (reads="reuse")
        self._tags = tags  # stored in RunStarted.settings["tags"] (Loop.start checks them)

    # -- reading -------------------------------------------------------------------------------------

    @property
    def state(self) -> LoopState:
        """The loop state now."""
        return self._log.rs.state

    @property
    def output(self) -> Any:
        """The final answer: its text, or for a loop with ``output_type`` the typed object (None until then)."""
        spec, rs = self.loop.config.output, self._log.rs
        if spec is not None:
            return spec.typed(rs.final_output) if rs.output_ok and rs.state is S.COMPLETED else None
        return rs.output

    @property
    def reason(self) -> str | None:
        """Why the run ended, in words."""
        return self._log.rs.reason

    @property
    def messages(self) -> list[Message]:
        """The canonical conversation so far (a copy)."""
        return list(self._initial) if self._log.rs.state is S.NEW else list(self._log.rs.messages)

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
        return RunView(lambda: self._log.rs, self._log.events)

    @property
    def done(self) -> bool:
        """True once the run is in a terminal state."""
        return self._log.rs.state in TERMINAL

    @property
    def paused(self) -> bool:
        """True while the run waits for a person."""
        return self._log.rs.state is S.WAITING_APPROVAL

    def pending_approvals(self) -> list[CallState]:
        """Calls waiting for approval, in the model's order."""
        return self._log.rs.pending_approvals()

    def on_event(self, callback: Listener) -> None:
        """Call ``callback(event, state)`` after each event, ``state`` the run's own fold: read it, never change it."""
        self._log.listeners.append(callback)

    # -- driving: decide, perform through a port, receive, append ------------------------------------

    def step(self) -> BaseEvent | None:
        """Do exactly one event's worth of work and return that event (None: the run is over or waits for a person).

        Raises:
            CheckpointError: the store refused the event; the run is left equal to its checkpoint (step again).
            RunLocked: another driver holds the run.
        """
        with self._drive:
            self._log.settle()
            return self._started() if self._log.rs.state is S.NEW else self._step(batch=False)

    def _started(self) -> BaseEvent:
        return self._log.write(started(self.run_id, self._initial, self.loop, self.operation_id, self._lineage,
                                       self.store, self._tags))

    def _step(self, *, batch: bool) -> BaseEvent | None:
        log = self._log
        if log.unsure is not None:
            log.settle()
        if log.held:
            return log.drain()
        if self._stop.reason is not None:
            self._model.close()
            return log.cancelled(self._stop.take() or "")
        rs, cfg = log.rs, self.loop.config
        action = decide(rs, cfg, time.time() if cfg.budget.deadline_s is not None else None)
        if type(action) is Emit:  # the common case first (five of the seven events of a round trip)
            return log.write(action)
        if isinstance(action, PullModel):
            event = log.receive(self._model.pull(lambda: request_for(rs, cfg, self.run_id), rs.retries == 0, rs.seq))
            if isinstance(event, ModelRetried):
                self._model.back_off(event.delay_s)
            return event
        if isinstance(action, RunTool):  # under run(), every running call of the turn at once
            return log.receive_all(*perform(rs, cfg, self._tools, self._leases, action.call_id, batch, self._reads))
        if isinstance(action, Compress):
            return log.receive(summary(rs, cfg, self.run_id, action.tokens))
        return self._model.idle(action)  # Wait or Done: None (a run that is over drops its renderings)

    def run(self) -> Run:
        """Step until the run ends or pauses for a person; returns the run (handy as a cell's last line).

        Unlike stepping, this runs the ready calls of a turn at the same time (up to ``max_parallel``).
        """
        with self._drive:
            self._log.settle()
            if self._log.rs.state is S.NEW:
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

        Safe from any thread: while another drives the run, this asks it to stop at its next boundary (finished
        calls keep their results, calls not started get ``skipped`` ones) and returns None.
        """
        if not self._drive.acquire(blocking=False):
            self._stop.reason = reason
            return None
        try:
            self._log.settle()  # the run's end may have been stored though its reply was lost
            if self.done:
                return None
            if self._log.rs.state is S.NEW:
                self._started()
            self._model.close()
            return self._log.cancelled(reason)
        finally:
            self._drive.release()

    def interject(self, text: str, *, by: str | None = None) -> BaseEvent:
        """While the run is paused, tell the model something: a user message its next request sends after results."""
        return _told(self, Intervention(text, by))

    def cancel_call(self, call_id: str, reason: str, *, by: str | None = None) -> BaseEvent:
        """While the run is paused, cancel one call not answered yet; the model reads "Cancelled by <by>: <reason>"."""
        return _told(self, Intervention(reason, by, call_id=call_id))

    def end(self, reason: str, *, by: str | None = None) -> BaseEvent:
        """While the run is paused, end it (``CANCELLED``; ``run.reason`` says who ended it and why)."""
        return _told(self, Intervention(reason, by, end=True))

    def release(self) -> None:
        """Let go of the run's lease now, so another process may drive it (stepping again takes it back)."""
        with self._drive:
            self._leases.let_go()

    # -- a person's answers ------------------------------------------------------------------------------

    def approve(self, call_id: str, *, by: str | None = None, note: str | None = None,
                arguments: dict[str, Any] | None = None, digest: str | None = None) -> BaseEvent:
        """Approve a waiting call, optionally with edited arguments (validated against the schema first).

        For a call whose outcome is unknown after a crash it means "run it again with the same idempotency key".
        ``digest`` is the ``arguments_digest`` the approver saw.

        Raises:
            RunNotPaused, ApprovalError: nothing waits, or the call is unknown or not waiting.
            ApprovalExpired: the request's expiry passed (nothing runs; the call can still be denied).
            DigestMismatch: the arguments are not the ones the approver saw.
            pydantic.ValidationError, InvalidArguments, ValueConversionError: edited arguments that do not fit.
        """
        with self._drive:
            return self._log.decided(Decision(call_id, "approved", _now(UTC), by, note, arguments, digest))

    def deny(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> BaseEvent:
        """Deny a waiting call; the model gets a "Denied by the user: <reason>" result and goes on."""
        with self._drive:
            return self._log.decided(Decision(call_id, "denied", _now(UTC), by, reason))

    def submit_result(self, call_id: str, value: Any, *, by: str | None = None, note: str | None = None) -> BaseEvent:
        """Answer a waiting call with a result instead of running it (a client tool's, or a reconciled outcome).

        A side-effecting call's result goes into the effect ledger, so the call never runs.
        """
        with self._drive:
            return self._log.submitted(call_id, value, by, note)

    def follow_up(self, prompt: str | Message | list[Message] | list[dict[str, Any]]) -> Run:
        """Start a new run that continues this conversation with a new prompt.

        A pause left behind is resolved first (its waiting calls denied as "abandoned"), and calls left unanswered
        get a "skipped" result: the history never holds an unanswered call.
        """
        state = self._log.rs.state
        if state is S.WAITING_APPROVAL:
            for call in self.pending_approvals():
                self.deny(call.call_id, "abandoned: the user moved on to a new request", by="follow_up")
            self.run_until(lambda ev: isinstance(ev, ResultsBound))  # calls that were approved earlier still run
            if self.state is S.RESULTS_READY:
                self._log.receive(Cancelled("abandoned for a new request (its waiting calls were denied)"))
        elif state not in TERMINAL and state is not S.NEW:
            raise RunNotPaused(f"the run is still going ({state.value}); run, cancel or pause it first")
        new: Run = self.loop.start([*complete_history(self.messages, self.loop.system), *coerce_messages(prompt)])
        return new

    # -- fork, resume, display ---------------------------------------------------------------------------

    def fork(self, at: int | None = None, *, results: dict[str, Any] | None = None,
             arguments: dict[str, dict[str, Any]] | None = None, effects: str = "ask", reads: str = "rerun",
             rerun: Collection[str] = (), run_id: str | None = None, request: dict[str, Any] | None = None) -> Run:
        """A new run from this one's conversation as it stood after event ``at`` (time travel); this run is untouched.

        ``at``: the event to fork after (default: the last; with ``results`` only, where they were bound); ``results``,
        ``arguments``: replaced by call id; ``request``: the request at ``at`` edited. A write any run of the operation
        made is never made again; one nobody made follows ``effects`` (``"ask"``, ``"simulate"``, ``"run"``); ``rerun``
        names tools done again; ``reads="reuse"`` answers reads from this run's results.
        """
        plan = plan_fork(self.events, self._initial, self.prompt, self.loop, at, results=results, arguments=arguments,
                         lineage=lineage(self.run_id, effects, reads, rerun), request=request)
        forked: Run = plan.loop.start(plan.history, run_id=run_id, operation_id=self.operation_id, store=self.store)
        forked._lineage = plan.lineage
        forked._reads = ParentReads(self.store, self.run_id, self.events if reads == "reuse" else None)
        if isinstance(plan.loop.model, Seekable):
            plan.loop.model.seek(forked.run_id, plan.seek)
        return forked

    @classmethod
    def resume(cls, run_id: str, *, loop: LoopSpec, store: Store | str | Path | None = None,
               allow_policy_change: bool = False, take_over: bool = False) -> Run:
        """Rebuild a stored run by folding its events, check it may go on, and return it (paused or ready).

        What is checked first, and what is asked again, is in :mod:`agentnb._driver.resume`. A live lease of another
        driver is never taken; an expired one only with ``take_over=True``.

        Raises:
            CheckpointError: the stored events cannot be trusted (tampered, truncated, or not a log a run can have).
            RunLocked: another driver holds the run (or held it: pass ``take_over=True`` once it expired).
            ResumeError: the run cannot go on under this loop; nothing was executed.
        """
        store_ = as_store(store) if store is not None else loop.store
        stored = load_checked(store_, loop, run_id, allow_policy_change=allow_policy_change)
        loop = resumed_loop(store_, loop, stored.first, stored.events)  # a fork's edited turn, if not stored yet
        run = cls(loop, stored.prompt(loop.system), run_id=run_id, store=store_,
                  operation_id=stored.first.settings.get("operation_id"))
        run._initial = list(stored.first.messages)
        run._log.resumed(stored, take_over=take_over, model=loop.model)
        return run

    def _debugger(self) -> Any:  # a run left as a cell's last line shows its debugger: the one upward facade
        from ._debugger import Debugger  # (tests/test_walls.py)
        return Debugger(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self._debugger()._repr_mimebundle_(**kwargs)

    def _ipython_display_(self) -> None:  # two outputs: a static view a saved notebook keeps, and the widget
        self._debugger()._ipython_display_()

    def __repr__(self) -> str:
        return (f"<agentnb.Run {self.run_id} {self.state.value} turns={self._log.rs.turns_completed} "
                f"calls={self._log.rs.tool_calls} events={len(self.transcript)}>")


def _told(run: Run, said: Intervention) -> BaseEvent:  # a person steps into a paused run (Journal.told)
    with run._drive:
        return run._log.told(said)
