"""The driver: :class:`Loop` holds what a run needs, :class:`Run` performs the engine's actions.

``Run`` is the only place that does I/O: it asks the model for turns (pulling stream items lazily, so one
``step()`` can be one merged fragment), runs tools through the registry, and appends every event to the
transcript. Everything it knows comes from folding those events (:class:`~agentnb.engine.RunState`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import random
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from . import binding
from .engine import (
    FINALIZE_PROMPT,
    CallState,
    Compress,
    Done,
    Emit,
    EngineConfig,
    PullModel,
    RunState,
    RunTool,
    Wait,
    arguments_digest,
    check_tool_choice,
    decide,
    prune_step,
    request_hash,
    verify_bindings,
)
from .events import (
    ApprovalRequested,
    ApprovalResolved,
    ArgumentsMerged,
    BaseEvent,
    CallRejected,
    CallValidated,
    CompressionApplied,
    ModelRequested,
    ModelRetried,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    ToolInfo,
    TurnCompleted,
)
from .exceptions import (
    ApprovalError,
    ApprovalExpired,
    CheckpointError,
    DigestMismatch,
    ModelError,
    ResumeError,
    RunLocked,
    RunNotPaused,
    StreamInterrupted,
)
from .guards import Budget, estimate_tokens, prune
from .messages import Message, ModelTurn, TextPart, ToolCallPart, ToolResultPart, coerce_messages
from .output import OUTPUT_TOOL, OutputSpec
from .providers.base import ArgumentsDelta, HistoryView, Model, ModelRequest, StreamItem, TextDelta
from .redact import RunSecrets, redact, redact_outcome, redact_text, register_credentials
from .states import TERMINAL, TRANSITIONS, LoopState, S, check_transition
from .store import LEASE_TTL, Effect, EffectDone, Lease, Store, as_store
from .tools import (
    Outcome,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolSource,
    as_registry,
    describe_errors,
    jsonable,
    render_value,
    timeout_outcome,
)
from .transcript import Transcript

_now = datetime.now


class Loop:
    """A tool-calling loop: a model, tools, and the rules of the run.

    Args:
        model: anything with ``respond(request)`` -- :class:`~agentnb.ScriptedModel` offline, or a provider model.
        tools: functions decorated with :func:`~agentnb.tool` (plain functions are wrapped).
        system: an optional system prompt placed first in every run.
        max_turns: model turns allowed before the cap policy applies.
        on_max_turns: ``"finalize"`` (one more, tools-free call asking for an answer from what the model
            has) or ``"stop"`` (end in ``BUDGET_EXHAUSTED``).
        settings: request settings passed to the model on every turn (temperature, max_tokens, ...).
        max_retries: attempts after the first for retryable model errors (429, 5xx, connection errors).
        retry_base_delay: seconds before the first retry; doubled each time, with jitter, capped at 30 s; a
            longer ``retry-after`` from the provider wins.
        max_retry_time: seconds a request may spend retrying in all (None: bounded by ``max_retries`` only).
        finalize_prompt: the instruction of the finalization call.
        store: where events and the effect ledger go: an :class:`~agentnb.SqliteStore` (or a path to one) for
            runs that survive the process; default an in-memory store.
        headless: nobody can approve: calls that need a person get a "denied (headless)" result.
        approval: a loop-wide approval policy (``True``, ``False`` or ``callable(call, state) -> bool``). It can
            ask for approval of any call; it never waives a tool's own approval (``approval=True``, or a
            ``write``/``dangerous`` risk) unless ``override_tool_approval=True``. A policy that raises means "a
            person must decide" (headless: denied), with its error in the approval event.
        override_tool_approval: let ``approval`` decide alone, waiving tools' own approvals; every waiver is
            recorded as an ``approval_override`` guard event.
        approval_ttl: seconds an approval request stays valid (default: no expiry).
        lease_ttl: seconds the run's lease lasts without renewal (one driver at a time; see :class:`Run`).
        output_type: the type the final answer must have (a pydantic model, a TypedDict, a dataclass, a list of
            them, or a JSON schema as a dict); the model answers by calling the output tool ``final_result``,
            ``run.output`` is then the typed object (see :mod:`agentnb.output`).
        output_retries: correction turns allowed for final answers that do not fit ``output_type``.
        output_mode: ``"native"`` asks for the output with the provider's structured-output mode (Chat Completions
            ``response_format``, Responses ``text.format``, Gemini ``responseJsonSchema``; the answer is JSON
            text), ``"tool"`` with the output tool; ``"auto"`` (default) takes native where the model's wire API
            has it and the tool elsewhere (Anthropic, scripted and fallback models).
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or ``{"name": "tool"}``, rendered as each wire API
            expects; or a per-turn policy ``callable(state) -> choice`` (e.g. force ``lookup_order`` on the first
            turn, then ``"auto"``), recorded on every ``ModelRequested`` event.
        parallel_tool_calls: False asks the model for at most one call per turn (None: the provider's default).
        budget: an :class:`~agentnb.Budget` (turns, tool calls, tokens, cost, deadline, parallelism, result
            size, repetition, context window); ``max_turns``/``on_max_turns`` are shortcuts for its first fields.
        summarizer: a model (or ``callable(messages) -> str``) that summarizes older history when the context
            passes its threshold (tier 1); without one, compression prunes (tier 2).
        tracer_provider: an OpenTelemetry tracer provider (or an :class:`agentnb.otel.Tracing`): every run
            is written as GenAI spans as it happens.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> run = loop.start("What's the weather in Paris?").run()
        >>> run.state, run.output
        (<LoopState.COMPLETED: 'COMPLETED'>, 'It is 18 °C and sunny in Paris.')
    """

    def __init__(
        self,
        model: Model,
        tools: ToolRegistry | Sequence[Tool | ToolSource | Callable[..., Any]] = (),
        *,
        system: str | None = None,
        max_turns: int = 25,
        on_max_turns: Literal["finalize", "stop"] = "finalize",
        settings: dict[str, Any] | None = None,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
        max_retry_time: float | None = 120.0,
        finalize_prompt: str = FINALIZE_PROMPT,
        store: Store | str | Path | None = None,
        headless: bool = False,
        approval: bool | Callable[[Any, Any], bool] | None = None,
        override_tool_approval: bool = False,
        approval_ttl: float | None = None,
        budget: Budget | None = None,
        summarizer: Any = None,
        lease_ttl: float = LEASE_TTL,
        output_type: Any = None,
        output_retries: int = 2,
        output_mode: Literal["auto", "tool", "native"] = "auto",
        tool_choice: Any = None,
        parallel_tool_calls: bool | None = None,
        tracer_provider: Any = None,
    ) -> None:
        if not callable(getattr(model, "respond", None)):
            raise TypeError(f"model must have a respond(request) method, got {type(model).__name__}")
        if on_max_turns not in ("finalize", "stop"):
            raise ValueError(f"on_max_turns must be 'finalize' or 'stop', got {on_max_turns!r}")
        settings = dict(settings or {})
        policy: Callable[[Any], Any] | None = None
        if callable(tool_choice):
            policy = tool_choice
        elif tool_choice is not None:
            if "tool_choice" in settings:
                raise ValueError("give tool_choice= or settings['tool_choice'], not both")
            names = [*as_registry(tools).names, *([OUTPUT_TOOL] if output_type is not None else [])]
            settings["tool_choice"] = check_tool_choice(tool_choice, names)
        if parallel_tool_calls is not None:
            settings["parallel_tool_calls"] = bool(parallel_tool_calls)
        if budget is None:
            budget = Budget(max_turns=max_turns, on_exhausted=on_max_turns)
        elif (max_turns, on_max_turns) != (25, "finalize"):
            raise ValueError("give max_turns and on_max_turns inside the Budget when you pass one")
        self.model = model
        self.registry = as_registry(tools)
        self.system = system
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.max_retry_time = max_retry_time
        self.config = EngineConfig(
            registry=self.registry,
            budget=budget,
            settings=settings,
            finalize_prompt=finalize_prompt,
            headless=headless,
            approval=approval,
            override_tool_approval=override_tool_approval,
            approval_ttl=approval_ttl,
            summarizer=summarizer,
            output=None if output_type is None else OutputSpec.of(
                output_type, retries=output_retries, native=_native_output(model, output_mode)),
            tool_choice=policy,
        )
        if self.config.output is not None and self.registry.get(self.config.output.name) is not None:
            raise ValueError(f"a tool is named {self.config.output.name!r}, the output tool's name; rename it")
        self.lease_ttl = lease_ttl
        self.store = as_store(store)
        self.event_settings = redact(self.config.settings)
        register_credentials(model)  # every key the model (or the models it wraps) holds, whatever its shape
        self.policy_revision = policy_revision(self.registry, approval, headless, override_tool_approval)
        self.tracer_provider = tracer_provider  # OpenTelemetry export of every run: agentnb.otel.Tracing

    @property
    def tools(self) -> list[Tool]:
        """The loop's tools."""
        return list(self.registry)

    @property
    def tool_infos(self) -> list[ToolInfo]:
        """The tools as offered to the model: the registry's, plus the output tool of an ``output_type`` loop."""
        output = self.config.output
        return self.registry.infos if output is None or output.native else [*self.registry.infos, output.info()]

    def start(
        self, prompt: str | Message | list[Message] | list[dict[str, Any]], *, run_id: str | None = None,
        operation_id: str | None = None,
    ) -> Run:
        """Begin a run from a prompt (or a prior message list). Nothing is sent until you step or run it.

        ``operation_id`` names the business operation the run serves (default: the run id); idempotency keys
        derive from it, so two runs of one operation never repeat each other's writes.
        """
        run = Run(self, coerce_messages(prompt), run_id=run_id, operation_id=operation_id)
        if self.tracer_provider is not None:  # an event listener writes the spans (agentnb.otel)
            from .otel.export import as_tracing

            as_tracing(self.tracer_provider).attach(run)
        return run

    def __repr__(self) -> str:
        model = f"{getattr(self.model, 'provider', '?')}:{getattr(self.model, 'name', '?')}"
        return f"<agentnb.Loop model={model} tools={self.registry.names} max_turns={self.config.max_turns}>"


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
        self, loop: Loop, messages: list[Message], *, run_id: str | None = None, operation_id: str | None = None
    ) -> None:
        self.loop = loop
        self.run_id = run_id or f"run_{uuid.uuid4().hex[:12]}"
        self.operation_id = operation_id or self.run_id
        self.store = loop.store
        self._rs = RunState()
        self.transcript = Transcript([])
        self._events = self.transcript.events
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """Who this driver is, in the run's lease."""
        self._lease: Lease | None = None
        self._half_ttl = loop.lease_ttl / 2
        self._drive = threading.RLock()
        """Held while stepping: cancel() from another thread asks the driver instead of racing it."""
        self._cancel_reason: str | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._unsaved: dict[str, tuple[Outcome, dict[str, Any], EffectDone | None]] = {}
        """Outcomes of calls that ran but whose events a store fault kept from being written (written next)."""
        self._held_item: StreamItem | None = None
        """A stream item pulled from the model whose event a store fault kept out (written next step)."""
        self._secrets = RunSecrets.for_tools(loop.registry)  # real secret arguments: memory only, never stored
        self._call_ids: tuple[list[Message], int, set[str]] = ([], 0, set())  # ids in the conversation so far
        self._listeners: list[Callable[[BaseEvent], None]] = []
        self._stream: Iterator[StreamItem] | None = None
        self._t0 = 0.0
        self._retry_at = 0.0
        self._first_attempt = 0.0
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
        """The folded state (read-only by convention): calls, usage, counters."""
        return self._rs

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
        rs = self._rs
        if rs.state is S.NEW:
            return self._append(RunStarted, S.READY, {
                "messages": self._initial,
                "model": f"{getattr(self.loop.model, 'provider', '?')}:{getattr(self.loop.model, 'name', '?')}",
                "tools": self.loop.tool_infos,
                "settings": {
                    "max_turns": self.loop.config.max_turns,
                    "on_max_turns": self.loop.config.budget.on_exhausted,
                    "budget": _budget_settings(self.loop.config.budget),
                    "request": self.loop.config.settings,
                    "operation_id": self.operation_id,
                    "policy_revision": self.loop.policy_revision,
                    "headless": self.loop.config.headless,
                },
            })
        return self._step(batch=False)

    def _step(self, *, batch: bool) -> BaseEvent | None:
        rs = self._rs
        cfg = self.loop.config
        if self._cancel_reason is not None:
            reason, self._cancel_reason = self._cancel_reason, None
            return self._cancel_now(reason)
        if cfg.budget.deadline_s is not None:
            rs.now = time.time()
        action = decide(rs, cfg)
        if isinstance(action, Emit):
            return self._append(action.cls, action.state, action.fields)
        if isinstance(action, PullModel):
            return self._pull()
        if isinstance(action, RunTool):
            if batch and cfg.budget.max_parallel > 1:
                return self._execute([c for c in rs.calls.values() if c.status == "running"])
            return self._execute([rs.calls[action.call_id]])
        if isinstance(action, Compress):
            return self._compress(action.tokens)
        if isinstance(action, Wait | Done):
            return None
        raise AssertionError(f"unknown action {action!r}")  # pragma: no cover

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
        self._close_stream()
        for c in [c for c in self._rs.calls.values() if c.status == "running"]:  # started, never executed
            if c.call_id in self._unsaved:  # it did run: record what happened, never "skipped"
                out, extra, effect = self._unsaved.pop(c.call_id)
                self._finished(c, out, effect=effect, **extra)
            else:
                self._finished(c, _skipped(f"the run was cancelled ({reason}) before this call ran"))
        return self._append(RunFinished, S.CANCELLED, {"final": S.CANCELLED, "reason": reason, "output": None})

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

    def _resolve(self, call: CallState, fields: dict[str, Any], effect: EffectDone | None = None) -> BaseEvent:
        still_waiting = any(
            c.status == "awaiting_approval" and c.call_id != call.call_id for c in self._rs.calls.values()
        )
        with self._drive:
            try:
                self._hold()
            except (RunLocked, CheckpointError) as exc:
                if not self._moved_on(exc):
                    raise
                self._reload()
                raise ApprovalError(
                    f"call {call.call_id!r} was not resolved here: another driver holds or moved the run on ({exc}). "
                    f"This Run now shows the stored state: {self.state.value}."
                ) from exc
            after = S.RESULTS_READY if call.kind == "escalation" else S.EXECUTING
            return self._append(
                ApprovalResolved, S.WAITING_APPROVAL if still_waiting else after,
                {"approval_id": call.approval_id or "", "call_id": call.call_id, **fields}, effect=effect,
            )

    def _moved_on(self, exc: Exception) -> bool:
        """True when ``exc`` means another driver holds the run or wrote past this one (not a store fault)."""
        if isinstance(exc, RunLocked):
            return True
        try:
            return len(self.store.load(self.run_id)) > self._rs.seq
        except CheckpointError:
            return False

    def _reload(self) -> None:
        """Fold the stored events again: this Run becomes what the store says."""
        events = self.store.load(self.run_id)
        rs = RunState()
        for ev in events:
            rs.apply(ev)
        self._rs = rs
        self._events[:] = events
        self._lease = None

    def _request_for(self, call: CallState) -> ApprovalRequested:
        for ev in reversed(self._events):
            if isinstance(ev, ApprovalRequested) and ev.call_id == call.call_id:
                return ev
        raise ApprovalError(f"no approval request for call {call.call_id!r}")  # pragma: no cover - fold invariant

    def _check_request(self, call: CallState, digest: str | None, *, for_approval: bool) -> ApprovalRequested:
        req = self._request_for(call)
        expires = req.expires_at
        if for_approval and expires is not None and datetime.now(UTC) > expires:
            raise ApprovalExpired(
                f"the approval request for call {call.call_id!r} expired at {expires.isoformat(timespec='seconds')}; "
                "nothing ran. Deny it (run.deny) or start again."
            )
        current = arguments_digest(call.name, call.arguments)
        if current != req.arguments_digest:
            raise DigestMismatch(f"call {call.call_id!r}: its arguments changed since approval was requested")
        if digest is not None and digest != current:
            raise DigestMismatch(
                f"call {call.call_id!r}: the arguments you approved (digest {digest[:12]}…) are not the ones "
                f"waiting (digest {current[:12]}…); nothing ran"
            )
        return req

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
        self._check_request(call, digest, for_approval=True)
        edited = None
        if arguments is not None:
            tool = self.loop.registry.get(call.name)
            assert tool is not None
            edited = tool.dump(tool.validate(arguments))
        return self._resolve(call, {"decision": "approved", "by": by, "note": note, "arguments": edited})

    def deny(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> BaseEvent:
        """Deny a waiting call; the model gets a "Denied by the user: <reason>" result and goes on."""
        call = self._pending(call_id)
        return self._resolve(call, {"decision": "denied", "by": by, "note": reason})

    def submit_result(self, call_id: str, value: Any, *, by: str | None = None, note: str | None = None) -> BaseEvent:
        """Answer a waiting call with a result instead of running it.

        For a client-executed tool, ``value`` is what the client computed. For a call whose outcome was unknown
        after a crash, it is the reconciled outcome; it goes into the effect ledger, so the call never runs.
        """
        call = self._pending(call_id)
        self._check_request(call, None, for_approval=False)
        audit = redact(jsonable(value))  # converted once (a generator is consumed once); the ledger is stored too
        content = redact_text(render_value(audit))
        tool = self.loop.registry.get(call.name)
        key = call.idempotency_key
        effect = None
        if key and tool is not None and tool.side_effects:
            self.store.claim_effect(key, self.run_id, call.call_id, call.name)  # no-op when claimed before
            effect = EffectDone(key, content, audit, "ok")
        return self._resolve(call, {"decision": "submitted", "by": by, "note": note, "content": content,
                                    "value": audit}, effect=effect)

    def follow_up(self, prompt: str | Message | list[Message] | list[dict[str, Any]]) -> Run:
        """Start a new run that continues this conversation with a new prompt.

        A pause left behind is resolved first: its waiting calls are denied ("abandoned"), so the history
        never holds an unanswered call. A finished run's history is taken as it is; calls a cancelled run
        left unanswered get a "skipped" result.
        """
        if self._rs.state is S.WAITING_APPROVAL:
            for call in self.pending_approvals():
                self._resolve(call, {"decision": "denied", "by": "follow_up",
                                     "note": "abandoned: the user moved on to a new request"})
            self.run_until(lambda ev: ev.type == "ResultsBound")  # calls that were approved earlier still run
            if self.state is S.RESULTS_READY:
                self._finish(S.CANCELLED, "abandoned for a new request (its waiting calls were denied)")
        elif self._rs.state not in TERMINAL and self._rs.state is not S.NEW:
            raise RunNotPaused(f"the run is still going ({self._rs.state.value}); run, cancel or pause it first")
        history = complete_history(self.messages)
        if self.loop.system and history and history[0].role == "system":
            history = history[1:]
        return self.loop.start([*history, *coerce_messages(prompt)], operation_id=None)

    # -- I/O -----------------------------------------------------------------------------------------

    def _append(
        self, cls: type[BaseEvent], state: LoopState, fields: dict[str, Any], effect: EffectDone | None = None
    ) -> BaseEvent:
        """Persist, then apply: the event changes this Run only after the store accepted it."""
        if cls in _SCRUB:
            fields = self._scrub(cls, fields)
        rs = self._rs
        turn = rs.turn + 1 if cls is ModelRequested else rs.turn
        event = cls(seq=rs.seq, ts=_now(UTC), run_id=self.run_id, turn=turn, state=state, **fields)
        allowed = TRANSITIONS[rs.state].get(event.type)
        if allowed is None or state not in allowed:  # an illegal event is refused before it is stored
            check_transition(rs.state, event.type, state)
        lease = self._lease
        if lease is None or lease.expires - time.time() <= self._half_ttl:
            self._hold()
        self.store.append(event, effect=effect)  # raises CheckpointError (nothing changed here) on a store fault
        rs.apply(event)
        self._events.append(event)
        if state is S.WAITING_APPROVAL or state in TERMINAL:
            self._let_go()
        if self._listeners:
            for listener in self._listeners:
                listener(event)
        return event

    def _hold(self) -> None:
        """Take or renew the run's lease when it is missing or half spent (one store write per half-TTL)."""
        lease = self._lease
        if lease is not None and lease.expires - time.time() > self._half_ttl:
            return
        self._lease = self.store.acquire_lease(self.run_id, self._owner, self.loop.lease_ttl, seq=self._rs.seq)

    def _let_go(self) -> None:
        """Release the lease when the run pauses for a person or ends: another process may take it then."""
        if self._executor is not None and self._rs.state in TERMINAL:
            self._executor.shutdown(wait=False)  # idle threads go now, not when the Run is collected
            self._executor = None
        if self._lease is None:
            return
        self._lease = None
        try:
            self.store.release_lease(self.run_id, self._owner)
        except CheckpointError:  # it expires on its own; the event that paused or ended the run is stored
            pass

    def _scrub(self, cls: type[BaseEvent], fields: dict[str, Any]) -> dict[str, Any]:
        """Redact credentials at the source, before an event exists (see :mod:`agentnb.redact`)."""
        secrets = self._secrets
        if cls is ArgumentsMerged:  # a fragment shows what is decided; lengths count what is shown
            shown = secrets.fragment(fields["index"], fields["name"], fields["fragment"])
            length = self._rs.argument_lengths.get(fields["index"], 0) + len(shown.encode())
            return {**fields, "fragment": shown, "length": length}
        if cls is TextMerged:
            shown = secrets.fragment("text", None, fields["fragment"])
            return {**fields, "fragment": shown, "length": self._rs.text_length + len(shown)}
        if cls is ModelRequested or cls is ModelRetried:
            secrets.restart_streams()
        settings = fields.get("settings")
        if settings is self.loop.config.settings and len(fields) <= 3:  # a plain request: the common case
            return {**fields, "settings": self.loop.event_settings}  # redacted once per loop, not per turn
        fields = dict(fields)
        if settings is not None:
            if settings is self.loop.config.settings:
                fields["settings"] = self.loop.event_settings
            else:
                fields["settings"] = redact(settings)
        if cls is TurnCompleted:
            resp = fields["response"]
            message = secrets.turn(resp.message)
            raw = resp.raw
            if raw is not None and (resp.provider != "scripted" or message is not resp.message):
                raw = redact(raw, secrets.names(None))  # a script's raw turn is its spec: secret only if the turn is
            if message is not resp.message or raw is not resp.raw:  # a copy only when something was masked
                fields["response"] = replace(resp, message=message, raw=raw)
        elif cls is CallValidated or cls is ApprovalResolved:
            fields["arguments"] = secrets.arguments(fields["call_id"], self._call_name(fields["call_id"]),
                                                    fields.get("arguments"), edited=cls is ApprovalResolved)
            if fields.get("value") is not None:
                fields["value"] = redact(fields["value"])
        for key in ("error", "reason", "error_message", "message", "note", "content"):
            if isinstance(fields.get(key), str):
                fields[key] = redact_text(fields[key])
        return fields

    def _call_name(self, call_id: str) -> str:
        call = self._rs.calls.get(call_id)
        return call.name if call is not None else ""

    def _request(self) -> ModelRequest:
        rs = self._rs
        finalize = rs.finalizing
        offered = [] if finalize else rs.tools
        settings = self.loop.config.settings
        output = self.loop.config.output
        if output is not None and output.native:
            settings = {**settings, "output_schema": output.settings()}
            if finalize:
                settings["tool_choice"] = "none"
            elif rs.tool_choice is not None:
                settings["tool_choice"] = rs.tool_choice
        elif finalize and output is not None:  # the tools-free last turn still owes the typed answer: force it
            offered = [output.info()]
            settings = {**settings, "tool_choice": {"name": output.name}}
        elif finalize:
            settings = {**settings, "tool_choice": "none"}
        elif rs.tool_choice is not None:
            settings = {**settings, "tool_choice": rs.tool_choice}
        return ModelRequest(
            messages=HistoryView(rs.messages),
            tools=offered,
            settings=settings,
            finalize=finalize,
            run_id=self.run_id,
            turn=rs.turn,
        )

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        close = getattr(stream, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # closing a broken stream must not mask what broke it
                pass

    def _pull(self) -> BaseEvent:
        item = self._held_item
        if item is None:
            return self._pull_new()
        self._held_item = None
        return self._record(item)

    def _record(self, item: StreamItem) -> BaseEvent:
        """Append the event of a pulled item; if the store refuses it, keep the item for the next step."""
        try:
            return self._item_event(item)
        except CheckpointError:
            self._held_item = item  # the model's answer is not lost: the next step writes it (never asks again)
            raise

    def _pull_new(self) -> BaseEvent:
        rs = self._rs
        try:
            if self._stream is None:
                if rs.retries == 0:
                    self._first_attempt = time.monotonic()
                wait = self._retry_at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                self._t0 = time.perf_counter()
                self._stream = iter(self.loop.model.respond(self._request()))
            item = next(self._stream)
        except StopIteration:
            self._stream = None
            return self._finish(S.INCOMPLETE, "the model's response ended without a final turn")
        except StreamInterrupted as exc:
            self._close_stream()
            return self._finish(S.INCOMPLETE, f"the response stream broke: {exc}; nothing in it was executed")
        except ModelError as exc:
            self._close_stream()
            attempt = rs.retries + 1
            base = self.loop.retry_base_delay * 2 ** (attempt - 1)
            delay = min(30.0, base * (0.5 + random.random() / 2))
            retry_after = getattr(exc, "retry_after", None)
            if isinstance(retry_after, int | float) and retry_after > delay:
                delay = float(retry_after)  # the provider said when to come back
            spent = time.monotonic() - self._first_attempt
            in_time = self.loop.max_retry_time is None or spent + delay <= self.loop.max_retry_time
            if exc.retryable and rs.retries < self.loop.max_retries and not in_time:
                status = f"HTTP {exc.status}: " if exc.status else ""
                return self._finish(S.FAILED, f"the model call failed and retrying would pass max_retry_time="
                                              f"{self.loop.max_retry_time:g} s: {status}{exc}")
            if exc.retryable and rs.retries < self.loop.max_retries:
                self._retry_at = time.monotonic() + delay
                return self._append(ModelRetried, S.MODEL_REQUESTED, {
                    "attempt": attempt, "status": exc.status, "error": str(exc), "delay_s": round(delay, 3),
                })
            status = f"HTTP {exc.status}: " if exc.status else ""
            tries = f" after {rs.retries + 1} attempts" if rs.retries else ""
            return self._finish(S.FAILED, f"the model call failed{tries}: {status}{exc}")
        except Exception as exc:  # a bug in a model or a script turn: keep the run consistent, keep the cause
            self._close_stream()
            where = traceback.format_exception_only(type(exc), exc)[-1].strip()
            return self._finish(S.FAILED, f"the model raised {where}")
        return self._record(item)

    def _item_event(self, item: StreamItem) -> BaseEvent:
        rs = self._rs
        if isinstance(item, ModelTurn):
            self._close_stream()
            latency = round(time.perf_counter() - self._t0, 6)
            return self._append(TurnCompleted, S.RESPONDED, {"response": self._prepare(item), "latency_s": latency})
        if isinstance(item, ArgumentsDelta):
            length = rs.argument_lengths.get(item.index, 0) + len(item.fragment.encode())
            return self._append(ArgumentsMerged, S.MODEL_REQUESTED, {
                "index": item.index, "call_id": item.call_id, "name": item.name,
                "fragment": item.fragment, "length": length,
            })
        if isinstance(item, TextDelta):
            return self._append(TextMerged, S.MODEL_REQUESTED, {
                "fragment": item.fragment, "length": rs.text_length + len(item.fragment),
            })
        self._close_stream()
        return self._finish(S.FAILED, f"the model yielded {type(item).__name__}, not a stream item or a turn")

    def _prepare(self, turn: ModelTurn) -> ModelTurn:
        """Give every call an id unique in the conversation: generated where missing or already used, on both sides.

        The conversation includes the history a follow-up run starts from, so a model that numbers its calls
        per run (a script, a replayed cassette) never repeats an id the provider has seen in this conversation.
        """
        if not turn.message.tool_calls:
            return turn
        msgs, known, seen = self._call_ids
        if msgs is not self._rs.messages or known > len(msgs):  # compressed or rebuilt: count again
            msgs, known, seen = self._rs.messages, 0, set()
        seen.update(c.call_id for m in msgs[known:] if m.role == "assistant" for c in m.tool_calls)
        self._call_ids = (msgs, len(msgs), seen)  # this turn's ids join the set: they are in the conversation next
        parts = list(turn.message.parts)
        changed = False
        for i, p in enumerate(parts):
            if not isinstance(p, ToolCallPart):
                continue
            if not p.call_id or p.call_id in seen:
                fresh, n = f"call_{self.run_id[4:]}_{self._rs.turn}_{i}", 0
                while fresh in seen:
                    n += 1
                    fresh = f"call_{self.run_id[4:]}_{self._rs.turn}_{i}_{n}"
                p = parts[i] = replace(p, call_id=fresh)
                changed = True
            seen.add(p.call_id)
        return replace(turn, message=replace(turn.message, parts=tuple(parts))) if changed else turn

    def _finish(self, state: LoopState, reason: str) -> BaseEvent:
        return self._append(RunFinished, state, {"final": state, "reason": reason, "output": None})

    # -- executing calls -----------------------------------------------------------------------------
    #
    # One path for step() (one call) and run() (the turn's started calls together). For each call the effect
    # ledger is consulted first (see agentnb.store): a side-effecting call *claims* its idempotency key -- an
    # insert that fails when the key exists -- so an effect runs at most once per key, whatever the number of
    # calls, threads or processes asking. The calls that may run go to this run's own executor (max_parallel
    # threads): a call's time limit (its tool's timeout, the loop's tool_timeout, what is left of the deadline)
    # starts when it starts running. The driver thread waits; it answers a read past its limit with `timeout`
    # (the thread cannot be killed; an async tool's task is cancelled), a write past its limit with an
    # "outcome unknown" pause (never `timeout`: it may still happen), and calls that never started when the run
    # must stop with `skipped`. Results are appended in the model's order.

    def _plan(self, call: CallState, batch: dict[str, CallState]) -> tuple[str, Any]:
        """What to do with one call, decided by the ledger before anything runs.

        ``run`` (detail: whether it holds a ledger claim), ``reuse``, ``duplicate``, ``after`` (the same effect
        runs now for another call of the batch) or ``unknown``.
        """
        tool = self.loop.registry.get(call.name)
        key = call.idempotency_key
        if key is None or tool is None or not tool.side_effects:
            return "run", False
        existing: Effect | None = self.store.claim_effect(key, self.run_id, call.call_id, call.name)
        if existing is None:
            return "run", True
        if existing.run_id == self.run_id and existing.call_id == call.call_id:  # this call, again (resume/retry)
            if existing.status == "done":
                return "reuse", existing
            if tool.idempotent or call.retry_confirmed:
                self.store.retry_effect(key, self.run_id, call.call_id)
                return "run", True
            return "unknown", "it started before and never finished (the process stopped while it ran)"
        if existing.status == "done":
            return "duplicate", existing
        if existing.run_id == self.run_id and existing.call_id in batch:
            return "after", existing.call_id  # the same effect runs now for another call of this batch
        return "duplicate", existing

    def _sort(self, calls: list[CallState], batch: dict[str, CallState]
              ) -> tuple[_Outcomes, dict[str, str], dict[str, str], list[_Runnable]]:
        """Plan every call of a batch: outcomes known now, unknowns, duplicates of a running call, calls to run."""
        outcomes: _Outcomes = {}
        unknown: dict[str, str] = {}
        later: dict[str, str] = {}
        runnable: list[_Runnable] = []
        for c in calls:
            if c.call_id in self._unsaved:  # it ran; a store fault kept its event out: write it now, never re-run
                outcomes[c.call_id] = self._unsaved[c.call_id]
                continue
            verdict, detail = self._plan(c, batch)
            if verdict == "run":
                tool = self.loop.registry.get(c.name)
                assert tool is not None
                runnable.append((c, tool, bool(detail)))
            elif verdict == "reuse":
                outcomes[c.call_id] = (_from_effect(detail), {"reused": True}, None)
            elif verdict == "duplicate":
                dup = _duplicate(c, detail) if detail.status == "done" else _duplicate_unknown(c, detail.call_id)
                outcomes[c.call_id] = (dup, {"duplicate_of": detail.call_id}, None)
            elif verdict == "after":
                later[c.call_id] = detail
            else:
                unknown[c.call_id] = detail
        return outcomes, unknown, later, runnable

    def _execute(self, calls: list[CallState]) -> BaseEvent:
        """Run ``calls`` through the ledger and the executor; append their events in the model's order."""
        batch = {c.call_id: c for c in calls}
        outcomes, unknown, later, runnable = self._sort(calls, batch)
        interrupted: BaseException | None = None
        try:
            self._run_all(runnable, outcomes, unknown)
        except KeyboardInterrupt as exc:  # raised in this thread while waiting: record what we know, then raise
            interrupted = exc
        for cid, first in later.items():
            if first in outcomes:
                outcomes[cid] = (_duplicate(batch[cid], outcomes[first][0], first), {"duplicate_of": first}, None)
            else:
                outcomes[cid] = (_duplicate_unknown(batch[cid], first), {"duplicate_of": first}, None)
        for c, _tool, _ in runnable:  # a tool raised KeyboardInterrupt in a worker: record, then raise it here
            hit = (c.call_id in outcomes and outcomes[c.call_id][0].error_type == "KeyboardInterrupt") or (
                "KeyboardInterrupt" in unknown.get(c.call_id, ""))
            if hit:
                interrupted = interrupted or KeyboardInterrupt()
        self._unsaved.update(outcomes)
        last: BaseEvent | None = None
        for c in calls:  # the model's order
            if c.call_id in outcomes:
                out, extra, effect = outcomes[c.call_id]
                last = self._finished(c, out, effect=effect, **extra)
                self._unsaved.pop(c.call_id, None)
        for c in calls:
            if c.call_id in unknown:
                last = self._unknown(c, unknown[c.call_id])
        if interrupted is not None:
            raise interrupted
        assert last is not None
        return last

    def _limit(self, tool: Tool) -> tuple[float | None, bool]:
        """Seconds a call of ``tool`` may run from now, and whether the deadline (not a timeout) sets it."""
        budget = self.loop.config.budget
        limit = tool.timeout if tool.timeout is not None else budget.tool_timeout
        if budget.deadline_s is not None and self._rs.started_at is not None:
            left = max(0.0, self._rs.started_at + budget.deadline_s - time.time())
            if limit is None or left < limit:
                return left, True
        return limit, False

    def _run_all(
        self, runnable: list[_Runnable],
        outcomes: _Outcomes, unknown: dict[str, str],
    ) -> None:
        if not runnable:
            return
        if len(runnable) == 1 and self._limit(runnable[0][1])[0] is None and not runnable[0][1].is_async:
            c, tool, ledger = runnable[0]  # no clock to watch: run it right here, no thread hand-off
            try:
                out = self._call(c, tool)
            except KeyboardInterrupt:
                if tool.side_effects:
                    unknown[c.call_id] = "it was interrupted (KeyboardInterrupt) while it ran"
                else:
                    outcomes[c.call_id] = (_interrupted(c), {}, None)
                raise
            outcomes[c.call_id] = (out, {}, self._done(c, out) if ledger else None)
            return
        self._run_threads(runnable, outcomes, unknown)

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            workers = max(1, self.loop.config.budget.max_parallel)
            self._executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix=f"agentnb-{self.run_id}")
        return self._executor

    def _run_threads(
        self, runnable: list[_Runnable],
        outcomes: _Outcomes, unknown: dict[str, str],
    ) -> None:
        slots: dict[str, _Slot] = {}
        pool = self._pool()
        for c, tool, ledger in runnable:
            slot = slots[c.call_id] = _Slot(c, tool, ledger)
            slot.future = pool.submit(self._work, slot)
        pending = set(slots)
        try:
            while pending:
                now = time.monotonic()
                stop = self._cancel_reason
                waits = []
                for cid in list(pending):
                    slot = slots[cid]
                    fut = slot.future
                    assert fut is not None
                    if fut.done():
                        pending.discard(cid)
                        self._collect(slot, outcomes, unknown)
                        continue
                    if slot.started is None:
                        if stop is not None and fut.cancel():
                            pending.discard(cid)
                            outcomes[cid] = (_skipped(f"the run was cancelled ({stop}) before this call started"), {},
                                             None)
                        continue
                    if slot.limit is not None:
                        left = slot.started + slot.limit - now
                        if left <= 0:
                            pending.discard(cid)
                            self._expire(slot, outcomes, unknown)
                            continue
                        waits.append(left)
                if pending:
                    futures = [slots[cid].future for cid in pending]
                    concurrent.futures.wait(futures, timeout=min([*waits, 0.05]),  # type: ignore[arg-type]
                                            return_when=concurrent.futures.FIRST_COMPLETED)
        except KeyboardInterrupt:
            for cid in pending:
                slot = slots[cid]
                assert slot.future is not None
                if slot.future.cancel():
                    outcomes[cid] = (_skipped("the run was interrupted before this call started"), {}, None)
                elif slot.tool.side_effects:
                    slot.abandon()
                    unknown[cid] = "it was still running when the run was interrupted (KeyboardInterrupt)"
                else:
                    slot.abandon()
                    outcomes[cid] = (_interrupted(slot.call), {}, None)
            raise

    def _collect(self, slot: _Slot, outcomes: _Outcomes,
                 unknown: dict[str, str]) -> None:
        assert slot.future is not None
        exc = slot.future.exception()
        cid = slot.call.call_id
        if isinstance(exc, KeyboardInterrupt):
            if slot.tool.side_effects:
                unknown[cid] = "it raised KeyboardInterrupt while it ran"
            else:
                outcomes[cid] = (_interrupted(slot.call), {}, None)
            return
        out = slot.future.result()
        outcomes[cid] = (out, {}, self._done(slot.call, out) if slot.ledger else None)

    def _expire(self, slot: _Slot, outcomes: _Outcomes,
                unknown: dict[str, str]) -> None:
        """A call ran past its limit: a read is answered ``timeout``; a write's outcome is unknown."""
        assert slot.limit is not None and slot.started is not None
        self._executor = None  # its thread is still busy: later calls get a fresh pool, so nothing queues behind it
        slot.abandon()
        what = "the run's deadline" if slot.by_deadline else "its timeout"
        if slot.tool.side_effects:
            unknown[slot.call.call_id] = (f"it was still running when {what} ({slot.limit:g} s) passed; it may still "
                                          "complete (its outcome is recorded in the ledger if it does)")
            return
        slot.cancel_task()
        outcomes[slot.call.call_id] = (
            timeout_outcome(slot.call.name, slot.limit, time.monotonic() - slot.started, deadline=slot.by_deadline),
            {}, None,
        )

    def _work(self, slot: _Slot) -> Outcome:
        """In a worker thread: the call's clock starts now."""
        slot.limit, slot.by_deadline = self._limit(slot.tool)
        slot.started = time.monotonic()
        out = self._call(slot.call, slot.tool, slot.on_loop)
        with slot.lock:
            if slot.abandoned and slot.ledger:  # the driver gave up on it: record the late outcome for a person
                key = slot.call.idempotency_key
                assert key is not None
                try:
                    self.store.finish_effect(key, self.run_id, slot.call.call_id, out.content, out.value, out.status)
                except Exception:  # noqa: S110 - the ledger then still says "started": the pause stays honest
                    pass
        return out

    def _call(self, call: CallState, tool: Tool, on_loop: Any = None) -> Outcome:
        """Run one call in this thread (errors become results; KeyboardInterrupt propagates)."""
        assert call.arguments is not None
        validated = self._unmasked(call, tool)  # the real secret arguments live in memory only
        if isinstance(validated, Outcome):
            return validated
        ctx = None
        if tool.context_param is not None:
            ctx = ToolContext(run_id=self.run_id, call_id=call.call_id, tool_name=tool.name, turn=self._rs.turn,
                              idempotency_key=call.idempotency_key)
        out = self.loop.registry.run(tool, validated, ctx, on_loop)
        # results and errors alike, before they are cut (a cut can halve a key), hashed, stored or shown
        return _cap(redact_outcome(out), self.loop.config.budget.max_result_chars)

    @staticmethod
    def _done(call: CallState, out: Outcome) -> EffectDone:
        assert call.idempotency_key is not None
        return EffectDone(call.idempotency_key, out.content, out.value, out.status)

    def _unmasked(self, call: CallState, tool: Tool) -> BaseModel | Outcome:
        """The call's validated arguments with its real secrets, or the error result when they cannot be had.

        Validation before this point saw the masked values; the real ones meet the schema here for the first time.
        """
        real = self._secrets.unmask(call.call_id, call.name, call.arguments or {})
        if isinstance(real, str):
            return Outcome(status="error", content=real, error_type="SecretUnavailable", error_message=real)
        if real is call.arguments and call.validated is not None:
            return call.validated
        try:
            return tool.validate(real)
        except ValidationError as exc:
            message, _ = describe_errors(call.name, exc)
            return Outcome(status="error", content=message, error_type="ValidationError", error_message=message)
        except Exception as exc:  # the value boundary, or a validator raising something else: an error result
            message = redact_text(f"Invalid arguments for tool '{call.name}': {type(exc).__name__}: {exc}")
            return Outcome(status="error", content=message, error_type=type(exc).__name__, error_message=message)

    def _unknown(self, call: CallState, why: str) -> BaseEvent:
        tool = self.loop.registry.get(call.name)
        assert tool is not None
        return self._append(ApprovalRequested, S.WAITING_APPROVAL, {
            "approval_id": f"unk_{self.run_id}_{call.call_id}", "call_id": call.call_id, "name": call.name,
            "arguments": call.arguments, "arguments_digest": arguments_digest(call.name, call.arguments),
            "risk": tool.risk, "kind": "outcome_unknown", "idempotency_key": call.idempotency_key,
            "note": f"outcome unknown: {why}",
        })

    def _finished(
        self, call: CallState, out: Outcome, *, reused: bool = False, duplicate_of: str | None = None,
        effect: EffectDone | None = None,
    ) -> BaseEvent:
        request = call.expected_request or request_hash(self._rs, self.loop.config, call)
        result = binding.result_sha256(call.call_id, out.status, out.content)
        return self._append(ToolFinished, S.EXECUTING, {
            "call_id": call.call_id, "name": call.name, "status": out.status, "content": out.content,
            "value": out.value, "error_type": out.error_type, "error_message": out.error_message,
            "duration_s": round(out.duration_s, 6), "idempotency_key": call.idempotency_key, "reused": reused,
            "duplicate_of": duplicate_of, "truncated": out.truncated,
            "request_sha256": request, "result_sha256": result,
            "call_binding_sha256": binding.binding_sha256(request, result),
        }, effect=effect)

    def _compress(self, tokens: int) -> BaseEvent:
        """Tier 1: summarize the older history with the summarizer; on failure fall back to pruning."""
        rs = self._rs
        cfg = self.loop.config
        try:
            summary = _summarize(cfg.summarizer, rs.messages, self.run_id)
            kept, removed = summary_history(rs.messages, summary, cfg.budget.keep_pairs)
            after = estimate_tokens(kept, rs.tools)
            if after < tokens:
                return self._append(CompressionApplied, rs.state, {
                    "tier": 1, "tokens_before": tokens, "tokens_after": after, "messages": kept, "removed": removed,
                })
        except Exception:  # a failing summarizer must not end the run: prune instead
            pass
        action = prune_step(rs, cfg, tokens)
        return self._append(action.cls, action.state, action.fields)

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
        store_ = as_store(store) if store is not None else loop.store
        events = store_.load(run_id)
        first = events[0]
        if not isinstance(first, RunStarted):
            raise ResumeError(f"run {run_id!r} does not start with RunStarted")
        run = cls.__new__(cls)
        Run.__init__(run, loop, [], run_id=run_id, operation_id=first.settings.get("operation_id"))
        run.store = store_
        run._initial = list(first.messages)
        run.prompt = [m for m in first.messages if m.role != "system"] if loop.system else list(first.messages)
        for ev in events:
            run._rs.apply(ev)
            run._events.append(ev)
        rs = run._rs
        recorded = first.settings.get("policy_revision")
        if recorded != loop.policy_revision and not allow_policy_change:
            raise ResumeError(
                f"run {run_id!r} started under another tool or approval policy: {_policy_diff(first, loop)}. "
                "Resume with the loop it started with, or pass allow_policy_change=True."
            )
        for call in rs.calls.values():
            if call.status in ("valid", "approved", "running", "awaiting_approval") and call.arguments is not None:
                tool = loop.registry.get(call.name)
                if tool is None:
                    raise ResumeError(f"call {call.call_id!r} names tool {call.name!r}, which this loop does not have")
                try:
                    call.validated = tool.validate(call.arguments)
                except Exception as exc:
                    raise ResumeError(
                        f"call {call.call_id!r} no longer fits the schema of {call.name!r}: {exc}"
                    ) from exc
        mismatch = verify_bindings(rs, loop.config) if rs.calls else None
        if mismatch:
            raise ResumeError(f"run {run_id!r}: {mismatch}")
        # the checks passed: only now take the run (a refused resume must not leave a lease behind)
        run._lease = store_.acquire_lease(run_id, run._owner, loop.lease_ttl, take_over=take_over, seq=rs.seq)
        if rs.state is S.WAITING_APPROVAL or rs.state in TERMINAL:
            run._let_go()  # nothing to drive until a person answers: approvers in other processes may take it
        seek = getattr(loop.model, "seek", None)
        if callable(seek):
            attempts = sum(e.type in ("ModelRequested", "ModelRetried") for e in events)
            seek(run_id, attempts - 1 if rs.state is S.MODEL_REQUESTED else attempts)
        if rs.state is S.MODEL_REQUESTED:
            run._append(ModelRetried, S.MODEL_REQUESTED, {
                "attempt": rs.retries + 1, "status": None, "delay_s": 0.0,
                "error": "the process stopped during the model call; asking again",
            })
        return run

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


_Outcomes = dict[str, tuple[Outcome, dict[str, Any], EffectDone | None]]
"""call id -> (outcome, extra ToolFinished fields, the ledger outcome to record with it)."""
_Runnable = tuple[CallState, Tool, bool]
"""(call, tool, holds a ledger claim)."""


class _Slot:
    """One call handed to the executor: when it started, its limit, whether the driver gave up on it."""

    __slots__ = ("abandoned", "by_deadline", "call", "future", "ledger", "limit", "lock", "loop", "started", "task",
                 "tool")

    def __init__(self, call: CallState, tool: Tool, ledger: bool) -> None:
        self.call, self.tool, self.ledger = call, tool, ledger
        self.future: concurrent.futures.Future[Outcome] | None = None
        self.started: float | None = None
        self.limit: float | None = None
        self.by_deadline = False
        self.abandoned = False
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None

    def on_loop(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
        self.loop, self.task = loop, task

    def abandon(self) -> None:
        with self.lock:
            self.abandoned = True

    def cancel_task(self) -> None:
        """Cancel an async tool's task (a read past its limit); a sync thread cannot be stopped."""
        loop, task = self.loop, self.task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop closed in between: the task is over
                pass


def _skipped(why: str) -> Outcome:
    return Outcome(status="skipped", content=f"Skipped: {why}.")


def _interrupted(call: CallState) -> Outcome:
    return Outcome(status="error", content=f"Tool '{call.name}' was interrupted (KeyboardInterrupt) while it ran.",
                   error_type="KeyboardInterrupt", error_message="interrupted")


def _from_effect(effect: Effect) -> Outcome:
    status = effect.result_status if effect.result_status in ("ok", "error", "timeout") else "ok"
    return Outcome(status=status, content=effect.content or "", value=effect.value)  # type: ignore[arg-type]


def _duplicate(call: CallState, first: Effect | Outcome, first_call: str | None = None) -> Outcome:
    """The result of a call whose effect another call already did: said plainly, never a fake "done now"."""
    if isinstance(first, Effect):
        first_call, content = first.call_id, first.content or ""
    else:
        content = first.content
    text = (
        f"Duplicate: this {call.name} was not run again. The same effect (idempotency key {call.idempotency_key}) "
        f"was already done by call {first_call}, with the result: {content}"
    )
    return Outcome(status="duplicate", content=text, value={"duplicate_of": first_call, "result": content})


def _duplicate_unknown(call: CallState, first_call: str) -> Outcome:
    text = (
        f"Duplicate: this {call.name} was not run. The same effect (idempotency key {call.idempotency_key}) was "
        f"started by call {first_call}, and its outcome is not known yet; it was not repeated."
    )
    return Outcome(status="duplicate", content=text, value={"duplicate_of": first_call, "result": None})

_SCRUB = frozenset({RunStarted, ModelRequested, TurnCompleted, ModelRetried, RunFinished, TextMerged, ArgumentsMerged,
                    CallValidated, CallRejected, ApprovalResolved})


from .providers.registry import NATIVE_OUTPUT  # noqa: E402 -- the wire APIs with native structured output


def _native_output(model: Any, mode: str) -> bool:
    if mode not in ("auto", "tool", "native"):
        raise ValueError(f"output_mode must be 'auto', 'tool' or 'native', got {mode!r}")
    provider = getattr(model, "provider", None)
    if mode == "native" and provider not in NATIVE_OUTPUT and provider != "scripted":
        raise ValueError(f"output_mode='native': {provider or type(model).__name__} has no structured-output mode "
                         "agentnb uses; use output_mode='tool' (or 'auto')")
    return mode == "native" or (mode == "auto" and provider in NATIVE_OUTPUT)


def _budget_settings(b: Budget) -> dict[str, Any]:
    fields = ("max_turns", "max_tool_calls", "max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost",
              "deadline_s", "max_parallel", "max_result_chars", "max_repeats", "on_repeat", "max_no_progress",
              "context_window", "prices")
    return {f: getattr(b, f) for f in fields}


def _cap(out: Outcome, limit: int) -> Outcome:
    """Cut a long result for the model with a visible marker; the audit value keeps everything."""
    if len(out.content) <= limit:
        return out
    cut = len(out.content) - limit
    content = (
        f"{out.content[:limit]}\n[... {cut:,} more characters cut: the result was {len(out.content):,} characters, "
        f"over the {limit:,}-character limit ...]"
    )
    value = out.value if out.value is not None else out.content
    return replace(out, content=content, value=value, truncated=cut)


def _summarize(summarizer: Any, messages: list[Message], run_id: str) -> str:
    older = messages
    if callable(getattr(summarizer, "respond", None)):
        from .providers.base import ModelRequest as _Request

        text = "\n".join(f"{m.role}: {m.text or [p.kind for p in m.parts]}" for m in older)
        prompt = Message.user(
            "Summarize this conversation for yourself: the user's goal, what the tools returned that matters, "
            "and what is left to do. Be brief and keep every fact needed to finish.\n\n" + text
        )
        items = list(summarizer.respond(_Request(messages=[prompt], tools=[], run_id=f"{run_id}:summary")))
        turn = items[-1]
        assert isinstance(turn, ModelTurn)
        return turn.message.text
    return str(summarizer(messages))


def summary_history(messages: list[Message], summary: str, keep_pairs: int) -> tuple[list[Message], list[int]]:
    """Tier 1: system + the first request (with the summary after it) + the last complete call/result turns."""
    kept, removed = prune(messages, keep_pairs)
    first_user = next((i for i, m in enumerate(kept) if m.role == "user"), None)
    if first_user is not None:
        request = kept[first_user]
        kept[first_user] = Message(role="user", parts=(
            *request.parts, TextPart(text=f"\n\n[Summary of the work so far]\n{summary}"),
        ))
    return kept, removed


def policy_revision(registry: ToolRegistry, approval: Any, headless: bool, override: bool = False) -> str:
    """A short hash of what decides whether and how calls run: tools, schemas, risks and approval rules."""
    def rule(policy: Any) -> str:
        if policy is None or isinstance(policy, bool):
            return repr(policy)
        return f"callable:{getattr(policy, '__qualname__', type(policy).__name__)}"

    parts = [
        [t.name, t.schema_version, t.risk, rule(t.approval), t.client, t.idempotent] for t in registry
    ]
    # the override joins the hash only when set, so revisions recorded before it existed still match
    extra = ["override"] if override else []
    return binding.sha256(binding.canonical([parts, rule(approval), headless, *extra]))[:16]


def _policy_diff(first: RunStarted, loop: Loop) -> str:
    then = {t.name: t for t in first.tools}
    now = {t.name: t for t in loop.registry.infos}
    changes = [f"tool {n!r} was removed" for n in then.keys() - now.keys()]
    changes += [f"tool {n!r} was added" for n in now.keys() - then.keys()]
    for name in then.keys() & now.keys():
        a, b = then[name], now[name]
        if a.parameters != b.parameters:
            changes.append(f"the schema of {name!r} changed")
        if (a.risk, a.approval) != (b.risk, b.approval):
            changes.append(f"the risk or approval rule of {name!r} changed")
    return "; ".join(sorted(changes)) or "the approval rules or headless mode changed"


def complete_history(messages: list[Message]) -> list[Message]:
    """The messages with every call answered: calls left without a result get a "skipped" result."""
    from .pairing import unanswered_calls

    out = list(messages)
    at, missing = unanswered_calls(out)
    if missing:
        out.insert(at + 1, Message(role="tool", parts=tuple(
            ToolResultPart(call_id=c.call_id, name=c.name, status="skipped",
                           content="Skipped: the run was stopped before this call ran.") for c in missing)))
    return out
