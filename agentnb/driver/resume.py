"""Resuming a stored run: fold its log again, check it may go on, take its lease (see ``Run.resume``).

Before anything executes: the loop's tools and approval policy must be those the run started with; every
call still to run is validated against the current schema (the validated arguments are kept to run it
with); recorded result bindings are recomputed from the state, not read from the log. Only then is the
lease taken, so a refused resume leaves nothing behind. A seekable model is moved to the request the run
stopped at; a run stopped during a model call asks again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine import resumed_request, verify_bindings
from ..events import ModelRequested, ModelRetried, RunStarted
from ..exceptions import ResumeError
from ..providers.base import Seekable
from ..states import TERMINAL, S
from ..store import Store
from .history import policy_diff

if TYPE_CHECKING:
    from ..loop import Loop
    from ..run import Run


def resume(cls: type[Run], run_id: str, loop: Loop, store_: Store, *, allow_policy_change: bool,
           take_over: bool) -> Run:
    """The stored run ``run_id``, checked and ready (see ``Run.resume`` for what is checked and raised)."""
    events = store_.load(run_id)
    first = events[0]
    if not isinstance(first, RunStarted):
        raise ResumeError(f"run {run_id!r} does not start with RunStarted")
    run = cls(loop, [], run_id=run_id, operation_id=first.settings.get("operation_id"), store=store_)
    run._initial = list(first.messages)
    run.prompt = [m for m in first.messages if m.role != "system"] if loop.system else list(first.messages)
    for ev in events:
        run._rs.apply(ev)
        run._events.append(ev)
    rs = run._rs
    recorded = first.settings.get("policy_revision")
    if recorded != loop.policy_revision and not allow_policy_change:
        raise ResumeError(
            f"run {run_id!r} started under another tool or approval policy: {policy_diff(first, loop.registry)}. "
            "Resume with the loop it started with, or pass allow_policy_change=True."
        )
    for call in rs.calls.values():
        if call.status in ("valid", "approved", "running", "awaiting_approval") and call.arguments is not None:
            tool = loop.registry.get(call.name)
            if tool is None:
                raise ResumeError(f"call {call.call_id!r} names tool {call.name!r}, which this loop does not have")
            try:
                run._exec.validated[call.call_id] = (call.arguments, tool.validate(call.arguments))
            except Exception as exc:
                raise ResumeError(
                    f"call {call.call_id!r} no longer fits the schema of {call.name!r}: {exc}"
                ) from exc
    mismatch = verify_bindings(rs, loop.config, recompute=True) if rs.calls else None
    if mismatch:
        raise ResumeError(f"run {run_id!r}: {mismatch}")
    # the checks passed: only now take the run (a refused resume must not leave a lease behind)
    run._leases.take(rs.seq, take_over=take_over)
    if rs.state is S.WAITING_APPROVAL or rs.state in TERMINAL:
        run._let_go()  # nothing to drive until a person answers: approvers in other processes may take it
    if isinstance(loop.model, Seekable):
        attempts = sum(isinstance(e, ModelRequested | ModelRetried) for e in events)
        loop.model.seek(run_id, attempts - 1 if rs.state is S.MODEL_REQUESTED else attempts)
    if rs.state is S.MODEL_REQUESTED:
        run._append(resumed_request(rs))
    return run

