"""The engine's inbound door: :func:`receive` turns what I/O brought back into the event to append.

Theory of operation. :func:`~agentnb._engine.decide` says what happens next; when that needs I/O (ask the
model, run a tool, wait for a person, summarize), a port of the driver performs it and returns a typed record
(:mod:`.results`). ``receive(rs, cfg, result)`` is the one function that gives such a record its meaning,
dispatched by the record's class through :data:`RULES` as the fold is by the event's class:

- the model's items: a text or argument fragment (already masked) joins the answer; the whole turn gets
  every call an id unique in the conversation; a failure is retried or fails the run (from the error, the
  time spent and the jitter the port drew); a broken, empty or bogus stream ends the run;
- a tool's I/O (:mod:`.effects`): the ledger's answer to a claim (a :data:`~agentnb._engine.results.Verdict`
  or the event that answers the call), an outcome, a stopped call by the write-vs-read rule;
- a person's :class:`~agentnb._engine.results.Decision`, checked against the request it answers (still
  waiting, not expired at the decision's time, the arguments the approver saw, edited arguments that fit the
  schema) -- refused with an exception that names what was wrong, nothing recorded;
- a person's :class:`~agentnb._engine.results.Intervention` in a run nobody drives (see :func:`intervention`);
- a summary (tier-1 compression, or tier 2 when it did not help) and a cancellation.

``receive`` returns an :class:`~agentnb._engine.Emit` (the event, and the ledger outcome to write with it), or
a verdict for a ledger claim. It reads no clock, draws no random number and writes nothing; a completeness
test proves every result class has a rule.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from .._messages import Message, ModelTurn, ToolCallPart
from .._request import ArgumentsDelta, TextDelta
from .._states import TERMINAL, S
from ..events import (
    ArgumentsMerged,
    BaseEvent,
    CallRejected,
    CompressionApplied,
    Interjected,
    ModelRetried,
    RunFinished,
    TextMerged,
    TurnCompleted,
)
from ..exceptions import AgentnbError, ApprovalError, ApprovalExpired, DigestMismatch, RunNotPaused
from . import guards
from .actions import Emit, EngineConfig, RetryPolicy
from .build import UNSTAMPED, finished
from .calls import arguments_digest, resolution
from .decide import prune_step
from .effects import TOOL_RULES, outcome_unknown, writes
from .fold import CallState, RunState
from .results import (
    Cancelled,
    Decision,
    Intervention,
    ModelFailed,
    ModelLost,
    ModelRaised,
    NotAnItem,
    StreamBroke,
    StreamEnded,
    Summary,
    TurnReceived,
    Verdict,
)


def receive(rs: RunState, cfg: EngineConfig, result: Any) -> Emit | Verdict:
    """The meaning of an I/O result in state ``rs``: the event to append (or a ledger verdict). Pure.

    Example:
        >>> from agentnb._engine import EngineConfig, RunState
        >>> from agentnb._engine.results import ModelFailed
        >>> from agentnb.tools import ToolRegistry
        >>> cfg = EngineConfig(registry=ToolRegistry([]))
        >>> ev = receive(RunState(), cfg, ModelFailed("rate limited", status=429, retryable=True)).event
        >>> type(ev).__name__, ev.attempt, ev.delay_s
        ('ModelRetried', 1, 0.5)

    Raises:
        TypeError: ``result`` is not an I/O result record.
        RunNotPaused, ApprovalError, ApprovalExpired, DigestMismatch: a decision that may not be recorded.
    """
    rule = RULES.get(type(result))
    if rule is None:
        raise TypeError(f"no rule for an I/O result of type {type(result).__name__}")
    return rule(rs, cfg, result)


# -- the model ---------------------------------------------------------------------------------------------


def _text(rs: RunState, cfg: EngineConfig, item: TextDelta) -> Emit:
    return Emit(TextMerged(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.MODEL_REQUESTED, fragment=item.fragment,
                           length=rs.text_length + len(item.fragment)))


def _arguments(rs: RunState, cfg: EngineConfig, item: ArgumentsDelta) -> Emit:
    # bytes so far (a lone surrogate, from JSON's \ud800, has no UTF-8 form: counted as its three bytes)
    length = rs.argument_lengths.get(item.index, 0) + len(item.fragment.encode("utf-8", "surrogatepass"))
    return Emit(ArgumentsMerged(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.MODEL_REQUESTED, index=item.index,
                                call_id=item.call_id, name=item.name, fragment=item.fragment, length=length))


def fresh_call_id(run_id: str, turn: int, position: int, taken: Collection[str]) -> str:
    """An id for the call at ``position`` of turn ``turn`` that no call in ``taken`` has."""
    base = f"call_{run_id[4:]}_{turn}_{position}"
    fresh, n = base, 0
    while fresh in taken:
        n += 1
        fresh = f"{base}_{n}"
    return fresh


def assign_call_ids(turn: ModelTurn, run_id: str, turn_no: int, taken: set[str]) -> ModelTurn:
    """``turn`` with every call id unique in the conversation: made where missing or already in ``taken``.

    ``taken`` (the ids in the conversation so far) gains this turn's ids. A model that numbers its calls per
    run (a script, a replayed cassette) so never repeats an id the provider has seen in this conversation.

    Example:
        >>> from agentnb._messages import Message, ModelTurn, ToolCallPart
        >>> call = ToolCallPart(call_id="c1", name="f", arguments_raw="{}", arguments={})
        >>> t = ModelTurn(message=Message(role="assistant", parts=(call, call)), finish_reason="tool_calls",
        ...               provider="scripted", model="m")
        >>> [c.call_id for c in assign_call_ids(t, "run_abc", 2, {"x"}).message.tool_calls]
        ['c1', 'call_abc_2_1']
    """
    parts = list(turn.message.parts)
    changed = False
    for i, p in enumerate(parts):
        if not isinstance(p, ToolCallPart):
            continue
        if not p.call_id or p.call_id in taken:
            p = parts[i] = replace(p, call_id=fresh_call_id(run_id, turn_no, i, taken))
            changed = True
        taken.add(p.call_id)
    return replace(turn, message=replace(turn.message, parts=tuple(parts))) if changed else turn


def _turn(rs: RunState, cfg: EngineConfig, r: TurnReceived) -> Emit:
    """The whole answer, its calls given ids unique in the conversation (the fold's memo of the ids seen)."""
    turn = r.turn
    if turn.message.tool_calls:
        turn = assign_call_ids(turn, rs.run_id, rs.turn, rs.call_ids.seen(rs.messages))
    return Emit(TurnCompleted(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.RESPONDED, response=turn,
                              latency_s=r.latency_s))


def model_failed(rs: RunState, policy: RetryPolicy, r: ModelFailed) -> ModelRetried | RunFinished:
    """Retry or fail after a failed model request.

    A retryable error is asked again after ``base_delay * 2**(attempt-1)``, scaled by the jitter (drawn in
    [0.5, 1)) and capped at ``max_delay``; a longer ``retry_after`` from the provider wins. It fails when the
    retries are used up, when waiting would pass ``max_time`` (``spent_s`` is the seconds since the first
    attempt), or when the error is not retryable.
    """
    attempt = rs.retries + 1
    delay = min(policy.max_delay, policy.base_delay * 2 ** (attempt - 1) * r.jitter)
    if isinstance(r.retry_after, int | float) and r.retry_after > delay:
        delay = float(r.retry_after)  # the provider said when to come back
    shown = f"HTTP {r.status}: {r.error}" if r.status else r.error
    if r.retryable and rs.retries < policy.max_retries:
        if policy.max_time is not None and r.spent_s + delay > policy.max_time:
            return _with_wire(finished(S.FAILED, f"the model call failed and retrying would pass "
                                                 f"max_retry_time={policy.max_time:g} s: {shown}"), r.wire)
        return ModelRetried(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.MODEL_REQUESTED, attempt=attempt,
                            status=r.status, error=r.error, delay_s=round(delay, 3), wire=r.wire)
    tries = f" after {rs.retries + 1} attempts" if rs.retries else ""
    return _with_wire(finished(S.FAILED, f"the model call failed{tries}: {shown}"), r.wire)


def _with_wire(event: RunFinished, wire: dict[str, Any] | None) -> RunFinished:
    """The run's last event keeps the exchange of the request that ended it."""
    event.wire = wire
    return event


def _failed(rs: RunState, cfg: EngineConfig, r: ModelFailed) -> Emit:
    return Emit(model_failed(rs, cfg.retry, r))


def _lost(rs: RunState, cfg: EngineConfig, r: ModelLost) -> Emit:
    return Emit(ModelRetried(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.MODEL_REQUESTED, attempt=rs.retries + 1,
                             status=None, delay_s=0.0, error="the process stopped during the model call; asking again"))


def _ended(rs: RunState, cfg: EngineConfig, r: StreamEnded) -> Emit:
    return Emit(finished(S.INCOMPLETE, "the model's response ended without a final turn"))


def _broke(rs: RunState, cfg: EngineConfig, r: StreamBroke) -> Emit:
    return Emit(_with_wire(finished(S.INCOMPLETE, f"the response stream broke: {r.error}; nothing in it was "
                                                  "executed"), r.wire))


def _raised(rs: RunState, cfg: EngineConfig, r: ModelRaised) -> Emit:
    return Emit(finished(S.FAILED, f"the model raised {r.where}"))


def _not_an_item(rs: RunState, cfg: EngineConfig, r: NotAnItem) -> Emit:
    return Emit(finished(S.FAILED, f"the model yielded {r.kind}, not a stream item or a turn"))


# -- people ------------------------------------------------------------------------------------------------


def waiting(rs: RunState, call_id: str) -> CallState:
    """The call a person may answer now.

    Raises:
        RunNotPaused: the run waits for nobody.
        ApprovalError: no such call in this turn, or it is not waiting.
    """
    if rs.state is not S.WAITING_APPROVAL:
        raise RunNotPaused(f"the run is {rs.state.value}, not waiting for an approval")
    call = rs.calls.get(call_id)
    if call is None:
        known = ", ".join(c.call_id for c in rs.pending_approvals()) or "(none)"
        raise ApprovalError(f"no call {call_id!r} in this turn; calls waiting for approval: {known}")
    if call.status != "awaiting_approval":
        raise ApprovalError(f"call {call_id!r} is not waiting for approval (it is {call.status})")
    return call


def _check_request(c: CallState, d: Decision) -> None:
    """The request ``c`` waits on allows ``d``: not expired (for an approval), the arguments the approver saw."""
    req = c.request
    if req is None:  # pragma: no cover - a waiting call always has its request (the fold sets it)
        raise ApprovalError(f"no approval request for call {c.call_id!r}")
    expires = req.expires_at
    if d.decision == "approved" and expires is not None and d.at > expires:
        raise ApprovalExpired(
            f"the approval request for call {c.call_id!r} expired at {expires.isoformat(timespec='seconds')}; "
            "nothing ran. Deny it (run.deny) or start again."
        )
    if d.decision == "denied":
        return
    current = arguments_digest(c.name, c.arguments)
    if current != req.arguments_digest:
        raise DigestMismatch(f"call {c.call_id!r}: its arguments changed since approval was requested")
    if d.digest is not None and d.digest != current:
        raise DigestMismatch(
            f"call {c.call_id!r}: the arguments you approved (digest {d.digest[:12]}…) are not the ones "
            f"waiting (digest {current[:12]}…); nothing ran"
        )


def _decision(rs: RunState, cfg: EngineConfig, d: Decision) -> Emit:
    """A person's answer, checked against the request it answers (see :func:`waiting` for what is refused).

    Raises:
        pydantic.ValidationError, InvalidArguments, ValueConversionError: edited arguments that do not fit.
    """
    c = waiting(rs, d.call_id)
    if d.decision == "approved" and c.kind == "client_result":
        raise ApprovalError(f"call {c.call_id!r} runs on the client: answer it with run.submit_result(...)")
    _check_request(c, d)
    edited = None
    if d.decision == "approved" and d.arguments is not None:
        tool = cfg.registry.get(c.name)
        assert tool is not None
        edited = tool.dump(tool.validate(d.arguments))
    if d.decision == "submitted":
        return Emit(resolution(rs, c, "submitted", by=d.by, note=d.note, content=d.content, value=d.value))
    return Emit(resolution(rs, c, d.decision, by=d.by, note=d.note, arguments=edited))


_CANCELLABLE = (S.VALIDATING, S.WAITING_APPROVAL, S.EXECUTING)
"""The states in which a turn's calls are read (classified, parsed) and not yet answered: a call may be cancelled."""


def intervention(rs: RunState, cfg: EngineConfig, r: Intervention) -> Emit:
    """A person steps into a run nobody drives (paused by an approval, a breakpoint, Pause, or between steps).

    - A message (``run.interject``): an ``Interjected`` event; the next request sends it after this turn's results.
    - A call cancelled (``run.cancel_call``): a call not answered yet gets a ``CallRejected`` (reason
      ``cancelled``, status ``skipped``) whose message the model reads: "Cancelled by ana: <reason>". A waiting
      call, a validated or approved one and a running read are answered so. A running *write* may have happened
      (a resumed run's call may have been claimed by the process that stopped), so it follows the outcome-unknown
      rule: it pauses for a person to reconcile (submit what happened, approve a retry with its key, or deny).
    - The run ended (``run.end``): a ``RunFinished`` in ``CANCELLED`` whose reason names who ended it and why.

    Raises:
        AgentnbError: blank text; a run not started, over, or headless (nobody is there); for a cancellation, a
            turn whose calls are not read yet, or a call that is not in the turn or has its result already.
    """
    what = "cancel_call" if r.call_id is not None else "end" if r.end else "interject"
    if not isinstance(r.text, str) or not r.text.strip():
        needs = "some text for the model to read" if what == "interject" else "a reason"
        raise AgentnbError(f"{what} needs {needs}")
    if rs.state is S.NEW or rs.state in TERMINAL or cfg.headless:
        state = "headless (nobody is there to speak)" if cfg.headless else rs.state.value
        raise AgentnbError(f"the run is {state}: there is no next request to tell anything" if what == "interject"
                           else f"the run is {state}: {what} is for a person, in a run that is paused or between steps")
    who = r.by or "the user"
    if r.end:
        return Emit(finished(S.CANCELLED, f"ended by {who}: {r.text}"))
    if r.call_id is None:
        return Emit(Interjected(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=rs.state, text=r.text, by=r.by))
    return Emit(_cancel_call(rs, cfg, r.call_id, f"Cancelled by {who}: {r.text}", r.by))


def _cancel_call(rs: RunState, cfg: EngineConfig, call_id: str, message: str, by: str | None) -> BaseEvent:
    c = rs.calls.get(call_id)
    open_calls = [o.call_id for o in rs.calls.values() if o.status != "done" and o.kind != "escalation"]
    if rs.state not in _CANCELLABLE:
        raise AgentnbError(f"the run is {rs.state.value}: no call of a turn waits to be cancelled"
                           + (" (step once: this turn's calls are read next)" if rs.state is S.RESPONDED else ""))
    if c is None or c.status == "done" or c.kind == "escalation":
        why = ("it has its result already" if c is not None and c.status == "done" else
               "it is a guard's escalation (approve or deny it)" if c is not None else "it is not a call of this turn")
        raise AgentnbError(f"call {call_id!r} cannot be cancelled: {why}; calls that can: "
                           f"{', '.join(open_calls) or '(none)'}")
    if c.status == "running" and writes(cfg, c):
        return outcome_unknown(rs, cfg, c, f"it had started when it was cancelled ({message}); it may have happened")
    waiting_others = any(o.status == "awaiting_approval" and o is not c for o in rs.calls.values())
    state = rs.state if rs.state is not S.WAITING_APPROVAL or waiting_others else S.EXECUTING
    if c.kind == "outcome_unknown" and c.status == "awaiting_approval":  # it started once: say so, never "not run"
        message += " (It had started before: whether it happened is unknown.)"
    return CallRejected(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=state, call_id=c.call_id, name=c.name,
                        reason="cancelled", message=message, by=by)


def _cancelled(rs: RunState, cfg: EngineConfig, r: Cancelled) -> Emit:
    return Emit(finished(S.CANCELLED, r.reason))


# -- compression -------------------------------------------------------------------------------------------


def _summary(rs: RunState, cfg: EngineConfig, r: Summary) -> Emit:
    """A tier-1 compression with the summarizer's history; when it is no shorter (or failed), tier 2 prunes."""
    kept: list[Message] | None = r.kept
    if kept is not None:
        after = guards.estimate_tokens(kept, rs.tools)
        if after < r.tokens:
            return Emit(CompressionApplied(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=rs.state, tier=1,
                                           tokens_before=r.tokens, tokens_after=after, messages=kept,
                                           removed=r.removed))
    return prune_step(rs, cfg, r.tokens)


RULES: dict[type[Any], Callable[[RunState, EngineConfig, Any], Emit | Verdict]] = {
    TextDelta: _text,
    ArgumentsDelta: _arguments,
    TurnReceived: _turn,
    ModelFailed: _failed,
    ModelLost: _lost,
    StreamEnded: _ended,
    StreamBroke: _broke,
    ModelRaised: _raised,
    NotAnItem: _not_an_item,
    Decision: _decision,
    Intervention: intervention,
    Cancelled: _cancelled,
    Summary: _summary,
    **TOOL_RULES,
}
"""Every I/O result class and its rule (``tests/test_receive.py`` proves none is missing)."""

__all__ = ["RULES", "assign_call_ids", "fresh_call_id", "intervention", "model_failed", "receive", "waiting"]
