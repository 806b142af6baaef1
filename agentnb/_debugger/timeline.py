"""A run's events indexed for the debugger: the conversation and counters at any event in O(1).

Time travel means "the run as it stood after event *k*". Folding the prefix on every click would cost
O(k); instead :class:`Timeline` folds each event once as it arrives (the engine's fold,
:class:`~agentnb._engine.RunState`: the only code that interprets events) and remembers, per event, where the
fold's state stood: which version of the history was current and how long it was. The fold's history only
grows by appending, except when a replacement (the prompt, a compression) starts a new list; so
``messages_at(k)`` is a slice of a list the fold built. Streamed fragments work the same way: the fold keeps
each attempt's fragments in new lists, and a fragment event's buffer is a prefix of one of them. The calls of a
turn are the fold's own :class:`~agentnb._engine.CallState` objects, kept per turn.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._engine import CallState, RunState
from .._messages import Message, ToolCallPart
from ..events import ArgumentsMerged, BaseEvent, ModelRequested, TextMerged


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
        self._versions: list[list[Message]] = []
        self._version: array[int] = array("i")  # per event: which version of the history was current
        self._length: array[int] = array("i")  # and how long it was
        self._counters: list[Counters] = []
        self._frag_pos: dict[int, tuple[list[str], int]] = {}  # fragment event seq -> (the fold's list, length)
        self._turn_calls: dict[int, dict[str, CallState]] = {}  # turn -> the fold's calls of that turn
        self.extend(events)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def state(self) -> RunState:
        """The folded state after the last event."""
        return self._rs

    def add(self, ev: BaseEvent, state: RunState | None = None) -> None:
        """Index one more event: ``state`` is the run's fold after it (a live run's own), or None to fold it here.

        A live run hands its state with each event (``Run.on_event``), so the debugger never folds its log again.
        """
        self.extend((ev,), state)

    def extend(self, events: Iterable[BaseEvent], state: RunState | None = None) -> None:
        """Index more events, as :meth:`add` does each (one loop: a transcript's million events are one call).

        ``state``, with a single event: the run's fold after it (see :meth:`add`); None: fold them here.
        """
        if state is not None:
            self._rs = state
        rs = self._rs
        fold = state is None
        add_event, versions, counters = self.events.append, self._versions, self._counters
        add_version, add_length, add_counters = self._version.append, self._length.append, counters.append
        frag_pos, turn_calls = self._frag_pos, self._turn_calls
        prev = counters[-1] if counters else None
        for ev in events:
            if fold:
                rs.apply(ev)
            add_event(ev)
            messages = rs.messages
            if not versions or messages is not versions[-1]:
                versions.append(messages)
            add_version(len(versions) - 1)
            add_length(len(messages))
            if prev is None or prev.turns != rs.turns_completed or prev.tool_calls != rs.tool_calls or (
                prev.input_tokens != rs.input_tokens or prev.output_tokens != rs.output_tokens
            ):
                by_model = tuple((m, (v[0], v[1])) for m, v in rs.tokens_by_model.items())
                prev = Counters(rs.turns_completed, rs.tool_calls, rs.input_tokens, rs.output_tokens, by_model)
            add_counters(prev)  # most events change no counter: they share the record
            turn_calls[ev.turn] = rs.calls
            cls = type(ev)
            if cls is TextMerged:
                frag_pos[ev.seq] = (rs.text_fragments, len(rs.text_fragments))
            elif cls is ArgumentsMerged:
                frags = rs.argument_fragments[ev.index]  # type: ignore[attr-defined]
                frag_pos[ev.seq] = (frags, len(frags))

    # -- queries ---------------------------------------------------------------------------------------

    def messages_at(self, seq: int) -> list[Message]:
        """The conversation right after event ``seq``."""
        if not self.events or seq < 0:
            return []
        seq = min(seq, len(self.events) - 1)
        return self._versions[self._version[seq]][:self._length[seq]]

    def last_message_at(self, seq: int) -> Message | None:
        """The last message of the conversation right after event ``seq`` (without copying the conversation)."""
        if not self.events or seq < 0:
            return None
        seq = min(seq, len(self.events) - 1)
        count = self._length[seq]
        return self._versions[self._version[seq]][count - 1] if count else None

    def counters_at(self, seq: int) -> Counters:
        """Turns, tool calls and tokens used right after event ``seq``."""
        if not self._counters:
            return Counters(0, 0, 0, 0)
        return self._counters[max(0, min(seq, len(self._counters) - 1))]

    def text_buffer(self, seq: int) -> str:
        """The answer text accumulated up to the ``TextMerged`` event ``seq``."""
        frags, n = self._frag_pos[seq]
        return "".join(frags[:n])

    def argument_buffer(self, seq: int) -> str:
        """A call's argument text accumulated up to the ``ArgumentsMerged`` event ``seq``."""
        frags, n = self._frag_pos[seq]
        return "".join(frags[:n])

    def call_at(self, seq: int, call_id: str) -> CallState | None:
        """The fold's state of a call of the turn that event ``seq`` belongs to (as it stands now)."""
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
        if call is None:
            call = next((calls[call_id] for _, calls in sorted(self._turn_calls.items(), reverse=True)
                         if call_id in calls), None)
        return call.decision if call is not None else None

    def history_versions(self) -> tuple[list[list[Message]], list[tuple[int, int]]]:
        """The index behind :meth:`messages_at`: the histories, and per event ``(version, length)``.

        ``messages_at(k) == versions[v][:n]`` with ``(v, n) = where[k]``; the export stores each message once.
        """
        return self._versions, list(zip(self._version, self._length, strict=True))

    def turn_starts(self) -> list[int]:
        """The seq of every ``ModelRequested`` event (where each turn begins)."""
        return [e.seq for e in self.events if isinstance(e, ModelRequested)]
