"""Row builders: one pass over the events a frame reads lines up the objects each row's columns read.

A row builder returns :class:`Rows`: the run of each row and a dict of aligned lists (*fields*). A field holds
the events of the row (``ToolFinished``: the call's ToolFinished event, or None), parts of the conversation
(``call``, ``part``), or values computed here because they need more than one event (``status``). The column
declarations in :mod:`._columns` read these lists; nothing here knows about columns or dtypes.

Every builder reads one :class:`Log` of the runs: their events flat, with a small integer per event class. A
builder finds the events it joins by class with numpy (:meth:`Log.where`) and walks only those, once, across
all runs: a frame costs what its rows cost, not a Python step per event of every run, and the frames written
together share one log (``build(..., log=)``). Rows that hang off a request (a turn's fragments, retries, its
answer) are matched to it with a sorted search over positions, not by walking the run.

Calls are keyed by ``(turn, call_id)`` inside a run: an id is unique within a turn (the driver makes it so),
and every event about a call carries the turn of the answer that asked for it.

The row builders join and count; they never interpret. What an event means -- the result it gives a call,
how it changes the conversation -- is the engine's (:mod:`agentnb._engine.projection`, the same answers the
fold applies), so a frame cannot disagree with the run (``tests/test_projection.py`` checks it on every
prefix of random runs). Events are grouped and dispatched by class, not by their ``type`` string.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from .._engine import ANSWERS, CONVERSATION_STEPS, Answer, ConversationStep, answer_of, result_from
from .._messages import Message, ToolCallPart, ToolResultPart
from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    ArgumentsMerged,
    BaseEvent,
    CallParsed,
    CallRejected,
    CallValidated,
    CompressionApplied,
    GuardTripped,
    Interjected,
    ModelRequested,
    ModelRetried,
    OutputValidated,
    ResultsBound,
    RunFinished,
    RunStarted,
    TextMerged,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
)

Run = Sequence[BaseEvent]


@dataclass(slots=True)
class Rows:
    """Aligned lists for the rows of one frame over many runs."""

    run_index: Any
    """The run of each row (a list or a numpy array of positions in the runs given)."""
    fields: dict[str, list[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.run_index)


class _Codes(dict[type, int]):
    """A small integer per event class, given out on first sight."""

    def __missing__(self, cls: type) -> int:
        code = self[cls] = len(self)
        return code


class Log:
    """The events of many runs, flat, with the class of each as a small integer: what every row builder reads.

    Built once for all the frames made from the same runs (``save_parquet`` writes seven); :meth:`where` finds
    the events of some classes with one numpy comparison over the codes, not a Python loop over the events.

    Example:
        >>> import agentnb as anb
        >>> from agentnb.events import ToolFinished
        >>> run = anb.Loop(model=anb.ScriptedModel.story("parallel"), tools=anb.stories.tools("parallel"))
        >>> log = Log([run.start("Weather?").run().events])
        >>> [log.flat[i].call_id for i in log.where(ToolFinished)]
        ['call_1_1', 'call_1_2', 'call_1_3']
    """

    def __init__(self, runs: Sequence[Run]) -> None:
        self.runs = runs
        self.flat: list[Any] = list(chain.from_iterable(runs))
        lengths = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
        self.run_of = np.repeat(np.arange(len(runs), dtype=np.int64), lengths)
        """The run of each event (its position in ``runs``)."""
        self.first = np.zeros(len(runs), dtype=np.int64)
        """The flat position of each run's first event."""
        np.cumsum(lengths[:-1], out=self.first[1:])
        code = _Codes()
        # a dict lookup per event in C (map), ten times faster than factorizing the class objects
        self.codes = np.fromiter(map(code.__getitem__, map(type, self.flat)), dtype=np.int64, count=len(self.flat))
        self.classes: list[type] = list(code)

    def __len__(self) -> int:
        return len(self.flat)

    def where(self, *classes: type, subclasses: bool = False) -> Any:
        """The flat positions, in log order, of the events of ``classes`` (and of their subclasses if asked)."""
        wanted = [k for k, c in enumerate(self.classes) if (issubclass(c, classes) if subclasses else c in classes)]
        if not wanted:
            return np.empty(0, dtype=np.int64)
        if len(wanted) == 1:
            return np.flatnonzero(self.codes == wanted[0])
        return np.flatnonzero(np.isin(self.codes, wanted))

    def take(self, positions: Any) -> list[Any]:
        """The events at these flat positions."""
        flat = self.flat
        return [flat[i] for i in positions.tolist()]

    def runs_at(self, positions: Any) -> list[int]:
        """The run of the events at these flat positions."""
        return self.run_of[positions].tolist()  # type: ignore[no-any-return]


def events_rows(log: Log) -> Rows:
    """One row per event."""
    return Rows(log.run_of, {"event": log.flat})


def _attached(log: Log, anchors: Any, positions: Any, *, to_next: bool = False) -> tuple[Any, Any]:
    """The anchor each event at ``positions`` goes with: the run's last anchor before it (``to_next``: its next).

    ``anchors`` and ``positions`` are flat positions in log order. Returns the index into ``anchors`` of each
    event that has such an anchor in its own run, and the positions of those events (the others are dropped).
    """
    if to_next:
        rows = np.searchsorted(anchors, positions, side="left")
        ok = rows < len(anchors)
    else:
        rows = np.searchsorted(anchors, positions, side="right") - 1
        ok = rows >= 0
    rows, positions = rows[ok], positions[ok]
    same = log.run_of[anchors[rows]] == log.run_of[positions]
    return rows[same], positions[same]


def _last(log: Log, n: int, rows: Any, positions: Any) -> list[Any]:
    """For each of ``n`` rows, the event at the last of the positions attached to it (None: none is)."""
    out: list[Any] = [None] * n
    flat = log.flat
    for r, p in zip(rows.tolist(), positions.tolist(), strict=True):
        out[r] = flat[p]  # positions ascend: the last one stays
    return out


def turns_rows(log: Log) -> Rows:
    """One row per model request (a turn), with its answer, retries and the run's end if it ended there.

    An event belongs to the run's last request before it; what a person said (``Interjected``) goes with the
    next request of the run.
    """
    req = log.where(ModelRequested)
    n = len(req)

    def attached(*classes: type, subclasses: bool = False, to_next: bool = False) -> tuple[Any, Any]:
        return _attached(log, req, log.where(*classes, subclasses=subclasses), to_next=to_next)

    fragments = np.bincount(attached(TextMerged, ArgumentsMerged)[0], minlength=n)
    retries = np.bincount(attached(ModelRetried)[0], minlength=n)
    outcome: list[str | None] = [None] * n
    rows, at = attached(RunFinished, subclasses=True)
    for r, ev in zip(rows.tolist(), log.take(at), strict=True):
        outcome[r] = ev.reason  # the last one stays
    said: dict[int, list[str]] = {}
    rows, at = attached(Interjected, subclasses=True, to_next=True)
    for r, ev in zip(rows.tolist(), log.take(at), strict=True):
        said.setdefault(r, []).append(ev.text)
    interjected: list[str | None] = [None] * n
    for r, texts in said.items():
        interjected[r] = "\n".join(texts)
    return Rows(log.run_of[req], {
        "ModelRequested": log.take(req), "TurnCompleted": _last(log, n, *attached(TurnCompleted)),
        "retries": retries.tolist(), "fragments": fragments.tolist(), "outcome": outcome,
        "OutputValidated": _last(log, n, *attached(OutputValidated)), "interjected": interjected,
    })


_CALL_EVENTS = (CallParsed, CallValidated, CallRejected, ApprovalRequested, ApprovalResolved, ToolStarted,
                ToolFinished)
"""The events about one call, joined to its row by ``(run, turn, call_id)``."""

_ANSWERING: tuple[type[BaseEvent], ...] = tuple(ANSWERS)
"""The event classes that may answer a call (the engine says which: :func:`~agentnb._engine.answer_of`)."""


def _history_results(messages: Sequence[Message]) -> dict[str, ToolResultPart]:
    return {p.call_id: p for m in messages for p in m.parts if isinstance(p, ToolResultPart)}


_TURN = attrgetter("turn")
_CALL_ID = attrgetter("call_id")


def _prompt_calls(log: Log) -> tuple[list[int], list[RunStarted], list[ToolCallPart], list[int],
                                     list[ToolResultPart | None]]:
    """The calls in each run's prompt (its history), with the result the history holds for each."""
    run_index: list[int] = []
    anchor: list[RunStarted] = []
    calls: list[ToolCallPart] = []
    position: list[int] = []
    history: list[ToolResultPart | None] = []
    starts = log.where(RunStarted, subclasses=True)
    starts = starts[starts == log.first[log.run_of[starts]]]  # a run's prompt is its first event
    for r, ev in zip(log.runs_at(starts), log.take(starts), strict=True):
        results: dict[str, ToolResultPart] | None = None
        for m in ev.messages:
            for k, p in enumerate(m.tool_calls):
                if results is None:
                    results = _history_results(ev.messages)
                run_index.append(r)
                anchor.append(ev)
                calls.append(p)
                position.append(k)
                history.append(results.get(p.call_id))
    return run_index, anchor, calls, position, history


def calls_rows(log: Log) -> Rows:
    """One row per tool call: asked for by the model in this run, or present in the prompt's history.

    The events about calls are found by class with numpy and joined to their call through dicts keyed by
    ``(run and turn, call_id)`` built and read with C-level ``zip``/``map``: no Python loop over every event.
    A call's status and result are the engine's (:func:`~agentnb._engine.answer_of`): what the fold binds.
    """
    run_index, anchor, calls, position, history = _prompt_calls(log)
    n_history = len(calls)
    answers = log.where(TurnCompleted)
    for ev, r in zip(log.take(answers), log.runs_at(answers), strict=True):
        k = 0
        for p in ev.response.message.parts:
            if p.kind == "tool_call":
                run_index.append(r)
                anchor.append(ev)
                calls.append(p)
                position.append(k)
                k += 1
    n_model = len(calls) - n_history
    origin = ["history"] * n_history + ["model"] * n_model
    history.extend([None] * n_model)
    # a call is ``(run, turn, call_id)``: the run and turn in one integer, so a key is one flat tuple
    keys = list(zip(_run_turn(run_index, anchor), map(_CALL_ID, calls), strict=True))
    fields: dict[str, list[Any]] = {"anchor": anchor, "call": calls, "origin": origin, "position": position}
    # the tool as the run offered it (RunStarted.tools): where the call's server is recorded
    offered: dict[int, dict[str, Any]] = {}
    for r in dict.fromkeys(run_index):
        events = log.runs[r]
        offered[r] = {t.name: t for t in events[0].tools} if events and isinstance(events[0], RunStarted) else {}
    fields["tool_info"] = [offered[r].get(c.name) for r, c in zip(run_index, calls, strict=True)]
    for t in _CALL_EVENTS:
        at = log.where(t)
        evs = log.take(at)
        index = dict(zip(zip(_run_turn(log.run_of[at], evs), map(_CALL_ID, evs), strict=True), evs, strict=True))
        fields[t.__name__] = list(map(index.get, keys))
    bound: dict[tuple[int, str], Any] = {}
    at = log.where(ResultsBound)
    evs = log.take(at)
    for ev, rt in zip(evs, _run_turn(log.run_of[at], evs), strict=True):
        for cid in ev.call_ids:
            bound[(rt, cid)] = ev
    fields["ResultsBound"] = list(map(bound.get, keys))
    fields.update(_call_outcomes(fields, history))
    return Rows(run_index, fields)


def _run_turn(runs: Any, events: Sequence[Any]) -> list[int]:
    """``run * 2**32 + turn`` for each event (``runs``: the run of each)."""
    turns = np.fromiter(map(_TURN, events), dtype=np.int64, count=len(events))
    out: list[int] = (np.asarray(runs, dtype=np.int64) * (1 << 32) + turns).tolist()
    return out


def _call_outcomes(fields: dict[str, list[Any]], history: list[ToolResultPart | None]) -> dict[str, list[Any]]:
    """Status, result, arguments and error of each call row, from its events as the engine reads them."""
    answer: list[Answer | None] = [None] * len(history)
    for t in reversed(_ANSWERING):  # the first class that answers wins: it is written last
        for k, ev in enumerate(fields[t.__name__]):
            if ev is not None:
                found = answer_of(ev)
                if found is not None:
                    answer[k] = found
    resolved, validated, rejected = fields["ApprovalResolved"], fields["CallValidated"], fields["CallRejected"]
    finished = fields["ToolFinished"]
    return {
        "status": [a.status if a is not None else h.status if h is not None else "unanswered"
                   for a, h in zip(answer, history, strict=True)],
        "result_content": [a.content if a is not None else h.content if h is not None else None
                           for a, h in zip(answer, history, strict=True)],
        "arguments": [res.arguments if res is not None and res.arguments is not None
                      else val.arguments if val is not None else c.arguments
                      for c, val, res in zip(fields["call"], validated, resolved, strict=True)],
        "error_type": [f.error_type if f is not None else r.reason if r is not None else None
                       for f, r in zip(finished, rejected, strict=True)],
        "error_message": [f.error_message if f is not None else r.message if r is not None else None
                          for f, r in zip(finished, rejected, strict=True)],
    }


def _walk(log: Log) -> tuple[list[int], list[BaseEvent], list[ConversationStep]]:
    """Every conversation step of the log's runs, in log order: the run, the event and the step of each.

    One loop over the events that answer a call or change the conversation (found by class), dispatched by their
    class code. Results are bound the way the fold binds them: the answer of a call
    (:func:`~agentnb._engine.result_of`) is kept by ``(turn, call_id)`` until the ``ResultsBound`` that sends it
    back, within its run.
    """
    at = log.where(*_ROLES)
    roles = [_ROLES.get(c, (None, None)) for c in log.classes]
    out_runs: list[int] = []
    out_events: list[BaseEvent] = []
    out_steps: list[ConversationStep] = []
    calls: dict[tuple[int, str], ToolCallPart] = {}
    answers: dict[tuple[int, str], Answer] = {}
    turn = 0

    def result_for(cid: str) -> ToolResultPart | None:  # asked by the step of the event at hand: its turn, its run
        answer, call = answers.get((turn, cid)), calls.get((turn, cid))
        return result_from(answer, call) if answer is not None and call is not None else None

    current = -1
    for r, ev, code in zip(log.runs_at(at), log.take(at), log.codes[at].tolist(), strict=True):
        if r != current:
            current, calls, answers = r, {}, {}
        answer_fn, step_fn = roles[code]
        turn = ev.turn
        if answer_fn is not None:
            answer = answer_fn(ev)
            if answer is not None:
                answers[(turn, answer.call_id)] = answer
        if step_fn is None:
            continue
        step = step_fn(ev, result_for)
        if step is None:
            continue
        for m in step.messages:
            if m.role == "assistant":  # only an answer asks for calls
                for c in m.tool_calls:
                    calls[(turn, c.call_id)] = c
        out_runs.append(r)
        out_events.append(ev)
        out_steps.append(step)
    return out_runs, out_events, out_steps


def conversation_steps(events: Run) -> Iterator[tuple[BaseEvent, ConversationStep]]:
    """Each event of one run that changed its conversation, with the change (the engine's, as the fold applies it).

    Results are bound the way the fold binds them: the answer of a call (:func:`~agentnb._engine.result_of`) is
    kept by ``(turn, call_id)`` until the ``ResultsBound`` that sends it back.
    """
    _, changed, steps = _walk(Log([events]))
    return zip(changed, steps, strict=True)


_Role = tuple[Callable[[Any], Answer | None] | None, Callable[..., ConversationStep | None] | None]
_ROLES: dict[type[BaseEvent], _Role] = {
    cls: (ANSWERS.get(cls), CONVERSATION_STEPS.get(cls)) for cls in {*ANSWERS, *CONVERSATION_STEPS}
}
"""For the event classes that answer a call or change the conversation: the engine's two functions."""

_PARTS = attrgetter("parts")


def _spread(values: list[Any], index: Any) -> list[Any]:
    """``[values[i] for i in index]`` for an integer array ``index``, as one numpy take (a C loop)."""
    arr = np.fromiter(values, dtype=object, count=len(values))
    out: list[Any] = arr[index].tolist()
    return out


def messages_rows(log: Log) -> Rows:
    """One row per part of every message that joined a run's conversation, in order.

    One walk over the events that change a conversation (all runs, in log order) gives the steps; their
    messages, and the rows of the messages' parts, are spread from them with numpy.
    """
    step_runs, changed, steps = _walk(log)
    step_run = np.asarray(step_runs, dtype=np.int64)
    per_step = np.fromiter(map(len, map(_MESSAGES, steps)), dtype=np.int64, count=len(steps))
    message: list[Message] = list(chain.from_iterable(map(_MESSAGES, steps)))
    first = np.cumsum(per_step) - per_step  # each step's first message
    # a conversation starts over at a run's first step and at a step that replaces it (the prompt, a compression)
    starts = np.fromiter(map(_REPLACES, steps), dtype=np.bool_, count=len(steps))
    starts[1:] |= step_run[1:] != step_run[:-1]
    if len(starts):
        starts[0] = True
    began = np.maximum.accumulate(np.where(starts, first, 0)) if len(steps) else first
    final_from = np.zeros(len(log.runs), dtype=np.int64)  # each run's first message of its final conversation
    np.maximum.at(final_from, step_run[starts], first[starts])
    msg_step = np.repeat(np.arange(len(steps), dtype=np.int64), per_step)
    msg_run = step_run[msg_step]
    position = np.arange(len(message), dtype=np.int64)
    nparts = np.fromiter(map(len, map(_PARTS, message)), dtype=np.int64, count=len(message))
    part: list[Any] = list(chain.from_iterable(map(_PARTS, message)))
    part_index = np.arange(len(part), dtype=np.int64) - (np.cumsum(nparts) - nparts).repeat(nparts)
    part_message = np.repeat(np.arange(len(message), dtype=np.int64), nparts)
    part_step = msg_step[part_message]
    return Rows(msg_run[part_message], {
        "anchor": _spread(changed, part_step), "message": _spread(message, part_message),
        "part": part, "origin": _spread(list(map(_ORIGIN, steps)), part_step),
        "message_index": (position - began[msg_step]).repeat(nparts).tolist(), "part_index": part_index.tolist(),
        "in_final": (position >= final_from[msg_run]).repeat(nparts).tolist(), "chars": list(map(_chars, part)),
    })


_MESSAGES, _ORIGIN, _REPLACES = attrgetter("messages"), attrgetter("origin"), attrgetter("replaces")


def _chars(p: Any) -> int:
    kind = p.kind
    if kind == "tool_call":
        return len(p.arguments_raw)
    if kind == "tool_result":
        return len(p.content)
    return len(p.text or "")


def approvals_rows(log: Log) -> Rows:
    """One row per approval request, with its resolution when there is one, and one per call a person cancelled.

    A cancellation (``run.cancel_call``: a ``CallRejected`` of reason ``cancelled``) resolves the request of the
    call when it was waiting, and is a row of its own when the call was not (queued or running): the audit trail
    holds every decision a person took on a call, with who and when.
    """
    run_index: list[int] = []
    anchor: list[Any] = []
    requested: list[Any] = []
    resolved: list[Any] = []
    cancelled: list[Any] = []
    by_id: dict[str, int] = {}
    waiting: dict[str, int] = {}  # call id -> the row of its latest request nobody resolved yet
    current = -1
    at = log.where(ApprovalRequested, ApprovalResolved, CallRejected, subclasses=True)
    for r, ev in zip(log.runs_at(at), log.take(at), strict=True):
        if r != current:
            current, by_id, waiting = r, {}, {}
        if isinstance(ev, ApprovalRequested):
            by_id[ev.approval_id] = waiting[ev.call_id] = len(anchor)
            run_index.append(r)
            anchor.append(ev)
            requested.append(ev)
            resolved.append(None)
            cancelled.append(None)
        elif isinstance(ev, ApprovalResolved):
            row = by_id.get(ev.approval_id)
            if row is not None:
                resolved[row] = ev
                waiting.pop(ev.call_id, None)
        elif isinstance(ev, CallRejected) and ev.reason == "cancelled":
            row = waiting.pop(ev.call_id, None)
            if row is not None:
                cancelled[row] = ev
                continue
            run_index.append(r)
            anchor.append(ev)
            requested.append(None)
            resolved.append(None)
            cancelled.append(ev)
    run_tags: dict[int, Any] = {}
    for r in dict.fromkeys(run_index):
        events = log.runs[r]
        first = events[0] if events else None
        run_tags[r] = (first.settings.get("tags") or None) if isinstance(first, RunStarted) else None
    decided = [b if b is not None else c for b, c in zip(resolved, cancelled, strict=True)]
    return Rows(run_index, {
        "anchor": anchor, "ApprovalRequested": requested, "ApprovalResolved": resolved, "CallRejected": cancelled,
        "decision": [b.decision if b is not None else "cancelled" if c is not None else None
                     for b, c in zip(resolved, cancelled, strict=True)],
        "decided": decided,
        "decision_note": [b.note if b is not None else c.message if c is not None else None
                          for b, c in zip(resolved, cancelled, strict=True)],
        "wait_s": [(d.ts - a.ts).total_seconds() if a is not None and d is not None else None
                   for a, d in zip(requested, decided, strict=True)],
        "edited": [b.arguments is not None if b is not None else None for b in resolved],
        "run_tags": [run_tags[r] for r in run_index],
    })


def guards_rows(log: Log) -> Rows:
    """One row per guard trip."""
    at = log.where(GuardTripped)
    return Rows(log.run_of[at], {"GuardTripped": log.take(at)})


def compressions_rows(log: Log) -> Rows:
    """One row per compression, with the length of the conversation it replaced.

    Only runs that hold a compression are walked (:func:`conversation_steps`, the conversation as the fold
    builds it); the others are passed over (the log finds the compressions by class).
    """
    run_index: list[int] = []
    applied: list[Any] = []
    before: list[int] = []
    for r in dict.fromkeys(log.runs_at(log.where(CompressionApplied))):
        count = 0
        for ev, step in conversation_steps(log.runs[r]):
            if isinstance(ev, CompressionApplied):
                run_index.append(r)
                applied.append(ev)
                before.append(count)
            count = len(step.messages) if step.replaces else count + len(step.messages)
    saved = [a.tokens_before - a.tokens_after for a in applied]
    return Rows(run_index, {"CompressionApplied": applied, "messages_before": before, "tokens_saved": saved})


ROW_BUILDERS: dict[str, Callable[[Log], Rows]] = {
    "events": events_rows,
    "turns": turns_rows,
    "calls": calls_rows,
    "messages": messages_rows,
    "approvals": approvals_rows,
    "guards": guards_rows,
    "compressions": compressions_rows,
}
"""The row builder of each frame."""
