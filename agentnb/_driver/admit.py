"""Which of a turn's calls run: each side-effecting call's claim on the effect ledger, and a fork's policy first.

Theory of operation. Before a batch of calls runs, every call that needs it is looked up -- a fork's write in
the ledger without claiming it (its effect policy decides first), a fork's read in its parent's results
(``reads="reuse"``) -- and every write claims its idempotency key. Each lookup is an I/O result the engine's
:func:`~agentnb._engine.receive` judges: the event that answers the call at once (an inherited, duplicate or
reused result, a pause for a person), or a verdict to run it (and how). What may run becomes a
:class:`~agentnb._driver.tool_port.Job`. Nothing here decides: it performs the lookups in order and collects
the engine's verdicts.
"""

from __future__ import annotations

from typing import Any

from .._engine import AwaitFirst, CallState, Emit, RunState, receive
from .._engine.actions import EngineConfig
from .._engine.effects import call_limit, ledger_key, looks_first
from .._engine.results import DuplicateDone, ParentRead, ToolReturned
from .fork import ParentReads
from .lease import LeaseKeeper
from .tool_port import Job, ToolPort


def admit(rs: RunState, cfg: EngineConfig, tools: ToolPort, calls: list[CallState],
          reads: ParentReads) -> tuple[dict[str, Any], dict[str, str], list[Job]]:
    """The I/O results that answer calls now (by call id), the calls waiting on another's effect, the jobs to run."""
    batch = frozenset(c.call_id for c in calls)
    answers: dict[str, Any] = {}
    firsts: dict[str, str] = {}
    jobs: list[Job] = []
    for c in calls:
        tool = tools.registry.get(c.name)
        assert tool is not None
        key = ledger_key(rs, cfg, c)
        verdict: Any = None
        if looks_first(rs, cfg, c) and (key is not None or not tool.side_effects):  # a fork: its policy first
            found: Any = tools.peek(key, c) if key is not None else ParentRead(c.call_id, reads.get(rs, c))
            verdict = receive(rs, cfg, found)
            if isinstance(verdict, Emit):
                answers[c.call_id] = found
                continue
        if key is not None and (verdict is None or verdict.claim):
            claim = tools.claim(key, c, tool.idempotent, batch)
            verdict = receive(rs, cfg, claim)
            if isinstance(verdict, Emit):
                answers[c.call_id] = claim
                continue
        if isinstance(verdict, AwaitFirst):
            firsts[c.call_id] = verdict.first
            continue
        if verdict is not None and verdict.retry:
            tools.reclaim(key or "", c)
        simulate = verdict is not None and verdict.simulate
        jobs.append(Job(c, tool, *call_limit(rs, cfg, c), claim=key is not None and not simulate, turn=rs.turn,
                        simulate=simulate))
    return answers, firsts, jobs


def perform(rs: RunState, cfg: EngineConfig, tools: ToolPort, leases: LeaseKeeper, call_id: str, batch: bool,
            reads: ParentReads) -> tuple[list[Any], bool]:
    """Admit, run and answer the call the engine named: I/O results in the model's order, and whether an interrupt came.

    ``batch`` (``Run.run()``, with ``max_parallel`` above one): every running call of the turn runs at once; else
    the one call. A lone read-only call (no key, no fork lookup) goes straight to the tool port. While the tools
    run, the run's lease is kept alive (a long tool must not look like a dead driver).
    """
    calls = [c for c in rs.calls.values() if c.status == "running"] if batch and cfg.budget.max_parallel > 1 \
        else [rs.calls[call_id]]
    if len(calls) == 1 and ledger_key(rs, cfg, calls[0]) is None and not looks_first(rs, cfg, calls[0]):
        c = calls[0]
        tool = tools.registry.get(c.name)
        assert tool is not None
        leases.waiting(rs.seq)
        try:
            ran, interrupted = tools.run([Job(c, tool, *call_limit(rs, cfg, c), claim=False, turn=rs.turn)])
        finally:
            leases.done_waiting()
        return [ran[c.call_id]], interrupted
    answers, firsts, jobs = admit(rs, cfg, tools, calls, reads)
    leases.waiting(rs.seq)
    try:
        ran, interrupted = tools.run(jobs)
    finally:
        leases.done_waiting()
    answers.update(ran)
    for cid, first in firsts.items():
        done = ran.get(first)
        answers[cid] = DuplicateDone(cid, first, done.outcome.content if isinstance(done, ToolReturned) else None)
    return [answers[c.call_id] for c in calls if c.call_id in answers], interrupted


__all__ = ["admit", "perform"]
