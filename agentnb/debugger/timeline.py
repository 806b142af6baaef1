"""A run's events indexed for the debugger: the conversation and counters at any event in O(1).

Time travel means "the run as it stood after event *k*". Folding the prefix on every click would cost
O(k); instead :class:`Timeline` folds each event once as it arrives and remembers, per event, which version of
the history was current and how long it was. The history only grows by appending, except when compression
replaces it, which starts a new version; so ``messages_at(k)`` is a slice of a stored list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..engine import RunState
from ..events import BaseEvent
from ..messages import Message, ToolCallPart


@dataclass(frozen=True, slots=True)
class Counters:
    """Budget use after an event."""

    turns: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    tokens_by_model: tuple[tuple[str, tuple[int, int]], ...] = ()


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
        self._where: list[tuple[int, int]] = []
        self._counters: list[Counters] = []
        self._text: dict[int, list[str]] = {}  # request seq -> text fragments
        self._args: dict[tuple[int, int], list[str]] = {}  # (request seq, index) -> fragments
        self._frag_pos: dict[int, tuple[Any, int]] = {}  # fragment event seq -> (key, fragments so far)
        self._calls: dict[tuple[int, str], ToolCallPart] = {}  # (turn, call id) -> the call
        self._decisions: dict[str, str] = {}  # call id -> decision (latest)
        self._request_seq = -1
        for ev in events:
            self.add(ev)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def state(self) -> RunState:
        """The folded state after the last event."""
        return self._rs

    def add(self, ev: BaseEvent) -> None:
        """Fold one more event (the debugger calls this for every event the run appends)."""
        rs = self._rs
        rs.apply(ev)
        self.events.append(ev)
        if not self._versions or rs.messages is not self._versions[-1]:
            self._versions.append(rs.messages)
        self._where.append((len(self._versions) - 1, len(rs.messages)))
        prev = self._counters[-1] if self._counters else None
        if prev is not None and prev.turns == rs.turns_completed and prev.tool_calls == rs.tool_calls and (
            prev.input_tokens == rs.input_tokens and prev.output_tokens == rs.output_tokens
        ):
            self._counters.append(prev)  # most events change no counter: share the record
        else:
            by_model = tuple((m, (v[0], v[1])) for m, v in rs.tokens_by_model.items())
            self._counters.append(Counters(rs.turns_completed, rs.tool_calls, rs.input_tokens, rs.output_tokens,
                                           by_model))
        t = ev.type
        if t == "ModelRequested" or t == "ModelRetried":
            self._request_seq = ev.seq
        elif t == "TextMerged":
            frags = self._text.setdefault(self._request_seq, [])
            frags.append(ev.fragment)  # type: ignore[attr-defined]
            self._frag_pos[ev.seq] = (self._request_seq, len(frags))
        elif t == "ArgumentsMerged":
            key = (self._request_seq, ev.index)  # type: ignore[attr-defined]
            frags = self._args.setdefault(key, [])
            frags.append(ev.fragment)  # type: ignore[attr-defined]
            self._frag_pos[ev.seq] = (key, len(frags))
        elif t == "TurnCompleted":
            for call in ev.response.message.tool_calls:  # type: ignore[attr-defined]
                self._calls[(ev.turn, call.call_id)] = call
        elif t == "ApprovalResolved":
            self._decisions[ev.call_id] = ev.decision  # type: ignore[attr-defined]

    # -- queries ---------------------------------------------------------------------------------------

    def messages_at(self, seq: int) -> list[Message]:
        """The conversation right after event ``seq``."""
        if not self._where or seq < 0:
            return []
        version, count = self._where[min(seq, len(self._where) - 1)]
        return self._versions[version][:count]

    def counters_at(self, seq: int) -> Counters:
        """Turns, tool calls and tokens used right after event ``seq``."""
        if not self._counters:
            return Counters(0, 0, 0, 0)
        return self._counters[max(0, min(seq, len(self._counters) - 1))]

    def text_buffer(self, seq: int) -> str:
        """The answer text accumulated up to the ``TextMerged`` event ``seq``."""
        key, n = self._frag_pos[seq]
        return "".join(self._text[key][:n])

    def argument_buffer(self, seq: int) -> str:
        """A call's argument text accumulated up to the ``ArgumentsMerged`` event ``seq``."""
        key, n = self._frag_pos[seq]
        return "".join(self._args[key][:n])

    def _call(self, seq: int, call_id: str) -> ToolCallPart | None:
        return self._calls.get((self.events[seq].turn, call_id))

    def call_raw(self, seq: int, call_id: str) -> str | None:
        """The raw argument text of a call of the turn that event ``seq`` belongs to."""
        call = self._call(seq, call_id)
        return call.arguments_raw if call else None

    def call_arguments(self, seq: int, call_id: str) -> dict[str, Any] | None:
        """The parsed arguments of a call of the turn that event ``seq`` belongs to."""
        call = self._call(seq, call_id)
        return call.arguments if call else None

    def approval_decision(self, call_id: str) -> str | None:
        """``approved`` or ``denied`` once a person decided, else None."""
        return self._decisions.get(call_id)

    def history_versions(self) -> tuple[list[list[Message]], list[tuple[int, int]]]:
        """The index behind :meth:`messages_at`: the histories, and per event ``(version, length)``.

        ``messages_at(k) == versions[v][:n]`` with ``(v, n) = where[k]``; the export stores each message once.
        """
        return self._versions, self._where

    def turn_starts(self) -> list[int]:
        """The seq of every ``ModelRequested`` event (where each turn begins)."""
        return [e.seq for e in self.events if e.type == "ModelRequested"]
