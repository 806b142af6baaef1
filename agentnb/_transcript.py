"""Transcripts: a run's event log, saved and loaded losslessly as JSON Lines.

A transcript is nothing but its events. The conversation, the calls and the final state are recovered by
folding them (:meth:`Transcript.fold`); :meth:`Transcript.at` folds a prefix, which is how the debugger shows
"the conversation as of event 812".

An HTML export (:meth:`Transcript.to_html`) carries the same JSON Lines, gzip-compressed in base64 in one
inert ``<script id="agentnb-transcript">`` element (:mod:`agentnb._embedded`), so :meth:`Transcript.load`
reads a run back from the page a bug report attached, with the same checks as from a ``.jsonl`` file.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import secrets
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from pydantic import ValidationError

from ._embedded import embedded_lines, is_html
from ._gc import gc_paused
from ._messages import Message
from ._states import LoopState
from .events import BaseEvent, event_from_json, event_to_json, events_from_json
from .exceptions import TranscriptError

if TYPE_CHECKING:
    import pandas as pd

    from ._engine import RunState
    from ._plots import Plots
    from .frames import Frames


class Transcript:
    """The ordered events of one run.

    Example:
        >>> import agentnb as anb, tempfile, os
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> run = run.start("Weather in Paris?").run()
        >>> path = os.path.join(tempfile.mkdtemp(), "run.jsonl")
        >>> run.transcript.save(path)
        >>> anb.Transcript.load(path).state
        <LoopState.COMPLETED: 'COMPLETED'>
    """

    def __init__(self, events: list[BaseEvent]) -> None:
        self.events = events
        self._folded: tuple[int, BaseEvent | None, RunState] | None = None  # see folded()
        self.dropped: str | None = None
        """What :meth:`load` with ``recover=True`` left out (None: nothing)."""

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[BaseEvent]:
        return iter(self.events)

    @overload
    def __getitem__(self, i: int) -> BaseEvent: ...
    @overload
    def __getitem__(self, i: slice) -> list[BaseEvent]: ...
    def __getitem__(self, i: int | slice) -> BaseEvent | list[BaseEvent]:
        return self.events[i]

    def __repr__(self) -> str:
        run_id = self.events[0].run_id if self.events else "-"
        return f"<agentnb.Transcript {run_id} {len(self)} events, {self.state.value}>"

    def _debugger(self) -> Any:
        """In a notebook, a transcript shows a read-only debugger positioned at its last event."""
        from ._debugger import Debugger  # the upward facade of a transcript's rich display (tests/test_walls.py)

        return Debugger(self, start="end")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self._debugger()._repr_mimebundle_(**kwargs)

    def _ipython_display_(self) -> None:
        """The read-only debugger's two outputs in a notebook (a static view, then the widget)."""
        self._debugger()._ipython_display_()

    # -- projections ---------------------------------------------------------------------------------

    def fold(self) -> RunState:
        """The run's state after all events.

        Raises:
            TranscriptError: naming the first event the fold cannot apply (see :meth:`agentnb.RunState.apply`).
        """
        from ._engine import RunState

        return RunState.fold(self.events)

    def at(self, seq: int) -> RunState:
        """The run's state right after event ``seq`` (time travel).

        Raises:
            TranscriptError: naming the first event up to ``seq`` that the fold cannot apply.
        """
        from ._engine import RunState

        return RunState.fold(self.events[: seq + 1])

    @property
    def run_id(self) -> str | None:
        """The run's id (None for an empty transcript)."""
        return self.events[0].run_id if self.events else None

    @property
    def state(self) -> LoopState:
        """The loop state after the last event."""
        return self.events[-1].state if self.events else LoopState.NEW

    @property
    def messages(self) -> list[Message]:
        """The conversation rebuilt from the events."""
        return list(folded(self).messages)

    @property
    def frames(self) -> Frames:
        """The run as tidy DataFrames (see :mod:`agentnb.frames`).

        ``frames.events()``, ``turns()``, ``calls()``, ``messages()``, ``approvals()``, ``guards()``,
        ``compressions()``.

        Example:
            >>> import agentnb as anb
            >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> run.start("Paris?").run().transcript.frames.calls()[["tool", "status"]]
                      tool status
            0  get_weather     ok
        """
        from .frames import Frames

        return Frames.of_runs(lambda: [self.events])

    @property
    def plot(self) -> Plots:
        """Plots of the run (matplotlib): ``plot.timeline()``, ``tokens()``, ``latency()``, ``status()``."""
        from ._plots import Plots

        return Plots(self.frames)

    def to_pandas(self) -> pd.DataFrame:
        """One row per event, with each event's own fields as JSON text in ``payload``.

        The same as ``frames.events(payload=True)``: ``run_id``, ``seq``, ``turn``, ``ts``, ``type``, ``state``,
        ``call_id``, ``name``, ``payload``. Leave the payload out (much faster on large logs) with
        ``frames.events()``.
        """
        return self.frames.events(payload=True)

    def to_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write the run as one self-contained HTML file: a read-only debugger that needs no kernel or network.

        Timeline, selection, the event cards, the conversation at any event, the wire view and the filters, in
        any browser (see :mod:`agentnb._debugger.export`). Returns the path written.
        """
        from ._debugger.export import write_html

        return write_html(self.events, path, title=title)

    # -- files ---------------------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write one JSON event per line (UTF-8). Lossless: :meth:`load` gives the same events back.

        The events go to a temporary file next to ``path`` that replaces ``path`` only once it is complete
        and flushed to disk, so a crash or an error while saving leaves the previous file as it was.

        Raises:
            TranscriptError: an event cannot be written (the file at ``path`` is left untouched).
        """
        target = Path(path)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            with tmp.open("x", encoding="utf-8", newline="\n") as fh:  # "x": created with the usual umask
                for ev in self.events:
                    try:
                        line = event_to_json(ev)
                    except Exception as exc:
                        raise TranscriptError(
                            f"{path}: event {ev.seq} ({ev.type}) cannot be written: {exc}; nothing was saved"
                        ) from exc
                    fh.write(line)
                    fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            if target.exists():
                shutil.copymode(target, tmp)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _sync_dir(target.parent)

    @classmethod
    def load(cls, path: str | Path, *, recover: bool = False) -> Transcript:
        """Read a transcript written by :meth:`save`, checking every event against the state machine.

        A UTF-8 byte order mark at the start is accepted, and so is an HTML export of the run (the events
        embedded by :meth:`to_html`; its line numbers are those of the embedded lines). A file whose last
        line is incomplete (the usual result of a crash while a line was written: no newline at its end and
        not a whole event) is refused unless ``recover=True``; then every complete event before it is kept,
        :attr:`dropped` says what was left out, and a warning says it too.

        Raises:
            TranscriptError: naming the line, when a line is not UTF-8 (and the byte) or not a valid event
                (and its seq and type, when it has them); naming the event, when it cannot follow the ones
                before it (out of order, not allowed in the run's state, about a call the turn does not have).

        Example:
            >>> import agentnb as anb, tempfile, os, warnings
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> run = loop.start("Paris?").run()
            >>> path = os.path.join(tempfile.mkdtemp(), "run.jsonl")
            >>> run.transcript.save(path)
            >>> with open(path, "rb+") as fh:  # a crash in the middle of the last line
            ...     _ = fh.truncate(os.path.getsize(path) - 20)
            >>> with warnings.catch_warnings(record=True):
            ...     t = anb.Transcript.load(path, recover=True)
            >>> len(t) == len(run.events) - 1, t.dropped.startswith(f"line {len(run.events)} ")
            (True, True)
        """
        with Path(path).open("rb") as file:
            data = file.read()
        if is_html(data[:512]):
            data = embedded_lines(data, path)
        events = _quick_read(data)
        dropped: str | None = None
        if events is None:  # a line is not a valid event: read it line by line, to say which and why
            events, dropped = _careful_read(data, path, recover=recover)
        transcript = cls(events)
        transcript.dropped = dropped
        try:
            with gc_paused():
                folded(transcript)
        except TranscriptError as exc:
            raise TranscriptError(f"{path}: the events do not form a valid run: {exc}", seq=exc.seq,
                                  event_type=exc.event_type) from exc
        if dropped is not None:
            warnings.warn(f"{path}: kept {len(events)} events, dropped {dropped}", TranscriptRecovered, stacklevel=2)
        return transcript


def folded(transcript: Transcript) -> RunState:
    """The transcript's fold after all its events, folded once: kept while its list of events ends the same.

    :meth:`Transcript.load` folds to check the events; the debugger and :attr:`Transcript.messages` reuse that
    fold instead of folding a million events again. Callers must not change the state (``Transcript.fold``
    gives one of their own).
    """
    events = transcript.events
    last = events[-1] if events else None
    kept = transcript._folded
    if kept is not None and kept[0] == len(events) and kept[1] is last:
        return kept[2]
    state = transcript.fold()
    transcript._folded = (len(events), last, state)
    return state


def _quick_read(data: bytes) -> list[BaseEvent] | None:
    """Every event of a file's bytes in one pass, or None when any line is not a valid event.

    The common case -- a whole file of valid events -- decoded without the per-line bookkeeping that only an
    error needs (line numbers, byte offsets, an incomplete last line); :func:`_careful_read` reads again
    when it returns None, so a bad file gets exactly the same error as before.
    """
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    lines = [line for line in data.split(b"\n") if line.strip()]
    try:
        return events_from_json(lines)
    except (ValidationError, ValueError, RecursionError):
        return None


def _careful_read(data: bytes, path: str | Path, *, recover: bool) -> tuple[list[BaseEvent], str | None]:
    """The events of a file, line by line, naming the first line that is not an event.

    With ``recover``, an incomplete last line is left out and the second value says so.
    """
    events: list[BaseEvent] = []
    dropped: str | None = None
    fh = io.BytesIO(data)
    offset = 0
    pending = fh.readline()
    if pending.startswith(codecs.BOM_UTF8):
        pending, offset = pending[len(codecs.BOM_UTF8):], len(codecs.BOM_UTF8)
    lineno = 0
    while pending:
        raw, pending = pending, fh.readline()
        lineno += 1
        start, offset = offset, offset + len(raw)
        if not raw.strip():
            continue
        unfinished = not pending and not raw.endswith(b"\n")
        try:
            events.append(_read_line(raw, path, lineno, start))
        except TranscriptError as exc:
            if not unfinished:
                raise
            if not recover:
                raise TranscriptError(
                    f"{exc}. The file ends without a newline after it, as a crash in the middle of "
                    "writing leaves it: Transcript.load(path, recover=True) keeps the events before it"
                ) from None
            dropped = f"line {lineno} ({len(raw)} bytes from byte {start}): an incomplete last line, {exc}"
    return events, dropped


class TranscriptRecovered(UserWarning):
    """``Transcript.load(path, recover=True)`` left out an incomplete last line (see :attr:`Transcript.dropped`)."""


def _read_line(raw: bytes, path: str | Path, lineno: int, start: int) -> BaseEvent:
    """One event from one line of a transcript file; errors name the line (and the byte, for encoding errors)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(
            f"{path}:{lineno}: not UTF-8 text: byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line "
            f"(byte {start + exc.start} of the file, counting from 0) ({exc.reason})"
        ) from None
    try:
        return event_from_json(text)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"])
        seq, event_type = _named(text)
        named = f"event {seq} ({event_type or '?'}) is " if seq is not None else ""
        raise TranscriptError(f"{path}:{lineno}: {named}not a valid event ({where}: {first['msg']})", seq=seq,
                              event_type=event_type) from None


def _named(text: str) -> tuple[int | None, str | None]:
    """The ``seq`` and ``type`` a line that is not a valid event says it has, as far as it says."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    seq, event_type = data.get("seq"), data.get("type")
    return (seq if type(seq) is int else None), (event_type if isinstance(event_type, str) else None)


def _sync_dir(folder: Path) -> None:
    """Make a rename durable (POSIX); where a directory cannot be opened, the rename is all there is."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
