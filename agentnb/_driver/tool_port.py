"""The tool port: claims on the effect ledger, this run's bounded thread pool, the clocks, cancellation.

It performs one kind of I/O -- running a turn's calls -- and returns what happened to each as a record of
:mod:`agentnb._engine.results` (:class:`~agentnb._engine.results.ToolReturned`, or
:class:`~agentnb._engine.results.ToolStopped` when a limit, an interrupt or a cancellation stopped it), never an
event: the rules for what those mean (a read past its limit is ``timeout``, a write is *outcome unknown*; the
texts the model reads) are the engine's (:mod:`agentnb._engine.effects`). It holds no run.

A side-effecting call *claims* its idempotency key first (:meth:`ToolPort.claim`: an insert that fails when
the key exists), so an effect runs at most once per key, whatever the number of calls, threads or processes
asking. The calls that may run go to the run's own executor (``max_parallel`` threads): a call's time limit
starts when it starts running, as the smaller of its timeout and what is left of the run's deadline. The
driver thread waits; a call past its limit is abandoned (the thread cannot be killed; an async tool's task is
cancelled), and if it was a write that later completes, its late outcome is recorded in the ledger for the
person who reconciles it. A cancelled run (``run.cancel()`` from another thread) lets go of the running calls of
a tool that says it can be let go (``Tool.cancellable``, an MCP tool) in the same way; it waits for the others.
A single call with no clock to watch runs right in the calling thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from .._engine import CallState
from .._engine.results import LedgerAnswered, LedgerPeeked, ToolReturned, ToolStopped
from .._outcomes import EffectDone, Outcome, describe_errors
from .._redact import RunSecrets, redact_outcome, redact_text
from ..exceptions import CheckpointError
from ..store import Store
from ..tools import Tool, ToolContext, ToolRegistry

ToolResult = ToolReturned | ToolStopped


class StopFlag:
    """A request to stop, set from any thread (``Run.cancel``) and read by the driver and the tool port."""

    __slots__ = ("reason",)

    def __init__(self) -> None:
        self.reason: str | None = None

    def take(self) -> str | None:
        """The reason, cleared (None: nobody asked)."""
        reason, self.reason = self.reason, None
        return reason


@dataclass(slots=True)
class Job:
    """One call to run: the call, its tool, its limits, whether it holds a ledger claim."""

    call: CallState
    tool: Tool
    timeout: float | None
    deadline: float | None
    """The run's deadline (epoch seconds), if any."""
    claim: bool
    turn: int
    simulate: bool = False
    """Run the tool's simulator instead of the tool (a fork with ``effects="simulate"``)."""


class _Slot:
    """One job handed to the executor: when it started, its limit, whether the driver gave up on it."""

    __slots__ = ("abandoned", "by_deadline", "future", "job", "limit", "lock", "loop", "started", "task")

    def __init__(self, job: Job) -> None:
        self.job = job
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


def limit_now(timeout: float | None, deadline: float | None) -> tuple[float | None, bool]:
    """Seconds a call may run from now, and whether the deadline (not the timeout) sets it."""
    if deadline is not None:
        left = max(0.0, deadline - time.time())
        if timeout is None or left < timeout:
            return left, True
    return timeout, False


class ToolPort:
    """Runs one run's calls (see the module docstring)."""

    def __init__(self, store: Store, registry: ToolRegistry, run_id: str, secrets: RunSecrets, max_parallel: int,
                 stop: StopFlag) -> None:
        self.store = store
        self.registry = registry
        self.run_id = run_id
        self.secrets = secrets
        self.max_parallel = max(1, max_parallel)
        self.stop = stop
        self._pool_: concurrent.futures.ThreadPoolExecutor | None = None
        self._unanswered: set[tuple[str, str]] = set()
        """(key, call id) of claims whose reply was lost: the tool never ran for them in this process."""

    # -- the ledger ------------------------------------------------------------------------------------

    def claim(self, key: str, call: CallState, idempotent: bool, batch: frozenset[str]) -> LedgerAnswered:
        """Claim ``key`` for ``call``: what the ledger found (nothing, when the claim is new).

        A claim whose reply was lost (the store may have kept it) is remembered: when it is found again, this
        process knows the tool never ran, and says so (``LedgerAnswered.unrun``).
        """
        try:
            existing = self.store.claim_effect(key, self.run_id, call.call_id, call.name)
        except CheckpointError:
            self._unanswered.add((key, call.call_id))
            raise
        unrun = (key, call.call_id) in self._unanswered
        self._unanswered.discard((key, call.call_id))
        return LedgerAnswered(call.call_id, existing, idempotent, batch, unrun=unrun)

    def peek(self, key: str, call: CallState) -> LedgerPeeked:
        """What the ledger holds for ``key``, without claiming it (a fork decides by its policy first)."""
        return LedgerPeeked(call.call_id, self.store.effect(key))

    def reclaim(self, key: str, call: CallState) -> None:
        """Record that ``call`` runs again with its key (a confirmed retry, an idempotent tool)."""
        self.store.retry_effect(key, self.run_id, call.call_id)

    def shutdown(self) -> None:
        """Let idle threads go now, not when the run is collected."""
        if self._pool_ is not None:
            self._pool_.shutdown(wait=False)
            self._pool_ = None

    # -- running -----------------------------------------------------------------------------------------

    def run(self, jobs: list[Job]) -> tuple[dict[str, ToolResult], bool]:
        """Run ``jobs``; what happened to each by call id, and whether the run was interrupted meanwhile."""
        results: dict[str, ToolResult] = {}
        if not jobs:
            return results, False
        try:
            if len(jobs) == 1 and jobs[0].timeout is None and jobs[0].deadline is None and not jobs[0].tool.is_async:
                self._run_here(jobs[0], results)  # no clock to watch: no thread hand-off
            else:
                self._run_threads(jobs, results)
        except KeyboardInterrupt:
            return results, True
        interrupted = any(isinstance(r, ToolStopped) and r.why == "interrupted" for r in results.values())
        return results, interrupted

    def _run_here(self, job: Job, results: dict[str, ToolResult]) -> None:
        cid = job.call.call_id
        try:
            out = self._call(job)
        except KeyboardInterrupt:
            results[cid] = ToolStopped(cid, "interrupted", started=True, raised=True)
            raise
        results[cid] = ToolReturned(cid, out, self._done(job, out), simulated=job.simulate)

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool_ is None:
            self._pool_ = concurrent.futures.ThreadPoolExecutor(self.max_parallel,
                                                                thread_name_prefix=f"agentnb-{self.run_id}")
        return self._pool_

    def _run_threads(self, jobs: list[Job], results: dict[str, ToolResult]) -> None:
        slots: dict[str, _Slot] = {}
        pool = self._pool()
        for job in jobs:
            slot = slots[job.call.call_id] = _Slot(job)
            slot.future = pool.submit(self._work, slot)
        pending = set(slots)
        try:
            while pending:
                self._watch(slots, pending, results)
        except KeyboardInterrupt:
            for cid in pending:
                slot = slots[cid]
                assert slot.future is not None
                started = not slot.future.cancel()
                if started:
                    slot.abandon()
                results[cid] = ToolStopped(cid, "interrupted", started=started)
            raise

    def _watch(self, slots: dict[str, _Slot], pending: set[str], results: dict[str, ToolResult]) -> None:
        """One look at the running calls: collect the finished, stop the late, wait a little for the rest."""
        now = time.monotonic()
        stop = self.stop.reason
        waits = []
        for cid in list(pending):
            slot = slots[cid]
            fut = slot.future
            assert fut is not None
            if fut.done():
                pending.discard(cid)
                results[cid] = self._collect(slot)
            elif slot.started is None:
                if stop is not None and fut.cancel():
                    pending.discard(cid)
                    results[cid] = ToolStopped(cid, "cancelled", started=False, reason=stop)
            elif stop is not None and slot.job.tool.cancellable:
                pending.discard(cid)
                results[cid] = self._let_go(slot, stop)
            elif slot.limit is not None:
                left = slot.started + slot.limit - now
                if left > 0:
                    waits.append(left)
                    continue
                pending.discard(cid)
                results[cid] = self._expire(slot)
        if pending:
            futures = [slots[cid].future for cid in pending]
            concurrent.futures.wait(futures, timeout=min([*waits, 0.05]),  # type: ignore[arg-type]
                                    return_when=concurrent.futures.FIRST_COMPLETED)

    def _collect(self, slot: _Slot) -> ToolResult:
        assert slot.future is not None
        cid = slot.job.call.call_id
        if isinstance(slot.future.exception(), KeyboardInterrupt):
            return ToolStopped(cid, "interrupted", started=True, raised=True)
        out = slot.future.result()
        return ToolReturned(cid, out, self._done(slot.job, out), simulated=slot.job.simulate)

    def _expire(self, slot: _Slot) -> ToolStopped:
        """A call ran past its limit: the driver stops waiting for it (the engine says what that means)."""
        assert slot.limit is not None and slot.started is not None
        self._pool_ = None  # its thread is still busy: later calls get a fresh pool, so nothing queues behind it
        slot.abandon()
        if not slot.job.tool.side_effects:
            slot.cancel_task()
        return ToolStopped(slot.job.call.call_id, "limit", started=True, limit_s=slot.limit,
                           elapsed_s=time.monotonic() - slot.started, by_deadline=slot.by_deadline)

    def _let_go(self, slot: _Slot, reason: str) -> ToolStopped:
        """The run was cancelled while a call that can be let go ran (``Tool.cancellable``): stop waiting for it."""
        assert slot.started is not None
        self._pool_ = None  # as for a call past its limit: its thread may still be busy
        slot.abandon()
        if not slot.job.tool.side_effects:
            slot.cancel_task()
        return ToolStopped(slot.job.call.call_id, "cancelled", started=True, reason=reason,
                           elapsed_s=time.monotonic() - slot.started)

    def _work(self, slot: _Slot) -> Outcome:
        """In a worker thread: the call's clock starts now."""
        job = slot.job
        slot.limit, slot.by_deadline = limit_now(job.timeout, job.deadline)
        slot.started = time.monotonic()
        out = self._call(job, slot.on_loop)
        with slot.lock:
            if slot.abandoned and job.claim:  # the driver gave up on it: record the late outcome for a person
                key = job.call.idempotency_key
                assert key is not None
                try:
                    self.store.finish_effect(key, self.run_id, job.call.call_id, out.content, out.value, out.status)
                except Exception:  # noqa: S110 - the ledger then still says "started": the pause stays honest
                    pass
        return out

    def _call(self, job: Job, on_loop: Any = None) -> Outcome:
        """Run one call in this thread (errors become outcomes; KeyboardInterrupt propagates)."""
        call, tool = job.call, job.tool
        validated = self._real_arguments(call, tool)  # the real secret arguments live in memory only
        if isinstance(validated, Outcome):
            return validated
        ctx = None
        if tool.context_param is not None:
            ctx = ToolContext(run_id=self.run_id, call_id=call.call_id, tool_name=tool.name, turn=job.turn,
                              idempotency_key=call.idempotency_key)
        # results and errors alike are masked before they are cut (a cut can halve a key), hashed, stored or shown
        return redact_outcome(self.registry.run(tool, validated, ctx, on_loop, simulated=job.simulate))

    @staticmethod
    def _done(job: Job, out: Outcome) -> EffectDone | None:
        if not job.claim:
            return None
        assert job.call.idempotency_key is not None
        return EffectDone(job.call.idempotency_key, out.content, out.value, out.status)

    def _real_arguments(self, call: CallState, tool: Tool) -> BaseModel | Outcome:
        """The call's recorded arguments with its real secrets, validated; or the error outcome when they cannot be.

        Validation before this point saw the masked values; the real ones meet the schema here. What runs is
        what the log says was approved: the arguments of the call's last event, never a copy held aside.
        """
        real = self.secrets.unmask(call.call_id, call.name, call.arguments or {})
        if isinstance(real, str):
            return Outcome(status="error", content=real, error_type="SecretUnavailable", error_message=real)
        try:
            return tool.validate(real)
        except ValidationError as exc:
            message, _ = describe_errors(call.name, exc)
            return Outcome(status="error", content=message, error_type="ValidationError", error_message=message)
        except Exception as exc:  # the value boundary, or a validator raising something else: an error outcome
            message = redact_text(f"Invalid arguments for tool '{call.name}': {type(exc).__name__}: {exc}")
            return Outcome(status="error", content=message, error_type=type(exc).__name__, error_message=message)
