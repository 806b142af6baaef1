"""A run's events indexed for the debugger: the conversation and counters at any event in O(1).

Time travel means "the run as it stood after event *k*". Folding the prefix on every click would cost
O(k); instead :class:`Timeline` folds each event once as it arrives (the engine's fold,
:class:`~agentnb._engine.RunState`: the only code that interprets events) and remembers, per event, where the
fold's state stood: which version of the history was current and how long it was. The fold's history only
grows by appending, except when a replacement (the prompt, a compression) starts a new list; so
``messages_at(k)`` is a slice of a list the fold built. Streamed fragments work the same way: the fold keeps
each attempt's fragments in new lists, and a fragment event's buffer is a prefix of one of them. The calls of a
turn are the fold's own :class:`~agentnb._engine.CallState` objects, kept per turn.

A loaded transcript was folded once already, to check it: :meth:`Timeline.after` starts from that fold and
builds the index the first time an earlier moment is asked for (as far as it is asked for), or all of it in
the thread that builds the page's tree, once the page has its rows and before the tree (the widget; until
then the page shows the selected event as recorded). So every query that reads the index first calls
``_ready(seq)``; a new query does too (``tests/test_timeline_after.py`` asks each one in a random order
against a timeline that folded the log itself).
"""

from __future__ import annotations

import itertools
import threading
import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from .._engine import CallState, RunState
from .._gc import gc_paused
from .._messages import Message, ToolCallPart
from ..events import ArgumentsMerged, BaseEvent, ModelRequested, TextMerged

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Counters:
    """Budget use after an event."""

    turns: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    tokens_by_model: tuple[tuple[tuple[str, str], tuple[int, int]], ...] = ()
    """``((provider, model), (input tokens, output tokens))`` pairs, for the cost meter."""


class Timeline:
    """Events of one run plus what the debugger needs to show any moment of it quickly.

    Example:
        >>> import agentnb as anb
        >>> run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
        >>> run = run.start("Weather in Paris?").run()
        >>> tl = Timeline(run.events)
        >>> [m.role for m in tl.messages_at(len(tl) - 1)] == [m.role for m in run.messages]
        True
    """

    def __init__(self, events: Iterable[BaseEvent] = ()) -> None:
        self.events: list[BaseEvent] = []
        self._rs = RunState()
        self._final: RunState | None = None  # a log folded before (see after): its state, while the index catches up
        self._indexed = 0  # the events indexed so far (all of them but in a timeline made by after)
        self._lock = threading.Lock()  # held while a timeline made by after indexes more of its events
        self._stop = threading.Event()  # the background index is no longer wanted (see stop_indexing)
        self._versions: list[list[Message]] = []
        self._version: array[int] = array("i")  # per event: which version of the history was current
        self._length: array[int] = array("i")  # and how long it was
        self._counters: list[Counters] = []
        self._frag_pos: dict[int, tuple[list[str], int]] = {}  # fragment event seq -> (the fold's list, length)
        self._turn_calls: dict[int, dict[str, CallState]] = {}  # turn -> the fold's calls of that turn
        self._kept: dict[str, tuple[tuple[int, int], Any]] = {}  # see kept
        self.extend(events)

    @classmethod
    def after(cls, events: list[BaseEvent], state: RunState) -> Timeline:
        """The timeline of a log folded before (a loaded transcript): ``state`` is its fold after the last event.

        Nothing is folded again now: the state after the last event is ``state``, and the index behind the
        earlier moments is built the first time one is asked for, as far as it is asked for (or all of it by
        :meth:`build_index`, which the page's tree thread calls once the page has the rows). A million events'
        debugger opens without a second fold.

        Example:
            >>> import agentnb as anb
            >>> loop = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather"))
            >>> events = loop.start("Weather in Paris?").run().events
            >>> tl = Timeline.after(events, RunState.fold(events))
            >>> tl.indexed, tl.messages_at(len(events) - 1) == RunState.fold(events).messages, tl.indexed
            (0, True, 0)
            >>> [m.role for m in tl.messages_at(1)], tl.indexed
            (['user'], 2)
        """
        tl = cls()
        tl.events = list(events)
        tl._final = state
        return tl

    def __len__(self) -> int:
        return len(self.events)

    @property
    def state(self) -> RunState:
        """The folded state after the last event."""
        return self._final if self._final is not None else self._rs

    @property
    def indexed(self) -> int:
        """How many events the index behind the earlier moments holds (all but while :meth:`after`'s catches up)."""
        return self._indexed

    def add(self, ev: BaseEvent, state: RunState | None = None) -> None:
        """Index one more event: ``state`` is the run's fold after it (a live run's own), or None to fold it here.

        A live run hands its state with each event (``Run.on_event``), so the debugger never folds its log again.
        """
        self.extend((ev,), state)

    def extend(self, events: Iterable[BaseEvent], state: RunState | None = None) -> None:
        """Index more events, as :meth:`add` does each (one loop: a transcript's million events are one call).

        ``state``, with a single event: the run's fold after it (see :meth:`add`); None: fold them here.
        """
        with self._lock:  # not beside a thread that builds a loaded log's index
            if self._indexed < len(self.events):  # a timeline made by after: its index first catches up
                self._index(len(self.events), fold=True)
            self._final = None
            if state is not None:
                self._rs = state
            self.events.extend(events)
            try:
                self._index(len(self.events), fold=state is None)
            except BaseException:
                del self.events[self._indexed:]  # an event the fold refused is not in the timeline
                raise

    def has_moment(self, seq: int) -> bool:
        """Whether the moment after event ``seq`` is answered without building the index first.

        True once the index holds every event (a call's state is "as it stands now": all of them), and for the
        last event, which the state after it answers. The page shows the event as recorded until then.
        """
        return self._indexed >= len(self.events) or self._at_end(seq)

    def kept(self, name: str, upto: int, make: Callable[[], T]) -> T:
        """``make()`` of the first ``upto`` events, made once: the events of a log never change, they only grow.

        One value per ``name`` is kept, that of the last ``upto`` asked for (the static view's tree of the first
        events is drawn twice when the debugger is displayed: its output, and the widget's saved snapshot).
        """
        key = (upto, id(self.events[upto - 1]) if 0 < upto <= len(self.events) else 0)  # and its last event
        held = self._kept.get(name)
        if held is None or held[0] != key:
            held = self._kept[name] = (key, make())
        return held[1]

    def stop_indexing(self) -> None:
        """Stop a background index at its next chunk (the page shows another timeline); queries still build it."""
        self._stop.set()

    CHUNK = 20_000
    """Events indexed between two looks at the other threads (see :meth:`build_index`)."""

    def build_index(self) -> None:
        """Build the rest of the index here, a chunk at a time, letting other threads in between two chunks.

        Stops early after :meth:`stop_indexing` (called from another thread while this one builds).
        """
        if self._indexed >= len(self.events):
            return
        self._stop.clear()
        with gc_paused():  # as the fold of a loaded log (see gc_paused): the index's objects stay alive
            while self._indexed < len(self.events) and not self._stop.is_set():
                time.sleep(0)  # let the other threads in between two chunks
                self._ready(min(len(self.events), self._indexed + self.CHUNK) - 1)

    def _ready(self, seq: int) -> None:
        """The index holds event ``seq`` (and all before it): a timeline made by :meth:`after` catches up."""
        if seq < self._indexed:
            return
        with self._lock:
            if seq >= self._indexed:
                self._index(min(seq + 1, len(self.events)), fold=True)

    def _index(self, end: int, fold: bool) -> None:
        """Index the events from :attr:`indexed` to ``end``, folding each first unless ``fold`` is False."""
        try:
            self._index_events(itertools.islice(self.events, self._indexed, end), fold)
        finally:
            self._indexed = len(self._version)

    def _index_events(self, events: Iterable[BaseEvent], fold: bool) -> None:
        rs = self._rs
        add_version, add_length, add_counters = self._version.append, self._length.append, self._counters.append
        versions, counters, frag_pos, turn_calls = self._versions, self._counters, self._frag_pos, self._turn_calls
        prev = counters[-1] if counters else None
        for ev in events:
            if fold:
                rs.apply(ev)
            messages = rs.messages
            if not versions or messages is not versions[-1]:
                versions.append(messages)
            add_version(len(versions) - 1)
            add_length(len(messages))
            if prev is None or prev.turns != rs.turns_completed or prev.tool_calls != rs.tool_calls or (
                prev.input_tokens != rs.input_tokens or prev.output_tokens != rs.output_tokens
            ):
                prev = _counters(rs)
            add_counters(prev)  # most events change no counter: they share the record
            turn_calls[ev.turn] = rs.calls
            cls = type(ev)
            if cls is TextMerged:
                frag_pos[ev.seq] = (rs.text_fragments, len(rs.text_fragments))
            elif cls is ArgumentsMerged:
                frags = rs.argument_fragments[ev.index]  # type: ignore[attr-defined]
                frag_pos[ev.seq] = (frags, len(frags))

    def _at_end(self, seq: int) -> bool:
        """``seq`` is the last event of a timeline whose index has not reached it: the final state answers."""
        return self._final is not None and seq >= len(self.events) - 1 >= self._indexed

    # -- queries ---------------------------------------------------------------------------------------

    def messages_at(self, seq: int) -> list[Message]:
        """The conversation right after event ``seq``."""
        if not self.events or seq < 0:
            return []
        if self._at_end(seq):
            return self.state.messages[:]
        seq = min(seq, len(self.events) - 1)
        self._ready(seq)
        return self._versions[self._version[seq]][:self._length[seq]]

    def last_message_at(self, seq: int) -> Message | None:
        """The last message of the conversation right after event ``seq`` (without copying the conversation)."""
        if not self.events or seq < 0:
            return None
        if self._at_end(seq):
            return self.state.messages[-1] if self.state.messages else None
        seq = min(seq, len(self.events) - 1)
        self._ready(seq)
        count = self._length[seq]
        return self._versions[self._version[seq]][count - 1] if count else None

    def counters_at(self, seq: int) -> Counters:
        """Turns, tool calls and tokens used right after event ``seq``."""
        if self._at_end(seq):
            return _counters(self.state)
        self._ready(min(seq, len(self.events) - 1))
        if not self._counters:
            return Counters(0, 0, 0, 0)
        return self._counters[max(0, min(seq, len(self._counters) - 1))]

    def text_buffer(self, seq: int) -> str:
        """The answer text accumulated up to the ``TextMerged`` event ``seq``."""
        self._ready(seq)
        frags, n = self._frag_pos[seq]
        return "".join(frags[:n])

    def argument_buffer(self, seq: int) -> str:
        """A call's argument text accumulated up to the ``ArgumentsMerged`` event ``seq``."""
        self._ready(seq)
        frags, n = self._frag_pos[seq]
        return "".join(frags[:n])

    def call_at(self, seq: int, call_id: str) -> CallState | None:
        """The fold's state of a call of the turn that event ``seq`` belongs to (as it stands now)."""
        self._ready(len(self.events) - 1)  # "now": the index of all of them
        return self._turn_calls.get(self.events[seq].turn, {}).get(call_id)

    def _call(self, seq: int, call_id: str) -> ToolCallPart | None:
        call = self.call_at(seq, call_id)
        return call.part if call is not None else None

    def call_raw(self, seq: int, call_id: str) -> str | None:
        """The raw argument text of a call of the turn that event ``seq`` belongs to."""
        call = self._call(seq, call_id)
        return call.arguments_raw if call else None

    def call_arguments(self, seq: int, call_id: str) -> dict[str, Any] | None:
        """The parsed arguments of a call of the turn that event ``seq`` belongs to (as the model sent them)."""
        call = self._call(seq, call_id)
        return call.arguments if call else None

    def approval_decision(self, call_id: str, seq: int | None = None) -> str | None:
        """``approved``, ``denied`` or ``submitted`` once a person decided, else None.

        ``seq`` names an event of the call's turn; without it, the latest turn with a call of that id.
        """
        call = self.call_at(seq, call_id) if seq is not None else None
        self._ready(len(self.events) - 1)
        if call is None:
            call = next((calls[call_id] for _, calls in sorted(self._turn_calls.items(), reverse=True)
                         if call_id in calls), None)
        return call.decision if call is not None else None

    def history_versions(self) -> tuple[list[list[Message]], list[tuple[int, int]]]:
        """The index behind :meth:`messages_at`: the histories, and per event ``(version, length)``.

        ``messages_at(k) == versions[v][:n]`` with ``(v, n) = where[k]``; the export stores each message once.
        """
        self._ready(len(self.events) - 1)
        return self._versions, list(zip(self._version, self._length, strict=True))

    def turn_starts(self) -> list[int]:
        """The seq of every ``ModelRequested`` event (where each turn begins)."""
        return [e.seq for e in self.events if isinstance(e, ModelRequested)]


def _counters(rs: RunState) -> Counters:
    by_model = tuple((m, (v[0], v[1])) for m, v in rs.tokens_by_model.items())
    return Counters(rs.turns_completed, rs.tool_calls, rs.input_tokens, rs.output_tokens, by_model)
