"""What the engine makes of the driver's inputs: I/O results and the clock in, typed events (and verdicts) out.

Theory of operation. :func:`~agentnb.engine.decide` covers the steps that need no I/O. The others start
with something only the driver can get -- an item of the model's answer, a model error, a tool's outcome,
the effect ledger's answer to a claim, a person's decision -- and the rule for what that result means is
here, as plain functions of the folded state and that result:

- :func:`request_for` -- the request the model is asked (tools offered, tool choice, output settings);
- :func:`text_merged`, :func:`arguments_merged`, :func:`turn_completed` -- items of the answer as events,
  with :class:`CallIds` giving every call an id unique in the conversation;
- :func:`model_failed` -- retry or fail, from the error, the time spent and a jitter draw;
- :func:`ledger_verdict` -- what to do with a side-effecting call given the ledger's claim;
- :func:`tool_finished` -- a tool's outcome, bound to its call by hashes made from trusted state;
- :func:`summarized` -- a tier-1 compression, or the tier-2 fallback when the summary did not help.

The driver does the I/O, calls one of these, stamps the event it returns (:func:`~agentnb.engine.stamp`)
and appends it. None of them reads a clock, draws a random number or writes to the state.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from ..events import (
    ArgumentsMerged,
    CompressionApplied,
    ModelRetried,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    ToolInfo,
    TurnCompleted,
)
from ..messages import Message, ModelTurn, ToolCallPart
from ..providers.base import HistoryView, ModelRequest
from ..states import S
from . import guards
from .actions import Emit, EngineConfig, RetryPolicy
from .build import UNSTAMPED, finished
from .calls import bound_hashes, request_hash
from .decide import prune_step
from .fold import CallState, RunState

if TYPE_CHECKING:
    from ..store import Effect
    from ..tools import Outcome


def run_started(run_id: str, messages: list[Message], model: str, tools: list[ToolInfo],
                settings: dict[str, Any]) -> RunStarted:
    """A run's first event (its ``run_id`` is the one thing the state cannot stamp)."""
    return RunStarted(seq=-1, ts=UNSTAMPED, run_id=run_id, turn=0, state=S.READY, messages=messages, model=model,
                      tools=tools, settings=settings)


def request_for(rs: RunState, cfg: EngineConfig, run_id: str) -> ModelRequest:
    """The request of the current turn: the conversation, the tools offered, the settings with the tool choice.

    A finalization turn offers no tool (``tool_choice="none"``), except the output tool of a tool-mode
    ``output_type`` loop, which it forces: the last turn still owes the typed answer.
    """
    finalize = rs.finalizing
    offered: Sequence[ToolInfo] = [] if finalize else rs.tools
    settings = cfg.settings
    output = cfg.output
    if output is not None and output.native:
        settings = {**settings, "output_schema": output.settings()}
        if finalize:
            settings["tool_choice"] = "none"
        elif rs.tool_choice is not None:
            settings["tool_choice"] = rs.tool_choice
    elif finalize and output is not None:
        offered = [output.info()]
        settings = {**settings, "tool_choice": {"name": output.name}}
    elif finalize:
        settings = {**settings, "tool_choice": "none"}
    elif rs.tool_choice is not None:
        settings = {**settings, "tool_choice": rs.tool_choice}
    return ModelRequest(messages=HistoryView(rs.messages), tools=offered, settings=settings, finalize=finalize,
                        run_id=run_id, turn=rs.turn)


# -- the model's answer -----------------------------------------------------------------------------------


def text_merged(rs: RunState, fragment: str) -> TextMerged:
    """A text fragment (as shown: secrets already masked) joins the answer."""
    return TextMerged(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                      state=S.MODEL_REQUESTED, fragment=fragment, length=rs.text_length + len(fragment))


def arguments_merged(rs: RunState, index: int, fragment: str, call_id: str | None, name: str | None
                     ) -> ArgumentsMerged:
    """An argument fragment (as shown) joins call ``index``'s buffer; ``length`` counts bytes so far."""
    length = rs.argument_lengths.get(index, 0) + len(fragment.encode())
    return ArgumentsMerged(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                           state=S.MODEL_REQUESTED, index=index, call_id=call_id, name=name,
                           fragment=fragment, length=length)


def turn_completed(turn: ModelTurn, latency_s: float) -> TurnCompleted:
    """The whole answer (its calls already given ids by :class:`CallIds`)."""
    return TurnCompleted(seq=-1, ts=UNSTAMPED, run_id="", turn=0, state=S.RESPONDED, response=turn, latency_s=latency_s)


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
        >>> from agentnb.messages import Message, ModelTurn, ToolCallPart
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


class CallIds:
    """:func:`assign_call_ids` over a run's conversation, remembering the ids seen so far.

    A memo, not state: reading the ids of the whole conversation on every turn would make a long run
    quadratic, so the messages already read are counted and only new ones are read. When the conversation
    is rebuilt (a compression), it is read again from the start. The answer is the same as reading all.
    """

    __slots__ = ("_known", "_messages", "_seen")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._known = 0
        self._seen: set[str] = set()

    def assign(self, rs: RunState, turn: ModelTurn) -> ModelTurn:
        """``turn`` with ids unique in ``rs``'s conversation (see :func:`assign_call_ids`)."""
        if not turn.message.tool_calls:
            return turn
        msgs = rs.messages
        if msgs is not self._messages or self._known > len(msgs):  # compressed or rebuilt: count again
            self._messages, self._known, self._seen = msgs, 0, set()
        seen = self._seen
        seen.update(c.call_id for m in msgs[self._known:] if m.role == "assistant" for c in m.tool_calls)
        self._known = len(msgs)
        return assign_call_ids(turn, rs.run_id, rs.turn, seen)


def stream_ended() -> RunFinished:
    """The model's answer ended without a final turn."""
    return finished(S.INCOMPLETE, "the model's response ended without a final turn")


def stream_broke(error: str) -> RunFinished:
    """The answer's stream broke before its done signal: nothing in it runs."""
    return finished(S.INCOMPLETE, f"the response stream broke: {error}; nothing in it was executed")


def model_raised(where: str) -> RunFinished:
    """The model (or a script turn) raised something that is not a model error: a bug, kept as the cause."""
    return finished(S.FAILED, f"the model raised {where}")


def not_an_item(item: object) -> RunFinished:
    """The model yielded something that is neither a stream item nor a turn."""
    return finished(S.FAILED, f"the model yielded {type(item).__name__}, not a stream item or a turn")


def model_failed(
    rs: RunState, policy: RetryPolicy, error: str, *, status: int | None = None, retryable: bool = False,
    retry_after: float | None = None, spent: float = 0.0, jitter: float = 1.0,
) -> ModelRetried | RunFinished:
    """Retry or fail after a failed model request.

    A retryable error is asked again after ``base_delay * 2**(attempt-1)``, scaled by ``jitter`` (the driver
    draws it in [0.5, 1)) and capped at ``max_delay``; a longer ``retry_after`` from the provider wins. It
    fails when the retries are used up, when waiting would pass ``max_time`` (``spent`` is the seconds since
    the first attempt), or when the error is not retryable.

    Example:
        >>> from agentnb.engine import RetryPolicy, RunState
        >>> ev = model_failed(RunState(), RetryPolicy(), "rate limited", status=429, retryable=True)
        >>> type(ev).__name__, ev.attempt, ev.delay_s
        ('ModelRetried', 1, 0.5)
    """
    attempt = rs.retries + 1
    delay = min(policy.max_delay, policy.base_delay * 2 ** (attempt - 1) * jitter)
    if isinstance(retry_after, int | float) and retry_after > delay:
        delay = float(retry_after)  # the provider said when to come back
    shown = f"HTTP {status}: {error}" if status else error
    if retryable and rs.retries < policy.max_retries:
        if policy.max_time is not None and spent + delay > policy.max_time:
            return finished(S.FAILED, f"the model call failed and retrying would pass max_retry_time="
                                      f"{policy.max_time:g} s: {shown}")
        return ModelRetried(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                            state=S.MODEL_REQUESTED, attempt=attempt, status=status, error=error,
                            delay_s=round(delay, 3))
    tries = f" after {rs.retries + 1} attempts" if rs.retries else ""
    return finished(S.FAILED, f"the model call failed{tries}: {shown}")


def resumed_request(rs: RunState) -> ModelRetried:
    """A run stopped in the middle of a model call asks again (the answer, if any, was lost with the process)."""
    return ModelRetried(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                        state=S.MODEL_REQUESTED, attempt=rs.retries + 1, status=None, delay_s=0.0,
                        error="the process stopped during the model call; asking again")


# -- calls ------------------------------------------------------------------------------------------------

Verdict = Literal["run", "retry", "reuse", "duplicate", "after", "unknown"]
"""What to do with a call given the effect ledger (see :func:`ledger_verdict`)."""


def ledger_verdict(c: CallState, run_id: str, idempotent: bool, existing: Effect | None,
                   batch: Collection[str]) -> tuple[Verdict, str]:
    """What to do with a side-effecting call, given what its claim on the ledger found (``existing``).

    ``run`` (the claim is new), ``retry`` (this very call started before: re-run it with its key, because the
    tool is idempotent or a person confirmed it), ``reuse`` (this call already finished: its outcome stands),
    ``duplicate`` (another call did the effect: not again), ``after`` (another call of ``batch`` does it now)
    or ``unknown`` (this call started and never finished: a person must reconcile it). The second item says
    why, for ``unknown``.
    """
    if existing is None:
        return "run", ""
    if existing.run_id == run_id and existing.call_id == c.call_id:  # this call, again (resume or retry)
        if existing.status == "done":
            return "reuse", ""
        if idempotent or c.retry_confirmed:
            return "retry", ""
        return "unknown", "it started before and never finished (the process stopped while it ran)"
    if existing.status == "done":
        return "duplicate", ""
    if existing.run_id == run_id and existing.call_id in batch:
        return "after", ""  # the same effect runs now for another call of this batch
    return "duplicate", ""


def tool_finished(
    rs: RunState, cfg: EngineConfig, c: CallState, out: Outcome, *, reused: bool = False,
    duplicate_of: str | None = None,
) -> ToolFinished:
    """A call's outcome as an event, bound to the call.

    It carries the request hash (made when the call started), the result hash, and the binding of the two
    (see :mod:`agentnb.binding`).
    """
    call_id = c.call_id
    request = c.expected_request or request_hash(rs, cfg, c)
    result, bound = bound_hashes(call_id, out.status, out.content, request)
    return ToolFinished(
        seq=-1, ts=UNSTAMPED, run_id="", turn=0,
        state=S.EXECUTING, call_id=call_id, name=c.name, status=out.status, content=out.content,
        value=out.value, error_type=out.error_type, error_message=out.error_message,
        duration_s=round(out.duration_s, 6), idempotency_key=c.idempotency_key, reused=reused,
        duplicate_of=duplicate_of, truncated=out.truncated, request_sha256=request, result_sha256=result,
        call_binding_sha256=bound,
    )


def summarized(rs: RunState, cfg: EngineConfig, tokens: int, kept: list[Message] | None,
               removed: list[int]) -> Emit:
    """A tier-1 compression with the summarizer's history ``kept``.

    When it is no shorter (or the summarizer failed: ``kept`` is None), tier 2 prunes instead.
    """
    if kept is not None:
        after = guards.estimate_tokens(kept, rs.tools)
        if after < tokens:
            return Emit(CompressionApplied(seq=-1, ts=UNSTAMPED, run_id="", turn=0,
                                           state=rs.state, tier=1, tokens_before=tokens, tokens_after=after,
                                           messages=kept, removed=removed))
    return prune_step(rs, cfg, tokens)


__all__ = ["CallIds", "Verdict", "arguments_merged", "assign_call_ids", "fresh_call_id", "ledger_verdict",
           "model_failed", "model_raised", "not_an_item", "request_for", "resumed_request", "run_started",
           "stream_broke", "stream_ended", "summarized", "text_merged", "tool_finished", "turn_completed"]
