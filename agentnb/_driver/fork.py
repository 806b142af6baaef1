"""Time travel: a new run from the conversation as a run's log stood at one event (``Run.fork``).

Theory of operation. The conversation at event ``k`` is the fold of the log's prefix ``events[:k+1]`` (the
engine's fold, nothing else). A fork keeps it up to its last complete point -- a trailing assistant turn
(calls not all answered yet, or a final answer) is dropped so the model is asked again -- optionally with
some tool results replaced, and starts a new run of the same loop from it. A model that can be moved along
its answers (:class:`~agentnb.providers._base.Seekable`: a script, a replayed cassette) is sought to the
request the fork starts at, so the fork's first request gets the answer the original run's request at that
point got (or the next one, after replaced results).

These are functions of the events and the fork point; ``Run.fork`` starts the run they plan.

Forking with edited *arguments* replays the turn that made those calls, with the edits (validated against
the tools' schemas), as the fork's first answer (:class:`ReplayFirst`), then hands over to the loop's model.
The original run is never touched.

A fork belongs to its parent's operation and store; its lineage and effect policy (:func:`lineage`) go into
its ``RunStarted``, so the engine answers its writes by that policy (:mod:`agentnb._engine.effects`) and a fork
resumed in another process keeps it. A fork that reuses reads finds its parent's results here
(:class:`ParentReads`).

Example:
    >>> import agentnb as anb
    >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
    >>> run = loop.start("What's the weather in Paris?").run()
    >>> call = next(e.call_id for e in run.events if e.type == "ToolFinished")
    >>> other = run.fork(results={call: {"city": "Paris", "temp_c": -5, "sky": "snow"}}).run()
    >>> other.state.value, run.events[-1].type
    ('COMPLETED', 'RunFinished')
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .._engine import CallState, RunState
from .._engine.calls import arguments_digest, fork_of
from .._messages import Message, ModelTurn, ToolCallPart, ToolResultPart
from .._request import ModelRequest, StreamItem
from ..events import (
    ApprovalResolved,
    BaseEvent,
    CallValidated,
    ModelRequested,
    ModelRetried,
    ResultsBound,
    RunStarted,
    ToolFinished,
    TurnCompleted,
)
from ..exceptions import AgentnbError, ResumeError, RunNotFound
from ..providers._base import Seekable
from ..tools import jsonable, render_value
from . import request_edit

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator

    from ..store import Store
    from .loopspec import LoopSpec

EFFECTS = ("ask", "simulate", "run")
"""What a fork does with a write its parent never made: ask a person, run the tool's simulator, or run it."""
READS = ("rerun", "reuse")
"""What a fork does with a read: run it again, or answer it from the parent's result of the same read."""


def lineage(parent: str, effects: str, reads: str, rerun: Collection[str]) -> dict[str, Any]:
    """A fork's lineage and effect policy, as stored in its ``RunStarted.settings["fork"]`` (``at`` added later).

    Raises:
        AgentnbError: an effect or read policy that does not exist, or ``rerun`` that is not tool names.
    """
    if effects not in EFFECTS:
        raise AgentnbError(f"effects={effects!r}: a fork's effect policy is one of {', '.join(EFFECTS)}")
    if reads not in READS:
        raise AgentnbError(f"reads={reads!r}: a fork's read policy is one of {', '.join(READS)}")
    if isinstance(rerun, str) or not all(isinstance(t, str) and t for t in rerun):
        raise AgentnbError(f"rerun={rerun!r}: give a list of tool names whose effects the fork does again")
    return {"parent": parent, "effects": effects, "reads": reads, "rerun": sorted(set(rerun))}


def read_key(name: str, arguments: dict[str, Any] | None) -> tuple[str, str]:
    """What makes two reads the same read: the tool and its canonical arguments."""
    return name, arguments_digest(name, arguments)


def parent_reads(events: list[BaseEvent]) -> dict[tuple[str, str], ToolFinished]:
    """A run's results by :func:`read_key` (the first of each; the arguments a call ran with, edits included)."""
    args: dict[str, dict[str, Any]] = {}
    out: dict[tuple[str, str], ToolFinished] = {}
    for e in events:
        if isinstance(e, CallValidated):
            args[e.call_id] = e.arguments
        elif isinstance(e, ApprovalResolved) and e.arguments is not None:
            args[e.call_id] = e.arguments
        elif isinstance(e, ToolFinished) and e.call_id in args:
            out.setdefault(read_key(e.name, args[e.call_id]), e)
    return out


class ParentReads:
    """A fork's parent's reads, from the parent's events (a fork made here) or its store (a fork resumed)."""

    def __init__(self, store: Store, parent: str, events: list[BaseEvent] | None) -> None:
        self.store, self.parent = store, parent
        self._index = parent_reads(events) if events is not None else None

    def get(self, rs: RunState, c: CallState) -> ToolFinished | None:
        """The parent's result of the same read as ``c`` (None: it made none, or cannot be read)."""
        if self._index is None:
            parent = self.parent or str((fork_of(rs) or {}).get("parent", ""))
            try:
                self._index = parent_reads(self.store.load(parent))
            except Exception:  # the parent is not in this store: its reads cannot be reused, so they run again
                self._index = {}
        return self._index.get(read_key(c.name, c.arguments))


class ReplayFirst:
    """A model that answers a fork's first request with a given (edited) turn, then hands over to ``then``."""

    def __init__(self, first: ModelTurn, then: Any) -> None:
        self.first = first
        self.then = then
        self.provider = getattr(then, "provider", "?")
        self.name = getattr(then, "name", "?")
        self._served: set[str] = set()

    def respond(self, request: ModelRequest) -> Iterator[StreamItem]:
        """The edited turn for a run's first request; the wrapped model's answers after it."""
        if request.run_id not in self._served:
            self._served.add(request.run_id)
            return iter((self.first,))
        answer: Iterator[StreamItem] = self.then.respond(request)
        return answer

    def seek(self, run_id: str, position: int) -> None:
        """Move the wrapped model along, when it can be (see :class:`~agentnb.providers._base.Seekable`)."""
        if isinstance(self.then, Seekable):
            self.then.seek(run_id, position)


def messages_at(events: list[BaseEvent], at: int, initial: list[Message]) -> list[Message]:
    """The conversation as it stood after event ``at`` (the fold of the log's prefix; ``initial`` before any)."""
    if not events:
        return list(initial)
    if at < 0:
        first = events[0]
        return list(first.messages) if isinstance(first, RunStarted) else []
    return RunState.fold(events[: at + 1]).messages


def complete_point(history: list[Message]) -> list[Message]:
    """Where a fork cuts: the last complete point (a trailing assistant turn is dropped; the model is asked again)."""
    while history and history[-1].role == "assistant":
        history = history[:-1]
    return history


def replace_results(history: list[Message], results: dict[str, Any]) -> list[Message]:
    """``history`` with the results of the calls in ``results`` replaced (status ``ok``, the value rendered).

    Raises:
        AgentnbError: a call in ``results`` has no result in ``history``.
    """
    out: list[Message] = []
    found: set[str] = set()
    for m in history:
        if m.role == "tool":
            parts: list[Any] = []
            for p in m.parts:
                if isinstance(p, ToolResultPart) and p.call_id in results:
                    value = results[p.call_id]
                    parts.append(replace(p, status="ok", content=render_value(value), audit=jsonable(value)))
                    found.add(p.call_id)
                else:
                    parts.append(p)
            m = replace(m, parts=tuple(parts))
        out.append(m)
    missing = set(results) - found
    if missing:
        raise AgentnbError(f"no result for call(s) {', '.join(sorted(missing))} before the fork point")
    return out


def seek_position(events: list[BaseEvent], prompt: list[Message], history: list[Message], replayed: int) -> int:
    """The request a fork starts at, counted as a seekable model counts its answers (retries included)."""
    kept = sum(m.role == "assistant" for m in history) - sum(m.role == "assistant" for m in prompt) + replayed
    return sum(isinstance(e, ModelRequested | ModelRetried) and e.turn <= kept for e in events)


@dataclass(frozen=True)
class ForkPlan:
    """How a fork starts: the loop, the history, the request a seekable model seeks to, and the lineage.

    The lineage is :func:`lineage`'s, with the event the fork cuts after (``at``) and what it replaced.
    """

    loop: LoopSpec
    history: list[Message]
    seek: int
    lineage: dict[str, Any]


def plan_fork(events: list[BaseEvent], initial: list[Message], prompt: list[Message], loop: LoopSpec,
              at: int | None = None, *, results: dict[str, Any] | None = None,
              arguments: dict[str, dict[str, Any]] | None = None, lineage: dict[str, Any] | None = None,
              request: dict[str, Any] | None = None) -> ForkPlan:
    """How a fork of the run with ``events`` starts (see ``Run.fork``, which documents the arguments)."""
    lineage = dict(lineage or {})
    if request is not None:
        if results or arguments:
            raise AgentnbError("request= replays one turn with an edited request: fork with results= or arguments= "
                               "on their own")
        return _plan_with_request(events, initial, prompt, loop, at, request, lineage)
    if arguments:
        return _plan_with_arguments(events, initial, prompt, loop, arguments, lineage)
    if at is None and results:
        wanted = set(results)
        bound = [e.seq for e in events if isinstance(e, ResultsBound) and wanted & set(e.call_ids)]
        at = max(bound) if bound else None
    if at is None:
        at = len(events) - 1
    history = complete_point(messages_at(events, at, initial))
    if results:
        history = replace_results(history, results)
    lineage.update(at=at, results=sorted(results or ()))
    return ForkPlan(loop, history[1:] if loop.system else history, seek_position(events, prompt, history, 0), lineage)


def _plan_with_arguments(events: list[BaseEvent], initial: list[Message], prompt: list[Message], loop: LoopSpec,
                         arguments: dict[str, dict[str, Any]], lineage: dict[str, Any]) -> ForkPlan:
    turn_ev, edited, args = _edited_turn(events, loop, arguments)
    history = complete_point(messages_at(events, turn_ev.seq - 1, initial))
    replay = copy.copy(loop)  # the same loop, answering the first request with the edited turn
    replay.model = ReplayFirst(edited, loop.model)
    # the edits are kept in the lineage: a fork stopped before its edited turn was stored answers with it again
    lineage.update(at=turn_ev.seq - 1, arguments=sorted(arguments), edited_arguments=args)
    return ForkPlan(replay, history[1:] if loop.system else history, seek_position(events, prompt, history, 1),
                    lineage)

def _plan_with_request(events: list[BaseEvent], initial: list[Message], prompt: list[Message], loop: LoopSpec,
                       at: int | None, request: dict[str, Any], lineage: dict[str, Any]) -> ForkPlan:
    req = request_edit.request_at(events, at)
    history = complete_point(messages_at(events, req.seq, initial))
    edit = request_edit.check(request, history, loop)
    system, body = request_edit.edited_history(history, edit)
    choice = req.tool_choice if req.tool_choice is not None else req.settings.get("tool_choice")
    lineage.update(at=req.seq - 1, request=jsonable(edit), request_diff=request_edit.diff(history, edit, req.tools,
                                                                                          choice))
    return ForkPlan(request_edit.edited_loop(loop, edit, system), body, seek_position(events, prompt, history, 0),
                    lineage)


def _edited_turn(events: list[BaseEvent], loop: LoopSpec, arguments: dict[str, dict[str, Any]]
                 ) -> tuple[TurnCompleted, ModelTurn, dict[str, dict[str, Any]]]:
    """The parent's turn that made the calls, with their arguments edited (validated when the tool is known)."""
    turn_ev = next((e for e in events if isinstance(e, TurnCompleted) and
                    set(arguments) & {c.call_id for c in e.response.message.tool_calls}), None)
    if turn_ev is None:
        raise AgentnbError(f"no turn made the call(s) {', '.join(sorted(arguments))}")
    response = turn_ev.response
    parts: list[Any] = []
    done: dict[str, dict[str, Any]] = {}
    for p in response.message.parts:
        if isinstance(p, ToolCallPart) and p.call_id in arguments:
            tool = loop.registry.get(p.name)
            args = tool.dump(tool.validate(arguments[p.call_id])) if tool else dict(arguments[p.call_id])
            p = replace(p, arguments=args, arguments_raw=json.dumps(args, ensure_ascii=False))
            done[p.call_id] = args
        parts.append(p)
    original = {c.call_id: c.arguments for c in response.message.tool_calls if c.call_id in arguments}
    edited = replace(response, message=replace(response.message, parts=tuple(parts)),
                     raw={"forked_from": turn_ev.run_id, "edited_calls": sorted(arguments),
                          "original_arguments": original})
    return turn_ev, edited, done


def resumed_loop(store: Store, loop: LoopSpec, first: RunStarted, events: list[BaseEvent]) -> LoopSpec:
    """The loop a stored fork goes on with (a fork of edited arguments keeps its edits in its lineage).

    One that stopped before its edited turn was stored answers its first request with that turn again, rebuilt
    from its parent: a crash between the fork's start and that turn loses no edit.

    Raises:
        ResumeError: such a fork whose parent is not in ``store`` (the edited turn cannot be rebuilt).
    """
    fork = first.settings.get("fork") or {}
    if isinstance(fork.get("request"), dict):  # a replayed turn's edited request: its loop is edited again
        edit = fork["request"]
        said = first.messages[0].text if first.messages and first.messages[0].role == "system" else None
        return request_edit.edited_loop(loop, edit, edit["system"] if "system" in edit else said)
    edits = fork.get("edited_arguments")
    if not edits or any(isinstance(e, TurnCompleted) for e in events):
        return loop
    try:
        parent = store.load(str(fork.get("parent")))
    except RunNotFound:
        raise ResumeError(f"run {first.run_id!r} is a fork with edited arguments that stopped before its edited turn "
                          f"was stored, and its parent {fork.get('parent')!r} is not in this store to rebuild it "
                          "from") from None
    replay = copy.copy(loop)
    replay.model = ReplayFirst(_edited_turn(parent, loop, edits)[1], loop.model)
    return replay

