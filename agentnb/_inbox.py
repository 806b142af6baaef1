"""The approvals inbox: every call waiting for a person, across the runs of a store, and the decisions on them.

Theory of operation. The inbox holds nothing of its own: its state is the store. :meth:`Inbox.items` asks the
store which runs are paused, then reads each one's sealed log (a run whose log does not verify, or whose log
says it is not paused whatever the store's index says, is reported in :attr:`Inbox.problems`, never listed),
and gives one :class:`Pending` per waiting call: its run, tool, risk, kind, arguments (and their digest, the
proof of what the person saw), the model's text of that turn, when it was asked and when it expires, and the
batch the run came from. So two people, two processes or a kernel restart see the same inbox.

A decision (:meth:`Inbox.approve`, :meth:`Inbox.deny`, :meth:`Inbox.submit`) names the items the person saw.
Each run's decisions are checked first -- the call still waits, the arguments are the ones shown (their
digest), an approval has not expired -- and applied only if all of that run's pass; the run is resumed with
the inbox's loop (a run another driver holds is refused, never taken) and each decision recorded with who,
when and the note. A call someone else decided meanwhile is refused with who and when ("already approved by
ana at 10:42:07"); a store that cannot be written leaves the decision unapplied, and says so. Nothing is
ever applied twice: the store's append of the decision is the one place two deciders meet.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._collection import TranscriptCollection
from ._engine import RunState
from ._loop import Loop
from ._run import Run
from ._states import LoopState
from ._transcript import Transcript
from ._visible import FLAG, hides, visible
from .events import ApprovalRequested, ApprovalResolved, BaseEvent, RunStarted, TurnCompleted
from .exceptions import (
    AgentnbError,
    ApprovalError,
    CheckpointError,
    RunLocked,
    RunNotPaused,
    StoreUnavailable,
    ValueConversionError,
)
from .store import Store, as_store

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Pending:
    """One call waiting for a person, as the inbox shows it."""

    run_id: str
    call_id: str
    tool: str
    risk: str
    kind: str
    """``approval``, ``client_result``, ``outcome_unknown``, ``fork_effect`` or ``escalation``."""
    arguments: dict[str, Any]
    digest: str
    """The arguments' digest as shown: a decision carries it, so changed arguments are never approved unseen."""
    reasoning: str
    """The model's text of the turn that made the call."""
    asked_at: datetime
    expires_at: datetime | None
    note: str | None
    batch: str | None
    """The batch the run came from (its run id ``<batch>-<row>``), if any."""
    tags: tuple[str, ...] = ()
    """The run's tags (``loop.start(..., tags=)``, ``anb.batch(..., tags=)``)."""

    @property
    def key(self) -> tuple[str, str]:
        """``(run_id, call_id)``: what names the item in a decision."""
        return self.run_id, self.call_id

    def age_s(self, now: datetime | None = None) -> float:
        """Seconds since the run paused for it."""
        return ((now or datetime.now(UTC)) - self.asked_at).total_seconds()


@dataclass
class Outcome:
    """What became of one decision: applied, or refused and why."""

    run_id: str
    call_id: str
    decision: str
    applied: bool
    reason: str | None = None


@dataclass
class Decided:
    """The outcomes of one call of :meth:`Inbox.approve` (or deny, or submit), one per item."""

    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def applied(self) -> list[Outcome]:
        """The decisions recorded."""
        return [o for o in self.outcomes if o.applied]

    @property
    def refused(self) -> list[Outcome]:
        """The decisions not recorded, each with its reason."""
        return [o for o in self.outcomes if not o.applied]

    def __repr__(self) -> str:
        return f"<agentnb._inbox.Decided {len(self.applied)} applied, {len(self.refused)} refused>"


def _batch_of(run_id: str) -> str | None:
    head, sep, tail = run_id.rpartition("-")
    return head if sep and tail.isdigit() else None


def _pending(events: list[BaseEvent]) -> list[Pending]:
    rs = RunState.fold(events)
    if rs.state is not LoopState.WAITING_APPROVAL:
        return []
    texts = {e.turn: e.response.message.text or "" for e in events if isinstance(e, TurnCompleted)}
    first = events[0]
    tags = tuple(first.settings.get("tags") or ()) if isinstance(first, RunStarted) else ()
    out = []
    for c in rs.pending_approvals():
        req = c.request
        if not isinstance(req, ApprovalRequested):
            continue
        out.append(Pending(req.run_id, c.call_id, req.name, req.risk, req.kind, dict(req.arguments),
                           req.arguments_digest, texts.get(req.turn, ""), req.ts, req.expires_at, req.note,
                           _batch_of(req.run_id), tags))
    return out


class Inbox:
    """Every call waiting for a person across the runs of a store, and the decisions on them.

    ``loop``: the loop the runs are resumed with to record a decision (a :class:`~agentnb.Loop`, or a function
    of a run id that returns one); listing needs none. ``by``: who decides (each decision may name another).
    In a notebook it displays as a widget (:meth:`widget`): rows to group, filter, select and decide, updated
    live as the store changes.

    Example:
        >>> import agentnb as anb
        >>> store = anb.MemoryStore()
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
        >>> paused = anb.batch(loop, ["Refund order 42", "Refund order 43"], progress=False, name="refunds")
        >>> inbox = anb.Inbox(store, loop=loop)
        >>> sorted((p.run_id, p.tool) for p in inbox.items())  # oldest first; the batch paused both at once
        [('refunds-0', 'create_refund'), ('refunds-1', 'create_refund')]
        >>> done = inbox.approve(inbox.items(), by="ana", note="under $20")
        >>> len(done.applied), inbox.items()
        (2, [])
    """

    def __init__(self, store: Store | str | Any, *, loop: Loop | Callable[[str], Loop] | None = None,
                 by: str | None = None) -> None:
        self.store = as_store(store)
        self.loop = loop
        self.by = by
        """Who decides from this inbox (a decision's ``by=`` when it names none; the widget's person)."""
        self.problems: dict[str, str] = {}
        """Runs the store lists as paused whose log says otherwise or cannot be read, and why (the last listing)."""

    # -- reading ---------------------------------------------------------------------------------------

    def items(self, *, tool: str | Iterable[str] | None = None, risk: str | Iterable[str] | None = None,
              kind: str | Iterable[str] | None = None, batch: str | None = None, tag: str | None = None,
              where: Callable[[Pending], bool] | None = None) -> list[Pending]:
        """The calls waiting now, oldest first, filtered (each filter a value or several; ``where`` a predicate).

        ``tag``: only runs with that tag among theirs.
        """
        def wanted(value: str, allowed: str | Iterable[str] | None) -> bool:
            return allowed is None or (value == allowed if isinstance(allowed, str) else value in set(allowed))

        self.problems = {}
        out: list[Pending] = []
        for run_id, _ in self.store.runs(state=LoopState.WAITING_APPROVAL.value):
            try:
                events = self.store.load(run_id)  # sealed: an edited log is refused here, never listed
            except StoreUnavailable:  # not a problem of this run: the listing as a whole fails, none is left out
                raise
            except Exception as exc:
                self.problems[run_id] = f"its log cannot be read: {exc}"
                continue
            found = _pending(events)
            if not found:
                state = events[-1].state.value if events else "empty"
                self.problems[run_id] = f"the store lists it as paused, but its sealed log says {state}"
            out.extend(p for p in found if wanted(p.tool, tool) and wanted(p.risk, risk) and wanted(p.kind, kind)
                       and (batch is None or p.batch == batch) and (tag is None or tag in p.tags)
                       and (where is None or where(p)))
        return sorted(out, key=lambda p: p.asked_at)

    def table(self, **filters: Any) -> pd.DataFrame:
        """:meth:`items` as a DataFrame, one row per waiting call (``age_s`` as of now)."""
        import pandas as pd

        now = datetime.now(UTC)
        rows = [{"run_id": p.run_id, "call_id": p.call_id, "tool": p.tool, "risk": p.risk, "kind": p.kind,
                 "arguments": p.arguments, "reasoning": p.reasoning, "asked_at": p.asked_at,
                 "age_s": p.age_s(now), "expires_at": p.expires_at, "note": p.note, "batch": p.batch,
                 "tags": list(p.tags)} for p in self.items(**filters)]
        return pd.DataFrame(rows, columns=["run_id", "call_id", "tool", "risk", "kind", "arguments", "reasoning",
                                           "asked_at", "age_s", "expires_at", "note", "batch", "tags"])

    def decisions(self, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """The audit trail: every approval request and its decision across the store's runs.

        Who decided, when, the wait, edited arguments: the columns of ``frames.approvals()`` (``docs/frames.md``).
        """
        ids = list(run_ids) if run_ids is not None else [r for r, _ in self.store.runs()]
        runs = [Transcript(self.store.load(r)) for r in ids]
        return TranscriptCollection([t for t in runs if any(isinstance(e, ApprovalRequested) for e in t.events)]
                                    ).frames.approvals()

    def __repr__(self) -> str:
        return f"<agentnb.Inbox {len(self.items())} waiting>"

    def widget(self, *, by: str | None = None, interval: float = 0.5) -> Any:
        """The inbox as a widget (an ``InboxWidget``): what a notebook shows for an inbox left as a cell's last line.

        ``by``: who decides from it (default: the inbox's ``by``); ``interval``: seconds between live listings.
        """
        from ._inbox_widget import InboxWidget

        return InboxWidget(self, by=by, interval=interval)

    def _ipython_display_(self) -> None:
        self.widget()._ipython_display_()

    def _repr_html_(self) -> str:
        """The waiting calls as a table (escaped, invisible characters written out and flagged): a saved view.

        What a person decides on is shown as it runs: an argument holding a right-to-left override or a zero-width
        space reads ``⟨U+202E⟩``, and its row says :data:`~agentnb._visible.FLAG`.
        """
        def cell(text: str) -> str:
            return html.escape(visible(text)[0])

        def arguments(p: Pending) -> str:
            text = json.dumps(p.arguments, ensure_ascii=False, default=str)
            text = text if len(text) <= 200 else text[:199] + "…"  # cut before escaping: never half an entity
            flag = f" <b class='agentnb-hidden'>⚠ {html.escape(FLAG)}</b>" if hides(p.arguments) else ""
            return f"<code>{html.escape(visible(text, json=True)[0])}</code>{flag}"

        rows = "".join(
            f"<tr><td>{cell(p.run_id)}{''.join(f' <i>#{cell(tag)}</i>' for tag in p.tags)}</td>"
            f"<td>{cell(p.call_id)}</td><td><b>{cell(p.tool)}</b>"
            f"</td><td>{cell(p.risk)}</td><td>{cell(p.kind)}</td>"
            f"<td>{arguments(p)}</td><td>{cell(p.reasoning[:200])}</td><td>{p.age_s():.0f} s</td></tr>"
            for p in self.items())
        return (f"<div class='agentnb-inbox-static'><b>Approvals inbox</b>: {len(self.items())} waiting"
                "<table><tr><th>run</th><th>call</th><th>tool</th><th>risk</th><th>kind</th><th>arguments</th>"
                f"<th>the model</th><th>waiting</th></tr>{rows}</table></div>")

    # -- deciding --------------------------------------------------------------------------------------

    def approve(self, items: Pending | Iterable[Pending], *, by: str | None = None, note: str | None = None,
                arguments: dict[str, Any] | None = None, then_run: bool = False) -> Decided:
        """Approve the items the person saw (``arguments``: edited ones, for a single item; schema-checked).

        ``then_run``: carry each run on after its decisions (until it ends or pauses again).
        """
        return self._decide(items, "approved", by, note, then_run, arguments=arguments)

    def deny(self, items: Pending | Iterable[Pending], *, by: str | None = None, reason: str | None = None,
             then_run: bool = False) -> Decided:
        """Deny the items; the model reads "Denied by the user: <reason>"."""
        return self._decide(items, "denied", by, reason, then_run)

    def submit(self, item: Pending, value: Any, *, by: str | None = None, note: str | None = None,
               then_run: bool = False) -> Decided:
        """Answer a waiting call with a result instead of running it (a client tool, a reconciled outcome)."""
        return self._decide(item, "submitted", by, note, then_run, value=value)

    def end(self, items: Pending | Iterable[Pending], reason: str, *, by: str | None = None) -> Decided:
        """End the runs of the items (``CANCELLED``; each run's reason says who ended it and why), once per run.

        A run that finished meanwhile, or that another driver holds, is refused with why; nothing else is touched.

        Raises:
            AgentnbError: a blank ``reason`` or no ``by`` (both are recorded with the end).
        """
        chosen = [items] if isinstance(items, Pending) else list(items)
        by = by if by is not None else self.by
        if not isinstance(by, str) or not by.strip():
            raise AgentnbError("ending a run needs by= (who ends it): it is recorded with the end")
        if not isinstance(reason, str) or not reason.strip():
            raise AgentnbError("ending a run needs a reason (it is recorded with the end)")
        result = Decided()
        per_run: dict[str, list[Pending]] = {}
        for p in chosen:
            per_run.setdefault(p.run_id, []).append(p)
        for run_id, group in per_run.items():
            why = self._end_run(run_id, reason, by)
            result.outcomes.extend(Outcome(p.run_id, p.call_id, "ended", why is None, why) for p in group)
        return result

    def _end_run(self, run_id: str, reason: str, by: str) -> str | None:
        try:
            run = Run.resume(run_id, loop=self.loop_for(run_id), store=self.store)
        except AgentnbError as exc:  # held by another driver, a log that cannot be trusted, a loop that does not fit
            return f"not applied: {exc}"
        try:
            run.end(reason, by=by)
        except CheckpointError as exc:
            return f"not applied: the store could not record it ({exc})"
        except AgentnbError as exc:
            return f"not applied: {exc}"
        finally:
            run.release()
        return None

    def loop_for(self, run_id: str) -> Loop:
        """The loop a run is resumed with to record a decision."""
        if self.loop is None:
            raise AgentnbError("the inbox needs loop= to record a decision (the run is resumed with it): "
                               "anb.Inbox(store, loop=my_loop)")
        loop = self.loop if isinstance(self.loop, Loop) else self.loop(run_id)
        return loop

    def _decide(self, items: Pending | Iterable[Pending], decision: str, by: str | None, note: str | None,
                then_run: bool, *, arguments: dict[str, Any] | None = None, value: Any = None) -> Decided:
        chosen = [items] if isinstance(items, Pending) else list(items)
        by = by if by is not None else self.by
        if not isinstance(by, str) or not by.strip():
            raise AgentnbError("a decision needs by= (who decides): it is recorded with the decision")
        if arguments is not None and len(chosen) != 1:
            raise AgentnbError("edited arguments= are for one item at a time (each call has its own)")
        result = Decided()
        per_run: dict[str, list[Pending]] = {}
        for p in chosen:
            per_run.setdefault(p.run_id, []).append(p)
        for run_id, group in per_run.items():
            result.outcomes.extend(self._decide_run(run_id, group, decision, by, note, then_run, arguments, value))
        return result

    def _decide_run(self, run_id: str, group: list[Pending], decision: str, by: str, note: str | None,
                    then_run: bool, arguments: dict[str, Any] | None, value: Any) -> list[Outcome]:
        def refuse_all(reason: str) -> list[Outcome]:
            return [Outcome(p.run_id, p.call_id, decision, False, reason) for p in group]

        try:
            run = Run.resume(run_id, loop=self.loop_for(run_id), store=self.store)
        except (RunLocked, CheckpointError) as exc:
            return refuse_all(f"not applied: {exc}")
        out: list[Outcome] = []
        try:  # a run that moved on is held once resumed: refused or applied, it is let go of
            problems = {p.call_id: why for p in group if (why := _stale(run, p, decision)) is not None}
            if problems:  # all or nothing per run: one stale item refuses the run's decisions, each saying why
                return [Outcome(p.run_id, p.call_id, decision, False,
                                problems.get(p.call_id, "not applied: another decision of this run was refused"))
                        for p in group]
            self._apply(run, group, decision, by, note, arguments, value, out)
            if then_run and not run.paused and not run.done:
                run.run()
        finally:
            run.release()  # deciding is not driving: whoever runs it next may take it at once
        return out

    @staticmethod
    def _apply(run: Run, group: list[Pending], decision: str, by: str, note: str | None,
               arguments: dict[str, Any] | None, value: Any, out: list[Outcome]) -> None:
        for p in group:
            try:
                if decision == "approved":
                    run.approve(p.call_id, by=by, note=note, arguments=arguments, digest=p.digest)
                elif decision == "denied":
                    run.deny(p.call_id, note, by=by)
                else:
                    run.submit_result(p.call_id, value, by=by, note=note)
            except (ApprovalError, RunNotPaused) as exc:
                out.append(Outcome(p.run_id, p.call_id, decision, False, _already(run, p) or f"not applied: {exc}"))
            except CheckpointError as exc:
                out.append(Outcome(p.run_id, p.call_id, decision, False,
                                   f"not applied: the store could not record it ({exc})"))
            except (ValidationError, ValueConversionError) as exc:  # edited arguments that do not fit
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                out.append(Outcome(p.run_id, p.call_id, decision, False,
                                   f"not applied: the edited arguments do not fit the tool's schema ({first})"))
            else:
                out.append(Outcome(p.run_id, p.call_id, decision, True))


def _stale(run: Run, p: Pending, decision: str) -> str | None:
    """Why a decision on ``p`` may not be applied to ``run`` as it stands (None: it may)."""
    if (done := _already(run, p)) is not None:
        return done
    call = next((c for c in run.pending_approvals() if c.call_id == p.call_id), None)
    if call is None or not run.paused:
        return f"not applied: call {p.call_id} no longer waits (the run is {run.state.value})"
    req = call.request
    if req is None or req.arguments_digest != p.digest:
        return "not applied: the call's arguments changed since they were shown"
    if decision == "approved" and p.expires_at is not None and datetime.now(UTC) > p.expires_at:
        return f"not applied: the request expired at {p.expires_at:%Y-%m-%d %H:%M:%S} (it can still be denied)"
    return None


def _already(run: Run, p: Pending) -> str | None:
    """"already approved by ana at 10:42:07" when someone decided this call (since it was shown)."""
    for e in reversed(run.events):
        if isinstance(e, ApprovalResolved) and e.call_id == p.call_id and e.ts >= p.asked_at:
            return f"already {e.decision} by {e.by or 'someone'} at {e.ts:%H:%M:%S}"
    return None


__all__ = ["Decided", "Inbox", "Outcome", "Pending"]
