"""Row builders: one pass over each run's events lines up the objects each row's columns read.

A row builder returns :class:`Rows`: the run of each row and a dict of aligned lists (*fields*). A field holds
the events of the row (``ToolFinished``: the call's ToolFinished event, or None), parts of the conversation
(``call``, ``part``), or values computed here because they need more than one event (``status``). The column
declarations in :mod:`.columns` read these lists; nothing here knows about columns or dtypes.

Calls are keyed by ``(turn, call_id)`` inside a run: an id is unique within a turn (the driver makes it so),
and every event about a call carries the turn of the answer that asked for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from ..engine import denial_text
from ..events import BaseEvent
from ..messages import Message, ToolCallPart, ToolResultPart

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


def _anchored(runs: Sequence[Run], anchor: str, joined: dict[str, str]) -> Rows:
    """One row per ``anchor`` event; ``joined`` maps an event type to the attribute matching the anchor's."""
    run_index: list[int] = []
    anchors: list[Any] = []
    found: dict[str, dict[tuple[int, Any], BaseEvent]] = {t: {} for t in joined}
    key_attr = next(iter(joined.values()), "")
    for r, events in enumerate(runs):
        for ev in events:
            t = ev.type
            if t == anchor:
                run_index.append(r)
                anchors.append(ev)
            elif t in found:
                found[t][(r, getattr(ev, joined[t]))] = ev
    fields: dict[str, list[Any]] = {anchor: anchors}
    for t, index in found.items():
        fields[t] = [index.get((r, getattr(a, key_attr))) for r, a in zip(run_index, anchors, strict=True)]
    return Rows(run_index, fields)


def turns_rows(runs: Sequence[Run]) -> Rows:
    """One row per model request (a turn), with its answer, retries and the run's end if it ended there."""
    run_index: list[int] = []
    requested: list[Any] = []
    completed: list[Any] = []
    retries: list[int] = []
    outcome: list[str | None] = []
    output: list[Any] = []
    for r, events in enumerate(runs):
        open_row = -1
        for ev in events:
            t = ev.type
            if t == "ModelRequested":
                run_index.append(r)
                requested.append(ev)
                completed.append(None)
                retries.append(0)
                outcome.append(None)
                output.append(None)
                open_row = len(requested) - 1
            elif open_row < 0:
                continue
            elif t == "TurnCompleted":
                completed[open_row] = ev
            elif t == "ModelRetried":
                retries[open_row] += 1
            elif t == "RunFinished":
                outcome[open_row] = ev.reason  # type: ignore[attr-defined]
            elif t == "OutputValidated":
                output[open_row] = ev  # the turn's last check of a final answer
    return Rows(run_index, {
        "ModelRequested": requested, "TurnCompleted": completed, "retries": retries, "outcome": outcome,
        "OutputValidated": output,
    })


_ANSWERS = ("denied", "submitted")
"""Decisions of an ApprovalResolved that answer the call themselves (no tool runs)."""

_CALL_EVENTS = ("CallParsed", "CallValidated", "CallRejected", "ApprovalRequested", "ApprovalResolved",
                "ToolStarted", "ToolFinished")


def _result_of(ev: BaseEvent, call: ToolCallPart) -> ToolResultPart:
    """The result a ToolFinished, CallRejected or answering ApprovalResolved gives the model (as the fold does)."""
    t = ev.type
    if t == "ToolFinished":
        return ToolResultPart(call_id=call.call_id, name=call.name, status=ev.status,  # type: ignore[attr-defined]
                              content=ev.content, audit=ev.value)  # type: ignore[attr-defined]
    if t == "CallRejected":
        return ToolResultPart(call_id=call.call_id, name=call.name, status="error",
                              content=ev.message)  # type: ignore[attr-defined]
    if ev.decision == "submitted":  # type: ignore[attr-defined]
        return ToolResultPart(call_id=call.call_id, name=call.name, status="ok",
                              content=ev.content or "", audit=ev.value)  # type: ignore[attr-defined]
    return ToolResultPart(call_id=call.call_id, name=call.name, status="denied",
                          content=denial_text(ev.note, ev.by))  # type: ignore[attr-defined]


def _history_results(messages: Sequence[Message]) -> dict[str, ToolResultPart]:
    return {p.call_id: p for m in messages for p in m.parts if isinstance(p, ToolResultPart)}


class _ByType:
    """All events of many runs, flat, with the positions of each event type (found by numpy, not a loop)."""

    def __init__(self, runs: Sequence[Run]) -> None:
        import pandas as pd

        self.flat: list[Any] = [e for r in runs for e in r]
        self.run_of = np.repeat(np.arange(len(runs), dtype=np.int64), [len(r) for r in runs])
        codes, uniques = pd.factorize(np.array(list(map(_TYPE, self.flat)), dtype=object))
        self._codes = codes
        self._code = {str(u): i for i, u in enumerate(uniques)}

    def of(self, etype: str) -> tuple[list[Any], list[int]]:
        """The events of type ``etype`` and their runs, in log order."""
        code = self._code.get(etype)
        if code is None:
            return [], []
        idx = np.flatnonzero(self._codes == code)
        flat = self.flat
        return [flat[i] for i in idx.tolist()], self.run_of[idx].tolist()


_TYPE = attrgetter("type")
_TURN = attrgetter("turn")
_CALL_ID = attrgetter("call_id")
_TURN_CALL = attrgetter("turn", "call_id")


def calls_rows(runs: Sequence[Run]) -> Rows:  # noqa: C901 -- one block per kind of call
    """One row per tool call: asked for by the model in this run, or present in the prompt's history.

    The events about calls are found by type with numpy and joined to their call through dicts keyed by
    ``(run, (turn, call_id))`` built and read with C-level ``zip``/``map``: no Python loop over every event.
    """
    by = _ByType(runs)
    run_index: list[int] = []
    anchor: list[Any] = []
    calls: list[ToolCallPart] = []
    origin: list[str] = []
    position: list[int] = []
    history: list[ToolResultPart | None] = []
    for r, events in enumerate(runs):
        if not events or events[0].type != "RunStarted":
            continue
        ev = events[0]
        msgs = ev.messages  # type: ignore[attr-defined]
        results = _history_results(msgs)
        for m in msgs:
            for k, p in enumerate(m.tool_calls):
                run_index.append(r)
                anchor.append(ev)
                calls.append(p)
                origin.append("history")
                position.append(k)
                history.append(results.get(p.call_id))
    n_history = len(calls)
    turns, turn_runs = by.of("TurnCompleted")
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
    origin.extend(["model"] * n_model)
    history.extend([None] * n_model)
    keys = list(zip(run_index, zip(map(_TURN, anchor), map(_CALL_ID, calls), strict=True), strict=True))
    fields: dict[str, list[Any]] = {"anchor": anchor, "call": calls, "origin": origin, "position": position}
    # the tool as the run offered it (RunStarted.tools): where the call's server is recorded
    offered: list[dict[str, Any]] = []
    for events in runs:
        started = events[0] if events and events[0].type == "RunStarted" else None
        offered.append({t.name: t for t in started.tools} if started is not None else {})  # type: ignore[attr-defined]
    fields["tool_info"] = [offered[r].get(c.name) for r, c in zip(run_index, calls, strict=True)]
    for t in _CALL_EVENTS:
        evs, rs = by.of(t)
        index = dict(zip(zip(rs, map(_TURN_CALL, evs), strict=True), evs, strict=True))
        fields[t] = list(map(index.get, keys))
    bound: dict[tuple[int, tuple[int, str]], Any] = {}
    for ev, r in zip(*by.of("ResultsBound"), strict=True):
        for cid in ev.call_ids:
            bound[(r, (ev.turn, cid))] = ev
    fields["ResultsBound"] = list(map(bound.get, keys))
    finished, rejected, resolved = fields["ToolFinished"], fields["CallRejected"], fields["ApprovalResolved"]
    validated = fields["CallValidated"]
    status: list[str] = []
    content: list[str | None] = []
    arguments: list[Any] = []
    error_type: list[str | None] = []
    error_message: list[str | None] = []
    for k, c in enumerate(calls):
        fin, rej, res = finished[k], rejected[k], resolved[k]
        if fin is not None:
            status.append(fin.status)
            content.append(fin.content)
            error_type.append(fin.error_type)
            error_message.append(fin.error_message)
        else:
            if rej is not None:
                status.append("error")
                content.append(rej.message)
            elif res is not None and res.decision in _ANSWERS:
                out = _result_of(res, c)
                status.append(out.status)
                content.append(out.content)
            else:
                hist = history[k]
                status.append(hist.status if hist is not None else "unanswered")
                content.append(hist.content if hist is not None else None)
            error_type.append(rej.reason if rej is not None else None)
            error_message.append(rej.message if rej is not None else None)
        if res is not None and res.arguments is not None:
            arguments.append(res.arguments)
        else:
            val = validated[k]
            arguments.append(val.arguments if val is not None else c.arguments)
    fields.update(status=status, result_content=content, arguments=arguments, error_type=error_type,
                  error_message=error_message)
    return Rows(run_index, fields)


def messages_rows(runs: Sequence[Run]) -> Rows:  # noqa: C901 -- one pass, one branch per event type
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
        last_compression_row = start
        count = 0
        calls: dict[tuple[int, str], ToolCallPart] = {}
        answers: dict[tuple[int, str], BaseEvent] = {}

        def add(ev: BaseEvent, msgs: Sequence[Message], how: str, r: int = r) -> None:
            nonlocal count
            for m in msgs:
                for j, p in enumerate(m.parts):
                    run_index.append(r)
                    anchor.append(ev)
                    message.append(m)
                    part.append(p)
                    origin.append(how)
                    message_index.append(count)
                    part_index.append(j)
                count += 1

        for ev in events:
            t = ev.type
            if t == "RunStarted":
                add(ev, ev.messages, "prompt")  # type: ignore[attr-defined]
            elif t == "ModelRequested":
                add(ev, ev.new_messages, "request")  # type: ignore[attr-defined]
            elif t == "TurnCompleted":
                msg = ev.response.message  # type: ignore[attr-defined]
                for c in msg.tool_calls:
                    calls[(ev.turn, c.call_id)] = c
                add(ev, [msg], "response")
            elif t in ("ToolFinished", "CallRejected") or (
                    t == "ApprovalResolved" and ev.decision in _ANSWERS):  # type: ignore[attr-defined]
                answers[(ev.turn, ev.call_id)] = ev  # type: ignore[attr-defined]
            elif t == "ResultsBound":
                parts = tuple(_result_of(answers[(ev.turn, cid)], calls[(ev.turn, cid)])
                              for cid in ev.call_ids)  # type: ignore[attr-defined]
                add(ev, [Message(role="tool", parts=parts)], "results")
            elif t == "CompressionApplied":
                count = 0
                last_compression_row = len(part)
                add(ev, ev.messages, "compression")  # type: ignore[attr-defined]
        in_final.extend(i >= last_compression_row for i in range(start, len(part)))

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
    """One row per approval request, with its resolution when there is one."""
    rows = _anchored(runs, "ApprovalRequested", {"ApprovalResolved": "approval_id"})
    req, res = rows.fields["ApprovalRequested"], rows.fields["ApprovalResolved"]
    rows.fields["wait_s"] = [
        (b.ts - a.ts).total_seconds() if b is not None else None for a, b in zip(req, res, strict=True)
    ]
    rows.fields["edited"] = [b.arguments is not None if b is not None else None for b in res]
    return rows


def guards_rows(runs: Sequence[Run]) -> Rows:
    """One row per guard trip."""
    return _anchored(runs, "GuardTripped", {})


def compressions_rows(runs: Sequence[Run]) -> Rows:
    """One row per compression, with the length of the conversation it replaced."""
    run_index: list[int] = []
    applied: list[Any] = []
    before: list[int] = []
    for r, events in enumerate(runs):
        count = 0
        for ev in events:
            t = ev.type
            if t == "RunStarted":
                count = len(ev.messages)  # type: ignore[attr-defined]
            elif t == "ModelRequested":
                count += len(ev.new_messages)  # type: ignore[attr-defined]
            elif t in ("TurnCompleted", "ResultsBound"):
                count += 1
            elif t == "CompressionApplied":
                run_index.append(r)
                applied.append(ev)
                before.append(count)
                count = len(ev.messages)  # type: ignore[attr-defined]
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
