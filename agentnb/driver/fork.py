"""Time travel: a new run from the conversation as a run's log stood at one event (``Run.fork``).

Theory of operation. The conversation at event ``k`` is the fold of the log's prefix ``events[:k+1]`` (the
engine's fold, nothing else). A fork keeps it up to its last complete point -- a trailing assistant turn
(calls not all answered yet, or a final answer) is dropped so the model is asked again -- optionally with
some tool results replaced, and starts a new run of the same loop from it. A model that can be moved along
its answers (:class:`~agentnb.providers.base.Seekable`: a script, a replayed cassette) is sought to the
request the fork starts at, so the fork's first request gets the answer the original run's request at that
point got (or the next one, after replaced results).

Forking with edited *arguments* replays the turn that made those calls, with the edits (validated against
the tools' schemas), as the fork's first answer (:class:`ReplayFirst`), then hands over to the loop's model.
The original run is never touched.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..engine import RunState
from ..events import ModelRequested, ModelRetried, ResultsBound, TurnCompleted
from ..exceptions import AgentnbError
from ..messages import Message, ModelTurn, ToolCallPart, ToolResultPart
from ..providers.base import Seekable
from ..request import ModelRequest, StreamItem
from ..tools import jsonable, render_value

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..run import Run


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
        """Move the wrapped model along, when it can be (see :class:`~agentnb.providers.base.Seekable`)."""
        if isinstance(self.then, Seekable):
            self.then.seek(run_id, position)


def messages_at(run: Run, at: int) -> list[Message]:
    """The conversation as it stood after event ``at`` (the fold of the log's prefix)."""
    events = run.events
    if not events or at < 0:
        return run.messages if not events else list(events[0].messages)  # type: ignore[attr-defined]
    return RunState.fold(events[: at + 1]).messages


def _complete(history: list[Message]) -> list[Message]:
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


def _seek(run: Run, forked: Run, history: list[Message], replayed: int) -> None:
    """A seekable model goes on from the request the fork starts at (other models need nothing)."""
    model = forked.loop.model
    if not isinstance(model, Seekable):
        return
    kept = sum(m.role == "assistant" for m in history) - sum(m.role == "assistant" for m in run.prompt) + replayed
    attempts = sum(isinstance(e, ModelRequested | ModelRetried) and e.turn <= kept for e in run.events)
    model.seek(forked.run_id, attempts)


def fork(run: Run, at: int | None = None, *, results: dict[str, Any] | None = None,
         arguments: dict[str, dict[str, Any]] | None = None) -> Run:
    """A new run from ``run`` as it stood after event ``at`` (see ``Run.fork``, which documents the arguments)."""
    if arguments:
        return _fork_with_arguments(run, arguments)
    if at is None and results:
        wanted = set(results)
        bound = [e.seq for e in run.events if isinstance(e, ResultsBound) and wanted & set(e.call_ids)]
        at = max(bound) if bound else None
    if at is None:
        at = len(run.events) - 1
    history = _complete(messages_at(run, at))
    if results:
        history = replace_results(history, results)
    forked = run.loop.start(history[1:] if run.loop.system else history)
    _seek(run, forked, history, replayed=0)
    return forked


def _fork_with_arguments(run: Run, arguments: dict[str, dict[str, Any]]) -> Run:
    turn_ev = next((e for e in run.events if isinstance(e, TurnCompleted) and
                    set(arguments) & {c.call_id for c in e.response.message.tool_calls}), None)
    if turn_ev is None:
        raise AgentnbError(f"no turn made the call(s) {', '.join(sorted(arguments))}")
    response = turn_ev.response
    parts: list[Any] = []
    for p in response.message.parts:
        if isinstance(p, ToolCallPart) and p.call_id in arguments:
            tool = run.loop.registry.get(p.name)
            args = tool.dump(tool.validate(arguments[p.call_id])) if tool else dict(arguments[p.call_id])
            p = replace(p, arguments=args, arguments_raw=json.dumps(args, ensure_ascii=False))
        parts.append(p)
    original = {c.call_id: c.arguments for c in response.message.tool_calls if c.call_id in arguments}
    edited = replace(response, message=replace(response.message, parts=tuple(parts)),
                     raw={"forked_from": run.run_id, "edited_calls": sorted(arguments), "original_arguments": original})
    history = _complete(messages_at(run, turn_ev.seq - 1))
    loop = copy.copy(run.loop)  # the same loop, answering the first request with the edited turn
    loop.model = ReplayFirst(edited, run.loop.model)
    forked = loop.start(history[1:] if loop.system else history)
    _seek(run, forked, history, replayed=1)
    return forked
