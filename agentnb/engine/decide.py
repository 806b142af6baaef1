"""The decision half of the sans-IO core: given a folded :class:`RunState`, what comes next.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .. import binding, guards
from ..events import (
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
    ToolStarted,
)
from ..exceptions import InvalidArguments
from ..guards import Budget
from ..messages import Message, ModelTurn
from ..output import OutputSpec
from ..states import TERMINAL, LoopState, S
from ..tools import Tool, ToolRegistry, describe_errors
from .fold import APPROVAL_OVERRIDE, FINALIZE_PROMPT, HEADLESS, TOO_DEEP, CallState, RunState

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
            error = f"expected a JSON object, got {type(value).__name__}" if not isinstance(value, dict) else TOO_DEEP
        except RecursionError:
            error = TOO_DEEP
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
    if c.parse_error == TOO_DEEP:  # a JSON object the value boundary refused (agentnb.messages.ToolCallPart)
        return Emit(CallRejected, S.VALIDATING, {
            **base, "reason": "invalid_arguments",
            "errors": [{"loc": "(arguments)", "msg": TOO_DEEP, "type": "too_deep"}],
            "message": f"Invalid arguments for tool '{c.name}': {TOO_DEEP}. Send flatter arguments.",
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
    except InvalidArguments as exc:  # the value boundary refused them before the schema (see agentnb.values)
        return Emit(CallRejected, S.VALIDATING, {
            **base, "reason": "invalid_arguments", "errors": exc.errors,
            "message": f"Invalid arguments for tool '{c.name}':\n" + "\n".join(
                f"- {e['loc']}: {e['msg']}" for e in exc.errors),
        })
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
    "PAUSE_LIMIT", "TOOL_CHOICES", "Action", "Compress", "Done", "Emit", "EngineConfig", "PullModel", "RunTool", "Wait",
    "approval_needed", "arguments_digest", "call_key", "check_tool_choice", "classify", "decide", "operation_id",
    "prune_step", "request_hash", "verify_bindings",
]
