"""The next step of a run: given a folded :class:`RunState`, what comes next (see :mod:`agentnb._engine`).

:func:`decide` dispatches on the loop state: before a request (guards in force, new trips, compression, the
request itself), after a response (the finish-reason rules, typed output, paused turns), and while a
turn's calls move on (parse, validate, start, run, ask; their rules are in :mod:`.calls`). It is pure: it
reads the state, the configuration and ``now``, builds the event it decides on, and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .._messages import Message, ModelTurn
from .._states import TERMINAL, LoopState, S
from ..events import (
    ApprovalRequested,
    CallRejected,
    CompressionApplied,
    GuardTripped,
    ModelRequested,
    OutputValidated,
    ResultsBound,
)
from . import guards
from .actions import DONE, PULL, WAIT, Action, Compress, Emit, EngineConfig, RunTool
from .build import UNSTAMPED, finished
from .calls import arguments_digest, ask, parse, resolve_headless, start, validate, verify_bindings
from .calls import output_failed as _output_failed
from .fold import CallState, RunState
from .guards import Budget
from .view import StateView


def _finish(state: LoopState, reason: str, output: str | None = None) -> Emit:
    return Emit(finished(state, reason, output))


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


def decide(rs: RunState, cfg: EngineConfig, now: float | None = None) -> Action:
    """What happens next in a run in state ``rs``. Pure: reads ``rs``, ``cfg`` and ``now`` only, writes nothing.

    ``now`` is the clock reading (epoch seconds) the deadline is checked against; the driver passes it when
    the budget has a deadline (None: ``rs.now``, or no deadline check).

    Example:
        >>> import agentnb as anb
        >>> from agentnb._engine import Emit, RunState, decide
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> run = loop.start("What's the weather in Paris?")
        >>> _ = run.step()  # RunStarted
        >>> action = decide(run.view, loop.config)
        >>> type(action.event).__name__ if isinstance(action, Emit) else action
        'ModelRequested'
    """
    if rs.output_failure is not None and rs.state not in TERMINAL:  # a final output check failed
        # after a finalization, the budget that asked for it is why the run ends, and the reason names it
        return _output_failed(rs.output_attempts, rs.output_failure,
                              _finalizing_guard(rs) if rs.finalizing else None)
    if now is not None and rs.state in _REQUESTING:
        return _at_results_ready(rs, cfg, now)
    return _DECIDE[rs.state](rs, cfg)


def _at_results_ready(rs: RunState, cfg: EngineConfig, now: float | None = None) -> Action:
    """Before each model request (READY or RESULTS_READY): guards in force, new trips, compression, request.

    Every request of a run is decided here, whatever asked for it -- the turn after a turn's results, a paused
    turn sent back (``_paused``), a correction owed for an answer that did not fit the output type
    (``rs.output_note``), a guard's note -- so each one is checked against every budget first, and a budget
    that ran out applies its ``on_exhausted`` policy: ``finalize`` (the correction owed goes with the
    finalization request: the last turn still owes the typed answer), ``stop`` or ``escalate`` (the correction
    waits for the person's answer). Only the finalization request itself comes on top of the limits.
    """
    b = cfg.budget
    noted = None
    for guard, action in rs.tripped.items():
        if action == "finalize":
            return _finalize_request(rs, cfg)
        if action == "stop":
            final = S.NO_PROGRESS if guard in ("repetition", "no_progress") else S.BUDGET_EXHAUSTED
            return _finish(final, f"{_last_trip(rs, guard).message}; policy 'stop'")
        if action == "escalate":
            return _escalation(rs, guard)
        if action == "note":
            noted = (f"Note from the loop: {_last_trip(rs, guard).message}. Do not repeat it: try something "
                     "different, or answer with what you have.")
    trip = guards.exhausted(rs, b, rs.now if now is None else now)
    if trip is not None:
        return _trip(trip, b.on_exhausted, rs.state)
    if noted is None:  # a note on its way answers the pattern it found: it is not looked for again first
        found = guards.repetition(rs.history, b.max_repeats, rs.repeat_mark) if len(rs.history) >= 2 else None
        if found is not None:
            period, sigs = found
            calls = " then ".join(sig.split(":", 1)[0] + sig.split(":", 1)[1][:80] for sig in sigs)
            what = "the same call" if period == 1 else "the same two calls in turn"
            message = f"{what} ({calls}) came back {b.max_repeats} times with the same result"
            return _trip(guards.Trip("repetition", b.max_repeats, b.max_repeats, message), _repeat_policy(rs, b))
        if b.max_no_progress is not None and rs.no_progress >= b.max_no_progress:
            message = f"{rs.no_progress} turns in a row brought no new result and no new text"
            return _trip(guards.Trip("no_progress", b.max_no_progress, rs.no_progress, message),
                         _repeat_policy(rs, b))
    if b.context_window is not None:
        compress = _compression(rs, cfg)
        if compress is not None:
            return compress
    if rs.output_note is not None:
        noted = rs.output_note if noted is None else f"{rs.output_note}\n\n{noted}"
    return _request(rs, cfg, note=noted)


def _last_trip(rs: RunState, guard: str) -> GuardTripped:
    """The latest ``GuardTripped`` of ``guard`` (the one whose policy is in force)."""
    return next(g for g in reversed(rs.guards) if g.guard == guard)


def _finalizing_guard(rs: RunState) -> str:
    """Why the run is finalizing, in words: the message of the guard whose policy is ``finalize``."""
    guard = next((g for g, action in rs.tripped.items() if action == "finalize"), None)
    last = next((g for g in reversed(rs.guards) if g.guard == guard), None) if guard is not None else None
    return last.message if last is not None else "a guard asked for the finalization"


def _repeat_policy(rs: RunState, b: Budget) -> str:
    noted = any(g.action == "note" and g.guard in ("repetition", "no_progress") for g in rs.guards)
    return "stop" if b.on_repeat == "note" and noted else b.on_repeat  # a note is given once


def _trip(trip: guards.Trip, action: Any, state: LoopState = S.RESULTS_READY) -> Emit:
    return Emit(GuardTripped(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                             state=state, guard=trip.guard, limit=trip.limit, value=trip.value,
                             action=action, message=trip.message))


def _finalize_request(rs: RunState, cfg: EngineConfig) -> Emit:
    # A correction still owed goes with the instruction, in one user turn: the finalization is the last
    # chance of an answer that fits the output type, and the model must know what was wrong with the last one.
    prompt = cfg.finalize_prompt if rs.output_note is None else f"{rs.output_note}\n\n{cfg.finalize_prompt}"
    new = [*rs.interjections, Message.user(prompt)]
    return Emit(ModelRequested(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                               state=S.MODEL_REQUESTED, message_count=len(rs.messages) + len(new),
                               new_messages=new, tools=[],
                               settings={**cfg.settings, "tool_choice": "none"}, finalize=True))


def _escalation(rs: RunState, guard: str) -> Emit:
    last = _last_trip(rs, guard)
    arguments = {"guard": guard, "limit": last.limit, "value": last.value, "message": last.message}
    return Emit(ApprovalRequested(
        seq=-1, ts=UNSTAMPED, run_id="", turn=0,
        state=S.WAITING_APPROVAL, approval_id=f"esc_{rs.run_id}_{guard}_{len(rs.guards)}",
        call_id=f"guard:{guard}", name=guard, arguments=arguments, arguments_digest=arguments_digest(guard, arguments),
        risk="budget", kind="escalation",
    ))


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
    return Emit(CompressionApplied(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                   state=rs.state, tier=2, tokens_before=tokens,
                                   tokens_after=guards.estimate_tokens(kept, rs.tools), messages=kept,
                                   removed=removed))


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
        return Emit(OutputValidated(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                    state=S.RESPONDED, ok=True, output=value, attempt=attempt))
    if attempt > spec.retries:  # recorded like every check; the run fails on the next decision
        return Emit(OutputValidated(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                    state=S.RESPONDED, ok=False, errors=errors, attempt=attempt, final=True))
    return Emit(OutputValidated(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                state=S.RESULTS_READY, ok=False, errors=errors, attempt=attempt))


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
    return Emit(ResultsBound(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.RESULTS_READY, call_ids=[]))


def _never(rs: RunState, cfg: EngineConfig) -> Action:
    raise AssertionError("a NEW run starts with RunStarted, which the driver appends")




def _request(rs: RunState, cfg: EngineConfig, note: str | None = None) -> Emit:
    settings = cfg.settings
    choice = None
    if cfg.tool_choice is not None:
        try:
            choice = check_tool_choice(cfg.tool_choice(StateView(rs)), rs.tool_names)  # a policy reads, never writes
        except Exception as exc:  # a bug in the policy: stop plainly rather than guess a choice
            return _finish(S.FAILED, f"the tool_choice policy failed: {type(exc).__name__}: {exc}")
        settings = {**settings, "tool_choice": choice}
    new = [*rs.interjections, *([Message.user(note)] if note is not None else [])]  # a person's words first
    return Emit(ModelRequested(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                               state=S.MODEL_REQUESTED, message_count=len(rs.messages) + len(new),
                               new_messages=new, tools=rs.tool_names, settings=settings, tool_choice=choice))


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


def _finalized(resp: ModelTurn, rs: RunState, cfg: EngineConfig) -> Emit:
    verdict = classify(resp)
    if cfg.output is not None and (verdict is None or verdict.state is S.COMPLETED):
        forced = [c for c in resp.message.tool_calls if c.name == cfg.output.name]
        ok, value, errors = (cfg.output.check(forced[0].arguments) if forced else
                             cfg.output.check_text(resp.message.text))
        if ok and not rs.output_ok:
            return Emit(OutputValidated(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                        state=S.RESPONDED, ok=True, output=value,
                                        attempt=rs.output_attempts + 1))
        if rs.output_ok:
            return _finish(S.COMPLETED, "the model answered in the tools-free finalization turn",
                           json.dumps(rs.final_output, ensure_ascii=False))
        return Emit(OutputValidated(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.RESPONDED, ok=False,
                                    errors=errors, attempt=rs.output_attempts + 1, final=True))
    if verdict is not None and verdict.state is not S.COMPLETED:
        return verdict
    text = resp.message.text
    if text:
        note = " (its tool calls were ignored)" if resp.message.tool_calls else ""
        return _finish(S.COMPLETED, f"the model answered in the tools-free finalization turn{note}", text)
    return _finish(S.BUDGET_EXHAUSTED, f"{_finalizing_guard(rs)}; the finalization turn held no answer")


# The order in which a turn's calls move on: all are parsed, then all validated; all that need no approval
# start, then run (together, under Run.run(); one per step under Run.step()); approvals are asked for after
# that, so a pause never holds the other calls back; approved calls run once every waiting call of the turn
# is answered. One pass finds the first call of each kind.
_PRIORITY: dict[str, int] = {"unparsed": 0, "parsed": 1, "valid": 2, "running": 3, "valid+approval": 4, "approved": 5}
_ASK = _PRIORITY["valid+approval"]


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
                return resolve_headless(rs, c)
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
        return Emit(ResultsBound(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                 state=S.RESULTS_READY, call_ids=list(rs.calls)))
    if waiting and best_rank != _ASK and rs.state is S.WAITING_APPROVAL:
        # While a person is asked, the only step is asking about the next call (the state machine has no
        # ToolStarted in WAITING_APPROVAL): what was approved so far runs once every waiting call is answered.
        return WAIT
    return _move_on(rs, cfg, best, best_rank)


def _move_on(rs: RunState, cfg: EngineConfig, best: CallState, best_rank: int) -> Action:
    """The next step of the call that comes first (see ``_PRIORITY``)."""
    if best_rank == 0:
        return parse(best, list(rs.calls).index(best.call_id))
    if best_rank == 1:
        return validate(rs, best, cfg)
    if best_rank == 3:
        return RunTool(best.call_id)
    if best_rank == 4:
        return ask(rs, cfg, best)
    if cfg.budget.context_window is not None:
        squeeze = _before_tool(rs, cfg, best)
        if squeeze is not None:
            return squeeze
    return start(rs, cfg, best)


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
            return Emit(CompressionApplied(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                           state=rs.state, tier=2, tokens_before=tokens, tokens_after=after,
                                           messages=history, removed=removed))
    return Emit(CallRejected(
        seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=rs.state, call_id=c.call_id, name=c.name, reason="skipped",
        message=(f"Skipped: the conversation ({tokens} tokens) is over {b.compress_at:.0%} of the model's "
                 f"window, so the remaining calls of this turn were not run."),
    ))


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

_REQUESTING = frozenset({S.READY, S.RESULTS_READY})
"""The states where the next request is decided, and the deadline checked."""


__all__ = ["PAUSE_LIMIT", "TOOL_CHOICES", "check_tool_choice", "classify", "decide", "prune_step"]
