"""Transcripts: a run's event log, saved and loaded losslessly as JSON Lines.

A transcript is nothing but its events. The conversation, the calls and the final state are recovered by
folding them (:meth:`Transcript.fold`); :meth:`Transcript.at` folds a prefix, which is how the debugger shows
"the conversation as of event 812".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from pydantic import ValidationError

from .events import BaseEvent, event_from_json, event_to_json
from .exceptions import IllegalTransition, TranscriptError
from .messages import Message
from .states import LoopState

if TYPE_CHECKING:
    import pandas as pd

    from .engine import RunState
    from .frames import Frames
    from .plots import Plots


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

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """In a notebook, a transcript shows a read-only debugger positioned at its last event."""
        from .debugger import Debugger

        return Debugger(self, start="end")._repr_mimebundle_(**kwargs)

    # -- projections ---------------------------------------------------------------------------------

    def fold(self) -> RunState:
        """The run's state after all events."""
        from .engine import RunState

        return RunState.fold(self.events)

    def at(self, seq: int) -> RunState:
        """The run's state right after event ``seq`` (time travel)."""
        from .engine import RunState

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
        return self.fold().messages

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
        from .plots import Plots

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
        any browser (see :mod:`agentnb.debugger.export`). Returns the path written.
        """
        from .debugger.export import write_html

        return write_html(self.events, path, title=title)

    # -- files ---------------------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write one JSON event per line (UTF-8). Lossless: :meth:`load` gives the same events back."""
        with Path(path).open("w", encoding="utf-8") as fh:
            for ev in self.events:
                fh.write(event_to_json(ev))
                fh.write("\n")

    @classmethod
    def load(cls, path: str | Path) -> Transcript:
        """Read a transcript written by :meth:`save`, checking every event against the state machine.

        Raises:
            TranscriptError: naming the line, when a line is not a valid event or breaks the run's order.
        """
        events: list[BaseEvent] = []
        with Path(path).open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    events.append(event_from_json(line))
                except ValidationError as exc:
                    first = exc.errors(include_url=False)[0]
                    where = ".".join(str(x) for x in first["loc"])
                    raise TranscriptError(f"{path}:{lineno}: not a valid event ({where}: {first['msg']})") from None
        transcript = cls(events)
        try:
            transcript.fold()
        except (IllegalTransition, ValueError, KeyError) as exc:
            raise TranscriptError(f"{path}: the events do not form a valid run: {exc}") from exc
        return transcript
