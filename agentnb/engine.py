"""The sans-IO core: the fold that turns events into a run's state, and the decision of what comes next.

Theory of operation. A run *is* its event log. :class:`RunState` is the fold of that log: applying events
one by one (each checked against the transition table in :mod:`agentnb.states`) rebuilds the conversation,
the calls of the current turn, the usage so far and the loop state. :func:`decide` looks at a ``RunState``
and says what happens next, without doing it:

- :class:`Emit` -- a decision that needs no I/O (a request is due, a call was parsed or validated, the
  results are bound, a guard tripped, the run is over): the driver appends the event as given;
- :class:`PullModel` -- read the next item of the model's answer (a fragment or the whole turn);
- :class:`RunTool` -- execute one validated call;
- :class:`Wait` -- a person has to approve or deny something; nothing happens until they do;
- :class:`Done` -- the run is in a terminal state.

Because the engine never performs I/O, each decision is testable in microseconds, and the same engine
serves live runs, replays of saved transcripts and time travel in the debugger (fold a prefix).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from . import binding, guards
from .events import (
    ApprovalRequested,
    ApprovalResolved,
    BaseEvent,
    CallParsed,
    CallRejected,
    CallValidated,
    CompressionApplied,
    GuardTripped,
    ModelRequested,
    OutputValidated,
    ResultsBound,
    RunFinished,
    ToolInfo,
    ToolStarted,
)
from .guards import Budget
from .messages import Message, ModelTurn, ResultStatus, ToolCallPart, ToolResultPart
from .output import OutputSpec
from .states import TERMINAL, TRANSITIONS, LoopState, S, check_transition
from .tools import Tool, ToolRegistry, describe_errors

FINALIZE_PROMPT = (
    "You have reached the limit of tool calls for this request. Do not call any more tools. "
    "Answer the original request now, as well as you can, using only the information you already have; "
    "say plainly what you could not find out."
)
"""The instruction sent (as a user turn) for the tools-free finalization call."""

CallStatus = Literal[
    "unparsed", "parsed", "valid", "awaiting_approval", "approved", "running", "done"
]


@dataclass(slots=True)
class CallState:
    """One call of the current turn, as far as the log has taken it."""

    part: ToolCallPart
    status: CallStatus = "unparsed"
    arguments: dict[str, Any] | None = None
    parse_error: str | None = None
    needs_approval: bool = False
    approval_id: str | None = None
    decision: str | None = None
    result: ToolResultPart | None = None
    validated: BaseModel | None = None
    """The validated arguments object (a cache; rebuilt from ``arguments`` when absent)."""
    kind: str = "approval"
    """What the pending request asks: ``approval``, ``client_result`` or ``outcome_unknown``."""
    idempotency_key: str | None = None
    retry_confirmed: bool = False
    """A person approved re-running a call whose outcome was unknown."""
    binding: tuple[str, str, str] | None = None
    """(request, result, binding) hashes recorded when the tool finished."""
    expected_request: str | None = None
    """The request hash computed from trusted state when the call started (a cache; recomputed if absent)."""
    approval_note: str | None = None
    """Why a person must decide, when a rule could not say plainly (an approval policy raised)."""
    output_error: str | None = None
    """For a call of the output tool whose arguments did not fit: the correction the model will read."""
    waiver_recorded: bool = False
    """A loop policy waived the tool's own approval and the ``approval_override`` event is in the log."""

    @property
    def call_id(self) -> str:
        """The call's id."""
        return self.part.call_id

    @property
    def name(self) -> str:
        """The tool name the model asked for."""
        return self.part.name


@dataclass(slots=True)
class RunState:
    """The fold of a run's events. Apply events in order with :meth:`apply`; read anything off it."""

    run_id: str = ""
    state: LoopState = S.NEW
    seq: int = 0
    """The ``seq`` the next event must have."""
    turn: int = 0
    """The number of model requests so far (the current turn's number)."""
    messages: list[Message] = field(default_factory=list)
    model: str = ""
    tools: list[ToolInfo] = field(default_factory=list)
    tool_names: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    response: ModelTurn | None = None
    calls: dict[str, CallState] = field(default_factory=dict)
    finalizing: bool = False
    turns_completed: int = 0
    tool_calls: int = 0
    """Calls answered so far (executed, rejected or denied)."""
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0
    """Retries of the current request."""
    text_length: int = 0
    argument_lengths: dict[int, int] = field(default_factory=dict)
    guards: list[GuardTripped] = field(default_factory=list)
    output: str | None = None
    reason: str | None = None
    last: BaseEvent | None = None
    started_at: float | None = None
    """The run's start (epoch seconds), for the deadline."""
    now: float | None = None
    """The clock reading the driver hands the engine before it decides (the engine reads no clock)."""
    tokens_by_model: dict[str, list[int]] = field(default_factory=dict)
    """``{model: [input tokens, output tokens]}``, for costs."""
    tripped: dict[str, str] = field(default_factory=dict)
    """Guards that ran out and the action in force (``finalize``, ``stop``, ``escalate``, ``note``)."""
    extensions: dict[str, int] = field(default_factory=dict)
    """Extra allowances granted by approving an escalation, per guard."""
    history: list[tuple[str, str]] = field(default_factory=list)
    """(call signature, result digest) of every result, in order: what repetition detection reads."""
    seen: set[str] = field(default_factory=set)
    """Result digests and answer texts seen so far (what counts as new information)."""
    no_progress: int = 0
    """Turns in a row that brought no new result and no new text."""
    repeat_mark: int = 0
    """History length when repetition last tripped (a new trip needs new repeats after it)."""
    compressed_turn: int = -1
    final_output: Any = None
    """The validated final output (JSON-safe) once an ``OutputValidated`` passed (``output_type`` runs)."""
    output_ok: bool = False
    output_attempts: int = 0
    """Final answers checked against ``output_type`` so far."""
    tool_choice: Any = None
    """The tool choice of the current request when a per-turn policy chose it (None: the loop's settings)."""
    output_note: str | None = None
    """A correction to send with the next request (a text answer that did not fit ``output_type``)."""

    def apply(self, event: BaseEvent) -> None:
        """Apply one event: check it against the transition table, then fold it in.

        Raises:
            IllegalTransition: when the event is not allowed in the current state.
            ValueError: when the event's ``seq`` or ``run_id`` does not continue this run.
        """
        if event.seq != self.seq:
            raise ValueError(f"event seq {event.seq} does not follow seq {self.seq - 1}")
        if self.run_id and event.run_id != self.run_id:
            raise ValueError(f"event of run {event.run_id!r} in run {self.run_id!r}")
        etype = event.type
        allowed = TRANSITIONS[self.state].get(etype)
        if allowed is None or event.state not in allowed:
            check_transition(self.state, etype, event.state)  # raises, naming the state and the event
        _FOLD[etype](self, event)
        self.state = event.state
        self.seq += 1
        self.last = event

    @classmethod
    def fold(cls, events: Iterable[BaseEvent]) -> RunState:
        """The state after applying ``events`` from the start."""
        rs = cls()
        for ev in events:
            rs.apply(ev)
        return rs

    # -- queries ---------------------------------------------------------------------------------------

    def pending_approvals(self) -> list[CallState]:
        """Calls waiting for a person, in the model's order."""
        return [c for c in self.calls.values() if c.status == "awaiting_approval"]

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens so far."""
        return self.input_tokens + self.output_tokens


# -- the fold, one function per event type ------------------------------------------------------------


def _f_run_started(rs: RunState, ev: Any) -> None:
    rs.run_id = ev.run_id
    rs.messages = list(ev.messages)
    rs.model = ev.model
    rs.tools = list(ev.tools)
    rs.tool_names = [t.name for t in ev.tools]
    rs.settings = dict(ev.settings)
    rs.started_at = ev.ts.timestamp()


def _f_model_requested(rs: RunState, ev: Any) -> None:
    rs.output_note = None
    rs.tool_choice = ev.tool_choice
    rs.messages.extend(ev.new_messages)
    for guard in [g for g, action in rs.tripped.items() if action == "note"]:
        del rs.tripped[guard]  # the note went out with this request
    rs.turn = ev.turn
    rs.finalizing = ev.finalize
    rs.response = None
    rs.calls = {}
    rs.retries = 0
    rs.text_length = 0
    rs.argument_lengths = {}


def _f_text_merged(rs: RunState, ev: Any) -> None:
    rs.text_length = ev.length


def _f_arguments_merged(rs: RunState, ev: Any) -> None:
    rs.argument_lengths[ev.index] = ev.length


def _f_model_retried(rs: RunState, ev: Any) -> None:
    rs.retries = ev.attempt
    rs.text_length = 0
    rs.argument_lengths = {}


def _f_turn_completed(rs: RunState, ev: Any) -> None:
    resp: ModelTurn = ev.response
    rs.response = resp
    rs.messages.append(resp.message)
    rs.turns_completed += 1
    rs.input_tokens += resp.usage.input_tokens
    rs.output_tokens += resp.usage.output_tokens
    used = rs.tokens_by_model.setdefault(resp.model, [0, 0])
    used[0] += resp.usage.input_tokens
    used[1] += resp.usage.output_tokens
    rs.calls = {p.call_id: CallState(part=p) for p in resp.message.tool_calls}
    text = resp.message.text
    if text and text not in rs.seen:
        rs.seen.add(text)
        rs.no_progress = -1  # this turn brought something new; ResultsBound settles the count


def _f_call_parsed(rs: RunState, ev: Any) -> None:
    c = rs.calls[ev.call_id]
    c.status = "parsed"
    c.arguments = ev.arguments
    c.parse_error = ev.error


def _f_call_validated(rs: RunState, ev: Any) -> None:
    c = rs.calls[ev.call_id]
    c.status = "valid"
    c.arguments = ev.arguments
    c.needs_approval = ev.needs_approval
    c.approval_note = ev.approval_note


def _answer(rs: RunState, c: CallState, result: ToolResultPart) -> None:
    c.status = "done"
    c.result = result
    rs.tool_calls += 1


def _f_call_rejected(rs: RunState, ev: Any) -> None:
    c = rs.calls[ev.call_id]
    status: ResultStatus = "skipped" if ev.reason == "skipped" else "error"
    _answer(rs, c, ToolResultPart(call_id=c.call_id, name=c.name, status=status, content=ev.message))


def _f_approval_requested(rs: RunState, ev: Any) -> None:
    if ev.kind == "escalation":  # a guard asks a person, not a call: track it as a pseudo-call
        rs.calls[ev.call_id] = CallState(
            part=ToolCallPart(call_id=ev.call_id, name=ev.name, arguments_raw="{}", arguments=ev.arguments),
            status="parsed", arguments=ev.arguments,
        )
    c = rs.calls[ev.call_id]
    c.status = "awaiting_approval"
    c.approval_id = ev.approval_id
    c.kind = ev.kind
    if ev.idempotency_key:
        c.idempotency_key = ev.idempotency_key


HEADLESS = "headless"
"""The ``by`` of denials made because no person can answer (``Loop(headless=True)``)."""


def denial_text(note: str | None, by: str | None = None) -> str:
    """What the model reads when its call was denied."""
    if by == HEADLESS:
        return f"Denied (headless): {note}" if note else "Denied (headless): nobody is available to approve it."
    return f"Denied by the user: {note}" if note else "Denied by the user."


def _f_approval_resolved(rs: RunState, ev: Any) -> None:
    c = rs.calls[ev.call_id]
    if c.status != "awaiting_approval":
        raise ValueError(f"call {ev.call_id!r} is not waiting for approval (it is {c.status})")
    c.decision = ev.decision
    if c.kind == "escalation":
        c.status = "done"
        guard = c.name
        if ev.decision == "approved":
            rs.extensions[guard] = rs.extensions.get(guard, 0) + 1
            rs.tripped.pop(guard, None)
            if guard in ("repetition", "no_progress"):
                rs.repeat_mark = len(rs.history)
        else:
            rs.tripped[guard] = "finalize"
        return
    if ev.decision == "denied":
        _answer(rs, c, ToolResultPart(call_id=c.call_id, name=c.name, status="denied",
                                      content=denial_text(ev.note, ev.by)))
        return
    if ev.decision == "submitted":
        _answer(rs, c, ToolResultPart(call_id=c.call_id, name=c.name, status="ok", content=ev.content or "",
                                      audit=ev.value))
        return
    c.status = "approved"
    if c.kind == "outcome_unknown":
        c.retry_confirmed = True
    if ev.arguments is not None:
        c.arguments = ev.arguments
        c.validated = None


def _f_tool_started(rs: RunState, ev: Any) -> None:
    c = rs.calls[ev.call_id]
    c.status = "running"
    c.idempotency_key = ev.idempotency_key


def _f_tool_finished(rs: RunState, ev: Any) -> None:
    c = rs.calls.get(ev.call_id)
    if c is None:
        raise ValueError(f"a result for call {ev.call_id!r}, which is not a call of this turn")
    if c.status != "running":
        raise ValueError(f"a second result for call {ev.call_id!r} (it is {c.status})")
    c.validated = None
    if ev.call_binding_sha256:
        c.binding = (ev.request_sha256, ev.result_sha256, ev.call_binding_sha256)
    _answer(
        rs, c, ToolResultPart(call_id=c.call_id, name=c.name, status=ev.status, content=ev.content, audit=ev.value)
    )


def _f_results_bound(rs: RunState, ev: Any) -> None:
    if not ev.call_ids:  # a paused turn sent back as it is: no result message, no progress counted
        return
    parts = []
    new = rs.no_progress < 0
    for cid in ev.call_ids:
        c = rs.calls[cid]
        result = c.result
        if result is None:
            raise ValueError(f"ResultsBound names call {cid!r}, which has no result")
        parts.append(result)
        dg = guards.digest(result.content)
        rs.history.append((guards.signature(c.name, c.arguments, c.part.arguments_raw), dg))
        if dg not in rs.seen:
            rs.seen.add(dg)
            new = True
    rs.no_progress = 0 if new else max(0, rs.no_progress) + 1
    rs.messages.append(Message(role="tool", parts=tuple(parts)))


def _f_guard_tripped(rs: RunState, ev: Any) -> None:
    rs.guards.append(ev)
    if ev.guard == APPROVAL_OVERRIDE:  # a record, not a limit: nothing to tell the model, nothing to stop
        rs.calls[ev.call_id].waiver_recorded = True
        return
    rs.tripped[ev.guard] = ev.action
    if ev.guard in ("repetition", "no_progress"):
        rs.repeat_mark = len(rs.history)
        if ev.guard == "no_progress":
            rs.no_progress = 0


def _f_output_validated(rs: RunState, ev: Any) -> None:
    rs.output_attempts = ev.attempt
    if ev.ok:
        rs.final_output, rs.output_ok = ev.output, True
    elif ev.call_id is None:  # a text answer: the correction goes out with the next request
        rs.output_note = output_correction(ev.errors)
    else:
        rs.calls[ev.call_id].output_error = output_correction(ev.errors)


def output_correction(errors: list[dict[str, Any]]) -> str:
    """What the model reads when its final answer does not fit the output type."""
    lines = "\n".join(f"- {e.get('loc') or '(answer)'}: {e.get('msg')}" for e in errors)
    return f"The final answer does not match the required output schema:\n{lines}\nFix these and answer again."


def _f_compression_applied(rs: RunState, ev: Any) -> None:
    rs.messages = list(ev.messages)
    rs.compressed_turn = rs.turn


def _f_run_finished(rs: RunState, ev: Any) -> None:
    rs.output = ev.output
    rs.reason = ev.reason


_FOLD: dict[str, Any] = {
    "RunStarted": _f_run_started,
    "ModelRequested": _f_model_requested,
    "TextMerged": _f_text_merged,
    "ArgumentsMerged": _f_arguments_merged,
    "ModelRetried": _f_model_retried,
    "TurnCompleted": _f_turn_completed,
    "CallParsed": _f_call_parsed,
    "CallValidated": _f_call_validated,
    "CallRejected": _f_call_rejected,
    "ApprovalRequested": _f_approval_requested,
    "ApprovalResolved": _f_approval_resolved,
    "ToolStarted": _f_tool_started,
    "ToolFinished": _f_tool_finished,
    "ResultsBound": _f_results_bound,
    "GuardTripped": _f_guard_tripped,
    "CompressionApplied": _f_compression_applied,
    "OutputValidated": _f_output_validated,
    "RunFinished": _f_run_finished,
}


# -- actions ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Emit:
    """Append this event (no I/O needed to decide it)."""

    cls: type[BaseEvent]
    state: LoopState
    fields: dict[str, Any]


@dataclass(frozen=True)
class PullModel:
    """Read the next item of the model's answer (start the request if none is open)."""


@dataclass(frozen=True)
class RunTool:
    """Execute this validated call."""

    call_id: str


@dataclass(frozen=True)
class Wait:
    """Nothing to do until a person resolves the pending approvals."""


@dataclass(frozen=True)
class Done:
    """The run is over."""


class Compress:
    """Rebuild the history shorter with the summarizer (tier 1); the driver calls it."""

    __slots__ = ("tokens",)

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens


Action = Emit | PullModel | RunTool | Wait | Done | Compress

DONE, PULL, WAIT = Done(), PullModel(), Wait()


@dataclass(frozen=True)
class EngineConfig:
    """What the engine needs to know about the loop."""

    registry: ToolRegistry
    budget: Budget = field(default_factory=Budget)
    settings: dict[str, Any] = field(default_factory=dict)
    finalize_prompt: str = FINALIZE_PROMPT
    headless: bool = False
    """Nobody can approve: calls that need a person are denied (each denial an event)."""
    approval: bool | Callable[[Any, Any], bool] | None = None
    """A loop-wide approval policy: it may ask for approval of any call, never waive a tool's own (None: each
    tool decides)."""
    override_tool_approval: bool = False
    """Let the loop-wide policy waive a tool's own approval (each waiver is an ``approval_override`` event)."""
    approval_ttl: float | None = None
    """Seconds an approval request stays valid (None: no expiry)."""
    summarizer: Any = None
    """A model (or ``callable(messages) -> str``) for tier-1 compression; None: prune only."""
    output: OutputSpec | None = None
    """The typed final output the run must end with (``Loop(output_type=...)``), or None for plain text."""
    tool_choice: Callable[[RunState], Any] | None = None
    """A per-turn tool-choice policy (``Loop(tool_choice=callable)``); a fixed choice lives in ``settings``."""

    @property
    def max_turns(self) -> int:
        """The turn budget."""
        return self.budget.max_turns


def arguments_digest(name: str, arguments: dict[str, Any] | None) -> str:
    """SHA-256 of a call's tool name and canonical arguments (key order and spacing do not matter)."""
    return binding.sha256(binding.canonical([name, arguments]))


def _finish(state: LoopState, reason: str, output: str | None = None) -> Emit:
    return Emit(RunFinished, state, {"final": state, "reason": reason, "output": output})


def classify(resp: ModelTurn) -> Emit | None:
    """The finish-reason rules for a turn: a ``RunFinished`` to emit, or None when its calls go on.

    Only an explicit completion (``stop`` with no calls) is ``COMPLETED``; a cut stream or a max-tokens
    stop is ``INCOMPLETE`` (even when calls are present: their arguments may be cut); a refusal or a
    content filter is ``REFUSED``; ``tool_calls`` with no calls is ``FAILED``, never a silent success; a
    paused turn (``pause``) goes on: it is sent back to the model (see ``_at_responded``).
    """
    msg = resp.message
    raw = resp.finish_reason_raw
    if not resp.complete:
        why = resp.incomplete_reason or "the response stream ended before the provider's done signal"
        return _finish(S.INCOMPLETE, f"{why}; nothing in the turn was executed")
    if resp.finish_reason == "length":
        what = "inside a tool call's arguments" if msg.tool_calls else "before the answer was complete"
        return _finish(S.INCOMPLETE, f"the model hit its output token limit ({raw}) {what}", msg.text or None)
    if msg.refusal is not None or resp.finish_reason in ("refusal", "content_filter"):
        why = "the provider's content filter stopped the answer" if resp.finish_reason == "content_filter" else (
            "the model refused"
        )
        return _finish(S.REFUSED, f"{why} ({raw})", msg.refusal or msg.text or None)
    if msg.tool_calls or resp.finish_reason == "pause":  # a paused turn continues (see _at_responded)
        return None
    if resp.finish_reason == "tool_calls":
        return _finish(S.FAILED, f"the model said {raw!r} but sent no tool call")
    if resp.finish_reason == "error":
        return _finish(S.FAILED, f"the provider reported an error ({raw})")
    if resp.finish_reason == "stop":
        return _finish(S.COMPLETED, "the model answered", msg.text)
    return _finish(S.INCOMPLETE, f"finish reason {raw!r} is not an explicit completion", msg.text or None)


def decide(rs: RunState, cfg: EngineConfig) -> Action:
    """What happens next in a run in state ``rs``. Pure: reads ``rs`` and ``cfg`` only."""
    return _DECIDE[rs.state](rs, cfg)


def _at_results_ready(rs: RunState, cfg: EngineConfig) -> Action:
    """Before each model request (READY or RESULTS_READY): guards in force, new trips, compression, request."""
    b = cfg.budget
    if rs.output_note is not None:
        return _request(rs, cfg, note=rs.output_note)
    for guard, action in rs.tripped.items():
        if action == "finalize":
            return _finalize_request(rs, cfg)
        if action == "stop":
            final = S.NO_PROGRESS if guard in ("repetition", "no_progress") else S.BUDGET_EXHAUSTED
            last = next(g for g in reversed(rs.guards) if g.guard == guard)
            return _finish(final, f"{last.message}; policy 'stop'")
        if action == "escalate":
            return _escalation(rs, guard)
        if action == "note":
            last = next(g for g in reversed(rs.guards) if g.guard == guard)
            return _request(rs, cfg, note=f"Note from the loop: {last.message}. Do not repeat it: try something "
                                           "different, or answer with what you have.")
    trip = guards.exhausted(rs, b, rs.now)
    if trip is not None:
        return _trip(trip, b.on_exhausted, rs.state)
    found = guards.repetition(rs.history, b.max_repeats, rs.repeat_mark) if len(rs.history) >= 2 else None
    if found is not None:
        period, sigs = found
        calls = " then ".join(sig.split(":", 1)[0] + sig.split(":", 1)[1][:80] for sig in sigs)
        what = "the same call" if period == 1 else "the same two calls in turn"
        message = f"{what} ({calls}) came back {b.max_repeats} times with the same result"
        return _trip(guards.Trip("repetition", b.max_repeats, b.max_repeats, message), _repeat_policy(rs, b))
    if b.max_no_progress is not None and rs.no_progress >= b.max_no_progress:
        message = f"{rs.no_progress} turns in a row brought no new result and no new text"
        return _trip(guards.Trip("no_progress", b.max_no_progress, rs.no_progress, message), _repeat_policy(rs, b))
    if b.context_window is not None:
        compress = _compression(rs, cfg)
        if compress is not None:
            return compress
    return _request(rs, cfg)


def _repeat_policy(rs: RunState, b: Budget) -> str:
    noted = any(g.action == "note" and g.guard in ("repetition", "no_progress") for g in rs.guards)
    return "stop" if b.on_repeat == "note" and noted else b.on_repeat  # a note is given once


def _trip(trip: guards.Trip, action: str, state: LoopState = S.RESULTS_READY) -> Emit:
    return Emit(GuardTripped, state, {
        "guard": trip.guard, "limit": trip.limit, "value": trip.value, "action": action, "message": trip.message,
    })


def _finalize_request(rs: RunState, cfg: EngineConfig) -> Emit:
    return Emit(ModelRequested, S.MODEL_REQUESTED, {
        "message_count": len(rs.messages) + 1,
        "new_messages": [Message.user(cfg.finalize_prompt)],
        "tools": [],
        "settings": {**cfg.settings, "tool_choice": "none"},
        "finalize": True,
    })


def _escalation(rs: RunState, guard: str) -> Emit:
    last = next(g for g in reversed(rs.guards) if g.guard == guard)
    arguments = {"guard": guard, "limit": last.limit, "value": last.value, "message": last.message}
    return Emit(ApprovalRequested, S.WAITING_APPROVAL, {
        "approval_id": f"esc_{rs.run_id}_{guard}_{len(rs.guards)}", "call_id": f"guard:{guard}", "name": guard,
        "arguments": arguments, "arguments_digest": arguments_digest(guard, arguments), "risk": "budget",
        "kind": "escalation",
    })


def _compression(rs: RunState, cfg: EngineConfig) -> Action | None:
    b = cfg.budget
    assert b.context_window is not None
    tokens = guards.estimate_tokens(rs.messages, rs.tools)
    if tokens <= b.compress_at * b.context_window:
        return None
    if rs.compressed_turn != rs.turn:
        if cfg.summarizer is not None:
            return Compress(tokens)
        return prune_step(rs, cfg, tokens)
    message = f"the conversation ({tokens} tokens) is still over {b.compress_at:.0%} of the window after compression"
    return _trip(guards.Trip("context_window", b.context_window, tokens, message), "finalize", rs.state)


def prune_step(rs: RunState, cfg: EngineConfig, tokens: int) -> Emit:
    """Tier 2: keep system, the first request and the last complete call/result turns."""
    kept, removed = guards.prune(rs.messages, cfg.budget.keep_pairs)
    if not removed:
        b = cfg.budget
        message = f"the conversation ({tokens} tokens) cannot be pruned below {b.compress_at:.0%} of the window"
        return _trip(guards.Trip("context_window", b.context_window or 0, tokens, message), "finalize", rs.state)
    return Emit(CompressionApplied, S.RESULTS_READY if rs.state is S.RESULTS_READY else rs.state, {
        "tier": 2, "tokens_before": tokens, "tokens_after": guards.estimate_tokens(kept, rs.tools),
        "messages": kept, "removed": removed,
    })


PAUSE_LIMIT = 8
"""How many times in a row a paused turn (finish reason ``pause``) is sent back before the run stops."""


def _at_responded(rs: RunState, cfg: EngineConfig) -> Action:
    assert rs.response is not None
    if rs.finalizing:
        return _finalized(rs.response, rs, cfg)
    verdict = classify(rs.response)
    if cfg.output is not None and verdict is not None and verdict.state is S.COMPLETED:
        return _text_output(rs, cfg, rs.response.message.text)
    if verdict is None and rs.response.finish_reason == "pause" and not rs.response.message.tool_calls:
        return _paused(rs)
    return verdict if verdict is not None else _next_call_step(rs, cfg)


def _text_output(rs: RunState, cfg: EngineConfig, text: str) -> Emit:
    """A text answer in an ``output_type`` run: it counts if it is JSON that fits; else a correction turn."""
    spec = cfg.output
    assert spec is not None
    if rs.output_ok:
        return _finish(S.COMPLETED, "the model answered with output that fits the output type",
                       json.dumps(rs.final_output, ensure_ascii=False))
    ok, value, errors = spec.check_text(text)
    attempt = rs.output_attempts + 1
    if ok:
        return Emit(OutputValidated, S.RESPONDED, {"ok": True, "output": value, "attempt": attempt})
    if attempt > spec.retries:
        return _output_failed(attempt, errors)
    return Emit(OutputValidated, S.RESULTS_READY, {"ok": False, "errors": errors, "attempt": attempt})


def _output_failed(attempt: int, errors: list[dict[str, Any]]) -> Emit:
    first = errors[0] if errors else {"loc": "", "msg": "no answer"}
    return _finish(S.FAILED, f"the final answer did not fit the output type after {attempt} attempts "
                             f"(last error: {first.get('loc') or '(answer)'}: {first.get('msg')})")


def _paused(rs: RunState) -> Emit:
    """A paused turn goes back to the model as it is (a ResultsBound with no results), up to PAUSE_LIMIT times."""
    paused = 0
    for m in reversed(rs.messages):  # the paused turns so far: the assistant messages at the end
        if m.role != "assistant":
            break
        paused += 1
    if paused > PAUSE_LIMIT:
        return _finish(S.INCOMPLETE, f"the provider paused the turn {paused} times in a row "
                                     f"({rs.response.finish_reason_raw if rs.response else 'pause'}); the limit is "
                                     f"{PAUSE_LIMIT}", rs.response.message.text or None if rs.response else None)
    return Emit(ResultsBound, S.RESULTS_READY, {"call_ids": []})


def _never(rs: RunState, cfg: EngineConfig) -> Action:
    raise AssertionError("a NEW run starts with RunStarted, which the driver appends")




def _request(rs: RunState, cfg: EngineConfig, note: str | None = None) -> Emit:
    settings = cfg.settings
    fields: dict[str, Any] = {}
    if cfg.tool_choice is not None:
        try:
            choice = check_tool_choice(cfg.tool_choice(rs), rs.tool_names)
        except Exception as exc:  # a bug in the policy: stop plainly rather than guess a choice
            return _finish(S.FAILED, f"the tool_choice policy failed: {type(exc).__name__}: {exc}")
        settings = {**settings, "tool_choice": choice}
        fields["tool_choice"] = choice
    if note is not None:
        return Emit(ModelRequested, S.MODEL_REQUESTED, {
            "message_count": len(rs.messages) + 1, "new_messages": [Message.user(note)], "tools": rs.tool_names,
            "settings": settings, **fields,
        })
    return Emit(ModelRequested, S.MODEL_REQUESTED, {
        "message_count": len(rs.messages),
        "tools": rs.tool_names,
        "settings": settings,
        **fields,
    })


TOOL_CHOICES = ("auto", "none", "required")


def check_tool_choice(choice: Any, tool_names: Sequence[str]) -> str | dict[str, str]:
    """A tool choice in its canonical form (``auto``, ``none``, ``required`` or ``{"name": tool}``).

    Raises:
        ValueError: any other value, or a name the run does not offer.
    """
    if isinstance(choice, str) and choice in TOOL_CHOICES:
        return choice
    if isinstance(choice, dict) and set(choice) == {"name"} and isinstance(choice["name"], str):
        if choice["name"] not in tool_names:
            raise ValueError(f"tool_choice names {choice['name']!r}, which is not offered "
                             f"(offered: {', '.join(tool_names) or 'none'})")
        return {"name": choice["name"]}
    raise ValueError(f"tool_choice={choice!r}: use 'auto', 'none', 'required' or {{'name': <tool>}}")


def _finalized(resp: ModelTurn, rs: RunState | None = None, cfg: EngineConfig | None = None) -> Emit:
    verdict = classify(resp)
    if cfg is not None and cfg.output is not None and rs is not None and (verdict is None or
                                                                          verdict.state is S.COMPLETED):
        forced = [c for c in resp.message.tool_calls if c.name == cfg.output.name]
        ok, value, errors = (cfg.output.check(forced[0].arguments) if forced else
                             cfg.output.check_text(resp.message.text))
        if ok and not rs.output_ok:
            return Emit(OutputValidated, S.RESPONDED, {"ok": True, "output": value, "attempt": rs.output_attempts + 1})
        if rs.output_ok:
            return _finish(S.COMPLETED, "the model answered in the tools-free finalization turn",
                           json.dumps(rs.final_output, ensure_ascii=False))
        return _output_failed(rs.output_attempts + 1, errors)
    if verdict is not None and verdict.state is not S.COMPLETED:
        return verdict
    text = resp.message.text
    if text:
        note = " (its tool calls were ignored)" if resp.message.tool_calls else ""
        return _finish(S.COMPLETED, f"the model answered in the tools-free finalization turn{note}", text)
    return _finish(S.BUDGET_EXHAUSTED, "the turn limit was reached and the finalization turn held no answer")


# The order in which a turn's calls move on: all are parsed, then all validated; all that need no approval
# start, then run (together, under Run.run(); one per step under Run.step()); approvals are asked for after
# that, so a pause never holds the other calls back; approved calls run once approved. One pass finds the
# first call of each kind.
_PRIORITY: dict[str, int] = {"unparsed": 0, "parsed": 1, "valid": 2, "running": 3, "valid+approval": 4, "approved": 5}


def _next_call_step(rs: RunState, cfg: EngineConfig) -> Action:
    if rs.output_ok:  # the output tool's call fits: the run is done (other calls of the turn are left)
        return _finish(S.COMPLETED, "the model called the output tool with output that fits the output type",
                       json.dumps(rs.final_output, ensure_ascii=False))
    best: CallState | None = None
    best_rank = 99
    waiting = False
    for c in rs.calls.values():
        status = c.status
        if status == "done":
            continue
        if status == "awaiting_approval":
            if cfg.headless:
                return _resolve_headless(rs, c)
            waiting = True
            continue
        rank = _PRIORITY["valid+approval"] if status == "valid" and c.needs_approval else _PRIORITY[status]
        if rank < best_rank:
            best, best_rank = c, rank
            if rank == 0:
                break
    if best is None:
        if waiting:
            return WAIT
        mismatch = verify_bindings(rs, cfg)
        if mismatch:
            return _finish(S.FAILED, f"refused to send results to the model: {mismatch}")
        return Emit(ResultsBound, S.RESULTS_READY, {"call_ids": list(rs.calls)})
    if best_rank == 0:
        return _parse(best, list(rs.calls).index(best.call_id))
    if best_rank == 1:
        return _validate(rs, best, cfg)
    if best_rank == 3:
        return RunTool(best.call_id)
    if best_rank == 4:
        return _ask(rs, cfg, best)
    return _start(rs, cfg, best)


def _ask(rs: RunState, cfg: EngineConfig, c: CallState) -> Emit:
    assert c.arguments is not None
    tool = cfg.registry.get(c.name)
    return Emit(ApprovalRequested, S.WAITING_APPROVAL, {
        "approval_id": f"apr_{rs.run_id}_{c.call_id}",
        "call_id": c.call_id, "name": c.name, "arguments": c.arguments,
        "arguments_digest": arguments_digest(c.name, c.arguments),
        "risk": tool.risk if tool else "read",
        "kind": "client_result" if tool is not None and tool.client else "approval",
        "ttl_s": cfg.approval_ttl, "note": c.approval_note,
    })


def _start(rs: RunState, cfg: EngineConfig, c: CallState) -> Emit:
    if cfg.budget.context_window is not None:
        squeeze = _before_tool(rs, cfg, c)
        if squeeze is not None:
            return squeeze
    key = call_key(rs, cfg, c)
    c.expected_request = request_hash(rs, cfg, c, key)
    return Emit(ToolStarted, S.EXECUTING, {"call_id": c.call_id, "name": c.name, "idempotency_key": key})


def _before_tool(rs: RunState, cfg: EngineConfig, c: CallState) -> Emit | None:
    """Compression before a tool runs.

    Older turns are pruned (the current one stays whole); if the conversation is still over the threshold
    after that, the turn's remaining calls are answered with ``skipped`` results (tier 3; the next request then
    finalizes without tools).
    """
    b = cfg.budget
    assert b.context_window is not None
    answered = [x.result for x in rs.calls.values() if x.result is not None]
    tokens = guards.estimate_tokens(rs.messages, rs.tools) + sum(len(r.content) for r in answered) // 4
    if tokens <= b.compress_at * b.context_window:
        return None
    if rs.compressed_turn != rs.turn:
        current = rs.messages[-1]
        kept, removed = guards.prune(rs.messages[:-1], b.keep_pairs)
        if removed:
            history = [*kept, current]
            after = guards.estimate_tokens(history, rs.tools) + sum(len(r.content) for r in answered) // 4
            return Emit(CompressionApplied, rs.state, {
                "tier": 2, "tokens_before": tokens, "tokens_after": after, "messages": history, "removed": removed,
            })
    return Emit(CallRejected, rs.state, {
        "call_id": c.call_id, "name": c.name, "reason": "skipped",
        "message": (f"Skipped: the conversation ({tokens} tokens) is over {b.compress_at:.0%} of the model's "
                    f"window, so the remaining calls of this turn were not run."),
    })


def operation_id(rs: RunState) -> str:
    """The run's operation id (its run id unless the run was started with another)."""
    return str(rs.settings.get("operation_id") or rs.run_id)


def call_key(rs: RunState, cfg: EngineConfig, c: CallState) -> str | None:
    """The idempotency key of a call: the tool's own key function, or operation id + tool + arguments.

    Keys serve the effect ledger, so they are made for side-effecting tools and for tools that ask for a
    context (to hand the key downstream); a read-only tool's calls go without.
    """
    if c.idempotency_key:
        return c.idempotency_key  # a retry keeps its key
    tool = cfg.registry.get(c.name)
    if tool is None or not (tool.side_effects or tool.context_param or tool.key_fn):
        return None
    if tool.key_fn is not None:
        return tool.key_for(c.arguments or {})
    if tool.idempotency == "call":  # identical calls are distinct effects: the call is the intent
        return binding.idempotency_key(operation_id(rs), c.name, {"call_id": c.call_id})
    return binding.idempotency_key(operation_id(rs), c.name, c.arguments)


def request_hash(rs: RunState, cfg: EngineConfig, c: CallState, key: str | None = None) -> str:
    """The request hash of a call, from trusted state (the model's turn, the arguments, the loop's tools)."""
    tool = cfg.registry.get(c.name)
    resp = rs.response
    return binding.request_sha256(
        provider=resp.provider if resp else "", response_id=resp.response_id if resp else None,
        call_id=c.call_id, operation_id=operation_id(rs), idempotency_key=key or c.idempotency_key, tool=c.name,
        schema_version=tool.schema_version if tool else "", policy_revision=str(rs.settings.get("policy_revision", "")),
        arguments=c.arguments,
    )


def verify_bindings(rs: RunState, cfg: EngineConfig) -> str | None:
    """Recompute every recorded binding of the turn; a description of the first mismatch, or None."""
    for c in rs.calls.values():
        if c.binding is None or c.result is None:
            continue
        request, result, bound = c.binding
        if request != (c.expected_request or request_hash(rs, cfg, c)):
            return f"the result recorded for call {c.call_id!r} was made for a different call (request hash)"
        if result != binding.result_sha256(c.call_id, c.result.status, c.result.content):
            return f"the result of call {c.call_id!r} changed after it was recorded (result hash)"
        if bound != binding.binding_sha256(request, result):
            return f"the binding of call {c.call_id!r} does not match its request and result"
    return None


def _resolve_headless(rs: RunState, c: CallState) -> Emit:
    others = any(o.status == "awaiting_approval" and o is not c for o in rs.calls.values())
    what = {"client_result": "nobody is available to run this client-side tool",
            "outcome_unknown": "nobody is available to reconcile this call's unknown outcome"}.get(
        c.kind, "nobody is available to approve it")
    if c.approval_note:
        what = f"{what} ({c.approval_note})"
    target = S.WAITING_APPROVAL if others else (S.RESULTS_READY if c.kind == "escalation" else S.EXECUTING)
    return Emit(ApprovalResolved, target, {
        "approval_id": c.approval_id or "", "call_id": c.call_id, "decision": "denied", "by": HEADLESS,
        "note": what,
    })


def _parse(c: CallState, position: int) -> Emit:
    error = None
    if c.part.arguments is None:
        try:
            value = json.loads(c.part.arguments_raw)
            error = f"expected a JSON object, got {type(value).__name__}"
        except ValueError as exc:
            error = str(exc)
    return Emit(CallParsed, S.VALIDATING, {
        "call_id": c.call_id, "name": c.name, "index": position,
        "arguments": c.part.arguments, "error": error,
    })


def _validate_output(rs: RunState, c: CallState, cfg: EngineConfig) -> Emit:
    spec = cfg.output
    assert spec is not None
    base = {"call_id": c.call_id, "name": c.name}
    if c.output_error is not None:
        return Emit(CallRejected, S.VALIDATING, {**base, "reason": "output", "message": c.output_error})
    attempt = rs.output_attempts + 1
    ok, value, errors = spec.check(c.arguments)
    if not ok and attempt > spec.retries:
        return _output_failed(attempt, errors)
    return Emit(OutputValidated, S.VALIDATING, {"ok": ok, "call_id": c.call_id, "output": value, "errors": errors,
                                               "attempt": attempt})


def _validate(rs: RunState, c: CallState, cfg: EngineConfig) -> Emit:
    base = {"call_id": c.call_id, "name": c.name}
    if cfg.output is not None and c.name == cfg.output.name:
        if c.arguments is None:
            return Emit(CallRejected, S.VALIDATING, {
                **base, "reason": "invalid_json",
                "message": f"The arguments for '{c.name}' are not a valid JSON object ({c.parse_error}). Call it "
                           "again with the answer as one JSON object.",
            })
        return _validate_output(rs, c, cfg)
    tool = cfg.registry.get(c.name)
    if tool is None:
        return Emit(CallRejected, S.VALIDATING, {
            **base, "reason": "unknown_tool", "message": cfg.registry.unknown_message(c.name),
        })
    if c.arguments is None:
        return Emit(CallRejected, S.VALIDATING, {
            **base, "reason": "invalid_json",
            "message": (
                f"The arguments for tool '{c.name}' are not a valid JSON object ({c.parse_error}). "
                "Call the tool again with the arguments as one JSON object."
            ),
        })
    try:
        validated = tool.validate(c.arguments)
    except ValidationError as exc:
        message, errors = describe_errors(c.name, exc)
        return Emit(CallRejected, S.VALIDATING, {**base, "reason": "schema", "message": message, "errors": errors})
    except Exception as exc:  # a user validator that raised something else: still the arguments' fault
        message = f"Invalid arguments for tool '{c.name}': a validator raised {type(exc).__name__}: {exc}"
        return Emit(CallRejected, S.VALIDATING, {**base, "reason": "schema", "message": message, "errors": [
            {"loc": "(arguments)", "msg": f"{type(exc).__name__}: {exc}", "type": "validator_error"}]})
    c.validated = validated
    if tool.key_fn is not None:
        try:
            tool.key_for(c.arguments)
        except Exception as exc:
            return Emit(CallRejected, S.VALIDATING, {
                **base, "reason": "idempotency_key",
                "message": (f"Tool '{c.name}' could not name this call's effect (its idempotency key function raised "
                            f"{type(exc).__name__}: {exc}), so it was not run."),
            })
    needs, note, waived = approval_needed(tool, cfg, c, rs)
    if waived and not c.waiver_recorded:
        return Emit(GuardTripped, S.VALIDATING, {
            "guard": APPROVAL_OVERRIDE, "limit": 0.0, "value": 1.0, "action": "note", "call_id": c.call_id,
            "message": (f"the loop's approval policy waived the approval that tool {c.name!r} requires "
                        f"(risk {tool.risk!r}) for call {c.call_id!r} (override_tool_approval=True)"),
        })
    return Emit(CallValidated, S.VALIDATING, {
        **base, "arguments": tool.dump(validated), "needs_approval": needs, "approval_note": note,
    })


APPROVAL_OVERRIDE = "approval_override"
"""The guard name of the event recorded each time a loop policy waives a tool's own approval."""


def _ask_policy(policy: Any, c: CallState, rs: RunState, who: str) -> tuple[bool, str | None]:
    """Evaluate an approval policy, failing closed: a policy that raises means a person must decide."""
    if policy is None or isinstance(policy, bool):
        return bool(policy), None
    try:
        return bool(policy(c.part, rs)), None
    except Exception as exc:
        return True, f"the {who} approval policy raised {type(exc).__name__}: {exc}"


def approval_needed(tool: Tool, cfg: EngineConfig, c: CallState, rs: RunState) -> tuple[bool, str | None, bool]:
    """Whether a call waits for a person: ``(needs, note, waived)``. See the precedence table in the README.

    A client-side tool always waits (the client must answer). Otherwise the tool's own rule (its ``approval``,
    or by risk: ``write``/``dangerous`` ask) and the loop's policy are both asked, and **either one** asking is
    enough: a loop policy can raise approval, never lower it. Only ``override_tool_approval=True`` lets the
    loop policy decide alone; when it then waives what the tool asked for, ``waived`` is True (and the engine
    records an ``approval_override`` event). A policy that raises counts as "ask a person", with its error in
    ``note``.
    """
    if tool.client:
        return True, None, False
    own = tool.approval if tool.approval is not None else tool.risk != "read"
    tool_needs, tool_note = _ask_policy(own, c, rs, "tool's")
    if cfg.approval is None:
        return tool_needs, tool_note, False
    loop_needs, loop_note = _ask_policy(cfg.approval, c, rs, "loop's")
    if cfg.override_tool_approval:
        return loop_needs, loop_note, tool_needs and not loop_needs
    return tool_needs or loop_needs, tool_note or loop_note, False


def _pull(rs: RunState, cfg: EngineConfig) -> Action:
    return PULL


def _done(rs: RunState, cfg: EngineConfig) -> Action:
    return DONE


_DECIDE: dict[LoopState, Callable[[RunState, EngineConfig], Action]] = {
    S.NEW: _never,
    S.READY: _at_results_ready,
    S.MODEL_REQUESTED: _pull,
    S.RESPONDED: _at_responded,
    S.VALIDATING: _next_call_step,
    S.WAITING_APPROVAL: _next_call_step,
    S.EXECUTING: _next_call_step,
    S.RESULTS_READY: _at_results_ready,
    **dict.fromkeys(TERMINAL, _done),
}
"""What to do next, by state (``decide`` looks it up: one dict access instead of a chain of tests)."""


__all__ = [
    "Action", "CallState", "Compress", "Done", "Emit", "EngineConfig", "PullModel", "RunState", "RunTool", "Wait",
    "arguments_digest", "classify", "decide", "prune_step", "request_hash", "verify_bindings",
]
