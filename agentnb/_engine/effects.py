"""What a call's I/O means: the ledger's answer, a tool's outcome, a stopped call -- and every text the model reads.

Theory of operation. A side-effecting call first claims its idempotency key on the effect ledger; what the
claim found (:class:`~agentnb._engine.results.LedgerAnswered`) is judged here (:func:`judge`): run it, run it
again with its key, reuse this call's own recorded outcome, answer it as a duplicate of the call that did the
effect, wait for the batch's call that does it now, or ask a person because its outcome is unknown. What the
tool port brings back -- an outcome (:class:`~agentnb._engine.results.ToolReturned`) or the fact that it was
stopped (:class:`~agentnb._engine.results.ToolStopped`) -- becomes a ``ToolFinished`` or an *outcome unknown*
``ApprovalRequested`` by **one** write-vs-read rule (:func:`stopped`): a read that did not return is answered
(``timeout``, an error, ``skipped``); a write that may have happened -- past its limit, interrupted, or let go
of in flight by a cancelled run -- is never answered as if it had not.

**Forks** (a run started by ``Run.fork``; its lineage is in ``RunStarted.settings["fork"]``) belong to their
parent's operation, so their intent keys are the parent's: a write the parent (or any run of the operation)
made is answered from the ledger -- marked ``inherited``, never run again. A write nobody made yet follows the
fork's effect policy, decided *before* anything is claimed (:func:`peeked`): ``ask`` pauses it for a person
(``ApprovalRequested`` of kind ``fork_effect``), ``simulate`` runs the tool's simulator (or answers with an
error saying there is none), ``run`` claims and runs it; tools the fork names in ``rerun`` get keys of the
fork's own, so their effects run again, marked ``rerun``. A fork with ``reads="reuse"`` answers a read from
its parent's result of the same read (:func:`parent_read`), marked ``reused``.

Every text a model reads about a call's execution is written here once: duplicates, inherited effects,
simulations, skips, interrupts, timeouts, the cut of a long result. Nothing here performs I/O, reads a clock or
touches a store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .._outcomes import Effect, Outcome
from .._states import S
from ..events import ApprovalRequested, EffectMark, ToolFinished
from .actions import Emit, EngineConfig
from .build import UNSTAMPED
from .calls import arguments_digest, bound_hashes, fork_of, request_hash, reruns
from .fold import CallState, RunState
from .results import (
    AwaitFirst,
    DuplicateDone,
    LedgerAnswered,
    LedgerPeeked,
    ParentRead,
    Proceed,
    ToolReturned,
    ToolStopped,
    Verdict,
)

# -- texts the model reads ---------------------------------------------------------------------------------


def skipped(why: str) -> Outcome:
    """A call that never ran."""
    return Outcome(status="skipped", content=f"Skipped: {why}.")


def interrupted(name: str) -> Outcome:
    """A read interrupted while it ran: an error it may retry."""
    return Outcome(status="error", content=f"Tool '{name}' was interrupted (KeyboardInterrupt) while it ran.",
                   error_type="KeyboardInterrupt", error_message="interrupted")


def cancelled_while_running(name: str, reason: str, duration_s: float) -> Outcome:
    """A read the run let go of while it ran, because the run was cancelled: an error it may retry."""
    return Outcome(status="error", content=f"Tool '{name}' was stopped while it ran: the run was cancelled ({reason}).",
                   error_type="Cancelled", error_message=f"cancelled while it ran: {reason}", duration_s=duration_s)


def timed_out(name: str, limit: float, duration_s: float, *, deadline: bool = False) -> Outcome:
    """A read that ran past its time limit (the tool's timeout or what was left of the deadline)."""
    why = "the run's deadline" if deadline else "its timeout"
    return Outcome(status="timeout", content=f"Tool '{name}' did not finish within {limit:g} s ({why}).",
                   error_type="TimeoutError", error_message=f"timed out after {limit:g} s ({why})",
                   duration_s=duration_s)


def duplicate(c: CallState, first_call: str, content: str | None) -> Outcome:
    """A call whose effect another call did (or is doing): said plainly, never a fake "done now"."""
    if content is None:
        text = (f"Duplicate: this {c.name} was not run. The same effect (idempotency key {c.idempotency_key}) was "
                f"started by call {first_call}, and its outcome is not known yet; it was not repeated.")
    else:
        text = (f"Duplicate: this {c.name} was not run again. The same effect (idempotency key "
                f"{c.idempotency_key}) was already done by call {first_call}, with the result: {content}")
    return Outcome(status="duplicate", content=text, value={"duplicate_of": first_call, "result": content})


def inherited(c: CallState, effect: Effect) -> Outcome:
    """A call whose effect an earlier run of the operation did: answered from the ledger, not run again."""
    text = (f"Already done in run {effect.run_id} by call {effect.call_id}, so it was not run again here (the same "
            f"effect: idempotency key {c.idempotency_key}). Its result: {effect.content or ''}")
    return Outcome(status="duplicate", content=text, value={"inherited_from": {"run": effect.run_id,
                                                                                "call": effect.call_id},
                                                             "result": effect.content})


def no_simulator(name: str, parent: str) -> Outcome:
    """A fork that simulates writes met a tool without a simulator: the write is refused, not run."""
    text = (f"Not run: this run is a fork of {parent} that simulates new effects (effects='simulate'), and tool "
            f"'{name}' has no simulator, so this write was refused. Nothing happened.")
    return Outcome(status="error", content=text, error_type="NotSimulated", error_message=text)


def cap(out: Outcome, limit: int) -> Outcome:
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


def from_effect(effect: Effect) -> Outcome:
    """The outcome the ledger recorded for an effect."""
    status = effect.result_status if effect.result_status in ("ok", "error", "timeout") else "ok"
    return Outcome(status=status, content=effect.content or "", value=effect.value)  # type: ignore[arg-type]


# -- rules -------------------------------------------------------------------------------------------------


def looks_first(rs: RunState, cfg: EngineConfig, c: CallState) -> bool:
    """Whether a call is looked up before it may run: a fork's write (the ledger) or reused read (its parent)."""
    fork = fork_of(rs)
    if fork is None:
        return False
    tool = cfg.registry.get(c.name)
    if tool is None:
        return False
    return tool.side_effects or fork.get("reads") == "reuse"


def ledger_key(rs: RunState, cfg: EngineConfig, c: CallState) -> str | None:
    """The key a call claims on the effect ledger before it runs (None: it needs no claim)."""
    tool = cfg.registry.get(c.name)
    if tool is None or not tool.side_effects:
        return None
    return c.idempotency_key


def call_limit(rs: RunState, cfg: EngineConfig, c: CallState) -> tuple[float | None, float | None]:
    """A call's time limits: its timeout and the run's deadline (epoch seconds).

    The timeout is the tool's, else the loop's ``tool_timeout``, and never more than the tool's ceiling
    (``max_timeout``, an MCP server's ``call_timeout``): the smaller wins. The limit in force is the smaller of
    the timeout and what is left of the deadline *when the call starts running* (the port reads that clock).
    """
    tool = cfg.registry.get(c.name)
    budget = cfg.budget
    timeout = tool.timeout if tool is not None and tool.timeout is not None else budget.tool_timeout
    ceiling = tool.max_timeout if tool is not None else None
    if ceiling is not None and (timeout is None or ceiling < timeout):
        timeout = ceiling
    deadline = None
    if budget.deadline_s is not None and rs.started_at is not None:
        deadline = rs.started_at + budget.deadline_s
    return timeout, deadline


def tool_finished(rs: RunState, cfg: EngineConfig, c: CallState, out: Outcome, *, reused: bool = False,
                  duplicate_of: str | None = None, effect: EffectMark | None = None,
                  origin: tuple[str, str] | None = None) -> ToolFinished:
    """A call's outcome as an event, bound to the call.

    It carries the request hash (made when the call started), the result hash, and the binding of the two
    (see :mod:`agentnb._binding`).
    """
    call_id = c.call_id
    request = c.expected_request or request_hash(rs, cfg, c)
    result, bound = bound_hashes(call_id, out.status, out.content, request)
    return ToolFinished(
        seq=-1, ts=UNSTAMPED, run_id="", turn=0,
        state=S.EXECUTING, call_id=call_id, name=c.name, status=out.status, content=out.content,
        value=out.value, error_type=out.error_type, error_message=out.error_message,
        duration_s=round(out.duration_s, 6), idempotency_key=c.idempotency_key, reused=reused,
        duplicate_of=duplicate_of, truncated=out.truncated, effect=effect,
        effect_run=origin[0] if origin else None, effect_call=origin[1] if origin else None,
        request_sha256=request, result_sha256=result, call_binding_sha256=bound,
    )


def outcome_unknown(rs: RunState, cfg: EngineConfig, c: CallState, why: str) -> ApprovalRequested:
    """A side-effecting call may or may not have happened: a person reconciles it.

    Approving runs it again with the same key; ``submit_result`` says what happened; denying answers it.
    """
    tool = cfg.registry.get(c.name)
    return ApprovalRequested(
        seq=-1, ts=UNSTAMPED, run_id="", turn=0,
        state=S.WAITING_APPROVAL, approval_id=f"unk_{rs.run_id}_{c.call_id}", call_id=c.call_id,
        name=c.name, arguments=c.arguments or {}, arguments_digest=arguments_digest(c.name, c.arguments),
        risk=tool.risk if tool else "write", kind="outcome_unknown", idempotency_key=c.idempotency_key,
        note=f"outcome unknown: {why}",
    )


def writes(cfg: EngineConfig, c: CallState) -> bool:
    """The one write-vs-read rule: a call of a side-effecting tool may have changed something when stopped."""
    tool = cfg.registry.get(c.name)
    return tool is not None and tool.side_effects


def judge(rs: RunState, cfg: EngineConfig, r: LedgerAnswered) -> Emit | Verdict:
    """What a side-effecting call's claim means: a :data:`Verdict` to run it, or the event that answers it.

    ``Proceed()`` (the claim is new), ``Proceed(retry=True)`` (this very call started before: re-run it with
    its key, because the tool is idempotent or a person confirmed it), a reused ``ToolFinished`` (this call
    already finished: its outcome stands), a duplicate ``ToolFinished`` (another call did the effect: not
    again), ``AwaitFirst`` (another call of the batch does it now) or an *outcome unknown* request (this call
    started and never finished: a person must reconcile it).
    """
    c = rs.calls[r.call_id]
    existing = r.existing
    if existing is None:
        return Proceed()
    if existing.run_id == rs.run_id and existing.call_id == c.call_id:  # this call, again (resume or retry)
        if existing.status == "done":
            return Emit(tool_finished(rs, cfg, c, from_effect(existing), reused=True, effect="happened"))
        if r.unrun:
            return Proceed()  # claimed here, its reply lost before the tool started: it never ran
        if r.idempotent or c.retry_confirmed:
            return Proceed(retry=True)
        return Emit(outcome_unknown(rs, cfg, c, "its effect was claimed before and no outcome was recorded: it may "
                                                "have run (the process stopped, or lost the store's reply, before "
                                                "its outcome was written)"))
    if existing.status != "done" and existing.run_id == rs.run_id and existing.call_id in r.batch:
        return AwaitFirst(existing.call_id)  # the same effect runs now for another call of this batch
    if existing.status == "done" and existing.run_id != rs.run_id:  # an earlier run of the operation did it
        return Emit(tool_finished(rs, cfg, c, inherited(c, existing), duplicate_of=existing.call_id,
                                  effect="inherited", origin=(existing.run_id, existing.call_id)))
    content = existing.content or "" if existing.status == "done" else None
    return Emit(tool_finished(rs, cfg, c, duplicate(c, existing.call_id, content), duplicate_of=existing.call_id))


def peeked(rs: RunState, cfg: EngineConfig, r: LedgerPeeked) -> Emit | Verdict:
    """A fork's write, by its effect policy (see the module docstring): claim it, simulate it, or ask a person."""
    c = rs.calls[r.call_id]
    fork = fork_of(rs) or {}
    if r.existing is not None or c.fork_confirmed or fork.get("effects") == "run" or reruns(rs, c.name):
        return Proceed(claim=True)  # an effect found is judged by its claim (inherited, duplicate, this call's own)
    parent = str(fork.get("parent", "?"))
    if fork.get("effects") == "simulate":
        tool = cfg.registry.get(c.name)
        if tool is not None and tool.simulate is not None:
            return Proceed(simulate=True)
        return Emit(tool_finished(rs, cfg, c, no_simulator(c.name, parent), effect="simulated"))
    return Emit(fork_request(rs, cfg, c, parent))


def fork_request(rs: RunState, cfg: EngineConfig, c: CallState, parent: str) -> ApprovalRequested:
    """A fork (``effects="ask"``) asks a person before a write its parent never made."""
    tool = cfg.registry.get(c.name)
    return ApprovalRequested(
        seq=-1, ts=UNSTAMPED, run_id="", turn=0,
        state=S.WAITING_APPROVAL, approval_id=f"frk_{rs.run_id}_{c.call_id}", call_id=c.call_id,
        name=c.name, arguments=c.arguments or {}, arguments_digest=arguments_digest(c.name, c.arguments),
        risk=tool.risk if tool else "write", kind="fork_effect", ttl_s=cfg.approval_ttl,
        idempotency_key=c.idempotency_key,
        note=(f"this run is a fork of {parent} (effects='ask'), and its parent never made this {c.name}: it would "
              "be a new effect. Approve to run it in this fork; deny to answer it as not run."),
    )


def parent_read(rs: RunState, cfg: EngineConfig, r: ParentRead) -> Emit | Verdict:
    """A fork's read answered from its parent's result of the same read (``reads="reuse"``), else run."""
    found = r.found
    if found is None:
        return Proceed()
    c = rs.calls[r.call_id]
    out = Outcome(status=found.status, content=found.content, value=found.value, error_type=found.error_type,
                  error_message=found.error_message)
    return Emit(tool_finished(rs, cfg, c, out, effect="reused", origin=(found.run_id, found.call_id)))


def returned(rs: RunState, cfg: EngineConfig, r: ToolReturned) -> Emit:
    """A call's outcome (cut to the loop's result size, with its ledger outcome when it holds a claim)."""
    c = rs.calls[r.call_id]
    out = cap(r.outcome, cfg.budget.max_result_chars)
    mark: EffectMark | None = None
    if r.simulated:
        mark = "simulated"
    elif r.effect is not None:
        mark = "rerun" if reruns(rs, c.name) else "happened"
    return Emit(tool_finished(rs, cfg, c, out, reused=r.reused, effect=mark), r.effect)


def stopped(rs: RunState, cfg: EngineConfig, r: ToolStopped) -> Emit:
    """A call that did not return, by the write-vs-read rule (see the module docstring)."""
    c = rs.calls[r.call_id]
    if not r.started:
        if r.why == "interrupted":
            why = "the run was interrupted before this call started"
        else:
            when = "started" if r.queued else "ran"
            why = f"the run was cancelled ({r.reason}) before this call {when}"
        return Emit(tool_finished(rs, cfg, c, skipped(why)))
    if r.why == "cancelled":  # the run let go of a call in flight (a tool that can be let go: Tool.cancellable)
        if writes(cfg, c):
            return Emit(outcome_unknown(rs, cfg, c, f"it was still running when the run was cancelled ({r.reason}); "
                                                    "it may still complete (its outcome is recorded in the ledger "
                                                    "if it does)"))
        return Emit(tool_finished(rs, cfg, c, cancelled_while_running(c.name, r.reason, r.elapsed_s)))
    if r.why == "limit":
        assert r.limit_s is not None
        what = "the run's deadline" if r.by_deadline else "its timeout"
        if writes(cfg, c):
            return Emit(outcome_unknown(rs, cfg, c, f"it was still running when {what} ({r.limit_s:g} s) passed; it "
                                                    "may still complete (its outcome is recorded in the ledger if "
                                                    "it does)"))
        return Emit(tool_finished(rs, cfg, c, timed_out(c.name, r.limit_s, r.elapsed_s, deadline=r.by_deadline)))
    if writes(cfg, c):  # interrupted while it ran
        why = ("it was interrupted (KeyboardInterrupt) while it ran" if r.raised else
               "it was still running when the run was interrupted (KeyboardInterrupt)")
        return Emit(outcome_unknown(rs, cfg, c, why))
    return Emit(tool_finished(rs, cfg, c, interrupted(c.name)))


def duplicate_done(rs: RunState, cfg: EngineConfig, r: DuplicateDone) -> Emit:
    """A call whose effect another call of its batch did."""
    c = rs.calls[r.call_id]
    return Emit(tool_finished(rs, cfg, c, duplicate(c, r.first, r.content), duplicate_of=r.first))


TOOL_RULES: dict[type[Any], Callable[[RunState, EngineConfig, Any], Emit | Verdict]] = {
    LedgerAnswered: judge,
    LedgerPeeked: peeked,
    ParentRead: parent_read,
    ToolReturned: returned,
    ToolStopped: stopped,
    DuplicateDone: duplicate_done,
}
"""The rules of the tool port's results, by class (part of :data:`~agentnb._engine.receive.RULES`)."""

__all__ = ["TOOL_RULES", "call_limit", "cancelled_while_running", "cap", "duplicate", "fork_request",
           "from_effect", "inherited", "interrupted", "judge", "ledger_key", "looks_first", "no_simulator",
           "outcome_unknown", "parent_read", "peeked", "returned", "skipped", "stopped", "timed_out", "tool_finished",
           "writes"]
