"""Memos the fold keeps beside a run's state: derived data, read incrementally, never part of the state."""

from __future__ import annotations

from typing import Any

from .._messages import Message


class SeenIds:
    """The call ids of a conversation, read incrementally: a memo over :attr:`RunState.messages`, not state.

    Reading the ids of the whole conversation on every turn would make a long run quadratic, so the messages
    already read are counted and only new ones are read. When the conversation is rebuilt (a compression),
    it is read again from the start. The answer is the same as reading all.
    """

    __slots__ = ("_known", "_messages", "_seen")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._known = 0
        self._seen: set[str] = set()

    def seen(self, msgs: list[Message]) -> set[str]:
        """The ids of every call in ``msgs`` (the set is the memo's own: a caller may add to it)."""
        if msgs is not self._messages or self._known > len(msgs):  # compressed or rebuilt: count again
            self._messages, self._known, self._seen = msgs, 0, set()
        self._seen.update(c.call_id for m in msgs[self._known:] if m.role == "assistant" for c in m.tool_calls)
        self._known = len(msgs)
        return self._seen

    def __deepcopy__(self, memo: dict[int, Any]) -> SeenIds:
        return SeenIds()  # a copy of a state starts its memo afresh


__all__ = ["SeenIds"]
