"""A run's frames as scanners read them, each built once: :func:`view` (and :func:`prime` for many runs at once).

Building a frame costs a fixed amount of pandas work whatever its size, so the frames of one small run cost
nearly as much as those of a hundred; and seven built-in scanners each reading the calls, the messages and the
turns of a run would build them again and again. :func:`prime` groups runs whose calls, messages and turns
frames are then built in one column-wise pass, the first time a scanner reads the frames of one of them, and
each run gets its slice; :func:`view` returns that (or builds it on first use) until :func:`release`, so every
scanner of a run reads the same frames. Outside a scan, :func:`view` builds a new view each time (nothing is
kept that could outlive the transcript). Slices keep the
frames' dtypes; their ``run_id`` categories are those of the runs primed together.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..frames import Frames
from ..transcript import Transcript

if TYPE_CHECKING:
    import pandas as pd

@dataclass(frozen=True, slots=True, kw_only=True)
class ScanCall:
    """One tool call of a run, as a call-level scanner sees it (read from the run's frames).

    Attributes:
        run_id: the run.
        call_id: the call's id.
        tool: the tool name as the model wrote it.
        arguments: the arguments the call ran with (None when they were not a JSON object).
        status: the result's status (``ok``, ``error``, ``timeout``, ``denied``, ..., or ``unanswered``).
        content: what the model saw of the result (None: no result).
        seq: the call's ``seq`` in ``frames.calls()`` (the answer that held it).
        turn: the turn of that answer.
        transcript: the whole run.
    """

    run_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any] | None
    status: str
    content: str | None
    seq: int
    turn: int
    transcript: Transcript = field(repr=False, compare=False)


_LOCK = threading.Lock()


class ScanView:
    """The frames of one run, each built once: what the built-in scanners read.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> v = view(loop.start("Paris?").run().transcript)
        >>> v.calls is v.calls, [c.tool for c in v.scan_calls]
        (True, ['get_weather'])
    """

    def __init__(self, transcript: Transcript, frames: dict[str, pd.DataFrame] | None = None) -> None:
        self.transcript = transcript
        self.size = len(transcript.events)
        self._given = frames or {}

    def _frame(self, name: str) -> pd.DataFrame:
        if name in self._given:
            return self._given[name]
        frames = self.transcript.frames
        return frames.turns(price_table=False) if name == "turns" else frames.frame(name)

    @cached_property
    def calls(self) -> pd.DataFrame:
        """``frames.calls()`` of the run."""
        return self._frame("calls")

    @cached_property
    def messages(self) -> pd.DataFrame:
        """``frames.messages()`` of the run."""
        return self._frame("messages")

    @cached_property
    def turns(self) -> pd.DataFrame:
        """``frames.turns(price_table=False)`` of the run (no prices: scanners count tokens)."""
        return self._frame("turns")

    @cached_property
    def final_text(self) -> str | None:
        """The final answer: the text of the last assistant message of a completed run (None otherwise)."""
        if self.transcript.state.value != "COMPLETED":
            return None
        for m in reversed(self.transcript.messages):
            if m.role == "assistant":
                return m.text or None
        return None

    @cached_property
    def scan_calls(self) -> list[ScanCall]:
        """Every call of the run with its result as the model saw it (see :class:`ScanCall`)."""
        messages = self.messages
        results = messages[messages["kind"] == "tool_result"].drop_duplicates("call_id")
        content = dict(zip(results["call_id"].tolist(), results["content"].tolist(), strict=True))
        calls = self.calls
        columns = [calls[c].tolist() for c in ("run_id", "call_id", "tool", "arguments", "status", "seq", "turn")]
        out: list[ScanCall] = []
        for run_id, call_id, tool, raw, status, seq, turn in zip(*columns, strict=True):
            arguments = json.loads(raw) if isinstance(raw, str) else None
            text = content.get(call_id)
            out.append(ScanCall(
                run_id=str(run_id), call_id=str(call_id), tool=str(tool),
                arguments=arguments if isinstance(arguments, dict) else None, status=str(status),
                content=text if isinstance(text, str) else None, seq=int(seq), turn=int(turn),
                transcript=self.transcript))
        return out


@dataclass
class _Entry:
    transcript: Transcript
    group: _Group
    view: ScanView | None = None


class _Group:
    """Runs whose frames are built together the first time a scanner reads the frames of one of them."""

    def __init__(self, transcripts: Sequence[Transcript]) -> None:
        self.runs = [t for t in transcripts if t.run_id and t.events]
        self.primed = len(self.runs) < 2 or len({t.run_id for t in self.runs}) != len(self.runs)


_ENTRIES: dict[int, _Entry] = {}
"""The runs a scan is working on (by ``id``), from :func:`prime` to :func:`release`."""


def view(transcript: Transcript) -> ScanView:
    """The run's :class:`ScanView`: during a scan, the one every scanner of the run reads; else a new one."""
    with _LOCK:
        entry = _ENTRIES.get(id(transcript))
        if entry is None or entry.transcript is not transcript:
            return ScanView(transcript)
        if entry.view is not None and entry.view.size == len(transcript.events):
            return entry.view
        group = entry.group
        primed_now, group.primed = not group.primed, True
    built = _prime(group.runs) if primed_now else {}
    with _LOCK:
        for t, v in built.items():
            found = _ENTRIES.get(id(t))
            if found is not None and found.transcript is t:
                found.view = v
        if entry.view is None or entry.view.size != len(transcript.events):
            entry.view = ScanView(transcript)
        return entry.view


def prime(transcripts: Sequence[Transcript]) -> None:
    """Mark runs whose frames are built together, in one pass, when a scanner first reads those of one of them.

    Scanners that read no frames (a question to a model) cost nothing more. Call :func:`release` when done.
    """
    group = _Group(transcripts)
    with _LOCK:
        for t in transcripts:
            _ENTRIES[id(t)] = _Entry(t, group)


def release(transcripts: Sequence[Transcript]) -> None:
    """Forget the views of these runs (the end of their part of a scan)."""
    with _LOCK:
        for t in transcripts:
            entry = _ENTRIES.get(id(t))
            if entry is not None and entry.transcript is t:
                del _ENTRIES[id(t)]


def _prime(runs: list[Transcript]) -> dict[Transcript, ScanView]:
    """Build the calls, messages and turns frames of many runs in one pass: each run's view over its slices."""
    frames = Frames.of_runs(lambda: [t.events for t in runs], lambda: [t.run_id or "" for t in runs])
    built = {"calls": frames.calls(), "messages": frames.messages(), "turns": frames.turns(price_table=False)}
    parts: dict[str, dict[str, pd.DataFrame]] = {t.run_id or "": {} for t in runs}
    for name, df in built.items():
        for run_id, part in df.groupby("run_id", observed=True, sort=False):
            parts[str(run_id)][name] = part.reset_index(drop=True)
        empty = df.iloc[:0]
        for got in parts.values():
            got.setdefault(name, empty)
    return {t: ScanView(t, parts[t.run_id or ""]) for t in runs}
