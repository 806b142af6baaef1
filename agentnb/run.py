"""The driver: :class:`Loop` holds what a run needs, :class:`Run` performs the engine's actions.

``Run`` is the only place that does I/O: it asks the model for turns (pulling stream items lazily, so one
``step()`` can be one merged fragment), runs tools through the registry, and appends every event to the
transcript. Everything it knows comes from folding those events (:class:`~agentnb.engine.RunState`).
"""

from __future__ import annotations

import concurrent.futures
import random
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

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
    CompressionApplied,
    ModelRequested,
    ModelRetried,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    TurnCompleted,
)
from .exceptions import (
    ApprovalError,
    ApprovalExpired,
    DigestMismatch,
    ModelError,
    ResumeError,
    RunNotPaused,
    StreamInterrupted,
)
from .guards import Budget, estimate_tokens, prune
from .messages import Message, ModelTurn, TextPart, ToolCallPart, ToolResultPart, coerce_messages
from .providers.base import ArgumentsDelta, HistoryView, Model, ModelRequest, StreamItem, TextDelta
from .redact import redact, redact_text, register_secret
from .states import TERMINAL, LoopState, S
from .store import MemoryStore, Store, as_store
from .tools import Outcome, Tool, ToolContext, ToolRegistry, as_registry, jsonable, render_value
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
        approval: a loop-wide approval policy (``True``, ``False`` or ``callable(call, state) -> bool``) that
            overrides each tool's own.
        approval_ttl: seconds an approval request stays valid (default: no expiry).
        budget: an :class:`~agentnb.Budget` (turns, tool calls, tokens, cost, deadline, parallelism, result
            size, repetition, context window); ``max_turns``/``on_max_turns`` are shortcuts for its first fields.
        summarizer: a model (or ``callable(messages) -> str``) that summarizes older history when the context
            passes its threshold (tier 1); without one, compression prunes (tier 2).

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
        tools: ToolRegistry | Sequence[Tool | Callable[..., Any]] = (),
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
        approval_ttl: float | None = None,
        budget: Budget | None = None,
        summarizer: Any = None,
    ) -> None:
        if not callable(getattr(model, "respond", None)):
            raise TypeError(f"model must have a respond(request) method, got {type(model).__name__}")
        if on_max_turns not in ("finalize", "stop"):
            raise ValueError(f"on_max_turns must be 'finalize' or 'stop', got {on_max_turns!r}")
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
            settings=dict(settings or {}),
            finalize_prompt=finalize_prompt,
            headless=headless,
            approval=approval,
            approval_ttl=approval_ttl,
            summarizer=summarizer,
        )
        self.store = as_store(store)
        self.event_settings = redact(self.config.settings)
        register_secret(getattr(getattr(model, "client", None), "api_key", None))
        self.policy_revision = policy_revision(self.registry, approval, headless)

    @property
    def tools(self) -> list[Tool]:
        """The loop's tools."""
        return list(self.registry)

    def start(
        self, prompt: str | Message | list[Message] | list[dict[str, Any]], *, run_id: str | None = None,
        operation_id: str | None = None,
    ) -> Run:
        """Begin a run from a prompt (or a prior message list). Nothing is sent until you step or run it.

        ``operation_id`` names the business operation the run serves (default: the run id); idempotency keys
        derive from it, so two runs of one operation never repeat each other's writes.
        """
        return Run(self, coerce_messages(prompt), run_id=run_id, operation_id=operation_id)

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
        self._persist = True
        self._attach_store()
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
    def output(self) -> str | None:
        """The final answer text (None until the run finishes with one)."""
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
        """
        rs = self._rs
        if rs.state is S.NEW:
            return self._append(RunStarted, S.READY, {
                "messages": self._initial,
                "model": f"{getattr(self.loop.model, 'provider', '?')}:{getattr(self.loop.model, 'name', '?')}",
                "tools": self.loop.registry.infos,
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
        if cfg.budget.deadline_s is not None:
            rs.now = time.time()
        action = decide(rs, cfg)
        if isinstance(action, Emit):
            return self._append(action.cls, action.state, action.fields)
        if isinstance(action, PullModel):
            return self._pull()
        if isinstance(action, RunTool):
            if batch and cfg.budget.max_parallel > 1:
                return self._run_parallel()
            return self._run_tool(rs.calls[action.call_id])
        if isinstance(action, Compress):
            return self._compress(action.tokens)
        if isinstance(action, Wait | Done):
            return None
        raise AssertionError(f"unknown action {action!r}")  # pragma: no cover

    def run(self) -> Run:
        """Step until the run ends or pauses for a person; returns the run (handy as a cell's last line).

        Unlike stepping, this runs the ready calls of a turn at the same time (up to ``max_parallel``).
        """
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
        """End the run in ``CANCELLED`` (no-op if it is already over)."""
        if self.done or self._rs.state is S.NEW:
            if self._rs.state is S.NEW:
                self.step()
            else:
                return None
        self._close_stream()
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

    def _resolve(self, call: CallState, fields: dict[str, Any]) -> BaseEvent:
        still_waiting = any(
            c.status == "awaiting_approval" and c.call_id != call.call_id for c in self._rs.calls.values()
        )
        return self._append(
            ApprovalResolved,
            S.WAITING_APPROVAL if still_waiting else (S.RESULTS_READY if call.kind == "escalation" else S.EXECUTING),
            {"approval_id": call.approval_id or "", "call_id": call.call_id, **fields},
        )

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
        audit = jsonable(value)  # converted once (a generator is consumed once); raises ValueConversionError
        content = render_value(audit)
        tool = self.loop.registry.get(call.name)
        key = call.idempotency_key
        if key and tool is not None and tool.side_effects:
            if self.store.effect(key) is None:
                self.store.start_effect(key, self.run_id, call.call_id, call.name)
            self.store.finish_effect(key, content, audit, "ok")
        return self._resolve(call, {"decision": "submitted", "by": by, "note": note, "content": content,
                                    "value": audit})

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

    def _append(self, cls: type[BaseEvent], state: LoopState, fields: dict[str, Any]) -> BaseEvent:
        if cls in _SCRUB:
            fields = self._scrub(cls, fields)
        rs = self._rs
        turn = rs.turn + 1 if cls is ModelRequested else rs.turn
        event = cls(seq=rs.seq, ts=_now(UTC), run_id=self.run_id, turn=turn, state=state, **fields)
        rs.apply(event)
        if self._persist:
            self.store.append(event)
        self._events.append(event)
        if self._listeners:
            for listener in self._listeners:
                listener(event)
        return event

    def _attach_store(self) -> None:
        """An in-memory store shares the run's event list instead of copying every event into its own."""
        if isinstance(self.store, MemoryStore):
            self.store.attach(self.run_id, self._events)
            self._persist = False
        else:
            self._persist = True

    def _scrub(self, cls: type[BaseEvent], fields: dict[str, Any]) -> dict[str, Any]:
        """Redact credentials at the source, before an event exists (see :mod:`agentnb.redact`)."""
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
            if resp.raw is not None and resp.provider != "scripted":
                fields["response"] = replace(resp, raw=redact(resp.raw))
        for key in ("error", "reason", "error_message"):
            if isinstance(fields.get(key), str):
                fields[key] = redact_text(fields[key])
        return fields

    def _request(self) -> ModelRequest:
        rs = self._rs
        finalize = rs.finalizing
        offered = [] if finalize else rs.tools
        return ModelRequest(
            messages=HistoryView(rs.messages),
            tools=offered,
            settings=({**self.loop.config.settings, "tool_choice": "none"} if finalize else self.loop.config.settings),
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
        """Give every call a unique id: generated where missing or repeated, and used on both sides."""
        seen: set[str] = set()
        parts = list(turn.message.parts)
        changed = False
        for i, p in enumerate(parts):
            if not isinstance(p, ToolCallPart):
                continue
            if not p.call_id or p.call_id in seen:
                p = parts[i] = replace(p, call_id=f"call_{self.run_id[4:]}_{self._rs.turn}_{i}")
                changed = True
            seen.add(p.call_id)
        return replace(turn, message=replace(turn.message, parts=tuple(parts))) if changed else turn

    def _finish(self, state: LoopState, reason: str) -> BaseEvent:
        return self._append(RunFinished, state, {"final": state, "reason": reason, "output": None})

    def _ledger(self, call: CallState) -> Outcome | str | None:
        """What the effect ledger says before a call runs.

        A recorded outcome to reuse; ``"unknown"`` when it started before and never finished and the tool
        cannot safely run again; or None: run it.
        """
        tool = self.loop.registry.get(call.name)
        key = call.idempotency_key
        if key is None or tool is None or not tool.side_effects:
            return None
        effect = self.store.effect(key)
        if effect is not None and effect.status == "done":
            return Outcome(status=effect.result_status or "ok",  # type: ignore[arg-type]
                           content=effect.content or "", value=effect.value)
        if effect is not None and not (tool.idempotent or call.retry_confirmed):
            return "unknown"
        return None

    def _execute(self, call: CallState) -> Outcome:
        """Run one call (recording intent and outcome in the ledger for side-effecting tools)."""
        tool = self.loop.registry.get(call.name)
        assert tool is not None and call.arguments is not None
        key = call.idempotency_key
        ledger = key is not None and tool.side_effects
        if ledger:
            assert key is not None
            self.store.start_effect(key, self.run_id, call.call_id, call.name)
        validated = call.validated or tool.validate(call.arguments)
        ctx = None
        if tool.context_param is not None:
            ctx = ToolContext(run_id=self.run_id, call_id=call.call_id, tool_name=tool.name, turn=self._rs.turn,
                              idempotency_key=key)
        out = self.loop.registry.run(tool, validated, ctx, default_timeout=self.loop.config.budget.tool_timeout)
        out = _cap(out, self.loop.config.budget.max_result_chars)
        if out.status != "ok":  # an error text can quote a URL or a header: redact it before it is hashed
            message = redact_text(out.error_message) if out.error_message else out.error_message
            out = replace(out, content=redact_text(out.content), error_message=message)
        if ledger:
            assert key is not None
            self.store.finish_effect(key, out.content, out.value, out.status)
        return out

    def _unknown(self, call: CallState) -> BaseEvent:
        tool = self.loop.registry.get(call.name)
        assert tool is not None
        return self._append(ApprovalRequested, S.WAITING_APPROVAL, {
            "approval_id": f"unk_{self.run_id}_{call.call_id}", "call_id": call.call_id, "name": call.name,
            "arguments": call.arguments, "arguments_digest": arguments_digest(call.name, call.arguments),
            "risk": tool.risk, "kind": "outcome_unknown", "idempotency_key": call.idempotency_key,
        })

    def _run_tool(self, call: CallState) -> BaseEvent:
        """Run one call; side-effecting tools go through the effect ledger (see :mod:`agentnb.store`)."""
        verdict = self._ledger(call)
        if verdict == "unknown":
            return self._unknown(call)
        if isinstance(verdict, Outcome):
            return self._finished(call, verdict, reused=True)
        return self._finished(call, self._execute(call))

    def _run_parallel(self) -> BaseEvent:
        """Run every started call of the turn at once (up to ``max_parallel``); results in the model's order."""
        running = [c for c in self._rs.calls.values() if c.status == "running"]
        if len(running) == 1:
            return self._run_tool(running[0])
        verdicts = {c.call_id: self._ledger(c) for c in running}
        to_run = [c for c in running if verdicts[c.call_id] is None]
        outcomes: dict[str, Outcome] = {}
        if len(to_run) > 1:
            workers = min(self.loop.config.budget.max_parallel, len(to_run))
            with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="agentnb-call") as pool:
                futures = {c.call_id: pool.submit(self._execute, c) for c in to_run}
                outcomes = {cid: f.result() for cid, f in futures.items()}
        elif to_run:
            outcomes[to_run[0].call_id] = self._execute(to_run[0])
        last: BaseEvent | None = None
        for c in running:  # the model's order; each event keeps its own call's timing
            verdict = verdicts[c.call_id]
            if isinstance(verdict, Outcome):
                last = self._finished(c, verdict, reused=True)
            elif verdict is None:
                last = self._finished(c, outcomes[c.call_id])
        for c in running:
            if verdicts[c.call_id] == "unknown":
                last = self._unknown(c)
        assert last is not None
        return last

    def _finished(self, call: CallState, out: Outcome, *, reused: bool = False) -> BaseEvent:
        request = call.expected_request or request_hash(self._rs, self.loop.config, call)
        result = binding.result_sha256(call.call_id, out.status, out.content)
        return self._append(ToolFinished, S.EXECUTING, {
            "call_id": call.call_id, "name": call.name, "status": out.status, "content": out.content,
            "value": out.value, "error_type": out.error_type, "error_message": out.error_message,
            "duration_s": round(out.duration_s, 6), "idempotency_key": call.idempotency_key, "reused": reused,
            "truncated": out.truncated,
            "request_sha256": request, "result_sha256": result,
            "call_binding_sha256": binding.binding_sha256(request, result),
        })

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
    ) -> Run:
        """Rebuild a stored run by folding its events, check it may go on, and return it (paused or ready).

        Before anything executes: the checkpoint's seals are verified (a tampered or truncated checkpoint
        raises :class:`~agentnb.CheckpointError`); the loop's tools and approval policy must be those the run
        started with (``allow_policy_change`` to accept a change); every call still to run is validated
        against the current schema; recorded result bindings are recomputed. A run stopped in the middle of a
        model call asks the model again (a ``ModelRetried`` event); a run stopped in the middle of a
        side-effecting call consults the effect ledger (reuse the outcome, re-run an idempotent tool with the
        same key, or pause as "outcome unknown").

        Raises:
            CheckpointError: the stored events cannot be trusted.
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
        run._attach_store()
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


_SCRUB = frozenset({RunStarted, ModelRequested, TurnCompleted, ModelRetried, RunFinished})


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


def policy_revision(registry: ToolRegistry, approval: Any, headless: bool) -> str:
    """A short hash of what decides whether and how calls run: tools, schemas, risks and approval rules."""
    def rule(policy: Any) -> str:
        if policy is None or isinstance(policy, bool):
            return repr(policy)
        return f"callable:{getattr(policy, '__qualname__', type(policy).__name__)}"

    parts = [
        [t.name, t.schema_version, t.risk, rule(t.approval), t.client, t.idempotent] for t in registry
    ]
    return binding.sha256(binding.canonical([parts, rule(approval), headless]))[:16]


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
    out = list(messages)
    answered = {r.call_id for m in out for r in m.tool_results}
    for i in range(len(out) - 1, -1, -1):
        m = out[i]
        if m.role == "assistant" and m.tool_calls:
            missing = [c for c in m.tool_calls if c.call_id not in answered]
            if missing:
                results = tuple(
                    ToolResultPart(call_id=c.call_id, name=c.name, status="skipped",
                                   content="Skipped: the run was stopped before this call ran.")
                    for c in missing
                )
                out.insert(i + 1, Message(role="tool", parts=results))
            break
    return out
