"""Executing a turn's calls: the effect ledger first, then this run's own bounded thread pool.

One path for step() (one call) and run() (the turn's started calls together). For each call the effect
ledger is consulted first (see agentnb.store): a side-effecting call *claims* its idempotency key -- an
insert that fails when the key exists -- so an effect runs at most once per key, whatever the number of
calls, threads or processes asking. The calls that may run go to this run's own executor (max_parallel
threads): a call's time limit (its tool's timeout, the loop's tool_timeout, what is left of the deadline)
starts when it starts running. The driver thread waits; it answers a read past its limit with `timeout`
(the thread cannot be killed; an async tool's task is cancelled), a write past its limit with an
"outcome unknown" pause (never `timeout`: it may still happen), and calls that never started when the run
must stop with `skipped`. Results are appended in the model's order.

The rules for what the ledger's answer means (run, reuse, duplicate, unknown) are the engine's
(:func:`~agentnb.engine.ledger_verdict`); the outcome becomes an event there too
(:func:`~agentnb.engine.tool_finished`, :func:`~agentnb.engine.outcome_unknown`). What is here is I/O:
claims, threads, clocks, the real secret arguments.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ..engine import CallState, ledger_verdict, outcome_unknown, tool_finished
from ..events import BaseEvent
from ..redact import redact_outcome, redact_text
from ..store import Effect, EffectDone
from ..tools import Outcome, Tool, ToolContext, describe_errors, timeout_outcome

if TYPE_CHECKING:
    from ..run import Run

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


class Executor:
    """Runs a run's started calls; one per :class:`~agentnb.Run`, created with it."""

    def __init__(self, run: Run) -> None:
        self.run: Run = weakref.proxy(run)  # the run owns this part: a strong reference back would be a cycle
        self._pool_: concurrent.futures.ThreadPoolExecutor | None = None
        self.unsaved: _Outcomes = {}
        """Outcomes of calls that ran but whose events a store fault kept from being written (written next)."""
        self.validated: dict[str, tuple[dict[str, Any] | None, BaseModel]] = {}
        """call id -> (the arguments the engine validated, the validated object): run with it, not validated again."""

    def shutdown(self) -> None:
        """Let idle threads go now, not when the run is collected."""
        if self._pool_ is not None:
            self._pool_.shutdown(wait=False)
            self._pool_ = None

    def cancel_running(self, reason: str) -> None:
        """The run is cancelled: calls started but never executed get ``skipped`` (those that ran, their outcome)."""
        for c in [c for c in self.run._rs.calls.values() if c.status == "running"]:
            if c.call_id in self.unsaved:  # it did run: record what happened, never "skipped"
                out, extra, effect = self.unsaved.pop(c.call_id)
                self.finished(c, out, effect=effect, **extra)
            else:
                self.finished(c, _skipped(f"the run was cancelled ({reason}) before this call ran"))

    def _plan(self, call: CallState, batch: dict[str, CallState]) -> tuple[str, Any]:
        """Claim a side-effecting call's key and ask the engine what the ledger's answer means.

        ``run`` (detail: whether it holds a ledger claim), ``reuse``, ``duplicate``, ``after`` (the same effect
        runs now for another call of the batch) or ``unknown`` (see :func:`~agentnb.engine.ledger_verdict`).
        """
        run = self.run
        tool = run.loop.registry.get(call.name)
        key = call.idempotency_key
        if key is None or tool is None or not tool.side_effects:
            return "run", False
        existing = run.store.claim_effect(key, run.run_id, call.call_id, call.name)
        verdict, why = ledger_verdict(call, run.run_id, tool.idempotent, existing, batch)
        if verdict == "run":
            return "run", True
        if verdict == "retry":
            run.store.retry_effect(key, run.run_id, call.call_id)
            return "run", True
        if verdict == "unknown":
            return "unknown", why
        assert existing is not None
        return verdict, existing.call_id if verdict == "after" else existing

    def _sort(self, calls: list[CallState], batch: dict[str, CallState]
              ) -> tuple[_Outcomes, dict[str, str], dict[str, str], list[_Runnable]]:
        """Plan every call of a batch: outcomes known now, unknowns, duplicates of a running call, calls to run."""
        outcomes: _Outcomes = {}
        unknown: dict[str, str] = {}
        later: dict[str, str] = {}
        runnable: list[_Runnable] = []
        for c in calls:
            if c.call_id in self.unsaved:  # it ran; a store fault kept its event out: write it now, never re-run
                outcomes[c.call_id] = self.unsaved[c.call_id]
                continue
            verdict, detail = self._plan(c, batch)
            if verdict == "run":
                tool = self.run.loop.registry.get(c.name)
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

    def execute(self, calls: list[CallState]) -> BaseEvent:
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
        self.unsaved.update(outcomes)
        last: BaseEvent | None = None
        for c in calls:  # the model's order
            if c.call_id in outcomes:
                out, extra, effect = outcomes[c.call_id]
                last = self.finished(c, out, effect=effect, **extra)
                self.unsaved.pop(c.call_id, None)
        for c in calls:
            if c.call_id in unknown:
                last = self._unknown(c, unknown[c.call_id])
        if interrupted is not None:
            raise interrupted
        assert last is not None
        return last

    def _limit(self, tool: Tool) -> tuple[float | None, bool]:
        """Seconds a call of ``tool`` may run from now, and whether the deadline (not a timeout) sets it."""
        budget = self.run.loop.config.budget
        limit = tool.timeout if tool.timeout is not None else budget.tool_timeout
        if budget.deadline_s is not None and self.run._rs.started_at is not None:
            left = max(0.0, self.run._rs.started_at + budget.deadline_s - time.time())
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
        if self._pool_ is None:
            workers = max(1, self.run.loop.config.budget.max_parallel)
            self._pool_ = concurrent.futures.ThreadPoolExecutor(workers,
                                                                thread_name_prefix=f"agentnb-{self.run.run_id}")
        return self._pool_

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
                stop = self.run._cancel_reason
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
        self._pool_ = None  # its thread is still busy: later calls get a fresh pool, so nothing queues behind it
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
                    self.run.store.finish_effect(key, self.run.run_id, slot.call.call_id, out.content, out.value,
                                                 out.status)
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
            ctx = ToolContext(run_id=self.run.run_id, call_id=call.call_id, tool_name=tool.name, turn=self.run._rs.turn,
                              idempotency_key=call.idempotency_key)
        out = self.run.loop.registry.run(tool, validated, ctx, on_loop)
        # results and errors alike, before they are cut (a cut can halve a key), hashed, stored or shown
        return _cap(redact_outcome(out), self.run.loop.config.budget.max_result_chars)

    @staticmethod
    def _done(call: CallState, out: Outcome) -> EffectDone:
        assert call.idempotency_key is not None
        return EffectDone(call.idempotency_key, out.content, out.value, out.status)

    def _unmasked(self, call: CallState, tool: Tool) -> BaseModel | Outcome:
        """The call's validated arguments with its real secrets, or the error result when they cannot be had.

        Validation before this point saw the masked values; the real ones meet the schema here for the first time.
        """
        real = self.run._secrets.unmask(call.call_id, call.name, call.arguments or {})
        if isinstance(real, str):
            return Outcome(status="error", content=real, error_type="SecretUnavailable", error_message=real)
        cached = self.validated.pop(call.call_id, None)
        if cached is not None and real is call.arguments and cached[0] is call.arguments:
            return cached[1]  # validated by the engine, and nothing was put back or edited since
        try:
            return tool.validate(real)
        except ValidationError as exc:
            message, _ = describe_errors(call.name, exc)
            return Outcome(status="error", content=message, error_type="ValidationError", error_message=message)
        except Exception as exc:  # the value boundary, or a validator raising something else: an error result
            message = redact_text(f"Invalid arguments for tool '{call.name}': {type(exc).__name__}: {exc}")
            return Outcome(status="error", content=message, error_type=type(exc).__name__, error_message=message)

    def _unknown(self, call: CallState, why: str) -> BaseEvent:
        return self.run._append(outcome_unknown(self.run._rs, self.run.loop.config, call, why))

    def finished(self, call: CallState, out: Outcome, *, reused: bool = False, duplicate_of: str | None = None,
                 effect: EffectDone | None = None) -> BaseEvent:
        """Append a call's outcome (its ledger outcome, when it has one, in the same write)."""
        run = self.run
        return run._append(tool_finished(run._rs, run.loop.config, call, out, reused=reused,
                                         duplicate_of=duplicate_of), effect=effect)
