"""The frames' builders as first written (the test oracle): one Python walk over every event of every run for
the rows, and one plain conversion per column (``pd.array``, ``np.array``).

``agentnb.frames`` builds the same frames from a class index of all runs at once (numpy positions, sorted
searches) and reads shared attribute paths once: ``tests/test_frames_reference.py`` checks, on varied runs,
that every frame equals the one built here, column for column. Kept as they were; not used by agentnb itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from agentnb._engine import ANSWERS, CONVERSATION_STEPS, Answer, ConversationStep, answer_of, result_from
from agentnb._messages import Message, ToolCallPart, ToolResultPart
from agentnb.events import (
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
from agentnb.frames._columns import DATETIME, Column

Run = Sequence[BaseEvent]


@dataclass(slots=True)
class Rows:
    """Aligned lists for the rows of one frame over many runs."""

    run_index: Any
    """The run of each row (a list or a numpy array of positions in the runs given)."""
    fields: dict[str, list[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.run_index)


def events_rows(runs: Sequence[Run]) -> Rows:
    """One row per event."""
    lengths = [len(r) for r in runs]
    flat: list[Any] = []
    for r in runs:
        flat.extend(r)
    return Rows(np.repeat(np.arange(len(runs), dtype=np.int64), lengths), {"event": flat})


def _anchored(runs: Sequence[Run], anchor: type[BaseEvent], joined: dict[type[BaseEvent], str]) -> Rows:
    """One row per ``anchor`` event; ``joined`` maps an event class to the attribute matching the anchor's."""
    run_index: list[int] = []
    anchors: list[Any] = []
    found: dict[type[BaseEvent], dict[tuple[int, Any], BaseEvent]] = {t: {} for t in joined}
    key_attr = next(iter(joined.values()), "")
    for r, events in enumerate(runs):
        for ev in events:
            t = type(ev)
            if t is anchor:
                run_index.append(r)
                anchors.append(ev)
            elif t in found:
                found[t][(r, getattr(ev, joined[t]))] = ev
    fields: dict[str, list[Any]] = {anchor.__name__: anchors}
    for t, index in found.items():
        fields[t.__name__] = [index.get((r, getattr(a, key_attr))) for r, a in zip(run_index, anchors, strict=True)]
    return Rows(run_index, fields)


def turns_rows(runs: Sequence[Run]) -> Rows:
    """One row per model request (a turn), with its answer, retries and the run's end if it ended there."""
    run_index: list[int] = []
    requested: list[Any] = []
    completed: list[Any] = []
    retries: list[int] = []
    fragments: list[int] = []
    outcome: list[str | None] = []
    output: list[Any] = []
    interjected: list[str | None] = []
    for r, events in enumerate(runs):
        open_row = -1
        said: list[str] = []  # what a person told the model since the last request: it goes with the next one
        for ev in events:
            t = type(ev)
            if isinstance(ev, Interjected):
                said.append(ev.text)
            elif t is ModelRequested:
                interjected.append("\n".join(said) if said else None)
                said = []
                run_index.append(r)
                requested.append(ev)
                completed.append(None)
                retries.append(0)
                fragments.append(0)
                outcome.append(None)
                output.append(None)
                open_row = len(requested) - 1
            elif open_row < 0:
                continue
            elif t is TextMerged or t is ArgumentsMerged:
                fragments[open_row] += 1
            elif t is TurnCompleted:
                completed[open_row] = ev
            elif t is ModelRetried:
                retries[open_row] += 1
            elif isinstance(ev, RunFinished):
                outcome[open_row] = ev.reason
            elif t is OutputValidated:
                output[open_row] = ev  # the turn's last check of a final answer
    return Rows(run_index, {
        "ModelRequested": requested, "TurnCompleted": completed, "retries": retries, "fragments": fragments,
        "outcome": outcome,
        "OutputValidated": output, "interjected": interjected,
    })


_CALL_EVENTS = (CallParsed, CallValidated, CallRejected, ApprovalRequested, ApprovalResolved, ToolStarted,
                ToolFinished)
"""The events about one call, joined to its row by ``(run, (turn, call_id))``."""

_ANSWERING: tuple[type[BaseEvent], ...] = tuple(ANSWERS)
"""The event classes that may answer a call (the engine says which: :func:`~agentnb._engine.answer_of`)."""


def _history_results(messages: Sequence[Message]) -> dict[str, ToolResultPart]:
    return {p.call_id: p for m in messages for p in m.parts if isinstance(p, ToolResultPart)}


class _Codes(dict[type, int]):
    """A small integer per event class, given out on first sight."""

    def __missing__(self, cls: type) -> int:
        code = self[cls] = len(self)
        return code


class _ByClass:
    """All events of many runs, flat, with the positions of each event class (found by numpy, not a loop)."""

    def __init__(self, runs: Sequence[Run]) -> None:
        self.flat: list[Any] = [e for r in runs for e in r]
        self.run_of = np.repeat(np.arange(len(runs), dtype=np.int64), [len(r) for r in runs])
        self._code = _Codes()
        # a dict lookup per event in C (map), ten times faster than factorizing the class objects
        self._codes = np.fromiter(map(self._code.__getitem__, map(type, self.flat)), dtype=np.int64,
                                  count=len(self.flat))

    def of(self, cls: type[BaseEvent]) -> tuple[list[Any], list[int]]:
        """The events of class ``cls`` and their runs, in log order."""
        code = self._code.get(cls)
        if code is None:
            return [], []
        idx = np.flatnonzero(self._codes == code)
        flat = self.flat
        return [flat[i] for i in idx.tolist()], self.run_of[idx].tolist()


_TURN = attrgetter("turn")
_CALL_ID = attrgetter("call_id")
_TURN_CALL = attrgetter("turn", "call_id")


def _prompt_calls(runs: Sequence[Run]) -> tuple[list[int], list[RunStarted], list[ToolCallPart], list[int],
                                                 list[ToolResultPart | None]]:
    """The calls in each run's prompt (its history), with the result the history holds for each."""
    run_index: list[int] = []
    anchor: list[RunStarted] = []
    calls: list[ToolCallPart] = []
    position: list[int] = []
    history: list[ToolResultPart | None] = []
    for r, events in enumerate(runs):
        ev = events[0] if events else None
        if not isinstance(ev, RunStarted):
            continue
        results = _history_results(ev.messages)
        for m in ev.messages:
            for k, p in enumerate(m.tool_calls):
                run_index.append(r)
                anchor.append(ev)
                calls.append(p)
                position.append(k)
                history.append(results.get(p.call_id))
    return run_index, anchor, calls, position, history


def calls_rows(runs: Sequence[Run]) -> Rows:
    """One row per tool call: asked for by the model in this run, or present in the prompt's history.

    The events about calls are found by class with numpy and joined to their call through dicts keyed by
    ``(run, (turn, call_id))`` built and read with C-level ``zip``/``map``: no Python loop over every event.
    A call's status and result are the engine's (:func:`~agentnb._engine.answer_of`): what the fold binds.
    """
    by = _ByClass(runs)
    run_index, anchor, calls, position, history = _prompt_calls(runs)
    n_history = len(calls)
    turns, turn_runs = by.of(TurnCompleted)
    for ev, r in zip(turns, turn_runs, strict=True):
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
    keys = list(zip(run_index, zip(map(_TURN, anchor), map(_CALL_ID, calls), strict=True), strict=True))
    fields: dict[str, list[Any]] = {"anchor": anchor, "call": calls, "origin": origin, "position": position}
    # the tool as the run offered it (RunStarted.tools): where the call's server is recorded
    offered = [{t.name: t for t in events[0].tools} if events and isinstance(events[0], RunStarted) else {}
               for events in runs]
    fields["tool_info"] = [offered[r].get(c.name) for r, c in zip(run_index, calls, strict=True)]
    for t in _CALL_EVENTS:
        evs, rs = by.of(t)
        index = dict(zip(zip(rs, map(_TURN_CALL, evs), strict=True), evs, strict=True))
        fields[t.__name__] = list(map(index.get, keys))
    bound: dict[tuple[int, tuple[int, str]], Any] = {}
    for ev, r in zip(*by.of(ResultsBound), strict=True):
        for cid in ev.call_ids:
            bound[(r, (ev.turn, cid))] = ev
    fields["ResultsBound"] = list(map(bound.get, keys))
    fields.update(_call_outcomes(fields, history))
    return Rows(run_index, fields)


def _call_outcomes(fields: dict[str, list[Any]], history: list[ToolResultPart | None]) -> dict[str, list[Any]]:
    """Status, result, arguments and error of each call row, from its events as the engine reads them."""
    answering = [fields[t.__name__] for t in _ANSWERING]
    resolved, validated, rejected = fields["ApprovalResolved"], fields["CallValidated"], fields["CallRejected"]
    finished = fields["ToolFinished"]
    status: list[str] = []
    content: list[str | None] = []
    arguments: list[Any] = []
    error_type: list[str | None] = []
    error_message: list[str | None] = []
    for k, c in enumerate(fields["call"]):
        answer = None
        for col in answering:
            if col[k] is not None:
                answer = answer_of(col[k])
                if answer is not None:
                    break
        if answer is not None:
            status.append(answer.status)
            content.append(answer.content)
        else:
            hist = history[k]
            status.append(hist.status if hist is not None else "unanswered")
            content.append(hist.content if hist is not None else None)
        fin, rej, res = finished[k], rejected[k], resolved[k]
        error_type.append(fin.error_type if fin is not None else rej.reason if rej is not None else None)
        error_message.append(fin.error_message if fin is not None else rej.message if rej is not None else None)
        if res is not None and res.arguments is not None:
            arguments.append(res.arguments)
        else:
            val = validated[k]
            arguments.append(val.arguments if val is not None else c.arguments)
    return {"status": status, "result_content": content, "arguments": arguments, "error_type": error_type,
            "error_message": error_message}


def conversation_steps(events: Run) -> Iterator[tuple[BaseEvent, ConversationStep]]:
    """Each event of one run that changed its conversation, with the change (the engine's, as the fold applies it).

    Results are bound the way the fold binds them: the answer of a call (:func:`~agentnb._engine.result_of`) is
    kept by ``(turn, call_id)`` until the ``ResultsBound`` that sends it back.
    """
    calls: dict[tuple[int, str], ToolCallPart] = {}
    answers: dict[tuple[int, str], Answer] = {}
    roles = _ROLES.get
    for ev in events:
        role = roles(type(ev))
        if role is None:
            continue  # most events (fragments, parses, starts) neither answer a call nor change the conversation
        answer_fn, step_fn = role
        turn = ev.turn
        if answer_fn is not None:
            answer = answer_fn(ev)
            if answer is not None:
                answers[(turn, answer.call_id)] = answer
        if step_fn is None:
            continue

        def result_for(cid: str, turn: int = turn) -> ToolResultPart | None:
            answer, call = answers.get((turn, cid)), calls.get((turn, cid))
            return result_from(answer, call) if answer is not None and call is not None else None

        step = step_fn(ev, result_for)
        if step is None:
            continue
        for m in step.messages:
            if m.role == "assistant":  # only an answer asks for calls
                for c in m.tool_calls:
                    calls[(turn, c.call_id)] = c
        yield ev, step


_Role = tuple[Callable[[Any], Answer | None] | None, Callable[..., ConversationStep | None] | None]
_ROLES: dict[type[BaseEvent], _Role] = {
    cls: (ANSWERS.get(cls), CONVERSATION_STEPS.get(cls)) for cls in {*ANSWERS, *CONVERSATION_STEPS}
}
"""For the event classes that answer a call or change the conversation: the engine's two functions."""


def messages_rows(runs: Sequence[Run]) -> Rows:
    """One row per part of every message that joined a run's conversation, in order."""
    run_index: list[int] = []
    anchor: list[Any] = []
    message: list[Message] = []
    part: list[Any] = []
    origin: list[str] = []
    message_index: list[int] = []
    part_index: list[int] = []
    in_final: list[bool] = []
    for r, events in enumerate(runs):
        start = len(part)
        last_replacement_row = start
        count = 0
        for ev, step in conversation_steps(events):
            if step.replaces:
                count = 0
                last_replacement_row = len(part)
            how = step.origin
            for m in step.messages:
                for j, p in enumerate(m.parts):
                    run_index.append(r)
                    anchor.append(ev)
                    message.append(m)
                    part.append(p)
                    origin.append(how)
                    message_index.append(count)
                    part_index.append(j)
                count += 1
        in_final.extend(i >= last_replacement_row for i in range(start, len(part)))

    chars = [_chars(p) for p in part]
    return Rows(run_index, {
        "anchor": anchor, "message": message, "part": part, "origin": origin, "message_index": message_index,
        "part_index": part_index, "in_final": in_final, "chars": chars,
    })


def _chars(p: Any) -> int:
    kind = p.kind
    if kind == "tool_call":
        return len(p.arguments_raw)
    if kind == "tool_result":
        return len(p.content)
    return len(p.text or "")


def approvals_rows(runs: Sequence[Run]) -> Rows:
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
    tags: list[Any] = []
    for r, events in enumerate(runs):
        first = events[0] if events else None
        run_tags = (first.settings.get("tags") or None) if isinstance(first, RunStarted) else None
        start = len(anchor)
        by_id: dict[str, int] = {}
        waiting: dict[str, int] = {}  # call id -> the row of its latest request nobody resolved yet
        for ev in events:
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
        tags.extend([run_tags] * (len(anchor) - start))
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
        "run_tags": tags,
    })


def guards_rows(runs: Sequence[Run]) -> Rows:
    """One row per guard trip."""
    return _anchored(runs, GuardTripped, {})


def compressions_rows(runs: Sequence[Run]) -> Rows:
    """One row per compression, with the length of the conversation it replaced.

    Only runs that hold a compression are walked (:func:`conversation_steps`, the conversation as the fold
    builds it); the others are passed over with one C-level scan of their event classes.
    """
    run_index: list[int] = []
    applied: list[Any] = []
    before: list[int] = []
    for r, events in enumerate(runs):
        if CompressionApplied not in set(map(type, events)):
            continue
        count = 0
        for ev, step in conversation_steps(events):
            if isinstance(ev, CompressionApplied):
                run_index.append(r)
                applied.append(ev)
                before.append(count)
            count = len(step.messages) if step.replaces else count + len(step.messages)
    saved = [a.tokens_before - a.tokens_after for a in applied]
    return Rows(run_index, {"CompressionApplied": applied, "messages_before": before, "tokens_saved": saved})


ROW_BUILDERS: dict[str, Callable[[Sequence[Run]], Rows]] = {
    "events": events_rows,
    "turns": turns_rows,
    "calls": calls_rows,
    "messages": messages_rows,
    "approvals": approvals_rows,
    "guards": guards_rows,
    "compressions": compressions_rows,
}
"""The row builder of each frame."""


def _read(items: list[Any], path: str | None) -> list[Any]:
    """``path`` read on every item (None stays None; a missing attribute reads as None)."""
    if path is None:
        return items
    get = attrgetter(path)
    try:
        return list(map(get, items))  # every item has the attribute: one C loop
    except AttributeError:
        pass
    if "." not in path:
        return [getattr(x, path, None) for x in items]
    try:
        return [get(x) if x is not None else None for x in items]
    except AttributeError:
        names = path.split(".")

        def safe(x: Any) -> Any:
            for n in names:
                if x is None:
                    return None
                x = getattr(x, n, None)
            return x

        return [safe(x) for x in items]


def values(col: Column, rows: Rows) -> list[Any]:
    """The Python values of one column over the rows (before dtype conversion)."""
    n = len(rows)
    if col.source is None:
        return [None] * n
    field = col.field
    assert field is not None
    items = rows.fields[field]
    out = _read(items, col.path)
    fn = col.value
    if fn is not None:
        out = [fn(v) if v is not None else None for v in out]
    return out


def _masked(vals: list[Any], dtype: Any) -> tuple[Any, Any]:
    arr = np.array(vals, dtype=object)
    mask = arr == None  # noqa: E711 -- elementwise comparison
    if mask.any():
        arr[mask] = 0
    return arr.astype(dtype), mask


def _codes(vals: list[Any], categories: tuple[str, ...] | None) -> tuple[Any, list[str]]:
    """Integer codes of ``vals`` against a fixed vocabulary, or a sorted one built from the values.

    The values are factorized by identity first (``id`` into an int64 buffer, then one C hash table): event
    types, loop states and names shared by a run's events are the same few objects, and enum members hash in
    Python, so this is several times faster than hashing the values. Equal values that are distinct objects
    only add uniques, merged by name below; with too many of them, the values are factorized by equality.
    """
    n = len(vals)
    raw, uniques = pd.factorize(np.fromiter(map(id, vals), np.int64, n))
    if len(uniques) <= 4096:
        first = np.empty(len(uniques), dtype=np.int64)
        first[raw[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
        objects = [vals[i] for i in first.tolist()]
    else:
        raw, found = pd.factorize(np.array(vals, dtype=object), use_na_sentinel=True)
        objects = list(found)
    names = [None if o is None else str(o) for o in objects]
    present = sorted({x for x in names if x is not None})
    if categories is not None:
        lookup = {c: i for i, c in enumerate(categories)}
        unknown = [x for x in present if x not in lookup]
        if unknown:
            raise ValueError(f"values {unknown} are outside the vocabulary {list(categories)}")
        cats = list(categories)
    else:
        cats = present
        lookup = {c: i for i, c in enumerate(cats)}
    remap = np.array([*(lookup[x] if x is not None else -1 for x in names), -1], dtype=np.int32)
    return remap[raw], cats


def to_array(col: Column, vals: list[Any]) -> Any:
    """One column's values as a pandas array of its declared dtype."""
    dtype = col.dtype
    if dtype == "Int64":
        try:  # no nulls: straight into an int64 buffer
            return pd.arrays.IntegerArray(np.array(vals, dtype=np.int64), np.zeros(len(vals), dtype=np.bool_))
        except TypeError:
            data, mask = _masked(vals, np.int64)
            return pd.arrays.IntegerArray(data, mask)
    if dtype == "Float64":
        data, mask = _masked(vals, np.float64)
        return pd.arrays.FloatingArray(data, mask)
    if dtype == "boolean":
        data, mask = _masked(vals, np.bool_)
        return pd.arrays.BooleanArray(data, mask)
    if dtype == "category":
        codes, cats = _codes(vals, col.categories)
        return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype="str"))
    if dtype == "string":
        return pd.array(vals, dtype=pd.StringDtype("python"))
    if dtype == "datetime":
        try:
            idx = pd.DatetimeIndex(vals) if vals else pd.DatetimeIndex([], dtype=DATETIME)
        except ValueError:  # a resumed run mixes tz objects (datetime.UTC, pydantic's TzInfo(0) from the log)
            idx = pd.DatetimeIndex(pd.to_datetime(vals, utc=True))
        if idx.tz is None:
            idx = idx.tz_localize("UTC")
        return idx.tz_convert("UTC").as_unit("us").array
    raise ValueError(f"column {col.name!r}: unknown dtype {dtype!r}")  # pragma: no cover


_COMMON = {"seq", "ts", "run_id", "turn", "state", "type"}
_NO_WIRE: dict[str, Any] = {**dict.fromkeys(_COMMON, True), "response": {"wire": True}}
_NO_FAILED_WIRE: dict[str, Any] = {**dict.fromkeys(_COMMON, True), "wire": True}


def payloads(events: list[Any], *, wire: bool = False) -> list[str]:
    """Each event's own fields (all but the common ones) as compact JSON text; HTTP captures only if asked."""
    from agentnb.events import ModelRetried, RunFinished, TurnCompleted, json_text

    if wire:
        return [json_text(ev, exclude=_COMMON) for ev in events]
    failed = (ModelRetried, RunFinished)
    return [json_text(ev, exclude=_NO_WIRE if type(ev) is TurnCompleted
                      else _NO_FAILED_WIRE if type(ev) in failed else _COMMON) for ev in events]
