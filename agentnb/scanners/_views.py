"""A run's frames as scanners read them, each built once: :func:`view` (and :func:`prime` for many runs at once).

Building a frame costs a fixed amount of pandas work whatever its size, so the frames of one small run cost
nearly as much as those of a hundred, and seven built-in scanners each reading the calls, the messages and the
turns of a run would build them again and again. So the frames are built for a *block* of runs: :func:`prime`
makes the runs a scan hands one worker into one block, whose frames are built in one column-wise pass the first
time a scanner reads one of them, and each run's :class:`ScanView` reads its rows of them (a run's rows are
contiguous: the frames are built run by run). The built-ins read plain column lists
(:meth:`ScanView.column`), which on a small run is many times faster than filtering a DataFrame; the frames
themselves are there too (:attr:`ScanView.calls` ...: the run's rows, with the frames' dtypes; ``run_id``'s
categories are the block's runs). :func:`view` returns the run's view until :func:`release`, so every scanner
of a run reads the same frames; outside a scan it makes a new one each time (nothing is kept that could outlive
the transcript).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .._states import LoopState
from .._transcript import Transcript
from ..events import RunFinished
from ..frames import Frames

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


class _Block:
    """The frames of a few runs, each built on first use, with each run's rows and the frames' columns as lists."""

    def __init__(self, runs: Sequence[Transcript]) -> None:
        self.runs = list(runs)
        self._frames: dict[str, pd.DataFrame] = {}
        self._spans: dict[str, dict[str, tuple[int, int]]] = {}
        self._lists: dict[tuple[str, str], list[Any]] = {}
        self._lock = threading.Lock()

    def frame(self, name: str) -> pd.DataFrame:
        with self._lock:
            if name not in self._frames:
                frames = Frames.of_runs(lambda: [t.events for t in self.runs],
                                        lambda: [t.run_id or "" for t in self.runs])
                self._frames[name] = frames.turns(price_table=False) if name == "turns" else frames.frame(name)
            return self._frames[name]

    def span(self, name: str, run_id: str) -> tuple[int, int]:
        """The rows of ``run_id`` in frame ``name`` (the frames hold each run's rows together, runs in order)."""
        import numpy as np

        df = self.frame(name)
        with self._lock:
            if name not in self._spans:
                codes = df["run_id"].cat.codes.to_numpy()
                ids = [str(c) for c in df["run_id"].cat.categories]
                starts = np.searchsorted(codes, np.arange(len(ids)), side="left").tolist()
                stops = np.searchsorted(codes, np.arange(len(ids)), side="right").tolist()
                self._spans[name] = {r: (a, b) for r, a, b in zip(ids, starts, stops, strict=True)}
            return self._spans[name].get(run_id, (0, 0))

    def column(self, name: str, col: str) -> list[Any]:
        df = self.frame(name)
        with self._lock:
            if (name, col) not in self._lists:
                self._lists[(name, col)] = df[col].tolist()
            return self._lists[(name, col)]


def _value(v: Any) -> Any:
    """A frame value as plain Python: pandas' missing values (``<NA>``, NaN, NaT) become None."""
    import pandas as pd

    return None if v is None or (not isinstance(v, str | list | dict) and pd.isna(v)) else v


class ScanView:
    """The frames of one run, each built once, and their columns as lists: what the built-in scanners read.

    Example:
        >>> import agentnb as anb
        >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> v = view(loop.start("Paris?").run().transcript)
        >>> v.calls is v.calls, v.column("calls", "tool"), [c.tool for c in v.scan_calls]
        (True, ['get_weather'], ['get_weather'])
    """

    def __init__(self, transcript: Transcript, block: _Block | None = None) -> None:
        self.transcript = transcript
        self.size = len(transcript.events)
        self._block = block if block is not None else _Block([transcript])
        self._run_id = transcript.run_id or ""
        self._columns: dict[tuple[str, str], list[Any]] = {}

    def _rows(self, name: str) -> pd.DataFrame:
        a, b = self._block.span(name, self._run_id)
        return self._block.frame(name).iloc[a:b].reset_index(drop=True)

    def column(self, frame: str, name: str) -> list[Any]:
        """Column ``name`` of the run's rows of ``frame`` (``calls``, ``messages``, ``turns``); missing values None."""
        key = (frame, name)
        if key not in self._columns:
            a, b = self._block.span(frame, self._run_id)
            self._columns[key] = [_value(v) for v in self._block.column(frame, name)[a:b]]
        return self._columns[key]

    @cached_property
    def calls(self) -> pd.DataFrame:
        """``frames.calls()`` of the run."""
        return self._rows("calls")

    @cached_property
    def messages(self) -> pd.DataFrame:
        """``frames.messages()`` of the run."""
        return self._rows("messages")

    @cached_property
    def turns(self) -> pd.DataFrame:
        """``frames.turns(price_table=False)`` of the run (no prices: scanners count tokens)."""
        return self._rows("turns")

    @cached_property
    def final_text(self) -> str | None:
        """The final answer of a completed run, as its ``RunFinished`` event recorded it (None otherwise)."""
        last = self.transcript.events[-1] if self.transcript.events else None
        if isinstance(last, RunFinished) and last.final == LoopState.COMPLETED:
            return last.output or None
        return None

    @cached_property
    def scan_calls(self) -> list[ScanCall]:
        """Every call of the run with its result as the model saw it (see :class:`ScanCall`)."""
        content: dict[str, str] = {}
        for kind, call_id, text in zip(self.column("messages", "kind"), self.column("messages", "call_id"),
                                       self.column("messages", "content"), strict=True):
            if kind == "tool_result" and isinstance(call_id, str) and isinstance(text, str):
                content.setdefault(call_id, text)
        columns = [self.column("calls", c) for c in ("call_id", "tool", "arguments", "status", "seq", "turn")]
        out: list[ScanCall] = []
        for call_id, tool, raw, status, seq, turn in zip(*columns, strict=True):
            arguments = json.loads(raw) if isinstance(raw, str) else None
            out.append(ScanCall(
                run_id=self._run_id, call_id=str(call_id), tool=str(tool),
                arguments=arguments if isinstance(arguments, dict) else None, status=str(status),
                content=content.get(call_id), seq=int(seq), turn=int(turn), transcript=self.transcript))
        return out


@dataclass
class _Entry:
    transcript: Transcript
    view: ScanView


_ENTRIES: dict[int, _Entry] = {}
"""The runs a scan is working on (by ``id``), from :func:`prime` to :func:`release`."""


def view(transcript: Transcript) -> ScanView:
    """The run's :class:`ScanView`: during a scan, the one every scanner of the run reads; else a new one."""
    with _LOCK:
        entry = _ENTRIES.get(id(transcript))
        if entry is not None and entry.transcript is transcript:
            if entry.view.size != len(transcript.events):  # the run grew: read it again, alone
                entry.view = ScanView(transcript)
            return entry.view
    return ScanView(transcript)


def prime(transcripts: Sequence[Transcript]) -> None:
    """Put these runs in one block, whose frames are built in one pass when a scanner first reads one of them.

    Scanners that read no frames (a question to a model) cost nothing more. Call :func:`release` when done.
    """
    runs = [t for t in transcripts if t.events]
    ids = [t.run_id for t in runs]
    block = _Block(runs) if len(set(ids)) == len(ids) else None  # one run id twice: each run alone
    with _LOCK:
        for t in runs:
            _ENTRIES[id(t)] = _Entry(t, ScanView(t, block))


def release(transcripts: Sequence[Transcript]) -> None:
    """Forget the views of these runs (the end of their part of a scan)."""
    with _LOCK:
        for t in transcripts:
            entry = _ENTRIES.get(id(t))
            if entry is not None and entry.transcript is t:
                del _ENTRIES[id(t)]
