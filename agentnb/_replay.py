"""Replay against today's code: drive a recorded run again with the current loop, and say where it parts.

Theory of operation. :func:`replay` starts a run of the current loop from the recorded run's prompt, in a
memory store of its own. The recorded model turns answer its requests, in order (:class:`RecordedTurns`); the
recorded tool results answer its calls (:func:`recorded_tools`, a tool port that runs nothing, so no effect
can happen); a pause is answered with the person's recorded decision. Each event the run appends is compared
with the recorded event at the same place, by what the code *decided* (:func:`signature`): the tools offered
and their schemas, how each call was parsed and validated, whether a person was asked, the results, the
guards, the next state and how the run ended. Fragments and model retries are the model's, not the code's,
and are not compared. At the first difference the replay stops with a :class:`Divergence` naming the recorded
event, what the recording says and what the code does now. With ``then="live"`` it carries on from there:
the recorded run (a stored one) is forked just before that event with the loop's real model under a fork's
effect policy (``Run.fork``), so nothing the recorded run did is done again.
"""

from __future__ import annotations

import copy
import html
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._binding import canonical, sha256
from ._driver.tool_port import Job, ToolPort, ToolResult
from ._engine.results import ToolReturned
from ._outcomes import Outcome
from ._request import ModelRequest, StreamItem
from ._run import Run
from ._transcript import Transcript
from .events import (
    ApprovalRequested,
    ApprovalResolved,
    ArgumentsMerged,
    BaseEvent,
    CallParsed,
    CallRejected,
    CallValidated,
    GuardTripped,
    ModelRequested,
    ModelRetried,
    ResultsBound,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    TurnCompleted,
)
from .exceptions import AgentnbError, ModelError
from .store import MemoryStore, Store, as_store

IGNORED = (TextMerged, ArgumentsMerged, ModelRetried)
"""The model's own events: how it streamed and when it failed are not the code's decisions."""


def _digest(value: Any) -> str:
    return sha256(canonical(value))[:16]


def signature(ev: BaseEvent) -> dict[str, Any]:
    """What the code decided in ``ev``: the fields a replay compares (never times, ids of runs, or hashes)."""
    out: dict[str, Any] = {"type": ev.type, "state": ev.state.value}
    if isinstance(ev, RunStarted):
        out["messages"] = _digest([m.text for m in ev.messages])
        out["tools"] = {t.name: _digest(t.parameters) for t in ev.tools}
    elif isinstance(ev, ModelRequested):
        out.update(tools=sorted(ev.tools), finalize=ev.finalize, tool_choice=ev.tool_choice)
    elif isinstance(ev, TurnCompleted):
        out["calls"] = [(c.call_id, c.name) for c in ev.response.message.tool_calls]
    elif isinstance(ev, CallParsed):
        out.update(call=ev.call_id, arguments=_digest(ev.arguments), error=ev.error)
    elif isinstance(ev, CallValidated):
        out.update(call=ev.call_id, arguments=_digest(ev.arguments), needs_approval=ev.needs_approval)
    elif isinstance(ev, CallRejected):
        out.update(call=ev.call_id, reason=ev.reason)
    elif isinstance(ev, ApprovalRequested):
        out.update(call=ev.call_id, kind=ev.kind)
    elif isinstance(ev, ApprovalResolved):
        out.update(call=ev.call_id, decision=ev.decision)
    elif isinstance(ev, ToolFinished):
        out.update(call=ev.call_id, status=ev.status, content=_digest(ev.content))
    elif isinstance(ev, ResultsBound):
        out["calls"] = list(ev.call_ids)
    elif isinstance(ev, GuardTripped):
        out.update(guard=ev.guard, action=ev.action)
    elif isinstance(ev, RunFinished):
        out["reason"] = ev.reason
    elif hasattr(ev, "call_id"):
        out["call"] = ev.call_id
    return out


def _said(ev: BaseEvent | None) -> str:
    if ev is None:
        return "nothing (the run ends here)"
    detail = {k: v for k, v in signature(ev).items() if k not in ("type", "state") and not isinstance(v, dict)}
    words = ", ".join(f"{k}={v!r}" for k, v in detail.items())
    return f"{ev.type} ({ev.state.value}{', ' + words if words else ''})"


@dataclass(frozen=True)
class Divergence:
    """Where a replay parted from its recording: the recorded event, and what each side says there."""

    seq: int
    """The recorded event's seq (the recording's length when the code went on past its end)."""
    expected: BaseEvent | None
    """The recorded event (None: the recording had ended)."""
    actual: BaseEvent | None
    """What the code did there (None: the code's run ended, or stopped before it)."""
    what: str
    """The difference in words."""

    def __str__(self) -> str:
        return self.what


def _difference(expected: BaseEvent | None, actual: BaseEvent | None) -> str:
    if expected is None:
        return f"the recording ends here; the code now goes on with {_said(actual)}"
    if actual is None:
        return f"at event {expected.seq} the recording has {_said(expected)}; the code's run stops before it"
    a, b = signature(expected), signature(actual)
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    if expected.type == actual.type == "RunStarted" and "tools" in changed:
        before, now = a["tools"], b["tools"]
        names = sorted(n for n in before.keys() | now.keys() if before.get(n) != now.get(n))
        return (f"at event 0 the tools differ: {', '.join(names)} (added, removed, or another schema) -- the "
                "recorded turns were answers to other tools")
    return (f"at event {expected.seq} the recording has {_said(expected)}, where the code now does "
            f"{_said(actual)} (differs in: {', '.join(changed)})")


class RecordedTurns:
    """A model that answers a run's requests with a recording's turns, in order."""

    def __init__(self, turns: list[Any], provider: str, name: str) -> None:
        self.turns = turns
        self.provider, self.name = provider, name
        self._served: dict[str, int] = {}

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        """The next recorded turn for ``request``'s run."""
        n = self._served.get(request.run_id, 0)
        if n >= len(self.turns):
            raise ModelError(f"the recording has no turn {n + 1}: it made {len(self.turns)} model turn(s)",
                             status=None, retryable=False)
        self._served[request.run_id] = n + 1
        return iter((self.turns[n],))

    def credentials(self) -> list[str]:
        """None: a recording holds no key."""
        return []


def _outcome(ev: ToolFinished) -> Outcome:
    return Outcome(status=ev.status, content=ev.content, value=ev.value, error_type=ev.error_type,
                   error_message=ev.error_message, duration_s=ev.duration_s)


def recorded_tools(results: dict[str, Outcome]) -> type[ToolPort]:
    """A tool port class whose ``run`` answers each call from ``results`` by call id and runs nothing."""

    class _Recorded(ToolPort):
        def run(self, jobs: list[Job]) -> tuple[dict[str, ToolResult], bool]:
            out: dict[str, ToolResult] = {}
            for job in jobs:
                cid = job.call.call_id
                found = results.get(cid) or Outcome(
                    status="error", content=f"(replay) the recording has no result for call {cid}",
                    error_type="NotRecorded", error_message="no recorded result")
                out[cid] = ToolReturned(cid, found, self._done(job, found))
            return out, False

    return _Recorded


@dataclass
class Replay:
    """What a replay found: the replayed run, the first divergence (None: none), and a live run if asked for."""

    run: Run
    """The replayed run (in a memory store of its own; nothing it did touched the world)."""
    divergence: Divergence | None
    compared: int
    """Recorded events compared before the replay ended or parted."""
    live: Run | None = None
    """With ``then="live"`` and a divergence: the fork of the recorded run that carries on with the real model."""

    @property
    def ok(self) -> bool:
        """True when the code did what the recording says, to the end."""
        return self.divergence is None

    def __repr__(self) -> str:
        verdict = "no divergence" if self.divergence is None else f"diverged: {self.divergence.what}"
        return f"<agentnb.Replay {self.compared} events compared · {verdict}>"

    def _repr_html_(self) -> str:
        """In a notebook: the verdict, and for a divergence both sides of it, side by side (escaped text)."""
        if self.divergence is None:
            return (f"<div class='agentnb-replay'><b>replay</b>: {self.compared} events compared, the code does what "
                    "the recording says, to the end</div>")
        d = self.divergence

        def side(ev: BaseEvent | None) -> str:
            if ev is None:
                return "<i>nothing</i>"
            rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td><code>{html.escape(str(v))}</code></td></tr>"
                           for k, v in signature(ev).items())
            return f"<table>{rows}</table>"

        return ("<div class='agentnb-replay'><b>replay diverged</b> at recorded event "
                f"{d.seq} after {self.compared} events: {html.escape(d.what)}"
                "<table><tr><th>the recording</th><th>the code now</th></tr>"
                f"<tr><td style='vertical-align:top'>{side(d.expected)}</td>"
                f"<td style='vertical-align:top'>{side(d.actual)}</td></tr></table></div>")


def _events(source: Any, store: Store | str | Path | None) -> tuple[list[BaseEvent], Store | None]:
    if isinstance(source, Run):
        return list(source.events), source.store
    if isinstance(source, Transcript):
        return list(source.events), None
    if isinstance(source, list):
        return list(source), None
    if isinstance(source, str) and store is not None:
        st = as_store(store)
        return st.load(source), st
    if isinstance(source, str | Path) and Path(source).exists():
        return list(Transcript.load(source).events), None
    raise AgentnbError(f"replay needs a Run, a Transcript, a list of events, a transcript file, or a run id with "
                       f"store=...; got {source!r}")


def replay(source: Any, *, loop: Any, store: Store | str | Path | None = None,
           results: dict[str, Any] | None = None, then: str = "stop", effects: str = "ask") -> Replay:
    """Drive a recorded run again with ``loop`` (today's code) and report the first place it parts from it.

    ``source``: a :class:`Run`, a :class:`Transcript`, its events, a saved transcript's path, or a run id with
    ``store=``. Recorded model turns answer the requests and recorded results answer the calls (no tool runs);
    ``results`` replaces recorded results by call id (a what-if on a tool's answer). ``then="live"``: at a
    divergence, fork the recorded run (a stored one) just before it with the loop's real model, under
    ``effects`` (see ``Run.fork``); the fork is ``Replay.live``, not yet run.

    Example:
        >>> import agentnb as anb
        >>> tools = anb.stories.tools("weather")
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=tools).start("Paris?").run()
        >>> anb.replay(run, loop=anb.Loop(model=anb.ScriptedModel([]), tools=tools)).ok
        True

    Raises:
        AgentnbError: ``source`` is not a recorded run, or ``then`` is neither ``stop`` nor ``live``.
    """
    if then not in ("stop", "live"):
        raise AgentnbError(f"then={then!r}: a replay stops at a divergence ('stop') or carries on ('live')")
    recorded, recorded_store = _events(source, store)
    if not recorded or not isinstance(recorded[0], RunStarted):
        raise AgentnbError("replay needs a recorded run that starts with its RunStarted event")
    first = recorded[0]
    turns = [e.response for e in recorded if isinstance(e, TurnCompleted)]
    outcomes = {e.call_id: _outcome(e) for e in recorded if isinstance(e, ToolFinished)}
    for call_id, value in (results or {}).items():
        outcomes[call_id] = Outcome(status="ok", content=value if isinstance(value, str) else json.dumps(value),
                                    value=value)
    decisions = {e.call_id: e for e in recorded if isinstance(e, ApprovalResolved)}
    provider, name = (turns[0].provider, turns[0].model) if turns else ("recorded", "recorded")
    model = RecordedTurns(turns, provider or "recorded", name or "recorded")
    shadow = _with_model(loop, model)
    prompt = [m for m in first.messages if m.role != "system"] if getattr(loop, "system", None) else first.messages
    run = Run(shadow, list(prompt), run_id=first.run_id or None, store=MemoryStore(),
              tool_port=recorded_tools(outcomes))
    expected = [e for e in recorded if not isinstance(e, IGNORED)]
    divergence, compared = _drive(run, expected, decisions)
    live = None
    if divergence is not None and then == "live":
        if recorded_store is None:
            raise AgentnbError("then='live' forks the recorded run, so it must be a stored one: pass a Run, or a "
                               "run id with store=...")
        parent = Run.resume(first.run_id, loop=loop, store=recorded_store)
        live = parent.fork(at=max(0, divergence.seq - 1), effects=effects)
    return Replay(run, divergence, compared, live)


def _with_model(loop: Any, model: Any) -> Any:
    shadow = copy.copy(loop)  # the same loop, answered by the recording
    shadow.model = model
    return shadow


def _drive(run: Run, expected: list[BaseEvent],
           decisions: dict[str, ApprovalResolved]) -> tuple[Divergence | None, int]:
    """Step ``run``, answering pauses as recorded, comparing every event it appends with ``expected`` in order."""
    seen: list[BaseEvent] = []
    run.on_event(lambda ev, _state: seen.append(ev))  # a person's recorded answers are events too
    at = checked = 0

    def parted() -> Divergence | None:
        nonlocal at, checked
        while checked < len(seen):
            ev = seen[checked]
            checked += 1
            if isinstance(ev, IGNORED):
                continue
            if at >= len(expected):
                return Divergence(len(expected), None, ev, _difference(None, ev))
            want = expected[at]
            if signature(want) != signature(ev):
                return Divergence(want.seq, want, ev, _difference(want, ev))
            at += 1
        return None

    while True:
        try:
            ev = run.step()
        except ModelError as exc:  # the recording ran out of turns: the code asked for one more
            return parted() or Divergence(len(expected), None, None, "the code asks the model again where the "
                                                                     f"recording had no more turns ({exc})"), at
        if (d := parted()) is not None:
            return d, at
        if ev is None and run.paused and _answer(run, decisions):
            if (d := parted()) is not None:
                return d, at
            continue
        if ev is None or run.done:
            if at < len(expected):
                return Divergence(expected[at].seq, expected[at], None, _difference(expected[at], None)), at
            return None, at


def _answer(run: Run, decisions: dict[str, ApprovalResolved]) -> bool:
    """Answer a pause with the recorded decisions; False when the recording has none for a waiting call."""
    answered = False
    for call in run.pending_approvals():
        d = decisions.get(call.call_id)
        if d is None:
            return answered
        if d.decision == "approved":
            run.approve(call.call_id, by=d.by, note=d.note, arguments=d.arguments)
        elif d.decision == "denied":
            run.deny(call.call_id, d.note, by=d.by)
        else:
            run.submit_result(call.call_id, d.value if d.value is not None else d.content, by=d.by, note=d.note)
        answered = True
    return answered


__all__ = ["Divergence", "RecordedTurns", "Replay", "recorded_tools", "replay", "signature"]
